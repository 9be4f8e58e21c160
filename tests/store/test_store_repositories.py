"""One way to build a repository (docs/decisions/store.md): every class of the
store that reads or writes through the engine is a `Repository` built from a
`Store`, and the `Store` holds the run log's as attributes named after their
modules, all on its own engine."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import fleet_agent.store as store_package
from fleet_agent.store import Store
from fleet_agent.store.base import Repository

RUN_LOG = {"sessions", "messages", "run_writes", "run_reads", "run_costs", "inbox", "summaries"}


def _store_classes() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(store_package.__path__):
        module = importlib.import_module(f"{store_package.__name__}.{info.name}")
        found += [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__
        ]
    return found


def test_the_store_is_composed_not_mixed() -> None:
    assert Store.__mro__ == (Store, object)


def test_every_class_on_the_engine_is_a_repository() -> None:
    on_engine = [
        cls
        for cls in _store_classes()
        if cls is not Store and "self._engine" in inspect.getsource(cls)
    ]
    assert len(on_engine) >= 15, on_engine
    assert [c.__name__ for c in on_engine if not issubclass(c, Repository)] == []
    for cls in on_engine:
        # Built from a store, as `ToolJournal(store)`: no second constructor.
        assert list(inspect.signature(cls).parameters) == ["store"], cls


def test_the_store_holds_the_run_logs_repositories(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")  # opening creates nothing
    try:
        held = {name: r for name, r in vars(store).items() if isinstance(r, Repository)}
        assert set(held) == RUN_LOG
        for name, repository in held.items():
            assert type(repository).__module__ == f"fleet_agent.store.{name}"
            assert repository._engine is store.engine
    finally:
        store.dispose()
