"""The KRaft metadata record frame: exact bytes, every type round-trips, garbage is typed."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import CorruptFrameError, messages
from metadata_log.records import (
    MetadataRecordType, decode_record, encode_record, record_class, record_type,
    record_version,
)
from tests.clients.protocol.strategies import message_strategy

ALL_TYPES = list(MetadataRecordType)


def test_record_type_ids_match_the_schemas() -> None:
    for rtype in ALL_TYPES:
        cls = record_class(rtype)
        assert cls.SCHEMA.api_key == rtype
        assert record_type(cls()) is rtype


def test_no_op_record_frame_bytes() -> None:
    # frame version 1, type 20, version 0, empty tagged-field section
    assert encode_record(messages.NoOpRecord()) == bytes([1, 20, 0, 0])
    assert decode_record(bytes([1, 20, 0, 0])) == messages.NoOpRecord()


def test_topic_record_frame_bytes() -> None:
    tid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    data = encode_record(messages.TopicRecord(name="ab", topic_id=tid))
    assert data == bytes([1, 2, 0]) + bytes([3]) + b"ab" + tid.bytes + bytes([0])


def test_each_type_is_written_at_its_highest_version() -> None:
    assert record_version(MetadataRecordType.PARTITION) == 2
    assert record_version(MetadataRecordType.REGISTER_BROKER) == 3
    assert record_version(MetadataRecordType.BROKER_REGISTRATION_CHANGE) == 2
    data = encode_record(messages.PartitionChangeRecord(partition_id=1))
    assert data[:3] == bytes([1, 5, 2])


def test_older_versions_still_decode() -> None:
    # PartitionRecord v0 (no Directories) as an older Kafka controller wrote it.
    from clients.protocol import encode_message
    r = messages.PartitionRecord(partition_id=3, topic_id=uuid.uuid4(), replicas=[1, 2],
                                 isr=[1], leader=1, leader_epoch=4, partition_epoch=5)
    data = bytes([1, 3, 0]) + encode_message(r, 0)
    assert decode_record(data) == r


@pytest.mark.parametrize("rtype", ALL_TYPES, ids=lambda t: t.name)
@given(data=st.data())
def test_every_record_type_round_trips(rtype: MetadataRecordType, data: st.DataObject) -> None:
    cls = record_class(rtype)
    record = data.draw(message_strategy(cls.__name__, record_version(rtype)))
    assert decode_record(encode_record(record)) == record


def test_a_frame_whose_varints_take_more_than_one_byte_decodes_the_same() -> None:
    # Ketch writes each of the frame's three varints in one byte and reads those directly;
    # a longer (still valid) encoding takes the general path to the same record.
    canonical = bytes([1, 20, 0, 0])
    assert decode_record(bytes([1, 0x94, 0x00, 0, 0])) == decode_record(canonical)
    assert decode_record(bytes([0x81, 0x00, 20, 0x80, 0x00, 0])) == decode_record(canonical)


@pytest.mark.parametrize("data, why", [
    (b"", "empty"),
    (bytes([0, 20, 0, 0]), "frame version 0"),
    (bytes([2, 20, 0, 0]), "frame version 2"),
    (bytes([1, 6, 0, 0]), "type 6 is not a metadata record type"),
    (bytes([1, 99, 0, 0]), "unknown type"),
    (bytes([1, 20, 1, 0]), "NoOpRecord has no version 1"),
    (bytes([1, 3, 3, 0]), "PartitionRecord has no version 3"),
    (bytes([1, 20, 0]), "missing tagged-field section"),
    (bytes([1, 20, 0, 0, 0]), "trailing byte"),
    (bytes([1, 2, 0, 50]) + b"ab", "string longer than the frame"),
    (bytes([1, 0x80, 0x80, 0x80, 0x80, 0x80]), "over-long varint"),
])
def test_malformed_frames_raise_corrupt_frame_error(data: bytes, why: str) -> None:
    with pytest.raises(CorruptFrameError):
        decode_record(data)


@given(st.binary(max_size=64))
def test_garbage_decodes_or_raises_corrupt_frame_error(data: bytes) -> None:
    try:
        record = decode_record(data)
    except CorruptFrameError:
        return
    assert decode_record(encode_record(record)) == record


@given(data=st.data())
def test_truncated_records_raise_corrupt_frame_error(data: st.DataObject) -> None:
    record = data.draw(message_strategy("PartitionRecord", 2))
    framed = encode_record(record)
    cut = data.draw(st.integers(0, len(framed) - 1))
    with pytest.raises(CorruptFrameError):
        decode_record(framed[:cut])
