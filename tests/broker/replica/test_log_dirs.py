"""Several log directories (JBOD) in the data-plane core, driven by hand: placement, a
log moved between directories (AlterReplicaLogDirs) while it keeps taking appends, a
restart in the middle of a move, and a directory failure (broker.replica_manager,
broker.log.log_manager)."""
from __future__ import annotations

import os
import uuid

import pytest

from broker.log import FileStorage, LogManager
from broker.log.log_manager import (
    DELETE_SUFFIX, FUTURE_SUFFIX, choose_log_dir, parse_partition_dir_name, parse_suffixed_dir_name,
)
from broker.replica_manager import LogDirFailed, ReplicaManager
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch, decode_batches
from clients.types import TopicPartition
from metadata_harness import Metadata

TOPIC_ID = uuid.UUID(int=7)


def batch(n: int, start: int = 0) -> bytes:
    return bytes(build_batch([Record(i, 0, None, b"v%d" % (start + i)) for i in range(n)]))


def test_choose_log_dir_takes_the_fewest_logs_first_listed_on_a_tie() -> None:
    dirs = ["/a", "/b", "/c"]
    assert choose_log_dir(dirs, {}, ()) == "/a"
    assert choose_log_dir(dirs, {"/a": 2, "/b": 1, "/c": 1}, ()) == "/b"
    assert choose_log_dir(dirs, {"/a": 2, "/b": 1, "/c": 1}, {"/b"}) == "/c"
    assert choose_log_dir(dirs, {}, {"/a", "/b", "/c"}) is None


def test_future_and_delete_dir_names_are_not_partitions() -> None:
    name = "orders-3.00000000000a00000000000000000001" + FUTURE_SUFFIX
    assert parse_partition_dir_name(name) is None
    assert parse_suffixed_dir_name(name, FUTURE_SUFFIX) == ("orders", 3)
    assert parse_suffixed_dir_name("orders-3.abc" + DELETE_SUFFIX, DELETE_SUFFIX) == ("orders", 3)
    assert parse_suffixed_dir_name("orders-3", FUTURE_SUFFIX) is None


def open_core(tmp_path, partitions: int = 4) -> tuple[ReplicaManager, list[str], Metadata]:
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0)
    core = ReplicaManager(1, logs, {}, replica_lag_time_max_ms=10_000)
    meta = Metadata()
    core.apply_metadata(*meta.commit(
        M.RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=11,
                               fenced=False),
        M.TopicRecord(name="t", topic_id=TOPIC_ID),
        *[M.PartitionRecord(partition_id=i, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1,
                            leader_epoch=3, partition_epoch=1) for i in range(partitions)]), 0)
    core.take_effects()
    return core, dirs, meta


def reopen(core: ReplicaManager, dirs: list[str], meta: Metadata) -> ReplicaManager:
    core.shutdown()
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0)
    again = ReplicaManager(1, logs, {}, replica_lag_time_max_ms=10_000)
    again.apply_metadata(meta.image, None, 0)
    again.take_effects()
    return again


def values(core: ReplicaManager, tp: TopicPartition) -> list[bytes]:
    plog = core.partitions[tp].log
    result = plog.read(0, 1 << 30, plog.log_end_offset)
    return [r.value for b in decode_batches(plog.read_records_bytes(result.records)) for r in b.records]


def test_new_partitions_spread_over_the_dirs_and_a_restart_finds_each(tmp_path) -> None:
    core, dirs, meta = open_core(tmp_path)
    placed = {tp.partition: core.logs.log_dir_of(tp.topic, tp.partition) for tp in core.partitions}
    assert placed == {0: dirs[0], 1: dirs[1], 2: dirs[0], 3: dirs[1]}
    for tp in core.partitions:
        core.append(tp, batch(2), acks=1, now_ms=1)
    core.checkpoint_high_watermarks()
    for d in dirs:
        with open(os.path.join(d, "replication-offset-checkpoint")) as f:
            assert f.read()     # one checkpoint per dir
    core = reopen(core, dirs, meta)
    assert {tp.partition: core.logs.log_dir_of(tp.topic, tp.partition) for tp in core.partitions} == placed
    assert all(core.partitions[tp].log.log_end_offset == 2 for tp in core.partitions)


def test_the_hw_checkpoint_is_written_again_only_after_an_hw_moved_or_a_log_did(tmp_path) -> None:
    """At 100k partitions grouping and encoding every HW took 10-20 % of an idle broker's
    time every 5 s: files that would be written the same are not written again."""
    core, dirs, meta = open_core(tmp_path, partitions=2)
    tp = TopicPartition("t", 0)
    assert {w.log_dir for w in core.high_watermark_checkpoints()} == set(dirs)
    assert core.high_watermark_checkpoints() == [], "nothing moved"
    core.append(tp, batch(2), acks=1, now_ms=1)
    writes = {w.log_dir: w.data for w in core.high_watermark_checkpoints()}
    assert set(writes) == set(dirs) and core.high_watermark_checkpoints() == []
    # A HW of 0 has no entry (absent reads as 0): the files name what was written.
    assert b"t 0 2" in writes[dirs[0]] and all(b"t 1 " not in data for data in writes.values())
    # A log moved to the other directory: both files change, though no HW did.
    assert core.alter_replica_log_dir(tp, dirs[1], now_ms=2) == ErrorCode.NONE
    core.poll(3)
    assert core.logs.log_dir_of("t", 0) == dirs[1]
    writes = {w.log_dir: w.data for w in core.high_watermark_checkpoints()}
    assert set(writes) == set(dirs) and b"t 0 2" in writes[dirs[1]] and b"t 0" not in writes[dirs[0]]
    # The topic deleted: its entries leave the files (a topic made again with its name
    # must not start from them after a restart), though no HW moved.
    core.apply_metadata(*meta.commit(M.RemoveTopicRecord(topic_id=TOPIC_ID)), 4)
    writes = {w.log_dir: w.data for w in core.high_watermark_checkpoints()}
    assert writes and all(b"t 0" not in data for data in writes.values())


def test_a_moved_log_keeps_every_record_appended_during_the_move(tmp_path) -> None:
    core, dirs, _ = open_core(tmp_path, partitions=1)
    tp = TopicPartition("t", 0)
    assert core.logs.log_dir_of("t", 0) == dirs[0]
    for i in range(20):
        core.append(tp, batch(5, 5 * i), acks=1, now_ms=1)
    assert core.alter_replica_log_dir(tp, dirs[0], now_ms=2) == ErrorCode.NONE   # already there
    assert core.logs.future_log("t", 0) is None
    assert core.alter_replica_log_dir(tp, dirs[1] + "/", now_ms=2) == ErrorCode.NONE
    future = core.logs.future_log("t", 0)
    assert future is not None and os.path.basename(future.dir_path).endswith(FUTURE_SUFFIX)
    # DescribeLogDirs shows the future log with its lag behind the current one.
    [d1, d2] = core.describe_log_dirs(None)
    assert [r.is_future for r in d1.replicas] == [False] and [(r.is_future, r.offset_lag)
                                                            for r in d2.replicas] == [(True, 100)]
    core.append(tp, batch(5, 100), acks=1, now_ms=3)      # appends go on meanwhile
    core.poll(4)
    assert core.logs.future_log("t", 0) is None
    assert core.logs.log_dir_of("t", 0) == dirs[1]
    assert [n for n in os.listdir(dirs[1]) if n.startswith("t-0")] == ["t-0"]
    [retired] = [n for n in os.listdir(dirs[0]) if n.startswith("t-0")]
    assert retired.endswith(DELETE_SUFFIX)
    for now in range(5, 15):        # removed a file a poll
        core.poll(now)
    assert not any(n.startswith("t-0") for n in os.listdir(dirs[0]))
    assert values(core, tp) == [b"v%d" % i for i in range(105)]
    assert core.partitions[tp].log.leader_epoch_cache.latest_epoch == 3
    result = core.append(tp, batch(1, 105), acks=1, now_ms=5)
    assert result.error_code == ErrorCode.NONE and result.base_offset == 105
    core.shutdown()     # nothing of the retired log is left to write: both dirs stop clean
    assert all(os.path.exists(os.path.join(d, ".kafka_cleanshutdown")) for d in dirs)


def test_alter_replica_log_dir_errors(tmp_path) -> None:
    core, dirs, _ = open_core(tmp_path, partitions=1)
    tp = TopicPartition("t", 0)
    assert core.alter_replica_log_dir(tp, str(tmp_path / "elsewhere"), 1) == ErrorCode.LOG_DIR_NOT_FOUND
    assert core.alter_replica_log_dir(TopicPartition("t", 9), dirs[1], 1) == ErrorCode.REPLICA_NOT_AVAILABLE


def test_a_restart_in_the_middle_of_a_move_resumes_it(tmp_path) -> None:
    core, dirs, meta = open_core(tmp_path, partitions=1)
    tp = TopicPartition("t", 0)
    core.append(tp, batch(10), acks=1, now_ms=1)
    assert core.alter_replica_log_dir(tp, dirs[1], now_ms=2) == ErrorCode.NONE
    core = reopen(core, dirs, meta)     # the move never polled: the future log is empty
    assert core.logs.future_log("t", 0) is not None
    core.poll(3)
    assert core.logs.log_dir_of("t", 0) == dirs[1]
    assert values(core, tp) == [b"v%d" % i for i in range(10)]


def test_an_interrupted_swap_is_completed_at_load(tmp_path) -> None:
    """A crash after the current log was retired and before the future log was renamed:
    the next load promotes the future log and removes the retired one."""
    core, dirs, meta = open_core(tmp_path, partitions=1)
    tp = TopicPartition("t", 0)
    core.append(tp, batch(10), acks=1, now_ms=1)
    core.alter_replica_log_dir(tp, dirs[1], now_ms=2)
    future = core.logs.future_log("t", 0)
    assert future is not None
    # Copy by hand without swapping, then retire the current log the way the swap does.
    current = core.partitions[tp].log
    data = current.read_records_bytes(current.read(0, 1 << 20, current.log_end_offset).records)
    future.append_as_follower(data, 3)
    core.shutdown()
    os.rename(os.path.join(dirs[0], "t-0"), os.path.join(dirs[0], "t-0.ab12" + DELETE_SUFFIX))
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0)
    assert logs.log_dir_of("t", 0) == dirs[1] and logs.future_log("t", 0) is None
    assert not any(n.startswith("t-0") for n in os.listdir(dirs[0]))
    assert logs.get_log("t", 0).log_end_offset == 10
    logs.shutdown()


def test_a_failed_dir_takes_its_replicas_offline_and_they_answer_storage_errors(tmp_path) -> None:
    core, dirs, meta = open_core(tmp_path)
    for tp in list(core.partitions):
        core.append(tp, batch(2), acks=1, now_ms=1)
    lost = {tp for tp in core.partitions if core.logs.log_dir_of(tp.topic, tp.partition) == dirs[0]}
    # The directory goes away (a failed disk): open files still take writes, but the next
    # file the broker creates there (here the periodic HW checkpoint) fails.
    os.rename(dirs[0], dirs[0] + ".gone")
    core.checkpoint_high_watermarks()
    effects = core.take_effects()
    assert LogDirFailed(dirs[0], frozenset(lost)) in effects
    assert set(core.offline_partitions) == lost
    from broker.metrics import BrokerStateCollector
    gauges = {m.name: m.samples[0].value for m in BrokerStateCollector(
        core, lambda: (0, 0), lambda: 0, lambda: 0).collect() if len(m.samples) == 1}
    assert gauges["kafka_server_replicamanager_offlinereplicacount"] == len(lost)
    assert gauges["kafka_log_logmanager_offlinelogdirectorycount"] == 1
    for tp in lost:
        assert core.read(tp, 0, 1 << 20, -1, -1, 3, True).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert core.append(tp, batch(1), acks=1, now_ms=3).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    # The metadata does not bring them back as empty logs in the healthy dir.
    core.apply_metadata(meta.image, None, 4)
    assert set(core.partitions) == {TopicPartition("t", i) for i in range(4)} - lost
    healthy = next(iter(core.partitions))
    assert core.append(healthy, batch(1, 2), acks=1, now_ms=5).base_offset == 2
    [d1, d2] = core.describe_log_dirs(None)
    assert not d1.online and d2.online
    assert core.alter_replica_log_dir(healthy, dirs[0], 6) == ErrorCode.KAFKA_STORAGE_ERROR
    core.shutdown()     # skips the offline dir, does not raise


def test_a_swap_leaves_nothing_of_the_retired_log_to_write_at_shutdown(tmp_path) -> None:
    """The retired log's unwritten epoch checkpoint must not wait for the shutdown's
    sync: its directory is gone by then (found by the process test: no dir stopped clean)."""
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0)
    current = logs.get_or_create_log("t", 0, 0)
    for epoch in range(3):      # new epochs from a leader leave the checkpoint dirty
        current.append_as_follower(build_batch([Record(epoch, 0, None, b"x")], base_offset=epoch,
                                               partition_leader_epoch=epoch), 1)
    future = logs.create_future_log("t", 0, dirs[1], 2)
    future.append_as_follower(current.read_records_bytes(current.read(0, 1 << 20, 3).records), 3)
    logs.replace_current_with_future("t", 0, 4)
    logs.shutdown()
    assert all(os.path.exists(os.path.join(d, ".kafka_cleanshutdown")) for d in dirs)
    again, _ = LogManager.open(FileStorage(), dirs, now_ms=5)
    assert again.log_dir_of("t", 0) == dirs[1]
    assert [(e.epoch, e.start_offset) for e in again.get_log("t", 0).leader_epoch_cache.entries()] == \
        [(0, 0), (1, 1), (2, 2)]
    again.shutdown()


@pytest.mark.parametrize("storage_kind", ["file", "sim"])
def test_a_log_moved_away_and_back_reads_and_appends_its_own_files(tmp_path, storage_kind) -> None:
    """Moving back reuses the first directory's paths: no handle or slice of the retired
    files may reach the new ones (the storage forgets a renamed tree)."""
    from broker.log import SimStorage
    storage = FileStorage() if storage_kind == "file" else SimStorage()
    base = str(tmp_path) if storage_kind == "file" else "/data"
    dirs = [f"{base}/d1", f"{base}/d2"]
    logs, _ = LogManager.open(storage, dirs, now_ms=0)
    log0 = logs.get_or_create_log("t", 0, 0)
    offset = 0
    for round_trip, dest in enumerate([dirs[1], dirs[0], dirs[1]]):
        for _ in range(3):
            log0.append_as_follower(build_batch([Record(offset, 0, None, b"v%d" % offset)],
                                                base_offset=offset, partition_leader_epoch=0), 1)
            offset += 1
        future = logs.create_future_log("t", 0, dest, 2 + round_trip)
        future.append_as_follower(log0.read_records_bytes(log0.read(0, 1 << 20, offset).records), 3)
        log0 = logs.replace_current_with_future("t", 0, 4)
        assert logs.log_dir_of("t", 0) == dest
        data = log0.read_records_bytes(log0.read(0, 1 << 20, offset).records)
        assert [r.value for b in decode_batches(data) for r in b.records] == \
            [b"v%d" % i for i in range(offset)]
    logs.shutdown()


def test_a_restart_with_a_dir_offline_does_not_recreate_its_replicas_elsewhere(tmp_path) -> None:
    core, dirs, meta = open_core(tmp_path)
    lost = {tp for tp in core.partitions if core.logs.log_dir_of(tp.topic, tp.partition) == dirs[0]}
    for tp in core.partitions:
        core.append(tp, batch(2), acks=1, now_ms=1)
    core.shutdown()
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0, offline_dirs=[dirs[0]])
    core = ReplicaManager(1, logs, {}, replica_lag_time_max_ms=10_000)
    core.apply_metadata(meta.image, None, 0)
    assert core.offline_partitions == lost
    assert all(core.logs.log_dir_of(tp.topic, tp.partition) == dirs[1] for tp in core.partitions)
    for tp in lost:
        assert core.append(tp, batch(1), acks=1, now_ms=1).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    # A partition created now is new here: it goes to the online dir.
    core.apply_metadata(*meta.commit(M.PartitionRecord(
        partition_id=9, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1, leader_epoch=0,
        partition_epoch=0)), 2)
    assert core.logs.log_dir_of("t", 9) == dirs[1]
    core.shutdown()


def test_a_follower_truncated_during_a_move_truncates_the_copy_too(tmp_path) -> None:
    """The copy must never keep records its source cut: a new leader's records at the same
    offsets would otherwise be swapped out for the old ones (Kafka truncates the future
    log with the current one, too)."""
    from broker.replica_manager import EpochAnswer, FetchedPartition

    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    logs, _ = LogManager.open(FileStorage(), dirs, now_ms=0)
    core = ReplicaManager(2, logs, {}, replica_lag_time_max_ms=10_000)
    meta = Metadata()
    core.apply_metadata(*meta.commit(
        *[M.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=10 + b,
                                 fenced=False) for b in (1, 2)],
        M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                          leader_epoch=3, partition_epoch=0)), 0)
    tp = TopicPartition("t", 0)

    def records(start: int, n: int, epoch: int, tag: bytes) -> bytes:
        return bytes(build_batch([Record(start + i, 0, None, tag + b"%d" % (start + i)) for i in range(n)],
                                 base_offset=start, partition_leader_epoch=epoch))
    work = core.follower_work(1, 0)
    core.handle_fetched(work, [FetchedPartition(tp, ErrorCode.NONE, 0, 0,
                                                records(0, 2, 3, b"old") + records(2, 3, 3, b"old"))], 1)
    assert core.alter_replica_log_dir(tp, dirs[1], 2) == ErrorCode.NONE
    # The copy has everything so far (an earlier poll copied it) ...
    current, future = core.partitions[tp].log, core.logs.future_log("t", 0)
    future.append_as_follower(current.read_records_bytes(current.read(0, 1 << 20, 5).records), 3)
    # ... when a new leader (epoch 4) that has only offsets 0-1 makes this follower truncate,
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1)), 4)
    work = core.follower_work(1, 5)
    core.handle_epoch_answers(work, [EpochAnswer(tp, ErrorCode.NONE, 3, 2)], 6)
    assert current.log_end_offset == 2 and future.log_end_offset == 2
    # and then fetch the new leader's records at the same offsets.
    work = core.follower_work(1, 7)
    core.handle_fetched(work, [FetchedPartition(tp, ErrorCode.NONE, 0, 0, records(2, 3, 4, b"new"))], 8)
    core.poll(9)
    assert core.logs.log_dir_of("t", 0) == dirs[1]
    assert values(core, tp) == [b"old0", b"old1", b"new2", b"new3", b"new4"]
    core.shutdown()
