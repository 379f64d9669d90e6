"""The delay store: the internal topic ``__ketch_delayed_delivery`` and its records.

Like ``__consumer_offsets`` it has a fixed partition count and a replication factor of
min(3, brokers), and is compacted: a parked record is keyed by a unique id, and the
delivery writes a tombstone for that id in the same transaction that appends the record
to its target. A target partition always parks in the same store partition
(``store_partition_for``), so one scheduler delivers all of a target partition's records.

Value (version 0, big-endian, Kafka's primitive encodings):
    int8 version | string target topic (int16 length) | int32 target partition |
    int64 due ms | int64 original timestamp ms | bytes key (int32 length, -1 null) |
    bytes value (ditto) | int32 header count | per header: string name, bytes value
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from clients.types import TopicPartition

__all__ = ["DELAY_STORE_TOPIC", "TRANSACTIONAL_ID_PREFIX", "ParkedRecord", "StoreFormatError",
           "decode_parked", "due_ms_of", "encode_parked", "store_partition_for",
           "transactional_id_for"]

DELAY_STORE_TOPIC = "__ketch_delayed_delivery"
# The scheduler of store partition p delivers as transactional id "<prefix><p>": a new
# leader's InitProducerId fences the old one's producer.
TRANSACTIONAL_ID_PREFIX = DELAY_STORE_TOPIC + "-"
_VERSION = 0
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Headers = tuple[tuple[str, "bytes | None"], ...]


class StoreFormatError(ValueError):
    """A delay-store value this version cannot read."""


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


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(b))
        out += b


def _string(out: bytearray, s: str) -> None:
    raw = s.encode()
    out += _I16.pack(len(raw))
    out += raw


def encode_parked(r: ParkedRecord) -> bytes:
    out = bytearray(_I8.pack(_VERSION))
    _string(out, r.target.topic)
    out += _I32.pack(r.target.partition)
    out += _I64.pack(r.due_ms)
    out += _I64.pack(r.timestamp_ms)
    _bytes(out, r.key)
    _bytes(out, r.value)
    out += _I32.pack(len(r.headers))
    for name, value in r.headers:
        _string(out, name)
        _bytes(out, value)
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise StoreFormatError("truncated delay-store value")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise StoreFormatError("truncated delay-store value")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def nullable(self) -> bytes | None:
        n = self.take(_I32)
        return None if n == -1 else self.raw(n)

    def string(self) -> str:
        return self.raw(self.take(_I16)).decode()


def due_ms_of(value: bytes) -> int:
    """A value's due time alone (what the index needs while the store is replayed)."""
    r = _Reader(value)
    version = r.take(_I8)
    if version != _VERSION:
        raise StoreFormatError(f"delay-store value version {version} is not {_VERSION}")
    topic_length = r.take(_I16)
    r.pos += topic_length + _I32.size       # the target topic and partition
    return r.take(_I64)


def decode_parked(store_key: bytes, value: bytes) -> ParkedRecord:
    r = _Reader(value)
    version = r.take(_I8)
    if version != _VERSION:
        raise StoreFormatError(f"delay-store value version {version} is not {_VERSION}")
    topic = r.string()
    partition = r.take(_I32)
    due = r.take(_I64)
    ts = r.take(_I64)
    key = r.nullable()
    val = r.nullable()
    headers = tuple((r.string(), r.nullable()) for _ in range(r.take(_I32)))
    return ParkedRecord(store_key, TopicPartition(topic, partition), due, ts, key, val, headers)
