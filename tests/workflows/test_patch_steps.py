"""The three steps of retiring a patch (docs/decisions/patches.md), on a toy
workflow with the SDK we run: what each step's code replays.

The policy's conditions come from these facts, not from the SDK's prose:

- `patched(ID)` replays histories from before the patch (old branch) and
  after it (new branch);
- `deprecate_patch(ID)` with the old branch removed replays histories recorded
  with `patched` or with `deprecate_patch`, but not those from before the
  patch, which took the old branch;
- with the call removed, histories recorded with `deprecate_patch` replay (its
  marker is deprecated, so skipped), but those recorded with `patched` do not:
  "Non-deprecated patch marker encountered".
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

PATCH = "toy-patch"
TIMEOUT = timedelta(seconds=10)


@activity.defn
async def old_step() -> str:
    return "old"


@activity.defn
async def new_step() -> str:
    return "new"


# Defined in a test module: no sandbox, which would re-import pytest.
@workflow.defn(name="Toy", sandboxed=False)
class BeforeThePatch:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(old_step, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="Toy", sandboxed=False)
class Patched:
    """Step 1."""

    @workflow.run
    async def run(self) -> str:
        if workflow.patched(PATCH):
            return await workflow.execute_activity(new_step, start_to_close_timeout=TIMEOUT)
        return await workflow.execute_activity(old_step, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="Toy", sandboxed=False)
class Deprecated:
    """Step 2: the old branch removed, the marker kept."""

    @workflow.run
    async def run(self) -> str:
        workflow.deprecate_patch(PATCH)
        return await workflow.execute_activity(new_step, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="Toy", sandboxed=False)
class Removed:
    """Step 3: no call left."""

    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(new_step, start_to_close_timeout=TIMEOUT)


CODES: dict[str, type] = {
    "before": BeforeThePatch,
    "patched": Patched,
    "deprecated": Deprecated,
    "removed": Removed,
}

#: (code, the code the history was recorded with) → replays.
EXPECTED = {
    ("patched", "before"): True,
    ("patched", "patched"): True,
    ("patched", "deprecated"): True,
    ("deprecated", "before"): False,
    ("deprecated", "patched"): True,
    ("deprecated", "deprecated"): True,
    ("removed", "before"): False,
    ("removed", "patched"): False,
    ("removed", "deprecated"): True,
}


@pytest.fixture
async def recorded(ts_env: WorkflowEnvironment) -> dict[str, WorkflowHistory]:
    """One history per step, each recorded by that step's code."""
    histories: dict[str, WorkflowHistory] = {}
    for name in ("before", "patched", "deprecated"):
        queue = f"toy-{uuid.uuid4().hex[:8]}"
        async with Worker(
            ts_env.client,
            task_queue=queue,
            workflows=[CODES[name]],
            activities=[old_step, new_step],
        ):
            handle = await ts_env.client.start_workflow("Toy", id=queue, task_queue=queue)
            assert await handle.result() == ("old" if name == "before" else "new")
            histories[name] = await handle.fetch_history()
    return histories


async def _replays(code: type, history: WorkflowHistory) -> bool:
    replayer = Replayer(workflows=[code], workflow_runner=UnsandboxedWorkflowRunner())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure is None


async def test_what_each_step_replays(recorded: dict[str, WorkflowHistory]) -> None:
    seen = {
        (code, history): await _replays(CODES[code], recorded[history])
        for code, history in EXPECTED
    }
    assert seen == EXPECTED
