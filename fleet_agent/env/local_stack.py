"""Where a local stack (`fleet-agent up`, `make run`) listens and keeps its files.

A stack is identified by its Temporal database: everything it keeps on disk
(the store, the simulator's state) belongs with that database, so two stacks
never share a run log. The default stack (the default port, the database file
of temporal-dev.yaml) keeps its files in `var/` as it always has; a stack on
another port gets its own folder `var/stack-<port>/` (its Temporal database
too, unless one is named); a stack on a named database file gets a folder
keyed by that file. Pure paths and environment parsing: nothing here touches
the disk or the network.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CONSOLE_PORT_ENV",
    "DEFAULT_CONSOLE_PORT",
    "DEFAULT_TEMPORAL_PORT",
    "TEMPORAL_PORT_ENV",
    "TEMPORAL_UI_PORT_ENV",
    "StackPaths",
    "env_port",
    "stack_paths",
]

TEMPORAL_PORT_ENV = "TEMPORAL_PORT"
TEMPORAL_UI_PORT_ENV = "TEMPORAL_UI_PORT"
CONSOLE_PORT_ENV = "CONSOLE_PORT"
# temporal-dev.yaml says the same; the CLI's reading commands need it without
# reading YAML (and tests pin that the two agree).
DEFAULT_TEMPORAL_PORT = 7233
DEFAULT_CONSOLE_PORT = 8080

STATE_FOLDER = "var"
STORE_FILE = "fleet-agent.db"
SIM_STATE_FILE = "sim-state.json"
TEMPORAL_DB_FILE = "temporal-dev.db"
ROUTER_CA_DIR = "router-ca"


def env_port(name: str, env: Mapping[str, str] | None = None) -> int | None:
    """The port in environment variable `name`, None when unset or empty.

    Raises `ValueError` naming the variable for anything but 1..65535.
    """
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a port number (1-65535), not {raw!r}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"{name} must be a port number (1-65535), not {raw!r}")
    return port


@dataclass(frozen=True)
class StackPaths:
    """The files of one local stack, all under `folder`, except a named Temporal database."""

    folder: Path
    temporal_db: Path | None
    store: Path
    sim_state: Path
    #: Written by the running `up` (its pid and ports), so a second `up` on the
    #: same port finds it; keyed by port because the port is what collides.
    stack_file: Path

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.store}"

    @property
    def router_ca(self) -> Path:
        """The CA that signs the stack's router-mode machines and its router
        (FLEET_ROUTER_CA_DIR; the default stack's is var/router-ca, the setting's default)."""
        return self.folder / ROUTER_CA_DIR


def stack_paths(
    port: int,
    *,
    db_filename: str | None = None,
    default_port: int = DEFAULT_TEMPORAL_PORT,
    default_db: str | None = f"{STATE_FOLDER}/{TEMPORAL_DB_FILE}",
    base: Path | None = None,
    db_base: Path | None = None,
) -> StackPaths:
    """The files of the stack on Temporal `port` with database `db_filename`.

    `db_filename` None means the default: temporal-dev.yaml's file (`default_db`)
    on the default port, `var/stack-<port>/temporal-dev.db` on any other.
    Relative paths resolve against `base` (the working directory, where the
    store and the simulator's state have always been) and, for the Temporal
    database, `db_base` (the checkout, as temporal-dev.yaml is read).
    """
    base = Path.cwd() if base is None else base
    db_base = base if db_base is None else db_base
    var = base / STATE_FOLDER
    stack_file = var / f"stack-{port}.json"
    named = db_filename is not None and db_filename != default_db
    if named:
        assert db_filename is not None
        db = (db_base / db_filename).resolve()
        # Keyed by the file itself: the same database later on another port
        # finds its store again; another file never shares one.
        digest = hashlib.sha256(str(db).encode()).hexdigest()[:8]
        folder = var / f"stack-{db.stem}-{digest}"
        return StackPaths(folder, db, folder / STORE_FILE, folder / SIM_STATE_FILE, stack_file)
    if port == default_port:
        db_path = None if default_db is None else db_base / default_db
        return StackPaths(var, db_path, var / STORE_FILE, var / SIM_STATE_FILE, stack_file)
    folder = var / f"stack-{port}"
    return StackPaths(
        folder,
        None if default_db is None else folder / TEMPORAL_DB_FILE,
        folder / STORE_FILE,
        folder / SIM_STATE_FILE,
        stack_file,
    )
