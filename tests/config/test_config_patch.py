"""`ConfigPatch` follows `AgentConfig`: every field but the unpatchable ones can
be patched, and every bound of `AgentConfig` holds in the patch, refused with
the field's name. The cases are generated from `AgentConfig.model_fields`, so
a new field or bound is covered without an edit here; a kind of bound this
file does not know fails until it is taught."""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Iterator
from typing import Annotated, Any

import annotated_types as at
import pytest
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from fleet_agent.loop.inputs import parse_config_patch
from fleet_agent.models import AgentConfig, ConfigPatch
from fleet_agent.models.config import NOT_PATCHABLE

PATCHABLE = [name for name in AgentConfig.model_fields if name not in NOT_PATCHABLE]
DEFAULTS = AgentConfig().model_dump(mode="json")
#: A value like the field's, for fields whose default is an empty list.
EXAMPLES: dict[str, Any] = {
    "demand_events": [
        {"start": "2026-12-06T14:00:00Z", "end": "2026-12-06T16:00:00Z", "multiplier": 3.0}
    ]
}
#: What a value needs beside it to make a valid config (demand mode needs a max_target).
CONTEXT: dict[str, dict[str, Any]] = {"target_mode": {"max_target": 1000.0}}


def _accepts(model: type[BaseModel], raw: dict[str, Any]) -> bool:
    try:
        model.model_validate(raw)
    except ValidationError:
        return False
    return True


def test_every_config_field_is_patchable_but_the_listed_ones() -> None:
    assert AgentConfig.model_fields.keys() >= NOT_PATCHABLE, "a stale NOT_PATCHABLE name"
    assert list(ConfigPatch.model_fields) == PATCHABLE
    assert all(ConfigPatch.model_fields[name].default is None for name in PATCHABLE)
    for name in NOT_PATCHABLE:
        assert "Extra inputs are not permitted" in (parse_config_patch({name: False}).error or "")


@pytest.mark.parametrize("name", PATCHABLE)
def test_a_field_takes_its_value_as_json_gives_it(name: str) -> None:
    """The default, as JSON would carry it over the wire, is a patch that
    applies: a field whose type the strict patch cannot take from JSON (a
    datetime, an enum) is not patchable in practice and fails here."""
    raw = json.loads(json.dumps({name: DEFAULTS[name]}))
    parsed = parse_config_patch(raw)
    assert parsed.value is not None, parsed.error
    applied = parsed.value.apply(AgentConfig(paused=True, dry_run=True))
    assert applied.model_dump(mode="json")[name] == DEFAULTS[name]


def _just_below(bound: Any, kind: object) -> object:
    return bound - 1 if kind is int else math.nextafter(bound, -math.inf)


def _just_above(bound: Any, kind: object) -> object:
    return bound + 1 if kind is int else math.nextafter(bound, math.inf)


def _sized(example: object, n: int) -> object:
    if isinstance(example, str):
        return "A" * n
    if isinstance(example, list) and example:
        return [example[0]] * n
    raise AssertionError(f"no value of length {n} like {example!r}; teach this test")


def _probes(kind: object, metadata: list[object], example: object) -> Iterator[tuple[object, bool]]:
    """(value, accepted) at and just outside each bound of a field or item."""
    for bound in metadata:
        match bound:
            case at.Ge(ge=b):
                yield b, True
                yield _just_below(b, kind), False
            case at.Gt(gt=b):
                yield _just_above(b, kind), True
                yield b, False
            case at.Le(le=b):
                yield b, True
                yield _just_above(b, kind), False
            case at.Lt(lt=b):
                yield _just_below(b, kind), True
                yield b, False
            case at.MinLen(min_length=n):
                yield _sized(example, n), True
                if n > 0:
                    yield _sized(example, n - 1), False
            case at.MaxLen(max_length=n):
                yield _sized(example, n), True
                yield _sized(example, n + 1), False
            case _:
                raise AssertionError(f"no probe for the bound {bound!r}; teach this test")
    # The items of a list carry bounds of their own (allowed_gpus: 1..64 characters).
    if typing.get_origin(kind) is list and isinstance(example, list) and example:
        (item,) = typing.get_args(kind)
        if typing.get_origin(item) is Annotated:
            inner, *extras = typing.get_args(item)
            item_bounds = [
                m for e in extras for m in (e.metadata if isinstance(e, FieldInfo) else [e])
            ]
            for value, ok in _probes(inner, item_bounds, example[0]):
                yield [value], ok
    if typing.get_origin(kind) is typing.Literal:
        for member in typing.get_args(kind):
            yield member, True
        yield "not-a-member", False


def _cases() -> Iterator[Any]:
    for name in PATCHABLE:
        info = AgentConfig.model_fields[name]
        example = EXAMPLES.get(name, DEFAULTS[name])
        for value, ok in _probes(info.annotation, info.metadata, example):
            verdict = "ok" if ok else "refused"
            yield pytest.param(name, value, ok, id=f"{name}-{verdict}-{value!r:.24}")


@pytest.mark.parametrize(("name", "value", "accepted"), list(_cases()))
def test_every_bound_of_the_config_holds_in_the_patch(
    name: str, value: Any, accepted: bool
) -> None:
    raw = {name: value, **CONTEXT.get(name, {})}
    assert _accepts(AgentConfig, raw) is accepted, "the probe itself is wrong"
    error = parse_config_patch(raw).error
    if accepted:
        assert not error
    else:
        assert error.startswith((f"{name}:", f"{name}.")), error


@pytest.mark.parametrize(
    "name", [n for n in PATCHABLE if AgentConfig.model_fields[n].annotation in (int, float)]
)
def test_numbers_are_not_coerced(name: str) -> None:
    """Strict, as every inbound payload: "100" is not 100, and true is not 1."""
    for value in (str(DEFAULTS[name]), True):
        error = parse_config_patch({name: value}).error
        assert error.startswith(f"{name}:"), error
