"""Which events notify, how often, and the key that makes a delivery happen once.

At most one notification per (event kind, subject) within the config's
`notify_quiet_minutes`: the agent workflow keeps when each pair last went out
(`AgentState.notify_sent`). The idempotency key names the agent, the kind,
the subject and the time bucket the event falls in, so a retried activity, a
replayed workflow task or a continue-as-new that delivers the same event
again finds the key in the store and sends nothing (activities/notify.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fleet_agent.models.config import AgentConfig
from fleet_agent.models.notify import NotifyEvent

__all__ = [
    "BAND_TOLERANCE",
    "MAX_REMEMBERED",
    "BandStep",
    "admit",
    "band_step",
    "idempotency_key",
    "pair",
    "remember",
]

#: The (kind, subject) pairs remembered for the quiet window: bounded state.
MAX_REMEMBERED = 50
# The bucket of a key when there is no quiet window: one minute.
_MIN_BUCKET = timedelta(minutes=1)


def pair(event: NotifyEvent) -> str:
    return f"{event.kind}:{event.subject}"


def admit(event: NotifyEvent, config: AgentConfig, sent: dict[str, datetime]) -> bool:
    """Whether `event` notifies: its kind is in `notify_events` (a test always
    is) and its pair did not notify within the quiet window before it."""
    if event.kind != "test" and event.kind not in config.notify_events:
        return False
    last = sent.get(pair(event))
    quiet = timedelta(minutes=config.notify_quiet_minutes)
    return last is None or event.at - last >= quiet


def remember(event: NotifyEvent, sent: dict[str, datetime]) -> dict[str, datetime]:
    """`sent` with this event's pair at its time; the oldest pairs are forgotten."""
    updated = {**sent, pair(event): event.at}
    if len(updated) > MAX_REMEMBERED:
        newest = sorted(updated.items(), key=lambda kv: kv[1])[-MAX_REMEMBERED:]
        updated = dict(newest)
    return updated


#: The fleet is "below target" under this fraction of it: a fleet that hovers
#: at its target (a machine reloading) is not news.
BAND_TOLERANCE = 0.95


@dataclass(frozen=True, slots=True)
class BandStep:
    """The monitor's band state after one poll, and what to tell (if anything)."""

    under_since: datetime | None
    notified: bool
    event: str | None = None  # "under_target" | "back_in_band"


def band_step(
    under_since: datetime | None,
    notified: bool,
    *,
    capacity: float,
    target: float,
    now: datetime,
    after_minutes: float,
) -> BandStep:
    """One poll of the fleet against its target: under it for `after_minutes`
    notifies once; back in band after that notifies once; a dip shorter than
    that notifies nothing."""
    if target > 0 and capacity < target * BAND_TOLERANCE:
        since = under_since or now
        if not notified and now - since >= timedelta(minutes=after_minutes):
            return BandStep(since, True, "under_target")
        return BandStep(since, notified)
    return BandStep(None, False, "back_in_band" if notified else None)


def idempotency_key(agent_id: str, event: NotifyEvent, quiet_minutes: float) -> str:
    """(agent, kind, subject, bucket): the bucket is the event's time in
    windows of the quiet period (at least a minute) since the epoch."""
    width = max(timedelta(minutes=quiet_minutes), _MIN_BUCKET).total_seconds()
    bucket = int(event.at.timestamp() // width)
    return f"{agent_id[:120]}/{event.kind}/{event.subject[:120]}/{bucket}"
