"""The prover image (prover_image/entrypoint.py, prover_image/front.py) run as
the image runs it, with a stand-in cuzk that speaks real gRPC
(tests/prover/cuzk_standin.py) as ``CUZK_BIN``, and the router's side of it
(fleet_agent/cuzk/channels.py ``machine_channel``): only the router gets
through the front, only to the machine it meant; cuzk is sized from the RAM
table of curio ``documentation/en/experimental-features/cuzk-proving-daemon.md``;
a bad start refuses clearly without showing a key; a dead cuzk takes the
machine down with it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fleet_agent.cuzk.channels import machine_channel
from fleet_agent.cuzk.credentials import (
    Authority,
    ClientCredential,
    _cert_pem,
    _key_pem,
    machine_env,
    server_name,
)
from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from prover_image import front
from simulator.snark import prove
from tests.helpers.ports import free_port
from tests.helpers.prover_image import ROOT, entrypoint_env, machine_creds
from tests.helpers.sim_cuzk import refused

STANDIN = ROOT / "tests" / "prover" / "cuzk_standin.py"
GIB = 1024**3
LABEL_A = "fleet-agent/main/r1-aaaaaaaaaa"
LABEL_B = "fleet-agent/main/r2-bbbbbbbbbb"
#: A refused call fails within this (a TLS refusal is immediate; grpc may
#: wait out its reconnect backoff, which is under a second at first).
REFUSED_S = 2.0
#: How a refused TLS handshake shows to a gRPC caller.
REFUSED_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass
class Machine:
    """One entrypoint process and what a test needs of it."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    config: Path
    pid_file: Path
    env_file: Path
    secrets: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # The stand-in, if the entrypoint left it (it must not).
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(self.pid_file.read_text()), signal.SIGKILL)


def base_env(tmp: Path, creds: dict[str, str], *, ram_gib: float = 256) -> dict[str, str]:
    return entrypoint_env(tmp, creds, f"{sys.executable} {STANDIN}", ram_gib=ram_gib) | {
        "CUZK_STANDIN_PID": str(tmp / "cuzk.pid"),
        "CUZK_STANDIN_ENV": str(tmp / "cuzk.env"),
        # The parameter fetch has its own tests (tests/prover/test_prover_params.py).
        "FLEET_SKIP_PARAMS": "1",
    }


def start(tmp: Path, env: dict[str, str]) -> Machine:
    log = tmp / "entrypoint.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prover_image.entrypoint"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Machine(
        proc=proc,
        port=int(env["FLEET_FRONT_PORT"]),
        log=log,
        config=Path(env["FLEET_CUZK_CONFIG"]),
        pid_file=Path(env["CUZK_STANDIN_PID"]),
        env_file=Path(env["CUZK_STANDIN_ENV"]),
        secrets=Path(env["FLEET_SECRETS_DIR"]),
    )


def run(tmp: Path, env: dict[str, str], timeout: float = 20) -> tuple[int, str]:
    """Run the entrypoint to its end: (exit status, its output)."""
    machine = start(tmp, env)
    try:
        code = machine.proc.wait(timeout)
    finally:
        machine.stop()
    return code, machine.text()


@pytest.fixture(scope="module")
def client(authority: Authority) -> ClientCredential:
    return authority.router_client()


@pytest.fixture(scope="module")
def creds_a(authority: Authority) -> dict[str, str]:
    return machine_creds(authority, LABEL_A)


@pytest.fixture(scope="module")
def machine_a(
    tmp_path_factory: pytest.TempPathFactory, creds_a: dict[str, str]
) -> Iterator[Machine]:
    """Machine A, running for the module's tests: the entrypoint, the stand-in, the front."""
    tmp = tmp_path_factory.mktemp("machine-a")
    machine = start(tmp, base_env(tmp, creds_a))
    deadline = time.monotonic() + 20
    while not machine.pid_file.exists():
        assert machine.proc.poll() is None, machine.text()
        assert time.monotonic() < deadline, machine.text()
        time.sleep(0.05)
    yield machine
    machine.stop()


async def get_status(channel: grpc.aio.Channel, timeout: float = REFUSED_S) -> pb.GetStatusResponse:
    async with channel:
        return await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=timeout)


async def logged(machine: Machine, after: int, needle: str, timeout: float = 5) -> str:
    """The front's log line after offset `after` that holds `needle`."""
    deadline = time.monotonic() + timeout
    while True:
        for line in machine.text()[after:].splitlines():
            if needle in line:
                return line
        assert time.monotonic() < deadline, f"no {needle!r} in:\n{machine.text()[after:]}"
        await asyncio.sleep(0.05)


def tls_channel(
    port: int, label: str, ca_pem: str, cert_pem: str | None, key_pem: str | None
) -> grpc.aio.Channel:
    """A channel like the router's, with the client certificate given (or none)."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca_pem.encode(),
        private_key=key_pem.encode() if key_pem else None,
        certificate_chain=cert_pem.encode() if cert_pem else None,
    )
    options = [
        *channel_options(),
        ("grpc.ssl_target_name_override", server_name(label)),
        # Its connection attempts end with it: a refusal in the log is its own.
        ("grpc.use_local_subchannel_pool", 1),
    ]
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)


# --- Through the front ---------------------------------------------------------------


async def eventually_status(machine: Machine, client: ClientCredential) -> pb.GetStatusResponse:
    """GetStatus once the stand-in listens (it starts beside the front)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return await get_status(machine_channel(f"127.0.0.1:{machine.port}", LABEL_A, client))
        except grpc.aio.AioRpcError:
            assert machine.proc.poll() is None, machine.text()
            assert time.monotonic() < deadline, machine.text()
            await asyncio.sleep(0.1)


async def test_the_router_reaches_cuzk_through_the_front(
    machine_a: Machine, client: ClientCredential
) -> None:
    status = await eventually_status(machine_a, client)
    assert [s.circuit_id for s in status.loaded_srs] == ["porep-32g"]
    # A proof's worth of input through the pipe and its answer back.
    submit = pb.SubmitProofRequest(
        request_id="porep-1000-7",
        proof_kind=pb.POREP_SEAL_COMMIT,
        vanilla_proof=os.urandom(3 * 1024 * 1024),
        miner_id=1000,
        sector_number=7,
    )
    async with machine_channel(f"127.0.0.1:{machine_a.port}", LABEL_A, client) as channel:
        answer = await ProvingEngineStub(channel).Prove(pb.ProveRequest(submit=submit), timeout=10)
    assert answer.result.status == pb.AwaitProofResponse.COMPLETED
    assert answer.result.proof == prove(submit)


async def test_every_fresh_connection_gets_through_at_once(
    machine_a: Machine, client: ClientCredential
) -> None:
    # A ClientHello that arrives before the front's accept callback runs must
    # reach TLS (front._Unread): lost, both sides would wait out the deadline.
    await eventually_status(machine_a, client)
    for _ in range(8):
        status = await get_status(machine_channel(f"127.0.0.1:{machine_a.port}", LABEL_A, client))
        assert status.gpus, "answered by the stand-in behind the front"


async def test_cuzk_gets_no_credential_and_none_is_left_on_disk(
    machine_a: Machine, client: ClientCredential
) -> None:
    await eventually_status(machine_a, client)
    names = machine_a.env_file.read_text().split()
    assert "FLEET_FRONT_PORT" in names
    assert not {"FLEET_FRONT_KEY", "FLEET_FRONT_CERT", "FLEET_ROUTER_CA"} & set(names)
    assert list(machine_a.secrets.iterdir()) == []


async def test_no_client_certificate_is_refused(
    machine_a: Machine, client: ClientCredential
) -> None:
    await eventually_status(machine_a, client)
    mark = len(machine_a.text())
    assert (
        await refused(tls_channel(machine_a.port, LABEL_A, client.ca_pem, None, None))
        in REFUSED_CODES
    )
    assert await logged(machine_a, mark, "PEER_DID_NOT_RETURN_A_CERTIFICATE")


async def test_a_client_certificate_of_another_ca_is_refused(
    machine_a: Machine, client: ClientCredential, tmp_path: Path
) -> None:
    await eventually_status(machine_a, client)
    stranger = Authority.load_or_create(tmp_path / "other-ca").router_client()
    mark = len(machine_a.text())
    # It trusts our CA for the server, so only the front can refuse it.
    assert (
        await refused(
            tls_channel(machine_a.port, LABEL_A, client.ca_pem, stranger.cert_pem, stranger.key_pem)
        )
        in REFUSED_CODES
    )
    assert await logged(machine_a, mark, "unable to get local issuer certificate")


async def test_another_machines_certificate_is_not_the_router(
    machine_a: Machine, client: ClientCredential, authority: Authority
) -> None:
    await eventually_status(machine_a, client)
    b = authority.machine_credential(LABEL_B)
    mark = len(machine_a.text())
    assert (
        await refused(tls_channel(machine_a.port, LABEL_A, client.ca_pem, b.cert_pem, b.key_pem))
        in REFUSED_CODES
    )
    # OpenSSL's purpose check on a client chain refuses serverAuth-only.
    assert await logged(machine_a, mark, "unsuitable certificate purpose")


async def test_a_client_certificate_not_named_fleet_router_is_refused(
    machine_a: Machine, client: ClientCredential, authority: Authority
) -> None:
    await eventually_status(machine_a, client)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = authority._issue(key, "intruder", 1, ExtendedKeyUsageOID.CLIENT_AUTH, None)
    mark = len(machine_a.text())
    assert await refused(
        tls_channel(machine_a.port, LABEL_A, client.ca_pem, _cert_pem(cert), _key_pem(key))
    )
    assert await logged(machine_a, mark, "client certificate CN is 'intruder', not 'fleet-router'")


async def test_the_router_refuses_a_machine_answering_for_another(
    machine_a: Machine, client: ClientCredential
) -> None:
    await eventually_status(machine_a, client)
    # The router dials machine B's address, and machine A answers there.
    assert (
        await refused(machine_channel(f"127.0.0.1:{machine_a.port}", LABEL_B, client))
        in REFUSED_CODES
    )


async def test_a_client_without_h2_is_dropped(machine_a: Machine, client: ClientCredential) -> None:
    await eventually_status(machine_a, client)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=client.ca_pem)
    ctx.set_alpn_protocols(["http/1.1"])
    key_file = machine_a.log.parent / "client.key"
    cert_file = machine_a.log.parent / "client.pem"
    key_file.write_text(client.key_pem)
    cert_file.write_text(client.cert_pem)
    ctx.load_cert_chain(cert_file, key_file)
    mark = len(machine_a.text())
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", machine_a.port, ssl=ctx, server_hostname=server_name(LABEL_A)
    )
    writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert await asyncio.wait_for(reader.read(100), 5) == b""
    writer.close()
    assert await logged(machine_a, mark, "ALPN did not settle on h2")


# --- The front's bounds, in process --------------------------------------------------


@pytest.fixture
async def small_front(
    authority: Authority, tmp_path: Path
) -> AsyncIterator[tuple[front.Front, int]]:
    cred = authority.machine_credential(LABEL_A)
    (tmp_path / "c.pem").write_text(cred.cert_pem)
    (tmp_path / "k.pem").write_text(cred.key_pem)
    ctx = front.server_context(str(tmp_path / "c.pem"), str(tmp_path / "k.pem"), authority.ca_pem)
    proxy = front.Front(ctx, ("127.0.0.1", free_port()), max_connections=1, handshake_s=0.3)
    server = await proxy.serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield proxy, port
    server.close()
    await proxy.close()


async def _closed_within(port: int, seconds: float) -> float:
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(reader.read(100), seconds) == b""
    writer.close()
    return time.monotonic() - began


async def test_a_silent_handshake_is_cut_at_its_bound(
    small_front: tuple[front.Front, int],
) -> None:
    _, port = small_front
    took = await _closed_within(port, 5)
    assert 0.2 < took < 3


async def test_connections_past_the_bound_are_closed_at_once(
    small_front: tuple[front.Front, int],
) -> None:
    proxy, port = small_front
    _held_reader, held = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(100):
        if proxy.open == 1:
            break
        await asyncio.sleep(0.01)
    assert proxy.open == 1
    # The second is closed before its handshake's bound (0.3 s) could pass.
    assert await _closed_within(port, 0.25) < 0.25
    held.close()


def test_extended_key_usages_are_read_from_der(
    authority: Authority, client: ClientCredential
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def der(pem: str) -> bytes:
        return x509.load_pem_x509_certificate(pem.encode()).public_bytes(serialization.Encoding.DER)

    assert front.extended_key_usages(der(client.cert_pem)) == {front.CLIENT_AUTH_OID}
    machine = authority.machine_credential(LABEL_A)
    assert front.extended_key_usages(der(machine.cert_pem)) == {bytes.fromhex("2b06010505070301")}
    assert front.extended_key_usages(der(authority.ca_pem)) is None
    with pytest.raises(ValueError):
        front.extended_key_usages(der(client.cert_pem)[:200])


class _Peer:
    """What `front.refusal` reads of a finished handshake (ssl.SSLObject's methods)."""

    def __init__(self, cert: x509.Certificate, alpn: str | None = "h2") -> None:
        self.cert, self.alpn = cert, alpn

    def selected_alpn_protocol(self) -> str | None:
        return self.alpn

    def getpeercert(self, binary_form: bool = False) -> object:
        if binary_form:
            return self.cert.public_bytes(serialization.Encoding.DER)
        cns = self.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return {"subject": tuple((("commonName", a.value),) for a in cns)}


def test_the_front_wants_fleet_router_for_client_authentication(authority: Authority) -> None:
    # A certificate OpenSSL's purpose check would already refuse: the front
    # refuses it itself too.
    def cert(cn: str, usage: x509.ObjectIdentifier) -> x509.Certificate:
        return authority._issue(ec.generate_private_key(ec.SECP256R1()), cn, 1, usage, None)

    def refusal(peer: _Peer) -> str | None:
        return front.refusal(peer)  # type: ignore[arg-type]

    assert refusal(_Peer(cert("fleet-router", ExtendedKeyUsageOID.CLIENT_AUTH))) is None
    assert "extKeyUsage" in str(
        refusal(_Peer(cert("fleet-router", ExtendedKeyUsageOID.SERVER_AUTH)))
    )
    assert "CN is 'm-x'" in str(refusal(_Peer(cert("m-x", ExtendedKeyUsageOID.CLIENT_AUTH))))
    assert "ALPN" in str(
        refusal(_Peer(cert("fleet-router", ExtendedKeyUsageOID.CLIENT_AUTH), alpn=None))
    )


# --- Start-up: sizing and refusals ---------------------------------------------------


def _true_cuzk(env: dict[str, str]) -> dict[str, str]:
    # A cuzk that ends at once: the config is written, the run stops.
    return {**env, "CUZK_BIN": "true"}


@pytest.mark.parametrize(
    ("ram_gib", "partitions", "gpu_workers"),
    [
        (125.5, 2, 1),
        (128, 2, 1),
        (256, 7, 1),
        (250, 7, 1),
        (384, 10, 2),
        (512, 12, 2),
        (2048, 12, 2),
    ],
)
def test_cuzk_is_sized_from_the_ram_table(
    tmp_path: Path, creds_a: dict[str, str], ram_gib: float, partitions: int, gpu_workers: int
) -> None:
    env = _true_cuzk(base_env(tmp_path, creds_a, ram_gib=ram_gib))
    code, out = run(tmp_path, env)
    assert code == 1 and "cuzk exited (0): stopping" in out, out
    config = tomllib.loads(Path(env["FLEET_CUZK_CONFIG"]).read_text())
    assert config["synthesis"]["partition_workers"] == partitions
    assert config["gpus"]["gpu_workers_per_device"] == gpu_workers
    assert config["daemon"] == {"listen": env["FLEET_CUZK_LISTEN"]}
    assert config["srs"] == {
        "param_cache": env["FIL_PROOFS_PARAMETER_CACHE"],
        "preload": ["porep-32g"],
    }
    assert config["memory"] == {"total_budget": f"{int(ram_gib) - 5}GiB"}


def test_the_container_limit_sizes_cuzk_not_the_hosts_ram(
    tmp_path: Path, creds_a: dict[str, str]
) -> None:
    env = _true_cuzk(base_env(tmp_path, creds_a, ram_gib=1024))
    (Path(env["FLEET_CGROUP_ROOT"]) / "memory.max").write_text(f"{256 * GIB}\n")
    run(tmp_path, env)
    config = tomllib.loads(Path(env["FLEET_CUZK_CONFIG"]).read_text())
    assert config["synthesis"]["partition_workers"] == 7
    assert config["memory"]["total_budget"] == "251GiB"


@pytest.mark.parametrize(("ram_gib", "cgroup_gib"), [(100, None), (121, None), (512, 64)])
def test_below_128_gib_it_refuses_to_start(
    tmp_path: Path, creds_a: dict[str, str], ram_gib: float, cgroup_gib: int | None
) -> None:
    env = base_env(tmp_path, creds_a, ram_gib=ram_gib)
    if cgroup_gib is not None:
        (Path(env["FLEET_CGROUP_ROOT"]) / "memory.max").write_text(str(cgroup_gib * GIB))
    code, out = run(tmp_path, env)
    assert code == 2, out
    assert "cuzk needs at least 128 GiB" in out
    assert not Path(env["FLEET_CUZK_CONFIG"]).exists()
    assert not Path(env["CUZK_STANDIN_PID"]).exists()


def _secret_fragments(creds: dict[str, str]) -> list[str]:
    """Pieces of the key as it may be shown: its base64 and its PEM body."""
    b64 = creds["FLEET_FRONT_KEY"]
    pem = base64.b64decode(b64).decode()
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    return [b64[i : i + 16] for i in range(0, len(b64) - 16, 16)] + [
        body[i : i + 16] for i in range(0, len(body) - 16, 16)
    ]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"FLEET_FRONT_KEY": None}, "FLEET_FRONT_KEY is not set"),
        ({"FLEET_FRONT_CERT": None}, "FLEET_FRONT_CERT is not set"),
        ({"FLEET_ROUTER_CA": None}, "FLEET_ROUTER_CA is not set"),
        ({"FLEET_FRONT_KEY": "not base64!"}, "FLEET_FRONT_KEY is not base64"),
        ({"FLEET_FRONT_PORT": "99999"}, "FLEET_FRONT_PORT is not a TCP port"),
        ({"FLEET_CUZK_LISTEN": "0.0.0.0:9820"}, "FLEET_CUZK_LISTEN must be a loopback"),
        ("swap-key", "the key is not the certificate's"),
        ("key-in-cert", "FLEET_FRONT_CERT does not hold a PEM certificate"),
    ],
)
def test_a_bad_setting_refuses_without_showing_the_key(
    tmp_path: Path,
    creds_a: dict[str, str],
    authority: Authority,
    change: dict[str, str | None] | str,
    says: str,
) -> None:
    env = base_env(tmp_path, creds_a)
    fragments = _secret_fragments(creds_a)
    if change == "swap-key":
        other = machine_env(authority.machine_credential(LABEL_B), authority.ca_pem)
        env["FLEET_FRONT_KEY"] = other["FLEET_FRONT_KEY"]
        fragments = _secret_fragments(other)
    elif change == "key-in-cert":
        env["FLEET_FRONT_CERT"] = env["FLEET_FRONT_KEY"]
    else:
        assert isinstance(change, dict)
        for name, value in change.items():
            if value is None:
                env.pop(name)
            else:
                env[name] = value
    code, out = run(tmp_path, env)
    assert code == 2, out
    assert says in out, out
    assert "PRIVATE KEY" not in out
    shown = [f for f in fragments if f in out]
    assert not shown, f"key material in the output: {shown}"
    assert not Path(env["CUZK_STANDIN_PID"]).exists()


# --- Lifetime ------------------------------------------------------------------------


def _wait_for(path: Path, machine: Machine, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() or not path.read_text():
        assert machine.proc.poll() is None, machine.text()
        assert time.monotonic() < deadline, machine.text()
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped by its parent.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


def test_a_dead_cuzk_takes_the_machine_down(tmp_path: Path, creds_a: dict[str, str]) -> None:
    machine = start(tmp_path, base_env(tmp_path, creds_a))
    try:
        _wait_for(machine.pid_file, machine)
        os.kill(int(machine.pid_file.read_text()), signal.SIGKILL)
        code = machine.proc.wait(10)
    finally:
        machine.stop()
    assert code == 128 + signal.SIGKILL, machine.text()
    assert "cuzk exited (-9): stopping" in machine.text()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", machine.port), timeout=1).close()


def test_sigterm_is_passed_on_to_cuzk(tmp_path: Path, creds_a: dict[str, str]) -> None:
    machine = start(tmp_path, base_env(tmp_path, creds_a))
    try:
        _wait_for(machine.pid_file, machine)
        pid = int(machine.pid_file.read_text())
        machine.proc.send_signal(signal.SIGTERM)
        code = machine.proc.wait(10)
    finally:
        machine.stop()
    assert code == 0, machine.text()
    assert "asked to stop: passing it on to cuzk" in machine.text()
    assert Path(f"{machine.pid_file}.sigterm").read_text() == "stopped by SIGTERM"
    assert not _alive(pid)
