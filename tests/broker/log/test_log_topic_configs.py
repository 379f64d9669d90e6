"""Topic configs the log acts on when they change: timestamp bounds, the topic's
compression, delayed file deletion, roll jitter, max.compaction.lag.ms."""
from __future__ import annotations

from _log_helpers import make_batch, read_all

from broker.log import LogCleaner, LogConfig, PartitionLog, SimStorage, logs_to_clean
from clients.protocol.errors import ErrorCode
from clients.records import CompressionType, Record, build_batch, iter_batches


def open_log(config: LogConfig, root: str = "/data/t-0") -> tuple[PartitionLog, SimStorage]:
    storage = SimStorage()
    log, _ = PartitionLog.open(storage, root, config, now_ms=0)
    return log, storage


def test_create_time_bounds_refuse_records_too_old_or_too_new() -> None:
    log, _ = open_log(LogConfig())
    now = 1_000_000
    assert log.append_as_leader(make_batch(1, timestamp_ms=1), 0, now).error_code == ErrorCode.NONE
    log.update_config(LogConfig(message_timestamp_before_max_ms=1000,
                                message_timestamp_after_max_ms=500))
    old = log.append_as_leader(make_batch(1, timestamp_ms=now - 1001), 0, now)
    assert old.error_code == ErrorCode.INVALID_TIMESTAMP and "before.max.ms" in old.error_message
    new = log.append_as_leader(make_batch(1, timestamp_ms=now + 501), 0, now)
    assert new.error_code == ErrorCode.INVALID_TIMESTAMP and "after.max.ms" in new.error_message
    assert log.append_as_leader(make_batch(1, timestamp_ms=now - 999), 0, now).error_code == ErrorCode.NONE
    # The older single bound applies both ways; LogAppendTime topics ignore the bounds.
    log.update_config(LogConfig(message_timestamp_difference_max_ms=10))
    assert log.append_as_leader(make_batch(1, timestamp_ms=now + 11), 0, now).error_code == ErrorCode.INVALID_TIMESTAMP
    log.update_config(LogConfig(message_timestamp_difference_max_ms=10,
                                message_timestamp_type="LogAppendTime"))
    assert log.append_as_leader(make_batch(1, timestamp_ms=now + 11), 0, now).error_code == ErrorCode.NONE


def test_topic_compression_type_recompresses_other_codecs_keeping_producer_fields() -> None:
    log, _ = open_log(LogConfig(compression_type="zstd"))
    records = [Record(i, 1000 + i, b"k%d" % i, b"v" * 50) for i in range(3)]
    gzip = build_batch(records, compression=CompressionType.GZIP, producer_id=7,
                       producer_epoch=2, base_sequence=40)
    assert log.append_as_leader(bytearray(gzip), 0, 2000).records_count == 3
    stored = [h for _, h in iter_batches(log.read_records_bytes(log.read(0, 1 << 20, 3).records))]
    assert [(h.compression, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count)
            for h in stored] == [(CompressionType.ZSTD, 7, 2, 40, 3)]
    assert [(r.offset, r.key, r.value) for b in read_all(log) for r in b.records] == [
        (r.offset, r.key, r.value) for r in records]
    log.update_config(LogConfig(compression_type="producer"))
    log.append_as_leader(bytearray(gzip), 0, 2000)
    last = [h for _, h in iter_batches(log.read_records_bytes(log.read(3, 1 << 20, 6).records))]
    assert last[0].compression == CompressionType.GZIP


def test_file_delete_delay_keeps_retired_files_until_due() -> None:
    size = len(make_batch(2))
    log, storage = open_log(LogConfig(segment_bytes=size * 2, retention_ms=1000,
                                      file_delete_delay_ms=5000))
    for i in range(6):
        log.append_as_leader(make_batch(2, timestamp_ms=0), 0, 0)
    assert log.delete_old_segments(now_ms=10_000, high_watermark=8).deleted_base_offsets == (0, 4)
    retired = sorted(n for n in storage.list_dir("/data/t-0") if n.endswith(".deleted"))
    assert retired and all(n.split(".")[0].isdigit() for n in retired)
    log.poll(14_999)
    assert any(n.endswith(".deleted") for n in storage.list_dir("/data/t-0"))
    log.poll(15_000)
    assert not any(n.endswith(".deleted") for n in storage.list_dir("/data/t-0"))


def test_segment_jitter_rolls_earlier_but_never_before_zero() -> None:
    log, _ = open_log(LogConfig(segment_ms=1000, segment_jitter_ms=900))
    log.append_as_leader(make_batch(1, timestamp_ms=0), 0, 0)
    rolled_at = next(t for t in range(0, 1200, 10)
                     if (log.append_as_leader(make_batch(1, timestamp_ms=t), 0, t), len(log.segments))[1] > 1)
    assert 100 <= rolled_at <= 1010
    again, _ = open_log(LogConfig(segment_ms=1000, segment_jitter_ms=900))
    again.append_as_leader(make_batch(1, timestamp_ms=0), 0, 0)
    assert next(t for t in range(0, 1200, 10)
                if (again.append_as_leader(make_batch(1, timestamp_ms=t), 0, t), len(again.segments))[1] > 1) == rolled_at


def test_max_compaction_lag_makes_a_log_eligible_below_the_dirty_ratio() -> None:
    size = len(make_batch(1, keys=[b"k"]))
    config = LogConfig(cleanup_policy="compact", segment_bytes=size * 4, min_cleanable_dirty_ratio=0.99)
    log, storage = open_log(config)
    for i in range(12):
        log.append_as_leader(make_batch(1, keys=[b"k%d" % i], timestamp_ms=i), 0, 100)
    assert LogCleaner(storage).clean(log, 12, 100).committed          # all dirty: ratio 1
    for i in range(4):                                               # one more dirty segment
        log.append_as_leader(make_batch(1, keys=[b"k%d" % i], timestamp_ms=20 + i), 0, 100)
    logs = [(("t", 0), log)]
    assert logs_to_clean(logs, 10_000, lambda key: 16) == []          # ratio well below 0.99
    log.update_config(LogConfig(cleanup_policy="compact", segment_bytes=size * 4,
                                min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=5_000))
    assert logs_to_clean(logs, 4_000, lambda key: 16) == []           # not old enough yet
    assert [key for key, _, _ in logs_to_clean(logs, 10_000, lambda key: 16)] == [("t", 0)]


def test_recompression_uses_the_topics_level() -> None:
    value = bytes(range(256)) * 40
    sizes = []
    for level in (1, 9):
        log, _ = open_log(LogConfig(compression_type="gzip", compression_gzip_level=level))
        log.append_as_leader(bytearray(build_batch([Record(0, 1, b"k", value)])), 0, 2)
        sizes.append(log.size_bytes)
    assert sizes[1] < sizes[0]
