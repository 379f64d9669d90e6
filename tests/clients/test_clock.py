"""clients/clock.py: the wall and monotonic clocks and the manual clock tests inject."""
from __future__ import annotations

import time

import pytest

from clients.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock, monotonic_ms, now_ms


def test_wall_clock_is_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    got = now_ms()
    after = time.time_ns() // 1_000_000
    assert before <= got <= after
    assert before <= SYSTEM_CLOCK.now_ms() <= time.time_ns() // 1_000_000


def test_monotonic_clock_never_goes_back_and_is_not_the_wall_clock() -> None:
    readings = [monotonic_ms() for _ in range(1000)]
    assert readings == sorted(readings)
    assert readings[0] >= time.monotonic_ns() // 1_000_000 - 1000
    # CLOCK_MONOTONIC counts from boot, the wall clock from 1970: decades apart.
    assert abs(now_ms() - monotonic_ms()) > 10 * 365 * 86_400_000


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall_ms=5_000, monotonic_ms=7)
    assert (clock.now_ms(), clock.monotonic_ms()) == (5_000, 7)
    clock.advance(250)
    assert (clock.now_ms(), clock.monotonic_ms()) == (5_250, 257)
    clock.set_wall(1_000)                      # NTP stepped the wall clock back
    assert (clock.now_ms(), clock.monotonic_ms()) == (1_000, 257)
    with pytest.raises(ValueError, match="ms >= 0"):
        clock.advance(-1)
    assert clock.monotonic_ms() == 257


def test_both_clocks_satisfy_the_protocol() -> None:
    def read(clock: Clock) -> tuple[int, int]:
        return clock.now_ms(), clock.monotonic_ms()

    assert read(ManualClock(1, 2)) == (1, 2)
    wall, mono = read(SystemClock())
    assert wall > mono
