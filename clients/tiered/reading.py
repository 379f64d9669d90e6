"""Reading a remote segment (KIP-405), pure: where in a segment's records file a read starts,
which whole batches of a chunk to return, and which transactions a read_committed reader
drops. Shared by the broker (``broker.tiered.manager`` serves Fetch below the local log) and
the Spark source's executors (``clients.spark.archive`` reads the store directly), so both
return the same batches and the same aborted transactions.

Aborted transactions: Kafka's collectAbortedTransactions over the archive. The uploaded
transaction index of each segment (from the one read on) lists the transactions aborted by
a marker in that segment; an entry overlaps the read [fetch_offset, upper) when
``last_offset >= fetch_offset and first_offset < upper``. Once an entry's last stable offset
reaches ``upper`` every transaction with data below ``upper`` had ended by then, so no later
marker can overlap the read: the collection is *complete*. Otherwise a marker after the
archive (in the local log) may still abort data of the read: the broker asks its local log;
a direct reader holds back the records of transactions it has not seen end
(``OpenTransactions``) and leaves them to the broker.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from clients.records import (
    BATCH_HEADER_SIZE, LOG_OVERHEAD, RecordError, iter_batches, read_batch_header,
)
from clients.tiered.aborted_txn import ENTRY_SIZE, AbortedTxn, CorruptTxnIndexError

__all__ = ["AbortedTransactions", "BatchRange", "OpenTransactions", "position_for_offset",
           "select_batches", "txn_index_entries"]

_OFFSET_INDEX_ENTRY_BYTES = 8


def position_for_offset(offset_index: bytes, base_offset: int, target_offset: int) -> int:
    """The byte position in a segment's records file to read from for ``target_offset``:
    the last offset index entry at or below it (Kafka's index format: int32 relative offset,
    int32 position, big-endian), 0 when none is."""
    entries = len(offset_index) // _OFFSET_INDEX_ENTRY_BYTES
    relative = target_offset - base_offset
    lo, hi, position = 0, entries - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        at = mid * _OFFSET_INDEX_ENTRY_BYTES
        rel = int.from_bytes(offset_index[at:at + 4], "big", signed=True)
        if rel <= relative:
            position = int.from_bytes(offset_index[at + 4:at + 8], "big", signed=True)
            lo = mid + 1
        else:
            hi = mid - 1
    return position


@dataclass(frozen=True, slots=True)
class BatchRange:
    """The answer of ``select_batches``: bytes [start, end) of the chunk are whole batches to
    return (start == end: none in it); or ``more_bytes_needed`` > 0: read a longer chunk."""
    start: int
    end: int
    next_offset: int                 # one past the last offset returned (or the fetch offset)
    more_bytes_needed: int = 0


def select_batches(chunk: bytes, fetch_offset: int, max_bytes: int, min_one_batch: bool,
                   at_end_of_segment: bool) -> BatchRange:
    """Whole batches from ``chunk`` (read from a batch boundary at or below the fetch offset)
    as a local read returns them: from the batch holding ``fetch_offset`` (or the first
    after it), at most ``max_bytes``, but the first batch whole even if larger when
    ``min_one_batch`` (KIP-74). ``at_end_of_segment``: the chunk ends where the segment
    does, so a short tail is the end, not a cut. Raises RecordError on a corrupt header."""
    pos, start = 0, -1
    next_offset = fetch_offset
    while pos + LOG_OVERHEAD <= len(chunk):
        if pos + BATCH_HEADER_SIZE > len(chunk):
            if start >= 0:
                break                       # whole batches in hand: the cut one is next time's
            if at_end_of_segment:
                raise RecordError(f"truncated batch header at {pos} of a remote segment")
            return BatchRange(0, 0, fetch_offset, pos + BATCH_HEADER_SIZE - len(chunk))
        header = read_batch_header(chunk, pos)
        size = header.size_in_bytes
        if header.last_offset < fetch_offset:
            pos += size
            continue
        if start < 0:
            start = pos
        if pos + size - start > max_bytes and not (min_one_batch and pos == start):
            break
        if pos + size > len(chunk):
            if pos == start:                # the first batch is cut: read it whole
                if at_end_of_segment:
                    raise RecordError(f"truncated batch at {pos} of a remote segment")
                return BatchRange(0, 0, fetch_offset, pos + size - len(chunk))
            break
        pos += size
        next_offset = header.last_offset + 1
    if start < 0:
        if at_end_of_segment:
            return BatchRange(0, 0, fetch_offset)
        return BatchRange(0, 0, fetch_offset, max(1, pos + BATCH_HEADER_SIZE - len(chunk)))
    return BatchRange(start, pos, next_offset)


def txn_index_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of an uploaded transaction index. Raises RecordError when torn."""
    if len(data) % ENTRY_SIZE:
        raise RecordError(f"transaction index of {len(data)} bytes")
    try:
        return [AbortedTxn.decode(data, pos) for pos in range(0, len(data), ENTRY_SIZE)]
    except CorruptTxnIndexError as e:
        raise RecordError(str(e)) from None


class AbortedTransactions:
    """The aborted transactions overlapping a read [fetch_offset, upper), collected from the
    transaction indexes of the remote segments in offset order, from the one read on."""

    __slots__ = ("fetch_offset", "upper", "found", "complete")

    def __init__(self, fetch_offset: int, upper: int) -> None:
        self.fetch_offset, self.upper = fetch_offset, upper
        self.found: dict[AbortedTxn, None] = {}
        self.complete = False       # no later marker can overlap the read

    def add_segment(self, entries: Iterable[AbortedTxn]) -> bool:
        """One more segment's entries; whether the collection is now complete."""
        for txn in entries:
            if txn.last_offset >= self.fetch_offset and txn.first_offset < self.upper:
                self.found[txn] = None
            self.complete |= txn.last_stable_offset >= self.upper
        return self.complete

    def add(self, entries: Iterable[AbortedTxn]) -> None:
        """Entries from elsewhere (the broker's local log), overlapping ones kept."""
        for txn in entries:
            if txn.last_offset >= self.fetch_offset and txn.first_offset < self.upper:
                self.found[txn] = None

    def sorted(self) -> tuple[AbortedTxn, ...]:
        """As a Fetch response lists them."""
        return tuple(sorted(self.found, key=lambda t: (t.last_offset, t.producer_id)))

    def overlapping(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        """(first offset, producer id) of the entries overlapping [fetch_offset, upper): what
        a consumer gets from one fetch of that range (``records_from_batches``' heap)."""
        return sorted((t.first_offset, t.producer_id) for t in self.found
                      if t.last_offset >= fetch_offset and t.first_offset < upper)

    def aborts(self, producer_id: int, offset: int) -> bool:
        return any(t.producer_id == producer_id and t.first_offset <= offset <= t.last_offset
                   for t in self.found)


class OpenTransactions:
    """A direct reader's account of the transactions in what it has read, so that under
    read_committed it hands out only records whose fate it knows: a transactional batch is
    decided once its producer's marker (COMMIT or ABORT) is read, or an aborted entry in the
    archive's transaction indexes covers it, or the collection is complete (no entry: it
    committed). ``barrier``: the first offset of an undecided transaction (records at or
    above it are held back); ``math.inf`` when every transaction read is decided."""

    __slots__ = ("aborted", "open")

    def __init__(self, aborted: AbortedTransactions) -> None:
        self.aborted = aborted
        self.open: dict[int, int] = {}       # producer id -> first offset of its undecided transaction

    def scan(self, batches: Any, fetch_offset: int) -> None:
        """The headers of whole batches read (``batches``: bytes of whole batches)."""
        for _, header in iter_batches(batches, check_crc=False):   # the decoder checks them
            if header.last_offset < fetch_offset or not header.is_transactional:
                continue
            pid = header.producer_id
            if header.is_control:
                self.open.pop(pid, None)
            elif pid not in self.open and not self.aborted.complete \
                    and not self.aborted.aborts(pid, header.base_offset):
                self.open[pid] = header.base_offset

    @property
    def barrier(self) -> float:
        return min(self.open.values(), default=math.inf)
