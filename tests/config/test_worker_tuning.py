"""Worker tuning from the environment (fleet_agent/config/tuning.py) and its use by
build_worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import MagicMock

import pytest
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.tuning import WorkerTuning


def test_tuning_from_env_names_the_bad_variable() -> None:
    assert WorkerTuning.from_env({}) == WorkerTuning()
    tuned = WorkerTuning.from_env({"FLEET_WORKER_ACTIVITIES": "80", "FLEET_VAST_LIST_TTL_S": "0"})
    assert (tuned.max_concurrent_activities, tuned.vast_list_ttl_s) == (80, 0.0)
    with pytest.raises(ValueError, match="FLEET_WORKER_WORKFLOW_TASKS"):
        WorkerTuning.from_env({"FLEET_WORKER_WORKFLOW_TASKS": "0"})
    with pytest.raises(ValueError, match="FLEET_VAST_LIST_TTL_S"):
        WorkerTuning.from_env({"FLEET_VAST_LIST_TTL_S": "soon"})
    assert WorkerTuning.from_env({"FLEET_WORKER_SHUTDOWN_GRACE_S": "0"}).shutdown_grace_s == 0.0
    assert WorkerTuning().vast_list_stale_s == 30.0
    assert WorkerTuning.from_env({"FLEET_VAST_LIST_STALE_S": "0"}).vast_list_stale_s == 0.0
    with pytest.raises(ValueError, match="FLEET_WORKER_SHUTDOWN_GRACE_S"):
        WorkerTuning.from_env({"FLEET_WORKER_SHUTDOWN_GRACE_S": "-1"})


def test_build_worker_applies_the_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Worker is built with the figures, not the SDK's defaults (the
    Worker class is replaced by a recorder: no server needed)."""
    import worker

    built: dict[str, Any] = {}
    monkeypatch.setattr(worker, "Worker", lambda client, **kw: built.update(kw))
    tuning = WorkerTuning(
        max_concurrent_activities=321,
        max_concurrent_workflow_tasks=42,
        max_cached_workflows=777,
        workflow_task_pollers=7,
        activity_task_pollers=9,
        shutdown_grace_s=7.5,
    )
    worker.build_worker(MagicMock(), store=MagicMock(), provider=AutopilotProvider(), tuning=tuning)
    assert built["max_concurrent_activities"] == 321
    assert built["max_concurrent_workflow_tasks"] == 42
    assert built["max_cached_workflows"] == 777
    assert built["workflow_task_poller_behavior"] == PollerBehaviorSimpleMaximum(7)
    assert built["activity_task_poller_behavior"] == PollerBehaviorSimpleMaximum(9)
    assert built["graceful_shutdown_timeout"] == timedelta(seconds=7.5)


def test_the_sandbox_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLEET_WORKFLOW_SANDBOX: `on` (the default) or `off`; anything else is
    refused with the variable's name; build_worker picks the runner by it."""
    import worker

    assert WorkerTuning.from_env({}).workflow_sandbox is True
    assert WorkerTuning.from_env({"FLEET_WORKFLOW_SANDBOX": "on"}).workflow_sandbox is True
    assert WorkerTuning.from_env({"FLEET_WORKFLOW_SANDBOX": "off"}).workflow_sandbox is False
    for bad in ("no", "false", "0", "OFF"):
        with pytest.raises(ValueError, match="FLEET_WORKFLOW_SANDBOX must be 'on' or 'off'"):
            WorkerTuning.from_env({"FLEET_WORKFLOW_SANDBOX": bad})
    built: dict[str, Any] = {}
    monkeypatch.setattr(worker, "Worker", lambda client, **kw: built.update(kw))
    for sandbox, runner in ((True, SandboxedWorkflowRunner), (False, UnsandboxedWorkflowRunner)):
        worker.build_worker(
            MagicMock(),
            store=MagicMock(),
            provider=AutopilotProvider(),
            tuning=WorkerTuning(workflow_sandbox=sandbox),
        )
        assert type(built["workflow_runner"]) is runner
