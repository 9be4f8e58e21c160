"""The official vastai CLI, run as a subprocess, against the simulator.

If the CLI can search, rent, list (all pages) and destroy against the
simulator, the simulator speaks the service's paths, payloads and pagination.
The CLI gets a throwaway HOME and XDG dirs, and ``VAST_URL`` points even its
built-in catalogue look-ups at the simulator: nothing leaves loopback.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from simulator import SimServer

KEY = "cli-test-key-42"
VASTAI = Path(sys.executable).with_name("vastai")

pytestmark = pytest.mark.skipif(not VASTAI.exists(), reason="the vastai CLI is not installed")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    # A small market, no pacing: the CLI's own 429 retries (3, within 0.7 s)
    # cannot outlast vast.ai's limits; `test_one_call_per_endpoint_...` runs
    # with them on.
    with SimServer(
        seed=11, speed=0, api_key=KEY, scenario="ideal", offers=1000, rate_limits=False
    ) as server:
        yield server


@pytest.fixture(scope="module")
def cli_env(sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("vastai-home")
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_DATA_HOME": str(home / "data"),
        # The CLI fetches its GPU-name list from $VAST_URL at import time.
        "VAST_URL": sim.url,
        "VASTAI_NO_UPDATE_CHECK": "1",
        "CI": "1",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


def vastai(
    sim: SimServer, env: dict[str, str], *args: str, key: str = KEY
) -> subprocess.CompletedProcess[str]:
    """Run ``vastai --url <sim> --api-key <key> ARGS`` and return the finished process."""
    return subprocess.run(
        [str(VASTAI), "--url", sim.url, "--api-key", key, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def raw_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_search_offers(sim: SimServer, cli_env: dict[str, str]) -> None:
    query = "gpu_name=RTX_4090 num_gpus=1 reliability>0.9 cpu_ram>=60"
    rows = raw_json(vastai(sim, cli_env, "search", "offers", query, "-o", "dph_total", "--raw"))
    assert rows, "the simulated market lists RTX 4090 offers"
    assert {r["gpu_name"] for r in rows} == {"RTX 4090"}
    assert all(r["num_gpus"] == 1 and r["reliability"] > 0.9 for r in rows)
    assert all(r["cpu_ram"] >= 60_000 for r in rows)  # the CLI sends GB x 1000 = MB
    # The CLI's default query: verified, rentable, not external.
    assert all(r["verified"] and r["rentable"] and not r["external"] for r in rows)
    prices = [r["dph_total"] for r in rows]
    assert prices == sorted(prices)

    table = vastai(sim, cli_env, "search", "offers", "gpu_name=RTX_4090", "-o", "dph_total")
    assert table.returncode == 0, table.stderr
    assert "RTX_4090" in table.stdout and str(rows[0]["id"]) in table.stdout

    # The CLI's start-up GPU-name look-up was answered by the simulator, too.
    cache = Path(cli_env["XDG_CACHE_HOME"]) / "vastai" / "gpu_names_cache.json"
    assert "RTX 4090" in json.loads(cache.read_text())["gpu_names"]


# A host a prover can run on: RAM for the parameters, disk for them, a card
# with enough memory, a recent driver, and open ports for the status endpoint.
PROVER_HOST = (
    "disk_space>=100 cpu_ram>=64 gpu_frac=1 gpu_ram>=12 cuda_max_good>=12.8 "
    "compute_cap>=700 direct_port_count>=3"
)


def test_search_offers_notin_machines_and_hosts(sim: SimServer, cli_env: dict[str, str]) -> None:
    """``notin`` on ``machine_id`` / ``host_id`` as the CLI sends it (values as
    strings), which is how the fleet leaves failed hosts out."""
    query = "gpu_name=RTX_4090 num_gpus=1"
    rows = raw_json(vastai(sim, cli_env, "search", "offers", query, "-o", "dph_total", "--raw"))
    assert len(rows) >= 4
    machines, host = [rows[0]["machine_id"], rows[1]["machine_id"]], rows[2]["host_id"]
    narrowed = f"{query} machine_id notin [{machines[0]},{machines[1]}] host_id notin [{host}]"
    left = raw_json(vastai(sim, cli_env, "search", "offers", narrowed, "-o", "dph_total", "--raw"))
    assert left and not {r["machine_id"] for r in left} & set(machines)
    assert host not in {r["host_id"] for r in left}
    assert {r["id"] for r in left} >= {r["id"] for r in rows[3:]}, "nothing else is left out"


def test_create_show_and_destroy(sim: SimServer, cli_env: dict[str, str]) -> None:
    query = PROVER_HOST
    offers = raw_json(vastai(sim, cli_env, "search", "offers", query, "-o", "dph_total", "--raw"))
    offer_id = offers[0]["id"]
    created = vastai(
        sim,
        cli_env,
        "create",
        "instance",
        str(offer_id),
        "--image",
        "ghcr.io/example/prover:1",
        "--disk",
        "80",
        "--label",
        "cli-made",
        "--env",
        "-e ROLE=prover",
        "--args",  # the image's own ENTRYPOINT: the prover starts
    )
    assert created.returncode == 0, created.stderr
    match = re.search(r"Started\. (\{.*\})", created.stdout)
    assert match, created.stdout
    answer = ast.literal_eval(match.group(1))  # the CLI prints a Python dict
    assert answer["success"] is True
    instance_id = answer["new_contract"]
    assert instance_id in sim.market.instance_ids()

    rows = raw_json(vastai(sim, cli_env, "show", "instances", "--raw"))
    mine = [r for r in rows if r["id"] == instance_id]
    assert len(mine) == 1
    assert mine[0]["label"] == "cli-made" and mine[0]["extra_env"] == {"ROLE": "prover"}
    assert mine[0]["disk_space"] == 80 and mine[0]["actual_status"] is None

    sim.market.advance(3600)
    one = raw_json(vastai(sim, cli_env, "show", "instance", str(instance_id), "--raw"))
    assert one["id"] == instance_id and one["actual_status"] == "running"
    assert "proofs_per_hour" not in one  # the prover's port tells, not the row
    port = one["ports"]["9100/tcp"][0]["HostPort"]  # the image EXPOSEs 9100
    # `show instance` passes the row as it comes (only `show instances` strips
    # its strings), and a third of the simulator's hosts pad their address.
    status = httpx.get(f"http://{one['public_ipaddr'].strip()}:{port}/status", timeout=5).json()
    assert status["phase"] in ("fetching_params", "starting", "proving")

    destroyed = vastai(sim, cli_env, "destroy", "instance", str(instance_id), "-y")
    assert destroyed.returncode == 0, destroyed.stderr
    assert f"destroying instance {instance_id}." in destroyed.stdout
    assert instance_id not in sim.market.instance_ids()
    gone = raw_json(vastai(sim, cli_env, "show", "instance", str(instance_id), "--raw"))
    assert gone == {"instances": None}


def test_show_instances_walks_every_page(sim: SimServer, cli_env: dict[str, str]) -> None:
    made = []
    rentable = sim.market.search_offers({"rentable": {"eq": True}, "limit": 30})
    for n, offer in enumerate(rentable):
        body = {"image": "img", "disk": 8, "label": f"bulk-{n}"}
        made.append(sim.market.rent(offer["id"], body).instance_id)
    rows = raw_json(vastai(sim, cli_env, "show", "instances", "--raw"))
    ids = [r["id"] for r in rows]
    assert set(made) <= set(ids)
    assert len(ids) == len(set(ids)) == len(sim.market.instance_ids()) > 25
    assert ids == sorted(ids)

    by_label = raw_json(vastai(sim, cli_env, "show", "instances", "--label", "bulk-3", "--raw"))
    assert [r["label"] for r in by_label] == ["bulk-3"]


def test_wrong_key_is_rejected(sim: SimServer, cli_env: dict[str, str]) -> None:
    proc = vastai(sim, cli_env, "show", "instances", "--raw", key="not-the-key")
    error = json.loads(proc.stderr.strip().splitlines()[-1])
    assert error["status_code"] == 401 and error["msg"] == "Invalid user key"
    assert proc.stdout.strip() == ""


def test_one_call_per_endpoint_goes_through_the_rate_limits(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    """With vast.ai's limits on (the default), a CLI session that calls each
    endpoint once works: search, create, list, show, destroy."""
    with SimServer(seed=12, speed=0, api_key=KEY, scenario="ideal", offers=1000) as limited:
        env = {**cli_env, "VAST_URL": limited.url, "HOME": str(tmp_path)}
        env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        query = PROVER_HOST
        offers = raw_json(vastai(limited, env, "search", "offers", query, "--raw"))
        created = vastai(
            limited,
            env,
            "create",
            "instance",
            str(offers[0]["id"]),
            "--image",
            "img",
            "--disk",
            "80",
        )
        assert created.returncode == 0 and "Started." in created.stdout, created.stderr
        (instance_id,) = limited.market.instance_ids()
        listed = raw_json(vastai(limited, env, "show", "instances", "--raw"))
        assert [r["id"] for r in listed] == [instance_id]
        one = raw_json(vastai(limited, env, "show", "instance", str(instance_id), "--raw"))
        assert one["id"] == instance_id
        gone = vastai(limited, env, "destroy", "instance", str(instance_id), "-y")
        assert gone.returncode == 0, gone.stderr
        assert limited.market.counters["rate_limited"] == 0


def test_default_search_and_an_entrypoint_create(sim: SimServer, cli_env: dict[str, str]) -> None:
    """``vastai search offers`` with only the CLI's default query, and a create
    with ``--args``: runtype ``args``, the image's own ENTRYPOINT."""
    rows = raw_json(vastai(sim, cli_env, "search", "offers", "--raw"))
    assert rows
    assert all(r["verified"] and r["rentable"] and not r["rented"] for r in rows)
    assert all(not r["external"] for r in rows)
    created = vastai(
        sim,
        cli_env,
        "create",
        "instance",
        str(rows[0]["id"]),
        "--image",
        "ghcr.io/example/prover:1",
        "--disk",
        "40",
        "--env",
        "-p 9100:9100",
        "--args",
    )
    assert created.returncode == 0, created.stderr
    match = re.search(r"Started\. (\{.*\})", created.stdout)
    assert match, created.stdout
    instance_id = ast.literal_eval(match.group(1))["new_contract"]
    one = raw_json(vastai(sim, cli_env, "show", "instance", str(instance_id), "--raw"))
    assert one["image_runtype"] == "args" and one["extra_env"] == {"-p 9100:9100": "1"}


def test_search_with_a_wrong_key_answers_404_invalid_user_key(
    sim: SimServer, cli_env: dict[str, str]
) -> None:
    proc = vastai(sim, cli_env, "search", "offers", "--raw", key="not-the-key")
    error = json.loads(proc.stderr.strip().splitlines()[-1])
    assert error["status_code"] == 404 and error["msg"] == "Invalid user key"
