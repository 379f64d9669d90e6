"""The ``__transaction_state`` records, byte for byte as Apache Kafka writes them, and replay.

Theory of operation
-------------------
The transaction coordinator keeps its durable state in the compacted internal topic
``__transaction_state``. Every record is a key and a value, each starting with an int16
version (Kafka's ``TransactionLogKey`` / ``TransactionLogValue`` schemas in
../shared/kafka-protocol/coordinators/, frozen by KIP-915):

- key version 0: the transactional id;
- value version 0 (what Kafka writes for transaction.version 0-1, and Ketch always): the
  producer id and epoch, the transaction timeout, the state's id (``TransactionState``),
  the partitions of the transaction (null or empty once complete), the last update and the
  start timestamps. Version 1 (flexible; KIP-890's previous/next producer id and client
  transaction version as tagged fields) is read too;
- a null value (tombstone) removes the transactional id (``transactional.id.expiration.ms``).

A ``TransactionLogImage`` is what replaying one partition's records in offset order yields:
the latest value per transactional id. ``TransactionLogLoader`` rebuilds it from the
partition's batches when this broker becomes the partition's leader; the coordinator then
turns each value into a ``TransactionMetadata``.

``partition_for_transactional_id`` is Kafka's ``abs(transactionalId.hashCode()) %
transaction.state.log.num.partitions`` (the same Java hash as ``partition_for_group``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable

from clients.protocol import CorruptFrameError, decode_message, encode_message
from clients.protocol import messages as schemas
from clients.records import Record, build_batch, decode_batches
from clients.records.errors import RecordError
from clients.types import TopicPartition

from broker.group.records import java_string_hash

__all__ = [
    "TRANSACTION_STATE_TOPIC", "TransactionLogImage", "TransactionLogLoader",
    "TransactionLogRecord", "TransactionLogRecordError", "TransactionLogValue",
    "decode_record", "encode_batch", "partition_for_transactional_id",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
NO_PRODUCER_ID = -1
KEY_VERSION = 0
VALUE_VERSION = 0      # Kafka writes 1 only with transaction.version 2 (KIP-890 part 2)

_VERSION = struct.Struct(">h")
_KeyData = schemas.TransactionLogKey
_ValueData = schemas.TransactionLogValue
_PartitionsData = schemas.TransactionLogValue.PartitionsSchema
assert _KeyData.SCHEMA.min_version == KEY_VERSION == _KeyData.SCHEMA.max_version


class TransactionLogRecordError(ValueError):
    """A ``__transaction_state`` key or value that is not a valid record."""


def partition_for_transactional_id(transactional_id: str, partitions: int = 50) -> int:
    """The ``__transaction_state`` partition whose leader coordinates ``transactional_id``."""
    assert partitions > 0
    h = java_string_hash(transactional_id)
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself.
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's durable state (Kafka's ``TxnTransitMetadata`` as written)."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state_id: int                          # TransactionState's id (state.py)
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int                # -1 when no transaction has started
    # Version 1 only (tagged); -1 otherwise.
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    transactional_id: str
    value: TransactionLogValue | None      # None: tombstone

    def encode_key(self) -> bytes:
        return _encode(KEY_VERSION, _KeyData(transactional_id=self.transactional_id))

    def encode_value(self) -> bytes | None:
        v = self.value
        if v is None:
            return None
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(v.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        # Kafka writes a null partition list for the Empty and Complete* states'
        # empty set; an empty list reads back the same.
        return _encode(VALUE_VERSION, _ValueData(
            producer_id=v.producer_id, producer_epoch=v.producer_epoch,
            transaction_timeout_ms=v.transaction_timeout_ms, transaction_status=v.state_id,
            transaction_partitions=[_PartitionsData(topic=t, partition_ids=ps)
                                    for t, ps in by_topic.items()],
            transaction_last_update_timestamp_ms=v.last_update_timestamp_ms,
            transaction_start_timestamp_ms=v.start_timestamp_ms))


def _encode(version: int, body: object) -> bytes:
    return _VERSION.pack(version) + encode_message(body, version)


def _decode(cls: type, data: bytes) -> tuple[int, object]:
    if len(data) < 2:
        raise TransactionLogRecordError(f"truncated {cls.__name__}: {len(data)} bytes")
    version = _VERSION.unpack_from(data)[0]
    spec = cls.SCHEMA  # type: ignore[attr-defined]
    if not spec.min_version <= version <= spec.max_version:
        raise TransactionLogRecordError(f"unknown {cls.__name__} version {version}")
    try:
        return version, decode_message(cls, version, data[2:], exact=False)
    except CorruptFrameError as e:
        raise TransactionLogRecordError(f"bad {cls.__name__} v{version}: {e}") from None


def decode_record(key: bytes, value: bytes | None) -> TransactionLogRecord:
    k = _decode(_KeyData, key)[1]
    tid = k.transactional_id  # type: ignore[attr-defined]
    if value is None:
        return TransactionLogRecord(tid, None)
    v = _decode(_ValueData, value)[1]
    parts = frozenset(TopicPartition(p.topic, i) for p in (v.transaction_partitions or ())  # type: ignore[attr-defined]
                      for i in p.partition_ids)
    return TransactionLogRecord(tid, TransactionLogValue(
        producer_id=v.producer_id, producer_epoch=v.producer_epoch,  # type: ignore[attr-defined]
        transaction_timeout_ms=v.transaction_timeout_ms,  # type: ignore[attr-defined]
        state_id=v.transaction_status, partitions=parts,  # type: ignore[attr-defined]
        last_update_timestamp_ms=v.transaction_last_update_timestamp_ms,  # type: ignore[attr-defined]
        start_timestamp_ms=v.transaction_start_timestamp_ms,  # type: ignore[attr-defined]
        previous_producer_id=v.previous_producer_id,  # type: ignore[attr-defined]
        next_producer_id=v.next_producer_id))  # type: ignore[attr-defined]


def encode_batch(records: Iterable[TransactionLogRecord], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch holding ``records`` (offsets relative; the log assigns)."""
    recs = [Record(offset=i, timestamp=timestamp_ms, key=r.encode_key(), value=r.encode_value())
            for i, r in enumerate(records)]
    assert recs, "an append holds at least one record"
    return build_batch(recs)


@dataclass(slots=True)
class TransactionLogImage:
    """The durable state of one ``__transaction_state`` partition: what its records say."""
    values: dict[str, TransactionLogValue] = field(default_factory=dict)

    def replay(self, record: TransactionLogRecord) -> None:
        if record.value is None:
            self.values.pop(record.transactional_id, None)
        else:
            self.values[record.transactional_id] = record.value


class TransactionLogLoader:
    """Rebuilds a ``TransactionLogImage`` from a partition's batches, fed in offset order."""

    def __init__(self) -> None:
        self.image = TransactionLogImage()
        self.next_offset = 0          # Invariant: every record replayed had offset < this
        self.records_replayed = 0

    def replay_batches(self, data: bytes | bytearray | memoryview) -> None:
        try:
            batches = decode_batches(data)
        except RecordError as e:
            raise TransactionLogRecordError(f"bad batch in {TRANSACTION_STATE_TOPIC}: {e}") from None
        for batch in batches:
            if batch.header.is_control:     # nothing writes markers here; skipped as Kafka does
                self.next_offset = max(self.next_offset, batch.header.last_offset + 1)
                continue
            for record in batch.records:
                if record.offset < self.next_offset:
                    raise TransactionLogRecordError(
                        f"record at offset {record.offset} replayed after {self.next_offset - 1}")
                self.next_offset = record.offset + 1
                if record.key is None:
                    raise TransactionLogRecordError(f"record at offset {record.offset} has no key")
                self.image.replay(decode_record(
                    bytes(record.key), None if record.value is None else bytes(record.value)))
                self.records_replayed += 1
