"""Record batches v2: round trips, the batch-level fast path, in-place rewrites, control
records, and bad input that may only ever raise a RecordError subclass."""
from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from clients.protocol.errors import ErrorCode
from clients.records import (
    BATCH_HEADER_SIZE,
    NO_PRODUCER_ID,
    CompressionType,
    ControlRecord,
    ControlRecordType,
    CorruptRecordError,
    EndTransactionMarker,
    InvalidRecordError,
    Record,
    RecordBatchBuilder,
    RecordError,
    RecordTooLargeError,
    TimestampType,
    UnsupportedCompressionTypeError,
    UnsupportedMagicError,
    assign_base_offset,
    assign_offsets,
    build_batch,
    build_control_batch,
    compress,
    control_record_key,
    decode_batch,
    decode_batches,
    decode_end_transaction_marker,
    end_transaction_marker_value,
    iter_batches,
    keyless_records,
    read_batch_header,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)
from clients.records.varint import (
    read_varint,
    read_varlong,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)
from tests.clients.records.records_strategies import codecs, record_lists

SAMPLE = [
    Record(offset=0, timestamp=1_700_000_000_000, key=b"k0", value=b"v0", headers=(("h", b"1"),)),
    Record(offset=1, timestamp=1_700_000_000_005, key=None, value=b"", headers=(("n", None),)),
    Record(offset=2, timestamp=1_699_999_999_990, key=b"", value=None),
]


def _fix_crc(batch: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", batch, pos + 8)
    crc = crc32c.crc32c(memoryview(batch)[pos + 21 : pos + 12 + length])
    struct.pack_into(">I", batch, pos + 17, crc)


# -- round trips ---------------------------------------------------------------------------


@given(
    records=record_lists(base_offset=0),
    base_offset=st.integers(min_value=0, max_value=1 << 40),
    codec=codecs,
    transactional=st.booleans(),
    producer=st.tuples(
        st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 15) - 1), st.integers(0, (1 << 31) - 1)
    ),
    leader_epoch=st.integers(-1, (1 << 31) - 1),
)
def test_round_trip_every_codec_and_bit(records, base_offset, codec, transactional, producer, leader_epoch):
    records = [
        Record(r.offset + base_offset, r.timestamp, r.key, r.value, r.headers) for r in records
    ]
    producer_id, producer_epoch, base_sequence = producer
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    (header,) = validate_batches(batch)
    assert header == read_batch_header(batch)
    assert header.size_in_bytes == len(batch)
    assert header.base_offset == base_offset
    assert header.partition_leader_epoch == leader_epoch
    assert header.compression == codec
    assert header.is_transactional == transactional
    assert not header.is_control
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.records_count == len(records)
    assert header.last_offset == records[-1].offset
    assert header.next_offset == records[-1].offset + 1
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    decoded = decode_batch(batch)
    assert decoded.header == header
    assert list(decoded.records) == records


@given(records=record_lists(), codec=codecs, append_time=st.integers(0, 1 << 45))
def test_log_append_time_batch_gives_every_record_the_append_time(records, codec, append_time):
    batch = build_batch(
        records,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time_ms=append_time,
    )
    decoded = decode_batch(batch)
    assert decoded.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert decoded.header.max_timestamp == append_time
    assert [r.timestamp for r in decoded.records] == [append_time] * len(records)
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded.records] == [
        (r.offset, r.key, r.value, r.headers) for r in records
    ]


def test_uncompressed_batch_bytes_are_hand_checked():
    builder = RecordBatchBuilder(base_offset=7, partition_leader_epoch=3)
    builder.append(1000, b"k", b"v", [("h", None)])
    batch = builder.build()
    record = bytes([
        22,  # length: 11 bytes follow, as a zig-zag varint (11 << 1)
        0,  # attributes
        0,  # timestamp delta 0
        0,  # offset delta 0
        2, ord("k"),  # key length 1, key
        2, ord("v"),  # value length 1, value
        2,  # one header
        2, ord("h"),  # header key length 1
        1,  # header value null (-1)
    ])
    assert len(record) == 1 + 11
    crc = crc32c.crc32c(struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + record)
    expected = struct.pack(">qiibIhiqqqhii", 7, 49 + len(record), 3, 2, crc, 0, 0, 1000, 1000, -1, -1, -1, 1) + record
    assert batch == expected


def test_builder_tracks_offsets_timestamps_and_size():
    builder = RecordBatchBuilder(compression=CompressionType.LZ4)
    assert builder.append(50, b"a", b"b") == 0
    assert builder.append(40, None, None, offset_delta=5) == 5
    assert builder.append(60, None, None) == 6
    assert builder.records_count == 3
    assert builder.size_in_bytes > BATCH_HEADER_SIZE
    header = decode_batch(builder.build()).header
    assert (header.base_timestamp, header.max_timestamp, header.last_offset_delta) == (50, 60, 6)
    assert [r.timestamp for r in decode_batch(builder.build()).records] == [50, 40, 60]


@given(value=st.integers(-(1 << 31), (1 << 31) - 1), long=st.integers(-(1 << 63), (1 << 63) - 1))
def test_varint_round_trip(value, long):
    out = bytearray()
    write_varint(out, value)
    assert len(out) == size_of_varint(value)
    mark = len(out)
    write_varlong(out, long)
    assert len(out) - mark == size_of_varlong(long)
    assert read_varint(out, 0) == (value, mark)
    assert read_varlong(out, mark) == (long, len(out))


def test_varint_overlong_or_truncated_is_corrupt():
    for bad in (b"\x80" * 5 + b"\x01", b"\x80\x80", b"", b"\xff\xff\xff\xff\x7f"):
        with pytest.raises(CorruptRecordError):
            read_varint(bad, 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\x80" * 10 + b"\x01", 0)


# -- the batch-level path ------------------------------------------------------------------


@given(batches=st.lists(st.tuples(record_lists(max_size=5), codecs), min_size=1, max_size=6))
def test_validate_walks_batches_laid_end_to_end(batches):
    blobs = [build_batch(records, compression=codec) for records, codec in batches]
    buf = b"".join(blobs)
    headers = validate_batches(buf)
    assert [h.size_in_bytes for h in headers] == [len(b) for b in blobs]
    positions = [pos for pos, _ in iter_batches(buf)]
    assert positions == [sum(len(b) for b in blobs[:i]) for i in range(len(blobs))]
    assert [list(b.records) for b in decode_batches(buf)] == [records for records, _ in batches]


def test_partial_tail_is_dropped_only_when_allowed():
    first = build_batch(SAMPLE)
    second = build_batch(SAMPLE, compression=CompressionType.GZIP)
    for cut in range(1, len(second)):
        buf = first + second[:cut]
        assert [pos for pos, _ in iter_batches(buf, partial_tail_ok=True)] == [0]
        assert len(decode_batches(buf, partial_tail_ok=True)) == 1
        with pytest.raises(CorruptRecordError):
            validate_batches(buf)
        with pytest.raises(CorruptRecordError):
            list(iter_batches(buf))


def test_empty_buffer_holds_no_batches():
    assert validate_batches(b"") == []
    assert decode_batches(b"") == []


@given(records=record_lists(max_size=4), codec=codecs, data=st.data())
def test_any_flipped_bit_under_the_crc_is_detected(records, codec, data):
    batch = bytearray(build_batch(records, compression=codec))
    bit = data.draw(st.integers(21 * 8, len(batch) * 8 - 1))
    batch[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(batch)
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(batch)


def test_fields_outside_the_crc_can_change_without_breaking_it():
    batch = bytearray(build_batch(SAMPLE))
    batch[0:8] = struct.pack(">q", 12345)
    batch[12:16] = struct.pack(">i", 9)
    (header,) = validate_batches(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (12345, 9)


# -- in-place rewrites ---------------------------------------------------------------------


@given(records=record_lists(), codec=codecs, offset=st.integers(0, 1 << 62), epoch=st.integers(0, (1 << 31) - 1))
def test_broker_rewrites_keep_crc_and_records(records, codec, offset, epoch):
    original = build_batch(records, compression=codec)
    batch = bytearray(original)
    assign_base_offset(batch, offset)
    set_partition_leader_epoch(batch, epoch)
    assert batch[16:] == original[16:]  # magic, crc and everything under it untouched
    (header,) = validate_batches(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)
    # record offsets are deltas from the base offset, which the builder set to 0
    assert [r.offset for r in decode_batch(batch).records] == [r.offset + offset for r in records]


@given(records=record_lists(), codec=codecs, append_time=st.integers(0, 1 << 45))
def test_set_log_append_time_recomputes_crc(records, codec, append_time):
    batch = bytearray(build_batch(records, compression=codec))
    set_log_append_time(batch, append_time)
    (header,) = validate_batches(batch)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.compression == codec  # other attribute bits survive
    assert header.max_timestamp == append_time
    assert header.base_timestamp == records[0].timestamp
    assert [r.timestamp for r in decode_batch(batch).records] == [append_time] * len(records)


def test_rewrites_address_one_batch_among_several():
    a = build_batch(SAMPLE)
    b = build_batch([Record(0, 5, b"x", b"y")], compression=CompressionType.ZSTD)
    buf = bytearray(a + b + a)
    assert assign_offsets(buf, 100) == 100 + 3 + 1 + 3
    set_log_append_time(buf, 777, pos=len(a))
    headers = validate_batches(buf)
    assert [h.base_offset for h in headers] == [100, 103, 104]
    assert [h.timestamp_type for h in headers] == [
        TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME
    ]
    assert decode_batch(buf, len(a)).records == (Record(103, 777, b"x", b"y"),)


# -- control batches -----------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [t for t in ControlRecordType if t is not ControlRecordType.UNKNOWN])
def test_control_batch_decodes_to_its_control_type(control_type):
    value = end_transaction_marker_value(42) if control_type <= 1 else b"\x00\x00payload"
    batch = build_control_batch(
        control_type, value, timestamp_ms=99, base_offset=10, producer_id=5, producer_epoch=1,
        is_transactional=control_type <= 1,
    )
    decoded = decode_batch(batch)
    assert decoded.header.is_control
    (record,) = decoded.records
    assert isinstance(record, ControlRecord)
    assert record.control_type == control_type
    assert (record.offset, record.timestamp, record.value) == (10, 99, value)
    assert record.key == control_record_key(control_type)
    if control_type <= 1:
        assert decode_end_transaction_marker(record.value) == EndTransactionMarker(0, 42)


def test_unknown_control_type_is_kept_as_unknown_and_bad_keys_are_invalid():
    builder = RecordBatchBuilder(is_control=True)
    builder.append(1, struct.pack(">hh", 0, 99), b"")
    (record,) = decode_batch(builder.build()).records
    assert record.control_type == ControlRecordType.UNKNOWN
    for key in (None, b"\x00\x00"):
        builder = RecordBatchBuilder(is_control=True)
        builder.append(1, key, b"")
        with pytest.raises(InvalidRecordError) as e:
            decode_batch(builder.build())
        assert e.value.error_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidRecordError):
        decode_end_transaction_marker(b"\x00")


def test_control_batch_with_two_records_is_invalid():
    two = build_batch([
        Record(0, 1, control_record_key(ControlRecordType.COMMIT), None),
        Record(1, 1, control_record_key(ControlRecordType.ABORT), None),
    ])
    batch = bytearray(two)
    batch[22] |= 0x20  # control bit in the low byte of attributes
    _fix_crc(batch)
    with pytest.raises(InvalidRecordError):
        decode_batch(batch)


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_refused_not_misparsed(magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=b"key", value=b"value" * 20)
    legacy = bytes(builder.build())
    for call in (validate_batches, read_batch_header, decode_batch, decode_batches,
                 lambda b: list(iter_batches(b, partial_tail_ok=True))):
        with pytest.raises(UnsupportedMagicError) as e:
            call(legacy)
        assert e.value.magic == magic
        assert e.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    # after a valid v2 batch as well
    with pytest.raises(UnsupportedMagicError):
        validate_batches(build_batch(SAMPLE) + legacy)


def test_unknown_magic_is_corrupt():
    batch = bytearray(build_batch(SAMPLE))
    for magic in (3, 0x7F, 0xFF):
        batch[16] = magic
        with pytest.raises(CorruptRecordError) as e:
            validate_batches(batch)
        assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id_is_unsupported_compression_type(codec_id):
    batch = bytearray(build_batch(SAMPLE))
    batch[22] = (batch[22] & ~0x07) | codec_id
    _fix_crc(batch)
    for call in (validate_batches, decode_batch, lambda b: read_batch_header(b).compression):
        with pytest.raises(UnsupportedCompressionTypeError) as e:
            call(batch)
        assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_every_truncation_raises_the_typed_error():
    for codec in CompressionType:
        batch = build_batch(SAMPLE, compression=codec)
        for cut in range(len(batch)):
            for call in (validate_batches, decode_batch, decode_batches):
                with pytest.raises(CorruptRecordError):
                    call(batch[:cut] if cut else batch[:0] + b"\x00")


@given(records=record_lists(), codec=codecs)
def test_keyless_records_reads_what_decoding_reads(records, codec):
    batch = build_batch(records, compression=codec)
    assert keyless_records(batch) == [i for i, r in enumerate(decode_batch(batch).records) if r.key is None]


def test_keyless_records_refuses_a_region_that_does_not_add_up():
    for codec in CompressionType:
        for cut in range(BATCH_HEADER_SIZE, len(build_batch(SAMPLE, compression=codec))):
            with pytest.raises(CorruptRecordError):
                keyless_records(build_batch(SAMPLE, compression=codec)[:cut])
        batch = bytearray(build_batch(SAMPLE, compression=codec))
        for count in (2, 4, -1):
            batch[57:61] = struct.pack(">i", count)
            with pytest.raises(CorruptRecordError):
                keyless_records(batch)


def test_short_batch_length_is_corrupt():
    batch = bytearray(build_batch(SAMPLE))
    for length in (48, 0, -1, -(1 << 31)):
        batch[8:12] = struct.pack(">i", length)
        with pytest.raises(CorruptRecordError):
            validate_batches(batch)
        with pytest.raises(CorruptRecordError):
            read_batch_header(batch)


def test_records_count_and_region_must_agree():
    for codec in CompressionType:
        batch = bytearray(build_batch(SAMPLE, compression=codec))
        for count in (2, 4, -1, 1 << 30):
            batch[57:61] = struct.pack(">i", count)
            _fix_crc(batch)
            validate_batches(batch)  # the batch-level path does not look at records
            with pytest.raises(CorruptRecordError):
                decode_batch(batch)


def test_decompression_bomb_in_a_batch_is_refused():
    inflated = bytes(8 << 20)
    region = compress(CompressionType.ZSTD, inflated)
    batch = bytearray(build_batch(SAMPLE, compression=CompressionType.ZSTD))
    batch[61:] = region
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    _fix_crc(batch)
    validate_batches(batch)
    with pytest.raises(RecordTooLargeError) as e:
        decode_batch(batch, decompressed_bytes_max=1 << 20)
    assert e.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(RecordTooLargeError):
        decode_batch(build_batch([Record(0, 0, None, bytes(5000))]), decompressed_bytes_max=4096)


@given(garbage=st.binary(max_size=300))
def test_random_bytes_raise_only_record_errors(garbage):
    for call in (validate_batches, decode_batches, lambda b: list(iter_batches(b, partial_tail_ok=True)),
                 read_batch_header, decode_batch):
        try:
            call(garbage)
        except RecordError:
            pass


@given(garbage=st.binary(min_size=BATCH_HEADER_SIZE, max_size=300), codec=st.integers(0, 7),
       control=st.booleans())
def test_random_bytes_with_a_valid_frame_reach_the_record_decoder_safely(garbage, codec, control):
    # A v2 frame with the right magic, length and CRC around random content, so the record
    # decoder and the codecs (not just the CRC) face the garbage.
    batch = bytearray(garbage)
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    batch[16] = 2
    batch[21:23] = struct.pack(">h", codec | (0x20 if control else 0))
    _fix_crc(batch)
    try:
        decode_batch(batch, decompressed_bytes_max=1 << 16)
    except RecordError:
        pass


@given(records=record_lists(max_size=5), codec=codecs, data=st.data())
@settings(max_examples=50)
def test_mutated_records_region_with_fixed_crc_raises_only_record_errors(records, codec, data):
    batch = bytearray(build_batch(records, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(BATCH_HEADER_SIZE - 4, len(batch) - 1))  # count + region
        batch[i] = data.draw(st.integers(0, 255))
    _fix_crc(batch)
    try:
        decoded = decode_batch(batch)
    except RecordError:
        return
    assert len(decoded.records) == decoded.header.records_count


def test_errors_carry_kafka_codes():
    assert CorruptRecordError("x").error_code == ErrorCode.CORRUPT_MESSAGE == 2
    assert UnsupportedMagicError(1).error_code == ErrorCode.UNSUPPORTED_VERSION == 35
    assert UnsupportedCompressionTypeError(5).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE == 76
    assert RecordTooLargeError("x").error_code == ErrorCode.MESSAGE_TOO_LARGE == 10
    assert InvalidRecordError("x").error_code == ErrorCode.INVALID_RECORD == 87
    assert NO_PRODUCER_ID == -1


def test_read_transaction_marker_in_place_and_from_a_compressed_batch() -> None:
    from clients.records import (
        ControlRecordType, RecordBatchBuilder, build_control_batch, control_record_key,
        end_transaction_marker_value, read_transaction_marker,
    )
    from clients.records.compression import CompressionType as C
    commit = build_control_batch(ControlRecordType.COMMIT, end_transaction_marker_value(7),
                                 timestamp_ms=5, producer_id=3, producer_epoch=1, is_transactional=True)
    abort = build_control_batch(ControlRecordType.ABORT, end_transaction_marker_value(2),
                                timestamp_ms=5, producer_id=3, producer_epoch=1, is_transactional=True)
    committed, marker = read_transaction_marker(b"xx" + abort + commit, 2 + len(abort))
    assert (committed, marker.coordinator_epoch) == (True, 7)
    assert read_transaction_marker(abort)[0] is False
    builder = RecordBatchBuilder(producer_id=3, producer_epoch=1, is_transactional=True,
                                 is_control=True, compression=C.GZIP)
    builder.append(5, control_record_key(ControlRecordType.ABORT), end_transaction_marker_value(9))
    committed, marker = read_transaction_marker(builder.build())
    assert (committed, marker.coordinator_epoch) == (False, 9)
    leader_change = build_control_batch(ControlRecordType.LEADER_CHANGE, b"\x00\x00", timestamp_ms=5)
    assert read_transaction_marker(leader_change) is None
