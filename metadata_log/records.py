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

Not here: what a record *means* (``delta.py``), or how records are batched in the log.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

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
    if len(data) >= 3 and data[0] < 0x80 and data[1] < 0x80 and data[2] < 0x80:
        # The frame's three varints are one byte each for every type and version there
        # is: read directly (a broker's restart decodes every record of the metadata log).
        frame_version, api_key, version, pos = data[0], data[1], data[2], 3
    else:
        frame_version, pos = read_uvarint(data, 0)
        api_key, pos = read_uvarint(data, pos)
        version, pos = read_uvarint(data, pos)
    if frame_version != FRAME_VERSION:
        raise CorruptFrameError(f"unknown metadata record frame version {frame_version}")
    if not _CLASS_BY_TYPE:
        _load()
    cls = _CLASS_BY_TYPE.get(api_key)       # type: ignore[call-overload]
    if cls is None:
        raise CorruptFrameError(f"unknown metadata record type {api_key}")
    # decode_message refuses versions the schema does not define and trailing bytes.
    return decode_message(cls, version, data, pos=pos)
