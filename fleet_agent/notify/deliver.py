"""Send one rendered notification to one apprise URL (no client of our own).

One `Apprise` object per destination, so each succeeds or fails on its own
and a retry re-sends only to those that failed. apprise's own log lines of
the attempt, scrubbed of the URL, become the error text: the lines apprise
keeps with the call's result (`AppriseResult.logs()`, apprise 2.0 on), which
it captures per call and per service through context variables
(apprise/logger.py, `_ServiceLogCapture`), so two sends at once (the worker's
activities, `fleet-agent notify test`) never see each other's lines. Not
`apprise.LogCapture`: it listens on the process-wide "apprise" logger, and
gave one destination's error another's lines, whose secrets its scrub does
not know.
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
    try:
        result = await target.async_notify(body=body, title=message.title)
    except Exception as exc:  # apprise's plugins raise what their libraries raise
        return scrub(f"{redact(url)}: {type(exc).__name__}: {exc}", [url])
    with result:  # releases the storage of its captured lines
        if result:
            return ""
        # WARNING and above: the level apprise keeps by default.
        lines = [entry.message for entry in result.logs() if entry.message.strip()]
    why = lines[-1].strip() if lines else "apprise reported a failure"
    return scrub(f"{redact(url)}: {why}"[:500], [url])
