"""Instance labels: which machines are this agent's, and which tool call rented each.

A create carries a label derived from (agent, run, tool call), so a retried or
crashed create can look for its own machine before renting another one, and
the agent only ever destroys machines whose label marks them as its own.

Format: ``fleet-agent/<agent ID>/r<run>-<10 hex digits>``. The agent ID is
written as it is (workflow IDs may contain ``/``), and a label is parsed
exactly: the agent is everything between the leading ``fleet-agent/`` and the
last ``/``, and what follows the last ``/`` must be the ``r<run>-<hash>``
tail, which has no ``/``. So agent ``a`` never owns agent ``a/b``'s machine
``fleet-agent/a/b/r1-…``: its agent part is ``a/b``. Labels written before
this rule had the same format, so machines rented by earlier versions stay
recognised.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = [
    "MAX_LABEL_CHARS",
    "LabelTooLong",
    "ParsedLabel",
    "create_label",
    "is_ours",
    "label_prefix",
    "parse_label",
]

_PREFIX = "fleet-agent/"
_TAIL = re.compile(r"r(?P<run>0|[1-9][0-9]*)-(?P<digest>[0-9a-f]{10})")
#: vast.ai refuses longer labels on create (``x-input-validation`` of create_instance).
MAX_LABEL_CHARS = 256


class LabelTooLong(ValueError):
    """The agent ID is too long to fit a vast.ai label."""


@dataclass(frozen=True, slots=True)
class ParsedLabel:
    agent_id: str
    run: int
    digest: str


def label_prefix(agent_id: str) -> str:
    """Every label of `agent_id` starts with this; a cheap pre-filter only:
    `is_ours` decides (agent ``a``'s prefix is also the start of ``a/b``'s)."""
    return f"{_PREFIX}{agent_id}/"


def create_label(agent_id: str, run: int, tool_use_id: str) -> str:
    """Unique per tool call; short, since vast.ai shows labels in its console."""
    if not agent_id:
        raise ValueError("an agent ID is needed for a label")
    digest = hashlib.sha256(tool_use_id.encode()).hexdigest()[:10]
    label = f"{label_prefix(agent_id)}r{int(run)}-{digest}"
    if len(label) > MAX_LABEL_CHARS:
        raise LabelTooLong(
            f"agent ID of {len(agent_id)} characters makes a {len(label)}-character label; "
            f"vast.ai takes at most {MAX_LABEL_CHARS}"
        )
    return label


def parse_label(label: str | None) -> ParsedLabel | None:
    """The parts of a label this code writes, or None for any other label."""
    if not label or not label.startswith(_PREFIX):
        return None
    agent, sep, tail = label[len(_PREFIX) :].rpartition("/")
    match = _TAIL.fullmatch(tail)
    if not sep or not agent or match is None:
        return None
    return ParsedLabel(agent_id=agent, run=int(match["run"]), digest=match["digest"])


def is_ours(label: str | None, agent_id: str) -> bool:
    """Whether `label` is a create label of exactly `agent_id`."""
    parsed = parse_label(label)
    return parsed is not None and parsed.agent_id == agent_id
