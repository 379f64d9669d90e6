"""Replication throttling (KIP-73): a byte rate over a sliding window, as Kafka's
``ReplicationQuotaManager``, and which replicas it applies to.

Pure: ``record(bytes, now_ms)`` adds to the current sample; ``is_exceeded(now_ms)`` compares
the rate over the retained samples (``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``) with the bound. Only replicas named in a topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
(``partition:broker`` pairs, or ``*``) are throttled, and only while they are out of the
ISR: a reassignment's new replicas copy at the set rate, the ISR's traffic never waits.
"""
from __future__ import annotations

from collections import deque

__all__ = ["ReplicationQuota", "throttled_here", "UNLIMITED"]

UNLIMITED = 2**63 - 1


def throttled_here(value: str | None, partition: int, broker_id: int) -> bool:
    """Does a throttled-replicas config name this broker's replica of ``partition``?"""
    if not value:
        return False
    items = [i.strip() for i in value.split(",") if i.strip()]
    return items == ["*"] or f"{partition}:{broker_id}" in items


class ReplicationQuota:
    def __init__(self, bytes_per_s: int = UNLIMITED, samples: int = 11, sample_ms: int = 1000) -> None:
        assert samples >= 2 and sample_ms > 0
        self.bytes_per_s = bytes_per_s
        self.samples = samples
        self.sample_ms = sample_ms
        self._window: deque[list[int]] = deque()     # [sample start ms, bytes]

    def _roll(self, now_ms: int) -> None:
        start = now_ms - now_ms % self.sample_ms
        if not self._window or self._window[-1][0] != start:
            self._window.append([start, 0])
        while self._window[0][0] <= now_ms - self.samples * self.sample_ms:
            self._window.popleft()

    def record(self, size_bytes: int, now_ms: int) -> None:
        if self.bytes_per_s >= UNLIMITED:
            return
        self._roll(now_ms)
        self._window[-1][1] += size_bytes

    def is_exceeded(self, now_ms: int) -> bool:
        if self.bytes_per_s >= UNLIMITED:
            return False
        self._roll(now_ms)
        total = sum(b for _, b in self._window)
        # Kafka's rate divides by the elapsed window, at least (samples - 1) full samples.
        elapsed_ms = max(now_ms - self._window[0][0], (self.samples - 1) * self.sample_ms)
        return total * 1000 / elapsed_ms > self.bytes_per_s
