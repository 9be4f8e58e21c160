"""`fleet-agent fleet`: the monitor's poll leaves a snapshot in the store, and
the view (starter/views/fleet.py) shows it with flags, totals and spend,
without calling vast.ai. The poll runs against the simulator (its provers
answer over HTTP, as a rented machine's would); the CLI runs in-process.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot
from fleet_agent.models import PollRequest, SpendSummary, ToolResult
from fleet_agent.store import FleetSnapshots, Store, StoredSnapshot
from simulator.server import SimServer
from starter.cli import main
from starter.cli.fleet_render import fleet_text
from starter.views.fleet import (
    Flag,
    build_fleet_view,
    flags_of,
    read_fleet_view,
    stored_suspects,
)
from starter.views.render import status_text
from tests.helpers import idle_status, tool_request

AGENT = "fleet-agent"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _inst(iid: int, state: str, **fields: object) -> FleetInstance:
    base: dict[str, object] = {
        "id": iid,
        "label": f"{AGENT}/x",
        "state": state,
        "gpu": "RTX 4090",
        "num_gpus": 1,
        "dph": 0.5,
        "proofs_per_hour": 0.0,
    }
    return FleetInstance.model_validate(base | fields)


@pytest.mark.parametrize(
    ("state", "fields", "flags"),
    [
        ("running", {"prover": "proving: 12 done"}, []),
        ("running", {"prover": "fetching_params: 3 of 9 GB"}, [Flag.FETCHING]),
        ("running", {"prover": "starting"}, [Flag.LOADING]),
        ("running", {"prover": "unreachable: connection refused"}, [Flag.FAILING]),
        ("running", {"prover": "error: CUDA"}, [Flag.FAILING]),
        ("not_proving", {}, [Flag.NOT_PROVING]),
        ("suspect", {"prover": "proving: 10 done"}, [Flag.SUSPECT]),
        ("loading", {"age_minutes": 5.0}, [Flag.LOADING]),
        ("loading", {"age_minutes": 45.0}, [Flag.STUCK, Flag.LOADING]),
        ("rebooting", {"age_minutes": 45.0}, [Flag.LOADING]),
        ("stopped", {}, [Flag.STOPPED]),
        ("frozen", {}, [Flag.STOPPED]),
        ("exited", {}, [Flag.FAILING]),
        ("weird", {}, [Flag.UNKNOWN]),
        ("running", {"prover": "proving: 3 done", "temporary": True}, [Flag.TEMPORARY]),
        ("loading", {"age_minutes": 5.0, "temporary": True}, [Flag.LOADING, Flag.TEMPORARY]),
    ],
)
def test_flags_say_what_to_notice(state: str, fields: dict[str, object], flags: list[str]) -> None:
    assert flags_of(_inst(1, state, **fields)) == flags


def test_a_suspect_machine_shows_in_fleet_and_in_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51: a machine whose prover claims more than twice the capacity
    model allows (fleet_agent/fleet/provers.py) is in state `suspect`, with
    the flag in `fleet` and the console, and a SUSPECT line in `status`
    naming it, its host and why (read from the monitor's last snapshot)."""
    note = "suspect: its prover claims 6e+03 proofs/h, over 2x the capacity model's 49.7"
    snap = FleetSnapshot(
        instances=[
            _inst(1, "running", proofs_per_hour=40, measured_proofs_per_hour=40),
            _inst(2, "suspect", machine_id=22111, host_id=7273, note=note),
        ],
        target_proofs_per_hour=80,
        capacity_proofs_per_hour=40,
    )
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    FleetSnapshots(store).save(AGENT, snap, T0)
    store.dispose()
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    view = build_fleet_view(AGENT, StoredSnapshot(taken_at=T0, snapshot=snap), None, T0)
    row = next(line for line in fleet_text(view, T0).splitlines() if line.startswith("2 "))
    assert "suspect" in row.split() and row.endswith("suspect")
    suspects = stored_suspects(AGENT)
    assert [i.id for i in suspects] == [2]
    shown = status_text(idle_status(), T0, suspects=suspects)
    assert f"SUSPECT:        instance 2 (m22111/h7273): {note}" in shown
    assert "SUSPECT" not in status_text(idle_status(), T0, suspects=stored_suspects("other"))


def test_the_view_totals_and_marks_an_old_snapshot_stale() -> None:
    snap = FleetSnapshot(
        instances=[
            _inst(1, "running", proofs_per_hour=40, measured_proofs_per_hour=40, machine_id=7),
            _inst(2, "loading", expected_proofs_per_hour=30, age_minutes=3.0),
        ],
        target_proofs_per_hour=100,
        capacity_proofs_per_hour=40,
        expected_proofs_per_hour=70,
        fleet_dph=1.0,
    )
    spend = SpendSummary(as_of=T0, today_usd=3.5, current_dph=1.0)
    fresh = build_fleet_view(AGENT, StoredSnapshot(taken_at=T0, snapshot=snap), spend, T0)
    assert (fresh.gap_proofs_per_hour, fresh.measured_proofs_per_hour) == (60, 40)
    assert not fresh.stale and fresh.age_seconds == 0
    text = fleet_text(fresh, T0)
    assert "capacity 40 proofs/h (40 %) of target 100 (gap +60); 70 once loading" in text
    assert "spend today $3.50" in text and "STALE" not in text
    row = next(line for line in text.splitlines() if line.startswith("2 "))
    assert row.split()[-1] == "loading"
    assert json.loads(fresh.model_dump_json())["gap_proofs_per_hour"] == 60
    assert "holding" not in text
    spared = snap.model_copy(update={"hold_proofs_per_hour": 103.0})
    held = build_fleet_view(AGENT, StoredSnapshot(taken_at=T0, snapshot=spared), spend, T0)
    assert "; holding 103 (a spare for one failure)" in fleet_text(held, T0)

    later = T0 + timedelta(minutes=6)
    stale = build_fleet_view(AGENT, StoredSnapshot(taken_at=T0, snapshot=snap), spend, later)
    assert stale.stale and "STALE: the monitor has not polled since" in fleet_text(stale, later)

    none = build_fleet_view(AGENT, None, spend, T0)
    assert none.as_of is None and none.rows == []
    assert "no fleet snapshot yet" in fleet_text(none, T0)


async def _rent(tools: FleetActivities, n: int) -> None:
    env = ActivityEnvironment()
    found: ToolResult = await env.run(
        tools.search_offers, tool_request(AGENT, "search_offers", {"limit": 20})
    )
    rows = json.loads(found.content.split("\n", 1)[1])
    for row in rows[:n]:
        made = await env.run(
            tools.create_instance,
            tool_request(AGENT, "create_instance", {"offer_id": row["offer_id"], "reason": "t"}),
        )
        assert made.mutating, made.content


async def _poll(tools: FleetActivities, sim: SimServer, minutes: int, step: int = 60) -> None:
    env = ActivityEnvironment()
    for _ in range(max(1, minutes * 60 // step)):
        sim.market.advance(step)
        await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT, target_proofs_per_hour=100))


async def test_the_cli_shows_the_monitors_last_poll(
    tools: FleetActivities,
    sim: SimServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    assert main(["fleet", "--agent", AGENT]) == 0
    assert "no fleet snapshot yet" in capsys.readouterr().out

    await _rent(tools, 2)
    await _poll(tools, sim, 1)
    assert main(["fleet", "--agent", AGENT]) == 0
    booting = capsys.readouterr().out
    assert booting.count(Flag.LOADING) + booting.count(Flag.FETCHING) >= 2, booting

    await _poll(tools, sim, 90, step=300)
    victim = sorted(sim.market.instance_ids())[0]
    assert sim.market.prover_fault(victim, "cuda_error")
    await _poll(tools, sim, 1)

    assert main(["fleet", "--agent", AGENT, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    truth = {int(i["id"]): i for i in sim.market.state()["instances"]}
    rows = {r["id"]: r for r in view["rows"]}
    assert set(rows) == set(truth)
    assert rows[victim]["flags"] == [Flag.NOT_PROVING]
    (healthy,) = set(rows) - {victim}
    assert rows[healthy]["flags"] == [] and rows[healthy]["measured_proofs_per_hour"] > 0
    assert rows[healthy]["machine_id"] == truth[healthy]["machine_id"]
    assert view["target_proofs_per_hour"] == 100
    assert view["capacity_proofs_per_hour"] == rows[healthy]["measured_proofs_per_hour"]
    assert view["spend"]["current_dph"] == pytest.approx(view["fleet_dph"], abs=1e-3)

    assert main(["fleet", "--agent", AGENT]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"fleet of agent {AGENT!r} as of ")
    assert text.splitlines()[1].split()[:3] == ["ID", "GPU", "STATE"] and Flag.NOT_PROVING in text
    assert f"m{truth[healthy]['machine_id']}/h" in text
    # The view is the store's: the same as reading it directly.
    assert read_fleet_view(store, AGENT).rows[0].id == min(rows)


async def test_the_poll_gives_the_level_held_with_a_spare(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """Two machines at a target of 400: each is well under 8.5 % of it, so
    the level held is 95 % of the target plus the larger one's rate, and
    `fleet` says so; without the spare it is the target."""
    await _rent(tools, 2)
    env = ActivityEnvironment()
    spared = PollRequest(agent_id=AGENT, target_proofs_per_hour=400, spare_one_machine=True)
    snap: FleetSnapshot = await env.run(tools.poll_fleet, spared)
    biggest = max(i.expected_proofs_per_hour for i in snap.instances)
    assert 0 < biggest <= 34
    assert snap.hold_proofs_per_hour == pytest.approx(380 + biggest, abs=0.1)
    assert f"hold {snap.hold_proofs_per_hour:.0f} proofs/h" in snap.to_text()
    assert "(a spare for one failure)" in fleet_text(read_fleet_view(store, AGENT), T0)
    plain = spared.model_copy(update={"spare_one_machine": False})
    assert (await env.run(tools.poll_fleet, plain)).hold_proofs_per_hour == 400
