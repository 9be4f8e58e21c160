"""The memory of failed hosts, on SQLite and PostgreSQL, and the rule of what it
leaves out (fleet_agent/fleet/failed_hosts.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.fleet.failed_hosts import exclusions, failed_host_refusal
from fleet_agent.fleet.offer_query import offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.provers import ProverTrack
from fleet_agent.models import AgentConfig
from fleet_agent.store import FailedHost, FailedHosts, ProverTracks, Store
from fleet_agent.vast.models import Offer
from tests.helpers.store_backends import store_on_both_backends  # noqa: F401  (a fixture)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_a_host_is_remembered_until_its_time_is_up(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=7, host_id=70, reason="exited", at=T0, until=T0 + HOUR)
    hosts.remember(
        "a", machine_id=8, host_id=None, reason="stuck", at=T0 + 60 * HOUR / 60, until=T0 + 2 * HOUR
    )
    assert [h.machine_id for h in hosts.active("a", T0 + HOUR / 2)] == [8, 7]
    assert [h.machine_id for h in hosts.active("a", T0 + HOUR)] == [8]
    assert hosts.active("a", T0 + 2 * HOUR) == []
    assert hosts.active("b", T0) == [], "another agent's failures are its own"


def test_a_second_failure_extends_the_entry(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=7, host_id=70, reason="exited", at=T0, until=T0 + HOUR)
    later = T0 + 3 * HOUR
    hosts.remember(
        "a", machine_id=7, host_id=70, reason="not proving", at=later, until=later + HOUR
    )
    [entry] = hosts.active("a", later)
    assert entry.reason == "not proving" and entry.until == later + HOUR


def test_expired_entries_are_forgotten_and_the_agent_deleted(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=1, host_id=None, reason="x", at=T0, until=T0 + HOUR)
    hosts.remember("a", machine_id=2, host_id=None, reason="y", at=T0, until=T0 + 5 * HOUR)
    assert hosts.forget_expired(T0 + 2 * HOUR) == 1
    assert [h.machine_id for h in hosts.active("a", T0)] == [2]
    store.delete_agent("a")
    assert hosts.active("a", T0) == []


# ------------------------------------------------------------ the host rule


def _entry(
    machine: int, host: int | None, *, hours: float = 1, reason: str = "exited"
) -> FailedHost:
    return FailedHost(
        machine_id=machine,
        host_id=host,
        reason=reason,
        failed_at=T0,
        until=T0 + hours * HOUR,
    )


def _offer(offer_id: int, machine: int, host: int | None) -> Offer:
    return Offer(
        id=offer_id,
        gpu_name="RTX 4090",
        num_gpus=1,
        dph_total=0.4,
        gpu_ram=24_564,
        cpu_ram=65_536,
        machine_id=machine,
        host_id=host,
    )


def test_every_failed_machine_is_left_out_but_a_host_only_after_two() -> None:
    one = exclusions([_entry(7, 70), _entry(8, 80), _entry(9, None)])
    machines, hosts = one
    assert machines == {7, 8, 9} and hosts == frozenset()
    assert not one.excludes(_offer(1, 17, 70)), "one broken machine leaves its host alone"
    assert one.excludes(_offer(2, 7, 70))

    two = exclusions([_entry(7, 70), _entry(17, 70), _entry(8, 80)])
    assert two.hosts == {70}
    assert two.excludes(_offer(3, 27, 70)), "a third machine of a host that failed twice"
    assert not two.excludes(_offer(4, 28, 80))
    assert not exclusions([]), "nothing remembered leaves nothing out"
    assert not exclusions([_entry(7, 70), _entry(7, 70)]).hosts, "machines are counted once"


def test_offer_filters_leave_out_machines_and_hosts_only_when_asked() -> None:
    plain = offer_filters(AgentConfig(), ProverSpec(), ["RTX 4090"])
    assert "machine_id" not in plain and "host_id" not in plain
    left_out = offer_filters(
        AgentConfig(), ProverSpec(), ["RTX 4090"], exclude_machines={9, 7}, exclude_hosts=[70]
    )
    assert left_out["machine_id"] == {"notin": [7, 9]}
    assert left_out["host_id"] == {"notin": [70]}
    assert {k: v for k, v in left_out.items() if k not in ("machine_id", "host_id")} == plain


def test_a_refusal_names_the_machine_or_host_why_when_and_until_when() -> None:
    entries = [_entry(7, 70, reason="stuck loading"), _entry(17, 70, hours=3), _entry(8, 80)]
    machine = failed_host_refusal(_offer(1, 7, 70), entries)
    assert machine is not None
    assert "machine 7" in machine and "stuck loading" in machine
    assert "2026-05-01 12:00 UTC" in machine and "until 2026-05-01 13:00 UTC" in machine

    host = failed_host_refusal(_offer(2, 27, 70), entries)
    assert host is not None and "host 70" in host
    assert "machine 7: stuck loading" in host and "machine 17: exited" in host
    # Left out while two machines are remembered: until the earlier entry ends.
    assert "until 2026-05-01 13:00 UTC" in host

    assert failed_host_refusal(_offer(3, 28, 80), entries) is None, "host 80 failed once"
    assert failed_host_refusal(_offer(4, 99, None), entries) is None


def test_prover_tracks_are_replaced_per_agent(store: Store) -> None:
    """The monitor's tracks (fa_prover_tracks) on both backends: a poll
    replaces its agent's tracks whole and leaves another agent's alone."""
    tracks = ProverTracks(store)
    first = {
        1: ProverTrack(instance_id=1, first_seen_at=1.0, last_read_at=2.0, progress_at=2.0),
        2: ProverTrack(
            instance_id=2,
            first_seen_at=1.0,
            last_read_at=2.0,
            progress_at=2.0,
            phase="proving",
            measured_proofs_per_hour=31.5,
        ),
    }
    tracks.replace("a", first, T0)
    tracks.replace("b", {9: first[1].model_copy(update={"instance_id": 9})}, T0)
    assert tracks.load("a") == first
    tracks.replace("a", {2: first[2].model_copy(update={"last_read_at": 3.0})}, T0 + HOUR)
    after = tracks.load("a")
    assert list(after) == [2] and after[2].last_read_at == 3.0
    assert after[2].measured_proofs_per_hour == 31.5
    assert list(tracks.load("b")) == [9]
    tracks.replace("a", {}, T0 + 2 * HOUR)
    assert tracks.load("a") == {} and list(tracks.load("b")) == [9]
