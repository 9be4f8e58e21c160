"""The fleet: tools with guardrails against the simulator over HTTP (real client),
idempotent provisioning, the monitor, and a simulated market day."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.labels import create_label
from fleet_agent.llm.tools import FLEET_TOOLS, LOCAL_TOOLS
from fleet_agent.models import AgentConfig, ToolResult, TriggerKind
from fleet_agent.store import Store, ToolJournal
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic
from testkit.fakes.autopilot_llm import autopilot_reply
from testkit.fakes.configs import StaticConfigs
from testkit.servers import start_time_skipping_env
from tests.helpers import eventually, finished_runs, running_worker, status, tool_request

AGENT = "fleet-test"


_req = partial(tool_request, AGENT)


async def _cheapest_offer(fleet: FleetActivities, gpu: str = "RTX 4090") -> int:
    env = ActivityEnvironment()
    result: ToolResult = await env.run(
        fleet.search_offers, _req("search_offers", {"gpu_name": gpu})
    )
    assert not result.is_error, result.content
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    return int(rows[0]["offer_id"])


def _instances(sim: SimServer) -> list[dict[str, Any]]:
    return list(sim.market.state()["instances"])


async def test_search_returns_only_offers_within_guardrails(
    tools: FleetActivities, configs: StaticConfigs
) -> None:
    config = AgentConfig(allowed_gpus=["RTX 3090"], max_instance_dph=0.3, min_reliability=0.95)
    configs.config = config  # the live config; the run's is the default
    result = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 50})
    )
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    assert rows, result.content
    assert all(
        r["gpu"] == "«RTX 3090»" and r["dph"] <= 0.3 and r["reliability"] >= 0.95 for r in rows
    )
    per_proof = [r["usd_per_100_proofs"] for r in rows]
    assert per_proof == sorted(per_proof), "cheapest per proof first"
    refused = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"gpu_name": "H100 SXM"})
    )
    assert refused.is_error and "not allowed" in refused.content


async def test_read_tools_fall_back_to_the_runs_config_without_a_live_one(
    tools: FleetActivities, configs: StaticConfigs
) -> None:
    configs.config = None  # the live_config query fails
    config = AgentConfig(allowed_gpus=["RTX 3090"])
    result = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 50}, config)
    )
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    assert rows and all(r["gpu"] == "«RTX 3090»" for r in rows)
    status_ = await ActivityEnvironment().run(tools.get_fleet_status, _req("get_fleet_status", {}))
    assert not status_.is_error and status_.content.startswith("0 instances")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (AgentConfig(max_instances=0), "cap 0"),
        (AgentConfig(max_instance_dph=0.05), "per-instance cap"),
        (AgentConfig(max_fleet_dph=0.05), "fleet spend"),
        (AgentConfig(allowed_gpus=["H100"]), "not allowed"),
        (AgentConfig(min_reliability=1.0), "reliability"),
        (AgentConfig(dry_run=True), "DRY RUN"),
        (AgentConfig(paused=True), "paused"),
    ],
)
async def test_guardrails_of_the_live_config_refuse_and_nothing_is_rented(
    tools: FleetActivities,
    sim: SimServer,
    configs: StaticConfigs,
    config: AgentConfig,
    expected: str,
) -> None:
    """The live config decides, not the config the run started with (here the
    default, under which the rental would go through)."""
    offer = await _cheapest_offer(tools)
    configs.config = config
    result = await ActivityEnvironment().run(
        tools.create_instance,
        _req("create_instance", {"offer_id": offer, "reason": "test"}, AgentConfig()),
    )
    assert expected in result.content
    assert not result.mutating
    assert _instances(sim) == []


async def test_mutating_tools_never_act_without_the_live_config(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """A failed live_config query is a retryable error, never a rental on the
    run's (possibly stale) config."""
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        mine = await vast.create_instance(
            offer, image="x", disk=10, label=create_label(AGENT, 1, "t")
        )
    configs.config = None
    env = ActivityEnvironment()
    other = await _cheapest_offer(tools, "RTX 3090")
    for req in (
        _req("create_instance", {"offer_id": other, "reason": "r"}),
        _req("destroy_instance", {"instance_id": mine, "reason": "r"}),
    ):
        with pytest.raises(ApplicationError) as info:
            await env.run(getattr(tools, req.name), req)
        assert info.value.type == "LiveConfigUnavailable" and not info.value.non_retryable
    assert [i["id"] for i in _instances(sim)] == [mine]


async def test_paused_agent_refuses_destroy(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        mine = await vast.create_instance(
            offer, image="x", disk=10, label=create_label(AGENT, 1, "t")
        )
    configs.config = AgentConfig(paused=True)
    result = await ActivityEnvironment().run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": mine, "reason": "r"})
    )
    assert result.is_error and "paused" in result.content and not result.mutating
    assert [i["id"] for i in _instances(sim)] == [mine]


async def test_bad_tool_input_is_a_clear_error(tools: FleetActivities, sim: SimServer) -> None:
    env = ActivityEnvironment()
    result = await env.run(tools.create_instance, _req("create_instance", {"offer_id": "x"}))
    assert result.is_error and "offer_id" in result.content and "reason" in result.content
    result = await env.run(tools.search_offers, _req("search_offers", {"limit": 500}))
    assert result.is_error and "limit" in result.content
    gone = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": 999999999, "reason": "r"})
    )
    assert gone.is_error and "not available" in gone.content
    assert _instances(sim) == []


@pytest.mark.parametrize("fault", ["create_hang_next", "create_error_next"])
async def test_ambiguous_create_rents_exactly_one_machine(
    tools: FleetActivities, sim: SimServer, fault: str
) -> None:
    """A create that rents and then times out (or answers 5xx) is adopted by
    label; the activity's retry, same tool call, rents nothing more."""
    faults: dict[str, Any] = {fault: 1, "hang_seconds": 4.0}
    sim.market.set_faults(**faults)
    offer = await _cheapest_offer(tools)
    req = _req("create_instance", {"offer_id": offer, "reason": "test"}, tool_id="toolu_fixed")
    env = ActivityEnvironment()
    first = await env.run(tools.create_instance, req)
    assert first.mutating and not first.is_error, first.content
    assert "answer was lost" in first.content
    again = await env.run(tools.create_instance, req)  # what a Temporal retry does
    assert again.replayed and again.content.endswith(first.content)
    instances = _instances(sim)
    assert len(instances) == 1
    assert instances[0]["label"] == create_label(AGENT, 1, "toolu_fixed")
    assert str(instances[0]["id"]) in first.content


async def test_crash_mid_create_adopts_the_machine_by_label(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """A worker died after the rental reached vast.ai and before the result
    was recorded: the journal says "started", the label finds the machine."""
    offer = await _cheapest_offer(tools)
    req = _req("create_instance", {"offer_id": offer, "reason": "test"}, tool_id="toolu_crash")
    ToolJournal(store).start(req, datetime.now(UTC))
    label = create_label(AGENT, 1, "toolu_crash")
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        rented = await vast.create_instance(offer, image="x", disk=10, label=label)
    result = await ActivityEnvironment().run(tools.create_instance, req)
    assert result.mutating and not result.is_error and not result.replayed
    assert f"instance {rented}" in result.content and "found after a retry" in result.content
    assert [i["id"] for i in _instances(sim)] == [rented]
    assert sim.market.counters["creates"] == 1
    record = ToolJournal(store).get(AGENT, "toolu_crash")
    assert record is not None and record.status == "done" and record.result == result


async def test_destroy_only_touches_this_agents_machines(
    tools: FleetActivities, sim: SimServer
) -> None:
    env = ActivityEnvironment()
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        foreign = await vast.create_instance(offer, image="x", disk=10, label="someone-else")
    result = await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": foreign, "reason": "r"})
    )
    assert result.is_error and "not this agent's" in result.content
    assert [i["id"] for i in _instances(sim)] == [foreign]


@pytest.mark.parametrize(
    ("sandbox", "death"),
    [(True, "exited"), (False, "exited"), (True, "offline")],
    ids=["sandboxed", "unsandboxed", "offline-past-grace"],
)
async def test_monitor_turns_a_failure_into_one_signal_and_a_replacement(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    sandbox: bool,
    death: str,
) -> None:
    """The agent, its monitor and a run with fleet tools, in the sandbox and
    out of it (FLEET_WORKFLOW_SANDBOX=off). A container that exited is
    replaced by the run its signal wakes; a host that went offline is waited
    out for `offline_grace_minutes` (5), then signalled again and replaced."""
    async with running_worker(
        ts_env.client, store, provider=AutopilotProvider(), fleet=fleet, sandbox=sandbox
    ) as h:
        # A long heartbeat: after the kill only the monitor may notice it first.
        handle = await h.start_agent(
            target_proofs_per_hour=40, monitor_poll_seconds=30, heartbeat_seconds=36_000
        )

        async def running_fleet() -> list[dict[str, Any]]:
            sim.market.advance(60)
            await ts_env.sleep(60)  # the monitor polls the advanced market
            instances = _instances(sim)
            st = await status(handle)
            settled = st.current_run is None and not st.pending_triggers
            steady = all(i["actual_status"] == "running" for i in instances)
            return instances if instances and settled and steady else []

        up = await eventually(running_fleet, timeout=60, what="a running fleet")
        before = {i["id"] for i in _instances(sim)}
        victim = up[0]["id"]
        runs_before = len(finished_runs(store, handle.id))
        sim.market.kill(victim, death)
        killed_at = sim.market.now()

        async def replaced() -> bool:
            sim.market.advance(30)
            await ts_env.sleep(30)
            ids = {i["id"] for i in _instances(sim)}
            return victim not in ids and bool(ids - before)

        await eventually(replaced, timeout=60, what="the dead machine replaced")
        runs = finished_runs(store, handle.id)[runs_before:]
        changes = [
            t
            for r in runs
            for t in r.triggers
            if t.kind == TriggerKind.STATE_CHANGED and t.instance_id == str(victim)
        ]
        assert [(c.old_state, c.new_state) for c in changes][:1] == [("running", death)]
        assert sum(1 for c in changes if c.new_state == death) == 1, "one signal per transition"
        if death == "offline":
            assert sim.market.now() - killed_at >= 5 * 60, "waited out for the grace"
            assert [c.new_state for c in changes] == ["offline", "offline past grace"]
        acting = next(r for r in runs if any(t in r.triggers for t in changes[-1:]))
        assert acting.mutating_calls >= 2, acting.actions_digest  # destroy + create
        assert "destroy_instance" in acting.actions_digest


async def _five_hours(store: Store, fake_llm: FakeAnthropic, seed: int) -> float:
    """Five hours of one market, on a time-skipping server of its own (the
    second market on the first one's server failed with an RPC "Timeout
    expired"; conftest's `ts_env` gives each test its own for the same
    reason); the share of samples within the band after the first hour.
    The other figures are asserted here, for each market."""
    ts_env = await start_time_skipping_env()
    try:
        return await _hold_five_hours(ts_env, store, fake_llm, seed)
    finally:
        await ts_env.shutdown()


async def _hold_five_hours(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, seed: int
) -> float:
    # The real market's size and mix; pacing is not what this test is about.
    with SimServer(seed=seed, speed=0, scenario="realistic", rate_limits=False) as sim:
        sim.market.set_faults(death_rate_per_hour=0.08)  # ~4 deaths in the five hours
        # A generous timeout: the simulator shares this process with the
        # worker and the fake Messages API, and on a loaded runner a 2 s one
        # timed calls out, which parted the day from the one it is on an idle
        # machine (the simulator's own slow calls are other tests' subject).
        async with VastClient(
            sim.api_key, sim.url, timeout=30, backoff_base=0.01, pacing=NO_PACING
        ) as vast:
            fleet = FleetActivities(
                vast, ProverSpec(allow_loopback=True), store=store, clock=sim.market.now
            )
            async with running_worker(ts_env.client, store, fleet=fleet) as h:
                handle = await h.start_agent(
                    target_proofs_per_hour=500,
                    max_instances=40,
                    max_fleet_dph=30,
                    monitor_poll_seconds=60,
                )
                step, samples = 120, []

                async def between_runs() -> bool:
                    return (await status(handle)).current_run is None

                for i in range(5 * 3600 // step):
                    sim.market.advance(step)
                    await ts_env.sleep(step)
                    # A run in flight ends before the market moves on, so how
                    # far the market gets during a run does not depend on how
                    # long the run takes in real time.
                    await eventually(between_runs, timeout=60, what="the run to end")
                    if i * step >= 3600:  # the first hour loads the fleet
                        # The simulator's truth (proofs being finished now),
                        # not what the fleet code believes.
                        samples.append(sim.market.state()["proofs_per_hour"])
                within = sum(1 for c in samples if abs(c - 500) <= 25) / len(samples)
                mean = sum(samples) / len(samples)
                counters = sim.market.state()["counters"]
                print(  # the figures quoted in the closing note (pytest -s)
                    f"market day, seed {seed}: mean {mean:.0f} proofs/h, {within:.1%} of samples "
                    f"within 5 %, min {min(samples):.0f}, max {max(samples):.0f}, runs "
                    f"{(await status(handle)).run_count}, {counters}"
                )
                assert abs(mean - 500) <= 25, mean
                assert within >= 0.8, (seed, within, min(samples), max(samples))
                assert counters["destroys"] >= 1, "the day must include failures to recover from"
                st = await status(handle)
                assert st.last_run is not None
                assert counters["creates"] < 40, "no runaway renting"
                return within


async def test_five_hours_of_market_hold_500_proofs_per_hour(
    store: Store, fake_llm: FakeAnthropic
) -> None:
    """A scripted LLM (the autopilot policy behind the Messages API), realistic
    faults with machines dying every few hours, five simulated hours in
    2-minute steps of workflow time and market time, on two markets. The
    whole day, with target changes and the oracle, is bench/market_day/day.py.

    Within the band 90 % of the four hours after the first on the mean of
    the two markets, and 80 % on each: one path of five hours is luck as
    much as policy (each failure takes its machine's load time out, 10-60
    min). With one market (seed 5) at 90 %, the trades (docs/DECISIONS.md,
    "A trade") took it from 93.3 to 83.3 %, while seeds 6, 7 and 9 gave
    99.2, 90.8 and 93.3 % with them and 99.2, 91.7 and 93.3 % without;
    seed 8 gives 70.0 % with and without."""
    fake_llm.set_responder(autopilot_reply)
    shares = [await _five_hours(store, fake_llm, seed) for seed in (5, 6)]
    assert sum(shares) / len(shares) >= 0.9, shares
    assert set(fake_llm.requests[0].tool_names()) == LOCAL_TOOLS | FLEET_TOOLS


async def test_a_create_keeps_the_images_entrypoint_and_maps_its_status_port(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await _cheapest_offer(tools)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
    )
    assert result.mutating and not result.is_error, result.content
    (machine,) = _instances(sim)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        shown = await vast.show_instance(machine["id"])
    assert shown is not None and shown.extras["image_runtype"] == "args"
    assert ["-p 9100:9100", "1"] in shown.extras["extra_env"]
    assert shown.disk_space == ProverSpec().disk_gb


async def test_an_offer_gone_is_told_to_the_model_and_not_retried(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await _cheapest_offer(tools)
    sim.market.set_faults(offer_taken_next=1)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
    )
    assert result.is_error and not result.mutating
    assert "is gone" in result.content and "do not retry this offer" in result.content
    assert sim.market.counters["creates"] == 1, "one rental request, no retry"
    assert _instances(sim) == []


async def test_a_rejected_key_fails_fleet_tools_for_good(
    sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    """The search answers a bad key with a 404: a permanent authentication
    failure that says what to fix, never "not found" and never retried."""
    async with VastClient("not-the-key", sim.url, pacing=NO_PACING) as bad:
        fleet = FleetActivities(bad, ProverSpec(), store=store, configs=configs)
        env = ActivityEnvironment()
        for req in (_req("search_offers", {}), _req("get_fleet_status", {})):
            with pytest.raises(ApplicationError) as info:
                await env.run(getattr(fleet, req.name), req)
            assert info.value.type == "VastAuthFailed" and info.value.non_retryable
            assert "Invalid user key" in info.value.message
            assert "VAST_API_KEY" in info.value.message


async def test_the_per_instance_cap_is_checked_on_the_price_with_our_disk(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """An offer under the cap at the service's default 5 GB of storage, over
    it with the prover's disk: refused at the price it would really cost."""
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        bare = await vast.search_offers({"gpu_name": {"eq": "RTX 3090"}}, limit=1000)
        priced = {
            o.id: o.dph_total
            for o in await vast.search_offers(
                {"gpu_name": {"eq": "RTX 3090"}},
                limit=1000,
                allocated_storage=ProverSpec().disk_gb,
            )
        }
    offer = max(bare, key=lambda o: priced[o.id] - o.dph_total)
    assert priced[offer.id] > offer.dph_total
    configs.config = AgentConfig(max_instance_dph=(offer.dph_total + priced[offer.id]) / 2)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer.id, "reason": "r"})
    )
    assert result.is_error and "per-instance cap" in result.content
    assert f"${priced[offer.id]:.3f}/h" in result.content
    assert _instances(sim) == []
