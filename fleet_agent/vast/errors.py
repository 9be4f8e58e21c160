"""Typed errors of the vast.ai client.

Every failure of a call to the service is a `VastError`. Each carries the HTTP
status (None when no answer came back), the service's own `error` code and
`msg` text when it sent them, the method and path (never the query string, never
the API key), and `ambiguous`.

`ambiguous` answers the one question a fleet manager must ask after a failed
create or destroy: *might the service have done it anyway?* It is True when a
mutating request was sent and the answer was lost or unusable (timeout, dropped
connection, 5xx, unreadable body). The machine may then be rented (or gone)
even though the call failed, so the caller must reconcile, e.g. by listing
instances by label, before trying again. Rejections the service states clearly
(401, 404/410 ``no_such_ask``, 429, ``success: false``) are never ambiguous.

`permanent` says whether sending the same request again can ever help: a
rejected key (`VastAuthError`) or an offer that is gone (`VastOfferGone`) will
not change by retrying.
"""

from __future__ import annotations

__all__ = [
    "VastAuthError",
    "VastBadRequest",
    "VastConnectionError",
    "VastError",
    "VastNotFound",
    "VastOfferGone",
    "VastProtocolError",
    "VastRateLimited",
    "VastServerError",
    "VastTimeout",
]


class VastError(Exception):
    """Base of every vast.ai client error."""

    #: Sending the same request again cannot succeed (see the module docstring).
    permanent = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error: str | None = None,
        msg: str | None = None,
        method: str | None = None,
        path: str | None = None,
        ambiguous: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error = error
        self.msg = msg
        self.method = method
        self.path = path
        self.ambiguous = ambiguous

    def __str__(self) -> str:
        where = f"{self.method} {self.path}" if self.method and self.path else "vast.ai"
        status = f" -> {self.status}" if self.status is not None else ""
        code = f" [{self.error}]" if self.error else ""
        hint = " (ambiguous: the request may have taken effect)" if self.ambiguous else ""
        return f"{where}{status}{code}: {self.message}{hint}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, error={self.error!r}, "
            f"msg={self.msg!r}, method={self.method!r}, path={self.path!r}, "
            f"ambiguous={self.ambiguous!r})"
        )


class VastAuthError(VastError):
    """The API key was missing, wrong or lacks permission: 401/403, ``auth_error``, or
    any answer saying "Invalid user key" (the search endpoint says it with a 404)."""

    permanent = True


class VastNotFound(VastError):
    """The thing does not exist (a JSON 404, ``no_such_instance``, ``not_found``)."""


class VastOfferGone(VastNotFound):
    """The offer cannot be rented any more: ``no_such_ask``, answered with 410 (offer
    no longer available) or 404 (no such offer). Search again; retrying cannot help."""

    permanent = True


class VastRateLimited(VastError):
    """Still 429 after the client's bounded retries."""


class VastServerError(VastError):
    """The service failed (5xx). Ambiguous for a create or destroy."""


class VastBadRequest(VastError):
    """The service rejected the request as invalid (other 4xx, e.g. ``invalid_args``)."""


class VastProtocolError(VastError):
    """The answer could not be used: unreadable body, ``success: false``, a missing
    field, or a deprecated endpoint. Never to be read as an empty result."""


class VastTimeout(VastError):
    """No answer in time. Ambiguous for a create or destroy once the request was sent."""


class VastConnectionError(VastError):
    """The connection failed. Ambiguous only if it broke after a mutating request was sent."""
