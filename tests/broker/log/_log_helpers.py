"""Batch builders and small readers shared by the broker.log tests."""

from __future__ import annotations

from clients.records import CompressionType, Record, RecordBatch, build_batch, decode_batches

from broker.log import PartitionLog


def make_batch(
    count: int = 3,
    *,
    timestamp_ms: int = 1_000,
    value_bytes: int = 20,
    keys: list[bytes | None] | None = None,
    values: list[bytes | None] | None = None,
    compression: CompressionType = CompressionType.NONE,
    tag: int = 0,
) -> bytearray:
    """A producer's batch (base offset 0, no epoch) of `count` records."""
    records = []
    for i in range(count):
        key = keys[i] if keys is not None else b"k%03d-%d" % (tag, i)
        value = values[i] if values is not None else (b"%03d:%d:" % (tag, i)).ljust(value_bytes, b"x")
        records.append(Record(i, timestamp_ms + i, key, value))
    return bytearray(build_batch(records, compression=compression))


def read_all(log: PartitionLog, max_offset: int | None = None) -> list[RecordBatch]:
    """Every batch from the log start to `max_offset` (default LEO), via the read path."""
    upper = log.log_end_offset if max_offset is None else max_offset
    out: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < upper:
        result = log.read(offset, 4096, upper)
        assert result.error_code == 0, result
        if result.records.is_empty:
            break
        batches = decode_batches(log.read_records_bytes(result.records))
        assert batches, result
        out.extend(batches)
        offset = batches[-1].header.last_offset + 1
    return out


def offsets_and_values(batches: list[RecordBatch]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches for r in b.records]
