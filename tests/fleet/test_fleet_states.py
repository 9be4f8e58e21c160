"""Pure rules: every instance state, exact label ownership, the search the
guardrails imply, and what a prover needs. Rows are shaped like the service's
(``cli/reference/show-instance.mdx``), including states the simulator's market
does not produce."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.config.settings import Settings
from fleet_agent.fleet.guardrails import gpu_allowed, offer_refusal, rent_refusal
from fleet_agent.fleet.labels import LabelTooLong, create_label, is_ours, parse_label
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.snapshot import summarize
from fleet_agent.models import AgentConfig
from fleet_agent.vast.models import Instance, Offer

NOW = 1_750_000_000.0


def _inst(iid: int, **fields: Any) -> Instance:
    row: dict[str, Any] = {
        "id": iid,
        "label": f"fleet-agent/a/r1-{iid:010x}",
        "actual_status": "running",
        "intended_status": "running",
        "cur_state": "running",
        "next_state": "running",
        "gpu_name": "RTX 4090",
        "num_gpus": 1,
        "cpu_ram": 128 * 1024,
        "dph_total": 0.5,
        # $/GB, as the service's rows carry it (simulator/instances.py copies the offer's).
        "inet_down_cost": 0.003,
        "start_date": NOW - 3600,
    }
    row.update(fields)
    return Instance.model_validate(row)


# ------------------------------------------------------------------ states


@pytest.mark.parametrize(
    ("fields", "state", "phase"),
    [
        ({}, "running", "running"),
        ({"actual_status": None}, "scheduling", "booting"),
        ({"actual_status": "loading"}, "loading", "booting"),
        ({"actual_status": "rebooting"}, "rebooting", "booting"),
        ({"actual_status": "stopped", "intended_status": "stopped"}, "stopped", "idle"),
        # Stopped by the host or an outbid bid: the renter still intends running.
        ({"actual_status": "stopped", "cur_state": "stopped"}, "stopped", "idle"),
        # The renter asked for a stop; the container is still running down.
        ({"intended_status": "stopped"}, "stopped", "idle"),
        ({"cur_state": "stopped", "next_state": "stopped"}, "stopped", "idle"),
        ({"actual_status": "frozen", "intended_status": "frozen"}, "frozen", "idle"),
        ({"actual_status": "exited"}, "exited", "dead"),
        ({"actual_status": "unknown"}, "unknown", "dead"),
        ({"actual_status": "offline"}, "offline", "dead"),
        ({"actual_status": "exited", "cur_state": "unloaded"}, "destroyed", "gone"),
        ({"actual_status": "destroyed"}, "destroyed", "gone"),
        ({"intended_status": "terminated"}, "destroyed", "gone"),
        ({"actual_status": "hibernating"}, "hibernating", "unrecognized"),
    ],
)
def test_every_state_has_a_phase(fields: dict[str, Any], state: str, phase: str) -> None:
    inst = _inst(1, **fields)
    assert (inst.state, inst.phase) == (state, phase)
    assert inst.is_running is (phase == "running")
    assert inst.is_gone is (phase == "gone")


def test_snapshot_counts_only_running_machines_and_says_what_to_do() -> None:
    rows = [
        _inst(1),
        _inst(2, actual_status="stopped", cur_state="stopped"),
        _inst(3, actual_status="frozen", intended_status="frozen"),
        _inst(4, actual_status="rebooting"),
        _inst(5, actual_status="exited", cur_state="unloaded", dph_total=9.0),
        _inst(6, actual_status="offline"),
    ]
    snap = summarize(rows, target=100, now_epoch=NOW)
    by_id = {i.id: i for i in snap.instances}
    assert sorted(by_id) == [1, 2, 3, 4, 6], "a destroyed row is no fleet member"
    assert by_id[1].proofs_per_hour > 0
    assert snap.capacity_proofs_per_hour == by_id[1].proofs_per_hour
    # A reboot comes back: expected capacity; stopped/frozen/dead do not.
    assert snap.expected_proofs_per_hour == pytest.approx(2 * by_id[1].proofs_per_hour, abs=0.2)
    assert by_id[2].expected_proofs_per_hour == by_id[3].expected_proofs_per_hour == 0
    assert "stopped" in by_id[2].note and "destroy" in by_id[2].note
    assert "frozen" in by_id[3].note and not by_id[4].note
    assert snap.fleet_dph == pytest.approx(0.5 * 5), "stopped and dead machines are billed"
    head = snap.to_text().splitlines()[0]
    assert "3 machine(s) are not capacity" in head and "replace or release" in head
    assert snap.to_text().splitlines()[1] == "```json", "one head line, then the rows"


def test_autopilot_replaces_stopped_and_frozen_machines_and_waits_for_a_reboot() -> None:
    rows = [
        _inst(1),
        _inst(2, actual_status="stopped", cur_state="stopped"),
        _inst(3, actual_status="frozen"),
        _inst(4, actual_status="rebooting", start_date=NOW - 5 * 3600),
        _inst(5, actual_status="loading", start_date=NOW - 3600),
        _inst(6, actual_status="hibernating"),
    ]
    snap = summarize(rows, target=1000, now_epoch=NOW)
    plan = plan_fleet([i.model_dump() for i in snap.instances], target=1000)
    destroyed = dict(plan.destroy)
    assert sorted(destroyed) == [2, 3, 5]
    assert "not capacity" in destroyed[2] and "stuck loading" in destroyed[5]
    # Running + rebooting count; the unknown status is neither counted nor destroyed.
    rate = snap.instances[0].expected_proofs_per_hour
    assert plan.expected_after == pytest.approx(2 * rate, abs=0.2)


def test_a_stopped_machine_counts_against_the_caps_until_destroyed() -> None:
    offer = _offer(dph_total=0.6)
    config = AgentConfig(max_instances=2, max_fleet_dph=1.5)
    fleet = [_inst(1), _inst(2, actual_status="stopped", cur_state="stopped")]
    assert "cap 2" in (rent_refusal(offer, fleet, config) or "")
    assert rent_refusal(offer, fleet[:1], config) is None


# ------------------------------------------------------------------ labels


def test_labels_are_parsed_exactly() -> None:
    mine = create_label("a", 3, "toolu_1")
    theirs = create_label("a/b", 3, "toolu_1")
    assert mine.startswith("fleet-agent/a/r3-") and theirs.startswith("fleet-agent/a/b/r3-")
    assert is_ours(mine, "a") and not is_ours(mine, "a/b")
    assert is_ours(theirs, "a/b") and not is_ours(theirs, "a"), "a prefix is not ownership"
    parsed = parse_label(theirs)
    assert parsed is not None and (parsed.agent_id, parsed.run) == ("a/b", 3)
    # An agent ID that looks like a label tail is still told apart.
    odd = create_label("x/r1-0123456789", 2, "t")
    assert is_ours(odd, "x/r1-0123456789") and not is_ours(odd, "x")
    for label in (
        None,
        "",
        "fleet-agent/a/",
        "fleet-agent/a",
        "fleet-agent//r1-0123456789",
        "fleet-agent/a/r1-0123456789/extra",
        "fleet-agent/a/r1-0123456789x",
        "fleet-agent/a/r01-0123456789",
        "fleet-agent/a/r1-ABCDEF0123",
        "fleet-agentx/a/r1-0123456789",
        "someone-else",
    ):
        assert parse_label(label) is None, label
        assert not is_ours(label, "a")


def test_labels_of_the_previous_version_are_still_ours() -> None:
    """Machines rented before exact parsing carry the same format."""
    assert is_ours("fleet-agent/fleet-agent/r41-3f2a9c01be", "fleet-agent")
    assert is_ours("fleet-agent/team/prod/r7-00ff00ff00", "team/prod")
    assert not is_ours("fleet-agent/team/prod/r7-00ff00ff00", "team")


def test_an_agent_id_too_long_for_a_label_is_refused() -> None:
    assert len(create_label("a" * 220, 10**6, "t")) <= 256
    with pytest.raises(LabelTooLong, match="at most 256"):
        create_label("a" * 250, 1, "t")
    with pytest.raises(ValueError):
        create_label("", 1, "t")


# ---------------------------------------------------------- search filters


def _offer(**fields: Any) -> Offer:
    row: dict[str, Any] = {
        "id": 1,
        "gpu_name": "A100 SXM4",
        "num_gpus": 1,
        "gpu_ram": 81920,
        # A "256 GB" host reports a little less (docs/SIMULATOR.md, "RAM mix").
        "cpu_ram": 250 * 1024,
        "dph_total": 0.9,
        "reliability2": 0.99,
        "reliability": 0.99,
        "rentable": True,
        "rented": False,
        "external": False,
        "verified": True,
        "inet_down": 800.0,
        "cuda_max_good": 12.4,
        "disk_space": 500.0,
        "direct_port_count": 20,
        # $/GB, as every offer row lists it (vast-cli `offers_fields`; simulator/catalogue.py).
        "inet_down_cost": 0.003,
    }
    row.update(fields)
    return Offer.model_validate(row)


CATALOGUE = [
    "A100 PCIE",
    "A100 SXM4",
    "A100X",
    "H100 NVL",
    "H100 SXM",
    "RTX 3060",
    "RTX 3090",
    "RTX 3090 Ti",
    "RTX 4090",
    "RTX 4090D",
]


def test_allowed_families_expand_to_the_markets_exact_names() -> None:
    names = allowed_gpu_names(["A100", "RTX 4090", "B200"], CATALOGUE)
    assert names == ["A100 PCIE", "A100 SXM4", "B200", "RTX 4090"]
    assert allowed_gpu_names(["A100", "RTX 4090"], CATALOGUE, "a100") == ["A100 PCIE", "A100 SXM4"]
    assert allowed_gpu_names(["RTX 3090"], CATALOGUE, "RTX 3090 Ti") == ["RTX 3090 Ti"]
    assert not gpu_allowed("A100X", ["A100"]) and not gpu_allowed("RTX 4090D", ["RTX 4090"])


def test_every_guardrail_and_need_is_a_search_filter() -> None:
    config = AgentConfig(max_instance_dph=1.2, min_reliability=0.95)
    prover = ProverSpec(disk_gb=80, min_cuda=12.2, min_inet_down_mbps=300, max_gpus=4)
    filters = offer_filters(config, prover, ["RTX 4090"], max_dph=5.0, min_reliability=0.5)
    assert filters == {
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "external": {"eq": False},
        "verified": {"eq": True},
        "gpu_name": {"in": ["RTX 4090"]},
        "num_gpus": {"gte": 1, "lte": 4},
        "cpu_ram": {"gte": 0.95 * 128 * 1024},  # cuzk's floor, for the machine (95 %)
        "reliability": {"gte": 0.95},  # the model may tighten, never loosen
        "dph_total": {"lte": 1.2},
        "inet_down_cost": {"lte": 0.02},  # max_inet_down_cost_per_tb 20 in $/GB
        "inet_down": {"gte": 300},
        "cuda_max_good": {"gte": 12.2},
        "disk_space": {"gte": 80},
        "duration": {"gte": 24 * 3600},
        "direct_port_count": {"gte": 1},
    }
    tighter = offer_filters(config, prover, [], max_dph=0.4, min_reliability=0.99)
    assert tighter["dph_total"] == {"lte": 0.4} and tighter["reliability"] == {"gte": 0.99}
    loose = offer_filters(
        config, ProverSpec(mode="curio_on_host", status_port=None, verified_only=False), []
    )
    assert "direct_port_count" not in loose and "verified" not in loose
    # Router mode maps the front's port: direct ports, whatever the status port.
    assert offer_filters(config, ProverSpec(verified_only=False), [])["direct_port_count"] == {
        "gte": 1
    }
    # CUDA: the least any GPU searched for needs, when over the image's minimum.
    assert offer_filters(config, prover, ["RTX 5090"])["cuda_max_good"] == {"gte": 12.8}
    assert offer_filters(config, prover, ["RTX 5090", "RTX 4090"])["cuda_max_good"] == {"gte": 12.2}
    assert offer_filters(config, prover, ["RTX 5090", "B300"])["cuda_max_good"] == {"gte": 12.2}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, None),
        ({"gpu_name": "RTX 3060"}, "not allowed"),
        ({"dph_total": 2.5}, "per-instance cap"),
        ({"reliability2": 0.5}, "reliability"),
        ({"rentable": False}, "not rentable"),
        ({"rented": True}, "not open to rent"),
        ({"external": True}, "not open to rent"),
        ({"verified": False}, "not verified"),
        ({"verified": None, "verification": "deverified"}, "not verified"),
        ({"num_gpus": 16, "cpu_ram": 2048 * 1024}, "16 GPUs"),
        ({"cpu_ram": 40 * 1024}, "RAM 40 GiB"),
        # cuzk needs 128 GiB (curio cuzk-proving-daemon.md): a "128 GB" host
        # reporting 125 GiB passes (95 % slack, as the image allows); 120 does not.
        ({"cpu_ram": 120 * 1024}, "RAM 120 GiB is under the 122 GiB"),
        ({"cpu_ram": 128 * 1024}, None),
        # A row lists the host's RAM: one GPU of an 8-GPU 256 GiB host gets 32 GiB.
        ({"cpu_ram": 256 * 1024, "gpu_frac": 0.125}, "RAM 32 GiB (12% of the host's 256 GiB)"),
        ({"cpu_ram": 1024 * 1024, "gpu_frac": 0.125}, None),  # 128 GiB: cuzk's floor
        # A 5090 (Blackwell) needs CUDA 12.8 from the driver, above the image's 12.0.
        ({"gpu_name": "RTX 5090", "cuda_max_good": 12.4}, "12.8 a «RTX 5090» needs"),
        ({"gpu_name": "RTX 5090", "cuda_max_good": 12.8}, None),
        ({"gpu_name": "RTX 5090", "compute_cap": 1200, "cuda_max_good": 12.6}, "12.8"),
        # The host's longest contract must cover the planned rental (24 h).
        ({"duration": 6 * 3600.0}, "longest contract is 6.0 h"),
        ({"duration": 30 * 86400.0}, None),
        # One cuzk daemon per machine: its floor is the machine's, not per GPU.
        ({"num_gpus": 4, "cpu_ram": 200 * 1024}, None),
        ({"num_gpus": 4, "cpu_ram": 120 * 1024}, "122 GiB a machine of 4 GPU(s) needs"),
        ({"disk_space": 50.0}, "disk"),
        ({"inet_down": 90.0}, "download 90 Mb/s"),
        ({"cuda_max_good": 11.8}, "CUDA 11.8"),
        ({"direct_port_count": 0}, "direct ports"),
        # Downloads: at most max_inet_down_cost_per_tb ($20/TB by default), and stated.
        ({"inet_down_cost": 0.02}, None),
        ({"inet_down_cost": 0.0201}, "downloads cost $20.10/TB, over the $20/TB cap"),
        ({"inet_down_cost": None}, "no usable download price"),
        ({"inet_down_cost": float("inf")}, "no usable download price"),
        # A field the offer does not carry is not held against it.
        ({"inet_down": None, "cuda_max_good": None, "verified": None}, None),
        ({"gpu_frac": None, "duration": None}, None),
    ],
)
def test_offers_are_checked_again_locally(fields: dict[str, Any], reason: str | None) -> None:
    refusal = offer_refusal(_offer(**fields), AgentConfig(), ProverSpec())
    if reason is None:
        assert refusal is None
    else:
        assert refusal is not None and reason in refusal, refusal


# ------------------------------------------------------------------ prover


def test_the_default_prover_runs_its_images_entrypoint_behind_the_router() -> None:
    """Router mode: the operator's env, the front's port and the machine's
    own credential, nothing else (no status port, no drain token); the
    old path: the sidecar's status port and the drain token."""
    prover = ProverSpec()
    assert prover.mode == "router" and prover.status_port is None
    assert prover.runtype == "args" and prover.args is None and prover.onstart is None
    own = {"FLEET_FRONT_KEY": "a2V5", "FLEET_FRONT_CERT": "Y2VydA==", "FLEET_ROUTER_CA": "Y2E="}
    assert ProverSpec(env={"A": "1"}).create_env("drain-token", machine_env=own) == {
        "A": "1",
        "-p 9821:9821": "1",
        **own,
    }
    assert ProverSpec(front_port=7000).create_env(machine_env=own)["-p 7000:7000"] == "1"
    with pytest.raises(ValueError, match="needs the machine's credential"):
        prover.create_env()
    with pytest.raises(ValidationError, match="is for FLEET_PROVER_MODE=curio_on_host"):
        ProverSpec(status_port=9100)
    old = ProverSpec(mode="curio_on_host")
    assert old.create_env() == {"-p 9100:9100": "1", "PROVER_STATUS_PORT": "9100"}
    assert old.create_env("t")["FLEET_DRAIN_TOKEN"] == "t"
    assert ProverSpec(mode="curio_on_host", status_port=None, env={"A": "1"}).create_env() == {
        "A": "1"
    }
    with pytest.raises(ValidationError, match="replaces the image's ENTRYPOINT"):
        ProverSpec(runtype="ssh")
    with pytest.raises(ValidationError, match="only passed with runtype 'args'"):
        ProverSpec(runtype="ssh", onstart="prove", args=["x"])
    with pytest.raises(ValidationError, match="runtype must be one of"):
        ProverSpec(runtype="bash")
    assert ProverSpec(runtype="ssh", onstart="/start-prover").onstart == "/start-prover"


def test_prover_settings_from_the_environment() -> None:
    prover = Settings.from_env(
        {
            "FLEET_PROVER_IMAGE": "ghcr.io/x/p:2",
            "FLEET_PROVER_DISK_GB": "100",
            "FLEET_PROVER_ARGS": "--engine cuzk --log 'a b'",
            "FLEET_PROVER_MODE": "curio_on_host",
            "FLEET_PROVER_STATUS_PORT": "9200",
        }
    ).prover
    assert prover.image == "ghcr.io/x/p:2" and prover.disk_gb == 100
    assert prover.args == ["--engine", "cuzk", "--log", "a b"] and prover.status_port == 9200
    old = Settings.from_env({"FLEET_PROVER_MODE": "curio_on_host"}).prover
    assert old.status_port == 9100
    assert Settings.from_env({"FLEET_PROVER_STATUS_PORT": "none"}).prover.status_port is None
    assert Settings.from_env({}).prover == ProverSpec()
    router = Settings.from_env({"FLEET_FRONT_PORT": "7000", "FLEET_ROUTER_CA_DIR": "/srv/ca"})
    assert router.prover.front_port == 7000 and str(router.router_ca_dir) == "/srv/ca"
    with pytest.raises(ValueError, match=r"^FLEET_PROVER_STATUS_PORT is for FLEET_PROVER_MODE"):
        Settings.from_env({"FLEET_PROVER_STATUS_PORT": "9200"})
    with pytest.raises(ValueError, match=r"^FLEET_PROVER_MODE must be 'router' or"):
        Settings.from_env({"FLEET_PROVER_MODE": "curio"})
    # One line naming the variable, not pydantic's report of ProverSpec.
    with pytest.raises(ValueError, match=r"^FLEET_PROVER_RUNTYPE: runtype 'ssh' replaces") as err:
        Settings.from_env({"FLEET_PROVER_RUNTYPE": "ssh"})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "runtype",
    [
        "args",
        "ssh",
        "ssh_proxy",
        "ssh_direc ssh_proxy",
        "jupyter_proxy ssh_proxy",
        "jupyter_direc ssh_direc ssh_proxy",
    ],
)
def test_runtypes_are_the_strings_the_vastai_cli_sends(runtype: str) -> None:
    """vast-cli ``vastai/cli/commands/instances.py``, ``get_runtype``: ``args``
    with --args, else ``ssh``; --ssh gives ``ssh_proxy`` (``ssh_direc
    ssh_proxy`` with --direct), --jupyter ``jupyter_proxy ssh_proxy``
    (``jupyter_direc ssh_direc ssh_proxy``). "direc", not "direct"."""
    onstart = None if runtype == "args" else "/start-prover"
    assert ProverSpec(runtype=runtype, onstart=onstart).runtype == runtype
    for invented in ("ssh_direct", "jupyter_direct", "direct"):
        with pytest.raises(ValidationError, match="runtype must be one of"):
            ProverSpec(runtype=invented, onstart="/start-prover")
