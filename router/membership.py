"""Where the router's member list comes from: a JSON file here, the store later.

A `MembershipSource` runs beside the router and calls `Router.set_members`
whenever the list changes. `MembersFile` reads a JSON list of `MemberSpec`
(fleet_agent/cuzk/witness.py) and reads it again when its modification time
or size changes; a file that does not parse is logged and the last good
list stays. Reads one file; touches nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import TypeAdapter, ValidationError

from fleet_agent.cuzk.witness import MemberSpec

if TYPE_CHECKING:
    from .engine import Router

__all__ = ["MembersFile", "MembershipSource", "parse_members"]

log = logging.getLogger(__name__)

_SPECS = TypeAdapter(list[MemberSpec])


class MembershipSource(Protocol):
    """Keeps a router's members current until cancelled."""

    async def run(self, router: Router) -> None: ...


def parse_members(text: str) -> list[MemberSpec]:
    """The members a JSON list describes (ValidationError if it is not one)."""
    return _SPECS.validate_json(text)


class MembersFile:
    """A JSON file of `MemberSpec`s, re-read when it changes (every `interval_s`)."""

    def __init__(self, path: Path, interval_s: float = 2.0) -> None:
        self.path = path
        self.interval_s = interval_s
        self._seen: tuple[int, int] | None = None

    def read_if_changed(self) -> list[MemberSpec] | None:
        """The members if the file changed since the last read and parses, else None."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._seen:
            return None
        self._seen = stamp
        try:
            return parse_members(self.path.read_text())
        except (OSError, ValidationError, ValueError) as err:
            log.warning("members file %s not read: %s", self.path, err)
            return None

    async def run(self, router: Router) -> None:
        """Apply the file's members now and whenever it changes."""
        while True:
            specs = self.read_if_changed()
            if specs is not None:
                router.set_members(specs)
                log.info("members: %d from %s", len(specs), self.path)
            await asyncio.sleep(self.interval_s)
