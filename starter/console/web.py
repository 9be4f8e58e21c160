"""The console's plumbing: settings, templates, error pages, form reading,
the cross-site check and the request's identity. Touches nothing outside the
request it is given."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from fleet_agent.llm.verdict import strip_verdict
from fleet_agent.store import RunRecord
from starter.agent_client import AgentClient, CliError, UsageError
from starter.console.auth import IDENTITY_KEY, VIA_KEY, Tokens
from starter.console.data import RunNotFound
from starter.identity import os_identity
from starter.views.render import fmt_duration, fmt_time, fmt_when, verdict_text
from starter.views.runlog import badges, message_text, run_label

__all__ = [
    "PACKAGE_DIR",
    "ConsoleError",
    "ConsoleSettings",
    "agent_call",
    "agent_of",
    "bearer_request",
    "done",
    "fail",
    "form_text",
    "identity_of",
    "in_thread",
    "is_htmx",
    "page",
    "same_origin",
    "templates",
]

PACKAGE_DIR = Path(__file__).parent
DEFAULT_UI_URL = "http://localhost:8233"
#: Host names a browser on this machine uses for the console. Any other Host
#: header is refused: a page on a rebinding domain (evil.example resolving to
#: 127.0.0.1) sends its own name, and matching Origin to Host alone let it in.
#: An IPv6 literal is written as in a Host header: in brackets.
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")
#: Names an operator adds, comma-separated (a LAN name, a reverse proxy's).
ALLOWED_HOSTS_ENV = "CONSOLE_ALLOWED_HOSTS"


def allowed_hosts_for(bind: str, extra: str | None) -> tuple[str, ...]:
    """The Host names the console accepts when bound to `bind`: the loopback
    names, the bound address unless it is a wildcard, and `extra` (the
    ``CONSOLE_ALLOWED_HOSTS`` list)."""
    names = list(LOOPBACK_HOSTS)
    if bind not in ("0.0.0.0", "::", "[::]", ""):
        names.append(_host_name(bind))
    names += [_host_name(n.strip()) for n in (extra or "").split(",") if n.strip()]
    return tuple(dict.fromkeys(names))


def _host_name(name: str) -> str:
    """`name` as a Host header carries it: lower case, an IPv6 literal in brackets."""
    bare = name.strip("[]").lower()
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]"
    except ValueError:
        pass
    return bare


# Longest text a form field may carry (a message's own limit is the model's).
MAX_FIELD = 10_000

T = TypeVar("T")


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console needs besides the agent client: where the Web UI is;
    the host names a request may carry (`Host`, and `Origin` on a post): the
    loopback names by default, more from ``CONSOLE_ALLOWED_HOSTS``
    (`allowed_hosts_for`); the named tokens a request must carry one of
    (none: anyone who reaches it, as `identity`; starter/console/auth.py)."""

    ui_url: str = DEFAULT_UI_URL
    namespace: str = "default"
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    tokens: Tokens = field(default=(), repr=False)
    #: Who a decision is recorded as on a console without tokens: the OS
    #: account serving it (only this machine reaches a loopback console).
    identity: str = field(default_factory=os_identity)

    def run_link(self, record: RunRecord) -> str:
        """The child workflow of a run in the Temporal Web UI (its attempt's run ID if known)."""
        wid = quote(f"{record.agent_id}/run-{record.run}", safe="")
        base = f"{self.ui_url.rstrip('/')}/namespaces/{quote(self.namespace, safe='')}"
        if record.workflow_run_id:
            return f"{base}/workflows/{wid}/{quote(record.workflow_run_id, safe='')}/history"
        return f"{base}/workflows/{wid}"


class ConsoleError(Exception):
    """A request the console refuses or cannot serve: a message and an HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _filters(templates: Jinja2Templates) -> Jinja2Templates:
    env = templates.env
    env.filters["time"] = fmt_time
    env.filters["duration"] = fmt_duration
    env.filters["verdict"] = lambda run: verdict_text(run.verdict, run.verdict_error)
    env.filters["label"] = run_label
    env.filters["badges"] = badges
    env.filters["message"] = message_text
    env.filters["unverdict"] = lambda text: strip_verdict(text).strip()
    env.filters["usd"] = lambda v: f"${v:,.2f}" if v is not None else "—"
    env.globals["when"] = lambda at: fmt_when(at, datetime.now(UTC))
    return templates


templates = _filters(Jinja2Templates(directory=PACKAGE_DIR / "templates"))


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    """Render a template with the app's settings and agent in its context."""
    context.setdefault("agent_id", request.app.state.agent.agent_id)
    context.setdefault("settings", request.app.state.settings)
    return templates.TemplateResponse(request, name, context, status_code=status)


def fail(request: Request, error: ConsoleError) -> Response:
    """An error page; for htmx, a notice fragment put into the page's #notice."""
    if is_htmx(request):
        response = page(request, "_notice.html", error.status, message=error.message, error=True)
        response.headers["HX-Retarget"] = "#notice"
        response.headers["HX-Reswap"] = "innerHTML"
        return response
    return page(request, "error.html", error.status, message=error.message)


def done(request: Request, name: str, **context: Any) -> Response:
    """After an action: the fragment for htmx, else back to the dashboard (a
    plain form post, without JavaScript)."""
    if is_htmx(request):
        return page(request, name, **context)
    return RedirectResponse("/", status_code=303)


async def in_thread(call: Callable[..., T], *args: Any) -> T:
    """A store read (synchronous) off the event loop; `CliError` → `ConsoleError`."""
    try:
        return await asyncio.to_thread(call, *args)
    except RunNotFound as exc:
        raise ConsoleError(str(exc), 404) from None
    except UsageError as exc:
        raise ConsoleError(str(exc), 400) from None
    except CliError as exc:
        raise ConsoleError(str(exc), 503) from None


async def agent_call(call: Awaitable[T], status: int = 502) -> T:
    """An `AgentClient` call; its `CliError` (refused, unreachable) → `ConsoleError`."""
    try:
        return await call
    except CliError as exc:
        raise ConsoleError(str(exc), status) from None


def form_text(form: FormData, name: str, *, required: bool = False) -> str | None:
    """A text field of a form: stripped, None when empty; a file or an
    overlong value is refused."""
    value = form.get(name)
    if value is None or value == "":
        if required:
            raise ConsoleError(f"missing form field {name!r}")
        return None
    if not isinstance(value, str):
        raise ConsoleError(f"form field {name!r} must be text")
    if len(value) > MAX_FIELD:
        raise ConsoleError(f"form field {name!r} is longer than {MAX_FIELD} characters")
    value = value.strip()
    if required and not value:
        raise ConsoleError(f"form field {name!r} is empty")
    return value or None


def same_origin(
    headers: Mapping[str, str], allowed_hosts: tuple[str, ...], *, bearer: bool = False
) -> bool:
    """False for a post another site's page made the browser send (CSRF): a
    page on any site could otherwise drive the console with the browser's
    cookie, or a loopback console with none.

    The post's source (its ``Origin``, else its ``Referer``) must be this
    console itself (the same scheme-less host and port as ``Host``) under a
    name on `allowed_hosts`. Browsers send one of them on every post; a post
    with neither is a script's, let in only with ``Authorization: Bearer``
    (`bearer`), which no other site's page can make a browser send.
    """
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    source = headers.get("origin")
    if source is None and headers.get("referer"):
        referer = urlsplit(headers["referer"])
        source = f"{referer.scheme}://{referer.netloc}"
    if source is None:
        return bearer
    parts = urlsplit(source)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False  # "null" (a sandboxed frame, a privacy redirect), or junk
    if _host_name(parts.hostname) not in allowed_hosts:
        return False
    return parts.netloc.lower() == headers.get("host", "").lower()


def identity_of(request: Request) -> str:
    """Who this request acts as: its token's name, or the console's OS identity
    without tokens (set by `starter.console.auth.TokenGate`)."""
    identity = request.scope.get(IDENTITY_KEY)
    if not isinstance(identity, str):  # never served without the gate
        raise ConsoleError("no identity for this request", 500)
    return identity


def bearer_request(request: Request) -> bool:
    """True when the request proved its token in an Authorization header."""
    return request.scope.get(VIA_KEY) == "bearer"


def agent_of(request: Request) -> AgentClient:
    agent: AgentClient = request.app.state.agent
    return agent
