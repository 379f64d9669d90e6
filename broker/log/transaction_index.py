"""The aborted transaction index of one segment: `<base offset>.txnindex`.

Theory of operation
-------------------
Kafka's TransactionIndex. When an ABORT marker lands in a segment, the transaction it
ends is appended to that segment's index as a 34-byte entry (Kafka's AbortedTxn):

    version int16 (0) | producer id int64 | first offset int64 | last offset int64
    | last stable offset int64

`first offset` is the transaction's first data offset on this partition (it may lie in
an older segment), `last offset` the marker's offset, `last stable offset` the LSO the
partition had once the transaction completed. Entries are in marker order, so
`last_offset` increases along a file. A read_committed fetch of [fetch_offset, upper)
collects every entry, over the segments from the one holding fetch_offset on, whose
transaction overlaps that range (``last_offset >= fetch_offset and first_offset <
upper``); the consumer then drops those producers' batches within each range.

The file is appended to when an entry is added and fsynced with its segment (roll,
flush, close). After an unclean stop the replica manager's producer state rebuild walks
the batches after its snapshot and adds the ABORT markers it meets again; ``append``
ignores an entry it already holds, so a replay never duplicates. Entries past a
truncation point go with it (``truncate_to``).
"""
from __future__ import annotations

from broker.log.storage import Storage
from clients.tiered.aborted_txn import ENTRY_SIZE, AbortedTxn, CorruptTxnIndexError

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX", "CorruptTxnIndexError", "ENTRY_SIZE"]

TXN_INDEX_SUFFIX = ".txnindex"


class TransactionIndex:
    """The entries of one segment's `.txnindex`, kept in memory, appended to the file."""

    __slots__ = ("storage", "path", "_entries", "_known", "_file_bytes", "_unsynced")

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self._entries: list[AbortedTxn] = []
        self._known: set[AbortedTxn] = set()     # the same entries, for a replay's lookups
        self._file_bytes = 0    # what the file holds (0: absent)
        self._unsynced = False

    @classmethod
    def load(cls, storage: Storage, path: str) -> TransactionIndex:
        """The index at ``path``; a torn last entry (a crash mid-append) is dropped."""
        index = cls(storage, path)
        if not storage.exists(path):
            return index
        data = storage.read(path, 0, storage.size(path))
        whole = len(data) - len(data) % ENTRY_SIZE
        index._entries = [AbortedTxn.decode(data, pos) for pos in range(0, whole, ENTRY_SIZE)]
        index._known = set(index._entries)
        if whole != len(data):
            storage.truncate(path, whole)
        index._file_bytes = whole
        return index

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, txn: AbortedTxn) -> bool:
        """Add ``txn``; False when it is already there (a replay after a restart)."""
        if txn in self._known:
            return False
        self._known.add(txn)
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            # Markers land in offset order; an older one not indexed yet comes from a
            # replay of a segment whose index lost its tail: keep the order.
            self._entries.append(txn)
            self._entries.sort(key=lambda e: e.last_offset)
            self._rewrite()
            return True
        if self._file_bytes == 0:
            self.storage.create(self.path)
        self.storage.write(self.path, self._file_bytes, txn.encode())
        self._file_bytes += ENTRY_SIZE
        self._entries.append(txn)
        self._unsynced = True
        return True

    def reset_to(self, txns: list[AbortedTxn]) -> None:
        """Hold exactly ``txns`` (a cleaned segment's index), in marker order."""
        self._entries = sorted(set(txns), key=lambda e: (e.last_offset, e.producer_id))
        self._known = set(self._entries)
        self._rewrite()

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or above ``offset``."""
        kept = [e for e in self._entries if e.last_offset < offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._known = set(kept)
            self._rewrite()

    def _rewrite(self) -> None:
        self.storage.write_atomically(self.path, b"".join(e.encode() for e in self._entries))
        self._file_bytes = len(self._entries) * ENTRY_SIZE
        self._unsynced = False

    def overlapping(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Entries whose transaction overlaps [fetch_offset, upper)."""
        return [e for e in self._entries if e.last_offset >= fetch_offset and e.first_offset < upper]

    def flush(self) -> None:
        if self._unsynced and self._file_bytes:
            self.storage.fsync(self.path)
        self._unsynced = False

    def delete(self) -> None:
        self.storage.delete(self.path)
        self._entries = []
        self._known = set()
        self._file_bytes = 0
        self._unsynced = False
