"""`ConfigPatch` on chosen values: bad values and unknown keys refused, a patch
changes only its fields, bounds accepted. Pure: no server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleet_agent.models import AgentConfig, ConfigPatch


@pytest.mark.parametrize(
    "raw",
    [
        {"heartbeat_seconds": 5},
        {"heartbeat_seconds": 86_401},
        {"heartbeat_seconds": 30.5},
        {"history_token_budget": 10},
        {"max_rounds": 0},
        {"min_reliability": 1.5},
        {"target_proofs_per_hour": -1},
        {"p0_debounce_seconds": 0},
        {"max_instances": -1},
        {"paused": "maybe"},
        {"allowed_gpus": "RTX 4090"},
        {"not_proving_minutes": 1},
        {"not_proving_minutes": "soon"},
        {"min_release_age_minutes": -5},
        {"failed_host_ttl_hours": 10_000},
        {"failed_host_ttl_hours": True},
        {"llm_effort": "extreme"},
        {"llm_effort": "HIGH"},
        {"llm_effort": 3},
        {"llm_thinking_display": "full"},
        {"llm_thinking_display": True},
    ],
)
def test_invalid_values_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as err:
        ConfigPatch.model_validate(raw)
    assert next(iter(raw)) in str(err.value)


@pytest.mark.parametrize("raw", [{"no_such": 1}, {"heartbeat": 60}, {"paused": True, "x": 0}])
def test_unknown_keys_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ConfigPatch.model_validate(raw)


def test_apply_changes_only_the_given_fields() -> None:
    base = AgentConfig(target_proofs_per_hour=100, heartbeat_seconds=600)
    patch = ConfigPatch.model_validate({"target_proofs_per_hour": 250, "allowed_gpus": ["A100"]})
    new = patch.apply(base)
    assert new.target_proofs_per_hour == 250 and new.allowed_gpus == ["A100"]
    assert new.model_dump(exclude={"target_proofs_per_hour", "allowed_gpus"}) == base.model_dump(
        exclude={"target_proofs_per_hour", "allowed_gpus"}
    )
    assert base.target_proofs_per_hour == 100, "the old config is not mutated"
    assert not patch.is_empty()


def test_empty_patch_changes_nothing() -> None:
    base = AgentConfig(heartbeat_seconds=45)
    assert ConfigPatch().is_empty()
    assert ConfigPatch().apply(base) == base


@pytest.mark.parametrize("raw", [{"heartbeat_seconds": 30}, {"heartbeat_seconds": 86_400}])
def test_boundary_values_are_accepted(raw: dict[str, Any]) -> None:
    assert ConfigPatch.model_validate(raw).apply(AgentConfig()).heartbeat_seconds == next(
        iter(raw.values())
    )
