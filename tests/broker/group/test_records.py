"""``__consumer_offsets`` records: Kafka's byte layouts, every version read, replay, garbage."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.group.records import (
    CoordinatorImage, CoordinatorLoader, CoordinatorRecord, CoordinatorRecordError,
    GroupMetadataKey, GroupMetadataValue, MemberRecord, OffsetCommitKey, OffsetCommitValue,
    decode_record, encode_batch, java_string_hash, partition_for_group,
)
from clients.records import (
    ControlRecordType, Record, assign_offsets, build_batch, build_control_batch,
    end_transaction_marker_value,
)


# ------------------------------------------------------------------ partition_for_group

@pytest.mark.parametrize("s,expected", [
    ("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112), ("hello", 99162322),
    ("Hello World", -862545276),                  # Java's published values
    ("polygenelubricants", -2147483648),          # hashes to Integer.MIN_VALUE
    ("\U0001F600", 0xD83D * 31 + 0xDE00),          # UTF-16 surrogate pair, not a code point
])
def test_java_string_hash_known_values(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected


def _slow_java_hash(s: str) -> int:
    units = [int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i:i + 2], "big")
             for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)]
    n = len(units)
    h = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


@given(st.text(max_size=40))
def test_java_string_hash_matches_the_definition(s: str) -> None:
    assert java_string_hash(s) == _slow_java_hash(s)


def test_partition_for_group_uses_kafka_utils_abs() -> None:
    assert partition_for_group("polygenelubricants") == 0     # abs(MIN_VALUE) is 0, not MIN
    assert partition_for_group("Hello World") == 862545276 % 50 == 26
    assert partition_for_group("hello") == 99162322 % 50 == 22
    assert partition_for_group("my-group", 10) == 1906497762 % 10
    assert partition_for_group("my-group", 1) == 0


# ------------------------------------------------------------------ byte layouts

def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_commit_key_and_value_bytes() -> None:
    r = CoordinatorRecord(OffsetCommitKey("g", "t", 3), OffsetCommitValue(5, 2, "m", 1000))
    assert r.encode_key() == b"\x00\x01" + _s("g") + _s("t") + b"\x00\x00\x00\x03"
    assert r.encode_value() == (b"\x00\x03" + struct.pack(">q", 5) + struct.pack(">i", 2)
                                + _s("m") + struct.pack(">q", 1000))
    expiring = CoordinatorRecord(OffsetCommitKey("g", "t", 3),
                                 OffsetCommitValue(5, -1, "m", 1000, 9000))
    assert expiring.encode_value() == (b"\x00\x01" + struct.pack(">q", 5) + _s("m")
                                       + struct.pack(">qq", 1000, 9000))
    assert CoordinatorRecord(OffsetCommitKey("g", "t", 3), None).encode_value() is None


def test_group_metadata_key_and_value_bytes() -> None:
    member = MemberRecord("m", None, "c", "h", 30000, 10000, b"S", b"A")
    static = MemberRecord("n", "i", "c", "h", 1, 2, b"", b"")
    r = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue(
        "consumer", 7, "range", "m", 123, (member, static)))
    assert r.encode_key() == b"\x00\x02" + _s("g")
    assert r.encode_value() == (
        b"\x00\x03" + _s("consumer") + struct.pack(">i", 7) + _s("range") + _s("m")
        + struct.pack(">q", 123) + struct.pack(">i", 2)
        + _s("m") + b"\xff\xff" + _s("c") + _s("h") + struct.pack(">ii", 30000, 10000)
        + b"\x00\x00\x00\x01S" + b"\x00\x00\x00\x01A"
        + _s("n") + _s("i") + _s("c") + _s("h") + struct.pack(">ii", 1, 2)
        + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
    empty = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("", 3, None, None, 5))
    assert empty.encode_value() == (b"\x00\x03" + _s("") + struct.pack(">i", 3) + b"\xff\xff"
                                    + b"\xff\xff" + struct.pack(">q", 5) + b"\x00\x00\x00\x00")


def test_older_and_flexible_versions_are_read() -> None:
    key = b"\x00\x00" + _s("g") + _s("t") + b"\x00\x00\x00\x01"      # key version 0
    v0 = b"\x00\x00" + struct.pack(">q", 9) + _s("x") + struct.pack(">q", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 9) + _s("x") + struct.pack(">q", 77)
    # v4 (flexible): compact string "x" (length+1), then an empty tagged-field section.
    v4 = (b"\x00\x04" + struct.pack(">q", 9) + struct.pack(">i", 4) + b"\x02x"
          + struct.pack(">q", 77) + b"\x00")
    assert decode_record(key, v0) == CoordinatorRecord(OffsetCommitKey("g", "t", 1),
                                                       OffsetCommitValue(9, -1, "x", 77))
    assert decode_record(key, v2).value == OffsetCommitValue(9, -1, "x", 77)
    assert decode_record(key, v4).value == OffsetCommitValue(9, 4, "x", 77)
    gkey = b"\x00\x02" + _s("g")
    g0 = (b"\x00\x00" + _s("consumer") + struct.pack(">i", 2) + _s("range") + _s("m")
          + struct.pack(">i", 1) + _s("m") + _s("c") + _s("h") + struct.pack(">i", 6000)
          + b"\x00\x00\x00\x01S" + b"\x00\x00\x00\x01A")
    assert decode_record(gkey, g0).value == GroupMetadataValue(
        "consumer", 2, "range", "m", -1, (MemberRecord("m", None, "c", "h", 6000, 6000, b"S", b"A"),))
    g4 = (b"\x00\x04" + b"\x09consumer" + struct.pack(">i", 2) + b"\x06range" + b"\x02m"
          + struct.pack(">q", 5) + b"\x02"                       # one member
          + b"\x02m" + b"\x00" + b"\x02c" + b"\x02h" + struct.pack(">ii", 1, 2)
          + b"\x02S" + b"\x02A" + b"\x00"                        # member tagged fields
          + b"\x01\x05\x02hi")                                    # one unknown tagged field
    assert decode_record(gkey, g4).value == GroupMetadataValue(
        "consumer", 2, "range", "m", 5, (MemberRecord("m", None, "c", "h", 1, 2, b"S", b"A"),))


def test_unknown_record_types_are_skipped_and_bad_versions_refused() -> None:
    assert decode_record(b"\x00\x09" + _s("g"), b"whatever") is None   # e.g. share groups
    with pytest.raises(CoordinatorRecordError):       # a KIP-848 type with a bad value
        decode_record(b"\x00\x03" + b"\x02g\x00", b"whatever")
    with pytest.raises(CoordinatorRecordError):
        decode_record(b"\xff\xff", None)
    with pytest.raises(CoordinatorRecordError):
        decode_record(b"\x00\x02" + _s("g"), b"\x00\x09")


# ------------------------------------------------------------------ round trips and garbage

names = st.text(max_size=12)
offset_values = st.builds(
    OffsetCommitValue, st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), names,
    st.integers(-1, 2**50), st.just(-1)) | st.builds(
    OffsetCommitValue, st.integers(0, 2**62), st.just(-1), names, st.integers(0, 2**50),
    st.integers(0, 2**50))
members = st.builds(MemberRecord, names, st.none() | names, names, names,
                    st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                    st.binary(max_size=20), st.binary(max_size=20))
group_values = st.builds(GroupMetadataValue, names, st.integers(0, 2**31 - 1),
                         st.none() | names, st.none() | names, st.integers(-1, 2**50),
                         st.lists(members, max_size=4).map(tuple))
records = (st.builds(CoordinatorRecord, st.builds(OffsetCommitKey, names, names,
                                                  st.integers(0, 2**31 - 1)),
                     st.none() | offset_values)
           | st.builds(CoordinatorRecord, st.builds(GroupMetadataKey, names),
                       st.none() | group_values))


@given(records)
def test_records_round_trip(record: CoordinatorRecord) -> None:
    assert decode_record(record.encode_key(), record.encode_value()) == record


@given(st.binary(max_size=60), st.none() | st.binary(max_size=80))
def test_garbage_gives_a_typed_error(key: bytes, value: bytes | None) -> None:
    try:
        decode_record(key, value)
    except CoordinatorRecordError:
        pass


@given(records, st.data())
def test_truncated_values_give_a_typed_error(record: CoordinatorRecord, data) -> None:
    value = record.encode_value()
    if value is None:
        return
    cut = data.draw(st.integers(0, len(value) - 1))
    try:
        decode_record(record.encode_key(), value[:cut])
    except CoordinatorRecordError:
        return
    # A cut can only pass if it removed nothing a reader needs: never for these layouts.
    raise AssertionError(f"{value[:cut]!r} decoded")


# ------------------------------------------------------------------ replay

def _log(*batches: bytes) -> bytes:
    out = bytearray(b"".join(batches))
    assign_offsets(out, 0)
    return bytes(out)


def test_loader_replays_in_offset_order_with_tombstones() -> None:
    k0, k1 = OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1)
    gm = GroupMetadataValue("consumer", 1, "range", "m", 9,
                            (MemberRecord("m", None, "c", "h", 1, 2, b"S", b"A"),))
    batch1 = encode_batch([CoordinatorRecord(k0, OffsetCommitValue(1)),
                           CoordinatorRecord(k1, OffsetCommitValue(2)),
                           CoordinatorRecord(GroupMetadataKey("g"), gm)], 1000)
    batch2 = encode_batch([CoordinatorRecord(k0, OffsetCommitValue(3)),
                           CoordinatorRecord(k1, None)], 2000)
    # A transaction marker between them (Ketch never writes one here, but a log may hold
    # one): skipped, and its offset counts.
    marker = build_control_batch(ControlRecordType.COMMIT, end_transaction_marker_value(0),
                                 timestamp_ms=3000, producer_id=1, producer_epoch=0,
                                 is_transactional=True)
    batch3 = encode_batch([CoordinatorRecord(GroupMetadataKey("other"),
                                             GroupMetadataValue("", 4, None, None, 5)),
                           CoordinatorRecord(GroupMetadataKey("gone"), None)], 4000)
    loader = CoordinatorLoader()
    loader.replay_batches(_log(batch1, batch2, marker, batch3))
    assert loader.image.offsets == {"g": {("t", 0): OffsetCommitValue(3)}}
    assert loader.image.groups == {"g": gm, "other": GroupMetadataValue("", 4, None, None, 5)}
    assert loader.records_replayed == 7 and loader.next_offset == 8
    with pytest.raises(CoordinatorRecordError, match="replayed after"):
        loader.replay_record(3, CoordinatorRecord(k0, None).encode_key(), None)


def test_loader_refuses_keyless_records_and_corrupt_batches() -> None:
    loader = CoordinatorLoader()
    with pytest.raises(CoordinatorRecordError):
        loader.replay_batches(_log(build_batch([Record(0, 0, None, b"x")])))
    with pytest.raises(CoordinatorRecordError):
        CoordinatorLoader().replay_batches(b"\x00" * 70)


def test_image_replay_drops_emptied_groups() -> None:
    image = CoordinatorImage()
    image.replay(CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1)))
    image.replay(CoordinatorRecord(OffsetCommitKey("g", "t", 0), None))
    image.replay(CoordinatorRecord(OffsetCommitKey("h", "t", 0), None))
    assert image.offsets == {} and image.group_ids() == set()
