"""`key=value` config assignments from the command line, as the update expects them.

Values are JSON when they parse as JSON (`500`, `true`, `0.95`, `["A100"]`),
otherwise plain strings; list fields also take a comma-separated list
(`allowed_gpus=RTX 4090,A100`). Validation is the workflow's job: its message
is the one the operator sees.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from fleet_agent.loop.inputs import parse_config_patch
from fleet_agent.models import AgentConfig, ConfigPatch
from starter.agent_client import UsageError, validation_message

__all__ = ["LIST_FIELDS", "checked_changes", "parse_assignments", "parse_value", "patch_from"]

# Fields whose value is a list; derived from the defaults so new ones need no edit here.
LIST_FIELDS = frozenset(k for k, v in AgentConfig().model_dump().items() if isinstance(v, list))


def parse_value(key: str, raw: str) -> Any:
    """One value: a comma-separated list for list fields, JSON if it parses, else a string."""
    text = raw.strip()
    if key in LIST_FIELDS and not text.startswith("["):
        return [part.strip() for part in text.split(",") if part.strip()]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return raw


def parse_assignments(items: Iterable[str]) -> dict[str, Any]:
    """`["a=1", "b=x"]` → `{"a": 1, "b": "x"}`; a later key wins. `-` in keys reads as `_`."""
    changes: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {item!r}")
        changes[key] = parse_value(key, raw)
    return changes


def patch_from(changes: dict[str, Any]) -> ConfigPatch | None:
    """A validated `ConfigPatch` for a fresh start (no workflow to ask yet)."""
    if not changes:
        return None
    try:
        return ConfigPatch.model_validate(changes)
    except ValidationError as exc:
        raise UsageError(f"invalid config: {validation_message(exc)}") from None


def checked_changes(items: Iterable[str]) -> dict[str, Any]:
    """`--set` items for the `update_config` update, checked as its validator
    checks them first (unknown keys, out-of-range values): a mistake in the
    command line is a usage error, found without asking the agent. The
    validator still judges the result against the running config."""
    changes = parse_assignments(items)
    error = parse_config_patch(changes).error
    if error:
        raise UsageError(f"invalid config: {error}")
    return changes
