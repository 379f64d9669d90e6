"""``__consumer_offsets`` records through Kafka's coordinator schemas: the versions
test_records.py does not spell out, Kafka's newer record types, and tolerated tails."""
from __future__ import annotations

import struct

import pytest

from broker.group.records import (
    CoordinatorRecord, CoordinatorRecordError, GroupMetadataKey, GroupMetadataValue,
    MemberRecord, OffsetCommitKey, OffsetCommitValue, decode_record,
)
from clients.protocol import _codec, encode_message, messages


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack(">h", len(b)) + b


def _b(x: bytes) -> bytes:
    return struct.pack(">i", len(x)) + x


OFFSET_KEY = b"\x00\x01" + _s("g") + _s("t") + b"\x00\x00\x00\x02"
GROUP_KEY = b"\x00\x02" + _s("g")


def test_offset_commit_value_v1_and_v3_are_read() -> None:
    v1 = b"\x00\x01" + struct.pack(">q", 9) + _s("x") + struct.pack(">qq", 77, 99)
    v3 = b"\x00\x03" + struct.pack(">qi", 9, 4) + _s("x") + struct.pack(">q", 77)
    assert decode_record(OFFSET_KEY, v1) == CoordinatorRecord(
        OffsetCommitKey("g", "t", 2), OffsetCommitValue(9, -1, "x", 77, 99))
    assert decode_record(OFFSET_KEY, v3).value == OffsetCommitValue(9, 4, "x", 77)


def _member_v1_v2(member_id: str) -> bytes:
    # versions 1-2: no group instance id; rebalance then session timeout
    return (_s(member_id) + _s("c") + _s("h") + struct.pack(">ii", 300, 45)
            + _b(b"S") + _b(b"A"))


@pytest.mark.parametrize("version", [1, 2])
def test_group_metadata_value_v1_and_v2_are_read(version: int) -> None:
    body = (_s("consumer") + struct.pack(">i", 6) + b"\xff\xff" + _s("m")   # null protocol
            + (struct.pack(">q", 1234) if version == 2 else b"")            # v2+: timestamp
            + struct.pack(">i", 2) + _member_v1_v2("m") + _member_v1_v2("n"))
    value = decode_record(GROUP_KEY, struct.pack(">h", version) + body).value
    members = tuple(MemberRecord(m, None, "c", "h", 300, 45, b"S", b"A") for m in ("m", "n"))
    assert value == GroupMetadataValue("consumer", 6, None, "m",
                                       1234 if version == 2 else -1, members)


def test_trailing_bytes_after_a_known_layout_are_tolerated() -> None:
    # As Kafka does: a newer writer may append fields an older reader ignores.
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 2), OffsetCommitValue(5, 1, "", 7))
    assert decode_record(record.encode_key() + b"\x01\x02",
                         record.encode_value() + b"\xff" * 3) == record
    group = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("", 1, None, None, 2))
    assert decode_record(group.encode_key() + b"\x00", group.encode_value() + b"\x00") == group


def _newer_record_types() -> list[tuple[str, int]]:
    """Kafka's other __consumer_offsets record types (KIP-848 consumer groups, KIP-932
    share groups), each a coordinator-key schema whose version is its record type."""
    found = []
    for name in _codec.schema_names():
        spec = _codec.spec_for(name)
        if spec.kind == "data" and name.endswith("Key") and name.startswith(
                ("ConsumerGroup", "ShareGroup")):
            assert spec.min_version == spec.max_version, name
            found.append((name, spec.min_version))
    return found


def test_kafka_newer_record_types_are_skipped_not_refused() -> None:
    newer = _newer_record_types()
    assert sorted(v for _, v in newer) == list(range(3, 16))   # Kafka 4.0's types 3..15
    # 3..8 are KIP-848 consumer groups, which Ketch reads; the rest (share groups) it skips.
    for name, version in newer:
        if version <= 8:
            key = struct.pack(">h", version) + encode_message(getattr(messages, name)(), version)
            assert decode_record(key, None) is not None, name
            continue
        key = struct.pack(">h", version) + encode_message(getattr(messages, name)(), version)
        assert decode_record(key, b"\x00\x00anything") is None, name
        assert decode_record(key, None) is None, name


@pytest.mark.parametrize("key,value,match", [
    (b"\xff\xfe" + _s("g"), None, "unknown key version -2"),
    (b"\x00", None, "truncated"),
    (OFFSET_KEY, b"\x00\x05" + b"\x00" * 30, "unknown OffsetCommitValue version 5"),
    (GROUP_KEY, b"\x00\x03" + _s("consumer"), "bad GroupMetadataValue v3"),
    (b"\x00\x01" + _s("g") + b"\x00\x05t", None, "bad OffsetCommitKey v1"),
])
def test_bad_layouts_name_the_schema_and_version(key: bytes, value: bytes | None,
                                                 match: str) -> None:
    with pytest.raises(CoordinatorRecordError, match=match):
        decode_record(key, value)
