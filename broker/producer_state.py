"""Idempotent producer state for one partition: duplicate and gap detection.

Theory of operation
-------------------
An idempotent producer numbers its records per partition: each batch carries producer
id, producer epoch and the sequence of its first record (CLIENT-REQUIREMENTS.md, §4).
The partition leader keeps, per producer id, the epoch and the metadata of the last five
batches it appended (Kafka's ``ProducerStateEntry``; five = the client's maximum in-flight
requests with idempotence). For a new batch:

- producer id -1: not idempotent, nothing to check;
- epoch older than the known one: INVALID_PRODUCER_EPOCH (a fenced zombie);
- same batch (first and last sequence) as one of the last five: a retry of a batch that
  was appended; acknowledge it with the original offsets and append nothing;
- unknown producer, or a newer epoch: the sequence must start at 0, else
  UNKNOWN_PRODUCER_ID (no state at all) or OUT_OF_ORDER_SEQUENCE_NUMBER;
- otherwise the first sequence must follow the last one (with int32 wrap-around), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.

Followers update the same state as they replicate (``update`` without checks), and a
restarted broker rebuilds it by scanning batch headers (``update`` again), so the state
survives a leader failover as the issue requires.

Transactions (Kafka's ProducerStateManager / ProducerAppendInfo)
----------------------------------------------------------------
A producer is either idle or inside one ongoing transaction on this partition:

    idle --(transactional data batch at offset f)--> ongoing(first offset f)
    ongoing --(more transactional data)--> ongoing (first offset unchanged)
    ongoing --(control batch COMMIT/ABORT at offset m)--> idle, CompletedTxn(f, m, aborted)
    idle --(marker)--> idle (an empty transaction: nothing completed, nothing indexed)

Checks before an append (leader side): non-transactional data from a producer whose
transaction is ongoing is INVALID_TXN_STATE; a marker whose producer epoch is older than
the producer's is INVALID_PRODUCER_EPOCH; a marker whose coordinator epoch is older than
the last one seen for the producer is TRANSACTION_COORDINATOR_FENCED (a zombie
coordinator). A marker may carry a newer producer epoch (the coordinator bumped it when it
aborted on a timeout); it becomes the producer's epoch and forgets its sequences, so the
old epoch's transactional data is fenced afterwards by the ordinary epoch check.

The first unstable offset is the smallest first offset over the ongoing transactions;
the partition's last stable offset (LSO) is min(first unstable offset, high watermark),
computed by the replica manager, which knows the high watermark. The "LSO a completed
transaction allows" (the fifth field of an aborted transaction index entry) is the first
unstable offset once it is removed, or its marker's offset + 1 when none is left.

Snapshots (``encode_snapshot`` / ``decode_snapshot``) are Kafka's ``<offset>.snapshot``
format (ProducerSnapshot.json, version 1, CRC-32C): per producer the last batch only, its
coordinator epoch and its ongoing transaction's first offset. A table loaded from a
snapshot therefore recognizes a retry of the last batch only, as Kafka's does.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

import crc32c

from broker.log.cleaner import LastRecord
from clients.protocol.errors import ErrorCode

__all__ = ["ActiveProducer", "BatchMetadata", "CompletedTxn", "ProducerStateTable",
           "SequenceCheck", "SnapshotError", "NO_PRODUCER_ID", "decode_snapshot",
           "encode_snapshot"]

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
BATCHES_KEPT = 5
_INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    error_code: int
    duplicate_of: BatchMetadata | None = None   # set: acknowledge with these offsets


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A producer as DescribeProducers shows it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_start_offset: int = NO_OFFSET


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended (Kafka's CompletedTxn): data from ``first_offset``,
    the marker at ``last_offset``."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class SnapshotError(ValueError):
    """A producer snapshot file that does not parse or fails its CRC."""


@dataclass(slots=True)
class _ProducerEntry:
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp_ms: int = -1
    coordinator_epoch: int = NO_COORDINATOR_EPOCH


def _last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    return (base_sequence + last_offset_delta) & _INT32_MAX if base_sequence >= 0 else NO_SEQUENCE


def _next(sequence: int) -> int:
    return 0 if sequence == _INT32_MAX else sequence + 1


# Shared, read-only stand-ins for an empty table's dicts: a partition no producer with an
# id wrote to (most of them, at 100k) holds no dicts of its own (2 x 64 B). Written to,
# they raise instead of reaching every table; ``_own`` puts dicts in place first.
_NO_PRODUCERS = cast("dict[int, _ProducerEntry]", MappingProxyType({}))
_NO_ONGOING = cast("dict[int, int]", MappingProxyType({}))


class ProducerStateTable:
    __slots__ = ("_producers", "_ongoing")

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = _NO_PRODUCERS
        # producer id -> first offset of its ongoing transaction. The one home of that
        # fact. Invariant: every key is also a key of _producers.
        self._ongoing: dict[int, int] = _NO_ONGOING

    def _own(self) -> None:
        """Dicts of this table's own, before a write."""
        if self._producers is _NO_PRODUCERS:
            self._producers, self._ongoing = {}, {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int,
              last_offset_delta: int, is_transactional: bool = False) -> SequenceCheck:
        """Decide whether a client's batch may be appended (leader side)."""
        if producer_id == NO_PRODUCER_ID:
            return SequenceCheck(ErrorCode.NONE)
        check = self._check_sequence(producer_id, producer_epoch, base_sequence, last_offset_delta)
        if (check.error_code == ErrorCode.NONE and check.duplicate_of is None
                and not is_transactional and producer_id in self._ongoing):
            # Kafka's "Expected transactional write from producer" (InvalidTxnStateException).
            return SequenceCheck(ErrorCode.INVALID_TXN_STATE)
        return check

    def _check_sequence(self, producer_id: int, producer_epoch: int, base_sequence: int,
                        last_offset_delta: int) -> SequenceCheck:
        entry = self._producers.get(producer_id)
        last_sequence = _last_sequence(base_sequence, last_offset_delta)
        if entry is None:
            if base_sequence != 0:
                return SequenceCheck(ErrorCode.UNKNOWN_PRODUCER_ID)
            return SequenceCheck(ErrorCode.NONE)
        if producer_epoch < entry.producer_epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if producer_epoch > entry.producer_epoch:
            if base_sequence != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return SequenceCheck(ErrorCode.NONE)
        for batch in entry.batches:
            if batch.first_sequence == base_sequence and batch.last_sequence == last_sequence:
                return SequenceCheck(ErrorCode.NONE, duplicate_of=batch)
        if not entry.batches:
            ok = base_sequence == 0
        else:
            ok = base_sequence == _next(entry.batches[-1].last_sequence)
        return SequenceCheck(ErrorCode.NONE if ok else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """Whether a transaction marker (WriteTxnMarkers) may be appended (leader side)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def update(self, producer_id: int, producer_epoch: int, base_sequence: int,
               last_offset_delta: int, first_offset: int, timestamp_ms: int,
               is_transactional: bool = False) -> None:
        """Record an appended data batch (leader after ``check``, follower, or log replay)."""
        if producer_id == NO_PRODUCER_ID:
            return
        self._own()
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.producer_epoch:
            coordinator_epoch = NO_COORDINATOR_EPOCH if entry is None else entry.coordinator_epoch
            entry = self._producers[producer_id] = _ProducerEntry(
                producer_epoch, coordinator_epoch=coordinator_epoch)
        elif producer_epoch < entry.producer_epoch:
            return  # replaying an old epoch's batch below a newer one: nothing to learn
        entry.batches.append(BatchMetadata(
            base_sequence, _last_sequence(base_sequence, last_offset_delta),
            first_offset, first_offset + last_offset_delta, timestamp_ms))
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)
        if is_transactional and producer_id not in self._ongoing:
            self._ongoing[producer_id] = first_offset     # a transaction begins here

    def update_marker(self, producer_id: int, producer_epoch: int, offset: int, committed: bool,
                      coordinator_epoch: int, timestamp_ms: int) -> CompletedTxn | None:
        """Record an appended COMMIT/ABORT marker at ``offset``; the transaction it ended,
        or None when the producer had none ongoing here (nothing to index, LSO unmoved)."""
        assert producer_id != NO_PRODUCER_ID, "a transaction marker names its producer"
        self._own()
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _ProducerEntry(producer_epoch)
        elif producer_epoch > entry.producer_epoch:
            # The coordinator bumped the epoch (an abort on timeout, KIP-890): the old
            # epoch is fenced from here on and its sequences no longer count.
            entry.producer_epoch = producer_epoch
            entry.batches = deque(maxlen=BATCHES_KEPT)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)
        first_offset = self._ongoing.pop(producer_id, None)
        if first_offset is None:
            return None
        return CompletedTxn(producer_id, first_offset, offset, not committed)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction; None: none is ongoing."""
        return min(self._ongoing.values()) if self._ongoing else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO ``completed`` allows once recorded (``update_marker`` removed it),
        before the high watermark's bound: the txn index entry's lastStableOffset."""
        first = self.first_unstable_offset()
        return completed.last_offset + 1 if first is None else first

    def ongoing_transaction_start(self, producer_id: int) -> int | None:
        return self._ongoing.get(producer_id)

    def truncate_to(self, offset: int) -> None:
        """The log was truncated at ``offset``: forget batches and transactions at or above
        it. A transaction whose marker was cut would be ongoing again: only a rebuild
        from the log can know, which the replica manager does after a truncation."""
        for producer_id in list(self._producers):
            entry = self._producers[producer_id]
            kept = [b for b in entry.batches if b.last_offset < offset]
            first = self._ongoing.get(producer_id)
            if first is not None and first >= offset:
                del self._ongoing[producer_id]
                first = None
            if not kept and first is None:
                del self._producers[producer_id]
                continue
            entry.batches = deque(kept, maxlen=BATCHES_KEPT)

    def clear(self) -> None:
        self._producers, self._ongoing = _NO_PRODUCERS, _NO_ONGOING

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` (``producer.id.expiration.ms``,
        Kafka's ProducerStateManager.removeExpiredProducers): none of their transactions
        is open here and their last batch's timestamp is that old. Without this the table
        (and the cleaner's kept batch per producer) grows with every producer id ever
        seen. An expired producer that writes again is a new one to this partition: a
        sequence other than 0 gets UNKNOWN_PRODUCER_ID, which clients recover from
        (KIP-360). How many were removed."""
        expired = [pid for pid, e in self._producers.items()
                   if pid not in self._ongoing and now_ms - e.last_timestamp_ms >= expiration_ms]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer with a batch still remembered, by producer id."""
        return [ActiveProducer(pid, e.producer_epoch,
                               e.batches[-1].last_sequence if e.batches else NO_SEQUENCE,
                               e.last_timestamp_ms, e.coordinator_epoch,
                               self._ongoing.get(pid, NO_OFFSET))
                for pid, e in sorted(self._producers.items())]

    def last_records(self) -> dict[int, LastRecord]:
        """Each producer's last entry, as the cleaner keeps it (``broker.log.cleaner``):
        its last data batch's last offset, None when its current epoch has none."""
        return {pid: LastRecord(e.batches[-1].last_offset if e.batches else None, e.producer_epoch)
                for pid, e in self._producers.items()}

    # ------------------------------------------------------------ snapshots

    def to_snapshot(self) -> bytes:
        return encode_snapshot(self)

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateTable:
        table = cls()
        table._own()
        for (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp_ms,
             coordinator_epoch, txn_first_offset) in decode_snapshot(data):
            entry = table._producers[producer_id] = _ProducerEntry(
                epoch, last_timestamp_ms=timestamp_ms, coordinator_epoch=coordinator_epoch)
            if last_offset >= 0:
                first_sequence = (NO_SEQUENCE if last_sequence < 0
                                  else (last_sequence - offset_delta) & _INT32_MAX)
                entry.batches.append(BatchMetadata(first_sequence, last_sequence,
                                                   last_offset - offset_delta, last_offset,
                                                   timestamp_ms))
            if txn_first_offset >= 0:
                table._ongoing[producer_id] = txn_first_offset
        return table

    def producer_epoch(self, producer_id: int) -> int | None:
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.producer_epoch

    def _snapshot_entries(self) -> list[tuple[int, int, int, int, int, int, int, int]]:
        out = []
        for pid, e in sorted(self._producers.items()):
            last = e.batches[-1] if e.batches else None
            out.append((pid, e.producer_epoch,
                        NO_SEQUENCE if last is None else last.last_sequence,
                        NO_OFFSET if last is None else last.last_offset,
                        0 if last is None else last.last_offset - last.first_offset,
                        e.last_timestamp_ms, e.coordinator_epoch,
                        self._ongoing.get(pid, NO_OFFSET)))
        return out


# Kafka's ProducerStateManager snapshot: version int16, crc uint32 (CRC-32C of what follows
# it), then the array of entries: int32 count, each of ProducerSnapshot.json's fields.
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")
_SNAPSHOT_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def encode_snapshot(table: ProducerStateTable) -> bytes:
    entries = table._snapshot_entries()
    body = bytearray(_SNAPSHOT_COUNT.pack(len(entries)))
    for entry in entries:
        body += _SNAPSHOT_ENTRY.pack(*entry)
    return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[tuple[int, int, int, int, int, int, int, int]]:
    """The entries of a snapshot; SnapshotError when it is torn, corrupt or unknown."""
    if len(data) < _SNAPSHOT_HEAD.size + _SNAPSHOT_COUNT.size:
        raise SnapshotError(f"snapshot of {len(data)} bytes")
    version, crc = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"snapshot version {version}")
    body = memoryview(data)[_SNAPSHOT_HEAD.size:]
    if crc32c.crc32c(body) != crc:
        raise SnapshotError("snapshot CRC mismatch")
    (count,) = _SNAPSHOT_COUNT.unpack_from(body)
    if count < 0 or len(body) != _SNAPSHOT_COUNT.size + count * _SNAPSHOT_ENTRY.size:
        raise SnapshotError(f"snapshot of {len(body)} bytes for {count} entries")
    return [_SNAPSHOT_ENTRY.unpack_from(body, _SNAPSHOT_COUNT.size + i * _SNAPSHOT_ENTRY.size)
            for i in range(count)]
