"""Typed keys of our search attributes (fleet_agent/visibility/search_attributes.py)
and what the workflows upsert.

Upserts happen only when the agent learned, at the start of its execution,
that the namespace has every attribute registered (activity
`search_attributes_ready`); an upsert of an unregistered attribute would fail
the workflow task over and over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    SearchAttributeUpdate,
    TypedSearchAttributes,
)

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and a pure table.
    from fleet_agent.llm.verdict import acted
    from fleet_agent.models import Phase, RunResult, Trigger
    from fleet_agent.visibility.search_attributes import SearchAttribute, search_phase

__all__ = ["PATCH", "agent_updates", "run_result_updates", "run_start_attributes"]

# workflow.patched ID of the code that checks and upserts search attributes.
PATCH = "search-attributes-v1"

AGENT_ID = SearchAttributeKey.for_keyword(SearchAttribute.AGENT_ID.value)
PHASE = SearchAttributeKey.for_keyword(SearchAttribute.PHASE.value)
VERDICT_ACTION = SearchAttributeKey.for_bool(SearchAttribute.VERDICT_ACTION.value)
NOOP = SearchAttributeKey.for_bool(SearchAttribute.NOOP.value)
TRIGGERS = SearchAttributeKey.for_keyword_list(SearchAttribute.TRIGGERS.value)


def agent_updates(agent_id: str, phase: Phase) -> list[SearchAttributeUpdate[Any]]:
    """The agent's `FleetAgentId` and `FleetPhase`."""
    return [AGENT_ID.value_set(agent_id), PHASE.value_set(search_phase(phase))]


def run_start_attributes(agent_id: str, triggers: Sequence[Trigger]) -> TypedSearchAttributes:
    """Set when a run starts (no event of its own): its agent and trigger kinds."""
    kinds = sorted({t.kind.value for t in triggers})
    return TypedSearchAttributes(
        [SearchAttributePair(AGENT_ID, agent_id), SearchAttributePair(TRIGGERS, kinds)]
    )


def run_result_updates(result: RunResult) -> list[SearchAttributeUpdate[Any]]:
    """Upserted when a run ends: whether it acted and whether it was a no-op."""
    return [VERDICT_ACTION.value_set(acted(result)), NOOP.value_set(result.noop)]
