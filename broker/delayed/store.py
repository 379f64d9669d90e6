"""The delay store: the internal topic ``__ketch_delayed_delivery`` and its records.

Like ``__consumer_offsets`` it has a fixed partition count and a replication factor of
min(3, brokers), and is compacted: a parked record is keyed by a unique id, and the
delivery writes a tombstone for that id in the same transaction that appends the record
to its target. A target partition always parks in the same store partition
(``store_partition_for``), so one scheduler delivers all of a target partition's records.

A store record's key is the parked record's id; its value (version 0, big-endian, Kafka's
primitive encodings):
    int8 version | string target topic (int16 length) | int32 target partition |
    int64 due ms | int64 original timestamp ms | bytes key (int32 length, -1 null) |
    bytes value (ditto) | int32 header count | per header: string name, bytes value
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterable

from clients.records import RecordBatchBuilder
from clients.types import TopicPartition

__all__ = ["DELAY_STORE_TOPIC", "TRANSACTIONAL_ID_PREFIX", "ParkedRecord", "StoreFormatError",
           "decode_parked", "due_ms_of", "encode_parked", "store_batches",
           "store_partition_for", "transactional_id_for"]

DELAY_STORE_TOPIC = "__ketch_delayed_delivery"
# The scheduler of store partition p delivers as transactional id "<prefix><p>": a new
# leader's InitProducerId fences the old one's producer.
TRANSACTIONAL_ID_PREFIX = DELAY_STORE_TOPIC + "-"
_VERSION = 0
_HEAD = struct.Struct(">bh")              # version, target topic length
_TARGET = struct.Struct(">iqqi")          # target partition, due, timestamp, key length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Headers = tuple[tuple[str, "bytes | None"], ...]


class StoreFormatError(ValueError):
    """A delay-store record this version cannot read."""


@dataclass(frozen=True, slots=True)
class ParkedRecord:
    """One parked record: its store key, where and when it goes, and what it is."""
    store_key: bytes
    target: TopicPartition
    due_ms: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def store_partition_for(target: TopicPartition, partitions: int) -> int:
    """The store partition a target partition parks in (stable across brokers)."""
    return zlib.crc32(f"{target.topic}:{target.partition}".encode()) % partitions


def transactional_id_for(store_partition: int) -> str:
    return f"{TRANSACTIONAL_ID_PREFIX}{store_partition}"


def encode_parked(r: ParkedRecord) -> bytes:
    topic = r.target.topic.encode()
    key, value = r.key, r.value
    parts = [_HEAD.pack(_VERSION, len(topic)), topic,
             _TARGET.pack(r.target.partition, r.due_ms, r.timestamp_ms,
                          -1 if key is None else len(key))]
    if key is not None:
        parts.append(key)
    parts.append(_I32.pack(-1 if value is None else len(value)))
    if value is not None:
        parts.append(value)
    parts.append(_I32.pack(len(r.headers)))
    for name, header_value in r.headers:
        raw = name.encode()
        parts.append(_I16.pack(len(raw)))
        parts.append(raw)
        parts.append(_I32.pack(-1 if header_value is None else len(header_value)))
        if header_value is not None:
            parts.append(header_value)
    return b"".join(parts)


def store_batches(parked: Iterable[ParkedRecord], timestamp_ms: int, batch_bytes: int) -> bytearray:
    """Store records for ``parked`` (key the store key, value ``encode_parked``), as
    batches of about ``batch_bytes`` at most (one record may exceed it alone), what a
    producer would send: for a store partition this broker leads, appended directly (a
    bytearray, which the append takes as it is)."""
    out = bytearray()
    builder = RecordBatchBuilder()
    for r in parked:
        if builder.records_count and builder.size_in_bytes >= batch_bytes:
            out += builder.build()
            builder = RecordBatchBuilder()
        builder.append(timestamp_ms, r.store_key, encode_parked(r))
    if builder.records_count:
        out += builder.build()
    return out


def due_ms_of(value: bytes) -> int:
    """A value's due time alone (what the index needs while the store is replayed)."""
    try:
        version, topic_length = _HEAD.unpack_from(value, 0)
        if version != _VERSION:
            raise StoreFormatError(f"delay-store value version {version} is not {_VERSION}")
        if topic_length < 0:
            raise StoreFormatError("negative topic length in a delay-store value")
        # after the target topic and partition
        return int(_I64.unpack_from(value, _HEAD.size + topic_length + _I32.size)[0])
    except struct.error:
        raise StoreFormatError("truncated delay-store value") from None


def decode_parked(store_key: bytes, value: bytes) -> ParkedRecord:
    # The hot path of delivery: struct calls and slices inline. A declared length running
    # past the end shows as struct.error on the next read, or as pos past the end at last.
    try:
        version, n = _HEAD.unpack_from(value, 0)
        if version != _VERSION:
            raise StoreFormatError(f"delay-store value version {version} is not {_VERSION}")
        pos = _HEAD.size
        if n < 0:
            raise StoreFormatError("negative topic length in a delay-store value")
        topic = value[pos:pos + n].decode()
        pos += n
        partition, due, ts, n = _TARGET.unpack_from(value, pos)
        pos += _TARGET.size
        key, pos = _nullable(value, pos, n)
        (n,) = _I32.unpack_from(value, pos)
        val, pos = _nullable(value, pos + _I32.size, n)
        (count,) = _I32.unpack_from(value, pos)
        pos += _I32.size
        headers = []
        for _ in range(count):
            (n,) = _I16.unpack_from(value, pos)
            pos += _I16.size
            if n < 0:
                raise StoreFormatError("negative header name length in a delay-store value")
            end = pos + n
            name = value[pos:end].decode()
            (n,) = _I32.unpack_from(value, end)
            header_value, pos = _nullable(value, end + _I32.size, n)
            headers.append((name, header_value))
    except struct.error:
        raise StoreFormatError("truncated delay-store value") from None
    if pos > len(value):
        raise StoreFormatError("truncated delay-store value")
    return ParkedRecord(store_key, TopicPartition(topic, partition), due, ts, key, val,
                        tuple(headers))


def _nullable(value: bytes, pos: int, n: int) -> tuple[bytes | None, int]:
    """(bytes of declared length ``n`` at ``pos``, -1: None; the position after)."""
    if n == -1:
        return None, pos
    if n < 0:
        raise StoreFormatError(f"length {n} in a delay-store value")
    return value[pos:pos + n], pos + n
