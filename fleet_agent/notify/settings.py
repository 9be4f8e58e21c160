"""`FLEET_NOTIFY_URLS` and `FLEET_CONSOLE_URL`, and how a destination is shown.

The URLs are secrets (a Slack webhook's path, an SMTP password): read in the
worker's and the CLI's process only, never passed to a workflow, the store, a
log line or `status`. Anything shown names a destination by `redact`: its
scheme and host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field

from fleet_agent.config.env_settings import EnvModel

__all__ = ["NotifyEnv", "redact", "scrub", "split_urls"]


class NotifyEnv(EnvModel):
    """Where notifications go, and the console's address for their links."""

    urls: str | None = Field(None, alias="FLEET_NOTIFY_URLS")
    # The console as the operator's phone reaches it, e.g. https://ops.example.com:8080
    console_url: str | None = Field(None, alias="FLEET_CONSOLE_URL")

    def url_list(self) -> list[str]:
        return split_urls(self.urls)

    @classmethod
    def load(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None
    ) -> NotifyEnv:
        return cls.read(env, env_file=env_file)


def split_urls(raw: str | None) -> list[str]:
    """One or more apprise URLs, separated by commas or white space."""
    return [u for u in re.split(r"[,\s]+", raw or "") if u]


def redact(url: str) -> str:
    """`scheme://host` only: no user, password, token, path or query. A
    "host" that is no host name (no dot: Slack's and Discord's first token
    stands there) is hidden too."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "(unreadable URL)"
    if "." not in host and host != "localhost":
        host = "(hidden)"
    return f"{parts.scheme or '?'}://{host}"


def scrub(text: str, urls: Iterable[str]) -> str:
    """`text` with every URL, and every long piece of one (a password, a
    token, a webhook path), replaced: for error text that may quote them."""
    for url in urls:
        shown = redact(url)
        text = text.replace(url, shown)
        host = shown.split("://", 1)[-1]
        for piece in re.split(r"[/:@?&=#,]+", url.split("://", 1)[-1]):
            if len(piece) >= 6 and piece.lower() not in host:
                text = text.replace(piece, "***")
    return text
