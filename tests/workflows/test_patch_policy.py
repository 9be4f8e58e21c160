"""The patch policy (docs/decisions/patches.md) holds for the code.

- Every `workflow.patched(ID)` and `workflow.deprecate_patch(ID)` in
  workflows/ has a row in the policy's table, so a new patch gets its
  retirement releases. The IDs are found by ast: a string, or a name bound to
  one in the module or imported from another (aliases followed).
- Each row is at its step in the code (`patched`, `deprecated`, `removed`),
  never before its release, and its releases follow the rule.
- Its *recorded in* says which supported releases' histories carry its marker:
  the patches whose retirement the replay tests prove.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from tests.helpers.replay import (
    HISTORIES,
    ROOT,
    current_release,
    load_recorded,
    supported_releases,
    version_key,
)

POLICY = ROOT / "docs" / "decisions" / "patches.md"
WORKFLOWS = ROOT / "workflows"
#: The SDK's calls, by the step they stand for.
CALLS = {"patched": "patched", "deprecate_patch": "deprecated"}
STEPS = ("patched", "deprecated", "removed")
#: The marker the SDK writes for both calls (sdk-core's patch markers).
PATCH_MARKER = "core_patch"


@dataclass(frozen=True)
class Use:
    """One call in the code: its patch ID, the step it stands for, and the
    constant that holds the ID (name, file it is bound in)."""

    patch_id: str
    step: str
    constant: str | None
    defined_in: str
    where: str


@dataclass(frozen=True)
class Row:
    patch_id: str
    constant: str
    defined_in: str
    since: str
    deprecate_in: str
    removed_in: str
    step: str
    recorded_in: frozenset[str]


# ---------------------------------------------------------------- the code, by ast


def _module_file(dotted: str, root: Path) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _dotted(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Modules:
    """The string constants and the imports of each module, read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._seen: dict[Path, tuple[dict[str, str], dict[str, tuple[str, str]]]] = {}

    def bindings(self, path: Path) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
        if path not in self._seen:
            tree = ast.parse(path.read_text(), filename=str(path))
            consts: dict[str, str] = {}
            imports: dict[str, tuple[str, str]] = {}
            dotted = _dotted(path, self.root)
            # The package a relative import starts from.
            package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
            for node in ast.walk(tree):
                target: ast.expr | None = None
                value: ast.expr | None = None
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                elif isinstance(node, ast.AnnAssign):
                    target, value = node.target, node.value
                if (
                    isinstance(target, ast.Name)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    consts[target.id] = value.value
                if isinstance(node, ast.ImportFrom):
                    module = node.module or ""
                    if node.level:
                        base = package.split(".") if package else []
                        base = base[: len(base) - (node.level - 1)]
                        module = ".".join([*base, module] if module else base)
                    for alias in node.names:
                        imports[alias.asname or alias.name] = (module, alias.name)
            self._seen[path] = (consts, imports)
        return self._seen[path]

    def resolve(self, path: Path, name: str, depth: int = 0) -> tuple[str, str, Path] | None:
        """The string `name` is bound to in `path`: (value, constant, file)."""
        consts, imports = self.bindings(path)
        if name in consts:
            return consts[name], name, path
        if name in imports and depth < 10:
            module, original = imports[name]
            source = _module_file(module, self.root)
            if source is not None:
                return self.resolve(source, original, depth + 1)
        return None


def patch_uses(directory: Path = WORKFLOWS, root: Path = ROOT) -> list[Use]:
    """Every `patched`/`deprecate_patch` call under `directory`."""
    modules = _Modules(root)
    uses: list[Use] = []
    for path in sorted(directory.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        _consts, imports = modules.bindings(path)
        # `from temporalio.workflow import patched` calls it by its bare name.
        bare = {
            local: original
            for local, (module, original) in imports.items()
            if module == "temporalio.workflow" and original in CALLS
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in CALLS
                and isinstance(func.value, ast.Name)
                and func.value.id == "workflow"
            ):
                call = func.attr
            elif isinstance(func, ast.Name) and func.id in bare:
                call = bare[func.id]
            else:
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            assert node.args, f"{where}: {call}() without an ID"
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                uses.append(Use(arg.value, CALLS[call], None, str(path.relative_to(root)), where))
                continue
            assert isinstance(arg, ast.Name), f"{where}: the ID is not a string or a name"
            found = modules.resolve(path, arg.id)
            assert found is not None, f"{where}: {arg.id} is bound to no string constant"
            value, constant, source = found
            uses.append(Use(value, CALLS[call], constant, str(source.relative_to(root)), where))
    return uses


# ---------------------------------------------------------------- the policy's table


def policy_rows(text: str | None = None) -> dict[str, Row]:
    text = POLICY.read_text() if text is None else text
    table = text.split("\n## The patches\n", 1)[1]
    rows: dict[str, Row] = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        patch_id, constant, since, deprecate_in, removed_in, step, recorded = cells
        name, _, defined_in = constant.partition(", ")
        assert patch_id.strip("`") not in rows, f"{patch_id} twice"
        rows[patch_id.strip("`")] = Row(
            patch_id=patch_id.strip("`"),
            constant=name.strip("`"),
            defined_in=defined_in,
            since=since,
            deprecate_in=deprecate_in,
            removed_in=removed_in,
            step=step,
            recorded_in=frozenset(r.strip() for r in recorded.split(",") if r.strip() != "—"),
        )
    return rows


def next_release(version: str) -> str:
    """Releases bump the minor version while at 0.x (the policy)."""
    major, minor, _patch = version_key(version)
    return f"{major}.{minor + 1}.0"


# ---------------------------------------------------------------- the histories


def patch_markers(history: WorkflowHistory) -> dict[str, bool]:
    """The patch markers in a history: ID → deprecated."""
    markers: dict[str, bool] = {}
    for event in history.events:
        if not event.HasField("marker_recorded_event_attributes"):
            continue
        marker = event.marker_recorded_event_attributes
        if marker.marker_name != PATCH_MARKER:
            continue
        data = json.loads(marker.details["patch-data"].payloads[0].data)
        markers[data["id"]] = bool(data["deprecated"])
    return markers


def recorded_markers(release: str) -> dict[str, bool]:
    """Every patch marker in a release's histories: ID → deprecated."""
    found: dict[str, bool] = {}
    for history in load_recorded(HISTORIES / release):
        found.update(patch_markers(history))
    return found


# ---------------------------------------------------------------- tests


def _unlisted(uses: list[Use], rows: dict[str, Row]) -> list[str]:
    return sorted({f"{u.patch_id} ({u.where})" for u in uses if u.patch_id not in rows})


def test_every_patch_in_the_workflows_has_a_row() -> None:
    uses = patch_uses()
    assert len({u.patch_id for u in uses}) >= 20, "the scan finds the patches"
    assert _unlisted(uses, policy_rows()) == [], "add a row to docs/decisions/patches.md"


def test_the_scan_follows_aliases_and_finds_an_unlisted_patch(tmp_path: Path) -> None:
    """The control: a new patch whose ID is imported under another name, and
    one called by its bare name, are both found and both reported."""
    package = tmp_path / "wf"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ids.py").write_text('NEW = "a-new-patch"\n')
    (package / "flow.py").write_text(
        "from temporalio import workflow\n"
        "from temporalio.workflow import deprecate_patch as dp\n"
        "with workflow.unsafe.imports_passed_through():\n"
        "    from wf.ids import NEW as NEW_PATCH\n"
        "from .ids import NEW as ALSO\n"
        "OLD = 'session-summary'\n"
        "def f() -> None:\n"
        "    if workflow.patched(NEW_PATCH):\n"
        "        pass\n"
        "    dp(ALSO)\n"
        "    workflow.patched(OLD)\n"
    )
    uses = patch_uses(package, tmp_path)
    assert sorted((u.patch_id, u.step, u.constant, u.defined_in) for u in uses) == [
        ("a-new-patch", "deprecated", "NEW", "wf/ids.py"),
        ("a-new-patch", "patched", "NEW", "wf/ids.py"),
        ("session-summary", "patched", "OLD", "wf/flow.py"),
    ]
    assert _unlisted(uses, policy_rows()) == [
        "a-new-patch (wf/flow.py:10)",
        "a-new-patch (wf/flow.py:8)",
    ]


def test_each_row_names_its_constant_and_is_at_its_step() -> None:
    uses = patch_uses()
    for patch_id, row in policy_rows().items():
        mine = [u for u in uses if u.patch_id == patch_id]
        assert row.step in STEPS, row
        if row.step == "removed":
            assert mine == [], f"{patch_id} is removed, or an ID reused: {mine}"
            continue
        assert mine, f"{patch_id}: no call in workflows/ (step {row.step}?)"
        assert {u.step for u in mine} == {row.step}, (patch_id, row.step, mine)
        assert {(u.constant, u.defined_in) for u in mine} == {(row.constant, row.defined_in)}, (
            patch_id,
            mine,
        )


def test_no_step_comes_before_its_release() -> None:
    current = version_key(current_release())
    for patch_id, row in policy_rows().items():
        # The rule: each step in the release after the one before.
        assert row.deprecate_in == next_release(row.since), row
        assert row.removed_in == next_release(row.deprecate_in), row
        # A patch added since the last cut is first recorded by the next release.
        assert version_key(row.since) <= version_key(next_release(current_release())), row
        if row.step in ("deprecated", "removed"):
            assert current >= version_key(row.deprecate_in), f"{patch_id} deprecated too early"
        if row.step == "removed":
            assert current >= version_key(row.removed_in), f"{patch_id} removed too early"


@pytest.mark.parametrize("release", supported_releases())
def test_recorded_in_names_the_histories_that_carry_the_marker(release: str) -> None:
    markers = recorded_markers(release)
    rows = policy_rows()
    assert set(markers) <= set(rows), f"markers of no row in {release}: {set(markers) - set(rows)}"
    listed = {patch_id for patch_id, row in rows.items() if release in row.recorded_in}
    assert listed == set(markers), (
        f"{release}: carried but not listed {sorted(set(markers) - listed)}, "
        f"listed but not carried {sorted(listed - set(markers))}"
    )


def test_the_release_before_the_patches_carries_none() -> None:
    """0.1.0 predates every patch: while it is supported, none may be retired."""
    if "0.1.0" not in supported_releases():
        pytest.skip("0.1.0 has left support")
    assert recorded_markers("0.1.0") == {}
    assert all(version_key(r.since) > version_key("0.1.0") for r in policy_rows().values())


def test_the_patches_due_are_at_their_step() -> None:
    """Each cut applies the table: no row lags its release. At 0.2.0 none is
    due, 0.1.0 being supported; the table names the release of each step."""
    current = version_key(current_release())
    lagging = []
    for patch_id, row in policy_rows().items():
        due = "patched"
        if current >= version_key(row.deprecate_in):
            due = "deprecated"
        if current >= version_key(row.removed_in):
            due = "removed"
        if STEPS.index(row.step) < STEPS.index(due):
            lagging.append(f"{patch_id}: {row.step}, due {due}")
    assert lagging == []
