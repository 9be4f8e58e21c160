"""The recorded workflow histories and the releases they stand for, for the
replay tests (tests/workflows/test_replay.py, which also records them) and
the tests that read them: where they are kept (one folder per release under
tests/histories/), which releases are recorded and supported, the current
release, a folder's histories loaded, and an agent's continue-as-new chain
fetched from the server."""

from __future__ import annotations

import tomllib
from pathlib import Path

from temporalio.client import Client, WorkflowHistory

ROOT = Path(__file__).resolve().parents[2]
#: One folder per release, named by its version: the histories recorded when it was cut.
HISTORIES = ROOT / "tests" / "histories"
#: The release recorded before any `workflow.patched`: the tests of old branches
#: read it, and go with it when it leaves support (docs/decisions/patches.md).
BEFORE_PATCHES = HISTORIES / "0.1.0"
#: Releases replayed: the current and the one before it.
SUPPORTED_COUNT = 2


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def current_release() -> str:
    """The version in pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert isinstance(version, str)
    return version


def recorded_releases() -> list[str]:
    """The releases with a folder of histories, oldest first."""
    return sorted((p.name for p in HISTORIES.iterdir() if p.is_dir()), key=version_key)


def supported_releases() -> list[str]:
    """The releases whose histories the code must replay, oldest first: the
    current release and the one recorded before it."""
    return recorded_releases()[-SUPPORTED_COUNT:]


async def agent_chain(client: Client, agent_id: str) -> list[WorkflowHistory]:
    """Every execution of the agent, oldest first: walk back from the newest
    through the run ID each continue-as-new execution was continued from."""
    chain: list[WorkflowHistory] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(agent_id, run_id=run_id).fetch_history()
        chain.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return chain[::-1]


def load_recorded(directory: Path) -> list[WorkflowHistory]:
    histories = []
    for path in sorted(directory.glob("*.json")):
        workflow_id = path.stem.split(".")[0].replace("__", "/")
        histories.append(WorkflowHistory.from_json(workflow_id, path.read_text()))
    return histories
