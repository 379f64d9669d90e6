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

Key versions 3-8 are KIP-848 consumer groups (``ConsumerGroupKey``; the value is the
generated class of Kafka's schema itself, version 0): 3 the group epoch, 4 the subscribed
topics' metadata, 5 a member's metadata, 6 the target assignment's epoch, 7 a member's
target assignment, 8 a member's current assignment and epoch. Key versions above 8 (share
groups) Ketch never writes, and the loader skips them (counted in ``skipped_records``)
rather than refusing a partition it could otherwise load.

The layouts are not written out here: they are Kafka's own JSON schemas
(../shared/kafka-protocol/coordinators/), turned by tools/gen_protocol.py into data schemas
of the one generated codec (``clients.protocol.messages.OffsetCommitKey`` ...). This module
picks the version, maps Kafka's field names to Ketch's (``group`` -> ``group_id``,
``commit_timestamp`` -> ``commit_timestamp_ms``) and prefixes the int16 version. Version 4
of the values is KIP-482 "flexible" (unsigned-varint lengths plus tagged fields), which
Kafka 3.x does not write but may, so it is read too. Decoding checks every length against
the bytes that remain and fails with ``CoordinatorRecordError``, never IndexError.

A ``CoordinatorImage`` is what replaying the records of one partition in offset order
yields: the last group metadata value per group and the committed offset per (group,
topic, partition), plus the offsets of transactional batches (TxnOffsetCommit) pending per
producer id until that producer's COMMIT or ABORT control record. The live coordinator replays its own acknowledged appends into the same
structure, and ``CoordinatorLoader`` rebuilds it from the partition's batches when this
broker becomes the partition's leader, so failover and the live path share one code path.

``partition_for_group`` is Kafka's ``abs(groupId.hashCode()) % partitions`` with Java's
``String.hashCode`` (UTF-16 code units, int32 overflow) and ``Utils.abs`` (MIN_VALUE -> 0).
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, TypeVar, Union

from clients.protocol import CorruptFrameError, decode_message, encode_message
from clients.protocol import messages as schemas
from clients.records import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlRecord, ControlRecordType, Record, build_batch,
    decode_batches,
)

from clients.records.errors import RecordError

__all__ = [
    "CONSUMER_OFFSETS_TOPIC", "ConsumerGroupKey", "ConsumerGroupRecordType", "CoordinatorImage", "CoordinatorLoader", "CoordinatorRecord",
    "CoordinatorRecordError", "GroupMetadataKey", "GroupMetadataValue", "MemberRecord",
    "OffsetCommitKey", "OffsetCommitValue", "decode_record", "encode_batch",
    "java_string_hash", "partition_for_group",
]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

# Key versions are record types (Kafka's GroupMetadataManager; coordinator-key apiKey):
# each key schema's validVersions are the record types it stands for.
_OFFSET_COMMIT_KEY_VERSIONS = range(schemas.OffsetCommitKey.SCHEMA.min_version,
                                    schemas.OffsetCommitKey.SCHEMA.max_version + 1)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3
assert OFFSET_COMMIT_KEY_VERSION in _OFFSET_COMMIT_KEY_VERSIONS
assert schemas.GroupMetadataKey.SCHEMA.min_version == GROUP_METADATA_KEY_VERSION \
    == schemas.GroupMetadataKey.SCHEMA.max_version

_VERSION = struct.Struct(">h")

# The generated classes of Kafka's schemas, bound once (messages builds them on first use).
_OffsetCommitKeyData = schemas.OffsetCommitKey
_OffsetCommitValueData = schemas.OffsetCommitValue
_GroupMetadataKeyData = schemas.GroupMetadataKey
_GroupMetadataValueData = schemas.GroupMetadataValue
_MemberMetadataData = schemas.GroupMetadataValue.MemberMetadata


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


class ConsumerGroupRecordType(enum.IntEnum):
    """KIP-848's record types: the key version of each (coordinator-key apiKey)."""
    GROUP_METADATA = 3                # ConsumerGroupMetadata: the group epoch
    PARTITION_METADATA = 4            # the subscribed topics' ids and partition counts
    MEMBER_METADATA = 5               # a member's subscription, client, rack, timeouts
    TARGET_ASSIGNMENT_METADATA = 6    # the epoch of the target assignment
    TARGET_ASSIGNMENT_MEMBER = 7      # one member's target partitions
    CURRENT_MEMBER_ASSIGNMENT = 8     # one member's epoch, state and current partitions


_T = ConsumerGroupRecordType
# record type -> (key schema, value schema); values are written as version 0.
CONSUMER_GROUP_SCHEMAS: dict[int, tuple[Any, Any]] = {
    _T.GROUP_METADATA: (schemas.ConsumerGroupMetadataKey, schemas.ConsumerGroupMetadataValue),
    _T.PARTITION_METADATA: (schemas.ConsumerGroupPartitionMetadataKey,
                            schemas.ConsumerGroupPartitionMetadataValue),
    _T.MEMBER_METADATA: (schemas.ConsumerGroupMemberMetadataKey,
                         schemas.ConsumerGroupMemberMetadataValue),
    _T.TARGET_ASSIGNMENT_METADATA: (schemas.ConsumerGroupTargetAssignmentMetadataKey,
                                    schemas.ConsumerGroupTargetAssignmentMetadataValue),
    _T.TARGET_ASSIGNMENT_MEMBER: (schemas.ConsumerGroupTargetAssignmentMemberKey,
                                  schemas.ConsumerGroupTargetAssignmentMemberValue),
    _T.CURRENT_MEMBER_ASSIGNMENT: (schemas.ConsumerGroupCurrentMemberAssignmentKey,
                                   schemas.ConsumerGroupCurrentMemberAssignmentValue),
}
_MEMBER_RECORD_TYPES = {_T.MEMBER_METADATA, _T.TARGET_ASSIGNMENT_MEMBER,
                        _T.CURRENT_MEMBER_ASSIGNMENT}
for _t, (_key, _value) in CONSUMER_GROUP_SCHEMAS.items():
    assert _key.SCHEMA.min_version == _t == _key.SCHEMA.max_version


@dataclass(frozen=True, slots=True, order=True)
class ConsumerGroupKey:
    """The key of a KIP-848 consumer group record; ``member_id`` for member records only."""
    group_id: str
    record_type: ConsumerGroupRecordType
    member_id: str = ""


RecordKey = Union[OffsetCommitKey, GroupMetadataKey, ConsumerGroupKey]
RecordValue = Union[OffsetCommitValue, GroupMetadataValue, Any, None]


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    key: RecordKey
    value: RecordValue   # None: tombstone

    def __post_init__(self) -> None:
        if isinstance(self.key, OffsetCommitKey):
            assert self.value is None or isinstance(self.value, OffsetCommitValue)
        elif isinstance(self.key, ConsumerGroupKey):
            assert self.value is None or isinstance(
                self.value, CONSUMER_GROUP_SCHEMAS[self.key.record_type][1])
        else:
            assert isinstance(self.key, GroupMetadataKey)
            assert self.value is None or isinstance(self.value, GroupMetadataValue)

    def encode_key(self) -> bytes:
        k = self.key
        if isinstance(k, OffsetCommitKey):
            return _encode(OFFSET_COMMIT_KEY_VERSION, _OffsetCommitKeyData(
                group=k.group_id, topic=k.topic, partition=k.partition))
        if isinstance(k, ConsumerGroupKey):
            key_schema = CONSUMER_GROUP_SCHEMAS[k.record_type][0]
            if k.record_type in _MEMBER_RECORD_TYPES:
                return _encode(k.record_type, key_schema(group_id=k.group_id, member_id=k.member_id))
            return _encode(k.record_type, key_schema(group_id=k.group_id))
        return _encode(GROUP_METADATA_KEY_VERSION, _GroupMetadataKeyData(group=k.group_id))

    def encode_value(self) -> bytes | None:
        v = self.value
        if v is None:
            return None
        if isinstance(self.key, ConsumerGroupKey):
            return _encode(0, v)
        if isinstance(v, OffsetCommitValue):
            # Version 1 is the only one with an expire time; version 3 adds the leader epoch.
            version = (OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE
                       if v.expire_timestamp_ms != NO_TIMESTAMP else OFFSET_COMMIT_VALUE_VERSION)
            return _encode(version, _OffsetCommitValueData(
                offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
                commit_timestamp=v.commit_timestamp_ms, expire_timestamp=v.expire_timestamp_ms))
        return _encode(GROUP_METADATA_VALUE_VERSION, _GroupMetadataValueData(
            protocol_type=v.protocol_type, generation=v.generation_id, protocol=v.protocol_name,
            leader=v.leader_id, current_state_timestamp=v.current_state_timestamp_ms,
            members=[_MemberMetadataData(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.subscription, assignment=m.assignment)
                for m in v.members]))


def _encode(version: int, body: object) -> bytes:
    """The record layout: the int16 version (for a key, the record type), then the body."""
    return _VERSION.pack(version) + encode_message(body, version)


# ------------------------------------------------------------------ decoding

_Data = TypeVar("_Data")  # one of the generated classes above


def _decode(cls: type[_Data], data: bytes) -> tuple[int, _Data]:
    """The version prefix and the body decoded as schema ``cls`` at that version.

    Trailing bytes after the body are tolerated, as Kafka does (a newer writer may append
    ignorable fields). The version must be one the schema has."""
    if len(data) < 2:
        raise CoordinatorRecordError(f"truncated {cls.__name__}: {len(data)} bytes")
    version = _VERSION.unpack_from(data)[0]
    spec = cls.SCHEMA  # type: ignore[attr-defined]
    if not spec.min_version <= version <= spec.max_version:
        raise CoordinatorRecordError(f"unknown {cls.__name__} version {version}")
    try:
        return version, decode_message(cls, version, data[2:], exact=False)
    except CorruptFrameError as e:
        raise CoordinatorRecordError(f"bad {cls.__name__} v{version}: {e}") from None


def decode_key(data: bytes) -> RecordKey | None:
    """The key, or None for a record type Ketch does not know (key version >= 3)."""
    if len(data) < 2:
        raise CoordinatorRecordError("truncated coordinator record key")
    version = _VERSION.unpack_from(data)[0]
    if version in _OFFSET_COMMIT_KEY_VERSIONS:
        k = _decode(_OffsetCommitKeyData, data)[1]
        return OffsetCommitKey(k.group, k.topic, k.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(_decode(_GroupMetadataKeyData, data)[1].group)
    if version in CONSUMER_GROUP_SCHEMAS:
        k = _decode(CONSUMER_GROUP_SCHEMAS[version][0], data)[1]
        return ConsumerGroupKey(k.group_id, ConsumerGroupRecordType(version),
                                getattr(k, "member_id", ""))
    if version > GROUP_METADATA_KEY_VERSION:
        return None
    raise CoordinatorRecordError(f"unknown key version {version}")


def _decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    # Fields a version lacks keep the schema's defaults: leader_epoch -1 before version 3,
    # expire_timestamp -1 except in version 1.
    v = _decode(_OffsetCommitValueData, data)[1]
    return OffsetCommitValue(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp)


def _decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    version, v = _decode(_GroupMetadataValueData, data)
    # Version 0 has no rebalance timeout; Kafka then uses the session timeout. Versions 0-1
    # have no current_state_timestamp (the schema default, -1 = NO_TIMESTAMP).
    return GroupMetadataValue(
        v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp,
        tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                           m.session_timeout if version == 0 else m.rebalance_timeout,
                           m.session_timeout, m.subscription, m.assignment)
              for m in v.members))


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
    if isinstance(k, ConsumerGroupKey):
        return CoordinatorRecord(k, _decode(CONSUMER_GROUP_SCHEMAS[k.record_type][1], value)[1])
    return CoordinatorRecord(k, _decode_group_metadata_value(value))


def encode_batch(records: Iterable[CoordinatorRecord], timestamp_ms: int,
                 producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """One uncompressed v2 batch holding ``records`` (offsets relative; the log assigns);
    transactional, with the producer's id and epoch and base sequence 0, for a
    TxnOffsetCommit, as Kafka's GroupMetadataManager.storeOffsets builds it (the log takes
    the coordinator's batches without checking sequences: Kafka's AppendOrigin.COORDINATOR)."""
    recs = [Record(offset=i, timestamp=timestamp_ms, key=r.encode_key(), value=r.encode_value())
            for i, r in enumerate(records)]
    assert recs, "an append holds at least one record"
    if producer_id == NO_PRODUCER_ID:
        return build_batch(recs)
    return build_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=0, is_transactional=True)


# ------------------------------------------------------------------ replay

@dataclass(slots=True)
class CoordinatorImage:
    """The durable state of one ``__consumer_offsets`` partition: what its records say."""
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    # group id -> (topic, partition) -> committed offset
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = field(default_factory=dict)
    # KIP-848 groups: group id -> (record type, member id) -> the latest value, in the order
    # first written (a member's records after the group's epoch, as Kafka writes them).
    consumer_groups: dict[str, dict[tuple[int, str], Any]] = field(default_factory=dict)
    # Transactional offset commits awaiting their producer's marker: producer id -> group
    # id -> (topic, partition) -> (value, replay position). Invisible to OffsetFetch.
    pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], tuple[OffsetCommitValue, int]]]] \
        = field(default_factory=dict)
    # The replay position of each committed offset: a COMMIT marker keeps, per partition,
    # the offset whose record came later in the log (Kafka compares record offsets; the
    # live coordinator and the loader replay the same records in the same order, so a
    # replay counter orders them alike without knowing log offsets).
    committed_positions: dict[tuple[str, str, int], int] = field(default_factory=dict)
    replayed: int = 0

    def replay(self, record: CoordinatorRecord, producer_id: int = NO_PRODUCER_ID) -> None:
        """Replay one record; ``producer_id`` is the batch's when it is transactional."""
        self.replayed += 1
        key = record.key
        if producer_id != NO_PRODUCER_ID:
            # Kafka writes only offset commits transactionally (TxnOffsetCommit).
            if not isinstance(key, OffsetCommitKey) or record.value is None:
                raise CoordinatorRecordError(f"unexpected transactional record {key}")
            assert isinstance(record.value, OffsetCommitValue)
            self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(
                key.group_id, {})[(key.topic, key.partition)] = (record.value, self.replayed)
            return
        if isinstance(key, ConsumerGroupKey):
            values = self.consumer_groups.setdefault(key.group_id, {})
            if record.value is None:
                values.pop((key.record_type, key.member_id), None)
                if not values:
                    del self.consumer_groups[key.group_id]
            else:
                values[(key.record_type, key.member_id)] = record.value
        elif isinstance(key, OffsetCommitKey):
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
            self.committed_positions[(key.group_id, key.topic, key.partition)] = self.replayed
        else:
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                assert isinstance(record.value, GroupMetadataValue)
                self.groups[key.group_id] = record.value

    def replay_end_txn(self, producer_id: int, committed: bool) -> set[str]:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id`` on this partition:
        its pending offsets become committed, unless a later record already committed the
        same partition, or are dropped. Returns the groups whose offsets it committed."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not committed:
            return set()
        for group_id, offsets in pending.items():
            group_offsets = self.offsets.setdefault(group_id, {})
            for (topic, partition), (value, position) in offsets.items():
                key = (group_id, topic, partition)
                if (topic, partition) not in group_offsets \
                        or self.committed_positions.get(key, 0) < position:
                    group_offsets[(topic, partition)] = value
                    self.committed_positions[key] = position
        return set(pending)

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in groups.get(group_id, ())
                   for groups in self.pending_txn_offsets.values())

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return {tp for groups in self.pending_txn_offsets.values()
                for tp in groups.get(group_id, ())}

    def group_ids(self) -> set[str]:
        return (set(self.groups) | set(self.offsets) | set(self.consumer_groups)
                | {g for groups in self.pending_txn_offsets.values() for g in groups})

    def consumer_group_records(self, group_id: str) -> list[CoordinatorRecord]:
        """A KIP-848 group's live records, to rebuild the group by replaying them."""
        return [CoordinatorRecord(ConsumerGroupKey(group_id, ConsumerGroupRecordType(t), m), v)
                for (t, m), v in self.consumer_groups.get(group_id, {}).items()]


class CoordinatorLoader:
    """Rebuilds a ``CoordinatorImage`` from a partition's batches, fed in offset order.

    The broker reads ``__consumer_offsets-<p>`` from its log start to its high watermark
    (only committed records count) and feeds the bytes to ``replay_batches``; then it hands
    ``image`` to ``GroupCoordinator.complete_load``. A transactional batch holds a
    producer's TxnOffsetCommit: its offsets stay pending until that producer's COMMIT
    marker (a control batch) commits them or its ABORT marker drops them, as the live
    coordinator does when the marker is appended; a transaction still open at the end of
    the log stays pending in the image.
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
            header = batch.header
            if header.is_control:
                self.next_offset = max(self.next_offset, header.last_offset + 1)
                for record in batch.records:
                    if isinstance(record, ControlRecord) and record.control_type in (
                            ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        self.image.replay_end_txn(
                            header.producer_id, record.control_type is ControlRecordType.COMMIT)
                continue
            producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            for record in batch.records:
                self.replay_record(record.offset, record.key, record.value, producer_id)

    def replay_record(self, offset: int, key: bytes | None, value: bytes | None,
                      producer_id: int = NO_PRODUCER_ID) -> None:
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
        self.image.replay(record, producer_id)
        self.records_replayed += 1
