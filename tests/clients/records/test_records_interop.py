"""Record batches against real Kafka clients' own record code: batches built by kafka-python
and aiokafka decode in Ketch to the same records, and batches Ketch builds pass those
libraries' readers, CRC check included. Every codec, both directions.

kafka-python 3.0.12 does its snappy (xerial framing included) over the python-snappy module,
which is not a dependency of Ketch. python-snappy is a thin binding of raw snappy blocks; the
`cramjam_snappy` fixture gives kafka-python that same two-function API over cramjam (the
library aiokafka uses), so kafka-python's own xerial writer and reader run unchanged.
"""
from __future__ import annotations

import struct

import cramjam
import crc32c
import kafka.codec
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from clients.records import (
    CompressionType,
    ControlRecord,
    ControlRecordType,
    Record,
    RecordBatchBuilder,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_batches,
    end_transaction_marker_value,
    set_log_append_time,
    validate_batches,
)
from tests.clients.records.records_strategies import record_lists

pytestmark = pytest.mark.interop

LIBRARIES = ["kafka-python", "aiokafka"]
CODECS = list(CompressionType)

# Compressible values, so that kafka-python and aiokafka (which fall back to no compression
# when it does not pay) really use the codec under test.
RECORDS = [
    Record(offset=i, timestamp=1_700_000_000_000 + (i * 37) % 500 - 100,
           key=None if i % 7 == 0 else (b"" if i % 11 == 0 else b"key-%d" % (i % 13)),
           value=None if i % 17 == 0 else (b"" if i % 19 == 0 else (b"value %05d " % i) * 10),
           headers=() if i % 3 else (("trace-id", b"%08x" % i), ("ключ", None), ("", b"")))
    for i in range(200)
]


class _PythonSnappyOverCramjam:
    """python-snappy's module API (raw snappy blocks), implemented with cramjam."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


@pytest.fixture(autouse=True)
def cramjam_snappy(monkeypatch):
    if kafka.codec.snappy is None:
        monkeypatch.setattr(kafka.codec, "snappy", _PythonSnappyOverCramjam)


def _build_with(library: str, records: list[Record], codec: int, producer: tuple[int, int, int] = (-1, -1, -1),
                transactional: bool = False) -> bytes:
    builder_class = KafkaPythonBuilder if library == "kafka-python" else AiokafkaBuilder
    producer_id, producer_epoch, base_sequence = producer
    builder = builder_class(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 24,
    )
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    return bytes(builder.build())


def _read_with(library: str, batch: bytes) -> tuple[object, list[tuple]]:
    reader = (KafkaPythonBatch if library == "kafka-python" else AiokafkaBatch)(batch)
    assert reader.validate_crc()
    records = [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in reader]
    return reader, records


def _as_tuples(records: list[Record]) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("library", LIBRARIES)
def test_batches_built_by_client_decode_in_ketch(library, codec):
    batch = _build_with(library, RECORDS, codec, producer=(4242, 3, 17))
    (header,) = validate_batches(batch)
    assert header.compression == codec  # the client really compressed with it
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert header.records_count == len(RECORDS)
    decoded = decode_batch(batch)
    assert list(decoded.records) == RECORDS


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("library", LIBRARIES)
def test_batches_built_by_ketch_decode_in_client(library, codec):
    batch = build_batch(RECORDS, base_offset=0, compression=codec, producer_id=99, producer_epoch=2,
                        base_sequence=1000, is_transactional=True)
    reader, records = _read_with(library, batch)
    assert records == _as_tuples(RECORDS)
    assert reader.compression_type == codec
    assert reader.is_transactional
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (99, 2, 1000)
    assert reader.next_offset == RECORDS[-1].offset + 1


@pytest.mark.parametrize("library", LIBRARIES)
def test_uncompressed_bytes_equal_the_clients_own(library):
    # kafka-python stamps partition leader epoch 0, aiokafka -1 (as the Java client does).
    epoch = 0 if library == "kafka-python" else -1
    ours = build_batch(RECORDS, partition_leader_epoch=epoch)
    assert ours == _build_with(library, RECORDS, 0)


# Timestamps from 0: both clients' builders read a first timestamp of -1 (NO_TIMESTAMP) or 0
# as "unset" and write something else, which is their business, not the format's.
@given(records=record_lists(max_size=8, timestamps=st.integers(1, 1 << 50)), codec=st.sampled_from(CODECS), library=st.sampled_from(LIBRARIES))
@settings(max_examples=40)
def test_random_records_agree_both_ways(records, codec, library):
    from_client = _build_with(library, records, codec)
    assert list(decode_batch(from_client).records) == records
    _, decoded = _read_with(library, build_batch(records, compression=codec))
    assert decoded == _as_tuples(records)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_ketch_multi_batch_buffer_reads_in_kafka_python_memory_records(codec):
    parts = [RECORDS[i : i + 50] for i in range(0, len(RECORDS), 50)]
    buf = b"".join(build_batch(p, base_offset=p[0].offset, compression=codec) for p in parts)
    records = MemoryRecords(buf)
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        seen.extend((r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch)
    assert seen == _as_tuples(RECORDS)


def test_kafka_python_memory_records_builder_batches_decode_in_ketch():
    blobs = []
    for codec in CODECS:
        builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 24, offset=1000 * codec)
        for r in RECORDS[:60]:
            builder.append(r.timestamp, r.key, r.value, list(r.headers))
        builder.close()
        blobs.append(bytes(builder.buffer()))
    batches = decode_batches(b"".join(blobs))
    assert [b.header.compression for b in batches] == CODECS
    for codec, batch in zip(CODECS, batches):
        assert [r.offset for r in batch.records] == [1000 * codec + i for i in range(60)]
        assert [(r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
            (r.timestamp, r.key, r.value, r.headers) for r in RECORDS[:60]]


@pytest.mark.parametrize("library", LIBRARIES)
def test_log_append_time_set_by_ketch_reads_in_client(library):
    batch = bytearray(_build_with(library, RECORDS[:20], CompressionType.LZ4))
    set_log_append_time(batch, 1_800_000_000_000)
    reader, records = _read_with(library, bytes(batch))
    assert reader.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r[1] for r in records] == [1_800_000_000_000] * 20
    assert [r[2:] for r in records] == [r[2:] for r in _as_tuples(RECORDS[:20])]


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_transaction_markers_built_by_ketch_read_as_control_records(control_type):
    batch = build_control_batch(control_type, end_transaction_marker_value(7), timestamp_ms=5,
                                base_offset=300, producer_id=11, producer_epoch=4, is_transactional=True)
    reader = KafkaPythonBatch(batch)
    assert reader.validate_crc() and reader.is_control_batch and reader.is_transactional
    (record,) = list(reader)
    assert (record.offset, record.type, record.commit) == (300, control_type, control_type == ControlRecordType.COMMIT)
    areader = AiokafkaBatch(batch)
    assert areader.validate_crc() and areader.is_control_batch
    (arecord,) = list(areader)
    assert arecord.key == b"\x00\x00\x00" + bytes([control_type])


@pytest.mark.parametrize("library", LIBRARIES)
def test_client_built_control_batch_decodes_to_its_type(library):
    # Neither client writes control batches (brokers do); flip the bit on a client-built
    # transactional batch whose one record has a COMMIT key, then fix the CRC, as a broker
    # writing a marker would.
    batch = bytearray(_build_with(library, [Record(0, 1, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x09")],
                                  0, producer=(5, 0, 0), transactional=True))
    batch[22] |= 0x20
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
    (record,) = decode_batch(batch).records
    assert isinstance(record, ControlRecord) and record.control_type == ControlRecordType.COMMIT


def test_builder_batch_matches_client_when_appended_incrementally():
    builder = RecordBatchBuilder(compression=CompressionType.NONE)
    for r in RECORDS[:10]:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    assert builder.build() == _build_with("aiokafka", RECORDS[:10], 0)
