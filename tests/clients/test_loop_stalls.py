"""The event-loop stall watcher logs a blocked loop, with how long it was blocked."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from clients.loop_stalls import watch_loop_stalls


def test_a_blocked_loop_is_logged_with_the_length_of_the_stall(caplog) -> None:
    async def scenario() -> None:
        watcher = asyncio.get_running_loop().create_task(watch_loop_stalls(0.1, 0.02))
        await asyncio.sleep(0.05)           # the watcher is asleep, due soon
        time.sleep(0.4)                     # a synchronous step holds the loop
        await asyncio.sleep(0.05)
        watcher.cancel()

    with caplog.at_level(logging.WARNING, logger="clients.loop_stalls"):
        asyncio.run(scenario())
    stalls = [float(r.getMessage().split()[-2]) for r in caplog.records
              if r.getMessage().startswith("event loop stalled for")]
    assert len(stalls) == 1 and stalls[0] >= 300, stalls


def test_settings_must_be_positive() -> None:
    with pytest.raises(ValueError):
        asyncio.run(watch_loop_stalls(0, 0.25))


def test_a_long_full_garbage_collection_is_logged_and_the_watch_stops(caplog) -> None:
    import gc
    from clients.loop_stalls import watch_gc_pauses

    class Cycle:
        def __init__(self) -> None:
            self.me = self
    stop = watch_gc_pauses(threshold_s=0.0)
    with caplog.at_level(logging.WARNING, logger="clients.loop_stalls"):
        gc.collect(1)               # a young collection is not logged
        for _ in range(100):
            Cycle()                 # garbage only the cyclic collector frees
        gc.collect()
        stop()
        gc.collect()
    logged = [r.getMessage() for r in caplog.records if "full garbage collection" in r.getMessage()]
    assert len(logged) == 1 and "objects freed" in logged[0], logged
    assert int(logged[0].split("(")[1].split()[0]) >= 100
