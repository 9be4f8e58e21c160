"""The TLS front of a rented machine: the router's only way in to cuzk.

cuzk serves gRPC in the clear (curio ``lib/cuzk/client.go`` dials it
insecure) and here listens on 127.0.0.1 only. The front listens on
``0.0.0.0:$FLEET_FRONT_PORT``, terminates TLS with the machine's own
certificate, and lets through only the router: a client certificate is
required, verified against the worker's CA (``FLEET_ROUTER_CA``, the only
trust anchor), and its subject must be CN ``fleet-router`` with the
clientAuth extended key usage; ALPN must settle on ``h2`` (gRPC runs on
HTTP/2 and grpc's client refuses a TLS peer without it). Anything else is
dropped after the handshake, before a byte reaches cuzk. Then it copies
bytes both ways between the router and cuzk (``127.0.0.1:9820``).

Bounded: a handshake gets `HANDSHAKE_S`, at most `MAX_CONNECTIONS` are open
(the router keeps one or two), and cuzk's connect gets `UPSTREAM_CONNECT_S`.
Its log (stderr) names peers and why one was refused; it never holds key
material.

Standard library only (Python 3.11+), like sidecar/fleet_status.py;
prover_image/entrypoint.py builds the context (`server_context`) and runs
`Front.serve` beside cuzk.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
from collections.abc import Iterator
from typing import Any

ROUTER_CN = "fleet-router"
#: OID bodies (DER, without tag and length) of id-ce-extKeyUsage 2.5.29.37
#: and id-kp-clientAuth 1.3.6.1.5.5.7.3.2 (RFC 5280 4.2.1.12).
EKU_OID = bytes.fromhex("551d25")
CLIENT_AUTH_OID = bytes.fromhex("2b06010505070302")

HANDSHAKE_S = 10.0
UPSTREAM_CONNECT_S = 5.0
MAX_CONNECTIONS = 32
#: A PoRep's vanilla proof is 50-200 MB; copy it in chunks this size.
CHUNK = 256 * 1024


def log(message: str) -> None:
    """One line on stderr (the container's log)."""
    print(f"front: {message}", file=sys.stderr, flush=True)


def server_context(cert_file: str, key_file: str, ca_pem: str) -> ssl.SSLContext:
    """TLS 1.2+ with the machine's certificate, a client certificate required
    and verified against `ca_pem` alone, ALPN ``h2``. Raises ssl.SSLError for
    a key that is not the certificate's, or a CA that is no certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # TLS 1.2: forward-secret AEAD suites only (1.3's are all of that kind).
    ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    # No resumption: every connection shows, and has checked, its certificate.
    ctx.options |= ssl.OP_NO_TICKET
    ctx.num_tickets = 0
    ctx.load_cert_chain(cert_file, key_file)
    # No default roots: the worker's CA is the only one.
    ctx.load_verify_locations(cadata=ca_pem)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.set_alpn_protocols(["h2"])
    return ctx


# A server's OpenSSL checks a client's chain for the "SSL client" purpose,
# which refuses an extended key usage without clientAuth; the front checks it
# again itself (below), so the rule holds whatever the library's defaults.


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start, end) of the DER element at `pos`; ValueError if malformed."""
    if pos + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if not 1 <= n <= 4 or pos + n > len(der):
            raise ValueError("bad DER length")
        length = int.from_bytes(der[pos : pos + n], "big")
        pos += n
    if pos + length > len(der):
        raise ValueError("DER element overruns")
    return tag, pos, pos + length


def _children(der: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    pos = start
    while pos < end:
        tag, s, e = _tlv(der, pos)
        yield tag, s, e
        pos = e


def extended_key_usages(der: bytes) -> set[bytes] | None:
    """The key purposes (OID bodies) a DER certificate's extKeyUsage lists, or
    None when it has none; ValueError for a certificate it cannot read."""
    _, s, e = _tlv(der, 0)  # Certificate
    _, s, e = _tlv(der, s)  # tbsCertificate
    for tag, cs, _ce in _children(der, s, e):
        if tag != 0xA3:  # [3] extensions
            continue
        _, xs, xe = _tlv(der, cs)
        for _, es, ee in _children(der, xs, xe):
            parts = list(_children(der, es, ee))
            if not parts or parts[0][0] != 0x06 or der[parts[0][1] : parts[0][2]] != EKU_OID:
                continue
            vtag, vs, _ve = parts[-1]
            if vtag != 0x04:
                raise ValueError("extKeyUsage value is not an OCTET STRING")
            _, ss, se = _tlv(der, vs)
            return {der[a:b] for t, a, b in _children(der, ss, se) if t == 0x06}
    return None


def refusal(tls: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """Why the peer of a finished handshake is not the router (None: it is)."""
    if tls is None:
        return "no TLS"
    if tls.selected_alpn_protocol() != "h2":
        return "ALPN did not settle on h2"
    der = tls.getpeercert(binary_form=True)
    info: dict[str, Any] = tls.getpeercert() or {}
    if not der:
        return "no client certificate"
    names = [value for rdn in info.get("subject", ()) for key, value in rdn if key == "commonName"]
    if names != [ROUTER_CN]:
        shown = ", ".join(repr(n[:64]) for n in names[:3]) or "none"
        return f"client certificate CN is {shown}, not {ROUTER_CN!r}"
    try:
        usages = extended_key_usages(der)
    except ValueError as exc:
        return f"client certificate unreadable ({exc})"
    if usages is None or CLIENT_AUTH_OID not in usages:
        return "client certificate is not for client authentication (extKeyUsage)"
    return None


class _Unread(asyncio.StreamReaderProtocol):
    """A stream whose first bytes wait for the TLS layer: a client's
    ClientHello often arrives before the accept callback runs, and read into
    the plain stream it would be lost to ``start_tls`` (both sides then wait
    for each other until the handshake's bound)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()  # start_tls resumes it under TLS
        super().connection_made(transport)


class Front:
    """Accepts, checks and pipes connections; one instance per listener."""

    def __init__(
        self,
        context: ssl.SSLContext,
        upstream: tuple[str, int],
        *,
        max_connections: int = MAX_CONNECTIONS,
        handshake_s: float = HANDSHAKE_S,
    ) -> None:
        self.context = context
        self.upstream = upstream
        self.max_connections = max_connections
        self.handshake_s = handshake_s
        self.open = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, host: str, port: int) -> asyncio.Server:
        """Listen on `host`:`port` (OSError if it cannot); the caller closes."""

        def protocol() -> asyncio.StreamReaderProtocol:
            return _Unread(asyncio.StreamReader(limit=CHUNK), self._accept)

        return await asyncio.get_running_loop().create_server(protocol, host, port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        peer = _peer(writer)
        if self.open >= self.max_connections:
            # Before the handshake: a flood of half-open handshakes costs no CPU.
            log(f"refused {peer}: {self.open} connections open already")
            await _close(writer)
            if task is not None:
                self.tasks.discard(task)
            return
        self.open += 1
        try:
            await self._handle(peer, reader, writer)
        finally:
            self.open -= 1
            await _close(writer)
            if task is not None:
                self.tasks.discard(task)

    async def _handle(
        self, peer: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            await asyncio.wait_for(
                writer.start_tls(self.context, ssl_handshake_timeout=self.handshake_s),
                self.handshake_s + 1,
            )
        except (ssl.SSLError, OSError, TimeoutError, EOFError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            if isinstance(exc, ssl.SSLCertVerificationError):
                reason = f"{reason}: {exc.verify_message}"
            log(f"refused {peer}: handshake failed ({reason})")
            return
        why = refusal(writer.get_extra_info("ssl_object"))
        if why is not None:
            log(f"refused {peer}: {why}")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream, limit=CHUNK), UPSTREAM_CONNECT_S
            )
        except (OSError, TimeoutError) as exc:
            log(f"dropped {peer}: cuzk at {self.upstream[0]}:{self.upstream[1]} ({exc})")
            return
        try:
            await _splice(reader, writer, up_reader, up_writer)
        finally:
            await _close(up_writer)

    async def close(self) -> None:
        """Drop every open connection."""
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(BaseException):
                await task


async def _splice(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until either side ends; then both close (a TLS stream
    cannot half-close, and HTTP/2 has no use for it)."""
    copies = [
        asyncio.create_task(_copy(a_reader, b_writer)),
        asyncio.create_task(_copy(b_reader, a_writer)),
    ]
    try:
        await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ssl.SSLError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 2)


def _peer(writer: asyncio.StreamWriter) -> str:
    name = writer.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return "?"
