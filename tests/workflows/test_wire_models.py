"""Nothing that crosses into a workflow can fail to decode.

Every pydantic model that enters a workflow is found by reflection, never by
a list someone keeps: the types of every workflow's run, signal, update and
query handlers, of every activity the workflows declare (workflows/stubs.py),
the annotations of every class and function in `workflows/` (the state they
hold, what they parse), and every inbound payload (`Strict`), followed
through their fields. Each such model must derive from `Wire`
(fleet_agent/wire.py), and hypothesis feeds each field hostile values: huge
and tiny floats, `inf`, `NaN`, huge integers, out-of-range and naive times,
control characters, lone surrogates, 1 MB strings. Each value is refused by
validation (a `ValidationError`, nothing else), or the model round-trips
unchanged through the project's data converter.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import json
import pkgutil
import types
import typing
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from enum import Enum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import to_json
from temporalio import workflow
from temporalio.contrib.pydantic import pydantic_data_converter

import workflows
from fleet_agent.models.base import Strict
from fleet_agent.wire import MAX_INT, Wire

_PROJECT = ("fleet_agent.", "workflows.", "activities.")


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except (NameError, TypeError):  # a name only a type checker sees
        return {}


def _workflow_modules() -> list[types.ModuleType]:
    return [
        importlib.import_module(f"workflows.{info.name}")
        for info in pkgutil.iter_modules(workflows.__path__)
    ]


def _roots() -> Iterator[Any]:
    """Every type a workflow receives, returns, holds or parses."""
    for module in _workflow_modules():
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj):
                defn = workflow._Definition.from_class(obj)
                if defn is not None:
                    handlers = [
                        defn.run_fn,
                        *(s.fn for s in defn.signals.values()),
                        *(u.fn for u in defn.updates.values()),
                        *(q.fn for q in defn.queries.values()),
                    ]
                    for fn in handlers:
                        yield from _hints(fn).values()
                yield from _hints(obj).values()
                for member in vars(obj).values():
                    if inspect.isfunction(member):
                        yield from _hints(member).values()
            elif inspect.isfunction(obj):
                # Activity declarations (workflows/stubs.py) and pure helpers.
                yield from _hints(obj).values()

    # Inbound payloads: signals and updates take loose JSON and parse into
    # these; and whatever else claims to be safe in a workflow (tool inputs,
    # which the run workflow parses from the model's calls).
    yield from _subclasses(Strict)
    yield from _subclasses(Wire)


def _subclasses(cls: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _walk(tp: Any, found: dict[type[BaseModel], None], seen: set[int]) -> None:
    if id(tp) in seen:
        return
    seen.add(id(tp))
    origin = typing.get_origin(tp)
    if origin is not None or isinstance(tp, types.UnionType):
        for arg in typing.get_args(tp):
            _walk(arg, found, seen)
        return
    if not inspect.isclass(tp):
        return
    if dataclasses.is_dataclass(tp):
        for hint in _hints(tp).values():
            _walk(hint, found, seen)
    elif issubclass(tp, BaseModel) and tp.__module__.startswith(_PROJECT):
        found[tp] = None
        for field in tp.model_fields.values():
            _walk(field.annotation, found, seen)


def wire_models() -> list[type[BaseModel]]:
    """The project's models that cross into a workflow, by reflection."""
    found: dict[type[BaseModel], None] = {}
    seen: set[int] = set()
    for root in _roots():
        _walk(root, found, seen)
    models = [m for m in found if m.model_fields]  # a field-less base carries nothing
    return sorted(models, key=lambda m: f"{m.__module__}.{m.__qualname__}")


MODELS = wire_models()


def test_reflection_finds_the_models_that_cross() -> None:
    names = {m.__qualname__ for m in MODELS}
    # A sample of each way in: state, signal, update, activity result, query, child result.
    assert {"AgentState", "HumanMessage", "ConfigPatch", "FleetSnapshot", "AgentStatus"} <= names
    assert {"RunResult", "DemandEvent", "MonitorInput", "LlmResult", "Wake"} <= names
    assert {"ExpectDemandInput", "ScheduleNextCheckInput"} <= names  # parsed in the run
    assert len(MODELS) > 60, len(MODELS)


def test_every_model_that_crosses_into_a_workflow_is_wire() -> None:
    loose = [f"{m.__module__}.{m.__qualname__}" for m in MODELS if not issubclass(m, Wire)]
    assert not loose, "derive these from fleet_agent.wire.Wire: " + ", ".join(loose)


# ------------------------------------------------------------- values


def _bounds(info: FieldInfo | None, metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in [*(info.metadata if info else []), *metadata]:
        for name in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(m, name, None)
            if value is not None:
                out[name] = value
    return out


def _split(tp: Any) -> tuple[Any, list[Any]]:
    """(type, constraints) of an `Annotated` type."""
    metadata: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        tp, *more = typing.get_args(tp)
        for m in more:
            if isinstance(m, FieldInfo):
                metadata.extend(m.metadata)
            else:
                metadata.append(m)
    return tp, metadata


_MINUTES = itertools.count()


def _ordinary(tp: Any, info: FieldInfo | None = None) -> Any:
    """A plain valid value of `tp` within its declared bounds (python mode)."""
    tp, metadata = _split(tp)
    b = _bounds(info, metadata)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is type(None):
        return None
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Union or isinstance(tp, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        return None if len(non_none) < len(args) else _ordinary(non_none[0])
    if origin in (list, set, frozenset):
        n = b.get("min_length", 0)
        return origin(_ordinary(args[0]) for _ in range(n)) if n else origin()
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ()
        return tuple(_ordinary(a) for a in args)
    if origin is dict:
        return {}
    if inspect.isclass(tp):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, Enum):
            return next(iter(tp))
        if issubclass(tp, int):
            low = b.get("ge", b["gt"] + 1 if "gt" in b else 0)
            return max(low, 0) if "le" not in b else min(max(low, 0), b["le"])
        if issubclass(tp, float):
            low = b.get("ge", b["gt"] + 1e-3 if "gt" in b else 0.0)
            value = max(float(low), 0.0)
            return value if "le" not in b else min(value, float(b["le"]))
        if issubclass(tp, str):
            return "x" * max(b.get("min_length", 1), 1)
        if issubclass(tp, datetime):
            # Each later than the last: a model's times often come in order (start, end).
            return datetime(2026, 12, 7, 12, tzinfo=UTC) + timedelta(minutes=next(_MINUTES))
        if issubclass(tp, date):
            return date(2026, 12, 7)
        if issubclass(tp, timedelta):
            return timedelta(seconds=1)
        if issubclass(tp, BaseModel):
            return ordinary_instance(tp)
    return None


def ordinary_data(model: type[BaseModel]) -> dict[str, Any]:
    """A valid input: defaults, and an ordinary value for each required field;
    in JSON's types (times as text) for a model that takes only those."""
    data = {
        name: _ordinary(f.annotation, f)
        for name, f in model.model_fields.items()
        if f.is_required()
    }
    try:
        model.model_validate(data)
    except ValidationError:
        data = json.loads(to_json(data))
        model.model_validate(data)
    return data


def ordinary_instance(model: type[BaseModel]) -> BaseModel:
    return model.model_validate(ordinary_data(model))


# Values that broke or would break a workflow, and their kin.
_FLOATS = st.one_of(
    st.sampled_from([float("inf"), -float("inf"), float("nan"), 1e308, -1e308, 5e-324, 1e16]),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
)
_INTS = st.one_of(
    st.sampled_from([2**53, -(2**53), 2**63, 2**64 + 1, 10**400, -(10**30), MAX_INT]),
    st.integers(),
)
_OFFSETS = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
)
_TIMES = st.one_of(
    st.sampled_from(
        [
            datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))),
            datetime(9999, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5))),
            datetime(2026, 12, 7, 12),  # naive
            datetime.min,
            datetime.max,
        ]
    ),
    st.datetimes(timezones=st.none() | _OFFSETS),
)
_TEXTS = st.one_of(
    st.sampled_from(
        ["x" * 1_000_000, "\ud800", "a\udfffb", "\x00\x1b[2J\r\n\u202e", "", " ", "1e999"]
    ),
    # Times as text, where they break: `astimezone` overflows on both.
    st.sampled_from(["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-05:00", "NaN", "-0"]),
    st.text(st.characters(codec="utf-8"), max_size=50),
    st.text(st.characters(categories=["Cs", "Cc", "Cf"]), max_size=10),
)
_SCALARS = st.one_of(_FLOATS, _INTS, _TIMES, _TEXTS, st.booleans(), st.none())


def _hostile(tp: Any) -> st.SearchStrategy[Any]:
    """Hostile values shaped like `tp` (inside its containers), and any hostile scalar."""
    tp, _ = _split(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    shaped: list[st.SearchStrategy[Any]] = []
    if origin is typing.Union or isinstance(tp, types.UnionType):
        shaped += [_hostile(a) for a in args if a is not type(None)]
    elif origin in (list, set, frozenset, tuple) and args:
        inner = _hostile(args[0])
        shaped.append(st.lists(inner, min_size=1, max_size=3))
        if origin is tuple:
            shaped.append(st.tuples(*(_hostile(a) for a in args if a is not Ellipsis)))
    elif origin is dict and args:
        shaped.append(st.dictionaries(_hostile(args[0]), _hostile(args[1]), min_size=1, max_size=2))
    elif inspect.isclass(tp):
        if issubclass(tp, float):
            shaped.append(_FLOATS)
        elif issubclass(tp, int) and not issubclass(tp, bool):
            shaped.append(_INTS)
        elif issubclass(tp, datetime):
            shaped.append(_TIMES)
        elif issubclass(tp, str):
            shaped.append(_TEXTS)
    return st.one_of(*shaped, _SCALARS) if shaped else _SCALARS


_CONVERTER = pydantic_data_converter.payload_converter


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__qualname__)
def test_an_ordinary_instance_round_trips(model: type[BaseModel]) -> None:
    instance = ordinary_instance(model)
    (payload,) = _CONVERTER.to_payloads([instance])
    assert _CONVERTER.from_payloads([payload], [model]) == [instance]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__qualname__)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_fields_are_refused_or_round_trip_unchanged(
    model: type[BaseModel], data: st.DataObject
) -> None:
    base = ordinary_data(model)
    name = data.draw(st.sampled_from(sorted(model.model_fields)), label="field")
    value = data.draw(_hostile(model.model_fields[name].annotation), label="value")
    try:
        instance = model.model_validate({**base, name: value})
    except ValidationError:
        return  # refused at the edge: the workflow never sees it
    (payload,) = _CONVERTER.to_payloads([instance])
    back = _CONVERTER.from_payloads([payload], [model])[0]
    assert back == instance, (name, value)
