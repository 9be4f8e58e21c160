"""The layers point one way, and the workflows' activity declarations match
what the worker registers.

- each workflow module, imported alone in a fresh interpreter, loads no HTTP
  client, vendor SDK or database driver (they would run inside the workflow
  sandbox), nor activities/, the worker or the CLI;
- fleet_agent/ never imports temporalio, nor the simulator (simulator/),
  which stands for vast.ai and uses only fleet_agent/;
- the CLI loads no worker or activity code until a command needs a worker;
- the worker side (worker.py, activities/) never imports the CLI (starter/),
  and what both need (runtime/) imports neither;
- the rules tools enforce (fleet_agent/fleet/) and the domain below them
  never import the offline policy (fleet_agent/autopilot/), which builds on
  them; the prompt's side (fleet_agent/llm/) imports neither the autopilot
  nor the settings (fleet_agent/config/): the numbers both deciders follow
  are fleet_agent/policy/'s, which imports nothing of ours, and the worker
  picks the provider (runtime/llm_provider.py);
- no package imports another that imports it back, directly or around a
  loop: fleet_agent's packages and modules, and the top-level ones
  (docs/architecture/layout.md, "Layers");
- bench/ never imports tests/: what both use is in testkit/;
- every declaration in workflows/stubs.py names an activity the worker
  registers, with the same parameter and return types.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec
from fleet_agent.llm.tools import FLEET_TOOLS
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from testkit.sim_helpers import SIM_RAM_GIB
from worker import worker_activities
from workflows import stubs

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(statement: str) -> set[str]:
    """Top-level modules a fresh interpreter has loaded after `statement`."""
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)}


#: What workflow code must never load: I/O libraries (they would run inside the
#: sandbox), the activities and the processes that host them.
SANDBOX_FORBIDDEN = frozenset(
    {"httpx", "httpx2", "anthropic", "sqlalchemy", "sqlmodel", "psycopg"}
    | {"activities", "worker", "starter"}
)


def _workflow_modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


#: What every workflow module imports, loaded once before the forks: checked
#: on its own to load nothing forbidden, so a module that does still shows.
_FORK_BASE = "import pydantic, temporalio.workflow, temporalio.client, fleet_agent.models"

# One interpreter imports the base, then forks a child per module: each child
# imports its module alone and prints what it has loaded. (An interpreter per
# module paid the base's 0.45 s of CPU 27 times.)
_FORKS = f"""
import json, os, sys
{_FORK_BASE}
print(json.dumps(["<base>", sorted(sys.modules)]), flush=True)
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        __import__(name)
        print(json.dumps([name, sorted(sys.modules)]), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status:
        sys.exit(f"importing {{name}} failed")
"""


def _loaded_in_forks(modules: list[str]) -> dict[str, set[str]]:
    """Top-level modules loaded after importing each of `modules` alone (in a
    fork of an interpreter that has imported `_FORK_BASE`), and under
    "<base>" what the base loaded."""
    out = subprocess.run(
        [sys.executable, "-c", _FORKS, *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return {name: {m.split(".")[0] for m in loaded} for name, loaded in rows}


def test_each_workflow_module_loads_no_io_library() -> None:
    """Each module alone, in its own interpreter: workflows/__init__ imports
    lazily, and a module that loads an I/O library through another one's
    imports would pass a check of the package or of all modules at once."""
    modules = _workflow_modules()
    assert len(modules) > 10, modules
    loaded = _loaded_in_forks(modules)
    assert set(loaded) == {"<base>", *modules}, "every module imported"
    offenders = {m: sorted(found & SANDBOX_FORBIDDEN) for m, found in loaded.items()}
    assert {m: found for m, found in offenders.items() if found} == {}
    assert "workflows" in loaded["workflows.agent"] - loaded["<base>"], (
        "the probe must see the module's imports"
    )


def test_the_cli_loads_no_worker_until_a_command_needs_one() -> None:
    loaded = _loaded_after("import starter.cli")
    assert not loaded & {"worker", "activities"}


def test_the_console_loads_no_worker() -> None:
    loaded = _loaded_after("import starter.console")
    assert not loaded & {"worker", "activities"}
    assert "starlette" in loaded, "the probe must see the console's own imports"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (
            "fleet_agent",
            {"temporalio", "activities", "workflows", "worker", "starter", "simulator", "runtime"},
        ),
        # The simulator stands for vast.ai: it may use the domain's models and
        # rules, and nothing of the agent's machinery.
        ("simulator", {"temporalio", "activities", "workflows", "worker", "starter", "runtime"}),
        ("workflows", {"activities", "worker", "starter"}),
        # The web console is CLI layer: it talks to agents through AgentClient only.
        ("starter/console", {"activities", "worker"}),
        # The CLI runs a worker (`up`, `worker`), so the worker never needs the CLI.
        ("worker.py", {"starter"}),
        ("activities", {"starter", "worker"}),
        ("runtime", {"activities", "workflows", "worker", "starter"}),
        # What tests and benchmarks share lives in testkit/: bench never
        # imports tests/, and testkit/ imports neither.
        ("bench", {"tests"}),
        ("testkit", {"tests", "bench"}),
    ],
)
def test_no_module_imports_against_the_layers(package: str, forbidden: set[str]) -> None:
    where = ROOT / package
    paths = [where] if where.is_file() else list(where.rglob("*.py"))
    assert paths, f"nothing to check in {package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & forbidden)
        for path in paths
        if _imports(path) & forbidden
    }
    assert offenders == {}


def _import_sites(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports, absolute, with its line: function-local and
    TYPE_CHECKING imports too (ast.walk), relative ones resolved, and each
    name of `from package import name` as the module it may be."""
    # A module's package, and an __init__'s: what `from .` names.
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _modules_imported(path: Path) -> set[str]:
    return {module for module, _ in _import_sites(path)}


def _within(module: str, prefixes: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        *(
            (package, {"fleet_agent.autopilot"})
            for package in ["fleet", "models", "store", "vast", "config", "loop"]
        ),
        # The prompt's rules are the domain's (policy/), not the stand-in's, and
        # the provider is picked above both (runtime/llm_provider.py).
        ("llm", {"fleet_agent.autopilot", "fleet_agent.config"}),
        # Plain numbers and environment reading sit below every other package.
        ("policy", {"fleet_agent"}),
        ("env", {"fleet_agent"}),
    ],
)
def test_no_package_imports_a_layer_above_it(package: str, forbidden: set[str]) -> None:
    paths = list((ROOT / "fleet_agent" / package).rglob("*.py"))
    assert paths, f"nothing to check in fleet_agent/{package}"
    own = f"fleet_agent.{package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in _modules_imported(path) if _within(m, forbidden) and not _within(m, {own})
        )
        for path in paths
    }
    assert {k: v for k, v in offenders.items() if v} == {}


#: The top-level packages and modules whose imports must form no cycle;
#: fleet_agent/ counts each of its packages and modules apart.
LAYERED = ("fleet_agent", "workflows", "activities", "starter", "runtime", "router", "simulator")


def _node(module: str) -> str | None:
    """The package (or top-level module) a module belongs to, for the graph."""
    parts = module.split(".")
    if parts[0] == "worker":
        return "worker"
    if parts[0] not in LAYERED:
        return None
    if parts[0] == "fleet_agent" and len(parts) > 1:
        name = f"fleet_agent.{parts[1]}"
        # `from fleet_agent import x`'s x may be a name of __init__, not a module.
        is_module = (ROOT / "fleet_agent" / parts[1]).is_dir() or (
            ROOT / "fleet_agent" / f"{parts[1]}.py"
        ).is_file()
        return name if is_module else "fleet_agent"
    return parts[0]


def import_graph() -> dict[str, dict[str, str]]:
    """Package -> the packages it imports, each with where it does first."""
    graph: dict[str, dict[str, str]] = {}
    paths = [ROOT / "worker.py", *itertools.chain(*((ROOT / t).rglob("*.py") for t in LAYERED))]
    for path in sorted(paths):
        parts = path.relative_to(ROOT).with_suffix("").parts
        src = _node(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        assert src is not None
        edges = graph.setdefault(src, {})
        for module, line in _import_sites(path):
            dst = _node(module)
            if dst is not None and dst != src:
                edges.setdefault(dst, f"{path.relative_to(ROOT)}:{line}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The groups of packages that reach each other (strongly connected
    components of more than one), each as its edges with where they are."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {node: reach(node) for node in graph}
    groups = {
        frozenset({node} | {o for o in reached[node] if node in reached.get(o, set())})
        for node in graph
    }
    return [
        sorted(f"{a} -> {b} ({graph[a][b]})" for a in group for b in graph[a] if b in group)
        for group in sorted(groups, key=sorted)
        if len(group) > 1
    ]


def test_the_packages_import_each_other_in_no_cycle() -> None:
    graph = import_graph()
    assert "fleet_agent.llm" in graph and "fleet_agent.models" in graph["fleet_agent.llm"]
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:1"}, "d": {"a": "d.py:1"}}
    assert cycles(graph) == [["a -> b (a.py:1)", "b -> c (b.py:1)", "c -> a (c.py:1)"]]


def _definition_name(fn: Any) -> str:
    # The SDK keeps an activity's definition on the function; its name is what
    # workflows schedule.
    return str(fn.__temporal_activity_definition.name)


def _types(fn: Any) -> tuple[list[Any], Any]:
    hints = typing.get_type_hints(fn)
    params = [hints.get(name) for name in inspect.signature(fn).parameters]
    return params, hints.get("return")


async def test_every_declared_activity_is_registered_with_the_same_types(store: Store) -> None:
    async with VastClient("key", "http://127.0.0.1:9") as vast:
        fleet = FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
        )
        implemented = {
            _definition_name(fn): fn for fn in worker_activities(store, AutopilotProvider(), fleet)
        }
    declared = {
        _definition_name(fn): fn
        for fn in vars(stubs).values()
        if hasattr(fn, "__temporal_activity_definition")
    }
    assert set(declared) == set(implemented)
    for name, stub in declared.items():
        assert _types(stub) == _types(implemented[name]), name
    assert set(stubs.FLEET_TOOL_ACTIVITIES) == FLEET_TOOLS
