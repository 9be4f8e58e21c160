"""The hang report names where each pending task waits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers.hang_dump import awaits_of, dump_pending_tasks


async def _innermost(gate: asyncio.Event) -> None:
    await gate.wait()


async def _outer(gate: asyncio.Event) -> None:
    await _innermost(gate)


async def test_a_pending_task_is_shown_down_to_what_it_awaits(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    task = asyncio.create_task(_outer(gate), name="the-stuck-one")
    await asyncio.sleep(0)
    try:
        names = [f.f_code.co_name for f in awaits_of(task.get_coro())]
        assert names[:3] == ["_outer", "_innermost", "wait"]
        with (tmp_path / "dump").open("w") as out:
            dump_pending_tasks(request.config, "a test", out.fileno())
    finally:
        gate.set()
        await task
    err = (tmp_path / "dump").read_text()
    assert "--- the-stuck-one" in err and "in _innermost" in err
    assert "=== its threads ===" in err and "(most recent call first)" in err
