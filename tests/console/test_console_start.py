"""When `fleet-agent console` starts (issue 42): token settings parsed or
refused without echoing them, what counts as loopback, and a console bound
beyond loopback needs a token, or prints one once in a terminal, or does not
start; the last, against `fleet-agent console` as a process (plain http,
`--insecure-http`: the TLS rules are tests/console/test_console_tls.py's)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
import socket
from pathlib import Path

import httpx
import pytest

from starter.agent_client import CliError
from starter.console import ConsoleSettings, running_console
from starter.console.auth import is_loopback, parse_tokens
from starter.console.serve import with_token
from tests.helpers import eventually
from tests.helpers.console_auth import ALICE, BOB, RecordingAgent
from tests.helpers.console_process import console_argv, console_env, stop
from tests.helpers.ports import free_port


def test_console_tokens_are_named_or_one_bare_token() -> None:
    assert parse_tokens(None) == () and parse_tokens(" ") == ()
    assert parse_tokens(ALICE) == (("console", ALICE),)
    assert parse_tokens(f"alice:{ALICE}, bob@phone:{BOB}") == (
        ("alice", ALICE),
        ("bob@phone", BOB),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("short", "entry 1: the token must be 16-256 characters"),
        (f"alice:{ALICE},bob:short", "entry 2: the token must be"),
        (f"al ice:{ALICE}", "entry 1: the name must be"),
        (f":{ALICE}", "entry 1: the name must be"),
        (f"alice:{ALICE},alice:{BOB}", "each token needs its own name"),
        (f"alice:{ALICE},bob:{ALICE}", "two names share one token"),
    ],
)
def test_a_bad_console_token_setting_is_refused_without_echoing_it(raw: str, message: str) -> None:
    with pytest.raises(CliError, match=message) as refused:
        parse_tokens(raw)
    assert ALICE not in str(refused.value) and "short" not in str(refused.value)


def test_what_counts_as_loopback() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "fe80::1", "box.lan", ""):
        assert not is_loopback(host), host


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_a_non_loopback_console_gets_a_token_or_does_not_start() -> None:
    plain = ConsoleSettings()
    assert with_token(plain, "127.0.0.1", _Terminal(False)) == (plain, None)  # type: ignore[arg-type]
    named = ConsoleSettings(tokens=(("alice", ALICE),))
    assert with_token(named, "0.0.0.0", _Terminal(False)) == (named, None)  # type: ignore[arg-type]
    with pytest.raises(CliError, match="needs a token: set CONSOLE_TOKEN"):
        with_token(plain, "0.0.0.0", _Terminal(False))  # type: ignore[arg-type]
    made, token = with_token(plain, "10.0.0.5", _Terminal(True))  # type: ignore[arg-type]
    assert token is not None and len(token) >= 40
    assert made.tokens == (("console", token),)
    assert token not in repr(made), "settings may be logged: never with their tokens"
    again = with_token(plain, "10.0.0.5", _Terminal(True))[1]  # type: ignore[arg-type]
    assert again != token


async def test_running_console_refuses_a_non_loopback_bind_without_tokens() -> None:
    with pytest.raises(CliError, match="needs a token"):
        async with running_console(
            RecordingAgent(), ConsoleSettings(), host="0.0.0.0", insecure_http=True
        ):
            pass


async def _served(port: int, **headers: str) -> int:
    async def answered() -> int | None:
        try:
            async with httpx.AsyncClient() as http:
                got = await http.get(f"http://127.0.0.1:{port}/runs", headers=headers)
            return got.status_code
        except httpx.TransportError:
            return None

    code = await eventually(answered, timeout=30, what="the console to answer")
    assert code is not None
    return code


async def test_bound_beyond_loopback_without_a_token_or_terminal_it_does_not_start(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *console_argv(port),
        env=console_env(tmp_path),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:  # it started serving: end it, then fail
            proc.kill()
            await proc.wait()
    assert proc.returncode == 1, (out, err)
    assert "the console bound to 0.0.0.0 needs a token: set CONSOLE_TOKEN" in err.decode()
    with socket.socket() as probe:  # nothing listens
        assert probe.connect_ex(("127.0.0.1", port)) != 0


async def test_bound_beyond_loopback_with_console_token_it_needs_that_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *console_argv(port),
        env=console_env(tmp_path, CONSOLE_TOKEN=f"alice:{ALICE}"),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert await _served(port) == 401
        assert await _served(port, Authorization=f"Bearer {BOB}") == 401
        assert await _served(port, Authorization=f"Bearer {ALICE}") in (200, 503)
    finally:
        out, err = await stop(proc)
    assert ALICE not in out.decode() + err.decode(), "a configured token is never printed"


async def test_bound_beyond_loopback_in_a_terminal_it_prints_a_token_once(
    tmp_path: Path,
) -> None:
    port = free_port()
    main, child = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        *console_argv(port),
        env=console_env(tmp_path),
        cwd=tmp_path,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    os.set_blocking(main, False)
    printed = b""
    try:

        async def token_shown() -> str | None:
            nonlocal printed
            with contextlib.suppress(BlockingIOError):
                printed += os.read(main, 4096)
            found = re.search(rb"/\?token=([A-Za-z0-9_-]+)", printed)
            return found.group(1).decode() if found else None

        token = await eventually(token_shown, timeout=30, what="the token to be printed")
        assert token is not None
        assert f"http://127.0.0.1:{port}/?token={token}" in printed.decode()
        assert await _served(port) == 401
        assert await _served(port, Authorization=f"Bearer {token}") in (200, 503)
        assert printed.decode().count(token) == 2  # the URL and the header, once each
    finally:
        await stop(proc)
        os.close(main)
