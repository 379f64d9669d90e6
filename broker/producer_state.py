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
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from clients.protocol.errors import ErrorCode

__all__ = ["BatchMetadata", "ProducerStateTable", "SequenceCheck", "NO_PRODUCER_ID"]

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
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


@dataclass(slots=True)
class _ProducerEntry:
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp_ms: int = -1


def _last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    return (base_sequence + last_offset_delta) & _INT32_MAX if base_sequence >= 0 else NO_SEQUENCE


def _next(sequence: int) -> int:
    return 0 if sequence == _INT32_MAX else sequence + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int,
              last_offset_delta: int) -> SequenceCheck:
        """Decide whether a client's batch may be appended (leader side)."""
        if producer_id == NO_PRODUCER_ID:
            return SequenceCheck(ErrorCode.NONE)
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

    def update(self, producer_id: int, producer_epoch: int, base_sequence: int,
               last_offset_delta: int, first_offset: int, timestamp_ms: int) -> None:
        """Record an appended batch (leader after ``check``, follower, or log replay)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.producer_epoch:
            entry = self._producers[producer_id] = _ProducerEntry(producer_epoch)
        elif producer_epoch < entry.producer_epoch:
            return  # replaying an old epoch's batch below a newer one: nothing to learn
        entry.batches.append(BatchMetadata(
            base_sequence, _last_sequence(base_sequence, last_offset_delta),
            first_offset, first_offset + last_offset_delta, timestamp_ms))
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)

    def truncate_to(self, offset: int) -> None:
        """The log was truncated at ``offset``: forget batches at or above it."""
        for producer_id in list(self._producers):
            entry = self._producers[producer_id]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[producer_id]
                continue
            entry.batches = deque(kept, maxlen=BATCHES_KEPT)

    def clear(self) -> None:
        self._producers.clear()

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer with a batch still remembered, by producer id."""
        return [ActiveProducer(pid, e.producer_epoch,
                               e.batches[-1].last_sequence if e.batches else NO_SEQUENCE,
                               e.last_timestamp_ms)
                for pid, e in sorted(self._producers.items())]

    def producer_epoch(self, producer_id: int) -> int | None:
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.producer_epoch
