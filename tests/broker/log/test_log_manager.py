"""LogManager: checkpoints, the clean-shutdown marker, polling duties, descriptor economy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _log_helpers import make_batch, offsets_and_values, read_all

from broker.log import FileStorage, LogConfig, LogManager, LogManagerConfig, SimStorage
from broker.log.log_manager import decode_offset_checkpoint, encode_offset_checkpoint


def test_offset_checkpoint_format_is_kafkas() -> None:
    data = encode_offset_checkpoint({("orders", 1): 42, ("a-b", 0): 7})
    assert data == b"0\n2\norders 1 42\na-b 0 7\n"      # unsorted, as Kafka's
    assert decode_offset_checkpoint(data) == {("orders", 1): 42, ("a-b", 0): 7}


def test_clean_shutdown_marker_and_recovery_points() -> None:
    storage = SimStorage()
    config = LogConfig(segment_bytes=800)
    manager, reports = LogManager.open(storage, "/data", now_ms=0, default_config=config)
    assert reports == {}
    log = manager.get_or_create_log("t", 3, now_ms=0)
    for i in range(20):
        log.append_as_leader(make_batch(2, tag=i), 0, 0)
    manager.shutdown()
    assert storage.exists("/data/.kafka_cleanshutdown")
    manager, reports = LogManager.open(storage, "/data", now_ms=0, default_config=config)
    assert reports[("t", 3)].clean_shutdown and reports[("t", 3)].recovered_segments == ()
    assert not storage.exists("/data/.kafka_cleanshutdown")  # a crash from now on is unclean
    log = manager.get_log("t", 3)
    assert log is not None and log.log_end_offset == 40
    # Unclean: only segments from the checkpointed recovery point are walked.
    log.flush(now_ms=0)
    manager.checkpoint_recovery_points()
    for i in range(3):
        log.append_as_leader(make_batch(2), 0, 0)
    manager, reports = LogManager.open(storage, "/data", now_ms=0, default_config=config)
    report = reports[("t", 3)]
    assert not report.clean_shutdown
    assert [r.base_offset for r in report.recovered_segments] == [manager.get_log("t", 3).segments[-1].base_offset]


def test_poll_flushes_runs_retention_and_writes_checkpoints() -> None:
    storage = SimStorage()
    config = LogConfig(segment_bytes=800, retention_ms=1_000, flush_ms=100)
    manager_config = LogManagerConfig(flush_offset_checkpoint_interval_ms=500,
                                      retention_check_interval_ms=2_000)
    manager, _ = LogManager.open(storage, "/data", now_ms=0, default_config=config,
                                 manager_config=manager_config)
    log = manager.get_or_create_log("t", 0, now_ms=0)
    for i in range(20):
        log.append_as_leader(make_batch(2, timestamp_ms=0), 0, now_ms=0)
    assert manager.poll(50) == 50  # flush.ms is due at 100
    assert log.recovery_point < log.log_end_offset
    manager.poll(100)
    assert log.recovery_point == log.log_end_offset
    manager.poll(500)
    points = decode_offset_checkpoint(storage.read("/data/recovery-point-offset-checkpoint", 0, 1000))
    assert points == {("t", 0): 40}
    assert manager.take_retention_moves() == []
    manager.poll(2_000)  # retention: everything is older than 1 s and below the LEO
    assert log.log_start_offset == 40 and len(log.segments) == 1
    # Taken once by the replica manager, which numbers them for the follower sessions.
    assert manager.take_retention_moves() == [("t", 0)] and manager.take_retention_moves() == []
    assert manager.delete_log("t", 0) and not storage.exists("/data/t-0")


def test_poll_visits_only_logs_with_duties_and_keeps_flush_ms_and_delayed_deletes() -> None:
    storage = SimStorage()
    config = LogConfig(segment_bytes=800, retention_ms=1_000, flush_ms=100, file_delete_delay_ms=300)
    manager, _ = LogManager.open(storage, "/data", now_ms=0, default_config=config,
                                 manager_config=LogManagerConfig(retention_check_interval_ms=2_000))
    logs = [manager.get_or_create_log("t", i, now_ms=0) for i in range(50)]
    assert manager.logs_due == 0            # idle logs are never visited
    manager.poll(1_000)
    # flush.ms counts from the first unflushed message, however long the log was idle.
    busy = logs[7]
    for _ in range(20):
        busy.append_as_leader(make_batch(2, timestamp_ms=0), 0, now_ms=1_050)
    assert manager.logs_due == 1
    assert manager.poll(1_100) == 50 and busy.recovery_point < busy.log_end_offset
    manager.poll(1_150)
    assert busy.recovery_point == busy.log_end_offset == 40
    assert manager.logs_due == 0            # flushed: idle again
    # Retention retires its old segments; the files go file.delete.delay.ms later.
    manager.poll(2_000)
    retired = [n for n in storage.list_dir(busy.dir_path) if n.endswith(".deleted")]
    assert retired and manager.logs_due == 1
    manager.poll(2_299)
    assert all(storage.exists(f"{busy.dir_path}/{n}") for n in retired)
    manager.poll(2_300)
    assert not any(storage.exists(f"{busy.dir_path}/{n}") for n in retired)
    assert manager.logs_due == 0
    # Unflushed messages under a flush.ms beyond any deadline keep the log in view, so
    # a config change that shortens flush.ms takes effect.
    other = logs[3]
    other.update_config(LogConfig(flush_ms=2**40))
    other.append_as_leader(make_batch(2), 0, now_ms=3_000)
    manager.poll(3_000)
    assert manager.logs_due == 1 and other.recovery_point == 0
    other.update_config(LogConfig(flush_ms=10))
    manager.poll(3_010)
    assert other.recovery_point == other.log_end_offset and manager.logs_due == 0


def test_delete_records_start_offset_survives_a_crash() -> None:
    storage = SimStorage()
    manager, _ = LogManager.open(storage, "/data", now_ms=0)
    log = manager.get_or_create_log("t", 0, now_ms=0)
    for _ in range(5):
        log.append_as_leader(make_batch(2), 0, 0)
    log.flush(0)
    assert log.maybe_increment_log_start_offset(7, high_watermark=10) == 0
    storage.crash(__import__("random").Random(1))
    manager, _ = LogManager.open(storage, "/data", now_ms=0)  # no shutdown: a crash
    assert manager.get_log("t", 0).log_start_offset == 7


@pytest.mark.process
def test_many_partitions_stay_under_the_descriptor_limit(tmp_path: Path) -> None:
    """400 partitions (the bench does 10,000) with a 32-descriptor LRU: appends, reads,
    rolls, a clean restart and an unclean one never hold more than the LRU's size open."""
    partitions = 400
    fds_before = len(os.listdir("/proc/self/fd"))
    storage = FileStorage(open_files_max=32)
    config = LogConfig(segment_bytes=4096)
    manager, _ = LogManager.open(storage, str(tmp_path), now_ms=0, default_config=config)
    peak = 0
    for p in range(partitions):
        log = manager.get_or_create_log("many", p, now_ms=0)
        for _ in range(3):  # 3 batches of ~1.4 KiB: each partition rolls once
            log.append_as_leader(make_batch(10, value_bytes=120, tag=p % 1000), 0, 0)
        if p % 97 == 0:
            peak = max(peak, len(os.listdir("/proc/self/fd")) - fds_before)
    for p in range(0, partitions, 7):
        log = manager.get_log("many", p)
        assert [o for o, _, _ in offsets_and_values(read_all(log))] == list(range(30))
    peak = max(peak, len(os.listdir("/proc/self/fd")) - fds_before)
    assert peak <= 32 + 2 and storage.open_files <= 32
    manager.shutdown()
    storage = FileStorage(open_files_max=32)
    manager, reports = LogManager.open(storage, str(tmp_path), now_ms=0, default_config=config)
    assert len(reports) == partitions and all(r.clean_shutdown for r in reports.values())
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 32 + 2
    assert manager.get_log("many", 399).log_end_offset == 30
    # Unclean restart: every active segment is recovered, descriptors stay bounded.
    storage.close()
    storage = FileStorage(open_files_max=32)
    manager, reports = LogManager.open(storage, str(tmp_path), now_ms=0, default_config=config)
    assert not any(r.clean_shutdown for r in reports.values())
    assert not any(r.dropped_anything for r in reports.values())
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 32 + 2
    manager.shutdown()


def test_a_crash_in_the_middle_of_a_shutdown_is_an_unclean_start_that_loses_nothing_durable() -> None:
    import random

    storage = SimStorage()
    manager, _ = LogManager.open(storage, "/data", now_ms=0, default_config=LogConfig(segment_bytes=600))
    logs = [manager.get_or_create_log("t", p, now_ms=0) for p in range(3)]
    for epoch, log in enumerate(logs):
        for _ in range(8):
            log.append_as_leader(make_batch(2), epoch + 1, 0)
        log.flush(now_ms=0)
        log.append_as_leader(make_batch(2), epoch + 5, 0)  # a new epoch, not yet durable
    expected = {p: (log.recovery_point, offsets_and_values(read_all(log))) for p, log in enumerate(logs)}
    manager.checkpoint_recovery_points()
    for log in logs:
        log.close(fsync=False)  # shutdown's first phase; the sync never happens
    storage.crash(random.Random(5))
    manager, reports = LogManager.open(storage, "/data", now_ms=0, default_config=LogConfig(segment_bytes=600))
    assert not any(r.clean_shutdown for r in reports.values())
    assert not any(name.endswith(".tmp") for name in storage.list_dir("/data/t-0"))
    for p, (durable, records) in expected.items():
        log = manager.get_log("t", p)
        got = offsets_and_values(read_all(log))
        assert got == records[: len(got)] and len(got) >= durable
        # Epochs below the recovery point survived; the new one only if its batch did.
        assert log.leader_epoch_cache.entries()[0].epoch == p + 1
        assert log.latest_epoch in (p + 1, p + 5)
