"""The prover image's entrypoint: cuzk on loopback, the TLS front in front of it.

What it touches: its environment, ``/proc/meminfo`` and the cgroup memory
limit (to size cuzk), a private directory on tmpfs for the TLS files (gone
once loaded), cuzk's config file, and two children of its own: cuzk and, in
this process, the front (prover_image/front.py).

Environment (fleet_agent/cuzk/credentials.py ``machine_env`` writes the first four):

- ``FLEET_FRONT_CERT``, ``FLEET_FRONT_KEY``, ``FLEET_ROUTER_CA``: base64 of
  the machine's certificate, its key and the worker's CA certificate (PEM);
- ``FLEET_FRONT_PORT``: the front's port (default 9821);
- ``CUZK_BIN``: the command that runs cuzk (default ``cuzk``; split as a
  shell would, the config is appended as ``--config <file>``, curio
  ``extern/cuzk/cuzk-daemon/src/main.rs``);
- ``FLEET_CUZK_CONFIG``: where cuzk's TOML is written (default
  ``/data/zk/cuzk.toml``, cuzk's own default path);
- ``FLEET_CUZK_LISTEN``: cuzk's gRPC address, loopback (default ``127.0.0.1:9820``);
- ``FIL_PROOFS_PARAMETER_CACHE``: the proof parameters (default
  ``/var/tmp/filecoin-proof-parameters``, as Curio fetches them);
- ``FLEET_PARAMS_SECTOR_SIZE`` (default ``32GiB``), ``IPFS_GATEWAY``
  (default curio's, prover_image/params.py), ``FLEET_PARAMS_JSON`` and
  ``FLEET_SRS_JSON`` (the lists the image ships in ``/opt/fleet/proof-params``):
  what is fetched before cuzk starts; ``FLEET_SKIP_PARAMS=1`` fetches nothing
  (tests and stand-ins);
- ``FLEET_FRONT_HOST`` (default ``0.0.0.0``), ``FLEET_SECRETS_DIR`` (default
  ``/dev/shm``), ``FLEET_MEMINFO`` (default ``/proc/meminfo``),
  ``FLEET_CGROUP_ROOT`` (default ``/sys/fs/cgroup``), ``FLEET_STOP_GRACE_S``
  (default 30): for tests and odd hosts.

It refuses to start (exit 2, one line saying which value and why, never a
value) on a missing or malformed credential or setting, and below
`MIN_RAM_GIB` of RAM. It fetches and verifies the proof parameters
(prover_image/params.py) before cuzk starts, and exits 3 with one line
saying why when they cannot be had.
It exits when cuzk exits or the front fails, so a broken machine shows dead
rather than half alive, and passes SIGTERM (and SIGINT) on to cuzk.

Standard library only (Python 3.11+), like sidecar/fleet_status.py.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import shlex
import shutil
import signal
import ssl
import sys
import tempfile
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from prover_image import front, params

GIB = 1024**3
#: curio documentation/en/experimental-features/cuzk-proving-daemon.md,
#: "Requirements": minimum 128 GiB of system RAM.
MIN_RAM_GIB = 128
#: MemTotal is the RAM less what firmware and the kernel keep (1-3 %), so a
#: 128 GiB machine reads about 125 GiB; a tier is met within 5 % of its size.
#: cuzk's peak at 2 partition workers is ~110 GiB (the same page's table).
RAM_SLACK = 0.95
#: The same page's "RAM-based tuning" table: (system RAM GiB,
#: [synthesis] partition_workers, [gpus] gpu_workers_per_device), largest first.
TIERS: tuple[tuple[int, int, int], ...] = (
    (512, 12, 2),
    (384, 10, 2),
    (256, 7, 1),
    (128, 2, 1),
)
#: cuzk's own safety margin under an "auto" budget (curio
#: extern/cuzk/cuzk-core/src/config.rs, MemoryConfig::default_safety_margin).
SAFETY_MARGIN_GIB = 5
#: Curio's SNARK circuits it is sent (srs_manager.rs circuit ids).
PRELOAD = ("porep-32g",)
#: Where the image keeps the parameter lists (prover_image/Dockerfile copies
#: them from lotus build/proof-params, the files curio embeds).
PARAMS_JSON = "/opt/fleet/proof-params/parameters.json"
SRS_JSON = "/opt/fleet/proof-params/srs-inner-product.json"
#: The entrypoint's exit status when the parameters cannot be had.
EXIT_PARAMS = 3


class Refusal(Exception):
    """A reason not to start; its message names the setting, never its value."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the environment says, checked."""

    cert_pem: str
    key_pem: str
    ca_pem: str
    front_host: str
    front_port: int
    cuzk_command: list[str]
    cuzk_config: Path
    cuzk_listen: tuple[str, int]
    param_cache: str
    secrets_dir: str
    meminfo: Path
    cgroup_root: Path
    stop_grace_s: float
    #: None: FLEET_SKIP_PARAMS=1, nothing is fetched.
    params: ParamsSettings | None

    def __repr__(self) -> str:  # the key never reaches a log through repr
        return f"Settings(front={self.front_host}:{self.front_port}, cuzk={self.cuzk_listen})"


@dataclass(frozen=True, slots=True)
class ParamsSettings:
    """What to fetch before cuzk starts, and from where."""

    sector_size: int
    gateway: str
    parameters_json: Path
    srs_json: Path


@dataclass(frozen=True, slots=True)
class Sizing:
    """cuzk's settings for this machine's RAM."""

    ram_bytes: int
    partition_workers: int
    gpu_workers_per_device: int
    total_budget_gib: int


def _pem(env: Mapping[str, str], name: str, marker: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise Refusal(f"{name} is not set (base64 of a PEM {marker.lower()})")
    try:
        text = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        raise Refusal(f"{name} is not base64 of ASCII text") from None
    if f"-----BEGIN {marker}-----" not in text and not (
        marker == "PRIVATE KEY" and "PRIVATE KEY-----" in text
    ):
        raise Refusal(f"{name} does not hold a PEM {marker.lower()}")
    return text


def _port(text: str, name: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise Refusal(f"{name} is not a TCP port (1-65535)")
    return int(text)


def read_settings(env: Mapping[str, str]) -> Settings:
    """The settings, or Refusal naming the first bad one."""
    cert = _pem(env, "FLEET_FRONT_CERT", "CERTIFICATE")
    key = _pem(env, "FLEET_FRONT_KEY", "PRIVATE KEY")
    ca = _pem(env, "FLEET_ROUTER_CA", "CERTIFICATE")
    port = _port(env.get("FLEET_FRONT_PORT", "9821").strip(), "FLEET_FRONT_PORT")
    command = shlex.split(env.get("CUZK_BIN", "cuzk"))
    if not command:
        raise Refusal("CUZK_BIN is empty")
    host, sep, cuzk_port = env.get("FLEET_CUZK_LISTEN", "127.0.0.1:9820").rpartition(":")
    if not sep or host not in ("127.0.0.1", "localhost", "[::1]"):
        # cuzk speaks gRPC in the clear: only the front may face the network.
        raise Refusal("FLEET_CUZK_LISTEN must be a loopback host:port")
    try:
        grace = float(env.get("FLEET_STOP_GRACE_S", "30"))
    except ValueError:
        raise Refusal("FLEET_STOP_GRACE_S is not a number") from None
    if not 0 <= grace <= 600:
        raise Refusal("FLEET_STOP_GRACE_S is not within 0-600 s")
    skip = env.get("FLEET_SKIP_PARAMS", "").strip()
    if skip not in ("", "0", "1"):
        raise Refusal("FLEET_SKIP_PARAMS is not 0 or 1")
    return Settings(
        cert_pem=cert,
        key_pem=key,
        ca_pem=ca,
        front_host=env.get("FLEET_FRONT_HOST", "0.0.0.0"),
        front_port=port,
        cuzk_command=command,
        cuzk_config=Path(env.get("FLEET_CUZK_CONFIG", "/data/zk/cuzk.toml")),
        cuzk_listen=(host.strip("[]"), _port(cuzk_port, "FLEET_CUZK_LISTEN")),
        param_cache=env.get("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/filecoin-proof-parameters"),
        secrets_dir=env.get("FLEET_SECRETS_DIR", "/dev/shm"),
        meminfo=Path(env.get("FLEET_MEMINFO", "/proc/meminfo")),
        cgroup_root=Path(env.get("FLEET_CGROUP_ROOT", "/sys/fs/cgroup")),
        stop_grace_s=grace,
        params=None if skip == "1" else read_params_settings(env),
    )


def read_params_settings(env: Mapping[str, str]) -> ParamsSettings:
    """The parameter fetch's settings, or Refusal naming the first bad one."""
    try:
        sector = params.parse_sector_size(env.get("FLEET_PARAMS_SECTOR_SIZE", "32GiB"))
    except ValueError:
        raise Refusal("FLEET_PARAMS_SECTOR_SIZE is not a size such as 32GiB") from None
    # Curio's rule: $IPFS_GATEWAY when set, its own gateway otherwise.
    gateway = env.get("IPFS_GATEWAY", "").strip() or params.DEFAULT_GATEWAY
    parts = urllib.parse.urlsplit(gateway)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal("IPFS_GATEWAY is not an http(s) URL")
    return ParamsSettings(
        sector_size=sector,
        gateway=gateway,
        parameters_json=Path(env.get("FLEET_PARAMS_JSON", PARAMS_JSON)),
        srs_json=Path(env.get("FLEET_SRS_JSON", SRS_JSON)),
    )


def read_lists(p: ParamsSettings) -> tuple[bytes, bytes]:
    """The two parameter lists, checked to name a .params file of the size;
    Refusal naming the setting otherwise."""
    texts = []
    for name, path in (("FLEET_PARAMS_JSON", p.parameters_json), ("FLEET_SRS_JSON", p.srs_json)):
        try:
            texts.append(path.read_bytes())
        except OSError as exc:
            raise Refusal(f"{name}: cannot read {path}: {exc.strerror}") from None
    try:
        params.plan(texts[0], texts[1], p.sector_size)
    except params.FetchError as exc:
        raise Refusal(
            f"FLEET_PARAMS_SECTOR_SIZE, FLEET_PARAMS_JSON, FLEET_SRS_JSON: {exc}"
        ) from None
    return texts[0], texts[1]


def mem_total(meminfo: Path) -> int:
    """MemTotal in bytes (the line ``MemTotal: <n> kB``); Refusal without it."""
    try:
        lines = meminfo.read_text().splitlines()
    except OSError as exc:
        raise Refusal(f"cannot read {meminfo}: {exc.strerror}") from None
    for line in lines:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name == "MemTotal" and len(fields) == 2 and fields[1] == "kB" and fields[0].isdigit():
            return int(fields[0]) * 1024
    raise Refusal(f"{meminfo} has no MemTotal line")


def cgroup_limit(root: Path) -> int | None:
    """The container's memory limit in bytes, if one is set: a container
    sees the host's MemTotal, and cuzk sized to that would be killed."""
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        # cgroup v1 writes "no limit" as a huge number near 2**63.
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def sizing(ram_bytes: int) -> Sizing:
    """cuzk's settings for `ram_bytes` of usable RAM; Refusal below the minimum."""
    for gib, partitions, gpu_workers in TIERS:
        if ram_bytes >= gib * GIB * RAM_SLACK:
            return Sizing(
                ram_bytes=ram_bytes,
                partition_workers=partitions,
                gpu_workers_per_device=gpu_workers,
                total_budget_gib=max(1, ram_bytes // GIB - SAFETY_MARGIN_GIB),
            )
    raise Refusal(
        f"this machine has {ram_bytes / GIB:.1f} GiB of RAM; cuzk needs at least "
        f"{MIN_RAM_GIB} GiB (curio cuzk-proving-daemon.md, Requirements)"
    )


def _toml_str(text: str) -> str:
    if any(ord(c) < 0x20 or c == "\x7f" for c in text):
        raise Refusal("a path for cuzk's config holds a control character")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cuzk_toml(settings: Settings, size: Sizing) -> str:
    """cuzk's config. Keys, from curio extern/cuzk/cuzk-core/src/config.rs
    (``Config``) and extern/cuzk/cuzk.example.toml, and the values from
    documentation/en/experimental-features/cuzk-proving-daemon.md."""
    host, port = settings.cuzk_listen
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    preload = ", ".join(_toml_str(c) for c in PRELOAD)
    return "\n".join(
        [
            "# Written by the fleet prover image (prover_image/entrypoint.py) at start.",
            f"# Usable RAM {size.ram_bytes / GIB:.1f} GiB (MemTotal, capped by the cgroup).",
            "",
            "[daemon]",
            "# DaemonConfig.listen: loopback; the TLS front is the way in.",
            f"listen = {_toml_str(listen)}",
            "# DaemonConfig.status_listen is left empty (disabled): the example's",
            "# 0.0.0.0:9821 is the front's port.",
            "",
            "[srs]",
            "# SrsConfig.param_cache: where the v28-*.params files are.",
            f"param_cache = {_toml_str(settings.param_cache)}",
            "# SrsConfig.preload: the documented minimal configuration's; config.rs",
            "# at the pinned commit reads it as deprecated (SRS loads on first proof).",
            f"preload = [{preload}]",
            "",
            "[memory]",
            "# MemoryConfig.total_budget: what this container may use, less cuzk's",
            '# default 5 GiB safety margin ("auto" would read the host\'s MemTotal).',
            f'total_budget = "{size.total_budget_gib}GiB"',
            "",
            "[gpus]",
            "# GpuConfig.gpu_workers_per_device, from the RAM table; devices = [] (all).",
            f"gpu_workers_per_device = {size.gpu_workers_per_device}",
            "",
            "[synthesis]",
            "# SynthesisConfig.partition_workers, from the RAM table (deprecated at the",
            "# pinned commit: the memory budget sets concurrency there).",
            f"partition_workers = {size.partition_workers}",
            "",
        ]
    )


def _write_private(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The front's TLS context, from files in a private directory (0700, on
    tmpfs when it can) that are removed once loaded: the key stays in this
    process's memory only."""
    base = settings.secrets_dir if os.path.isdir(settings.secrets_dir) else None
    directory = tempfile.mkdtemp(prefix="fleet-front-", dir=base)
    try:
        cert = _write_private(directory, "cert.pem", settings.cert_pem)
        key = _write_private(directory, "key.pem", settings.key_pem)
        try:
            return front.server_context(cert, key, settings.ca_pem)
        except ssl.SSLError as exc:
            raise Refusal(
                "FLEET_FRONT_CERT, FLEET_FRONT_KEY and FLEET_ROUTER_CA do not make a TLS "
                f"server: the key is not the certificate's, or one is not what it "
                f"should be ({exc.reason or 'unreadable'})"
            ) from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """cuzk's environment: ours without the credentials (it has no use for them)."""
    return {
        k: v
        for k, v in env.items()
        if k not in ("FLEET_FRONT_CERT", "FLEET_FRONT_KEY", "FLEET_ROUTER_CA")
    }


def say(message: str) -> None:
    """One line on stderr (the container's log)."""
    print(f"entrypoint: {message}", file=sys.stderr, flush=True)


async def run(settings: Settings, context: ssl.SSLContext, env: Mapping[str, str]) -> int:
    """Run the front and cuzk until one of them ends or a signal says stop."""
    proxy = front.Front(context, settings.cuzk_listen)
    try:
        server = await proxy.serve(settings.front_host, settings.front_port)
    except OSError as exc:
        say(f"the front cannot listen on {settings.front_host}:{settings.front_port}: {exc}")
        return 1
    try:
        cuzk = await asyncio.create_subprocess_exec(
            *settings.cuzk_command, "--config", str(settings.cuzk_config), env=child_env(env)
        )
    except OSError as exc:
        say(f"cannot start cuzk ({settings.cuzk_command[0]}): {exc.strerror or exc}")
        server.close()
        return 1
    say(
        f"cuzk pid {cuzk.pid} on {settings.cuzk_listen[0]}:{settings.cuzk_listen[1]}, "
        f"front on {settings.front_host}:{settings.front_port}"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waits = {
        "cuzk": asyncio.create_task(cuzk.wait()),
        "front": asyncio.create_task(server.serve_forever()),
        "stop": asyncio.create_task(stop.wait()),
    }
    done, _ = await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if waits["cuzk"] in done:
        rc = cuzk.returncode if cuzk.returncode is not None else 1
        say(f"cuzk exited ({rc}): stopping")
        # cuzk ending at all is a failure here; killed by a signal: 128 + it.
        code = rc if rc > 0 else 128 - rc if rc < 0 else 1
    elif waits["front"] in done:
        failed = None if waits["front"].cancelled() else waits["front"].exception()
        say(f"the front stopped ({type(failed).__name__ if failed else 'closed'}): stopping")
        code = 1
    else:
        say("asked to stop: passing it on to cuzk")
    server.close()
    await proxy.close()
    if cuzk.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            cuzk.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(waits["cuzk"], settings.stop_grace_s)
        except TimeoutError:
            say(f"cuzk still running after {settings.stop_grace_s:g} s: killing it")
            with contextlib.suppress(ProcessLookupError):
                cuzk.kill()
            await cuzk.wait()
    for task in waits.values():
        task.cancel()
    await asyncio.gather(*waits.values(), return_exceptions=True)
    return code


def main(env: Mapping[str, str] | None = None) -> int:
    """Check, size, write the config, run; the exit status (2: refused)."""
    env = dict(os.environ if env is None else env)
    try:
        settings = read_settings(env)
        ram = mem_total(settings.meminfo)
        limit = cgroup_limit(settings.cgroup_root)
        size = sizing(min(ram, limit) if limit is not None else ram)
        lists = read_lists(settings.params) if settings.params is not None else None
        context = tls_context(settings)
        settings.cuzk_config.parent.mkdir(parents=True, exist_ok=True)
        settings.cuzk_config.write_text(cuzk_toml(settings, size))
    except Refusal as exc:
        say(f"refusing to start: {exc}")
        return 2
    except OSError as exc:
        say(f"refusing to start: cannot write {exc.filename}: {exc.strerror}")
        return 2
    say(
        f"{size.ram_bytes / GIB:.1f} GiB usable: partition_workers={size.partition_workers}, "
        f"gpu_workers_per_device={size.gpu_workers_per_device}; config {settings.cuzk_config}"
    )
    if settings.params is None or lists is None:
        say("FLEET_SKIP_PARAMS=1: the proof parameters are not fetched")
    else:
        try:
            params.fetch(
                settings.param_cache,
                lists[0],
                lists[1],
                settings.params.sector_size,
                settings.params.gateway,
            )
        except params.FetchError as exc:
            say(f"cannot fetch the proof parameters: {exc}")
            return EXIT_PARAMS
    return asyncio.run(run(settings, context, env))


if __name__ == "__main__":
    sys.exit(main())
