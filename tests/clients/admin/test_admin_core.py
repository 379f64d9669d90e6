"""The admin client's pure decisions (clients/_core/admin.py): offset reset planning by
Kafka's ConsumerGroupCommand rules, lag, quorum lag, and the consumer protocol bytes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from clients._core.admin import (
    ConfigResource, ConfigResourceType, NewTopic, OffsetReset, decode_assignment,
    decode_subscription, group_lag, leader_log_end, plan_offset_reset, quorum_replicas,
)
from clients.protocol import encode_message, messages
from clients.types import TopicPartition

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
START = {T0: 0, T1: 10, T2: 5}
END = {T0: 100, T1: 20, T2: 5}          # T2 is empty: start == end


def test_reset_to_earliest_and_latest_are_the_log_bounds() -> None:
    parts = [T0, T1, T2]
    assert plan_offset_reset(OffsetReset.to_earliest(), parts, {}, START, END) == START
    assert plan_offset_reset(OffsetReset.to_latest(), parts, {}, START, END) == END


def test_reset_to_offset_is_clamped_into_the_log() -> None:
    plan = plan_offset_reset(OffsetReset.to_offset(15), [T0, T1, T2], {}, START, END)
    assert plan == {T0: 15, T1: 15, T2: 5}
    plan = plan_offset_reset(OffsetReset.to_offset(3), [T1], {}, START, END)
    assert plan == {T1: 10}                 # below the log start: the log start


def test_shift_moves_the_committed_offset_within_the_log() -> None:
    committed = {T0: 50, T1: 12}
    assert plan_offset_reset(OffsetReset.shift_by(-5), [T0, T1], committed, START, END) == {T0: 45, T1: 10}
    assert plan_offset_reset(OffsetReset.shift_by(70), [T0, T1], committed, START, END) == {T0: 100, T1: 20}


def test_shift_without_a_committed_offset_is_refused_naming_the_partition() -> None:
    with pytest.raises(ValueError, match="t-2"):
        plan_offset_reset(OffsetReset.shift_by(1), [T0, T2], {T0: 1}, START, END)


def test_reset_to_a_time_takes_the_first_offset_at_or_after_it_or_the_log_end() -> None:
    by_time = {T0: 42, T1: -1}               # nothing in t-1 that recent
    plan = plan_offset_reset(OffsetReset.to_timestamp(1_700_000_000_000), [T0, T1], {}, START, END,
                             by_time)
    assert plan == {T0: 42, T1: 20}


def test_reset_specs_refuse_negative_values() -> None:
    with pytest.raises(ValueError):
        OffsetReset.to_offset(-1)
    with pytest.raises(ValueError):
        OffsetReset.to_timestamp(-5)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=8),
       st.integers(-2000, 2000), st.integers(0, 3000))
def test_any_plan_lands_inside_the_log(bounds, shift, offset) -> None:
    parts = [TopicPartition("p", i) for i in range(len(bounds))]
    start = {tp: min(a, b) for tp, (a, b) in zip(parts, bounds)}
    end = {tp: max(a, b) for tp, (a, b) in zip(parts, bounds)}
    committed = {tp: (start[tp] + end[tp]) // 2 for tp in parts}
    for spec in (OffsetReset.shift_by(shift), OffsetReset.to_offset(offset),
                 OffsetReset.to_earliest(), OffsetReset.to_latest()):
        plan = plan_offset_reset(spec, parts, committed, start, end)
        assert set(plan) == set(parts)
        assert all(start[tp] <= plan[tp] <= end[tp] for tp in parts), (spec, plan)


def test_lag_is_measured_from_the_committed_offset_or_the_log_start() -> None:
    lag = group_lag({T0: 40, T1: None, T2: 5}, START, END)
    assert (lag[T0].lag, lag[T1].lag, lag[T2].lag) == (60, 10, 0)
    assert lag[T1].committed is None
    # A committed offset below a log start moved by DeleteRecords lags by the log only.
    assert group_lag({T1: 2}, START, END)[T1].lag == 10


def test_quorum_lag_is_against_the_leaders_log_end() -> None:
    states = [SimpleNamespace(replica_id=1, log_end_offset=90, last_fetch_timestamp=5,
                              last_caught_up_timestamp=4),
              SimpleNamespace(replica_id=2, log_end_offset=100, last_fetch_timestamp=-1,
                              last_caught_up_timestamp=-1),
              SimpleNamespace(replica_id=3, log_end_offset=-1, last_fetch_timestamp=-1,
                              last_caught_up_timestamp=-1)]
    leader_end = leader_log_end(states, leader_id=2)
    assert leader_end == 100
    replicas = quorum_replicas(states, leader_end)
    assert [(r.replica_id, r.lag) for r in replicas] == [(1, 10), (2, 0), (3, None)]
    assert leader_log_end(states, leader_id=7) == -1        # the leader's own end unknown
    assert [r.lag for r in quorum_replicas(states, -1)] == [None, None, None]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_bytes_decode_to_sorted_partitions(version: int) -> None:
    A = messages.ConsumerProtocolAssignment
    body = A(assigned_partitions=[A.TopicPartition(topic="b", partitions=[2, 0]),
                                  A.TopicPartition(topic="a", partitions=[1])], user_data=b"x")
    data = version.to_bytes(2, "big") + encode_message(body, version)
    assert decode_assignment(data) == (TopicPartition("a", 1), TopicPartition("b", 0),
                                       TopicPartition("b", 2))
    # A newer version than ours adds fields at the end: still readable.
    assert decode_assignment((9).to_bytes(2, "big") + encode_message(body, 3) + b"\0\0") == \
        decode_assignment(data)


def test_subscription_and_empty_bytes() -> None:
    S = messages.ConsumerProtocolSubscription
    data = (1).to_bytes(2, "big") + encode_message(S(topics=["x", "y"]), 1)
    assert decode_subscription(data) == ("x", "y")
    assert decode_assignment(b"") == () and decode_subscription(None) == ()


def test_garbage_assignment_bytes_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="ConsumerProtocolAssignment"):
        decode_assignment(b"\x00\x01\xff\xff\xff\x7f")
    with pytest.raises(ValueError):
        decode_assignment(b"\x00")


def test_new_topic_takes_counts_or_assignments_not_both() -> None:
    NewTopic("a", 3, 1)
    NewTopic("b", replica_assignments={0: [1, 2]})
    with pytest.raises(ValueError, match="NewTopic c"):
        NewTopic("c", 3, replica_assignments={0: [1]})
    with pytest.raises(ValueError):
        NewTopic("")


def test_config_resources_name_themselves() -> None:
    assert ConfigResource.broker(1) == ConfigResource(ConfigResourceType.BROKER, "1")
    assert "cluster-wide" in str(ConfigResource.broker())
    assert str(ConfigResource.topic("t")) == "topic 't'"
