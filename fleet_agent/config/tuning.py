"""How many tasks one worker takes on at once: read from the environment.

Plain numbers, no Temporal: worker.py turns them into the `Worker`'s options.
Each default is chosen for fleet-agent's load, not left to the SDK (the
reasons are in docs/decisions/load-time.md, "Many fleets on one worker"):

* Activities wait far more than they compute (vast.ai behind its pacing, the
  LLM, the store in a thread), so a slot costs a coroutine; with the SDK's
  100, a hundred monitors' polls queued behind the list endpoint's pacing
  can hold every slot while a run's `load_context` or `call_llm` waits.
* Workflow tasks are short and CPU-bound under one GIL: the SDK's 100 slots
  stay (more would only add threads contending for it), written out so a
  change is a decision. Twice the SDK's pollers, so a task does not wait for
  a poll to come back while the worker has a free slot.
* Every agent keeps two long-lived workflows (itself, its monitor) plus a
  run now and then: 2,000 cached (the SDK keeps 1,000) holds three per agent
  for over 600 agents, so none is evicted and replayed from its whole
  history on its next task.
* The workflow sandbox stays on by default: it is what turns "no clocks,
  randomness or I/O in workflow code" into a check at run time. A worker
  carrying hundreds of agents may turn it off (FLEET_WORKFLOW_SANDBOX=off)
  for about a tenth less CPU and memory; every test and the replay tests
  still run the workflows inside it (docs/decisions/load-time.md, "The sandbox's
  price, and a worker without it").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from fleet_agent.env.env_settings import EnvModel
from fleet_agent.vast.listing import DEFAULT_LIST_STALE_S, DEFAULT_LIST_TTL_S

__all__ = ["ENV_NAMES", "TuningEnv", "WorkerTuning"]

#: The variable behind each field.
ENV_NAMES: dict[str, str] = {
    "max_concurrent_activities": "FLEET_WORKER_ACTIVITIES",
    "max_concurrent_workflow_tasks": "FLEET_WORKER_WORKFLOW_TASKS",
    "max_cached_workflows": "FLEET_WORKER_CACHED_WORKFLOWS",
    "workflow_task_pollers": "FLEET_WORKER_WORKFLOW_POLLERS",
    "activity_task_pollers": "FLEET_WORKER_ACTIVITY_POLLERS",
    "vast_list_ttl_s": "FLEET_VAST_LIST_TTL_S",
    "vast_list_stale_s": "FLEET_VAST_LIST_STALE_S",
    "shutdown_grace_s": "FLEET_WORKER_SHUTDOWN_GRACE_S",
    "workflow_sandbox": "FLEET_WORKFLOW_SANDBOX",
}


@dataclass(frozen=True, slots=True)
class WorkerTuning:
    """A worker's task slots, pollers and workflow cache, and how long one
    listing of the vast.ai account serves every agent on it (and how old a
    run's view of the fleet may be, rather than wait for a walk), and
    whether workflows run in the SDK's sandbox."""

    max_concurrent_activities: int = 500
    max_concurrent_workflow_tasks: int = 100
    max_cached_workflows: int = 2000
    workflow_task_pollers: int = 10
    activity_task_pollers: int = 10
    vast_list_ttl_s: float = DEFAULT_LIST_TTL_S
    vast_list_stale_s: float = DEFAULT_LIST_STALE_S
    #: On SIGTERM or Ctrl-C, how long activities under way may finish before
    #: they are cancelled (and retried on another worker). Long enough for a
    #: vast.ai call behind its pacing or a model's answer; short of a
    #: container's usual 30 s grace before it is killed.
    shutdown_grace_s: float = 10.0
    #: Workflows run in the SDK's sandbox (True), or as plain code (False).
    workflow_sandbox: bool = True

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None
    ) -> WorkerTuning:
        """The defaults, with any variable of ENV_NAMES that is set (in `env`,
        or else the environment over the `.env` file); raises `ValueError`
        naming the variable when one is not a positive number (the TTL and
        the shutdown grace may be 0: no sharing, no grace) or the sandbox's
        is neither `on` nor `off`."""
        read = TuningEnv.read(env, env_file=env_file).model_dump()
        read["workflow_sandbox"] = read["workflow_sandbox"] == "on"
        return cls(**read)


_DEFAULTS = WorkerTuning()


class TuningEnv(EnvModel):
    """The FLEET_WORKER_* variables, FLEET_VAST_LIST_* and
    FLEET_WORKFLOW_SANDBOX, as read."""

    max_concurrent_activities: int = Field(
        _DEFAULTS.max_concurrent_activities, ge=1, alias=ENV_NAMES["max_concurrent_activities"]
    )
    max_concurrent_workflow_tasks: int = Field(
        _DEFAULTS.max_concurrent_workflow_tasks,
        ge=1,
        alias=ENV_NAMES["max_concurrent_workflow_tasks"],
    )
    max_cached_workflows: int = Field(
        _DEFAULTS.max_cached_workflows, ge=1, alias=ENV_NAMES["max_cached_workflows"]
    )
    workflow_task_pollers: int = Field(
        _DEFAULTS.workflow_task_pollers, ge=1, alias=ENV_NAMES["workflow_task_pollers"]
    )
    activity_task_pollers: int = Field(
        _DEFAULTS.activity_task_pollers, ge=1, alias=ENV_NAMES["activity_task_pollers"]
    )
    # 0 is allowed: list for every view (no sharing).
    vast_list_ttl_s: float = Field(
        _DEFAULTS.vast_list_ttl_s, ge=0, allow_inf_nan=False, alias=ENV_NAMES["vast_list_ttl_s"]
    )
    # 0 is allowed: a run's view waits for a walk as every other caller does.
    vast_list_stale_s: float = Field(
        _DEFAULTS.vast_list_stale_s,
        ge=0,
        allow_inf_nan=False,
        alias=ENV_NAMES["vast_list_stale_s"],
    )
    # 0 is allowed: cancel what runs at once.
    shutdown_grace_s: float = Field(
        _DEFAULTS.shutdown_grace_s, ge=0, allow_inf_nan=False, alias=ENV_NAMES["shutdown_grace_s"]
    )
    workflow_sandbox: Literal["on", "off"] = Field("on", alias=ENV_NAMES["workflow_sandbox"])
