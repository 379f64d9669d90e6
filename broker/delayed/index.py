"""The scheduler's index of parked records by due time, on disk (a storage port).

Derived state: rebuilt from the delay store's log whenever a broker becomes the leader of
a store partition, so it is never fsynced and a crash only costs a rebuild. On disk so
that memory does not grow with the number of records pending (issue 18: millions).

``SqliteDueIndex`` is stdlib sqlite3 in WAL-less, unsynced mode (one file per store
partition); ``MemoryDueIndex`` is the same port in memory, for the pure tests.
"""
from __future__ import annotations

import bisect
import os
import sqlite3
from typing import Protocol

__all__ = ["DueIndex", "MemoryDueIndex", "SqliteDueIndex"]

Entry = tuple[bytes, int, bytes]      # store key, due ms, store value


class DueIndex(Protocol):
    def put(self, key: bytes, due_ms: int, value: bytes) -> None: ...
    def remove(self, key: bytes) -> None: ...
    def earliest(self, limit: int) -> list[Entry]: ...
    def next_due(self) -> int | None: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


class SqliteDueIndex:
    def __init__(self, path: str) -> None:
        """Opens ``path`` empty: whatever an earlier leadership left is stale."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except FileNotFoundError:
                pass
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE parked (k BLOB PRIMARY KEY, due INTEGER NOT NULL, v BLOB NOT NULL)")
        self._db.execute("CREATE INDEX by_due ON parked (due, k)")
        self._count = 0

    def put(self, key: bytes, due_ms: int, value: bytes) -> None:
        cur = self._db.execute("INSERT OR REPLACE INTO parked VALUES (?, ?, ?)", (key, due_ms, value))
        del cur
        self._count = -1        # recounted lazily: REPLACE may or may not add a row

    def remove(self, key: bytes) -> None:
        self._db.execute("DELETE FROM parked WHERE k = ?", (key,))
        self._count = -1

    def earliest(self, limit: int) -> list[Entry]:
        return [(bytes(k), int(d), bytes(v)) for k, d, v in self._db.execute(
            "SELECT k, due, v FROM parked ORDER BY due, k LIMIT ?", (limit,))]

    def next_due(self) -> int | None:
        row = self._db.execute("SELECT MIN(due) FROM parked").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def __len__(self) -> int:
        if self._count < 0:
            self._count = int(self._db.execute("SELECT COUNT(*) FROM parked").fetchone()[0])
        return self._count

    def close(self) -> None:
        self._db.close()


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

    def earliest(self, limit: int) -> list[Entry]:
        return [(k, d, self._due[k][1]) for d, k in self._order[:limit]]

    def next_due(self) -> int | None:
        return self._order[0][0] if self._order else None

    def __len__(self) -> int:
        return len(self._due)

    def close(self) -> None:
        self._due.clear()
        self._order.clear()
