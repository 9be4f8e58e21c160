"""Pending triggers: coalesced, bounded, and O(1) per signal.

The agent workflow keeps the triggers that wait for the next run in its state,
which is copied into each run's input, the continue-as-new input and the
`status` answer. Whatever arrives, those must stay small (Temporal refuses a
payload over 2 MB) and every signal handler must stay cheap (a workflow task
that does not yield within 2 s is a deadlock). So:

- state changes of one instance coalesce into one trigger (first old state,
  last new state, a count);
- identical `trigger_now` reasons and configuration changes coalesce too;
- a human message keeps its full text only until the store has it, then a
  preview and the store key;
- a byte budget bounds what waits; a trigger over it is refused (the caller
  records the refusal where the operator sees it), never silently dropped;
- the earliest pending trigger of each priority is kept up to date as triggers
  arrive, so "when is a run due" never scans the list.

Pure and deterministic: safe inside workflows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from fleet_agent.models import InboxItem, Priority, Trigger, TriggerKind

__all__ = [
    "MAX_PENDING_BYTES",
    "MAX_UNSTORED_BYTES",
    "PREVIEW_CHARS",
    "QUERY_TEXT_CHARS",
    "RUN_CARRIES_UNSTORED_BYTES",
    "Refusal",
    "TriggerBuffer",
    "for_run",
    "inbox_item",
    "json_chars",
    "message_key",
    "preview",
]

# What may wait for a run, in (approximate) JSON bytes. With RunInput, the
# continue-as-new input and `status` each under 256 KB: 500 waiting operator
# messages fit (about 250 bytes each once their texts are in the store).
MAX_PENDING_BYTES = 160_000
# Message texts not yet in the store (it is slow or away), in JSON bytes: they
# travel in the workflow state until it comes back, so they are bounded too.
# With MAX_PENDING_BYTES, a continue-as-new input that must carry them (the
# store away for long) stays under the server's 512 KB payload limit.
MAX_UNSTORED_BYTES = 300_000
# Message texts a run may start with while the store does not have them yet
# (JSON bytes): its load_context fetches them by the agent's query and stores
# them, rather than wait for the agent's store loop. More (the store away for
# long) and the run waits for the loop. The name is the patch's
# (workflows/agent_runs.py): runs once carried these texts whole.
RUN_CARRIES_UNSTORED_BYTES = 32_000
PREVIEW_CHARS = 100
# Characters of message text per answer of the `unstored_messages` query
# (a query's answer is a payload too: under the server's blob size limit).
QUERY_TEXT_CHARS = 300_000
MAX_DETAIL_CHARS = 300
MAX_REASON_CHARS = 1_000
# Field names, separators, seq and timestamps of one trigger in JSON.
_OVERHEAD_BYTES = 120


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The start of a text, on one line, marked when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def for_run(triggers: list[Trigger]) -> list[Trigger]:
    """The triggers as a run's input carries them: each message's text as its
    preview. The run reads the whole text from the store by its key, so the
    text crosses history once, in its signal (activities/runlog.py)."""
    return [t.model_copy(update={"text": preview(t.text)}) if t.text_key else t for t in triggers]


def inbox_item(t: Trigger) -> InboxItem:
    """An operator message's trigger, whole, as the store's inbox keeps it (by `text_key`)."""
    return InboxItem(
        key=t.text_key, seq=t.seq, author=t.author, text=t.text, received_at=t.received_at
    )


def json_chars(text: str) -> int:
    """Length of `text` as a JSON string (quotes and escapes included)."""
    return len(json.dumps(text, ensure_ascii=False))


def message_key(seq: int, text: str) -> str:
    """Store key of a message: its seq plus a content hash, so a seq that is
    reused (a workflow reset re-applies signals) never picks up another text."""
    return f"{seq}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _size(t: Trigger) -> int:
    strings = (
        t.text,
        t.text_key,
        t.author,
        t.message_id,
        t.instance_id,
        t.old_state or "",
        t.new_state,
    )
    return _OVERHEAD_BYTES + sum(len(s) for s in strings) + len(t.detail) + len(t.reason)


@dataclass(frozen=True)
class Refusal:
    """Why a trigger was not kept (shown in `status.rejected`)."""

    reason: str


class TriggerBuffer:
    """The pending triggers of one agent, kept in `pending` (the state's list).

    Rebuilding from a list is O(n), once per workflow execution; every
    operation after that is O(1) except `take()`.
    """

    def __init__(
        self, pending: list[Trigger], unstored: list[str], taken: Sequence[InboxItem] = ()
    ) -> None:
        """`unstored`: the keys of texts not stored yet; their texts are in
        `pending`, or in `taken` for messages a run has already taken."""
        self.pending = pending
        self._by_instance: dict[str, Trigger] = {}
        self._by_reason: dict[str, Trigger] = {}
        self._config: Trigger | None = None
        self._first: dict[Priority, datetime] = {}
        self._bytes = 0
        self._unstored: dict[str, Trigger] = {}
        self._unstored_bytes = 0
        waiting = set(unstored)
        for t in pending:
            if t.text_key and t.text_key in waiting:
                self._unstored[t.text_key] = t
                self._unstored_bytes += json_chars(t.text)
                self._index(t, _size(t) - len(t.text) + len(preview(t.text)))
            else:
                self._index(t)
        for item in taken:
            if item.key in waiting and item.key not in self._unstored:
                self._unstored[item.key] = Trigger(
                    seq=item.seq,
                    kind=TriggerKind.HUMAN_MESSAGE,
                    received_at=item.received_at,
                    text=item.text,
                    text_key=item.key,
                    author=item.author,
                )
                self._unstored_bytes += json_chars(item.text)

    # ------------------------------------------------------------ reading

    @property
    def bytes(self) -> int:
        """Approximate JSON size of what waits, texts of stored messages excluded."""
        return self._bytes

    def first_at(self, priority: Priority) -> datetime | None:
        """When the oldest pending trigger of `priority` arrived."""
        return self._first.get(priority)

    def folds_change_of(self, instance_id: str) -> bool:
        """A state change of this instance would fold into a pending one (so
        no debounce window opens or moves)."""
        return instance_id in self._by_instance

    @property
    def firsts(self) -> dict[Priority, datetime]:
        return dict(self._first)

    def shown(self) -> list[Trigger]:
        """The pending triggers as `status` shows them: message texts as
        previews, as a run's input carries them (a stored text is one already)."""
        return for_run(self.pending)

    @property
    def unstored_keys(self) -> list[str]:
        """Messages whose text is only in the workflow state so far."""
        return list(self._unstored)

    @property
    def unstored_bytes(self) -> int:
        """Their texts' size, in JSON bytes."""
        return self._unstored_bytes

    def unstored_items(self, max_chars: int = QUERY_TEXT_CHARS) -> list[InboxItem]:
        """Texts still to store, oldest first, as many as fit in `max_chars`
        (at least one): a query's answer is bounded like any payload."""
        items: list[InboxItem] = []
        total = 0
        for t in self._unstored.values():
            if items and total + len(t.text) > max_chars:
                break
            total += len(t.text)
            items.append(inbox_item(t))
        return items

    # ------------------------------------------------------------ adding

    def add_message(
        self, seq: int, at: datetime, text: str, author: str, message_id: str = ""
    ) -> Refusal | None:
        """An operator message: kept whole until `mark_stored`, then as a preview.
        `message_id` (the sender's, optional) stays with the trigger into the run log."""
        size = json_chars(text)
        if self._unstored_bytes + size > MAX_UNSTORED_BYTES:
            return Refusal(
                f"{len(self._unstored)} message(s) are still waiting for the store; "
                "send this one again in a minute"
            )
        trigger = Trigger(
            seq=seq,
            kind=TriggerKind.HUMAN_MESSAGE,
            received_at=at,
            text=text,
            text_key=message_key(seq, text),
            author=author,
            message_id=message_id,
        )
        kept_size = _size(trigger) - len(text) + len(preview(text))
        if self._bytes + kept_size > MAX_PENDING_BYTES:
            return self._full()
        self._append(trigger, kept_size)
        self._unstored[trigger.text_key] = trigger
        self._unstored_bytes += size
        return None

    def taken_unstored(self) -> list[InboxItem]:
        """Texts not stored yet of messages a run has taken (no longer
        pending): a continue-as-new carries them, as their only home."""
        pending = {t.text_key for t in self.pending if t.text_key}
        return [inbox_item(t) for k, t in self._unstored.items() if k not in pending]

    def mark_stored(self, keys: list[str]) -> None:
        """The store has these texts: keep a preview only."""
        for key in keys:
            trigger = self._unstored.pop(key, None)
            if trigger is not None:
                self._unstored_bytes -= json_chars(trigger.text)
                trigger.text = preview(trigger.text)

    def add_state_change(
        self,
        seq: int,
        at: datetime,
        *,
        instance_id: str,
        old_state: str | None,
        new_state: str,
        detail: str,
    ) -> Refusal | None:
        """Coalesce with the instance's pending change, or start a new one."""
        detail = detail[:MAX_DETAIL_CHARS]
        existing = self._by_instance.get(instance_id)
        if existing is not None:
            # Only these two strings change: their difference is the size's
            # (a flood folds thousands of changes; no re-summing per signal).
            self._bytes += len(new_state) - len(existing.new_state)
            self._bytes += len(detail) - len(existing.detail)
            existing.new_state = new_state
            existing.detail = detail
            existing.count += 1
            existing.last_seq = seq
            existing.last_received_at = at
            return None
        trigger = Trigger(
            seq=seq,
            kind=TriggerKind.STATE_CHANGED,
            received_at=at,
            instance_id=instance_id,
            old_state=old_state,
            new_state=new_state,
            detail=detail,
        )
        if self._bytes + _size(trigger) > MAX_PENDING_BYTES:
            return self._full()
        self._append(trigger)
        return None

    def add_trigger_now(self, seq: int, at: datetime, reason: str) -> Refusal | None:
        """A run request; the same reason asked again only counts."""
        existing = self._by_reason.get(reason)
        if existing is not None:
            existing.count += 1
            existing.last_seq = seq
            existing.last_received_at = at
            return None
        trigger = Trigger(seq=seq, kind=TriggerKind.TRIGGER_NOW, received_at=at, reason=reason)
        if self._bytes + _size(trigger) > MAX_PENDING_BYTES:
            return self._full()
        self._append(trigger)
        return None

    def add_config_change(self, seq: int, at: datetime, reason: str) -> None:
        """Configuration changes merge into one trigger (never refused)."""
        if self._config is not None:
            before = _size(self._config)
            merged = f"{self._config.reason}; {reason}"
            self._config.reason = merged[-MAX_REASON_CHARS:]
            self._config.count += 1
            self._config.last_seq = seq
            self._config.last_received_at = at
            self._bytes += _size(self._config) - before
            return
        self.add_internal(
            Trigger(
                seq=seq,
                kind=TriggerKind.CONFIG_CHANGED,
                received_at=at,
                reason=reason[-MAX_REASON_CHARS:],
            )
        )

    def add_internal(self, trigger: Trigger) -> None:
        """A trigger of the agent's own (start, reset, wake, config): never refused,
        and bounded by its source (one per start or reset, at most 50 wakes)."""
        self._append(trigger)

    # ------------------------------------------------------------ taking

    def take(self) -> list[Trigger]:
        """Everything pending, for a run; leaves nothing pending.

        Texts still unstored stay unstored here until `mark_stored` (the run's
        input carries previews, `for_run`): the store loop or the run's
        load_context writes them from here, and a continue-as-new carries
        them (`taken_unstored`) when it cannot wait for the store.
        """
        taken = list(self.pending)
        self.pending.clear()
        self._by_instance.clear()
        self._by_reason.clear()
        self._config = None
        self._first.clear()
        self._bytes = 0
        return taken

    # ------------------------------------------------------------ internals

    def _full(self) -> Refusal:
        return Refusal(
            f"{len(self.pending)} triggers ({self._bytes // 1000} KB) already wait for the "
            "next run; this one was not kept"
        )

    def _append(self, trigger: Trigger, size: int | None = None) -> None:
        self.pending.append(trigger)
        self._index(trigger, size)

    def _index(self, t: Trigger, size: int | None = None) -> None:
        if t.kind == TriggerKind.STATE_CHANGED:
            self._by_instance[t.instance_id] = t
        elif t.kind == TriggerKind.TRIGGER_NOW:
            self._by_reason[t.reason] = t
        elif t.kind == TriggerKind.CONFIG_CHANGED:
            self._config = t
        first = self._first.get(t.priority)
        if first is None or t.received_at < first:
            self._first[t.priority] = t.received_at
        self._bytes += _size(t) if size is None else size
