"""Compaction: the latest record per key survives, offsets never change, tombstones expire."""

from __future__ import annotations

import random

from _log_helpers import make_batch, offsets_and_values, read_all
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import LogCleaner, LogConfig, PartitionLog, SimStorage, dirty_ratio, logs_to_clean
from clients.protocol.errors import ErrorCode
from clients.records import CompressionType

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=64,
                    delete_retention_ms=1_000)


def roll_and_flush(log: PartitionLog) -> None:
    """Roll, then fsync: the cleaner only rewrites segments below the recovery point."""
    log.roll(now_ms=0)
    log.flush(now_ms=0)


def open_log(storage=None, config=COMPACT) -> tuple[SimStorage, PartitionLog]:
    storage = storage or SimStorage()
    log, _ = PartitionLog.open(storage, "/d/c-0", config, now_ms=0)
    return storage, log


def write(log: PartitionLog, key: bytes, value: bytes | None, ts: int = 100,
          compression: CompressionType = CompressionType.NONE) -> int:
    result = log.append_as_leader(make_batch(1, keys=[key], values=[value], timestamp_ms=ts,
                                             compression=compression), 0, now_ms=ts)
    assert result.error_code == ErrorCode.NONE, result
    return result.base_offset


def test_latest_value_per_key_survives_with_its_offset() -> None:
    storage, log = open_log()
    written: list[tuple[int, bytes, bytes | None]] = []
    rng = random.Random(3)
    for i in range(120):
        key = b"key-%d" % rng.randrange(8)
        value = b"v%03d" % i
        written.append((write(log, key, value), key, value))
    roll_and_flush(log)
    before_bytes = log.size_bytes
    result = LogCleaner(storage).clean(log, high_watermark=log.log_end_offset, now_ms=10)
    assert result.committed and result.records_removed > 0
    latest = {}
    for offset, key, value in written:
        latest[key] = (offset, key, value)
    got = offsets_and_values(read_all(log))
    assert sorted(got) == sorted(latest.values())
    assert log.log_end_offset == 120 and log.size_bytes < before_bytes / 5
    assert write(log, b"key-0", b"after") == 120  # offsets go on, never renumbered
    # A restart, clean or not, sees the compacted log.
    log.close()
    reopened, report = PartitionLog.open(storage, "/d/c-0", COMPACT, now_ms=0, recovery_point=0)
    assert not report.dropped_anything
    assert offsets_and_values(read_all(reopened)) == sorted(latest.values()) + [(120, b"key-0", b"after")]


def test_tombstones_are_kept_for_delete_retention_ms_then_removed() -> None:
    storage, log = open_log()
    write(log, b"a", b"1")
    write(log, b"b", b"1")
    write(log, b"a", None)  # tombstone for a
    write(log, b"c", b"1")
    roll_and_flush(log)
    cleaner = LogCleaner(storage)
    cleaner.clean(log, log.log_end_offset, now_ms=5_000)
    assert offsets_and_values(read_all(log)) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    tombstone_batch = [b for b in read_all(log) if b.records[0].value is None][0]
    assert tombstone_batch.header.has_delete_horizon
    assert tombstone_batch.header.base_timestamp == 6_000  # now + delete.retention.ms
    assert tombstone_batch.records[0].timestamp == 100  # the record keeps its own time
    cleaner.clean(log, log.log_end_offset, now_ms=5_999)
    assert (2, b"a", None) in offsets_and_values(read_all(log))
    result = cleaner.clean(log, log.log_end_offset, now_ms=6_000)
    assert result.tombstones_removed == 1
    assert offsets_and_values(read_all(log)) == [(1, b"b", b"1"), (3, b"c", b"1")]


def test_compressed_batches_are_cleaned_and_stay_compressed() -> None:
    storage, log = open_log()
    for i in range(10):
        log.append_as_leader(make_batch(4, keys=[b"x", b"y", b"x", b"z"], tag=i,
                                        compression=CompressionType.LZ4), 0, 0)
    roll_and_flush(log)
    LogCleaner(storage).clean(log, log.log_end_offset, now_ms=0)
    batches = read_all(log)
    assert [(o, k) for o, k, _ in offsets_and_values(batches)] == [(37, b"y"), (38, b"x"), (39, b"z")]
    assert all(b.header.compression == CompressionType.LZ4 for b in batches)
    assert batches[-1].header.last_offset == 39 and batches[-1].header.base_offset == 36


def test_keyless_records_are_refused_on_compacted_topics() -> None:
    _, log = open_log()
    result = log.append_as_leader(make_batch(2, keys=[b"k", None]), 0, 0)
    assert result.error_code == ErrorCode.INVALID_RECORD and log.log_end_offset == 0


def test_active_segment_high_watermark_and_lag_are_never_cleaned() -> None:
    storage, log = open_log(config=COMPACT.with_overrides(min_compaction_lag_ms=500))
    for i in range(30):
        write(log, b"same", b"%d" % i, ts=1_000 + i)
    assert len(log.segments) > 2
    cleaner = LogCleaner(storage)
    # Every record is younger than the lag: nothing happens.
    assert not cleaner.clean(log, log.log_end_offset, now_ms=1_100).committed
    # Old enough, but the high watermark stops at offset 10.
    cleaner.clean(log, high_watermark=10, now_ms=10_000)
    got = offsets_and_values(read_all(log))
    assert [o for o, _, _ in got if o >= 10] == list(range(10, 30))
    first_segment_end = log.segments[1].base_offset
    assert first_segment_end <= 10
    assert [o for o, _, _ in got if o < first_segment_end] == [first_segment_end - 1]
    assert dirty_ratio(log, log.log_end_offset, 10_000) > 0
    cleaner.clean(log, log.log_end_offset, now_ms=10_000)
    got = offsets_and_values(read_all(log))
    active_base = log.active_segment.base_offset
    # The key map covers the cleanable part only: its latest record stays until the
    # active segment rolls and a later pass sees the newer ones.
    assert [o for o, _, _ in got] == [active_base - 1] + list(range(active_base, 30))


def test_a_pass_built_before_a_truncation_is_not_committed() -> None:
    storage, log = open_log()
    for i in range(40):
        write(log, b"k%d" % (i % 3), b"%d" % i)
    roll_and_flush(log)
    cleaner = LogCleaner(storage)
    plan = cleaner.prepare(log, log.log_end_offset, now_ms=0)
    built = cleaner.build(plan, 1_000, 100, COMPACT.segment_bytes)
    assert built is not None
    log.truncate_to(20)
    result = cleaner.commit(log, plan, *built, now_ms=0)
    assert not result.committed
    assert [o for o, _, _ in offsets_and_values(read_all(log))] == list(range(20))
    assert not any(name.endswith(".cleaned") for name in storage.list_dir("/d/c-0"))
    # Appends and rolls during a pass do not invalidate it.
    plan = cleaner.prepare(log, log.log_end_offset, now_ms=0)
    built = cleaner.build(plan, 1_000, 100, COMPACT.segment_bytes)
    write(log, b"k0", b"late")
    roll_and_flush(log)
    assert cleaner.commit(log, plan, *built, now_ms=0).committed


def test_a_small_key_map_converges_over_several_passes() -> None:
    config = COMPACT.with_overrides(cleaner_key_map_entries_max=4)
    storage, log = open_log(config=config)
    latest = {}
    for i in range(200):
        key = b"key-%02d" % (i % 13)
        latest[key] = (write(log, key, b"%d" % i), key, b"%d" % i)
    roll_and_flush(log)
    cleaner = LogCleaner(storage)
    for _ in range(60):
        result = cleaner.clean(log, log.log_end_offset, now_ms=0)
        if log.first_dirty_offset >= log.active_segment.base_offset:
            break
    cleaner.clean(log, log.log_end_offset, now_ms=0)
    assert sorted(offsets_and_values(read_all(log))) == sorted(latest.values())


@settings(max_examples=15, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=80),
       passes=st.lists(st.integers(0, 3_000), min_size=1, max_size=3))
def test_compaction_never_changes_the_latest_state_per_key(ops, passes) -> None:
    """Whatever the writes, roll points and cleaning times: reading the log and applying
    records in order gives the same key -> value map as before cleaning (tombstoned keys
    either keep their tombstone or are absent), and surviving records are unchanged."""
    storage, log = open_log()
    original = {}
    for n, (k, is_tombstone, roll) in enumerate(ops):
        key = b"k%d" % k
        value = None if is_tombstone else b"v%d" % n
        offset = write(log, key, value)
        original[offset] = (key, value)
        if roll:
            roll_and_flush(log)

    def state(records):
        out = {}
        for _, key, value in records:
            out[key] = value
        return {k: v for k, v in out.items() if v is not None}

    expected_state = state(offsets_and_values(read_all(log)))
    cleaner = LogCleaner(storage)
    now = 0
    for delta in passes:
        now += delta
        cleaner.clean(log, log.log_end_offset, now_ms=now)
        records = offsets_and_values(read_all(log))
        assert state(records) == expected_state
        assert all(original[o] == (k, v) for o, k, v in records)
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(set(offsets))
    assert log.log_end_offset == len(ops)


def test_logs_to_clean_picks_compacted_logs_past_the_dirty_ratio() -> None:
    storage = SimStorage()
    logs = {}
    for name, overwrites in (("a", 2), ("b", 10), ("c", 1)):
        log, _ = PartitionLog.open(storage, f"/d/{name}-0", COMPACT, now_ms=0)
        for i in range(40):
            write(log, b"k%d" % (i % (40 // overwrites)), b"v")
        roll_and_flush(log)
        logs[name] = log
    deleting, _ = PartitionLog.open(storage, "/d/del-0", LogConfig(segment_bytes=600), now_ms=0)
    chosen = logs_to_clean([(k, v) for k, v in logs.items()] + [("del", deleting)], 0,
                           lambda key: 10**9)
    assert [(key, ratio) for key, _, ratio in chosen] == [("a", 1.0), ("b", 1.0), ("c", 1.0)]
    LogCleaner(storage).clean(logs["b"], 10**9, now_ms=0)
    # b is clean now; a gets a little dirt on top of a cleaned part: below the 0.5 ratio.
    LogCleaner(storage).clean(logs["a"], 10**9, now_ms=0)
    write(logs["a"], b"k0", b"again")
    roll_and_flush(logs["a"])
    assert 0 < dirty_ratio(logs["a"], 10**9, 0) < 0.5
    chosen = logs_to_clean(logs.items(), 0, lambda key: 10**9)
    assert [key for key, _, _ in chosen] == ["c"]
