"""PartitionLog: appends, reads, rolls, epochs, truncation, retention, timestamps, errors."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from _log_helpers import make_batch, offsets_and_values, read_all

from broker.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EpochEndOffset,
    EpochEntry,
    FileStorage,
    LogConfig,
    PartitionLog,
    SimStorage,
    TimestampAndOffset,
)
from clients.protocol.errors import ErrorCode
from clients.records import TimestampType, decode_batches, read_batch_header

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=120)


@pytest.fixture(params=["sim", "file"])
def storage_root(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sim":
        yield SimStorage(), "/data/t-0"
    else:
        storage = FileStorage(open_files_max=8)
        yield storage, str(tmp_path / "t-0")
        storage.close()


def open_log(storage, root, config=SMALL, **kw) -> PartitionLog:
    log, _ = PartitionLog.open(storage, root, config, now_ms=kw.pop("now_ms", 0), **kw)
    return log


def test_appends_assign_offsets_and_reads_return_the_bytes(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    results = [log.append_as_leader(make_batch(3, tag=i), leader_epoch=0, now_ms=i) for i in range(40)]
    assert [r.error_code for r in results] == [ErrorCode.NONE] * 40
    assert [(r.base_offset, r.last_offset) for r in results] == [(3 * i, 3 * i + 2) for i in range(40)]
    assert log.log_end_offset == 120 and len(log.segments) > 3
    got = offsets_and_values(read_all(log))
    assert [o for o, _, _ in got] == list(range(120))
    assert got[7] == (7, b"k002-1", b"002:1:".ljust(20, b"x"))
    # The batches on disk carry the assigned offsets and the leader epoch.
    for batch in read_all(log):
        assert batch.header.partition_leader_epoch == 0


def test_read_respects_max_bytes_max_offset_and_kip74(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root, LogConfig(segment_bytes=100_000, index_interval_bytes=100))
    for i in range(20):
        log.append_as_leader(make_batch(2, tag=i), 0, 0)
    size = len(make_batch(2))
    r = log.read(5, max_bytes=3 * size + 10, max_offset=40)
    batches = decode_batches(log.read_records_bytes(r.records))
    # The batch holding offset 5 (4..5) first, whole batches only, three fit.
    assert [b.header.base_offset for b in batches] == [4, 6, 8]
    assert (r.records.first_offset, r.records.last_offset) == (4, 9)
    # Bounded by the high watermark: nothing at or past it.
    r = log.read(0, 10_000, max_offset=11)
    assert decode_batches(log.read_records_bytes(r.records))[-1].header.last_offset == 9
    # KIP-74: a first batch larger than max_bytes still comes back whole.
    r = log.read(0, 1, 40)
    assert r.records.length_bytes == size
    assert log.read(0, 1, 40, min_one_batch=False).records.is_empty
    # At the high watermark or the LEO: empty, not an error.
    assert log.read(40, 100, 40).records.is_empty and log.read(40, 100, 40).error_code == 0
    assert log.read(10, 100, 10).records.is_empty
    # Out of range is data, not an exception.
    assert log.read(41, 100, 41).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(-1, 100, 41).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_bad_batches_are_refused_and_leave_the_log_unchanged(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    log.append_as_leader(make_batch(2), 0, 0)
    before = (log.log_end_offset, log.size_bytes, offsets_and_values(read_all(log)))

    flipped = make_batch(2)
    flipped[-1] ^= 0x01
    assert log.append_as_leader(flipped, 0, 0).error_code == ErrorCode.CORRUPT_MESSAGE

    legacy = make_batch(2)
    legacy[16] = 1
    assert log.append_as_leader(legacy, 0, 0).error_code == ErrorCode.UNSUPPORTED_VERSION
    bad_magic = make_batch(2)
    bad_magic[16] = 9
    assert log.append_as_leader(bad_magic, 0, 0).error_code == ErrorCode.CORRUPT_MESSAGE

    # A good batch followed by a bad one: all or nothing.
    two = make_batch(2) + flipped
    assert log.append_as_leader(two, 0, 0).error_code == ErrorCode.CORRUPT_MESSAGE
    torn = make_batch(2)[:-5]
    assert log.append_as_leader(torn, 0, 0).error_code == ErrorCode.CORRUPT_MESSAGE

    small = LogConfig(segment_bytes=2000, max_message_bytes=200)
    log.update_config(small)
    big = make_batch(1, value_bytes=300)
    assert log.append_as_leader(big, 0, 0).error_code == ErrorCode.MESSAGE_TOO_LARGE
    huge = make_batch(1, value_bytes=2100)
    assert log.append_as_leader(huge, 0, 0).error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    log.update_config(SMALL)

    lying = make_batch(3)
    struct.pack_into(">i", lying, 57, 2)  # records_count says 2, last_offset_delta 2
    lying_crc = bytearray(lying)
    import crc32c

    struct.pack_into(">I", lying_crc, 17, crc32c.crc32c(bytes(lying_crc[21:])))
    assert log.append_as_leader(lying_crc, 0, 0).error_code == ErrorCode.INVALID_RECORD
    assert (log.log_end_offset, log.size_bytes, offsets_and_values(read_all(log))) == before


def test_log_append_time_is_stamped_when_the_topic_asks(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root, LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(make_batch(2, timestamp_ms=5), 0, now_ms=777)
    assert result.log_append_time_ms == 777
    (batch,) = read_all(log)
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records] == [777, 777]
    assert open_log(SimStorage(), "/x").append_as_leader(make_batch(1), 0, 5).log_append_time_ms == -1


def test_segments_roll_on_bytes_time_and_full_index(storage_root) -> None:
    storage, root = storage_root
    size = len(make_batch(1))
    by_bytes = open_log(storage, root, LogConfig(segment_bytes=size * 3))
    for i in range(7):
        by_bytes.append_as_leader(make_batch(1), 0, 0)
    assert [s.base_offset for s in by_bytes.segments] == [0, 3, 6]

    storage2 = SimStorage()
    by_time = open_log(storage2, "/t", LogConfig(segment_ms=100))
    by_time.append_as_leader(make_batch(1, timestamp_ms=1000), 0, now_ms=0)
    by_time.append_as_leader(make_batch(1, timestamp_ms=1100), 0, now_ms=0)  # waited 100: not > 100
    by_time.append_as_leader(make_batch(1, timestamp_ms=1101), 0, now_ms=0)
    assert [s.base_offset for s in by_time.segments] == [0, 2]

    by_index = open_log(SimStorage(), "/i", LogConfig(index_interval_bytes=0, segment_index_bytes=40))
    for i in range(12):
        by_index.append_as_leader(make_batch(1), 0, 0)
    assert len(by_index.segments) >= 3
    assert all(len(s.offset_index) <= 5 for s in by_index.segments)
    assert [o for o, _, _ in offsets_and_values(read_all(by_index))] == list(range(12))


def test_leader_epochs_are_cached_checkpointed_and_answer_kip_279(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    for epoch, count in [(1, 3), (2, 2), (5, 4)]:
        for _ in range(count):
            log.append_as_leader(make_batch(2), epoch, 0)
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 6), EpochEntry(5, 10)]
    assert log.end_offset_for_epoch(5) == EpochEndOffset(5, 18)
    assert log.end_offset_for_epoch(3) == EpochEndOffset(2, 10)
    assert log.end_offset_for_epoch(0) == EpochEndOffset(0, 0)
    assert log.end_offset_for_epoch(6) == EpochEndOffset(-1, -1)
    log.close()
    reopened = open_log(storage, root, clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries() == log.leader_epoch_cache.entries()
    assert storage.read(f"{root}/leader-epoch-checkpoint", 0, 100) == b"0\n3\n1 0\n2 6\n5 10\n"


def test_a_leaders_epoch_start_survives_a_clean_restart_with_or_without_its_batches(storage_root) -> None:
    # A new leader's epoch starts at its LEO before it appends; its own appends in that
    # epoch then bring no new epoch. A clean restart that lost it would fetch from its
    # LEO without truncating to the next leader (a divergence found by test_faults).
    storage, root = storage_root
    log = open_log(storage, root)
    log.assign_epoch_start(0, 0)
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0, 0)
    log.close()
    assert storage.read(f"{root}/leader-epoch-checkpoint", 0, 100) == b"0\n1\n0 0\n"
    reopened = open_log(storage, root, clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries() == [EpochEntry(0, 0)]
    # Elected again, no batch yet: nothing to write (loading drops an epoch that starts
    # at the LEO, as Kafka's truncateFromEnd does).
    reopened.assign_epoch_start(2, reopened.log_end_offset)
    reopened.close()
    assert storage.read(f"{root}/leader-epoch-checkpoint", 0, 100) == b"0\n1\n0 0\n"


def test_a_log_opened_where_nothing_was_and_one_opened_again_are_alike(storage_root) -> None:
    # A new directory skips the listing and the loads; reopening it takes the long way.
    storage, root = storage_root
    fresh = open_log(storage, root, log_start_offset=7)
    assert (fresh.log_start_offset, fresh.log_end_offset, fresh.leader_epoch_cache.entries()) == (7, 7, [])
    fresh.append_as_leader(make_batch(2), 1, 0)
    fresh.close()
    again = open_log(storage, root, clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (7, 9)
    assert offsets_and_values(read_all(again)) == offsets_and_values(read_all(fresh))


def test_truncate_to_keeps_indexes_and_epochs_consistent(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    for i in range(30):
        log.append_as_leader(make_batch(2, tag=i), 1 + i // 10, 0)
    assert log.truncate_to(41)  # batch 40..41 straddles: it goes whole
    assert log.log_end_offset == 40
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 20)]
    assert [o for o, _, _ in offsets_and_values(read_all(log))] == list(range(40))
    assert not log.truncate_to(40)
    # Appends continue at the new LEO, and a new epoch starts there.
    assert log.append_as_leader(make_batch(2), 7, 0).base_offset == 40
    assert log.end_offset_for_epoch(2) == EpochEndOffset(2, 40)
    # Truncating into an older segment drops the later ones.
    assert log.truncate_to(5)
    assert log.log_end_offset == 4 and len(log.segments) == 1
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 0)]
    log.close()
    assert offsets_and_values(read_all(open_log(storage, root, clean_shutdown=True))) == offsets_and_values(
        read_all(log))


def test_truncate_fully_and_start_at_restarts_empty(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    for i in range(10):
        log.append_as_leader(make_batch(2), 3, 0)
    log.truncate_fully_and_start_at(500, now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (500, 500, 1)
    assert log.leader_epoch_cache.entries() == []
    assert log.read(0, 100, 500).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.append_as_leader(make_batch(1), 4, 0).base_offset == 500
    log.close()
    again = open_log(storage, root, clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (500, 501)


def test_follower_appends_keep_leader_offsets_and_must_go_forward(storage_root) -> None:
    storage, root = storage_root
    leader = open_log(SimStorage(), "/leader")
    for i in range(5):
        leader.append_as_leader(make_batch(2, tag=i), 4, 0)
    fetched = leader.read_records_bytes(leader.read(0, 10_000, 10).records)
    follower = open_log(storage, root)
    result = follower.append_as_follower(fetched, 0)
    assert (result.error_code, result.base_offset, result.last_offset) == (ErrorCode.NONE, 0, 9)
    assert follower.leader_epoch_cache.entries() == [EpochEntry(4, 0)]
    assert offsets_and_values(read_all(follower)) == offsets_and_values(read_all(leader))
    again = follower.append_as_follower(fetched, 0)
    assert again.error_code == ErrorCode.INVALID_RECORD and follower.log_end_offset == 10
    # A gap (a compacted leader) is accepted.
    gap = bytearray(make_batch(1))
    struct.pack_into(">q", gap, 0, 25)
    assert follower.append_as_follower(gap, 0).base_offset == 25
    assert follower.log_end_offset == 26


def test_retention_by_time_bytes_and_log_start_never_past_the_high_watermark(storage_root) -> None:
    storage, root = storage_root
    size = len(make_batch(2))
    log = open_log(storage, root, LogConfig(segment_bytes=size * 2, retention_ms=1000))
    for i in range(10):  # 5 segments of 2 batches, timestamps 0.., 100 apart per batch
        log.append_as_leader(make_batch(2, timestamp_ms=100 * i), 0, 0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12, 16]
    # Segment [0,4) has max timestamp 101; at now=1102 it is 1001 ms old.
    result = log.delete_old_segments(now_ms=1102, high_watermark=20)
    assert result.deleted_base_offsets == (0,) and log.log_start_offset == 4
    assert result.reasons == ("retention.ms",)
    # Everything expired, but the high watermark protects what followers may lack.
    result = log.delete_old_segments(now_ms=10**9, high_watermark=12)
    assert result.deleted_base_offsets == (4, 8) and log.log_start_offset == 12
    assert log.read(11, 100, 20).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # All of it expired and below the HW: the active segment goes too, after a roll.
    result = log.delete_old_segments(now_ms=10**9, high_watermark=20)
    assert result.deleted_base_offsets == (12, 16)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (20, 20, 1)
    assert log.append_as_leader(make_batch(1), 0, 0).base_offset == 20

    by_size = open_log(SimStorage(), "/s", LogConfig(segment_bytes=size * 2, retention_bytes=size * 5))
    for i in range(10):
        by_size.append_as_leader(make_batch(2), 0, 0)
    result = by_size.delete_old_segments(now_ms=0, high_watermark=20)
    # 10 batches, at most 5 kept but only whole segments go: 3 segments of 2 deleted.
    assert result.deleted_base_offsets == (0, 4) and by_size.size_bytes == 6 * size
    assert result.reasons == ("retention.bytes", "retention.bytes")

    compact_only = open_log(SimStorage(), "/c", LogConfig(segment_bytes=size * 2, retention_ms=0,
                                                          cleanup_policy="compact"))
    for i in range(6):
        compact_only.append_as_leader(make_batch(2), 0, 0)
    assert compact_only.delete_old_segments(10**9, 12).deleted_base_offsets == ()


def test_delete_records_moves_the_log_start_and_survives_restart(storage_root) -> None:
    storage, root = storage_root
    size = len(make_batch(2))
    log = open_log(storage, root, LogConfig(segment_bytes=size * 2))
    for i in range(6):
        log.append_as_leader(make_batch(2), i, 0)
    assert log.maybe_increment_log_start_offset(13, high_watermark=12) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.maybe_increment_log_start_offset(5, high_watermark=12) == ErrorCode.NONE
    assert log.log_start_offset == 5
    assert log.read(4, 100, 12).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    r = log.read(5, 10_000, 12)
    assert r.records.first_offset == 4  # the batch holding 5 comes back whole; clients skip 4
    assert log.leader_epoch_cache.entries()[0] == EpochEntry(2, 5)
    assert log.delete_old_segments(0, 12).deleted_base_offsets == (0,)
    assert log.segments[0].base_offset == 4 and log.log_start_offset == 5


def test_offset_for_timestamp_finds_the_first_record_at_or_after(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    for i in range(20):  # batch i: records at 1000 + 10 i + {0, 1, 2}
        log.append_as_leader(make_batch(3, timestamp_ms=1000 + 10 * i), i // 5, 0)
    assert log.offset_for_timestamp(1000) == TimestampAndOffset(1000, 0, 0)
    assert log.offset_for_timestamp(1052) == TimestampAndOffset(1052, 17, 1)
    assert log.offset_for_timestamp(1055) == TimestampAndOffset(1060, 18, 1)
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 60, 3)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(1192, 59, 3)
    log.close()
    reopened = open_log(storage, root, clean_shutdown=True)
    assert reopened.offset_for_timestamp(1055) == TimestampAndOffset(1060, 18, 1)


def test_flush_messages_policy_moves_the_recovery_point(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root, LogConfig(flush_messages=4))
    log.append_as_leader(make_batch(3), 0, 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(3), 0, 0)
    assert log.recovery_point == 6
    timed = open_log(SimStorage(), "/t", LogConfig(flush_ms=100))
    timed.append_as_leader(make_batch(1), 0, now_ms=0)
    assert timed.poll(50) == 50 and timed.recovery_point == 0
    timed.poll(100)
    assert timed.recovery_point == 1


def test_header_of_stored_batches_is_what_append_reported(storage_root) -> None:
    storage, root = storage_root
    log = open_log(storage, root)
    r = log.append_as_leader(make_batch(4), 9, 0)
    raw = storage.read(log.active_segment.log_path, r.position, 61)
    header = read_batch_header(raw)
    assert (header.base_offset, header.last_offset, header.partition_leader_epoch) == (0, 3, 9)


def test_a_read_slice_goes_out_through_sendfile_byte_for_byte(tmp_path: Path) -> None:
    import os
    import socket

    storage = FileStorage(open_files_max=2)
    log = open_log(storage, str(tmp_path / "t-0"))
    for i in range(30):
        log.append_as_leader(make_batch(3, tag=i), 0, 0)
    result = log.read(10, 1000, log.log_end_offset)
    slice_ = result.records
    expected = log.read_records_bytes(slice_)
    left, right = socket.socketpair()
    try:
        with storage.open_slice(slice_) as fd:
            position, remaining = slice_.position, slice_.length_bytes
            while remaining:
                sent = os.sendfile(left.fileno(), fd, position, remaining)
                position += sent
                remaining -= sent
        received = b""
        while len(received) < len(expected):
            received += right.recv(65536)
    finally:
        left.close()
        right.close()
        storage.close()
    assert received == expected
    assert [b.header.base_offset for b in decode_batches(received)][0] == 9


@pytest.mark.parametrize("index_interval_bytes", [300, 100])
def test_tail_reads_find_the_same_batches_as_a_scan_of_the_headers(storage_root, index_interval_bytes) -> None:
    """Segments find tail batches from memory (LogSegment._tail) instead of reading every
    header since the last index entry; every read must match the scan it replaces, on a
    second log given the same appends and made to scan. (An interval of 100 bytes: every
    batch starts one, and the tail keeps the previous interval.)"""
    storage, root = storage_root
    config = LogConfig(segment_bytes=100_000, index_interval_bytes=index_interval_bytes)
    live, reference = open_log(storage, root, config), open_log(storage, root + "-ref", config)
    for log in (live, reference):
        offset = 0
        for i in range(60):
            if i % 7 == 3:
                # A follower's append with an offset gap (a compacted leader's log): a
                # batch's base offset is not the last one's last offset + 1.
                batch = make_batch(1 + i % 3, tag=i)
                offset += 2
                struct.pack_into(">q", batch, 0, offset)
                offset = log.append_as_follower(batch, 0).last_offset + 1
            else:
                offset = log.append_as_leader(make_batch(1 + i % 3, tag=i), 0, 0).last_offset + 1

    def reads(log: PartitionLog) -> list:
        if log is reference:
            for segment in log.segments:
                segment._tail = None            # the header-scan path, as before the tail
        leo = log.log_end_offset
        out = []
        for start in range(leo + 1):
            for max_bytes in (0, 150, 100_000):
                for max_offset in (start + 1, leo // 2, leo):
                    for min_one_batch in (True, False):
                        r = log.read(start, max_bytes, max_offset, min_one_batch)
                        s = r.records
                        out.append((start, max_bytes, max_offset, min_one_batch, r.error_code,
                                    None if s is None else (s.position, s.length_bytes,
                                                            s.first_offset, s.last_offset)))
        return out

    assert reads(live) == reads(reference)
    for log in (live, reference):
        log.truncate_to(log.log_end_offset - 7)     # the tail is rebuilt from the index
        log.append_as_leader(make_batch(2, tag=99), 0, 0)
    assert reads(live) == reads(reference)


def test_a_new_log_from_offset_zero_is_on_disk_only_from_its_first_write(tmp_path: Path) -> None:
    # Deferred (storage.py): an idle new replica costs no mkdir. A restart before the
    # first write finds nothing, which is what a new replica from offset 0 is; one that
    # starts later is made at once, so its start survives a crash.
    storage = FileStorage()
    idle, later = str(tmp_path / "idle-0"), str(tmp_path / "later-0")
    log = open_log(storage, idle, new_replica=True)
    open_log(storage, later, log_start_offset=7, new_replica=True)
    open_log(storage, str(tmp_path / "future-0"))     # a move's future log: made at once
    assert not (tmp_path / "idle-0").exists() and (tmp_path / "later-0").is_dir()
    assert (tmp_path / "future-0").is_dir()
    log.assign_epoch_start(3, 0)
    log.close()                                 # a clean shutdown writes nothing for it
    assert not (tmp_path / "idle-0").exists()
    log = open_log(storage, str(tmp_path / "idle-1"), new_replica=True)
    log.append_as_leader(make_batch(2), 3, 0)
    assert sorted(p.name for p in (tmp_path / "idle-1").iterdir()) == ["00000000000000000000.log"]
    log.close()
    again = open_log(FileStorage(), str(tmp_path / "idle-1"), clean_shutdown=True, listed=True)
    assert again.log_end_offset == 2 and again.leader_epoch_cache.latest_epoch == 3
    # A follower below its leader's log start starts over there: that start is kept.
    behind = open_log(storage, str(tmp_path / "behind-0"), new_replica=True)
    behind.truncate_fully_and_start_at(500, now_ms=0)
    again = open_log(FileStorage(), str(tmp_path / "behind-0"), clean_shutdown=True, listed=True)
    assert (again.log_start_offset, again.log_end_offset) == (500, 500)
    storage.close()
