"""The custom search attributes fleet-agent upserts, by name and type.

The one list: temporal-dev.yaml registers them on the local dev server,
docs/operations/watch.md gives the commands for a production namespace, the
worker checks that the namespace has them (activities/visibility.py), and
the workflows upsert them (workflows/search_attributes.py). Values are IDs,
phases, booleans and trigger kinds: never a text.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

from fleet_agent.models import Phase

__all__ = [
    "SEARCH_ATTRIBUTES",
    "SEARCH_ATTRIBUTES_ENV",
    "SearchAttribute",
    "SearchAttributeMode",
    "search_attribute_mode",
    "search_phase",
]

SEARCH_ATTRIBUTES_ENV = "FLEET_SEARCH_ATTRIBUTES"
# auto: the worker asks the namespace whether they are registered; on: trust
# that they are (an operator API the worker may not call); off: never upsert.
SearchAttributeMode = Literal["auto", "on", "off"]


class SearchAttribute(StrEnum):
    AGENT_ID = "FleetAgentId"  # on the agent and on each of its runs
    PHASE = "FleetPhase"  # the agent: idle, running, paused or frozen
    VERDICT_ACTION = "RunVerdictAction"  # a run that acted (its verdict, or a mutating call)
    NOOP = "RunNoop"  # a run that did nothing and was left out of the prompt
    TRIGGERS = "RunTriggers"  # the kinds of the triggers a run took


# Name → type as `temporal operator search-attribute create --type` spells it.
SEARCH_ATTRIBUTES: dict[str, str] = {
    SearchAttribute.AGENT_ID: "Keyword",
    SearchAttribute.PHASE: "Keyword",
    SearchAttribute.VERDICT_ACTION: "Bool",
    SearchAttribute.NOOP: "Bool",
    SearchAttribute.TRIGGERS: "KeywordList",
}


def search_phase(phase: Phase) -> str:
    """The phase as the agent's `FleetPhase`: debouncing counts as idle, so
    a run costs two upserts (running, then idle), not three."""
    return Phase.IDLE.value if phase == Phase.DEBOUNCING else phase.value


def search_attribute_mode(env: Mapping[str, str]) -> SearchAttributeMode:
    """FLEET_SEARCH_ATTRIBUTES: auto (default), on or off; `ValueError` otherwise."""
    raw = env.get(SEARCH_ATTRIBUTES_ENV, "").strip().lower() or "auto"
    modes: dict[str, SearchAttributeMode] = {"auto": "auto", "on": "on", "off": "off"}
    if raw in modes:
        return modes[raw]
    raise ValueError(f"{SEARCH_ATTRIBUTES_ENV} must be auto, on or off, not {raw!r}")
