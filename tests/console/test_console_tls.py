"""The console's transport (issue 51): with a certificate and key it serves
https (a `?token=` visit's cookie is then Secure); bound beyond loopback
without them it refuses to start (a usage error, exit 2) unless told
`--insecure-http`; certificate files that do not load are named. Against
`fleet-agent console` as a process, and the console inside `up`'s loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization

from starter.agent_client import AgentClient, CliError, UsageError
from starter.cli import main
from starter.console import ConsoleSettings, console_for_stack, running_console
from starter.console.auth import COOKIE
from starter.console.tls import console_tls
from tests.helpers import eventually
from tests.helpers.console_auth import ALICE, RecordingAgent
from tests.helpers.console_process import console_argv, console_env, stop
from tests.helpers.console_tls import CertFiles, cert_files
from tests.helpers.ports import free_port


@pytest.fixture
def certs(tmp_path: Path) -> CertFiles:
    return cert_files(tmp_path)


def _nothing_listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def test_with_a_certificate_and_key_the_console_serves_https(
    tmp_path: Path, certs: CertFiles
) -> None:
    """`fleet-agent console --host 0.0.0.0 --tls-cert CERT` with CONSOLE_TLS_KEY
    (an option and a variable): https only, the URL it prints says so, and the
    token visit's cookie is Secure."""
    port = free_port()
    env = console_env(tmp_path, CONSOLE_TOKEN=f"alice:{ALICE}", CONSOLE_TLS_KEY=str(certs.key))
    proc = await asyncio.create_subprocess_exec(
        *console_argv(port, "--tls-cert", str(certs.cert)),
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"https://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(verify=certs.client_context(), follow_redirects=True) as https:

            async def answered() -> httpx.Response | None:
                try:
                    return await https.get(f"{base}/runs?token={ALICE}")
                except httpx.TransportError:
                    return None

            landed = await eventually(answered, timeout=30, what="the console to answer")
            assert landed is not None
            # Followed: the 303 to the page without the token, with the cookie.
            assert landed.status_code in (200, 503) and str(landed.url) == f"{base}/runs"
            visit = landed.history[0]
            assert visit.status_code == 303 and visit.headers["location"] == "/runs"
            cookie = visit.headers["set-cookie"]
            assert cookie.startswith(f"{COOKIE}={ALICE};") and "; Secure" in cookie
            assert (await https.get(f"{base}/parts/agent")).status_code in (200, 502)
        async with httpx.AsyncClient() as plain:  # no plain http beside it
            with pytest.raises(httpx.TransportError):
                await plain.get(f"http://127.0.0.1:{port}/runs")
        async with httpx.AsyncClient() as untrusting:  # a certificate, not a bare TLS
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.get(f"{base}/runs")
    finally:
        out, err = await stop(proc)
    assert f"on https://0.0.0.0:{port}/" in out.decode(), (out, err)


def test_beyond_loopback_without_tls_it_refuses_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    for host in ("0.0.0.0", "::"):
        assert main(["console", "--host", host, "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"the console bound to {host} would send its token in the clear over http" in err
        assert "--tls-cert and --tls-key" in err and "--insecure-http" in err
        assert _nothing_listens(port)


async def test_insecure_http_serves_plain_http_beyond_loopback() -> None:
    settings = ConsoleSettings(tokens=(("alice", ALICE),))
    with pytest.raises(UsageError, match="in the clear over http"):
        async with running_console(RecordingAgent(), settings, host="0.0.0.0"):
            pass
    async with (
        running_console(RecordingAgent(), settings, host="0.0.0.0", insecure_http=True) as url,
        httpx.AsyncClient(follow_redirects=True) as http,
    ):
        assert url.startswith("http://")
        port = url.rsplit(":", 1)[1]
        visit = await http.get(f"http://127.0.0.1:{port}/parts/agent?token={ALICE}")
        assert visit.status_code == 200 and visit.history[0].status_code == 303
        assert "Secure" not in visit.history[0].headers["set-cookie"]


def test_a_certificate_without_its_key_is_a_usage_error(
    certs: CertFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["console", "--port", str(free_port()), "--tls-cert", str(certs.cert)]
    assert main(argv) == 2
    assert "--tls-cert needs --tls-key too" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--tls-key needs --tls-cert too"):
        console_tls(None, str(certs.key))


def _encrypted(certs: CertFiles, path: Path) -> Path:
    key = serialization.load_pem_private_key(certs.key.read_bytes(), password=None)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"a passphrase"),
        )
    )
    return path


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("missing", "console-key.pem.gone is not a file"),
        ("junk", "do not load ([SSL] PEM lib)"),
        ("other key", "do not load ([X509: KEY_VALUES_MISMATCH] key values mismatch)"),
        ("encrypted", "the key is encrypted; give it unencrypted"),
    ],
)
def test_a_certificate_and_key_that_do_not_load_are_named(
    tmp_path: Path, certs: CertFiles, which: str, message: str
) -> None:
    key = {
        "missing": tmp_path / "console-key.pem.gone",
        "junk": tmp_path / "junk.pem",
        "other key": tmp_path / "other.pem",
        "encrypted": tmp_path / "encrypted.pem",
    }[which]
    if which == "junk":
        key.write_text("not a key\n")
    elif which == "other key":
        (tmp_path / "other").mkdir()
        cert_files(tmp_path / "other").key.rename(key)
    elif which == "encrypted":
        _encrypted(certs, key)
    with pytest.raises(CliError) as refused:
        console_tls(str(certs.cert), str(key))
    assert not isinstance(refused.value, UsageError)  # exit 1, as a taken port
    assert message in str(refused.value)
    assert f"the console's TLS certificate {certs.cert} and key {key}" in str(refused.value)


async def test_the_stacks_console_serves_https_when_given_a_certificate(
    certs: CertFiles, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONSOLE_TLS_CERT", str(certs.cert))
    monkeypatch.setenv("CONSOLE_TLS_KEY", str(certs.key))
    agent: AgentClient = RecordingAgent()
    async with contextlib.AsyncExitStack() as exits:
        url = await console_for_stack(
            exits,
            agent,
            ui_url="http://127.0.0.1:8233",
            namespace="default",
            port=0,
            store_url=f"sqlite:///{tmp_path / 'none.db'}",
        )
        assert url.startswith("https://127.0.0.1:")
        async with httpx.AsyncClient(verify=certs.client_context(), follow_redirects=True) as https:
            assert (await https.get(url + "/parts/agent")).status_code == 200
