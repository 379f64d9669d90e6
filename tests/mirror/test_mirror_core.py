"""The mirror fetcher core (broker.mirror) driven by hand between two real data-plane
cores: a source cluster's leader (``ReplicaManager`` answering Fetch / OffsetForLeaderEpoch
as it does for a consumer) and a destination leader of a mirror topic. No process, no
socket, no clock."""
from __future__ import annotations

import uuid

from broker.log import FileStorage, LogManager
from broker.mirror import (
    MirrorAssignment, MirrorLinkCore, MirrorPartitionState, SourceEpochAnswer, SourceFetched,
    SourcePartitionMetadata,
)
from broker.mirror._port import ReplicaManagerPort
from broker.replica_manager import ReplicaManager, record_epoch_for_leader
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch, iter_batches
from clients.types import TopicPartition
from tests.broker.replica.metadata_harness import Metadata

SRC = TopicPartition("s", 0)
DST = TopicPartition("m", 0)
SRC_ID = uuid.UUID(int=1)
DST_ID = uuid.UUID(int=2)
TOPIC = 2      # ConfigResourceType.TOPIC


def broker(broker_id: int) -> M.RegisterBrokerRecord:
    return M.RegisterBrokerRecord(broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id),
                                  broker_epoch=10, fenced=False)


def batch(n: int, start: int = 0, producer_id: int = -1) -> bytes:
    return bytes(build_batch([Record(i, 1000 + start + i, None, b"v%d" % (start + i))
                              for i in range(n)], producer_id=producer_id, producer_epoch=0,
                             base_sequence=start if producer_id >= 0 else -1))


class Source:
    """One source partition led by a real core at ``leader_epoch``."""

    def __init__(self, tmp_path, name: str, leader_epoch: int) -> None:
        logs, _ = LogManager.open(FileStorage(), str(tmp_path / name), now_ms=0)
        self.core = ReplicaManager(1, logs, {})
        self.meta = Metadata()
        self.core.apply_metadata(*self.meta.commit(
            broker(1), M.TopicRecord(name="s", topic_id=SRC_ID),
            M.PartitionRecord(partition_id=0, topic_id=SRC_ID, replicas=[1], isr=[1], leader=1,
                              leader_epoch=leader_epoch, partition_epoch=0)), 0)

    @property
    def leader_epoch(self) -> int:
        return self.core.partitions[SRC].replica.leader_epoch

    def new_epoch(self, leader_epoch: int) -> None:
        """A leader change (to the same broker) bumps the epoch by one."""
        self.core.apply_metadata(*self.meta.commit(M.PartitionChangeRecord(
            partition_id=0, topic_id=SRC_ID, leader=1)), 0)
        assert self.leader_epoch == leader_epoch

    def produce(self, records: bytes) -> None:
        assert self.core.append(SRC, records, acks=1, now_ms=5).error_code == ErrorCode.NONE

    def answer_epochs(self, work) -> list[SourceEpochAnswer]:
        out = []
        for q in work.epoch_queries:
            code, epoch, end = self.core.end_offset_for_epoch(q.source, q.leader_epoch,
                                                               q.current_leader_epoch)
            out.append(SourceEpochAnswer(q.source, code, epoch, end))
        return out

    def answer_fetches(self, work, max_bytes: int = 1 << 20) -> list[SourceFetched]:
        out = []
        for f in work.fetches:
            r = self.core.read(f.source, f.fetch_offset, max_bytes, f.current_leader_epoch,
                               replica_id=-1, now_ms=6, min_one_batch=True)
            data = None if r.records is None else r.log.read_records_bytes(r.records)
            out.append(SourceFetched(f.source, r.error_code, r.high_watermark, r.log_start_offset, data))
        return out


def log_bytes(core: ReplicaManager, tp: TopicPartition) -> bytes:
    plog = core.partitions[tp].log
    result = plog.read(plog.log_start_offset, 1 << 24, plog.log_end_offset, True)
    return plog.read_records_bytes(result.records) if not result.records.is_empty else b""


class Destination:
    def __init__(self, tmp_path, leader_epoch: int = 0) -> None:
        logs, _ = LogManager.open(FileStorage(), str(tmp_path / "dst"), now_ms=0)
        self.core = ReplicaManager(1, logs, {})
        self.meta = Metadata()
        self.core.apply_metadata(*self.meta.commit(
            broker(1), M.TopicRecord(name="m", topic_id=DST_ID),
            *self.config_records(link="L", source="s", state="active"),
            M.PartitionRecord(partition_id=0, topic_id=DST_ID, replicas=[1], isr=[1], leader=1,
                              leader_epoch=leader_epoch, partition_epoch=0)), 0)
        self.mirror = MirrorLinkCore("L", ReplicaManagerPort(lambda step: step(self.core)),
                                     backoff_ms=100, backoff_max_ms=1_000)
        self.assign(0)

    @staticmethod
    def config_records(**values: str) -> list:
        keys = {"link": "ketch.mirror.link", "source": "ketch.mirror.source.topic",
                "state": "ketch.mirror.state"}
        return [M.ConfigRecord(resource_type=TOPIC, resource_name="m", name=keys[k], value=v)
                for k, v in values.items()]

    def set_state(self, state: str, now_ms: int = 0) -> None:
        self.core.apply_metadata(*self.meta.commit(*self.config_records(state=state)), now_ms)
        self.assign(now_ms)

    def assign(self, now_ms: int) -> None:
        self.mirror.assign([MirrorAssignment(m.partition, TopicPartition(m.mirror.source_topic, 0),
                                             m.leader_epoch)
                            for m in self.core.mirror_leaderships()], now_ms)

    def pump(self, source: Source, now_ms: int = 10, rounds: int = 10) -> None:
        """Metadata naming ``source`` as leader, then request rounds until nothing moves."""
        if self.mirror.metadata_due(now_ms):
            self.mirror.handle_metadata([SourcePartitionMetadata(SRC, ErrorCode.NONE, 1,
                                                                 source.leader_epoch)], now_ms)
        for _ in range(rounds):
            work = self.mirror.work(1, now_ms)
            if not work.epoch_queries and not work.fetches:
                return
            if work.epoch_queries:
                self.mirror.handle_epoch_answers(work, source.answer_epochs(work), now_ms)
            else:
                self.mirror.handle_fetched(work, source.answer_fetches(work), now_ms)

    @property
    def log(self):
        return self.core.partitions[DST].log


def test_batches_arrive_byte_identical_at_the_same_offsets_with_the_source_epochs(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=3)
    dst = Destination(tmp_path, leader_epoch=0)
    for i in range(4):
        source.produce(batch(3, 3 * (i // 2), producer_id=7) if i % 2 else batch(2))
    dst.pump(source)
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)
    assert dst.log.log_end_offset == 10
    # The cache holds the source's epoch only: the destination leader added none of its own.
    assert [(e.epoch, e.start_offset) for e in dst.log.leader_epoch_cache.entries()] == [(3, 0)]
    [status] = dst.mirror.status()
    assert status.state is MirrorPartitionState.FETCHING and status.lag == 0
    assert status.last_error == ""
    # Producer state followed the batches (idempotent producer 7 is known).
    assert dst.core.partitions[DST].producers.active_producers()


def test_a_partial_batch_at_the_end_of_a_fetch_waits_for_the_next_one(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=1)
    dst = Destination(tmp_path)
    source.produce(batch(5))
    source.produce(batch(5, 5))
    dst.mirror.handle_metadata([SourcePartitionMetadata(SRC, ErrorCode.NONE, 1, 1)], 0)
    work = dst.mirror.work(1, 0)
    [answer] = source.answer_fetches(work)
    first_size = next(iter_batches(answer.records))[1].size_in_bytes
    cut = SourceFetched(SRC, ErrorCode.NONE, answer.high_watermark, 0, answer.records[:first_size + 20])
    dst.mirror.handle_fetched(work, [cut], 0)
    assert dst.log.log_end_offset == 5
    assert dst.mirror.status()[0].lag == 5
    dst.pump(source)
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)


def test_writes_to_an_active_or_stopped_mirror_are_refused_with_a_message(tmp_path) -> None:
    dst = Destination(tmp_path)
    for state in ("active", "stopped"):
        if state == "stopped":
            dst.set_state("stopped")
        result = dst.core.append(DST, batch(1), acks=1, now_ms=1)
        assert result.error_code == ErrorCode.INVALID_REQUEST
        assert "read-only mirror of L:s" in result.error_message
        assert "ketch mirror promote m" in result.error_message
        assert dst.core.delete_records(DST, 0)[0] == ErrorCode.INVALID_REQUEST
    dst.set_state("promoted")
    assert dst.core.append(DST, batch(1), acks=1, now_ms=1).error_code == ErrorCode.NONE


def test_source_unclean_failover_truncates_the_mirror_to_the_new_leaders_history(tmp_path) -> None:
    """KIP-101's divergence, across clusters: the mirror copied offsets 3..5 of epoch 3
    from a source leader whose successor (epoch 4) never had them."""
    old = Source(tmp_path, "old", leader_epoch=3)
    new = Source(tmp_path, "new", leader_epoch=3)
    for s in (old, new):
        s.produce(batch(3))
    old.produce(batch(3, 3))
    dst = Destination(tmp_path)
    dst.pump(old)
    assert dst.log.log_end_offset == 6
    new.new_epoch(4)
    new.produce(batch(4, 100))
    # The metadata names the new leader (epoch 4): the mirror asks where epoch 3 ends.
    dst.mirror.handle_metadata([SourcePartitionMetadata(SRC, ErrorCode.NONE, 1, 4)], 20)
    assert dst.mirror.status()[0].state is MirrorPartitionState.TRUNCATING
    dst.pump(new, now_ms=20)
    assert log_bytes(dst.core, DST) == log_bytes(new.core, SRC)
    assert [(e.epoch, e.start_offset) for e in dst.log.leader_epoch_cache.entries()] == [(3, 0), (4, 3)]


def test_promote_stamps_a_new_epoch_above_every_source_epoch_and_stops_fetching(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=7)
    dst = Destination(tmp_path, leader_epoch=2)
    source.produce(batch(3))
    dst.pump(source)
    work = dst.mirror.work(1, 10)           # a fetch in flight when the promote commits
    source.produce(batch(2, 3))
    dst.set_state("promoted", now_ms=11)
    assert dst.core.mirror_leaderships() == [] and dst.mirror.partitions == {}
    dst.mirror.handle_fetched(work, source.answer_fetches(work), 12)    # refused: ignored
    assert dst.log.log_end_offset == 3
    assert dst.core.append(DST, batch(2), acks=1, now_ms=13).base_offset == 3
    epochs = [(e.epoch, e.start_offset) for e in dst.log.leader_epoch_cache.entries()]
    assert epochs == [(7, 0), (8, 3)]       # max(2, 7 + 1): above the source's
    last = list(iter_batches(log_bytes(dst.core, DST)))[-1][1]
    assert last.partition_leader_epoch == 8


def test_record_epoch_rule() -> None:
    assert record_epoch_for_leader(5, 3) == 5       # a normal topic
    assert record_epoch_for_leader(5, 5) == 5       # re-elected in its own epoch
    assert record_epoch_for_leader(2, 7) == 8       # a promoted mirror
    assert record_epoch_for_leader(0, -1) == 0      # empty log


def test_truncate_and_restore_drops_what_was_written_after_promote(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=3)
    dst = Destination(tmp_path)
    source.produce(batch(4))
    dst.pump(source)
    dst.set_state("promoted")
    dst.core.append(DST, batch(2, 50), acks=1, now_ms=1)      # offsets 4, 5 at epoch 4
    assert dst.log.log_end_offset == 6
    source.produce(batch(3, 4))                               # the source went on: 4..6
    dst.set_state("active", now_ms=30)
    dst.pump(source, now_ms=30)
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)
    assert dst.log.log_end_offset == 7


def test_an_unreachable_source_backs_off_reports_and_recovers(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=1)
    source.produce(batch(3))
    dst = Destination(tmp_path)
    dst.mirror.handle_metadata_failed("connection refused", 0)
    assert not dst.mirror.metadata_due(50) and dst.mirror.metadata_due(100)
    dst.mirror.handle_metadata_failed("connection refused", 100)
    assert not dst.mirror.metadata_due(299) and dst.mirror.metadata_due(300)    # doubled
    [status] = dst.mirror.status()
    assert status.state is MirrorPartitionState.AWAITING_SOURCE
    assert "connection refused" in status.last_error
    dst.pump(source, now_ms=300)
    dst.mirror.handle_source_unreachable(1, "reset by peer", 301)
    [status] = dst.mirror.status()
    assert status.state is MirrorPartitionState.AWAITING_SOURCE and "reset by peer" in status.last_error
    source.produce(batch(2, 3))
    assert dst.mirror.metadata_due(301 + 100)
    dst.pump(source, now_ms=401)
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)
    assert dst.mirror.status()[0].last_error == ""


def test_a_fenced_or_moved_source_leader_sends_the_partition_back_to_metadata(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=1)
    source.produce(batch(3))
    dst = Destination(tmp_path)
    dst.pump(source)
    source.new_epoch(2)                 # the mirror still names epoch 1
    source.produce(batch(1, 3))
    work = dst.mirror.work(1, 20)
    dst.mirror.handle_fetched(work, source.answer_fetches(work), 20)
    [status] = dst.mirror.status()
    assert status.state is MirrorPartitionState.AWAITING_SOURCE
    assert "FENCED_LEADER_EPOCH" in status.last_error
    dst.pump(source, now_ms=200)
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)


def test_a_mirror_behind_the_source_log_start_restarts_there(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=1)
    for i in range(3):
        source.produce(batch(2, 2 * i))
    assert source.core.delete_records(SRC, 4) == (ErrorCode.NONE, 4)
    dst = Destination(tmp_path)
    dst.pump(source)
    assert dst.log.log_start_offset == 4 and dst.log.log_end_offset == 6
    assert log_bytes(dst.core, DST) == log_bytes(source.core, SRC)


def test_promote_forgets_the_source_producers_so_this_clusters_ids_do_not_collide(tmp_path) -> None:
    source = Source(tmp_path, "src", leader_epoch=1)
    source.produce(batch(3, producer_id=0))
    dst = Destination(tmp_path)
    dst.pump(source)
    assert dst.core.partitions[DST].producers.active_producers()
    dst.set_state("promoted")
    # This cluster's first idempotent producer may well get id 0 too: sequence 0 is fine.
    assert dst.core.append(DST, batch(1, producer_id=0), acks=1, now_ms=1).error_code == ErrorCode.NONE
