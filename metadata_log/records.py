"""KRaft metadata records: their type ids and the frame they travel in.

Theory of operation
-------------------
Every change to cluster metadata is one record of a type from Kafka's
``metadata/*.json`` schemas (``TopicRecord``, ``PartitionChangeRecord``...). In memory a
record is the codec's message object (``clients.protocol.messages.TopicRecord`` etc.); on
disk and on the wire it is the value of a record in the metadata log, framed as KRaft
frames it (kafka-protocol/README.md, "KRaft metadata records"):

    frame_version   unsigned varint   always 1
    api_key         unsigned varint   MetadataRecordType
    version         unsigned varint   the record schema version
    body            flexible encoding of the record at that version

Ketch writes each type at the highest version its schema defines, so no field is ever
dropped on the way out; it reads every version the schemas define. Anything else
(a frame version other than 1, an unknown type, an unknown version, a truncated or
over-long body) raises the codec's one typed error, ``CorruptFrameError``.

Decoding is on the path of every committed batch, on every controller and broker: a
100,000-partition cluster replays 100,000 PartitionRecords on create and as many
PartitionChangeRecords on a fencing. The two partition records at the version Ketch writes
have a direct reader (``_read_partition``, ``_read_partition_change``) that builds the
same message object as the schema-driven codec, several times faster, and shares one
``uuid.UUID`` per topic id; any input it does not fully understand (a long varint, an
unknown tag, a truncation) goes to the codec, which decodes it or raises the typed error,
so both paths accept and refuse exactly the same bytes. Likewise a direct writer each
(the active controller encodes every record it decides), which writes the codec's bytes
and leaves anything unusual (unknown tagged fields, a value that does not fit) to the
codec. tests/metadata_log checks both directions against the codec.

Not here: what a record *means* (``delta.py``), or how records are batched in the log.
"""
from __future__ import annotations

import struct
import uuid
from enum import IntEnum
from typing import Any, Callable

from clients.protocol import CorruptFrameError, decode_message, encode_message, messages
from clients.protocol.types import read_uvarint, write_uvarint

__all__ = [
    "FRAME_VERSION", "MetadataRecordType", "decode_record", "encode_record", "record_class",
    "record_type", "record_version",
]

# The only frame version KRaft has defined (MetadataRecordSerde.DEFAULT_FRAME_VERSION).
FRAME_VERSION = 1


class MetadataRecordType(IntEnum):
    """Record type ids: the ``apiKey`` of each schema in kafka-protocol/metadata/."""
    REGISTER_BROKER = 0
    UNREGISTER_BROKER = 1
    TOPIC = 2
    PARTITION = 3
    CONFIG = 4
    PARTITION_CHANGE = 5
    FENCE_BROKER = 7
    UNFENCE_BROKER = 8
    REMOVE_TOPIC = 9
    DELEGATION_TOKEN = 10
    USER_SCRAM_CREDENTIAL = 11
    FEATURE_LEVEL = 12
    CLIENT_QUOTA = 14
    PRODUCER_IDS = 15
    BROKER_REGISTRATION_CHANGE = 17
    ACCESS_CONTROL_ENTRY = 18
    REMOVE_ACCESS_CONTROL_ENTRY = 19
    NO_OP = 20
    ZK_MIGRATION_STATE = 21
    REMOVE_USER_SCRAM_CREDENTIAL = 22
    BEGIN_TRANSACTION = 23
    END_TRANSACTION = 24
    ABORT_TRANSACTION = 25
    REMOVE_DELEGATION_TOKEN = 26
    REGISTER_CONTROLLER = 27


_SCHEMA_NAMES: dict[MetadataRecordType, str] = {
    MetadataRecordType.REGISTER_BROKER: "RegisterBrokerRecord",
    MetadataRecordType.UNREGISTER_BROKER: "UnregisterBrokerRecord",
    MetadataRecordType.TOPIC: "TopicRecord",
    MetadataRecordType.PARTITION: "PartitionRecord",
    MetadataRecordType.CONFIG: "ConfigRecord",
    MetadataRecordType.PARTITION_CHANGE: "PartitionChangeRecord",
    MetadataRecordType.FENCE_BROKER: "FenceBrokerRecord",
    MetadataRecordType.UNFENCE_BROKER: "UnfenceBrokerRecord",
    MetadataRecordType.REMOVE_TOPIC: "RemoveTopicRecord",
    MetadataRecordType.DELEGATION_TOKEN: "DelegationTokenRecord",
    MetadataRecordType.USER_SCRAM_CREDENTIAL: "UserScramCredentialRecord",
    MetadataRecordType.FEATURE_LEVEL: "FeatureLevelRecord",
    MetadataRecordType.CLIENT_QUOTA: "ClientQuotaRecord",
    MetadataRecordType.PRODUCER_IDS: "ProducerIdsRecord",
    MetadataRecordType.BROKER_REGISTRATION_CHANGE: "BrokerRegistrationChangeRecord",
    MetadataRecordType.ACCESS_CONTROL_ENTRY: "AccessControlEntryRecord",
    MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY: "RemoveAccessControlEntryRecord",
    MetadataRecordType.NO_OP: "NoOpRecord",
    MetadataRecordType.ZK_MIGRATION_STATE: "ZkMigrationStateRecord",
    MetadataRecordType.REMOVE_USER_SCRAM_CREDENTIAL: "RemoveUserScramCredentialRecord",
    MetadataRecordType.BEGIN_TRANSACTION: "BeginTransactionRecord",
    MetadataRecordType.END_TRANSACTION: "EndTransactionRecord",
    MetadataRecordType.ABORT_TRANSACTION: "AbortTransactionRecord",
    MetadataRecordType.REMOVE_DELEGATION_TOKEN: "RemoveDelegationTokenRecord",
    MetadataRecordType.REGISTER_CONTROLLER: "RegisterControllerRecord",
}

# Filled on first use: the codec builds message classes lazily.
_CLASS_BY_TYPE: dict[MetadataRecordType, type] = {}
_TYPE_BY_CLASS: dict[type, MetadataRecordType] = {}


def _load() -> None:
    for rtype, name in _SCHEMA_NAMES.items():
        cls = getattr(messages, name)
        # The enum and the schemas must agree; a mismatch is a bug in this table.
        assert cls.SCHEMA.kind == "metadata", name
        assert cls.SCHEMA.api_key == rtype, (name, cls.SCHEMA.api_key, rtype)
        _CLASS_BY_TYPE[rtype] = cls
        _TYPE_BY_CLASS[cls] = rtype


def record_class(rtype: MetadataRecordType) -> Any:
    if not _CLASS_BY_TYPE:
        _load()
    return _CLASS_BY_TYPE[rtype]


def record_type(record: Any) -> MetadataRecordType:
    """The type id of a record object; a non-record object is a bug (assert)."""
    if not _TYPE_BY_CLASS:
        _load()
    rtype = _TYPE_BY_CLASS.get(type(record))
    assert rtype is not None, f"not a metadata record: {type(record).__name__}"
    return rtype


def record_version(rtype: MetadataRecordType) -> int:
    """The version Ketch writes a record type at: the highest its schema defines."""
    return record_class(rtype).SCHEMA.max_version


def encode_record(record: Any) -> bytes:
    direct = _DIRECT_WRITERS.get(type(record))
    if direct is not None and not record.unknown_tagged_fields:
        try:
            return direct(record)
        except (struct.error, TypeError, ValueError, OverflowError, AttributeError):
            pass        # not a well-formed value: the codec says what is wrong with it
    rtype = record_type(record)
    version = record_version(rtype)
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, rtype)
    write_uvarint(out, version)
    out += encode_message(record, version)
    return bytes(out)


def decode_record(data: bytes) -> Any:
    """One framed record -> its message object; anything malformed -> CorruptFrameError."""
    if len(data) > 3 and data[0] == FRAME_VERSION:
        # One-byte api key and version (all of today's): straight to a direct reader.
        direct = _DIRECT_READERS.get((data[1], data[2]))
        if direct is not None:
            try:
                return direct(data, 3)
            except _NotDirect:
                pass        # the codec decides: it decodes what is valid, refuses the rest
    frame_version, pos = read_uvarint(data, 0)
    if frame_version != FRAME_VERSION:
        raise CorruptFrameError(f"unknown metadata record frame version {frame_version}")
    api_key, pos = read_uvarint(data, pos)
    try:
        rtype = MetadataRecordType(api_key)
    except ValueError:
        raise CorruptFrameError(f"unknown metadata record type {api_key}") from None
    version, pos = read_uvarint(data, pos)
    # decode_message refuses versions the schema does not define and trailing bytes.
    return decode_message(record_class(rtype), version, bytes(data[pos:]))


# ---------------------------------------------------------------- direct readers

class _NotDirect(Exception):
    """The direct reader does not handle this input; the codec will."""


_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")
_INT32S = [struct.Struct(">%di" % n) for n in range(16)]
_HEAD = struct.Struct(">i16s")                 # PartitionId, TopicId
_TRIPLE = struct.Struct(">iii")                # Leader, LeaderEpoch, PartitionEpoch
# Topic ids as the direct readers met them: one UUID object per topic, not per record.
_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_MAX = 1 << 18


def _uuid(raw: bytes) -> uuid.UUID:
    u = _UUIDS.get(raw)
    if u is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        u = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return u


def _int32s(data: bytes, pos: int, nullable: bool) -> tuple[Any, int]:
    """A compact array of int32 (COMPACT_ARRAY: length + 1 as an unsigned varint)."""
    n = data[pos] - 1           # IndexError past the end: _NotDirect (see _direct)
    if n < 0:
        if n == -1 and nullable:
            return None, pos + 1
        raise _NotDirect
    if n >= 15:                 # a long varint or a long array: rare, the codec's
        raise _NotDirect
    pos += 1
    end = pos + 4 * n
    if end > len(data):
        raise _NotDirect
    return list(_INT32S[n].unpack_from(data, pos)), end


def _uuids(data: bytes, pos: int, nullable: bool) -> tuple[Any, int]:
    n = data[pos] - 1
    if n < 0:
        if n == -1 and nullable:
            return None, pos + 1
        raise _NotDirect
    if n >= 15:
        raise _NotDirect
    pos += 1
    end = pos + 16 * n
    if end > len(data):
        raise _NotDirect
    return [uuid.UUID(bytes=data[p:p + 16]) for p in range(pos, end, 16)], end


def _tags(data: bytes, pos: int, known: frozenset[int]
          ) -> tuple[list[tuple[int, int, int]], int]:
    """The tagged-field section: (tag, value start, value end) of each, in order. Tags the
    caller does not know, out of order, or with long varints: _NotDirect."""
    count = data[pos]
    pos += 1
    if count >= 0x80:
        raise _NotDirect
    fields = []
    last = -1
    for _ in range(count):
        tag, size = data[pos], data[pos + 1]
        if tag >= 0x80 or size >= 0x80 or tag <= last or tag not in known:
            raise _NotDirect
        pos += 2
        end = pos + size
        if end > len(data):
            raise _NotDirect
        fields.append((tag, pos, end))
        last = tag
        pos = end
    return fields, pos


def _direct(read: Callable[[bytes, int], Any]) -> Callable[[bytes, int], Any]:
    def guarded(data: bytes, pos: int) -> Any:
        try:
            return read(bytes(data), pos)
        except (IndexError, struct.error):
            raise _NotDirect from None
    return guarded


_PARTITION_TAGS = frozenset((0, 1, 2))


@_direct
def _read_partition(data: bytes, pos: int) -> Any:
    """PartitionRecord v2 (every field but the tagged ones is required)."""
    partition_id, raw_topic_id = _HEAD.unpack_from(data, pos)
    replicas, pos = _int32s(data, pos + 20, False)
    isr, pos = _int32s(data, pos, False)
    removing, pos = _int32s(data, pos, False)
    adding, pos = _int32s(data, pos, False)
    leader, leader_epoch, partition_epoch = _TRIPLE.unpack_from(data, pos)
    directories, pos = _uuids(data, pos + 12, False)
    lrs, elr, last_known_elr = 0, None, None
    tags, pos = _tags(data, pos, _PARTITION_TAGS)
    for tag, start, end in tags:
        if tag == 0:
            if end - start != 1:
                raise _NotDirect
            lrs = _INT8.unpack_from(data, start)[0]
        elif tag == 1:
            elr, after = _int32s(data, start, True)
            if after != end:
                raise _NotDirect
        else:
            last_known_elr, after = _int32s(data, start, True)
            if after != end:
                raise _NotDirect
    if pos != len(data):
        raise _NotDirect
    return _PartitionRecord(
        partition_id=partition_id, topic_id=_uuid(raw_topic_id), replicas=replicas, isr=isr,
        removing_replicas=removing, adding_replicas=adding, leader=leader,
        leader_recovery_state=lrs, leader_epoch=leader_epoch,
        partition_epoch=partition_epoch, directories=directories,
        eligible_leader_replicas=elr, last_known_elr=last_known_elr)


# PartitionChangeRecord v2's tags: 0 Isr, 1 Leader, 2 Replicas, 3 RemovingReplicas,
# 4 AddingReplicas, 5 LeaderRecoveryState, 6 EligibleLeaderReplicas, 7 LastKnownElr,
# 8 Directories.
_CHANGE_TAGS = frozenset(range(9))
_CHANGE_ARRAYS = {0: "isr", 2: "replicas", 3: "removing_replicas", 4: "adding_replicas",
                  6: "eligible_leader_replicas", 7: "last_known_elr"}


@_direct
def _read_partition_change(data: bytes, pos: int) -> Any:
    """PartitionChangeRecord v2: the ids, then only tagged fields."""
    partition_id, raw_topic_id = _HEAD.unpack_from(data, pos)
    tags, pos = _tags(data, pos + 20, _CHANGE_TAGS)
    if pos != len(data):
        raise _NotDirect
    fields: dict[str, Any] = {}
    for tag, start, end in tags:
        if tag == 1:
            if end - start != 4:
                raise _NotDirect
            fields["leader"] = _INT32.unpack_from(data, start)[0]
        elif tag == 5:
            if end - start != 1:
                raise _NotDirect
            fields["leader_recovery_state"] = _INT8.unpack_from(data, start)[0]
        elif tag == 8:
            fields["directories"], after = _uuids(data, start, True)
            if after != end:
                raise _NotDirect
        else:
            fields[_CHANGE_ARRAYS[tag]], after = _int32s(data, start, True)
            if after != end:
                raise _NotDirect
    return _PartitionChangeRecord(partition_id=partition_id, topic_id=_uuid(raw_topic_id),
                                  **fields)


_PartitionRecord = messages.PartitionRecord
_PartitionChangeRecord = messages.PartitionChangeRecord
# (api key, version) -> its direct reader; only the versions Ketch writes.
_DIRECT_READERS: dict[tuple[int, int], Callable[[bytes, int], Any]] = {}
if _PartitionRecord.SCHEMA.max_version == 2:
    _DIRECT_READERS[MetadataRecordType.PARTITION, 2] = _read_partition
if _PartitionChangeRecord.SCHEMA.max_version == 2:
    _DIRECT_READERS[MetadataRecordType.PARTITION_CHANGE, 2] = _read_partition_change



# ---------------------------------------------------------------- direct writers

def _uvarint(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


_SMALL = [bytes((n,)) for n in range(128)]


def _int32s_bytes(v: Any) -> bytes:
    """A compact array of int32; None: the null array."""
    if v is None:
        return b"\x00"
    n = len(v)
    head = _SMALL[n + 1] if n < 127 else _uvarint(n + 1)
    return head + (_INT32S[n] if n < 16 else struct.Struct(">%di" % n)).pack(*v)


def _uuids_bytes(v: Any) -> bytes:
    if v is None:
        return b"\x00"
    n = len(v)
    head = _SMALL[n + 1] if n < 127 else _uvarint(n + 1)
    return head + b"".join(u.bytes for u in v)


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    """The tagged-field section; ``fields`` in tag order."""
    parts = [_SMALL[len(fields)]]
    for tag, data in fields:
        size = len(data)
        parts.append(_SMALL[tag])
        parts.append(_SMALL[size] if size < 128 else _uvarint(size))
        parts.append(data)
    return b"".join(parts)


_PARTITION_FRAME = bytes((FRAME_VERSION, MetadataRecordType.PARTITION, 2))
_CHANGE_FRAME = bytes((FRAME_VERSION, MetadataRecordType.PARTITION_CHANGE, 2))


def _write_partition(r: Any) -> bytes:
    tagged = []
    if r.leader_recovery_state != 0:
        tagged.append((0, _INT8.pack(r.leader_recovery_state)))
    if r.eligible_leader_replicas is not None:
        tagged.append((1, _int32s_bytes(r.eligible_leader_replicas)))
    if r.last_known_elr is not None:
        tagged.append((2, _int32s_bytes(r.last_known_elr)))
    if r.replicas is None or r.isr is None or r.removing_replicas is None \
            or r.adding_replicas is None or r.directories is None:
        raise ValueError("null array in a non-nullable field")
    return b"".join((
        _PARTITION_FRAME, _HEAD.pack(r.partition_id, r.topic_id.bytes),
        _int32s_bytes(r.replicas), _int32s_bytes(r.isr), _int32s_bytes(r.removing_replicas),
        _int32s_bytes(r.adding_replicas),
        _TRIPLE.pack(r.leader, r.leader_epoch, r.partition_epoch),
        _uuids_bytes(r.directories), _tagged(tagged)))


def _write_partition_change(r: Any) -> bytes:
    tagged = []
    if r.isr is not None:
        tagged.append((0, _int32s_bytes(r.isr)))
    if r.leader != -2:
        tagged.append((1, _INT32.pack(r.leader)))
    if r.replicas is not None:
        tagged.append((2, _int32s_bytes(r.replicas)))
    if r.removing_replicas is not None:
        tagged.append((3, _int32s_bytes(r.removing_replicas)))
    if r.adding_replicas is not None:
        tagged.append((4, _int32s_bytes(r.adding_replicas)))
    if r.leader_recovery_state != -1:
        tagged.append((5, _INT8.pack(r.leader_recovery_state)))
    if r.eligible_leader_replicas is not None:
        tagged.append((6, _int32s_bytes(r.eligible_leader_replicas)))
    if r.last_known_elr is not None:
        tagged.append((7, _int32s_bytes(r.last_known_elr)))
    if r.directories is not None:
        tagged.append((8, _uuids_bytes(r.directories)))
    return b"".join((_CHANGE_FRAME, _HEAD.pack(r.partition_id, r.topic_id.bytes),
                     _tagged(tagged)))


# Record class -> its direct writer, for the same versions as the direct readers.
_DIRECT_WRITERS: dict[type, Callable[[Any], bytes]] = {}
if (MetadataRecordType.PARTITION, 2) in _DIRECT_READERS:
    _DIRECT_WRITERS[_PartitionRecord] = _write_partition
if (MetadataRecordType.PARTITION_CHANGE, 2) in _DIRECT_READERS:
    _DIRECT_WRITERS[_PartitionChangeRecord] = _write_partition_change
