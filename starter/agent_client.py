"""One agent seen from the operator's side: start it, signal it, ask it, reconfigure it.

Every Temporal failure an operator can cause or meet (agent not running, server
unreachable, no worker answering, a config value the workflow refuses) becomes
a `CliError` with a one-line message; anything else is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.envconfig import ClientConfig
from temporalio.exceptions import ApplicationError
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from fleet_agent.loop.inputs import payload_preview
from fleet_agent.models import (
    AgentConfig,
    AgentInput,
    AgentStatus,
    ApprovalOutcome,
    AskResult,
    ConfigPatch,
    FreezeReport,
    RejectedInput,
)
from runtime.connect import connect, target_address, unreachable
from starter.hints import CLI
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_QUERY_TIMEOUT",
    "UNCONFIRMED",
    "AgentClient",
    "CliError",
    "UsageError",
    "open_client",
    "resolved_address",
    "validation_message",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
# A query or update needs a worker to answer; without one the server would keep
# the call open for a long while, so give up early and say why.
DEFAULT_QUERY_TIMEOUT = 10.0

# Between this machine's clock and the workflow's (the server's) time.
_CLOCK_SLACK = timedelta(seconds=5)


class Unconfirmed(enum.Enum):
    """The agent did not answer in time: the signal was sent, its fate unknown."""

    UNCONFIRMED = "unconfirmed"


UNCONFIRMED = Unconfirmed.UNCONFIRMED


class CliError(Exception):
    """An operator mistake or an unreachable service: one line, exit code 1, no traceback."""

    exit_code = 1


class UsageError(CliError):
    """The command line itself is wrong (a malformed value, a blank message): exit code 2,
    as for argparse's own usage errors."""

    exit_code = 2


def validation_message(exc: ValidationError) -> str:
    """`field: problem; field: problem` — the same shape the workflow's validator uses."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
    )


def resolved_address(address: str | None, profile: str | None) -> str:
    """The address `connect()` will use: the override, else env config, else the default."""
    if address:
        return address
    try:
        config = ClientConfig.load_client_connect_config(profile=profile)
    except Exception as exc:  # a malformed profile file must not hide the real error
        raise CliError(f"cannot read the Temporal client configuration: {exc}") from None
    try:
        return target_address(config)
    except ValueError as exc:  # a bad TEMPORAL_PORT
        raise CliError(str(exc)) from None


async def open_client(
    address: str | None,
    namespace: str | None,
    profile: str | None = None,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    runtime: Runtime | None = None,
) -> Client:
    """Connect like `runtime.connect.connect`, failing with one line within the timeout."""
    where = resolved_address(address, profile)
    try:
        async with asyncio.timeout(connect_timeout):
            return await connect(address, namespace, profile, runtime)
    except TimeoutError:
        raise CliError(
            f"cannot reach Temporal at {where}: no answer within {connect_timeout:g}s"
        ) from None
    except RuntimeError as exc:
        raise CliError(unreachable(where, exc)) from None


class AgentClient:
    """Operator calls on the `FleetAgentWorkflow` whose workflow ID is `agent_id`.

    `client` may be a connected client or a coroutine function that connects:
    then nothing touches the network until the first call, so commands can
    check their arguments first and report a typo even while Temporal is down.
    """

    def __init__(
        self,
        client: Client | Callable[[], Awaitable[Client]],
        agent_id: str,
        *,
        task_queue: str = TASK_QUEUE,
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        self._client = client if isinstance(client, Client) else None
        self._connect = None if isinstance(client, Client) else client
        self.agent_id = agent_id
        self.task_queue = task_queue
        self.query_timeout = query_timeout
        #: The status `refusal` read last (None: it could not), for what a
        #: command says beside "sent" (runs held by the LLM spend cap).
        self.seen_status: AgentStatus | None = None

    async def client(self) -> Client:
        if self._client is None:
            assert self._connect is not None
            self._client = await self._connect()
        return self._client

    async def handle(self) -> WorkflowHandle[FleetAgentWorkflow, None]:
        # No run ID: calls reach the newest execution of the continue-as-new chain.
        return (await self.client()).get_workflow_handle_for(FleetAgentWorkflow.run, self.agent_id)

    # ------------------------------------------------------------ lifecycle

    async def execution_status(self) -> WorkflowExecutionStatus | None:
        """Status of the newest execution, or None when the ID was never used."""
        with self._rpc("describe the agent"):
            try:
                return (await (await self.handle()).describe()).status
            except RPCError as exc:
                if _missing_workflow(exc):
                    return None
                raise

    async def require_running(self) -> None:
        status = await self.execution_status()
        if status == WorkflowExecutionStatus.RUNNING:
            return
        namespace = (await self.client()).namespace
        detail = (
            f"no workflow with ID {self.agent_id!r} in namespace {namespace!r}"
            if status is None
            else f"its last execution is {status.name}"
        )
        raise CliError(
            f"agent {self.agent_id!r} is not running ({detail}); start it with `{CLI} start`"
        )

    async def start(self, config: ConfigPatch | None) -> bool:
        """Start the agent or attach to the running one; True if it was started now.

        The config only applies to a fresh start: a running agent keeps its own.
        """
        was_running = await self.execution_status() == WorkflowExecutionStatus.RUNNING
        with self._rpc("start the agent"):
            await (await self.client()).start_workflow(
                FleetAgentWorkflow.run,
                AgentInput(config=config),
                id=self.agent_id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        return not was_running

    async def signal_with_start(self, signal: str, arg: dict[str, Any]) -> bool:
        """Send `signal`, starting the agent first if it is not running; True if started.

        Signal-with-start is one atomic server call: a message to a stopped agent
        is never lost, and the started agent sees it in its first run.
        """
        was_running = await self.execution_status() == WorkflowExecutionStatus.RUNNING
        with self._rpc(f"send {signal}"):
            await (await self.client()).start_workflow(
                FleetAgentWorkflow.run,
                AgentInput(),
                id=self.agent_id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                start_signal=signal,
                start_signal_args=[arg],
            )
        return not was_running

    async def ask(self, arg: dict[str, Any], *, wait: float) -> tuple[AskResult, bool]:
        """The `ask` update, starting the agent first if it is not running
        (update-with-start: one server call, as signal-with-start is); its
        result and whether the agent was started. `wait`: the longest this
        call waits for the workflow's answer (its `wait_seconds`, plus a margin)."""
        was_running = await self.execution_status() == WorkflowExecutionStatus.RUNNING
        start = WithStartWorkflowOperation(
            FleetAgentWorkflow.run,
            AgentInput(),
            id=self.agent_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        with self._updating(
            "ask the agent",
            refused="the agent refused the message",
            no_answer=f"no answer within {wait:g}s",
            meanwhile=f"the message may still reach the agent when one does: check `{CLI} status`",
        ):
            result = await (await self.client()).execute_update_with_start_workflow(
                FleetAgentWorkflow.ask,
                arg,
                start_workflow_operation=start,
                rpc_timeout=timedelta(seconds=wait),
            )
        return AskResult.model_validate(result), not was_running

    async def signal(self, signal: str, arg: dict[str, Any]) -> None:
        """Send `signal` to the running agent (never starts one)."""
        await self.require_running()
        with self._rpc(f"send {signal}"):
            await (await self.handle()).signal(signal, arg)

    # ------------------------------------------------------------ query and update

    async def status(self) -> AgentStatus:
        await self.require_running()
        with self._rpc("query the agent's status", needs_worker=True):
            try:
                return await (await self.handle()).query(
                    FleetAgentWorkflow.status,
                    rpc_timeout=timedelta(seconds=self.query_timeout),
                )
            except WorkflowQueryFailedError as exc:
                raise CliError(f"the status query failed: {exc}") from None

    async def update_config(self, changes: dict[str, Any]) -> AgentConfig:
        """Apply a partial config; the workflow's validator refuses bad values."""
        await self.require_running()
        with self._updating(
            "update the config",
            refused="the config update was refused",
            no_answer=f"no answer to the config update within {self.query_timeout:g}s",
            meanwhile=f"it may still be applied when one does: check `{CLI} config`",
        ):
            return await (await self.handle()).execute_update(
                FleetAgentWorkflow.update_config,
                changes,
                rpc_timeout=timedelta(seconds=self.query_timeout),
            )

    async def freeze(self, request: dict[str, Any], *, wait: float) -> FreezeReport:
        """The `freeze` update; with destroy_all it returns once vast.ai lists
        none of the agent's machines, so it may take minutes (`wait`)."""
        answer = await self._update(FleetAgentWorkflow.freeze, request, "freeze the agent", wait)
        return FreezeReport.model_validate(answer)

    async def unfreeze(self, request: dict[str, Any]) -> AgentConfig:
        answer = await self._update(
            FleetAgentWorkflow.unfreeze, request, "unfreeze the agent", self.query_timeout
        )
        return AgentConfig.model_validate(answer)

    async def decide_approval(self, request: dict[str, Any]) -> ApprovalOutcome:
        """The `decide_approval` update: the decision, forwarded to the waiting run."""
        answer = await self._update(
            FleetAgentWorkflow.decide_approval, request, "decide the approval", self.query_timeout
        )
        return ApprovalOutcome.model_validate(answer)

    async def _update(self, update: Any, arg: dict[str, Any], what: str, wait: float) -> Any:
        await self.require_running()
        with self._updating(
            what,
            refused=f"could not {what}",
            no_answer=f"no answer within {wait:g}s while trying to {what}",
            meanwhile=f"it goes on when one does: check `{CLI} status`",
        ):
            return await (await self.handle()).execute_update(
                update, arg, rpc_timeout=timedelta(seconds=wait)
            )

    @contextmanager
    def _updating(
        self, what: str, *, refused: str, no_answer: str, meanwhile: str
    ) -> Iterator[None]:
        """An update's failures as one-line errors: the workflow's refusal
        (its validator's or handler's message, else `refused`), or no answer
        in time (`no_answer`, and what happens `meanwhile`)."""
        with self._rpc(what, needs_worker=True):
            try:
                yield
            except WorkflowUpdateFailedError as exc:
                cause = exc.cause
                message = cause.message if isinstance(cause, ApplicationError) else str(cause)
                raise CliError(message or refused) from None
            except WorkflowUpdateRPCTimeoutOrCancelledError:
                raise CliError(
                    f"{no_answer}; is a worker running on task queue {self.task_queue!r}? "
                    f"({meanwhile})"
                ) from None

    async def refusal(
        self, signal: str, payload: Any, since: datetime
    ) -> RejectedInput | Unconfirmed | None:
        """The agent's refusal of a signal we just sent, None if it took it in,
        or `UNCONFIRMED` when it did not answer within `query_timeout` (the
        CLI's --timeout).

        A query is answered after the workflow has taken in the signals sent
        before it, so one query tells. An agent busy with a backlog of signals,
        or one with no worker, answers late or never: the caller says so
        rather than claim the signal was taken. The signal is matched by its
        name, its preview and the time of the refusal.
        """
        preview = payload_preview(payload)
        try:
            st = await (await self.handle()).query(
                FleetAgentWorkflow.status, rpc_timeout=timedelta(seconds=self.query_timeout)
            )
        except (RPCError, WorkflowQueryFailedError):
            return UNCONFIRMED
        self.seen_status = st
        for rejected in reversed(st.rejected):
            if (
                rejected.signal == signal
                and rejected.preview == preview
                and rejected.at >= since - _CLOCK_SLACK
            ):
                return rejected
        return None

    # ------------------------------------------------------------ errors

    def rpc(self, what: str) -> AbstractContextManager[None]:
        """Service errors of a call made with `client()` as one-line `CliError`s."""
        return self._rpc(what)

    @contextmanager
    def _rpc(self, what: str, *, needs_worker: bool = False) -> Iterator[None]:
        """Turn Temporal service errors into one-line operator messages.

        `needs_worker`: the call waits for the workflow to answer (a query), so
        a timeout most likely means no worker polls the task queue.
        """
        try:
            yield
        except RPCError as exc:
            # The core SDK reports its own rpc_timeout as CANCELLED ("Timeout expired").
            if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                hint = (
                    f"; is a worker running on task queue {self.task_queue!r}?"
                    if needs_worker
                    else ""
                )
                raise CliError(
                    f"could not {what}: no answer within {self.query_timeout:g}s{hint}"
                ) from None
            if _missing_workflow(exc):
                raise CliError(
                    f"could not {what}: agent {self.agent_id!r} is not running ({exc.message})"
                ) from None
            if exc.status == RPCStatusCode.UNAVAILABLE:
                raise CliError(
                    f"could not {what}: Temporal is unavailable ({exc.message})"
                ) from None
            raise CliError(f"could not {what}: {exc.message}") from None


def _missing_workflow(exc: RPCError) -> bool:
    # NOT_FOUND also means "no such namespace"; only the server's message tells
    # them apart, and a wrong namespace must not read as "agent not running".
    return exc.status == RPCStatusCode.NOT_FOUND and "namespace" not in exc.message.lower()
