"""The layers point one way, and the workflows' activity declarations match
what the worker registers.

- workflows/ loads no HTTP client, vendor SDK or database driver (they would
  run inside the workflow sandbox);
- fleet_agent/ never imports temporalio, nor the simulator (simulator/),
  which stands for vast.ai and uses only fleet_agent/;
- the CLI loads no worker or activity code until a command needs a worker;
- the worker side (worker.py, activities/) never imports the CLI (starter/),
  and what both need (runtime/) imports neither: the layers have no cycle;
- the rules tools enforce (fleet_agent/fleet/) and the domain below them
  never import the offline policy (fleet_agent/autopilot/), which builds on
  them;
- bench/ never imports tests/: what both use is in testkit/;
- every declaration in workflows/stubs.py names an activity the worker
  registers, with the same parameter and return types.
"""

from __future__ import annotations

import ast
import inspect
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


def test_workflows_load_no_io_libraries() -> None:
    loaded = _loaded_after("import workflows")
    assert not loaded & {"httpx", "httpx2", "anthropic", "sqlalchemy", "sqlmodel", "psycopg"}
    assert "activities" not in loaded


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


def _modules_imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", ["fleet", "models", "store", "vast", "config", "loop"])
def test_the_rules_never_import_the_autopilot(package: str) -> None:
    paths = list((ROOT / "fleet_agent" / package).rglob("*.py"))
    assert paths, f"nothing to check in fleet_agent/{package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in _modules_imported(path) if m.startswith("fleet_agent.autopilot")
        )
        for path in paths
    }
    assert {k: v for k, v in offenders.items() if v} == {}


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
