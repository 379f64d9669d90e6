"""The ``__consumer_offsets`` records, byte for byte as Apache Kafka writes them, and replay.

Theory of operation
-------------------
The group coordinator keeps its durable state in the compacted internal topic
``__consumer_offsets``. Every record there is a key and a value, each starting with an int16
*version* that also says which kind of record it is (Kafka's group-coordinator schemas
``OffsetCommitKey``, ``OffsetCommitValue``, ``GroupMetadataKey``, ``GroupMetadataValue``;
KIP-915 froze this layout):

- key version 0 or 1: an offset commit, ``group, topic, partition``; the value holds the
  committed offset (version 3: ``offset, leader_epoch, metadata, commit_timestamp``; version
  1 when the commit carried an explicit expire time). Kafka writes key version 1.
- key version 2: group metadata, ``group``; the value (version 3) is the snapshot of the
  group written when it stabilised or emptied: protocol type, generation, protocol, leader,
  the time it entered its current state, and each member with its subscription and
  assignment.
- a null value (tombstone) deletes the key: an expired or deleted offset, a deleted group.

Key versions >= 3 are Kafka's newer group types (KIP-848 consumer groups, share groups);
Ketch never writes them, and the loader skips them (counted in ``skipped_records``) rather
than refusing a partition it could otherwise load.

Strings are int16-length UTF-8, bytes int32-length, arrays int32-count; version 4 of the
values is KIP-482 "flexible" (unsigned-varint lengths plus tagged fields), which Kafka 3.x
does not write but may, so it is read too. All decoding checks every length against the
bytes that remain and fails with ``CoordinatorRecordError``, never IndexError.

A ``CoordinatorImage`` is what replaying the records of one partition in offset order
yields: the last group metadata value per group and the committed offset per (group,
topic, partition). The live coordinator replays its own acknowledged appends into the same
structure, and ``CoordinatorLoader`` rebuilds it from the partition's batches when this
broker becomes the partition's leader, so failover and the live path share one code path.

``partition_for_group`` is Kafka's ``abs(groupId.hashCode()) % partitions`` with Java's
``String.hashCode`` (UTF-16 code units, int32 overflow) and ``Utils.abs`` (MIN_VALUE -> 0).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Union

from clients.protocol.types import CorruptFrameError, read_uvarint
from clients.records import Record, build_batch, decode_batches
from clients.records.errors import RecordError

__all__ = [
    "CONSUMER_OFFSETS_TOPIC", "CoordinatorImage", "CoordinatorLoader", "CoordinatorRecord",
    "CoordinatorRecordError", "GroupMetadataKey", "GroupMetadataValue", "MemberRecord",
    "OffsetCommitKey", "OffsetCommitValue", "decode_record", "encode_batch",
    "java_string_hash", "partition_for_group",
]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

# Key versions are record types (Kafka's GroupMetadataManager; coordinator-key apiKey).
_OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3
_FLEXIBLE_VERSION = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CoordinatorRecordError(ValueError):
    """A ``__consumer_offsets`` key or value that is not a valid record."""


# ------------------------------------------------------------------ partition of a group

def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: sum of UTF-16 code units times 31^k, as int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    assert partitions > 0
    h = java_string_hash(group_id)
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself.
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ------------------------------------------------------------------ record values

@dataclass(frozen=True, slots=True, order=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = NO_TIMESTAMP
    # Only value version 1 has it (OffsetCommit v2-v4 with an explicit retention time);
    # Kafka then expires the offset at this time instead of by offsets.retention.minutes.
    expire_timestamp_ms: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True, order=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes      # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str       # "" when the group never had a member
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int   # NO_TIMESTAMP when read from versions 0-1
    members: tuple[MemberRecord, ...] = ()


RecordKey = Union[OffsetCommitKey, GroupMetadataKey]
RecordValue = Union[OffsetCommitValue, GroupMetadataValue, None]


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    key: RecordKey
    value: RecordValue   # None: tombstone

    def __post_init__(self) -> None:
        if isinstance(self.key, OffsetCommitKey):
            assert self.value is None or isinstance(self.value, OffsetCommitValue)
        else:
            assert isinstance(self.key, GroupMetadataKey)
            assert self.value is None or isinstance(self.value, GroupMetadataValue)

    def encode_key(self) -> bytes:
        out = bytearray()
        if isinstance(self.key, OffsetCommitKey):
            out += _I16.pack(OFFSET_COMMIT_KEY_VERSION)
            _w_string(out, self.key.group_id)
            _w_string(out, self.key.topic)
            out += _I32.pack(self.key.partition)
        else:
            out += _I16.pack(GROUP_METADATA_KEY_VERSION)
            _w_string(out, self.key.group_id)
        return bytes(out)

    def encode_value(self) -> bytes | None:
        v = self.value
        if v is None:
            return None
        out = bytearray()
        if isinstance(v, OffsetCommitValue):
            if v.expire_timestamp_ms != NO_TIMESTAMP:
                out += _I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
                out += _I64.pack(v.offset)
                _w_string(out, v.metadata)
                out += _I64.pack(v.commit_timestamp_ms)
                out += _I64.pack(v.expire_timestamp_ms)
            else:
                out += _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
                out += _I64.pack(v.offset)
                out += _I32.pack(v.leader_epoch)
                _w_string(out, v.metadata)
                out += _I64.pack(v.commit_timestamp_ms)
            return bytes(out)
        out += _I16.pack(GROUP_METADATA_VALUE_VERSION)
        _w_string(out, v.protocol_type)
        out += _I32.pack(v.generation_id)
        _w_nullable_string(out, v.protocol_name)
        _w_nullable_string(out, v.leader_id)
        out += _I64.pack(v.current_state_timestamp_ms)
        out += _I32.pack(len(v.members))
        for m in v.members:
            _w_string(out, m.member_id)
            _w_nullable_string(out, m.group_instance_id)
            _w_string(out, m.client_id)
            _w_string(out, m.client_host)
            out += _I32.pack(m.rebalance_timeout_ms)
            out += _I32.pack(m.session_timeout_ms)
            _w_bytes(out, m.subscription)
            _w_bytes(out, m.assignment)
        return bytes(out)


def _w_string(out: bytearray, s: str) -> None:
    data = s.encode("utf-8")
    assert len(data) <= 0x7FFF, "string too long for an int16 length"
    out += _I16.pack(len(data))
    out += data


def _w_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
    else:
        _w_string(out, s)


def _w_bytes(out: bytearray, b: bytes) -> None:
    out += _I32.pack(len(b))
    out += b


# ------------------------------------------------------------------ decoding

class _Reader:
    """Bounds-checked reader over one key or value; ``compact`` for flexible versions."""

    __slots__ = ("buf", "pos", "compact")

    def __init__(self, buf: bytes, compact: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.compact = compact

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CoordinatorRecordError("truncated coordinator record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def _uvarint(self) -> int:
        try:
            n, self.pos = read_uvarint(self.buf, self.pos)
        except CorruptFrameError as e:
            raise CoordinatorRecordError(str(e)) from None
        return n

    def _length(self, short: bool) -> int:
        if self.compact:
            return self._uvarint() - 1
        return self.int16() if short else self.int32()

    def nullable_string(self) -> str | None:
        n = self._length(short=True)
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise CoordinatorRecordError("string is not UTF-8") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CoordinatorRecordError("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length(short=False)
        if n < 0:
            raise CoordinatorRecordError("null in a non-nullable bytes field")
        return bytes(self._take(n))

    def array_count(self) -> int:
        n = self._length(short=False)
        if n < 0:
            raise CoordinatorRecordError("null array")
        if n > len(self.buf) - self.pos:   # every element takes at least one byte
            raise CoordinatorRecordError("array count larger than the record")
        return n

    def tagged_fields(self) -> None:
        """Skip a KIP-482 tagged-field section (no tag is defined for these records)."""
        if not self.compact:
            return
        for _ in range(self._uvarint()):
            self._uvarint()
            self._take(self._uvarint())


def decode_key(data: bytes) -> RecordKey | None:
    """The key, or None for a record type Ketch does not know (key version >= 3)."""
    r = _Reader(bytes(data))
    version = r.int16()
    if version in _OFFSET_COMMIT_KEY_VERSIONS:
        key: RecordKey = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    elif version > GROUP_METADATA_KEY_VERSION:
        return None
    else:
        raise CoordinatorRecordError(f"unknown key version {version}")
    # Trailing bytes after a known version are tolerated, as Kafka does (a newer writer
    # may append ignorable fields).
    return key


def _decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(bytes(data))
    version = r.int16()
    if not 0 <= version <= _FLEXIBLE_VERSION:
        raise CoordinatorRecordError(f"unknown OffsetCommitValue version {version}")
    r.compact = version >= _FLEXIBLE_VERSION
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_timestamp_ms = r.int64()
    expire_timestamp_ms = r.int64() if version == 1 else NO_TIMESTAMP
    r.tagged_fields()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp_ms,
                             expire_timestamp_ms)


def _decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(bytes(data))
    version = r.int16()
    if not 0 <= version <= _FLEXIBLE_VERSION:
        raise CoordinatorRecordError(f"unknown GroupMetadataValue version {version}")
    r.compact = version >= _FLEXIBLE_VERSION
    protocol_type = r.string()
    generation_id = r.int32()
    protocol_name = r.nullable_string()
    leader_id = r.nullable_string()
    current_state_timestamp_ms = r.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(r.array_count()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        if version >= 1:
            rebalance_timeout_ms = r.int32()
            session_timeout_ms = r.int32()
        else:
            # Version 0 has no rebalance timeout; Kafka then uses the session timeout.
            rebalance_timeout_ms = session_timeout_ms = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(MemberRecord(member_id, group_instance_id, client_id, client_host,
                                    rebalance_timeout_ms, session_timeout_ms, subscription,
                                    assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation_id, protocol_name, leader_id,
                              current_state_timestamp_ms, tuple(members))


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord | None:
    """One record of ``__consumer_offsets``; None for a record type Ketch does not know."""
    if key is None:
        raise CoordinatorRecordError("record without a key")
    k = decode_key(key)
    if k is None:
        return None
    if value is None:
        return CoordinatorRecord(k, None)
    if isinstance(k, OffsetCommitKey):
        return CoordinatorRecord(k, _decode_offset_commit_value(value))
    return CoordinatorRecord(k, _decode_group_metadata_value(value))


def encode_batch(records: Iterable[CoordinatorRecord], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch holding ``records`` (offsets relative; the log assigns)."""
    recs = [Record(offset=i, timestamp=timestamp_ms, key=r.encode_key(), value=r.encode_value())
            for i, r in enumerate(records)]
    assert recs, "an append holds at least one record"
    return build_batch(recs)


# ------------------------------------------------------------------ replay

@dataclass(slots=True)
class CoordinatorImage:
    """The durable state of one ``__consumer_offsets`` partition: what its records say."""
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    # group id -> (topic, partition) -> committed offset
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = field(default_factory=dict)

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        if isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if record.value is None:
                group_offsets = self.offsets.get(key.group_id)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del self.offsets[key.group_id]
            else:
                assert isinstance(record.value, OffsetCommitValue)
                self.offsets.setdefault(key.group_id, {})[tp] = record.value
        else:
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                assert isinstance(record.value, GroupMetadataValue)
                self.groups[key.group_id] = record.value

    def group_ids(self) -> set[str]:
        return set(self.groups) | set(self.offsets)


class CoordinatorLoader:
    """Rebuilds a ``CoordinatorImage`` from a partition's batches, fed in offset order.

    The broker reads ``__consumer_offsets-<p>`` from its log start to its high watermark
    (only committed records count) and feeds the bytes to ``replay_batches``; then it hands
    ``image`` to ``GroupCoordinator.complete_load``. Control batches (transaction markers)
    are skipped; transactional offset commits are not supported by Ketch, so a
    transactional data batch is refused with CoordinatorRecordError rather than misread.
    """

    def __init__(self) -> None:
        self.image = CoordinatorImage()
        self.next_offset = 0          # Invariant: every record replayed had offset < this
        self.records_replayed = 0
        self.skipped_records = 0      # record types Ketch does not know (see module doc)

    def replay_batches(self, data: bytes | bytearray | memoryview) -> None:
        try:
            batches = decode_batches(data)
        except RecordError as e:
            raise CoordinatorRecordError(f"bad batch in {CONSUMER_OFFSETS_TOPIC}: {e}") from None
        for batch in batches:
            if batch.header.is_control:
                self.next_offset = max(self.next_offset, batch.header.last_offset + 1)
                continue
            if batch.header.is_transactional:
                raise CoordinatorRecordError("transactional offset commits are not supported")
            for record in batch.records:
                self.replay_record(record.offset, record.key, record.value)

    def replay_record(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        if offset < self.next_offset:
            raise CoordinatorRecordError(
                f"record at offset {offset} replayed after offset {self.next_offset - 1}")
        self.next_offset = offset + 1
        if key is None:
            raise CoordinatorRecordError(f"record at offset {offset} has no key")
        record = decode_record(bytes(key), None if value is None else bytes(value))
        if record is None:
            self.skipped_records += 1
            return
        self.image.replay(record)
        self.records_replayed += 1
