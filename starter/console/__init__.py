"""`fleet-agent console`: a small server-rendered web console for one agent.

Starlette + Jinja2 templates, htmx (static/htmx.min.js, vendored) for the live
parts; no front-end build step. See docs/operations/talk.md, "The web console".
"""

from starter.console.app import create_app
from starter.console.serve import (
    CONSOLE_PORT_ENV,
    DEFAULT_CONSOLE_PORT,
    UI_URL_ENV,
    console_for_stack,
    running_console,
    serve,
)
from starter.console.web import ConsoleSettings

__all__ = [
    "CONSOLE_PORT_ENV",
    "DEFAULT_CONSOLE_PORT",
    "UI_URL_ENV",
    "ConsoleSettings",
    "console_for_stack",
    "create_app",
    "running_console",
    "serve",
]
