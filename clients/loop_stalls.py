"""``watch_loop_stalls``: log when this process's asyncio event loop was blocked;
``watch_gc_pauses``: log the full garbage collections that blocked it.

A broker does everything on one event loop: answering requests, following the metadata
log, heartbeating to the controller. A synchronous step that runs for seconds (applying a
metadata batch of tens of thousands of partition changes, say) stops all of it, and the
symptoms show up elsewhere: the controller fences the broker for a missed session, a
follower falls out of the ISR. The watcher makes the cause visible where it happens: it
sleeps in short steps and logs how late the loop woke it when the delay passes a
threshold, as quorum/raft.py logs its tick thread's stalls.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any, Callable

__all__ = ["watch_gc_pauses", "watch_loop_stalls"]

log = logging.getLogger(__name__)


async def watch_loop_stalls(threshold_s: float = 1.0, interval_s: float = 0.25) -> None:
    """Run for the loop's life (cancel to stop): a warning per wake-up later than
    ``threshold_s``, naming how long the loop was blocked."""
    if threshold_s <= 0 or interval_s <= 0:
        raise ValueError(f"threshold_s and interval_s must be > 0, got {threshold_s}, {interval_s}")
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        late = loop.time() - due
        if late > threshold_s:
            log.warning("event loop stalled for %.0f ms", late * 1000)


def watch_gc_pauses(threshold_s: float = 0.25) -> Callable[[], None]:
    """Log a warning for each full (generation 2) collection of the cyclic garbage
    collector longer than ``threshold_s``: it holds the GIL, so the event loop stands
    still for all of it (at 100k partitions a broker's took 0.6-2.5 s each, 30-36 s in
    one bench/scale.py run). Returns the function that stops the watch."""
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
            return
        took = time.perf_counter() - started[0]
        if took > threshold_s:
            log.warning("full garbage collection took %.0f ms (%d objects freed)", took * 1000,
                        info["collected"])
    gc.callbacks.append(on_gc)
    return lambda: gc.callbacks.remove(on_gc)
