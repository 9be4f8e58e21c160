"""What the prover image's tests share (tests/prover/test_prover_front.py,
tests/prover/test_prover_params.py): a machine's credential and environment as
prover_image/entrypoint.py reads them, every path under a test's folder."""

from __future__ import annotations

import os
from pathlib import Path

from fleet_agent.cuzk.credentials import Authority, machine_env
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def meminfo(directory: Path, gib: float) -> Path:
    """A /proc/meminfo with MemTotal `gib` GiB (the format cuzk's
    memory.rs detect_system_memory and the entrypoint read)."""
    path = directory / "meminfo"
    path.write_text(
        f"MemTotal:       {int(gib * 1024 * 1024)} kB\nMemFree:        1024 kB\n"
        "MemAvailable:   2048 kB\n"
    )
    return path


def machine_creds(authority: Authority, label: str) -> dict[str, str]:
    """The credential variables the worker gives machine `label`, without
    its front port (each test picks a free one)."""
    env = machine_env(authority.machine_credential(label), authority.ca_pem)
    del env["FLEET_FRONT_PORT"]
    return env


def entrypoint_env(
    tmp: Path, creds: dict[str, str], cuzk_bin: str, *, ram_gib: float = 256
) -> dict[str, str]:
    """The entrypoint's environment on loopback: `cuzk_bin` as cuzk, a
    machine of `ram_gib` GiB, its config, parameters, secrets and cgroup
    under `tmp`."""
    for name in ("cgroup", "shm"):
        (tmp / name).mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        **creds,
        "FLEET_FRONT_PORT": str(free_port()),
        "FLEET_FRONT_HOST": "127.0.0.1",
        "FLEET_CUZK_LISTEN": f"127.0.0.1:{free_port()}",
        "FLEET_CUZK_CONFIG": str(tmp / "zk" / "cuzk.toml"),
        "FIL_PROOFS_PARAMETER_CACHE": str(tmp / "params"),
        "FLEET_SECRETS_DIR": str(tmp / "shm"),
        "FLEET_MEMINFO": str(meminfo(tmp, ram_gib)),
        "FLEET_CGROUP_ROOT": str(tmp / "cgroup"),
        "FLEET_STOP_GRACE_S": "5",
        "CUZK_BIN": cuzk_bin,
    }
