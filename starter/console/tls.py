"""The console's transport: HTTPS from a certificate and key, or plain HTTP
where that is safe (loopback) or asked for by name (``--insecure-http``).

Beyond loopback the token rides in every request (a header, a cookie, the
first visit's URL): over plain HTTP anyone on the path reads it. So a console
bound to any other address needs a certificate and key, or the operator's
explicit ``--insecure-http`` (a network they trust, a TLS proxy in front).
"""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from starter.agent_client import CliError, UsageError
from starter.console.auth import is_loopback

__all__ = [
    "TLS_CERT_ENV",
    "TLS_KEY_ENV",
    "ConsoleTls",
    "check_transport",
    "console_tls",
]

TLS_CERT_ENV = "CONSOLE_TLS_CERT"
TLS_KEY_ENV = "CONSOLE_TLS_KEY"


@dataclass(frozen=True)
class ConsoleTls:
    """A loaded certificate and key: the server context, and where they came from."""

    context: ssl.SSLContext
    cert: Path
    key: Path


class _EncryptedKey(Exception):
    """The key asked for a passphrase: refused instead of prompting on the terminal."""


def _no_passphrase() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal, and a console
    # started as a service would hang there.
    raise _EncryptedKey


def console_tls(cert: str | None, key: str | None) -> ConsoleTls | None:
    """The console's TLS from `cert` and `key` (PEM files; the certificate
    file may carry the chain after it): None when neither is given. One
    without the other is a `UsageError`; files that do not load (missing, not
    PEM, a key that does not match, an encrypted key) are a `CliError` that
    names them."""
    if not cert and not key:
        return None
    if not (cert and key):
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise UsageError(
            f"{given} needs {missing} too (env {TLS_CERT_ENV} and {TLS_KEY_ENV}): "
            "the console serves https with both"
        )
    where = f"the console's TLS certificate {cert} and key {key}"
    for path in (cert, key):
        if not Path(path).is_file():
            raise CliError(f"{where}: {path} is not a file")
        if not os.access(path, os.R_OK):
            raise CliError(f"{where}: {path} is not readable by this user")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])  # what uvicorn speaks
    try:
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _EncryptedKey:
        raise CliError(
            f"{where}: the key is encrypted; give it unencrypted "
            "(`openssl pkey -in KEY -out PLAIN`), readable only by the console's user"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        # "[X509: KEY_VALUES_MISMATCH] key values mismatch (_ssl.c:3926)": the
        # part before OpenSSL's source line.
        reason = re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc.strerror or exc))
        raise CliError(
            f"{where} do not load ({reason}): PEM files, the key matching the certificate"
        ) from None
    return ConsoleTls(context, Path(cert), Path(key))


def check_transport(host: str, tls: ConsoleTls | None, insecure_http: bool) -> None:
    """Refuse (`UsageError`) a console bound beyond loopback that would serve
    plain HTTP without the operator's explicit `insecure_http`."""
    if tls is not None or insecure_http or is_loopback(host):
        return
    raise UsageError(
        f"the console bound to {host} would send its token in the clear over http: "
        f"give it a certificate and key (--tls-cert and --tls-key, or {TLS_CERT_ENV} "
        f"and {TLS_KEY_ENV}) to serve https, or pass --insecure-http to serve plain "
        "http on a network you trust (or behind a TLS proxy)"
    )
