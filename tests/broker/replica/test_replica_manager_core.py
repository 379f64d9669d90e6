"""The data-plane core driven by hand: no process, no socket, no clock (broker.replica_manager).

The two bugs the chaos suite found in the old asyncio shells are unit tests here: the lost
AlterPartition answer (the proposal must stay pending and be resent) and the follower that
paused for good when its leader's metadata was behind.
"""
from __future__ import annotations

import random
import uuid

from broker.delayed.divert import divert
from broker.log import FileStorage, LogManager
from broker.replica.follower import FetchState
from broker.replica.partition import Role
from broker.replica_manager import (
    ALTER_PARTITION_RETRY_MS, AlterPartitionAnswer, EpochAnswer, FetchFromLeader, FetchedPartition,
    LeadershipChanged, PartitionsChanged, ProduceCompletion, ProduceResult, ReplicaManager,
    SendAlterPartition,
)
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from clients.types import TopicPartition
from metadata_harness import Metadata

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID(int=42)


def brokers(*ids: int) -> list:
    return [M.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=10 + b,
                                   fenced=False) for b in ids]


def core_for(tmp_path, broker_id: int) -> ReplicaManager:
    logs, _ = LogManager.open(FileStorage(), str(tmp_path / f"b{broker_id}"), now_ms=0)
    return ReplicaManager(broker_id, logs, {}, replica_lag_time_max_ms=10_000)


def batch(n: int, start: int = 0) -> bytes:
    return bytes(build_batch([Record(start + i, 0, None, b"v%d" % (start + i)) for i in range(n)]))


def leader_with_isr(tmp_path, isr: list[int]) -> tuple[ReplicaManager, Metadata]:
    meta = Metadata()
    core = core_for(tmp_path, 1)
    core.apply_metadata(*meta.commit(
        *brokers(1, 2, 3), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=isr, leader=1,
                          leader_epoch=5, partition_epoch=7)), 0)
    effects = core.take_effects()
    assert LeadershipChanged(TP, True) in effects
    return core, meta


def alter_sends(effects) -> list[SendAlterPartition]:
    return [e for e in effects if isinstance(e, SendAlterPartition)]


def test_a_lost_alter_partition_answer_keeps_the_expansion_pending_and_resends_it(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    assert core.append(TP, batch(3), acks=-1, now_ms=1).required_offset == 3
    core.read(TP, 3, 1 << 20, 5, replica_id=2, now_ms=2, min_one_batch=True)     # HW 3
    core.read(TP, 0, 1 << 20, 5, replica_id=3, now_ms=2, min_one_batch=True)     # behind: no
    assert not alter_sends(core.take_effects())
    # Replica 3 catches up: the leader proposes ISR [1, 2, 3].
    core.read(TP, 3, 1 << 20, 5, replica_id=3, now_ms=3, min_one_batch=True)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.new_isr == (1, 2, 3) and send.topic_id == TOPIC_ID
    assert dict(send.new_isr_with_epochs) == {1: 11, 2: 12, 3: 13}
    core.handle_alter_partition_response(send.proposal, None, now_ms=4)      # the answer is lost
    replica = core.partitions[TP].replica
    # The expansion may have committed: the HW keeps counting replica 3 (maximal ISR) ...
    assert replica.pending_isr == (1, 2, 3) and replica.maximal_isr == (1, 2, 3)
    assert not alter_sends(core.take_effects())
    assert core.append(TP, batch(2), acks=1, now_ms=5).base_offset == 3     # LEO 5
    core.read(TP, 5, 1 << 20, 5, replica_id=2, now_ms=5, min_one_batch=True)
    assert replica.high_watermark == 3        # replica 3 (at 3) holds the HW back
    # ... and the same proposal goes out again after the retry interval.
    core.poll(4 + ALTER_PARTITION_RETRY_MS - 1)
    assert not alter_sends(core.take_effects())
    core.poll(4 + ALTER_PARTITION_RETRY_MS)
    [resend] = alter_sends(core.take_effects())
    assert resend.proposal == send.proposal
    core.handle_alter_partition_response(resend.proposal, AlterPartitionAnswer(ErrorCode.NONE, 5, 8, (1, 2, 3)), 600)
    assert replica.isr == (1, 2, 3) and replica.pending_isr is None and replica.partition_epoch == 8


def test_an_answer_that_proves_nothing_was_applied_falls_back_to_the_committed_isr(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    core.read(TP, 0, 1 << 20, 5, replica_id=3, now_ms=1, min_one_batch=True)
    [send] = alter_sends(core.take_effects())
    core.handle_alter_partition_response(send.proposal, AlterPartitionAnswer(ErrorCode.INELIGIBLE_REPLICA), 2)
    assert core.partitions[TP].replica.pending_isr is None
    # A refusal that may hide our own committed try keeps it pending (no resend either).
    core.read(TP, 0, 1 << 20, 5, replica_id=3, now_ms=3, min_one_batch=True)
    [send] = alter_sends(core.take_effects())
    core.handle_alter_partition_response(send.proposal, AlterPartitionAnswer(ErrorCode.INVALID_UPDATE_VERSION), 4)
    assert core.partitions[TP].replica.pending_isr == (1, 2, 3)
    core.poll(4 + 10 * ALTER_PARTITION_RETRY_MS)
    assert not alter_sends(core.take_effects())


def test_one_alter_partition_in_flight_per_partition_and_the_newest_waits(tmp_path) -> None:
    core, meta = leader_with_isr(tmp_path, [1, 2, 3])
    core.read(TP, 0, 1 << 20, 5, replica_id=2, now_ms=1, min_one_batch=True)
    core.read(TP, 0, 1 << 20, 5, replica_id=3, now_ms=1, min_one_batch=True)
    core.append(TP, batch(2), acks=1, now_ms=2)         # neither fetches it
    core.take_effects()
    core.poll(20_000)                                   # both followers lag: shrink to [1]
    [send] = alter_sends(core.take_effects())
    assert send.proposal.new_isr == (1,)
    # The metadata log commits it before the answer arrives; the answer is then stale.
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1])), 20_001)
    assert core.partitions[TP].replica.isr == (1,)
    core.handle_alter_partition_response(send.proposal, None, 20_002)
    core.poll(20_002 + ALTER_PARTITION_RETRY_MS)
    assert not alter_sends(core.take_effects())     # no longer current: never resent


def test_acks_all_completes_when_the_isr_has_the_batch(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    result = core.append(TP, batch(2), acks=-1, now_ms=1)
    assert result.error_code == ErrorCode.NONE and result.required_offset == 2
    assert core.await_replication(TP, "token", result.required_offset, deadline_ms=30_000)
    assert not [e for e in core.take_effects() if isinstance(e, ProduceCompletion)]
    core.read(TP, 2, 1 << 20, 5, replica_id=2, now_ms=2, min_one_batch=True)
    effects = core.take_effects()
    assert ProduceCompletion("token", ErrorCode.NONE) in effects
    assert any(isinstance(e, PartitionsChanged) and TP in e.partitions for e in effects)


def follower(tmp_path) -> tuple[ReplicaManager, Metadata]:
    meta = Metadata()
    core = core_for(tmp_path, 2)
    core.apply_metadata(*meta.commit(
        *brokers(1, 2), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                          leader_epoch=3, partition_epoch=0)), 0)
    assert FetchFromLeader(1) in core.take_effects()
    return core, meta


def test_a_follower_whose_leader_is_behind_retries_after_the_backoff(tmp_path) -> None:
    core, _ = follower(tmp_path)
    work = core.follower_work(1, now_ms=0)
    [position] = work.fetches            # an empty log has nothing to truncate
    core.handle_fetched(work, [FetchedPartition(TP, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, None)], 10)
    assert not core.follower_work(1, now_ms=11).fetches
    later = core.follower_work(1, now_ms=10 + core.replica_fetch_backoff_ms)
    assert later.fetches == (position,)   # retried, never paused for good (a chaos-suite bug)


def test_a_followers_round_names_what_changed_and_is_the_same_while_nothing_did(tmp_path) -> None:
    core, meta = follower(tmp_path)
    first = core.follower_work(1, now_ms=0)
    [position] = first.fetches
    assert first.changed is None                        # a new plan: compare everything
    assert core.follower_work(1, now_ms=1) is first     # nothing changed: the same round
    core.handle_fetched(first, [], 2)                   # an incremental answer, nothing new
    assert core.follower_work(1, now_ms=3) is first
    core.handle_fetched(first, [FetchedPartition(TP, ErrorCode.NONE, 0, 0, batch(2))], 4)
    moved = core.follower_work(1, now_ms=5)
    [now] = moved.fetches
    assert now.fetch_offset == 2 and moved.changed == {TP: now}
    core.handle_fetched(moved, [FetchedPartition(TP, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, None)], 10)
    waiting = core.follower_work(1, now_ms=11)
    assert waiting.fetches == () and waiting.changed == {TP: None}
    assert core.follower_work(1, now_ms=12) is waiting
    back = core.follower_work(1, now_ms=10 + core.replica_fetch_backoff_ms)
    assert back.fetches == (now,) and back.changed == {TP: now}     # the same position object
    # A second partition with this leader joins the round as a change.
    core.apply_metadata(*meta.commit(M.PartitionRecord(
        partition_id=1, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=3,
        partition_epoch=0)), 20)
    joined = core.follower_work(1, now_ms=21)
    assert set(joined.changed) == {TopicPartition("t", 1)} and len(joined.fetches) == 2


def test_a_fenced_follower_waits_for_the_metadata_log(tmp_path) -> None:
    core, meta = follower(tmp_path)
    work = core.follower_work(1, 0)
    core.handle_fetched(work, [FetchedPartition(TP, ErrorCode.FENCED_LEADER_EPOCH, -1, -1, None)], 1)
    assert not core.follower_work(1, 100_000).fetches
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1)), 2)
    assert core.follower_work(1, 3).fetches, "a new leader epoch re-adds the partition"


def test_a_follower_appends_the_leaders_batches_and_ignores_stale_answers(tmp_path) -> None:
    core, _ = follower(tmp_path)
    work = core.follower_work(1, 0)
    core.handle_fetched(work, [FetchedPartition(TP, ErrorCode.NONE, 2, 0, bytes(
        build_batch([Record(0, 0, None, b"a"), Record(1, 0, None, b"b"), Record(2, 0, None, b"c")],
                    partition_leader_epoch=3)))], 1)
    hosted = core.partitions[TP]
    assert hosted.log.log_end_offset == 3 and hosted.replica.high_watermark == 2
    # The same answer again (a duplicate) answers an older plan: ignored.
    core.handle_fetched(work, [FetchedPartition(TP, ErrorCode.NONE, 2, 0, batch(1))], 2)
    assert hosted.log.log_end_offset == 3


def test_a_returning_follower_truncates_where_the_leader_epoch_ends(tmp_path) -> None:
    core, meta = follower(tmp_path)
    work = core.follower_work(1, 0)
    two_batches = (build_batch([Record(i, 0, None, b"x") for i in range(2)], partition_leader_epoch=3)
                   + build_batch([Record(i, 0, None, b"x") for i in range(2, 5)], base_offset=2,
                                 partition_leader_epoch=3))
    core.handle_fetched(work, [FetchedPartition(TP, ErrorCode.NONE, 0, 0, two_batches)], 1)
    assert core.partitions[TP].log.log_end_offset == 5
    # A new leader (epoch 4) has only offsets 0-1 of epoch 3.
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1)), 2)
    work = core.follower_work(1, 3)
    [query] = work.epoch_queries
    assert query.leader_epoch == 3 and not work.fetches
    core.handle_epoch_answers(work, [EpochAnswer(TP, ErrorCode.NONE, 3, 2)], 4)
    hosted = core.partitions[TP]
    assert hosted.log.log_end_offset == 2 and hosted.following.state is FetchState.FETCHING
    assert core.follower_work(1, 5).fetches[0].fetch_offset == 2


def test_metadata_changes_touch_only_the_partitions_they_name(tmp_path) -> None:
    core, meta = leader_with_isr(tmp_path, [1, 2, 3])
    other = uuid.UUID(int=43)
    core.apply_metadata(*meta.commit(
        M.TopicRecord(name="u", topic_id=other),
        M.PartitionRecord(partition_id=0, topic_id=other, replicas=[2, 3], isr=[2, 3], leader=2,
                          leader_epoch=0, partition_epoch=0)), 1)
    assert TopicPartition("u", 0) not in core.partitions           # not a replica here
    before = core.partitions[TP].registration
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=other, leader=3)), 2)
    assert core.partitions[TP].registration is before
    # Reassigned away: stopped and deleted.
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID,
                                                             replicas=[2, 3], isr=[2, 3], leader=2)), 3)
    assert TP not in core.partitions
    assert LeadershipChanged(TP, False) in core.take_effects()
    assert core.partitions == {} and core.partitions.get(TP) is None
    assert Role.LEADER not in {h.replica.role for h in core.partitions.values()}


def test_an_out_of_sync_throttled_follower_is_held_to_the_leader_rate(tmp_path) -> None:
    core, meta = leader_with_isr(tmp_path, [1, 2])
    core.apply_metadata(*meta.commit(
        M.ConfigRecord(resource_type=2, resource_name="t", name="leader.replication.throttled.replicas",
                       value="0:1"),
        M.ConfigRecord(resource_type=4, resource_name="", name="leader.replication.throttled.rate",
                       value="1000")), 1)
    big = bytes(build_batch([Record(0, 0, None, b"x" * 1000)]))
    for i in range(20):
        assert core.append(TP, big, acks=1, now_ms=2).error_code == ErrorCode.NONE
    sent = 0
    for second in range(10):
        now = 10_000 + second * 1000
        for _ in range(20):                         # replica 3 (out of the ISR) fetches eagerly
            r = core.read(TP, sent_offset(core, 3), 1500, 5, replica_id=3, now_ms=now, min_one_batch=True)
            sent += r.size_in_bytes
            if r.records is not None:
                advance(core, 3, r)
    # About the rate over the window (11 samples of 1 s, one batch of overshoot), where an
    # unthrottled follower takes all 20 kB in the first second.
    assert 0 < sent <= 1000 * 11 + 1100, sent
    # The ISR member is never throttled.
    r = core.read(TP, 0, 1 << 20, 5, replica_id=2, now_ms=20_000, min_one_batch=False)
    assert r.records is not None and r.records.last_offset == 19


_positions: dict = {}


def sent_offset(core: ReplicaManager, replica: int) -> int:
    return _positions.get((id(core), replica), 0)


def advance(core: ReplicaManager, replica: int, r) -> None:
    _positions[(id(core), replica)] = r.records.last_offset + 1


def test_a_replica_added_in_the_same_leader_epoch_is_tracked_and_joins_the_isr(tmp_path) -> None:
    """A reassignment adds replicas before it removes any: Kafka keeps the leader epoch,
    so the leader must start tracking the new follower from the committed replica set."""
    meta = Metadata()
    core = core_for(tmp_path, 1)
    core.apply_metadata(*meta.commit(
        *brokers(1, 2, 3), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                          leader_epoch=5, partition_epoch=7)), 0)
    core.apply_metadata(*meta.commit(M.PartitionChangeRecord(
        partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], adding_replicas=[3])), 1)
    replica = core.partitions[TP].replica
    assert replica.leader_epoch == 5 and 3 in replica.followers
    core.take_effects()
    core.read(TP, 0, 1 << 20, 5, replica_id=3, now_ms=2, min_one_batch=True)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.new_isr == (1, 2, 3)


def test_kip_903_a_follower_fetching_with_another_broker_epoch_does_not_join_the_isr(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    core.append(TP, batch(3), acks=1, now_ms=1)
    core.read(TP, 3, 1 << 20, 5, replica_id=2, now_ms=2, min_one_batch=True)
    # Broker 3 is registered with epoch 13; a caught-up fetch naming epoch 12 (its previous
    # incarnation's) is served, but does not put it in the ISR.
    assert core.read(TP, 3, 1 << 20, 5, replica_id=3, now_ms=3, min_one_batch=True,
                     replica_epoch=12).error_code == ErrorCode.NONE
    assert not alter_sends(core.take_effects())
    assert core.partitions[TP].replica.pending_isr is None
    # Its registered epoch (or none, from a Fetch before v15) is eligible.
    core.read(TP, 3, 1 << 20, 5, replica_id=3, now_ms=4, min_one_batch=True, replica_epoch=13)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.new_isr == (1, 2, 3) and dict(send.new_isr_with_epochs)[3] == 13


def test_list_offsets_v8_v9_sentinels_without_tiered_storage(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1])
    core.append(TP, batch(4), acks=1, now_ms=1)
    assert core.delete_records(TP, 2)[0] == ErrorCode.NONE
    # EARLIEST_LOCAL_TIMESTAMP (-4): the local log is the whole log, it starts at the log start.
    assert core.list_offset(TP, -4, -1, -1)[:3] == core.list_offset(TP, -2, -1, -1)[:3] == \
        (ErrorCode.NONE, -1, 2)
    # LATEST_TIERED_TIMESTAMP (-5): nothing is tiered, as Kafka answers with remote storage off.
    assert core.list_offset(TP, -5, -1, -1) == (ErrorCode.NONE, -1, -1, -1)


def test_the_group_coordinators_txn_offset_batches_skip_sequence_checks_not_the_epoch(tmp_path) -> None:
    # Every TxnOffsetCommit batch has base sequence 0 (Kafka's storeOffsets): as a client's
    # they would be duplicates of the first; from the coordinator they are all appended.
    core, _ = leader_with_isr(tmp_path, [1])

    def offsets_batch(producer_epoch: int) -> bytes:
        return bytes(build_batch([Record(0, 0, b"k", b"v")], producer_id=7,
                                 producer_epoch=producer_epoch, base_sequence=0,
                                 is_transactional=True))
    first = core.append(TP, offsets_batch(2), acks=1, now_ms=1, from_coordinator=True)
    second = core.append(TP, offsets_batch(2), acks=1, now_ms=2, from_coordinator=True)
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 1)
    as_client = core.append(TP, offsets_batch(2), acks=1, now_ms=3)
    assert as_client.records_appended == 0    # a client's "retry": acknowledged, not appended
    stale = core.append(TP, offsets_batch(1), acks=1, now_ms=4, from_coordinator=True)
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_check_produce_answers_refusals_and_duplicates_without_appending(tmp_path) -> None:
    # Delayed delivery asks before it parks anything: a retry of a batch whose records
    # were all parked (appended as an empty batch over their offsets) is a duplicate.
    core, _ = leader_with_isr(tmp_path, [1])

    def delayed(sequence: int, n: int) -> bytes:
        return bytes(build_batch([Record(i, 0, None, b"v", (("ketch.deliver.after", b"60000"),))
                                  for i in range(n)], producer_id=9, producer_epoch=0,
                                 base_sequence=sequence))
    first = delayed(0, 2)
    assert core.check_produce(TP, first, acks=-1) is None
    diversion = divert(TP, first, 0, 10**9, random.Random(1))
    assert diversion is not None and len(diversion.parked) == 2
    appended = core.append(TP, bytearray(diversion.records), acks=1, now_ms=1, reserved_gaps=True)
    assert (appended.error_code, appended.base_offset) == (ErrorCode.NONE, 0)
    log_end = core.partitions[TP].log.log_end_offset
    duplicate = core.check_produce(TP, first, acks=-1)
    assert duplicate is not None
    assert (duplicate.error_code, duplicate.base_offset, duplicate.required_offset) == (ErrorCode.NONE, 0, 2)
    gap = core.check_produce(TP, delayed(5, 1), acks=1)
    assert gap is not None and gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert core.check_produce(TP, delayed(2, 1), acks=1) is None
    assert core.check_produce(TopicPartition("elsewhere", 0), first, acks=1) == \
        ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert core.partitions[TP].log.log_end_offset == log_end == 2


def test_poll_meets_every_replicas_deadlines_among_many_idle_ones(tmp_path) -> None:
    # poll visits only the replicas that are due (a deadline heap): a parked acks=all
    # produce times out at its deadline, a leader whose followers stopped fetching shrinks
    # its ISR at replica.lag.time.max.ms, and the idle others are left alone.
    meta = Metadata()
    core = core_for(tmp_path, 1)                        # replica.lag.time.max.ms 10,000
    records = [*brokers(1, 2, 3), M.TopicRecord(name="t", topic_id=TOPIC_ID)]
    records += [M.PartitionRecord(partition_id=p, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3],
                                  leader=1, leader_epoch=5, partition_epoch=7) for p in range(50)]
    core.apply_metadata(*meta.commit(*records), 0)
    core.take_effects()
    assert 0 < core.poll(1) <= 1000
    quiet, laggard = TopicPartition("t", 1), TopicPartition("t", 2)
    result = core.append(TP, batch(1), acks=-1, now_ms=2)
    assert core.await_replication(TP, "token", result.required_offset, deadline_ms=5_000)
    assert core.poll(3) <= 4_997                        # the parked produce's deadline counts
    core.poll(4_999)
    assert ProduceCompletion("token", ErrorCode.REQUEST_TIMED_OUT) not in core.take_effects()
    core.poll(5_000)
    assert ProduceCompletion("token", ErrorCode.REQUEST_TIMED_OUT) in core.take_effects()
    for p in range(50):                                 # every follower catches up but on one
        if TopicPartition("t", p) != laggard:
            for follower in (2, 3):
                core.read(TopicPartition("t", p), 1 if p == 0 else 0, 1 << 20, 5,
                          replica_id=follower, now_ms=6_000, min_one_batch=True)
    core.take_effects()
    core.poll(10_000)
    assert not alter_sends(core.take_effects())
    core.poll(10_001)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.partition == laggard and send.proposal.new_isr == (1,)
    core.poll(16_001)           # the others' followers are at the LEO: in sync however long ago
    assert not alter_sends(core.take_effects())
    core.append(quiet, batch(1), acks=1, now_ms=16_002)     # until an append: caught up at 6 s
    core.poll(16_002)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.partition == quiet and send.proposal.new_isr == (1,)


def test_an_idle_partition_of_a_followers_session_is_reported_without_a_read(tmp_path) -> None:
    """KIP-227 on the leader: an in-sync follower at the log end, told the current HW and
    log start, needs no read; its fetch still keeps it caught up (no ISR shrink)."""
    core, _ = leader_with_isr(tmp_path, [1, 2, 3])
    core.append(TP, batch(3), acks=1, now_ms=1)
    for r in (2, 3):
        core.read(TP, 3, 1 << 20, 5, replica_id=r, now_ms=2, min_one_batch=True)
    replica = core.partitions[TP].replica
    assert replica.high_watermark == 3
    core.take_effects()
    idle = [(TP, 3, 5, 3, 0)]                       # offset, leader epoch, told HW, told log start
    assert core.report_idle_follower_fetches(2, 12, idle, now_ms=9_000) == {TP}
    assert replica.followers[2].last_caught_up_time_ms == 9_000
    assert not core.take_effects()                  # nothing moved: nothing to wake
    # Both stay in sync at the LEO past replica.lag.time.max.ms (10 s), however long ago
    # they fetched (Kafka's isCaughtUp)...
    core.report_idle_follower_fetches(2, 12, [], now_ms=15_000)    # a fetch naming nothing new
    core.poll(15_000)
    assert not alter_sends(core.take_effects())
    # ... until the leader appends: replica 2 was caught up at its last fetch of any
    # partition (15 s), replica 3 at its last read (2 ms), and leaves the ISR.
    core.append(TP, batch(1), acks=1, now_ms=15_001)
    core.poll(15_002)
    [send] = alter_sends(core.take_effects())
    assert send.proposal.new_isr == (1, 2)


def test_a_partition_with_news_for_the_follower_is_left_to_the_read(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    core.append(TP, batch(3), acks=1, now_ms=1)
    core.read(TP, 3, 1 << 20, 5, replica_id=2, now_ms=2, min_one_batch=True)        # HW 3
    replica = core.partitions[TP].replica
    before = replica.followers[2].last_fetch_time_ms
    not_idle = [
        (TP, 3, 5, 0, 0),           # told an older HW
        (TP, 3, 5, 3, 1),           # told another log start
        (TP, 3, 4, 3, 0),           # another leader epoch (the read answers FENCED_LEADER_EPOCH)
        (TP, 2, 5, 3, 0),           # not at the log end: records to send
        (TopicPartition("t", 9), 0, 5, 0, 0),          # not hosted
    ]
    for position in not_idle:
        assert core.report_idle_follower_fetches(2, 12, [position], now_ms=5) == set()
    assert replica.followers[2].last_fetch_time_ms == before      # nothing half-applied
    assert core.append(TP, batch(2), acks=1, now_ms=6).error_code == ErrorCode.NONE
    # The follower's first fetch from the new log end must move the HW: the read's job.
    assert core.report_idle_follower_fetches(2, 12, [(TP, 5, 5, 3, 0)], now_ms=7) == set()
    core.read(TP, 5, 1 << 20, 5, replica_id=2, now_ms=7, min_one_batch=True)
    assert replica.high_watermark == 5
    assert core.report_idle_follower_fetches(2, 12, [(TP, 5, 5, 5, 0)], now_ms=8) == {TP}


def test_an_out_of_sync_follower_is_never_idle_so_it_can_join_the_isr(tmp_path) -> None:
    core, _ = leader_with_isr(tmp_path, [1, 2])
    core.append(TP, batch(3), acks=1, now_ms=1)
    core.read(TP, 3, 1 << 20, 5, replica_id=2, now_ms=2, min_one_batch=True)
    core.read(TP, 3, 1 << 20, 5, replica_id=3, now_ms=2, min_one_batch=True)
    [send] = alter_sends(core.take_effects())
    core.handle_alter_partition_response(send.proposal, AlterPartitionAnswer(
        ErrorCode.INVALID_REQUEST), now_ms=3)         # refused: proposed again on its next fetch
    assert core.report_idle_follower_fetches(3, 13, [(TP, 3, 5, 3, 0)], now_ms=4) == set()
    core.read(TP, 3, 1 << 20, 5, replica_id=3, now_ms=4, min_one_batch=True)
    [again] = alter_sends(core.take_effects())
    assert again.proposal.new_isr == (1, 2, 3)


def test_follower_work_hands_out_an_unchanged_position_again_and_a_moved_one_anew(tmp_path) -> None:
    core, meta = follower(tmp_path)
    first = core.follower_work(1, 0)
    assert core.follower_work(1, 1).fetches[0] is first.fetches[0]
    core.handle_fetched(first, [FetchedPartition(TP, ErrorCode.NONE, 1, 0, bytes(
        build_batch([Record(0, 0, None, b"a")], partition_leader_epoch=3)))], 2)
    [moved] = core.follower_work(1, 3).fetches
    assert moved.fetch_offset == 1 and moved is not first.fetches[0]
    # Another leader: the partition leaves leader 1's work, and that work ends.
    core.apply_metadata(*meta.commit(
        *brokers(3), M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=3,
                                             replicas=[1, 2, 3], isr=[1, 2, 3])), 4)
    assert core.follower_work(1, 5) is None
    assert core.follower_work(3, 5) is not None


def test_a_delta_of_many_leaderships_logs_one_info_line_and_a_few_a_line_each(tmp_path, caplog) -> None:
    """At 100k partitions a failover wrote 200,000 'leader at epoch' lines per broker."""
    import logging
    from broker.replica_manager import LEADERSHIP_LINES_MAX
    meta = Metadata()
    core = core_for(tmp_path, 1)
    many = LEADERSHIP_LINES_MAX + 5
    with caplog.at_level(logging.INFO, logger="broker.replica_manager"):
        core.apply_metadata(*meta.commit(
            *brokers(1), M.TopicRecord(name="t", topic_id=TOPIC_ID),
            *[M.PartitionRecord(partition_id=i, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1,
                                leader_epoch=0, partition_epoch=0) for i in range(many)]), 0)
    lines = [r.getMessage() for r in caplog.records if r.name == "broker.replica_manager"]
    assert [line for line in lines if "leader at epoch" in line] == []
    assert [line for line in lines if "became leader of" in line] == \
        [f"became leader of {many} partitions (t-0, t-1, t-2, ...; a line each at DEBUG)"]
    caplog.clear()
    other = uuid.UUID(int=43)
    with caplog.at_level(logging.INFO, logger="broker.replica_manager"):
        core.apply_metadata(*meta.commit(
            M.TopicRecord(name="u", topic_id=other),
            *[M.PartitionRecord(partition_id=i, topic_id=other, replicas=[1], isr=[1], leader=1,
                                leader_epoch=0, partition_epoch=0) for i in range(2)]), 1)
    assert sorted(r.getMessage() for r in caplog.records if "leader at epoch" in r.getMessage()) == [
        "u-0: leader at epoch 0, ISR [1], LEO 0, HW 0", "u-1: leader at epoch 0, ISR [1], LEO 0, HW 0"]


def test_a_leaders_epoch_is_in_its_log_after_a_clean_shutdown(tmp_path) -> None:
    # Its appends bring no new epoch (the epoch started at election): unless the election
    # marks the checkpoint, a clean restart reads no epoch, and then fetches from its LEO
    # without truncating to the next leader (a divergence found by test_faults).
    core, _ = leader_with_isr(tmp_path, [1])
    core.append(TP, batch(3), acks=1, now_ms=1)
    core.shutdown()
    logs, _ = LogManager.open(FileStorage(), str(tmp_path / "b1"), now_ms=2)
    assert logs.get_log(TP.topic, TP.partition).latest_epoch == 5


def test_a_follower_with_records_but_no_epochs_truncates_to_its_hw_first(tmp_path) -> None:
    # Nothing to ask the leader about: what is above the HW may diverge (Kafka's
    # truncateToHighWatermark). Batches without an epoch leave the cache empty.
    logs, _ = LogManager.open(FileStorage(), str(tmp_path / "b2"), now_ms=0)
    logs.get_or_create_log("t", 0, 0).append_as_follower(batch(3), 0)
    core = ReplicaManager(2, logs, {}, replica_lag_time_max_ms=10_000)
    meta = Metadata()
    core.apply_metadata(*meta.commit(
        *brokers(1, 2), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                          leader_epoch=3, partition_epoch=0)), 1)
    assert core.partitions[TP].log.log_end_offset == 0      # its HW: nothing known committed
    [position] = core.follower_work(1, now_ms=2).fetches
    assert position.fetch_offset == 0
