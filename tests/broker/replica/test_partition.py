"""The leader's replica state machine: HW, ISR decisions, acks=all completions."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.replica.partition import AlterIsr, PartitionReplica, ProduceCompletion, Role
from clients.types import TopicPartition
from clients.protocol.errors import ErrorCode

TP = TopicPartition("t", 0)
LAG_MS = 10_000


def leader(isr=(1, 2, 3), leo=0, hw=0, now=0, min_isr=2) -> PartitionReplica:
    p = PartitionReplica(TP, 1, replica_lag_time_max_ms=LAG_MS, min_insync_replicas=min_isr)
    p.become_leader(leader_epoch=5, partition_epoch=7, replicas=(1, 2, 3), isr=isr,
                    log_start_offset=0, log_end_offset=leo, high_watermark=hw, now_ms=now)
    return p


def test_hw_is_min_leo_over_isr_and_waits_for_every_isr_member_to_fetch() -> None:
    p = leader(leo=0)
    p.on_local_append(10)
    assert p.high_watermark == 0
    p.on_follower_fetch(2, 10, now_ms=1)
    assert p.high_watermark == 0            # broker 3 has not fetched in this epoch yet
    p.on_follower_fetch(3, 4, now_ms=1)
    assert p.high_watermark == 4
    p.on_follower_fetch(3, 10, now_ms=2)
    assert p.high_watermark == 10


def test_hw_never_goes_back() -> None:
    p = leader(leo=0)
    p.on_local_append(10)
    p.on_follower_fetch(2, 10, 1)
    p.on_follower_fetch(3, 10, 1)
    p.on_follower_fetch(3, 3, 2)            # a follower truncated and fetches lower
    assert p.high_watermark == 10


def test_acks_all_completes_when_hw_passes_and_times_out_otherwise() -> None:
    p = leader(leo=0)
    assert p.check_append(acks=-1).error_code == ErrorCode.NONE
    p.on_local_append(5)
    assert p.await_replication("req-a", required_offset=5, deadline_ms=1000) == []
    p.on_local_append(9)
    assert p.await_replication("req-b", required_offset=9, deadline_ms=1000) == []
    p.on_follower_fetch(2, 9, 10)
    completions, _ = p.on_follower_fetch(3, 5, 10)
    assert completions == [ProduceCompletion("req-a", ErrorCode.NONE)]
    done, _, _ = p.poll(now_ms=1000)
    assert done == [ProduceCompletion("req-b", ErrorCode.REQUEST_TIMED_OUT)]


def test_not_enough_replicas_before_append_and_after_append() -> None:
    p = leader(isr=(1,), min_isr=2)
    assert p.check_append(acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_append(acks=1).error_code == ErrorCode.NONE
    q = leader(isr=(1, 2), min_isr=2)
    q.on_local_append(3)
    q.await_replication("r", 3, 10_000)
    # The ISR shrinks to the leader alone while the produce waits: the HW then passes it.
    q.apply_committed(leader_epoch=5, partition_epoch=8, isr=(1,), replicas=(1, 2, 3), now_ms=0)
    assert q.high_watermark == 3
    # (apply_committed returned the completion; poll has nothing left)
    assert q.poll(0)[0] == []


def test_not_enough_replicas_after_append_is_reported() -> None:
    q = leader(isr=(1, 2), min_isr=2)
    q.on_local_append(3)
    out = q.await_replication("r", 3, 10_000)
    assert out == []
    done = q.apply_committed(leader_epoch=5, partition_epoch=8, isr=(1,), replicas=(1, 2, 3), now_ms=0)
    assert done == [ProduceCompletion("r", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)]


def test_lagging_follower_is_proposed_out_and_the_leader_waits_for_the_commit() -> None:
    p = leader(leo=0, now=0)
    p.on_local_append(10)
    p.on_follower_fetch(2, 10, now_ms=100)
    p.on_follower_fetch(3, 0, now_ms=100)   # 3 is stuck at 0
    p.on_follower_fetch(2, 10, now_ms=LAG_MS - 50)
    _, effects, _ = p.poll(now_ms=LAG_MS - 50)
    assert effects == []                    # 3 was last caught up when the epoch began (0)
    p.on_follower_fetch(2, 10, now_ms=LAG_MS + 200)
    _, effects, _ = p.poll(now_ms=LAG_MS + 200)
    assert effects == [AlterIsr(TP, 5, 7, (1, 2))]
    assert p.isr == (1, 2, 3) and p.pending_isr == (1, 2)
    assert p.poll(now_ms=LAG_MS + 300)[1] == []      # one change in flight at a time
    # 3 is past its deadline, but nothing is due until the answer (which asks for a
    # poll): the replica was re-polled every millisecond while the change was in flight.
    assert p.ms_until_due(now_ms=LAG_MS + 300) is None
    p.apply_committed(5, 8, (1, 2), (1, 2, 3), 0)
    assert p.isr == (1, 2) and p.high_watermark == 10


def test_follower_rejoins_once_it_reaches_hw_and_the_epoch_start() -> None:
    p = leader(isr=(1, 2), leo=4, hw=4, now=0)
    p.on_follower_fetch(2, 4, 1)
    p.on_local_append(8)
    p.on_follower_fetch(2, 8, 2)
    assert p.high_watermark == 8
    _, effects = p.on_follower_fetch(3, 5, 3)
    assert effects == []                    # below the HW
    _, effects = p.on_follower_fetch(3, 8, 4)
    assert effects == [AlterIsr(TP, 5, 7, (1, 2, 3))]
    # While the expansion is pending, the HW already waits for 3 (maximal ISR).
    p.on_local_append(12)
    p.on_follower_fetch(2, 12, 5)
    assert p.high_watermark == 8
    p.on_follower_fetch(3, 12, 6)
    assert p.high_watermark == 12


def test_losing_leadership_fails_parked_produces() -> None:
    p = leader()
    p.on_local_append(3)
    p.await_replication("r", 3, 10_000)
    done = p.become_follower(leader_id=2, leader_epoch=6, partition_epoch=9,
                             replicas=(1, 2, 3), isr=(2, 3))
    assert done == [ProduceCompletion("r", ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert p.role is Role.FOLLOWER
    assert p.check_append(1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@given(st.lists(st.tuples(st.sampled_from([1, 2, 3, 4]), st.integers(0, 30)), max_size=40))
def test_hw_matches_a_dumb_model(steps: list[tuple[int, int]]) -> None:
    """HW == min LEO over the ISR (computed the slow way), never decreasing."""
    p = PartitionReplica(TP, 1, replica_lag_time_max_ms=10**9, min_insync_replicas=1)
    p.become_leader(1, 1, (1, 2, 3, 4), (1, 2, 3), 0, 0, 0, 0)
    leo = {1: 0}
    last_hw = 0
    for who, value in steps:
        if who == 1:
            leo[1] = max(leo[1], value)
            p.on_local_append(leo[1])
        else:
            fetch = min(value, leo[1])
            leo[who] = fetch
            p.on_follower_fetch(who, fetch, 0)
            p.pending_isr = None    # keep the ISR fixed: this test is about the HW rule
        isr_leos = [leo.get(r) for r in p.isr]
        if None not in isr_leos:
            expected = max(last_hw, min(isr_leos))
        else:
            expected = last_hw
        assert p.high_watermark == expected
        last_hw = p.high_watermark


def test_an_unclean_leader_marks_itself_recovered_before_growing_the_isr() -> None:
    # KIP-704: elected uncleanly (RECOVERING), the leader's first proposal is its ISR
    # unchanged, saying RECOVERED; no expansion is proposed until that is committed.
    p = PartitionReplica(TP, 1, replica_lag_time_max_ms=LAG_MS, min_insync_replicas=1)
    p.become_leader(leader_epoch=5, partition_epoch=7, replicas=(1, 2, 3), isr=(1,),
                    log_start_offset=0, log_end_offset=10, high_watermark=10, now_ms=0,
                    recovering=True)
    _, expand = p.on_follower_fetch(2, 10, now_ms=1)
    assert expand == []                                  # caught up, but not while recovering
    _, proposals, due = p.poll(now_ms=1)
    assert proposals == [AlterIsr(TP, 5, 7, (1,))]
    p.apply_committed(5, 8, (1,), (1, 2, 3), now_ms=2, recovering=False)
    assert not p.recovering
    _, expand = p.on_follower_fetch(2, 10, now_ms=3)
    assert expand == [AlterIsr(TP, 5, 8, (1, 2))]


def test_with_elr_the_hw_waits_while_the_isr_is_under_min_isr() -> None:
    # KIP-966: acks=1 records appended while the ISR is below min ISR stay invisible, so a
    # replica that left the ISR meanwhile (an eligible leader replica) lacks nothing committed.
    p = leader(isr=(1, 2), min_isr=2)
    p.elr_enabled = True
    p.on_local_append(5)
    p.on_follower_fetch(2, 5, now_ms=1)
    assert p.high_watermark == 5
    p.apply_committed(leader_epoch=5, partition_epoch=8, isr=(1,), replicas=(1, 2, 3), now_ms=2)
    p.on_local_append(9)
    assert p.high_watermark == 5
    # Back at min ISR: the HW moves on.
    p.apply_committed(leader_epoch=5, partition_epoch=9, isr=(1, 3), replicas=(1, 2, 3), now_ms=3)
    p.on_follower_fetch(3, 9, now_ms=4)
    assert p.high_watermark == 9
    # Without ELR (Kafka 3.x) the lone leader moves the HW itself.
    q = leader(isr=(1,), min_isr=2)
    q.on_local_append(4)
    assert q.high_watermark == 4


def test_min_isr_above_the_replica_count_does_not_stop_the_hw() -> None:
    p = PartitionReplica(TP, 1, replica_lag_time_max_ms=LAG_MS, min_insync_replicas=2)
    p.elr_enabled = True
    p.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1,), isr=(1,),
                    log_start_offset=0, log_end_offset=0, high_watermark=0, now_ms=0)
    p.on_local_append(3)
    assert p.high_watermark == 3


def test_an_idle_fetch_is_only_a_caught_up_report_when_the_hw_is_at_the_leo() -> None:
    """KIP-227's idle partitions (``on_idle_follower_fetch``): exact only while nothing
    but the follower's caught-up time can change."""
    p = leader(isr=(1, 2), leo=0)
    p.on_local_append(10)
    p.on_follower_fetch(2, 10, now_ms=1)
    assert p.high_watermark == 10
    assert p.on_idle_follower_fetch(2, 10, now_ms=5)
    assert p.followers[2].last_caught_up_time_ms == 5 and p.followers[2].last_fetch_time_ms == 5
    assert not p.on_idle_follower_fetch(3, 10, now_ms=5)         # out of the ISR: may join it
    p.on_follower_fetch(3, 10, now_ms=6)                         # proposes (1, 2, 3)
    assert p.pending_isr == (1, 2, 3)
    p.on_local_append(12)
    p.on_follower_fetch(2, 12, now_ms=7)
    assert p.high_watermark == 10                                # 3 (pending) holds it back
    p.abandon_pending_isr()                                      # the HW is recomputed at once
    assert p.high_watermark == 12
    assert p.on_idle_follower_fetch(2, 12, now_ms=9)
    assert not p.on_idle_follower_fetch(2, 11, now_ms=9)         # behind: records to send


def test_an_abandoned_isr_proposal_lets_the_produces_it_held_back_complete() -> None:
    """A proposed member counts for the HW (maximal ISR). When the controller refuses the
    proposal, the HW is recomputed over the committed ISR at once, and an acks=all produce
    waiting only on the refused member completes without waiting for a follower fetch."""
    p = leader(isr=(1, 2), leo=10, hw=10)
    p.on_follower_fetch(2, 10, now_ms=1)
    p.on_follower_fetch(3, 10, now_ms=1)                         # caught up: proposes (1, 2, 3)
    assert p.pending_isr == (1, 2, 3)
    p.on_local_append(12)
    p.on_follower_fetch(2, 12, now_ms=2)
    assert p.await_replication("req", 12, deadline_ms=30_000) == []
    assert p.high_watermark == 10                                # 3 (pending) holds it back
    assert p.abandon_pending_isr() == [ProduceCompletion("req", ErrorCode.NONE)]
    assert p.high_watermark == 12 and p.pending_isr is None


def test_an_idle_replica_asks_for_no_poll_until_its_state_changes() -> None:
    # An idle replica (most of them, at 100k) holds no poll entry: nothing is due until
    # an append, a parked produce or a role change, and whoever makes one asks for a poll.
    p = leader(leo=10, hw=10)
    p.on_follower_fetch(2, 10, now_ms=1)
    p.on_follower_fetch(3, 10, now_ms=1)
    assert p.ms_until_due(now_ms=5) is None
    p.on_local_append(11)                   # the followers lag from here: a deadline
    assert p.ms_until_due(now_ms=5) == LAG_MS + 1 - 4
    p.on_follower_fetch(2, 11, now_ms=6)
    p.on_follower_fetch(3, 11, now_ms=6)
    assert p.await_replication("req", required_offset=12, deadline_ms=900) == []
    assert p.ms_until_due(now_ms=100) == 800
    assert p.poll(now_ms=900)[0] == [ProduceCompletion("req", ErrorCode.REQUEST_TIMED_OUT)]
    assert p.ms_until_due(now_ms=901) is None
    follower = PartitionReplica(TP, 2, replica_lag_time_max_ms=LAG_MS)
    follower.become_follower(1, 5, 7, (1, 2, 3), (1, 2, 3))
    assert follower.ms_until_due(now_ms=0) is None
