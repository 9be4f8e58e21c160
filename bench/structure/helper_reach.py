"""How far the agent workflow's helpers reach outside their own state.

Walks the syntax trees of workflows/agent_*.py (the helpers of
FleetAgentWorkflow; the workflow that holds them, agent.py, is counted
apart) and counts:

- reaches into the execution: attribute accesses whose base is the
  execution object, `ex.X`, `self._ex.X` or `self.ex.X`, in the helpers and
  in module functions (`AgentExecution` itself is the execution: its own
  methods are not counted, but the helpers it holds are);
- reaches into another helper: attribute accesses through an attribute of a
  helper that holds another helper (`self._approvals.X`);
- held references: attributes of a helper (or of the execution) that hold
  another helper or the whole execution (a helper's typed slice of the
  durable state, a `Protocol` over `AgentState`'s fields, is its own
  state: not counted);
- import cycles among the modules of workflows/ (strongly connected
  components of their imports, `TYPE_CHECKING` ones included).

Run from the repository root:

    .venv/bin/python -m bench.structure.helper_reach [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["WORKFLOWS", "WORKFLOW_FILES", "import_cycles", "measure"]

_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = _ROOT / "workflows"
_EXECUTION = "AgentExecution"
_EXECUTION_NAMES = frozenset({"ex"})
_EXECUTION_ATTRS = frozenset({"_ex", "ex"})
# The workflow itself: it composes the helpers and applies what they return.
WORKFLOW_FILES = ("agent.py",)


@dataclass
class FileCount:
    """One module's figures."""

    path: str
    execution_reaches: int = 0
    helper_reaches: int = 0
    held_references: list[str] = field(default_factory=list)

    @property
    def reaches(self) -> int:
        return self.execution_reaches + self.helper_reaches


def _helper_classes(files: list[Path]) -> set[str]:
    """The classes of the helper modules, and the execution. A `Protocol`
    (the typed slice of the durable state a helper is handed) and a
    dataclass (what a helper returns) are not helpers."""
    names = {_EXECUTION}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            decorators = {
                d.id if isinstance(d, ast.Name) else getattr(d, "func", d)
                for d in node.decorator_list
            }
            dataclass_ = "dataclass" in decorators or any(
                isinstance(d, ast.Name) and d.id == "dataclass" for d in decorators
            )
            if "Protocol" in bases or dataclass_:
                continue
            names.add(node.name)
    return names


def _annotation_names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _annotation_names(ast.parse(node.value, mode="eval").body)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _self_attr(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _held(cls: ast.ClassDef, helpers: set[str]) -> dict[str, str]:
    """Attributes of `cls` that hold a helper or the execution: name → class."""
    held: dict[str, str] = {}
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = {
            a.arg: _annotation_names(a.annotation) & helpers
            for a in [*fn.args.args, *fn.args.kwonlyargs]
        }
        for node in ast.walk(fn):
            if isinstance(node, ast.AnnAssign) and (attr := _self_attr(node.target)):
                kinds = _annotation_names(node.annotation) & (helpers - {cls.name})
                if kinds:
                    held[attr] = sorted(kinds)[0]
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name | ast.Call):
                value = node.value
                kinds = set()
                if isinstance(value, ast.Name):
                    kinds = params.get(value.id, set())
                elif isinstance(value.func, ast.Name) and value.func.id in helpers:
                    kinds = {value.func.id}
                for target in node.targets:
                    if (attr := _self_attr(target)) and kinds - {cls.name}:
                        held[attr] = sorted(kinds - {cls.name})[0]
    return held


def _count(path: Path, helpers: set[str]) -> FileCount:
    tree = ast.parse(path.read_text())
    count = FileCount(path=str(path.relative_to(_ROOT)))
    counted: set[int] = set()

    def reach_execution(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Attribute) or id(sub) in counted:
                continue
            base = sub.value
            if (isinstance(base, ast.Name) and base.id in _EXECUTION_NAMES) or (
                _self_attr(base) in _EXECUTION_ATTRS
            ):
                counted.add(id(sub))
                count.execution_reaches += 1

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            held = _held(node, helpers)
            count.held_references += [f"{node.name}.{a} → {k}" for a, k in sorted(held.items())]
            if node.name == _EXECUTION:
                continue
            reach_execution(node)
            others = {a for a, k in held.items() if k != _EXECUTION}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and _self_attr(sub.value) in others:
                    count.helper_reaches += 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            reach_execution(node)
    return count


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "workflows":
                found |= {f"workflows.{a.name}" for a in node.names}
            elif node.module.startswith("workflows."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("workflows.")}
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components (of two modules or more) of workflows/ imports."""
    graph = {
        f"workflows.{p.stem}": _imports(p) for p in WORKFLOWS.glob("*.py") if p.stem != "__init__"
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, set()) & graph.keys():
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def measure() -> dict[str, object]:
    files = sorted(p for p in WORKFLOWS.glob("agent_*.py") if p.name not in WORKFLOW_FILES)
    helpers = _helper_classes(files)
    counts = [_count(p, helpers) for p in files]
    composers = [
        _count(path, helpers)
        for path in (WORKFLOWS / name for name in WORKFLOW_FILES)
        if path.exists()
    ]
    return {
        "helper_reaches": sum(c.reaches for c in counts),
        "held_references": sum(len(c.held_references) for c in counts),
        "files": [asdict(c) | {"reaches": c.reaches} for c in counts],
        "workflow_execution_reaches": sum(c.execution_reaches for c in composers),
        "import_cycles": import_cycles(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'module':34} {'ex.':>5} {'helper':>6}  held")
    for c in result["files"]:  # type: ignore[attr-defined]
        held = ", ".join(c["held_references"]) or "-"
        print(f"{c['path']:34} {c['execution_reaches']:>5} {c['helper_reaches']:>6}  {held}")
    print(
        f"reaches into the execution or another helper: {result['helper_reaches']}; "
        f"held references: {result['held_references']}; "
        f"the workflow's own (agent.py): {result['workflow_execution_reaches']}"
    )
    print(f"import cycles among workflows/: {result['import_cycles'] or 'none'}")


if __name__ == "__main__":
    main()
