"""The console's plumbing: settings, templates, error pages, form reading and
the cross-site check. Touches nothing outside the request it is given."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from fleet_agent.store import RunRecord
from fleet_agent.verdict import strip_verdict
from starter.agent_client import AgentClient, CliError, UsageError
from starter.console.data import RunNotFound
from starter.render import fmt_duration, fmt_time, fmt_when, verdict_text
from starter.runlog_view import badges, message_text, run_label

__all__ = [
    "PACKAGE_DIR",
    "ConsoleError",
    "ConsoleSettings",
    "agent_call",
    "agent_of",
    "done",
    "fail",
    "form_text",
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
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")
#: Names an operator adds, comma-separated (a LAN name, a reverse proxy's).
ALLOWED_HOSTS_ENV = "CONSOLE_ALLOWED_HOSTS"


def allowed_hosts_for(bind: str, extra: str | None) -> tuple[str, ...]:
    """The Host names the console accepts when bound to `bind`: the loopback
    names, the bound address unless it is a wildcard, and `extra` (the
    ``CONSOLE_ALLOWED_HOSTS`` list)."""
    names = list(LOOPBACK_HOSTS)
    if bind not in ("0.0.0.0", "::", ""):
        names.append(bind)
    names += [n.strip().lower() for n in (extra or "").split(",") if n.strip()]
    return tuple(dict.fromkeys(names))


# Longest text a form field may carry (a message's own limit is the model's).
MAX_FIELD = 10_000

T = TypeVar("T")


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console needs besides the agent client: where the Web UI is,
    and the host names a request may carry (`Host`): the loopback names by
    default, more from ``CONSOLE_ALLOWED_HOSTS`` (`allowed_hosts_for`)."""

    ui_url: str = DEFAULT_UI_URL
    namespace: str = "default"
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS

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


def same_origin(headers: Mapping[str, str]) -> bool:
    """False for a post another site's page made the browser send (CSRF): the
    console has no login, so a page on any site could otherwise drive it."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == headers.get("host", "")


def agent_of(request: Request) -> AgentClient:
    agent: AgentClient = request.app.state.agent
    return agent
