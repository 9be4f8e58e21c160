"""Who may use the console, and as whom (issue 42).

A console bound to loopback answers anyone on this machine, as the OS
identity of the process serving it (`starter.identity.os_identity`). Bound to
anything else it needs a token: named tokens from ``CONSOLE_TOKEN``
(``name:token,name2:token2``, or one bare token, named ``console``), or one
generated at start and printed once to the terminal (starter/console/serve.py).
With tokens, every request carries one (`TokenGate`): ``Authorization: Bearer
<token>``, or the session cookie that visiting any page with ``?token=<token>``
sets (for a phone's browser), answered with a redirect to the same page
without the token, so that the browser's history and address bar never keep
it. The token's name is the identity a decision is recorded as. Tokens never
reach a log, the store or a workflow's history.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from collections.abc import Mapping, Sequence
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from starter.agent_client import CliError

__all__ = [
    "COOKIE",
    "DEFAULT_TOKEN_NAME",
    "IDENTITY_KEY",
    "TOKEN_ENV",
    "VIA_KEY",
    "TokenGate",
    "is_loopback",
    "new_token",
    "parse_tokens",
]

TOKEN_ENV = "CONSOLE_TOKEN"
DEFAULT_TOKEN_NAME = "console"
COOKIE = "fleet_console_token"
#: Where `TokenGate` puts the request's identity and how it proved it
#: (``bearer``, ``cookie``, ``query``, or ``none`` on a console without tokens).
IDENTITY_KEY = "fleet_console.identity"
VIA_KEY = "fleet_console.via"

# A token's name is what a decision is recorded as: short, no spaces.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
# A token: long enough not to be guessed, nothing that breaks a header or a list.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,256}")

Tokens = tuple[tuple[str, str], ...]


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, localhost).
    A wildcard (0.0.0.0, ::), a LAN address or any other name is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def parse_tokens(raw: str | None) -> Tokens:
    """``CONSOLE_TOKEN``: ``name:token`` pairs, comma-separated, or one bare
    token (named ``console``). A bad value is a `CliError` that names the
    entry's position, never the token."""
    pairs: list[tuple[str, str]] = []
    for n, entry in enumerate((raw or "").split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, token = entry.partition(":")
        if not sep:
            name, token = DEFAULT_TOKEN_NAME, entry
        where = f"{TOKEN_ENV} entry {n}"
        if not _NAME.fullmatch(name):
            raise CliError(
                f"{where}: the name must be 1-64 letters, digits or . _ @ - (it is who decides)"
            )
        if not _TOKEN.fullmatch(token):
            raise CliError(
                f"{where}: the token must be 16-256 characters of A-Z a-z 0-9 . _ ~ + / = -"
            )
        pairs.append((name, token))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise CliError(f"{TOKEN_ENV}: each token needs its own name")
    if len({token for _, token in pairs}) != len(pairs):
        raise CliError(f"{TOKEN_ENV}: two names share one token")
    return tuple(pairs)


def _match(tokens: Sequence[tuple[str, str]], given: str) -> str | None:
    """The name of the token `given` is, compared in constant time."""
    found = None
    for name, token in tokens:
        if secrets.compare_digest(token.encode(), given.encode()):
            found = name
    return found


def _credentials(scope: Scope, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each token the request offers, with how it came, in order of preference."""
    offered: list[tuple[str, str]] = []
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        offered.append(("bearer", value.strip()))
    if scope.get("method") in ("GET", "HEAD"):
        query = scope.get("query_string", b"").decode("latin-1")
        offered += [("query", v) for k, v in parse_qsl(query) if k == "token" and v]
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header offers nothing
        cookie = SimpleCookie()
    if COOKIE in cookie and cookie[COOKIE].value:
        offered.append(("cookie", cookie[COOKIE].value))
    return offered


class TokenGate:
    """Pure ASGI: a console with tokens answers 401 to any request without a
    valid one, before any endpoint (or static file) runs. A console without
    tokens (loopback) lets everything through as `identity`. Either way the
    request's identity and how it was proved go into the scope
    (`IDENTITY_KEY`, `VIA_KEY`). A page visit with ``?token=`` in its URL,
    once let in, is answered with a redirect to the same page without it
    (and the cookie, when that token is what let it in)."""

    def __init__(self, app: ASGIApp, tokens: Tokens, identity: str) -> None:
        self.app = app
        self.tokens = tokens
        self.identity = identity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.tokens:
            scope[IDENTITY_KEY], scope[VIA_KEY] = self.identity, "none"
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        for via, given in _credentials(scope, headers):
            name = _match(self.tokens, given)
            if name is not None:
                if _token_in_url(scope):
                    await _without_token(scope, via, given)(scope, receive, send)
                    return
                scope[IDENTITY_KEY], scope[VIA_KEY] = name, via
                await self.app(scope, receive, send)
                return
        refused = PlainTextResponse(
            "this console needs its token: open the URL `fleet-agent console` printed "
            "(…/?token=…) once in this browser, or send 'Authorization: Bearer <token>'\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="fleet-agent console"'},
        )
        await refused(scope, receive, send)


def _query(scope: Scope) -> list[tuple[str, str]]:
    return parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)


def _token_in_url(scope: Scope) -> bool:
    """A page visit whose URL carries ``token=`` (the only requests `_credentials`
    reads it from)."""
    return scope.get("method") in ("GET", "HEAD") and any(k == "token" for k, _ in _query(scope))


def _without_token(scope: Scope, via: str, token: str) -> RedirectResponse:
    """303 to the same page without ``token=``: the browser's history, its
    address bar and a bookmark keep that URL, never the token. A ``?token=``
    visit that proved itself also gets the session cookie (``Secure`` over
    https). ``SameSite=Lax``: a token link opened from another site's page
    (webmail, a chat's web app) is a cross-site navigation, and a ``Strict``
    cookie would stay off this redirect's request, which would then be
    refused; posts from other sites stay refused (no cookie with ``Lax``, and
    `starter.console.web.same_origin`)."""
    path = "/" + scope.get("path", "/").lstrip("/")  # never "//host": another site
    rest = urlencode([(k, v) for k, v in _query(scope) if k != "token"])
    response = RedirectResponse(quote(path) + (f"?{rest}" if rest else ""), status_code=303)
    response.headers["Cache-Control"] = "no-store"
    if via == "query":
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        response.headers.append(
            "Set-Cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax{secure}"
        )
    return response
