"""Send one rendered notification to one apprise URL (no client of our own).

One `Apprise` object per destination, so each succeeds or fails on its own
and a retry re-sends only to those that failed. apprise's own log lines for
the attempt are captured and, scrubbed of the URL, become the error text.
"""

from __future__ import annotations

import apprise

from .render import Rendered
from .settings import redact, scrub

__all__ = ["UNUSABLE", "send_one"]

#: What a URL apprise cannot use fails with: no retry can help.
UNUSABLE = "not an apprise URL apprise can use"


async def send_one(url: str, message: Rendered) -> str:
    """Deliver `message` to `url`: "" when sent, else why not (no secret in it)."""
    target = apprise.Apprise()
    if not target.add(url):
        return f"{redact(url)}: {UNUSABLE}"
    body = f"{message.body}\n\n{message.link}" if message.link else message.body
    with apprise.LogCapture(  # type: ignore[no-untyped-call]
        level=apprise.logging.WARNING, fmt="%(message)s"
    ) as logs:
        try:
            ok = await target.async_notify(body=body, title=message.title)
        except Exception as exc:  # apprise's plugins raise what their libraries raise
            return scrub(f"{redact(url)}: {type(exc).__name__}: {exc}", [url])
        captured = logs.getvalue().strip().splitlines()
    if ok:
        return ""
    why = captured[-1] if captured else "apprise reported a failure"
    return scrub(f"{redact(url)}: {why}"[:500], [url])
