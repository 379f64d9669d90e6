"""Recovery after an unclean stop: torn tails, flipped bytes, zeros, lost indexes, swaps."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from _log_helpers import make_batch, offsets_and_values, read_all

from broker.log import FileStorage, LogConfig, PartitionLog, SimStorage
from broker.log.segment import segment_file_name

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=150)
BATCH = len(make_batch(3))


def build_log(storage, root: str, batches: int = 30) -> PartitionLog:
    log, _ = PartitionLog.open(storage, root, CONFIG, now_ms=0)
    for i in range(batches):
        log.append_as_leader(make_batch(3, tag=i), 1 + i // 10, now_ms=0)
    return log


def reopen(storage, root: str, recovery_point: int = 0):
    return PartitionLog.open(storage, root, CONFIG, now_ms=0, recovery_point=recovery_point)


def test_torn_tail_is_cut_to_the_last_whole_batch() -> None:
    storage = SimStorage()
    log = build_log(storage, "/d")
    expected = offsets_and_values(read_all(log))
    active = log.active_segment
    storage.cut(active.log_path, active.size_bytes - 7)
    recovered, report = reopen(storage, "/d", recovery_point=log.active_segment.base_offset)
    assert report.truncated_bytes == BATCH - 7
    assert "torn batch" in report.recovered_segments[-1].stop_reason
    assert recovered.log_end_offset == 87
    assert offsets_and_values(read_all(recovered)) == expected[:-3]
    assert storage.size(active.log_path) == active.size_bytes - BATCH


@pytest.mark.parametrize("where", ["records", "attributes", "crc", "length", "magic", "base_offset"])
def test_a_flipped_byte_is_detected_and_the_log_cut_before_it(where: str) -> None:
    storage = SimStorage()
    log = build_log(storage, "/d")
    expected = offsets_and_values(read_all(log))
    segment = log.segments[1]
    # Flip a byte of the third batch of the second segment.
    batch_pos = 2 * BATCH
    offset_in_batch = {"records": BATCH - 3, "attributes": 22, "crc": 18, "length": 9,
                       "magic": 16, "base_offset": 3}[where]
    storage.flip_byte(segment.log_path, batch_pos + offset_in_batch)
    later = [s.base_offset for s in log.segments[2:]]
    recovered, report = reopen(storage, "/d", recovery_point=0)
    first_bad_offset = segment.base_offset + 6
    assert recovered.log_end_offset == first_bad_offset
    assert offsets_and_values(read_all(recovered)) == expected[:first_bad_offset]
    assert report.deleted_segments == tuple(later)
    assert report.truncated_bytes > 0
    # Epochs past the cut are gone from the cache too.
    assert all(e.start_offset < first_bad_offset for e in recovered.leader_epoch_cache.entries())
    # Appends continue from the cut, and nothing corrupt is ever served.
    assert recovered.append_as_leader(make_batch(1), 9, 0).base_offset == first_bad_offset


def test_zero_filled_tail_and_garbage_are_cut() -> None:
    storage = SimStorage()
    log = build_log(storage, "/d", batches=3)
    path = log.active_segment.log_path
    size = storage.size(path)
    storage.write(path, size, bytes(500))
    recovered, report = reopen(storage, "/d")
    assert recovered.log_end_offset == 9 and report.truncated_bytes == 500
    storage.write(path, storage.size(path), os.urandom(300))
    recovered, report = reopen(storage, "/d")
    assert recovered.log_end_offset == 9 and report.truncated_bytes == 300


def test_recovery_starts_at_the_recovery_point_segment() -> None:
    storage = SimStorage()
    log = build_log(storage, "/d")
    log.flush(now_ms=0)
    recovered, report = reopen(storage, "/d", recovery_point=log.segments[-2].base_offset + 1)
    assert [r.base_offset for r in report.recovered_segments] == [s.base_offset for s in log.segments[-2:]]
    assert not report.dropped_anything
    assert offsets_and_values(read_all(recovered)) == offsets_and_values(read_all(log))


def test_missing_or_corrupt_index_files_are_rebuilt_on_use(tmp_path: Path) -> None:
    storage = FileStorage(open_files_max=4)
    root = str(tmp_path / "t-0")
    log = build_log(storage, root)
    expected = offsets_and_values(read_all(log))
    log.close()
    first = log.segments[0]
    os.unlink(first.index_path)
    with open(log.segments[1].index_path, "r+b") as f:
        f.write(struct.pack(">ii", 5, 10**6))  # a position past the log's end
    with open(log.segments[2].time_index_path, "ab") as f:
        f.write(b"\x00" * 5)  # not whole entries
    storage.close()
    reopened, report = PartitionLog.open(storage, root, CONFIG, now_ms=0, clean_shutdown=True)
    assert report.recovered_segments == ()
    assert offsets_and_values(read_all(reopened)) == expected
    assert reopened.offset_for_timestamp(1001).offset == 1
    reopened.close()
    assert os.path.getsize(first.index_path) % 8 == 0 and os.path.getsize(first.index_path) > 0
    storage.close()


def test_an_interrupted_compaction_swap_is_completed_on_load() -> None:
    storage = SimStorage()
    log = build_log(storage, "/d")
    expected = offsets_and_values(read_all(log))
    first, second = log.segments[0], log.segments[1]
    # A "cleaned" copy of the first two segments (here: their bytes as they are), renamed
    # to .swap, and the crash came before the old segments were deleted.
    data = storage.read(first.log_path, 0, first.size_bytes) + storage.read(second.log_path, 0, second.size_bytes)
    swap = f"/d/{segment_file_name(first.base_offset, '.log.swap')}"
    storage.create(swap)
    storage.write(swap, 0, data)
    storage.create(f"/d/{segment_file_name(0, '.log.cleaned')}")  # an unfinished pass
    recovered, report = reopen(storage, "/d")
    assert report.completed_swaps == (0,)
    assert [s.base_offset for s in recovered.segments][0:2] == [0, log.segments[2].base_offset]
    assert offsets_and_values(read_all(recovered)) == expected
    assert not any(name.endswith((".swap", ".cleaned")) for name in storage.list_dir("/d"))


class _CountingStorage(SimStorage):
    """SimStorage that records which paths were read whole and which dirs were made."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.made: list[str] = []

    def read_file(self, path: str) -> bytes | None:
        self.reads.append(path)
        return super().read_file(path)

    def make_new_dir(self, path: str, deferred: bool = False) -> bool:
        self.made.append(path)
        return super().make_new_dir(path, deferred)


def test_a_clean_restart_of_an_empty_log_opens_only_what_its_listing_names() -> None:
    # A restart of 100,000 idle partitions paid a mkdir and four opens of absent files
    # (two indexes, the epoch checkpoint, the log start offset) per partition.
    storage = _CountingStorage()
    log, _ = PartitionLog.open(storage, "/d/t-0", CONFIG, now_ms=0)
    log.close()
    storage.reads.clear()
    storage.made.clear()
    again, report = PartitionLog.open(storage, "/d/t-0", CONFIG, now_ms=0, clean_shutdown=True,
                                      listed=True)
    assert report.clean_shutdown and again.log_end_offset == 0
    assert storage.reads == [] and storage.made == []
    assert not again.active_segment.is_loaded        # loads on first use
    again.append_as_leader(make_batch(3), leader_epoch=1, now_ms=0)
    assert again.log_end_offset == 3 and again.active_segment.is_loaded
    again.close()
    # Once written, the epoch checkpoint and the indexes are there and are read.
    storage.reads.clear()
    third, report = PartitionLog.open(storage, "/d/t-0", CONFIG, now_ms=0, clean_shutdown=True,
                                      listed=True)
    assert report.clean_shutdown and third.log_end_offset == 3
    assert "/d/t-0/leader-epoch-checkpoint" in storage.reads
    assert third.active_segment.is_loaded
    assert [entry[0] for entry in offsets_and_values(read_all(third))] == [0, 1, 2]


def test_clean_shutdown_skips_recovery_but_a_bad_tail_still_triggers_it() -> None:
    storage = SimStorage()
    log = build_log(storage, "/d")
    log.close()
    again, report = PartitionLog.open(storage, "/d", CONFIG, now_ms=0, clean_shutdown=True,
                                      recovery_point=log.log_end_offset)
    assert report.clean_shutdown and report.recovered_segments == ()
    assert again.log_end_offset == 90
    again.close()
    storage.cut(again.active_segment.log_path, again.active_segment.size_bytes - 1)
    third, report = PartitionLog.open(storage, "/d", CONFIG, now_ms=0, clean_shutdown=True,
                                      recovery_point=log.log_end_offset)
    assert not report.clean_shutdown and report.truncated_bytes == BATCH - 1
    assert third.log_end_offset == 87
