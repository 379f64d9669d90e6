"""Delivery of one delay-store partition's records when due (pure core).

The leader of store partition p runs one ``DeliveryScheduler``. Its shell
(``broker.delayed.driver``) first fences the previous leader's delivery producer
(InitProducerId for ``__ketch_delayed_delivery-<p>``, which also aborts its open
transaction), then reads the partition read_committed from the beginning, feeding every
record to ``replay`` (a parked record: into the index; a tombstone: out of it). Only when
that read has reached the end the shell saw after fencing (``caught_up``) does ``due``
hand out records, so nothing already delivered (its tombstone is further on) goes twice.
The shell then appends the due records to their targets and tombstones for their keys to
p in one transaction; ``delivered`` (after the commit) or ``failed`` (after an abort)
settles them. One transaction is in flight at a time.

A record is never handed out before its due time: ``due(now_ms)`` takes due <= now_ms.
"""
from __future__ import annotations

import bisect
from typing import Iterable, Protocol

from broker.delayed.store import ParkedRecord, StoreFormatError, decode_parked, due_ms_of

__all__ = ["DeliveryScheduler", "DueIndex", "Entry", "IDLE_POLL_MS", "MemoryDueIndex"]

Entry = tuple[bytes, int, bytes]      # store key, due ms, store value

# How long the shell may sleep with nothing due (new records wake it anyway).
IDLE_POLL_MS = 1000


class DeliveryScheduler:
    def __init__(self, index: DueIndex, batch_max: int = 500) -> None:
        self.index = index
        self.batch_max = batch_max
        self.is_caught_up = False
        self._in_flight: tuple[bytes, ...] | None = None
        # Keys delivered (out of the index) whose tombstones have not been replayed yet:
        # those tombstones have nothing to remove, and the index is spared the lookups.
        self._delivered: set[bytes] = set()

    def replay(self, records: Iterable[tuple[bytes | None, bytes | None]]
               ) -> list[tuple[int, StoreFormatError]]:
        """Records of the store partition (key, value), in log order: a parked record goes
        into the index, a tombstone takes its key out. Returns the (position, error) of
        values this version cannot read (the shell logs them; they are not delivered)."""
        bad: list[tuple[int, StoreFormatError]] = []
        delivered = self._delivered
        for i, (key, value) in enumerate(records):
            if key is None:
                # The store is compacted, so its leader refuses keyless records: only a
                # foreign writer's record could be one, and nothing could ever remove it.
                bad.append((i, StoreFormatError("a record without a key")))
                continue
            if value is None:
                if key in delivered:
                    delivered.discard(key)
                else:
                    self.index.remove(key)
                continue
            # Parked again (a retry) since it was delivered: its next tombstone removes it.
            delivered.discard(key)
            try:
                due = due_ms_of(value)
            except StoreFormatError as e:
                bad.append((i, e))
                continue
            self.index.put(key, due, value)
        self.index.commit()
        return bad

    def caught_up(self) -> None:
        self.is_caught_up = True

    def due(self, now_ms: int) -> list[ParkedRecord]:
        """The records to deliver now, earliest first (at most ``batch_max``); none while
        rebuilding or while a delivery is in flight."""
        if not self.is_caught_up or self._in_flight is not None:
            return []
        out = [decode_parked(k, v) for k, _, v in self.index.due_by(now_ms, self.batch_max)]
        if out:
            self._in_flight = tuple(r.store_key for r in out)
        return out

    def delivered(self) -> None:
        """The in-flight transaction committed: its records are gone (their tombstones
        will be replayed too; removing twice is harmless)."""
        assert self._in_flight is not None
        for key in self._in_flight:
            self.index.remove(key)
        self._delivered.update(self._in_flight)
        self.index.commit()
        self._in_flight = None

    def failed(self) -> None:
        """The in-flight transaction was aborted: its records stay, to be tried again."""
        self._in_flight = None

    def poll(self, now_ms: int) -> int:
        """ms until the next record is due (0: now), at most IDLE_POLL_MS."""
        if not self.is_caught_up or self._in_flight is not None:
            return IDLE_POLL_MS
        nxt = self.index.next_due()
        if nxt is None:
            return IDLE_POLL_MS
        return max(0, min(IDLE_POLL_MS, nxt - now_ms))

    @property
    def pending(self) -> int:
        return len(self.index)


class DueIndex(Protocol):
    """The index of parked records by due time (``broker.delayed.index.SqliteDueIndex`` on
    disk; ``MemoryDueIndex`` for tests)."""
    def put(self, key: bytes, due_ms: int, value: bytes) -> None: ...
    def remove(self, key: bytes) -> None: ...
    def commit(self) -> None: ...          # the changes so far in one write (no fsync)
    def due_by(self, by_ms: int, limit: int) -> list[Entry]: ...   # due <= by_ms, earliest first
    def next_due(self) -> int | None: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


class MemoryDueIndex:
    def __init__(self) -> None:
        self._due: dict[bytes, tuple[int, bytes]] = {}
        self._order: list[tuple[int, bytes]] = []

    def put(self, key: bytes, due_ms: int, value: bytes) -> None:
        self.remove(key)
        self._due[key] = (due_ms, value)
        bisect.insort(self._order, (due_ms, key))

    def remove(self, key: bytes) -> None:
        old = self._due.pop(key, None)
        if old is not None:
            self._order.remove((old[0], key))

    def commit(self) -> None:
        pass

    def due_by(self, by_ms: int, limit: int) -> list[Entry]:
        return [(k, d, self._due[k][1]) for d, k in self._order[:limit] if d <= by_ms]

    def next_due(self) -> int | None:
        return self._order[0][0] if self._order else None

    def __len__(self) -> int:
        return len(self._due)

    def close(self) -> None:
        self._due.clear()
        self._order.clear()
