"""One request to vast.ai: the key, the pacing, 429s, and what an answer means.

`VastTransport` sends a request with the key in an ``Authorization: Bearer``
header (never in a URL, a log line, an exception or a repr), waits for the
endpoint's pacing slot first (`fleet_agent.vast.pacing`), retries a 429 a
bounded number of times after a backoff that outlasts the endpoint's penalty,
and turns every other failure into a typed `VastError` at once: retrying is
the caller's decision, because a failed create may have rented a machine
anyway (`VastError.ambiguous`).

How answers map to errors (the service's shapes vary by endpoint, see
docs/SIMULATOR.md, "The API it serves"): "Invalid user key" is an authentication failure whatever
the status (the search answers it with a 404); ``no_such_ask`` is an offer
that is gone whatever the status (404 or 410); a JSON 404 is "not found"; a
bare 404 (no JSON) may be a proxy and is only "not found" to callers that do
not care who said it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Generator, Mapping
from typing import Any

import httpx

from .errors import (
    VastAuthError,
    VastBadRequest,
    VastConnectionError,
    VastError,
    VastNotFound,
    VastOfferGone,
    VastProtocolError,
    VastRateLimited,
    VastServerError,
    VastTimeout,
)
from .origin import normalize_base_url
from .pacing import Pacer

__all__ = ["VastTransport", "normalize_base_url"]

_log = logging.getLogger(__name__)

_SNIPPET_CHARS = 200
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The service's own words for "no such thing", whatever the HTTP status.
_NOT_FOUND_ERRORS = frozenset({"no_such_instance", "not_found"})
_OFFER_GONE = "no_such_ask"
# What the service says about a key it does not accept, in `msg` or `error`.
_AUTH_WORDS = ("invalid user key", "please log in", "auth_error")


class _BearerAuth(httpx.Auth):
    """Adds the bearer header per request, so the key never sits in client headers."""

    __slots__ = ("_key",)

    def __init__(self, key: str) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._key}"
        yield request

    def redact(self, text: str) -> str:
        """`text` with any copy of the key replaced, for text the service echoes back."""
        return text.replace(self._key, "<redacted>") if self._key else text

    def derived(self, purpose: str) -> bytes:
        """HMAC-SHA256 of `purpose` under the key."""
        return hmac.new(self._key.encode(), purpose.encode(), hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "_BearerAuth(<redacted>)"


class VastTransport:
    """Sends requests for a `VastClient`; see the module docstring."""

    def __init__(
        self,
        key: str,
        base_url: str,
        *,
        timeout: float,
        max_429_retries: int,
        backoff_base: float,
        pacer: Pacer,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.pacer = pacer
        self._auth = _BearerAuth(key)
        self._max_429_retries = max_429_retries
        self._backoff_base = backoff_base
        self._http = httpx.AsyncClient(
            base_url=base_url,
            auth=self._auth,
            timeout=timeout,
            transport=transport,
            # Redirects are not followed: a 3xx would re-send a create, or carry
            # the request to another origin. It surfaces as VastProtocolError.
            follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": "fleet-agent"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        auth: bool = True,
        http_timeout_s: float | None = None,
    ) -> Any:
        """Send one request (after its pacing slot) and return the decoded JSON.

        `auth=False` sends no key, for the service's public endpoints;
        `http_timeout_s` replaces the client's timeout for this request.
        """
        mutating = method not in _SAFE_METHODS
        attempt = 0
        while True:
            await self.pacer.wait(method, path)
            resp = await self._send(method, path, params, json_body, mutating, auth, http_timeout_s)
            _log.debug("vast %s %s -> %d (attempt %d)", method, path, resp.status_code, attempt)
            if resp.status_code != 429:
                return self._decode(resp, method, path, mutating)
            if attempt >= self._max_429_retries:
                raise VastRateLimited(
                    self._snippet(resp) or "rate limited",
                    status=429,
                    msg=self._snippet(resp) or None,
                    method=method,
                    path=path,
                )
            # A 429 is refused before anything happens, so even a create is safe
            # to send again, once the endpoint's penalty has passed: the pacer
            # blocks the endpoint until then, and the next `wait` waits it out.
            delay = self.pacer.refused(
                method, path, attempt=attempt, backoff_base=self._backoff_base
            )
            attempt += 1
            _log.info("vast %s %s rate limited; retry %d in %.2fs", method, path, attempt, delay)

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        json_body: Any,
        mutating: bool,
        auth: bool,
        http_timeout_s: float | None = None,
    ) -> httpx.Response:
        try:
            return await self._http.request(
                method,
                path,
                params=dict(params) if params else None,
                json=json_body,
                auth=self._auth if auth else None,
                timeout=httpx.USE_CLIENT_DEFAULT
                if http_timeout_s is None
                else httpx.Timeout(http_timeout_s),
            )
        except (httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # Nothing was sent, so nothing can have happened.
            raise VastTimeout(
                f"no connection in time ({type(exc).__name__})", method=method, path=path
            ) from exc
        except httpx.TimeoutException as exc:
            raise VastTimeout(
                f"no answer in time ({type(exc).__name__})",
                method=method,
                path=path,
                ambiguous=mutating,
            ) from exc
        except httpx.ConnectError as exc:
            raise VastConnectionError("could not connect", method=method, path=path) from exc
        except httpx.TransportError as exc:
            raise VastConnectionError(
                f"connection failed ({type(exc).__name__})",
                method=method,
                path=path,
                ambiguous=mutating,
            ) from exc

    def derived_key(self, purpose: str) -> bytes:
        """A key for `purpose` derived from the API key (VastClient.derived_key)."""
        return self._auth.derived(purpose)

    def _decode(self, resp: httpx.Response, method: str, path: str, mutating: bool) -> Any:
        status = resp.status_code
        body: Any = None
        readable = True
        try:
            body = resp.json()
        except ValueError:
            readable = False
        error, msg = self._error_fields(body)
        text = msg or error or self._snippet(resp) or resp.reason_phrase or "no detail"
        common: dict[str, Any] = {
            "status": status,
            "error": error,
            "msg": msg,
            "method": method,
            "path": path,
        }
        if status >= 300:
            kind = _http_error(status, error, msg)
            raise kind(text, **common, ambiguous=mutating and status >= 500)
        if not readable:
            raise VastProtocolError("answer is not JSON", **common, ambiguous=mutating)
        if isinstance(body, dict) and body.get("success") is False:
            raise _refusal(error, msg)(text, **common)
        return body

    def _error_fields(self, body: Any) -> tuple[str | None, str | None]:
        if not isinstance(body, dict):
            return None, None
        error = body.get("error")
        msg = body.get("msg", body.get("message", body.get("detail")))
        return (
            self._auth.redact(str(error)) if error not in (None, "", False, True) else None,
            self._auth.redact(str(msg)) if msg not in (None, "") else None,
        )

    def _snippet(self, resp: httpx.Response) -> str:
        try:
            text = resp.text
        except (UnicodeDecodeError, httpx.ResponseNotRead):
            return ""
        return self._auth.redact(" ".join(text.split())[:_SNIPPET_CHARS])


def _says(error: str | None, msg: str | None, words: tuple[str, ...]) -> bool:
    said = f"{error or ''} {msg or ''}".casefold()
    return any(w in said for w in words)


def _http_error(status: int, error: str | None, msg: str | None) -> type[VastError]:
    # Authentication first: a search with a bad key answers 404 "Invalid user
    # key", which must never read as "not found" (or, for a destroy, "gone").
    if status in (401, 403) or _says(error, msg, _AUTH_WORDS):
        return VastAuthError
    if _says(error, msg, (_OFFER_GONE,)):
        return VastOfferGone
    if error == "deprecated_endpoint" or status == 410 or status < 400:
        return VastProtocolError
    if status == 404 or error in _NOT_FOUND_ERRORS:
        return VastNotFound
    if status >= 500:
        return VastServerError
    return VastBadRequest


def _refusal(error: str | None, msg: str | None) -> type[VastError]:
    """A 200 with ``success: false``."""
    if _says(error, msg, _AUTH_WORDS):
        return VastAuthError
    if _says(error, msg, (_OFFER_GONE,)):
        return VastOfferGone
    if error in _NOT_FOUND_ERRORS:
        return VastNotFound
    return VastProtocolError
