"""Reassignment plans, proposals, verify states and throttles, and the quorum views (pure)."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, strategies as st

from clients._core.admin import QuorumInfo, QuorumReplica
from clients._core.reassignment import (
    PartitionReassignment, PlanError, ReassignmentState, format_plan, log_dir_status, parse_plan,
    parse_topics_to_move, plan_log_dirs, propose_assignment, verify_status,
)
from clients.cli.quorum import replication_view, status_view
from clients.cli.reassign import throttle_configs
from clients.types import TopicPartition, TopicPartitionReplica

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_a_plan_round_trips_through_kafkas_format() -> None:
    plan = {TP1: (3, 1), TP0: (2, 3)}
    text = format_plan(plan)
    assert json.loads(text)["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [2, 3],
                                                 "log_dirs": ["any", "any"]}
    assert parse_plan(text) == plan


@pytest.mark.parametrize("text, words", [
    ("{", "not valid JSON"),
    ('{"version": 2, "partitions": []}', "unsupported plan version"),
    ('{"partitions": []}', "names no partition"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "empty"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "twice"),
    ('{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', "non-negative"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]}', "broker ids"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["d"]}]}', "absolute"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d"]}]}',
     "one entry per replica"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
     ' {"topic": "t", "partition": 0, "replicas": [2]}]}', "appears twice"),
])
def test_bad_plans_are_refused_with_one_line(text: str, words: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_topics_to_move() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}') \
        == ["a", "b"]
    with pytest.raises(PlanError):
        parse_topics_to_move('{"topics": []}')


@given(st.integers(1, 6), st.integers(1, 20), st.integers(1, 3), st.integers(0, 2**32))
def test_a_proposal_keeps_the_replication_factor_on_the_given_brokers(
        brokers: int, partitions: int, rf: int, seed: int) -> None:
    ids = list(range(10, 10 + brokers))
    current = {TopicPartition("t", p): tuple(range(rf)) for p in range(partitions)}
    if rf > brokers:
        with pytest.raises(PlanError):
            propose_assignment(current, ids, random.Random(seed))
        return
    proposed = propose_assignment(current, ids, random.Random(seed))
    assert proposed.keys() == current.keys()
    for replicas in proposed.values():
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(ids)
    leaders = [r[0] for r in proposed.values()]
    # Leaders round-robin: no broker leads more than its share, rounded up.
    assert max(leaders.count(b) for b in ids) <= -(-partitions // brokers)
    assert proposed == propose_assignment(current, ids, random.Random(seed))


def test_verify_states() -> None:
    plan = {TP0: (2, 3), TP1: (2, 3), TopicPartition("t", 2): (1, 2)}
    current = {TP0: (2, 3), TP1: (2, 3, 1), TopicPartition("t", 2): (3, 1)}
    ongoing = {TP1: PartitionReassignment((2, 3, 1), (3,), (1,))}
    assert verify_status(plan, current, ongoing) == {
        TP0: ReassignmentState.COMPLETE, TP1: ReassignmentState.IN_PROGRESS,
        TopicPartition("t", 2): ReassignmentState.FAILED}


def test_throttles_name_the_current_replicas_as_leaders_and_the_new_ones_as_followers() -> None:
    brokers, topics = throttle_configs({TP0: (2, 3), TP1: (1, 2)}, {TP0: (1, 2), TP1: (1, 2)})
    assert brokers == {1, 2, 3}
    assert topics == {"t": {"leader.replication.throttled.replicas": "0:1,0:2",
                            "follower.replication.throttled.replicas": "0:3"}}


def test_quorum_views() -> None:
    info = QuorumInfo(leader_id=2, leader_epoch=5, high_watermark=100, voters=(
        QuorumReplica(1, 90, 10, 1_000, 900), QuorumReplica(2, 100, 0, 1_100, 1_100),
        QuorumReplica(3, -1, None, -1, -1)), observers=(QuorumReplica(7, 100, 0, 1_050, 1_050),))
    status = status_view(info, "abc")
    # Voter 3's position is unknown to the leader: so is the largest lag (Kafka's -1).
    assert status == {"cluster_id": "abc", "leader_id": 2, "leader_epoch": 5, "high_watermark": 100,
                      "max_follower_lag": None, "max_follower_lag_time_ms": None,
                      "current_voters": [1, 2, 3], "current_observers": [7]}
    known = QuorumInfo(2, 5, 100, info.voters[:2], info.observers)
    assert (status_view(known, None)["max_follower_lag"],
            status_view(known, None)["max_follower_lag_time_ms"]) == (10, 200)
    rows = replication_view(info)
    assert [(r["node_id"], r["status"]) for r in rows] == [
        (2, "Leader"), (1, "Follower"), (3, "Follower"), (7, "Observer")]


def test_decommission_moves_each_replica_to_the_least_loaded_other_broker() -> None:
    from clients._core.reassignment import plan_decommission
    current = {TopicPartition("t", 0): (3, 1), TopicPartition("t", 1): (1, 2),
               TopicPartition("t", 2): (2, 3), TopicPartition("u", 0): (3, 2, 1)}
    plan = plan_decommission(current, 3, [1, 2, 3, 4])
    assert set(plan) == {TopicPartition("t", 0), TopicPartition("t", 2), TopicPartition("u", 0)}
    for tp, replicas in plan.items():
        assert 3 not in replicas and len(set(replicas)) == len(replicas) == len(current[tp])
        # in its place: a preferred leader on broker 3 is replaced by a preferred leader
        assert [b for b, old in zip(replicas, current[tp]) if old != 3] == \
            [b for b in current[tp] if b != 3]
    assert plan[TopicPartition("t", 0)] == (4, 1)          # broker 4 holds nothing yet


def test_decommission_without_a_spare_broker_is_refused() -> None:
    from clients._core.reassignment import plan_decommission
    with pytest.raises(PlanError, match="no other broker"):
        plan_decommission({TopicPartition("t", 0): (1, 2)}, 2, [1, 2])


def test_a_plan_may_place_replicas_in_log_dirs() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/disk2/ketch", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2, 3]}]})
    assert parse_plan(text) == {TP0: (1, 2), TP1: (2, 3)}
    r1, r2 = TopicPartitionReplica("t", 0, 1), TopicPartitionReplica("t", 0, 2)
    assert plan_log_dirs(text) == {r1: "/disk2/ketch"}
    wanted = {r1: "/a", r2: "/b", TopicPartitionReplica("t", 1, 3): "/c"}
    assert log_dir_status(wanted, {r1: "/a", r2: "/x"}, {r2: "/b"}, [TP1]) == {
        r1: ReassignmentState.COMPLETE, r2: ReassignmentState.IN_PROGRESS,
        TopicPartitionReplica("t", 1, 3): ReassignmentState.IN_PROGRESS}
    assert log_dir_status({r1: "/a"}, {r1: "/x"}, {}, []) == {r1: ReassignmentState.FAILED}
