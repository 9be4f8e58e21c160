"""Which offers the memory of failed hosts leaves out, and why a create is refused.

The fleet remembers every machine that died, never finished loading or
stopped proving (`fa_failed_hosts`, fleet_agent/store/hosts.py) until its
entry's `until`. The rule applied here:

- every remembered ``machine_id`` is left out;
- a ``host_id`` is left out only when at least `HOST_FAILURES` distinct
  machines of that host are remembered. One broken machine says little about
  a large provider's other machines (a host may list hundreds); a second one
  says the host's setup (network, disks, drivers) is likely at fault.

Pure functions: the activities read the entries from the store and pass them
in. Entries are anything shaped like `fleet_agent.store.FailedHost`, so this
module loads no database code.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple, Protocol

from fleet_agent.untrusted import single_line
from fleet_agent.vast.models import Offer

__all__ = ["HOST_FAILURES", "Exclusions", "Remembered", "exclusions", "failed_host_refusal"]

#: Distinct failed machines of one host that leave the whole host out.
HOST_FAILURES = 2
# A stored reason as a refusal quotes it: the host's words in it were fenced
# when it was written (activities/fleet_provers.py); one line whatever it holds.
_REASON_CHARS = 300


class Remembered(Protocol):
    """One remembered failure (`fleet_agent.store.FailedHost` fits)."""

    @property
    def machine_id(self) -> int: ...
    @property
    def host_id(self) -> int | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def failed_at(self) -> datetime: ...
    @property
    def until(self) -> datetime: ...


class Exclusions(NamedTuple):
    """Machines and hosts whose offers are not rented."""

    machines: frozenset[int]
    hosts: frozenset[int]

    def excludes(self, offer: Offer) -> bool:
        """Whether `offer` is on a left-out machine or host."""
        return offer.machine_id in self.machines or (
            offer.host_id is not None and offer.host_id in self.hosts
        )

    def __bool__(self) -> bool:
        return bool(self.machines or self.hosts)


def _by_host(entries: Iterable[Remembered]) -> dict[int, dict[int, Remembered]]:
    """Each host's remembered machines (one entry per machine, the latest)."""
    hosts: dict[int, dict[int, Remembered]] = {}
    for e in entries:
        if e.host_id is None:
            continue
        machines = hosts.setdefault(e.host_id, {})
        known = machines.get(e.machine_id)
        if known is None or e.failed_at > known.failed_at:
            machines[e.machine_id] = e
    return hosts


def exclusions(entries: Iterable[Remembered]) -> Exclusions:
    """What the active `entries` leave out: see the module's rule."""
    entries = list(entries)
    hosts = {h for h, machines in _by_host(entries).items() if len(machines) >= HOST_FAILURES}
    return Exclusions(frozenset(e.machine_id for e in entries), frozenset(hosts))


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def failed_host_refusal(offer: Offer, entries: Iterable[Remembered]) -> str | None:
    """Why `offer` is not rented because its machine or host failed, or None.

    Names the machine (or the host and its failed machines), why and when
    each failed, and until when the memory holds.
    """
    entries = list(entries)
    mine = [e for e in entries if e.machine_id == offer.machine_id]
    if mine:
        e = max(mine, key=lambda x: x.failed_at)
        return (
            f"machine {e.machine_id} of offer {offer.id} failed for this agent before "
            f"({single_line(e.reason, _REASON_CHARS)}, at {_when(e.failed_at)}); its offers "
            "are not rented until "
            f"{_when(e.until)}"
        )
    if offer.host_id is None or offer.host_id not in exclusions(entries).hosts:
        return None
    failed = sorted(
        _by_host(entries)[offer.host_id].values(), key=lambda x: x.failed_at, reverse=True
    )
    # The host stays left out while HOST_FAILURES of its machines are remembered.
    until = sorted((e.until for e in failed), reverse=True)[HOST_FAILURES - 1]
    which = "; ".join(
        f"machine {e.machine_id}: {single_line(e.reason, _REASON_CHARS)}, at {_when(e.failed_at)}"
        for e in failed
    )
    return (
        f"host {offer.host_id} of offer {offer.id} (machine {offer.machine_id}) had "
        f"{len(failed)} machines fail for this agent ({which}); its offers are not rented "
        f"until {_when(until)}"
    )
