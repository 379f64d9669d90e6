"""Ketch's one home for "now in milliseconds".

Two clocks, never mixed (as Kafka's ``Time`` separates ``milliseconds()`` from
``nanoseconds()``):

- **wall** (``now_ms``): milliseconds since the Unix epoch. For anything that is written
  down or compared across processes: record timestamps (CreateTime, LogAppendTime),
  retention and ``offsets_for_times``, committed-offset expiry, deadlines another process
  checks, DescribeQuorum's fetch times. It can jump (NTP, an operator), so it never
  measures a local interval.
- **monotonic** (``monotonic_ms``): never goes back, meaningless outside this process.
  For local timeouts, backoffs, session and heartbeat intervals, "how long did that take".

Pure cores never read a clock: they take ``now_ms`` as an argument (STYLE.md §1). Shells
get a ``Clock`` injected (``SystemClock`` in production, ``ManualClock`` in tests and the
simulator) or, where nothing needs replacing, call the module functions below.

Not here: the asyncio client's deadlines, which use its event loop's clock
(``loop.time()``, monotonic) because they are compared with the loop's own timers; and the
Raft layer's times, which are on pysyncobj's clock (CLOCK_MONOTONIC_RAW, quorum/raft.py).
"""
from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "SYSTEM_CLOCK", "monotonic_ms", "now_ms"]


def now_ms() -> int:
    """Wall clock: milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic clock: milliseconds from an arbitrary, process-local origin."""
    return time.monotonic_ns() // 1_000_000


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall clock (epoch milliseconds): timestamps and cross-process deadlines."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic clock (milliseconds): local timeouts and intervals."""
        ...


class SystemClock:
    """The machine's clocks."""
    __slots__ = ()

    def now_ms(self) -> int:
        return now_ms()

    def monotonic_ms(self) -> int:
        return monotonic_ms()

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told (tests, the simulator).

    Both readings advance together with ``advance``; ``set_wall`` moves the wall clock
    alone, as NTP or an operator can, which is what monotonic time is protected from.
    """
    __slots__ = ("_wall_ms", "_monotonic_ms")

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        if monotonic_ms < 0:
            raise ValueError(f"monotonic_ms must be >= 0, got {monotonic_ms}")
        self._wall_ms = wall_ms
        self._monotonic_ms = monotonic_ms

    def now_ms(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock advances by ms >= 0, got {ms}")
        self._wall_ms += ms
        self._monotonic_ms += ms

    def set_wall(self, wall_ms: int) -> None:
        self._wall_ms = wall_ms

    def __repr__(self) -> str:
        return f"ManualClock(wall_ms={self._wall_ms}, monotonic_ms={self._monotonic_ms})"
