"""The quorum leader's view of its voters and observers (quorum/progress.py)."""
from __future__ import annotations

from quorum.progress import UNKNOWN, RaftOffsetIndex, ReplicaTracker


def test_a_fetch_at_the_leaders_end_is_caught_up_now() -> None:
    t = ReplicaTracker()
    t.observe_fetch(7, log_end_offset=100, leader_end_offset=100, now_ms=1_000)
    p = t.get(7)
    assert (p.log_end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp) == (100, 1_000, 1_000)


def test_reaching_the_previous_leader_end_is_caught_up_as_of_the_previous_fetch() -> None:
    # Kafka's LeaderState.ReplicaState: the leader moved on while the replica fetched.
    t = ReplicaTracker()
    t.observe_fetch(7, 90, 100, 1_000)
    assert t.get(7).last_caught_up_timestamp == UNKNOWN
    t.observe_fetch(7, 100, 120, 1_500)         # reached the end the leader had at 1_000
    p = t.get(7)
    assert (p.log_end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp) == (100, 1_500, 1_000)
    t.observe_fetch(7, 110, 140, 2_000)         # behind both: caught-up time stays
    assert t.get(7).last_caught_up_timestamp == 1_000


def test_positions_and_times_never_go_backwards_and_idle_observers_are_forgotten() -> None:
    t = ReplicaTracker()
    t.observe_fetch(1, 50, 50, 2_000)
    t.observe_fetch(1, 40, 60, 1_500)           # an older report through another path
    p = t.get(1)
    assert (p.log_end_offset, p.last_fetch_timestamp) == (50, 2_000)
    t.observe_fetch(2, 10, 60, 2_100)
    t.forget_idle(now_ms=2_050 + 1_000, idle_ms=1_000)
    assert [r.replica_id for r in t.replicas()] == [2]
    t.reset()
    assert t.replicas() == [] and t.get(2).log_end_offset == UNKNOWN


def test_raft_indexes_map_to_the_metadata_log_end_after_them() -> None:
    idx = RaftOffsetIndex(entries_max=4)
    idx.record(0, 0)
    idx.record(2, 0)            # a leader change: no records, no new mapping
    idx.record(3, 5)
    idx.record(5, 9)
    assert [idx.offset_at(i) for i in (0, 1, 2, 3, 4, 5, 99)] == [0, 0, 0, 5, 5, 9, 9]
    idx.record(6, 12)
    idx.record(7, 13)           # over the bound: the older half goes
    assert idx.offset_at(3) == UNKNOWN and idx.offset_at(6) == 12 and idx.offset_at(7) == 13
    idx.record(3, 4)            # a state load starting over at a lower index
    assert idx.offset_at(3) == 4 and idx.offset_at(7) == 4 and idx.offset_at(2) == UNKNOWN
