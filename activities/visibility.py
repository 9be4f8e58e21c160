"""Whether the namespace has our search attributes registered.

The agent asks once per execution (activity `search_attributes_ready`) and
upserts only when they are: an upsert of an attribute the namespace does not
know fails the workflow task, again and again. FLEET_SEARCH_ATTRIBUTES
overrides the check: `on` (trust that they are registered: a namespace whose
operator API this worker may not call), `off` (never upsert), `auto` (the
default: ask the namespace with OperatorService.ListSearchAttributes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.service import RPCError

from fleet_agent.visibility.search_attributes import (
    SEARCH_ATTRIBUTES,
    SEARCH_ATTRIBUTES_ENV,
    SearchAttributeMode,
)

__all__ = ["VisibilityActivities", "missing_attributes"]

log = logging.getLogger("fleet_agent.visibility")

# A namespace without them is asked again after this long (an operator may
# register them meanwhile); one with them is not asked again.
_RECHECK_SECONDS = 300.0


def missing_attributes(registered: Mapping[str, int]) -> list[str]:
    """`NAME (Type)` of each of ours the namespace lacks or has with another type."""
    missing: list[str] = []
    for name, kind in SEARCH_ATTRIBUTES.items():
        want = IndexedValueType.Value(
            "INDEXED_VALUE_TYPE_" + ("KEYWORD_LIST" if kind == "KeywordList" else kind.upper())
        )
        if registered.get(name) != want:
            missing.append(f"{name} ({kind})")
    return missing


class VisibilityActivities:
    """Caches the answer per worker and namespace."""

    def __init__(self, mode: SearchAttributeMode = "auto") -> None:
        self._mode = mode
        self._ready: dict[str, tuple[bool, float]] = {}

    @activity.defn
    async def search_attributes_ready(self) -> bool:
        """True when every attribute of fleet_agent/visibility/search_attributes.py is
        registered on the worker's namespace with its type (reads the
        namespace's search attributes through the worker's client). A server
        that cannot say (the time-skipping test server, an operator API this
        worker may not call) counts as not ready."""
        if self._mode != "auto":
            return self._mode == "on"
        client = activity.client()
        namespace = client.namespace
        cached = self._ready.get(namespace)
        if cached is not None and (cached[0] or time.monotonic() - cached[1] < _RECHECK_SECONDS):
            return cached[0]
        try:
            listed = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace)
            )
        except RPCError as exc:
            log.warning(
                "cannot list the search attributes of namespace %s (%s): not upserting them; "
                "set %s=on if they are registered",
                namespace,
                exc.message,
                SEARCH_ATTRIBUTES_ENV,
            )
            ready = False
        else:
            missing = missing_attributes(dict(listed.custom_attributes))
            if missing:
                log.warning(
                    "namespace %s lacks search attributes %s: not upserting them "
                    "(docs/operations/watch.md, 'Search attributes')",
                    namespace,
                    ", ".join(missing),
                )
            ready = not missing
        self._ready[namespace] = (ready, time.monotonic())
        return ready
