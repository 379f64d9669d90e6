"""The producer's record accumulator and idempotence state: pure, driven by `now_ms`.

Theory of operation
-------------------
`send()` appends each record to the open `ProducerBatch` of its partition (a
`RecordBatchBuilder`, Kafka's record batch v2). A partition's queue is a deque of batches:
the tail is open, every other batch is closed. A batch is *ready* to go when its
partition has a known leader, it is not backing off after a failed attempt, and one of
Kafka's triggers holds (`RecordAccumulator.ready`): it is full (another batch queues
behind it or it has reached `batch.size`), it has waited `linger.ms`, the buffer is
exhausted (senders wait for memory), a flush is in progress, or the producer is closing.

The sender asks `ready(now_ms, leader_of)` which nodes have something to send, and
`drain(node, ...)` for each such node: at most one batch per partition per request, as
many partitions as fit in `max.request.size` (the first always goes), starting where the
last drain of that node stopped so that no partition starves (Kafka's drainIndex). A
drained batch is *closed* for good: it is built once (compressed, CRC computed), and a
retry resends the same bytes with only the producer fields re-stamped.

States of a batch:

    OPEN --(full/linger/flush)--> CLOSED(queued) --drain--> IN_FLIGHT --ok--> DONE
                                      ^                         |
                                      +------retry (backoff)----+--fatal/expired--> FAILED
                                                                |
                                       RECORD_TOO_LARGE, >1 record: SPLIT into children

Delivery timeout (`delivery.timeout.ms`, KIP-91): a batch still queued past
`created_ms + delivery.timeout.ms` fails with a timeout; one in flight fails when its
attempt fails after that deadline.

Idempotence (KIP-98; KIP-360 for recovery), `IdempotenceState`: every batch of a
partition carries (producer id, epoch, base sequence), sequences assigned at drain time
in queue order. The broker keeps the last five batches per producer and partition, so at
most five are in flight per partition. A failed attempt goes back to the *front* of its
queue in sequence order, and while a partition has a re-queued batch, it sends one batch
at a time (in-order retries), so the broker always sees sequences without gaps. Errors
follow the Java client's `TransactionManager.canRetry` for an idempotent producer:

* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is *not* the next after the last acked
  one: an earlier batch is being retried; retry this one too, no epoch bump.
  For the next batch itself: the broker lost our state (a gap); bump the epoch, retry.
* UNKNOWN_PRODUCER_ID: the broker has no state for us; bump the epoch unless this batch's
  sequence was already reset by a bump, retry. (Without a log start offset in the
  response, retry as is.)
* A batch that fails for good after being given a sequence leaves a gap for the batches
  after it: bump the epoch.

An epoch bump is local (KIP-360, as the Java client does for idempotent producers): the
epoch goes up by one and each partition restarts at sequence 0 once it has no batch in
flight under the old epoch; queued batches drop their old sequence and get new ones.
At the epoch's maximum the producer needs a new producer id (InitProducerId, the shell).

Memory (`buffer.memory`): the bytes of every batch not yet completed are counted;
`has_room` lets the shell block senders (`max.block.ms`) while the buffer is full.

Pure: no clock (`now_ms` is passed in), no I/O. Exceptions are data here: a failed batch
holds the exception the shell gave it. An application's callback that raises is logged and
passed over (Java's ProducerBatch does the same), so the batch's other callbacks, its
waiters among them, still run.
"""
from __future__ import annotations

import enum
import logging
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import crc32c

from clients.protocol.errors import ErrorCode
from clients.records import (
    BATCH_HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, CompressionType,
    RecordBatchBuilder, TimestampType, decode_batch,
)
from clients.records.varint import write_varlong
from clients.types import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

# A send's callback: (metadata, None) once its record is acknowledged, (None, error) if not.
SendCallback = Callable[[RecordMetadata | None, BaseException | None], Any]

__all__ = [
    "BatchState", "ProducerBatch", "RecordAccumulator", "IdempotenceState",
    "record_size_upper_bound", "record_metadata", "RETRY", "RETRY_AND_BUMP", "FAIL",
]

# Offsets in a v2 batch header (Kafka's DefaultRecordBatch).
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_PRODUCER_FIELDS_OFFSET = 43
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_ATTRIBUTES = struct.Struct(">h")
_TRANSACTIONAL_BIT = 0x10
_UINT32 = struct.Struct(">I")
_INT32_MAX = 0x7FFFFFFF
_EPOCH_MAX = 0x7FFF
IN_FLIGHT_PER_PARTITION_MAX = 5  # the broker remembers five batches per producer


def record_size_upper_bound(key: bytes | None, value: bytes | None,
                            headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
    """An upper bound of one record's size inside a batch (Kafka's
    `DefaultRecord.sizeInUpperBound`: every varint at its widest)."""
    size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for k, v in headers:
        size += 10 + len(k) * 3 + (len(v) if v is not None else 0)
    return size


def _zigzag_bytes(n: int) -> bytes:
    out = bytearray()
    write_varlong(out, n)
    return bytes(out)


# Zig-zag varints of -1 .. 16383, precomputed: record lengths, offset deltas, timestamp
# deltas and key/value lengths of ordinary records are all in this range, so a record
# costs a few table look-ups and one join instead of a varint loop per field.
_VARINT_TABLE = tuple(_zigzag_bytes(n) for n in range(-1, 1 << 14))
_VARINT_MAX = (1 << 14) - 1


def _varint(n: int) -> bytes:
    return _VARINT_TABLE[n + 1] if -1 <= n <= _VARINT_MAX else _zigzag_bytes(n)


class _FastRecordBatchBuilder(RecordBatchBuilder):
    """RecordBatchBuilder with the producer's hot path: records appended in order
    (offset delta = count), encoded with table look-ups. It writes the same bytes as
    `RecordBatchBuilder.append` (tests decode and validate what it builds) and keeps that
    class's fields, which `build()` reads."""

    def append_next(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]]) -> None:
        table = _VARINT_TABLE
        count = self._count
        if count == 0:
            self._base_timestamp = self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        delta = timestamp_ms - self._base_timestamp
        # attributes (0), timestamp delta, offset delta (= count: records go in order)
        head = b"\x00" + (table[delta + 1] if -1 <= delta <= _VARINT_MAX else _zigzag_bytes(delta)) \
            + (table[count + 1] if count <= _VARINT_MAX else _zigzag_bytes(count))
        if key is None:
            head += b"\x01"
        else:
            n = len(key)
            head += (table[n + 1] if n <= _VARINT_MAX else _zigzag_bytes(n)) + key
        if value is None:
            body = head + b"\x01"
        else:
            n = len(value)
            body = head + (table[n + 1] if n <= _VARINT_MAX else _zigzag_bytes(n)) + value
        if headers:
            parts = [body, _varint(len(headers))]
            for header_key, header_value in headers:
                encoded = header_key.encode("utf-8")
                parts.append(_varint(len(encoded)))
                parts.append(encoded)
                if header_value is None:
                    parts.append(b"\x01")
                else:
                    parts.append(_varint(len(header_value)))
                    parts.append(header_value)
            body = b"".join(parts)
        else:
            body += b"\x00"
        n = len(body)
        records = self._records
        records += table[n + 1] if n <= _VARINT_MAX else _zigzag_bytes(n)
        records += body
        self._count = count + 1
        self._last_offset_delta = count

    @property
    def records_bytes(self) -> int:
        return len(self._records)


class BatchState(enum.Enum):
    OPEN = "open"
    QUEUED = "queued"        # closed, waiting to be drained (first attempt or retry)
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"
    SPLIT = "split"          # its records now live in child batches


def record_metadata(tp: TopicPartition, offset: int, log_append_time_ms: int,
                    log_start_offset: int, timestamp_ms: int, key_size: int,
                    value_size: int) -> RecordMetadata:
    """An acknowledged record's metadata: its batch's result (``record_result``) and what
    the send knew. The broker's append time replaces the record's on LogAppendTime topics."""
    if log_append_time_ms != -1:
        return RecordMetadata(tp.topic, tp.partition, offset, log_append_time_ms, key_size,
                              value_size, TimestampType.LOG_APPEND_TIME, log_start_offset)
    return RecordMetadata(tp.topic, tp.partition, offset, timestamp_ms, key_size, value_size,
                          TimestampType.CREATE_TIME, log_start_offset)


class ProducerBatch:
    """One partition's batch: its records, its attempts and, once done, its result."""

    __slots__ = (
        "tp", "builder", "payload", "state", "created_ms", "deadline_ms", "attempts",
        "retry_at_ms", "producer_id", "producer_epoch", "base_sequence", "record_count",
        "reserved_bytes", "base_offset", "log_append_time_ms", "log_start_offset", "error",
        "callbacks", "_record_callbacks", "children", "parent", "waiter", "batch_size_max",
        "_pending_children",
    )

    def __init__(self, tp: TopicPartition, builder: _FastRecordBatchBuilder, now_ms: int,
                 delivery_timeout_ms: int, batch_size_max: int) -> None:
        self.tp = tp
        self.builder: _FastRecordBatchBuilder | None = builder
        self.payload: bytearray | None = None   # built bytes, once drained
        self.state = BatchState.OPEN
        self.created_ms = now_ms
        self.deadline_ms = now_ms + delivery_timeout_ms
        self.attempts = 0
        self.retry_at_ms = 0
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.record_count = 0
        self.reserved_bytes = 0
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        self.callbacks: list[Callable[[ProducerBatch], Any]] = []
        # Send callbacks in record order, flat: (callback, index, timestamp, key size, value
        # size) per record. No object per record that lives until the batch is done: a
        # closure or future kept per record made the cyclic GC walk them again and again.
        self._record_callbacks: list[Any] = []
        # Split batches: (child, index in child) per record, and the child's way back.
        self.children: list[tuple[ProducerBatch, int]] | None = None
        self.parent: ProducerBatch | None = None
        self.waiter: Any = None                 # the shell's awaitable, made on demand
        self.batch_size_max = batch_size_max
        self._pending_children = 0

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.tp}, {self.record_count} records, {self.state.value}, "
                f"seq {self.base_sequence}, attempts {self.attempts})")

    # --- records ---

    def try_append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]], size_estimate: int) -> int:
        """The record's index in this batch, or -1 when it does not fit (the batch then
        closes). The first record always fits (an oversize record gets a batch alone)."""
        builder = self.builder
        assert self.state is BatchState.OPEN and builder is not None
        count = self.record_count
        if count and BATCH_HEADER_SIZE + builder.records_bytes + size_estimate > self.batch_size_max:
            return -1
        builder.append_next(timestamp_ms, key, value, headers)
        self.record_count = count + 1
        return count

    @property
    def is_full(self) -> bool:
        builder = self.builder
        return builder is not None and (BATCH_HEADER_SIZE + builder.records_bytes
                                        >= self.batch_size_max)

    @property
    def size_in_bytes(self) -> int:
        if self.payload is not None:
            return len(self.payload)
        assert self.builder is not None
        return self.builder.size_in_bytes

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) & _INT32_MAX

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def is_done(self) -> bool:
        return self.state in (BatchState.DONE, BatchState.FAILED) or (
            self.state is BatchState.SPLIT and self._pending_children == 0)

    def close(self) -> None:
        """No more records: build the bytes (compression happens here, once)."""
        if self.state is BatchState.OPEN:
            self.state = BatchState.QUEUED
        if self.payload is None:
            assert self.builder is not None
            self.payload = bytearray(self.builder.build())
            self.builder = None  # its record buffer is garbage now

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int,
              transactional: bool = False) -> None:
        """Write the producer fields (and a transactional producer's bit) into the built
        header and fix the CRC (they are covered by it): a retry under a new epoch resends
        the same records."""
        assert self.payload is not None
        self.producer_id, self.producer_epoch, self.base_sequence = (
            producer_id, producer_epoch, base_sequence)
        buf = self.payload
        _PRODUCER_FIELDS.pack_into(buf, _PRODUCER_FIELDS_OFFSET, producer_id, producer_epoch,
                                   base_sequence)
        if transactional:
            attributes = _ATTRIBUTES.unpack_from(buf, _ATTRIBUTES_OFFSET)[0]
            _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_OFFSET, attributes | _TRANSACTIONAL_BIT)
        _UINT32.pack_into(buf, _CRC_OFFSET, crc32c.crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]))

    # --- outcome ---

    def complete(self, base_offset: int, log_append_time_ms: int, log_start_offset: int
                 ) -> None:
        assert not self.is_done, self
        self.state = BatchState.DONE
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self._finish()

    def fail(self, error: BaseException) -> None:
        assert not self.is_done, self
        self.state = BatchState.FAILED
        self.error = error
        self._finish()

    def _finish(self) -> None:
        # Futures keep their batch for its result: let the record bytes go now.
        self.payload = None
        self.builder = None
        if self._record_callbacks:
            record_callbacks, self._record_callbacks = self._record_callbacks, []
            self._call_back_records(record_callbacks)
        callbacks, self.callbacks = self.callbacks, []
        for cb in callbacks:
            try:
                cb(self)
            except Exception:  # noqa: BLE001 -- an application's callback: the rest still run
                log.exception("a callback on a batch of %s raised", self.tp)
        parent = self.parent
        if parent is not None:
            parent._pending_children -= 1
            if parent._pending_children == 0:
                parent._finish()

    def add_record_callback(self, callback: SendCallback, index: int, timestamp_ms: int,
                            key_size: int, value_size: int) -> None:
        """Call ``callback(metadata, None)`` or ``callback(None, error)`` for the record at
        ``index`` once this batch is done (a send's callback; in record order)."""
        self._record_callbacks += (callback, index, timestamp_ms, key_size, value_size)

    def _call_back_records(self, flat: list[Any]) -> None:
        tp = self.tp
        items = iter(flat)      # five at a time
        for callback, index, timestamp_ms, key_size, value_size in zip(*[items] * 5):
            offset, log_append_time_ms, log_start_offset, error = self.record_result(index)
            try:
                if error is not None:
                    callback(None, error)
                else:
                    callback(record_metadata(tp, offset, log_append_time_ms, log_start_offset,
                                             timestamp_ms, key_size, value_size), None)
            except Exception:  # noqa: BLE001 -- logged and passed over, as Java's producer does
                log.exception("a send callback for a record of %s raised", tp)

    def record_result(self, index: int) -> tuple[int, int, int, BaseException | None]:
        """(offset, log append time, log start offset, error) of the record at `index`;
        offset -1 when unknown (acks=0, or a duplicate the broker did not locate)."""
        if self.children is not None:
            child, child_index = self.children[index]
            return child.record_result(child_index)
        assert self.state in (BatchState.DONE, BatchState.FAILED), self
        if self.error is not None:
            return -1, -1, -1, self.error
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return offset, self.log_append_time_ms, self.log_start_offset, None

    def split(self, now_ms: int, batch_size: int, delivery_deadline_ms: int,
              compression: CompressionType, compression_level: int | None) -> list[ProducerBatch]:
        """Children holding this batch's records, at most `batch_size` bytes each (a record
        larger than that alone), keeping the producer fields and consecutive sequences
        (Kafka's ProducerBatch.split). This batch completes when all children have."""
        assert self.payload is not None and self.state is not BatchState.SPLIT
        decoded = decode_batch(bytes(self.payload))
        children: list[ProducerBatch] = []
        mapping: list[tuple[ProducerBatch, int]] = []
        current: ProducerBatch | None = None
        for record in decoded.records:
            size = record_size_upper_bound(record.key, record.value, record.headers)
            if current is None or current.try_append(record.timestamp, record.key, record.value,
                                                     record.headers, size) < 0:
                current = ProducerBatch(self.tp, _FastRecordBatchBuilder(
                    compression=compression, compression_level=compression_level), now_ms, 0,
                    batch_size)
                current.deadline_ms = delivery_deadline_ms
                current.created_ms = self.created_ms
                current.parent = self
                current.attempts = self.attempts
                children.append(current)
                current.try_append(record.timestamp, record.key, record.value, record.headers, size)
            mapping.append((current, current.record_count - 1))
        offset = 0
        for child in children:
            child.close()
            if self.has_sequence:
                child.stamp(self.producer_id, self.producer_epoch,
                            (self.base_sequence + offset) & _INT32_MAX, decoded.header.is_transactional)
            offset += child.record_count
        self.children = mapping
        self.state = BatchState.SPLIT
        self._pending_children = len(children)
        return children


_OPEN = BatchState.OPEN

# Verdicts of IdempotenceState.on_error.
RETRY, RETRY_AND_BUMP, FAIL = "retry", "retry_and_bump", "fail"


class _PartitionSequences:
    __slots__ = ("producer_id", "producer_epoch", "next_sequence", "last_acked", "in_flight")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked = -1                       # last acknowledged sequence
        self.in_flight: list[ProducerBatch] = []   # sent, no answer yet; by sequence


class IdempotenceState:
    """Producer id, epoch and per-partition sequences of an idempotent producer."""

    def __init__(self, transactional: bool = False) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.epoch_bump_required = False
        # A transactional producer's batches carry the transactional bit; its epoch is
        # the transaction coordinator's to bump (never locally: see transactions.py).
        self.transactional = transactional
        self._partitions: dict[TopicPartition, _PartitionSequences] = {}

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """An InitProducerId answer: sequences start over everywhere (lazily, per
        partition, once its old in-flight batches are answered)."""
        assert producer_id >= 0 and 0 <= producer_epoch <= _EPOCH_MAX
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.epoch_bump_required = False

    def maybe_bump_epoch(self) -> bool:
        """Carry out a requested bump. False when the epoch is exhausted: the shell must
        fetch a new producer id (InitProducerId) first."""
        if not self.epoch_bump_required:
            return True
        if self.producer_epoch >= _EPOCH_MAX:
            self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            return False
        self.producer_epoch += 1
        self.epoch_bump_required = False
        return True

    def _entry(self, tp: TopicPartition) -> _PartitionSequences:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _PartitionSequences(self.producer_id,
                                                               self.producer_epoch)
        return entry

    def in_flight_count(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return 0 if entry is None else len(entry.in_flight)

    def can_drain(self, tp: TopicPartition, head: ProducerBatch) -> bool:
        """May `head` (the first queued batch of tp) be sent now?"""
        if not self.has_producer_id or self.epoch_bump_required:
            return False
        entry = self._entry(tp)
        if (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch):
            if entry.in_flight:
                return False  # old-epoch batches first get their answers
            entry.producer_id, entry.producer_epoch = self.producer_id, self.producer_epoch
            entry.next_sequence, entry.last_acked = 0, -1
        if head.has_sequence and (head.producer_id, head.producer_epoch) != (
                self.producer_id, self.producer_epoch):
            head.base_sequence = NO_SEQUENCE  # rewritten from 0 under the new epoch
        if head.has_sequence:
            return not entry.in_flight   # in-order retries: one at a time
        return len(entry.in_flight) < IN_FLIGHT_PER_PARTITION_MAX

    def on_drain(self, batch: ProducerBatch) -> None:
        entry = self._entry(batch.tp)
        if not batch.has_sequence:
            batch.stamp(self.producer_id, self.producer_epoch, entry.next_sequence,
                        self.transactional)
            entry.next_sequence = (entry.next_sequence + batch.record_count) & _INT32_MAX
        entry.in_flight.append(batch)
        entry.in_flight.sort(key=lambda b: b.base_sequence)

    def _settle(self, batch: ProducerBatch) -> _PartitionSequences:
        entry = self._entry(batch.tp)
        if batch in entry.in_flight:
            entry.in_flight.remove(batch)
        return entry

    def on_split(self, batch: ProducerBatch) -> None:
        """``batch`` was split into smaller batches: it leaves the in-flight list (its
        children take sequences of their own when they are drained)."""
        self._settle(batch)

    def on_success(self, batch: ProducerBatch) -> None:
        entry = self._settle(batch)
        if (batch.producer_id, batch.producer_epoch) == (entry.producer_id, entry.producer_epoch):
            entry.last_acked = max(entry.last_acked, batch.last_sequence)

    def on_error(self, batch: ProducerBatch, error_code: int, log_start_offset: int,
                 retriable: bool) -> str:
        """RETRY, RETRY_AND_BUMP or FAIL for a failed attempt (Kafka's canRetry)."""
        entry = self._settle(batch)
        current = (batch.producer_id, batch.producer_epoch) == (self.producer_id,
                                                               self.producer_epoch)
        if error_code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or not current:
                return RETRY
            self.epoch_bump_required = True
            return RETRY_AND_BUMP
        if error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            is_next = batch.base_sequence == ((entry.last_acked + 1) & _INT32_MAX)
            if current and is_next:
                self.epoch_bump_required = True
                return RETRY_AND_BUMP
            return RETRY
        return RETRY if retriable else FAIL

    def on_failed_for_good(self, batch: ProducerBatch) -> None:
        """A batch that had a sequence will never be written: later sequences of its
        partition now have a gap, so the epoch must be bumped (KIP-360)."""
        self._settle(batch)
        if batch.has_sequence and (batch.producer_id, batch.producer_epoch) == (
                self.producer_id, self.producer_epoch):
            self.epoch_bump_required = True


class RecordAccumulator:
    def __init__(self, *, batch_size: int, linger_ms: int, buffer_memory: int,
                 delivery_timeout_ms: int, retry_backoff_ms: int, retry_backoff_max_ms: int,
                 compression: CompressionType = CompressionType.NONE,
                 compression_level: int | None = None,
                 idempotence: IdempotenceState | None = None) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)
        self.compression = compression
        self.compression_level = compression_level
        self.idempotence = idempotence
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._drain_index: dict[int, int] = {}
        self.used_bytes = 0         # Invariant: sum of reserved_bytes of incomplete batches
        self.incomplete: set[ProducerBatch] = set()
        self.flushes_in_progress = 0
        self.closing = False
        self.waiting_for_memory = 0  # senders blocked on buffer.memory (shell's count)
        # A transactional producer sends to a partition only once AddPartitionsToTxn
        # added it to the transaction (TransactionManager.can_send_to).
        self.may_send_to: Callable[[TopicPartition], bool] | None = None

    # --- appending ---

    def has_room(self, size: int) -> bool:
        return self.used_bytes + size <= self.buffer_memory or self.used_bytes == 0

    def append_to_open(self, tp: TopicPartition, timestamp_ms: int, key: bytes | None,
                       value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
                       size_estimate: int) -> tuple[ProducerBatch, int, bool] | None:
        """Append to the partition's open batch: (batch, index, batch now full), or None
        when there is no open batch or the record does not fit (then `append`).
        The producer's hot path: ProducerBatch.try_append, inlined."""
        queue = self._queues.get(tp)
        if queue:
            last = queue[-1]
            if last.state is _OPEN:
                builder = last.builder
                limit = last.batch_size_max - BATCH_HEADER_SIZE
                if builder.records_bytes + size_estimate <= limit:  # type: ignore[union-attr]
                    builder.append_next(timestamp_ms, key, value, headers)  # type: ignore[union-attr]
                    index = last.record_count
                    last.record_count = index + 1
                    return last, index, builder.records_bytes >= limit  # type: ignore[union-attr]
        return None

    def append(self, tp: TopicPartition, timestamp_ms: int, key: bytes | None,
               value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
               size_estimate: int, now_ms: int) -> tuple[ProducerBatch, int, bool]:
        """(batch, index in batch, whether the batch is now worth waking the sender:
        a new batch began, or one filled up)."""
        found = self.append_to_open(tp, timestamp_ms, key, value, headers, size_estimate)
        if found is not None:
            return found
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        if queue and queue[-1].state is BatchState.OPEN:
            queue[-1].close()  # full: the record goes to a new batch
        batch = ProducerBatch(tp, _FastRecordBatchBuilder(compression=self.compression,
                                                          compression_level=self.compression_level),
                              now_ms, self.delivery_timeout_ms, self.batch_size)
        index = batch.try_append(timestamp_ms, key, value, headers, size_estimate)
        reserve = max(self.batch_size, size_estimate + BATCH_HEADER_SIZE)
        batch.reserved_bytes = reserve
        self.used_bytes += reserve
        self.incomplete.add(batch)
        queue.append(batch)
        return batch, index, True

    def queued_batches(self, tp: TopicPartition) -> int:
        queue = self._queues.get(tp)
        return len(queue) if queue else 0

    # --- sending ---

    def _sendable(self, batch: ProducerBatch, queue_len: int, now_ms: int) -> bool:
        if batch.retry_at_ms > now_ms:
            return False
        if batch.state is not BatchState.OPEN:
            return True  # closed: full, or a retry
        return (queue_len > 1 or batch.is_full or now_ms - batch.created_ms >= self.linger_ms
                or self.flushes_in_progress > 0 or self.closing or self.waiting_for_memory > 0)

    def ready(self, now_ms: int, leader_of: Callable[[TopicPartition], int | None]
              ) -> tuple[set[int], int, list[TopicPartition]]:
        """(nodes with a batch to send now, ms until the next batch may become ready,
        partitions whose leader is unknown)."""
        nodes: set[int] = set()
        unknown: list[TopicPartition] = []
        next_ms = 1 << 30
        for tp, queue in self._queues.items():
            if not queue:
                continue
            head = queue[0]
            leader = leader_of(tp)
            if leader is None:
                unknown.append(tp)
                continue
            if leader in nodes:
                continue
            if self._sendable(head, len(queue), now_ms):
                nodes.add(leader)
            elif head.retry_at_ms > now_ms:
                next_ms = min(next_ms, head.retry_at_ms - now_ms)
            else:
                next_ms = min(next_ms, max(0, head.created_ms + self.linger_ms - now_ms))
        return nodes, next_ms, unknown

    def drain(self, node_id: int, partitions: Sequence[TopicPartition], max_request_size: int,
              now_ms: int) -> list[ProducerBatch]:
        """Batches for one produce request to `node_id`, the leader of `partitions`."""
        out: list[ProducerBatch] = []
        if not partitions:
            return out
        size = 0
        start = self._drain_index.get(node_id, 0) % len(partitions)
        for i in range(len(partitions)):
            tp = partitions[(start + i) % len(partitions)]
            queue = self._queues.get(tp)
            if not queue:
                continue
            head = queue[0]
            if not self._sendable(head, len(queue), now_ms):
                continue
            if self.may_send_to is not None and not self.may_send_to(tp):
                continue
            if self.idempotence is not None and not self.idempotence.can_drain(tp, head):
                continue
            head.close()
            if out and size + len(head.payload) > max_request_size:  # type: ignore[arg-type]
                self._drain_index[node_id] = (start + i) % len(partitions)
                break
            queue.popleft()
            if self.idempotence is not None:
                self.idempotence.on_drain(head)
            head.state = BatchState.IN_FLIGHT
            head.attempts += 1
            size += len(head.payload)  # type: ignore[arg-type]
            out.append(head)
        else:
            self._drain_index[node_id] = start + 1
        return out

    # --- answers ---

    def _release(self, batch: ProducerBatch) -> None:
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.used_bytes -= batch.reserved_bytes

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int = -1,
                 log_start_offset: int = -1) -> None:
        if self.idempotence is not None:
            self.idempotence.on_success(batch)
        self._release(batch)
        batch.complete(base_offset, log_append_time_ms, log_start_offset)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.idempotence is not None:
            self.idempotence.on_failed_for_good(batch)
        self._release(batch)
        batch.fail(error)

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Back to the front of its queue (in sequence order), after a backoff growing
        with attempts (KIP-580)."""
        backoff = min(self.retry_backoff_ms * (2 ** max(0, batch.attempts - 1)),
                      self.retry_backoff_max_ms)
        batch.retry_at_ms = now_ms + backoff
        batch.state = BatchState.QUEUED
        queue = self._queues.setdefault(batch.tp, deque())
        self._insert_in_order(queue, batch)

    @staticmethod
    def _insert_in_order(queue: deque[ProducerBatch], batch: ProducerBatch) -> None:
        if not batch.has_sequence:
            queue.appendleft(batch)
            return
        index = 0
        for b in queue:
            if not b.has_sequence or b.base_sequence > batch.base_sequence:
                break
            index += 1
        queue.insert(index, batch)

    def split_and_reenqueue(self, batch: ProducerBatch, now_ms: int) -> list[ProducerBatch]:
        """RECORD_TOO_LARGE for a batch of several records: its records go back as smaller
        batches (each record alone if it must), so only the record that is really too
        large fails."""
        if self.idempotence is not None:
            self.idempotence.on_split(batch)
        # Halve at least: when batch.size is above the broker's limit, repeated refusals
        # still shrink the batches down to one record each.
        target = max(1, min(self.batch_size, len(batch.payload or b"") // 2))
        children = batch.split(now_ms, target, batch.deadline_ms, self.compression,
                               self.compression_level)
        self._release(batch)
        queue = self._queues.setdefault(batch.tp, deque())
        for child in reversed(children):
            child.reserved_bytes = child.size_in_bytes
            self.used_bytes += child.reserved_bytes
            self.incomplete.add(child)
            child.state = BatchState.QUEUED
            if child.has_sequence:
                self._insert_in_order(queue, child)
            else:
                queue.appendleft(child)
        return children

    def expired(self, now_ms: int) -> list[ProducerBatch]:
        """Queued batches past their delivery deadline, taken out of their queues."""
        out: list[ProducerBatch] = []
        for queue in self._queues.values():
            if queue and queue[0].deadline_ms <= now_ms:
                keep = deque(b for b in queue if b.deadline_ms > now_ms)
                out.extend(b for b in queue if b.deadline_ms <= now_ms)
                queue.clear()
                queue.extend(keep)
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Every queued batch, taken out (a forced close)."""
        out = [b for q in self._queues.values() for b in q]
        for q in self._queues.values():
            q.clear()
        return out

    def has_queued(self) -> bool:
        return any(self._queues.values())

    def partitions_queued(self) -> Iterable[TopicPartition]:
        return (tp for tp, q in self._queues.items() if q)
