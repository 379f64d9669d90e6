"""AlterPartition: compare-and-set on the partition epoch, and every refusal."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log import IsrChange, LeaderRecoveryState
from tests.quorum.controller.harness import Harness

R = M.AlterPartitionRequest


def three_brokers() -> Harness:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2, 3]])
    return h


def raw(h: Harness, request) -> M.AlterPartitionResponse:
    return h.commit(h.controller.handle_alter_partition(request, h.now_ms))


def request_for(h: Harness, new_isr, *, broker_id=1, leader_epoch=None, partition_epoch=None,
                topic_id=None, topic_name="", partition=0, lrs=0, epochs=None):
    p = h.partition("t")
    b = h.image.cluster.get(broker_id)
    data = R.PartitionData(
        partition_index=partition,
        leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
        leader_recovery_state=lrs,
        new_isr_with_epochs=[R.BrokerState(broker_id=x, broker_epoch=(epochs or {}).get(x, -1))
                             for x in new_isr])
    tid = h.topic("t").topic_id if topic_id is None and not topic_name else topic_id
    return R(broker_id=broker_id, broker_epoch=b.broker_epoch if b else -1,
             topics=[R.TopicData(topic_name=topic_name, topic_id=tid or uuid.UUID(int=0),
                                 partitions=[data])])


def test_shrink_then_expand_bumps_only_the_partition_epoch() -> None:
    h = three_brokers()
    shrunk = h.alter_partition("t", 0, [1, 2])
    assert (shrunk.error_code, shrunk.isr, shrunk.partition_epoch, shrunk.leader_epoch,
            shrunk.leader_id) == (0, [1, 2], 1, 0, 1)
    p = h.partition("t")
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ((1, 2), 1, 0)
    grown = h.alter_partition("t", 0, [1, 2, 3])
    assert (grown.isr, grown.partition_epoch) == ([1, 2, 3], 2)
    assert h.partition("t").isr == (1, 2, 3)


def test_the_response_is_what_replay_produces() -> None:
    h = three_brokers()
    result = h.controller.handle_alter_partition(request_for(h, [1, 3]), h.now_ms)
    outcome = h.controller.replay(result.records, h.next_offset)
    h.next_offset += 1
    p = h.partition("t")
    answer = result.response.topics[0].partitions[0]
    assert (answer.isr, answer.partition_epoch, answer.leader_epoch) == \
        (list(p.isr), p.partition_epoch, p.leader_epoch)
    assert outcome.changes == (IsrChange("t", h.topic("t").topic_id, 0, (1, 3), 1),)


def test_a_stale_partition_epoch_is_refused() -> None:
    h = three_brokers()
    h.alter_partition("t", 0, [1, 2])
    answer = raw(h, request_for(h, [1], partition_epoch=0)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert h.partition("t").isr == (1, 2)


def test_a_retry_of_an_applied_change_gets_the_current_state_and_writes_nothing() -> None:
    h = three_brokers()
    h.alter_partition("t", 0, [1, 2])
    result = h.controller.handle_alter_partition(request_for(h, [1, 2], partition_epoch=0),
                                                 h.now_ms)
    assert result.records == ()
    answer = result.response.topics[0].partitions[0]
    assert (answer.error_code, answer.isr, answer.partition_epoch) == (0, [1, 2], 1)


def test_a_future_partition_epoch_is_refused() -> None:
    h = three_brokers()
    answer = raw(h, request_for(h, [1, 2], partition_epoch=9)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION


def test_a_stale_leader_epoch_is_fenced() -> None:
    h = three_brokers()
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    assert h.partition("t").leader == 2
    # The old leader (1) lost leadership; the new leader sends with a stale epoch.
    answer = raw(h, request_for(h, [2, 3], broker_id=2, leader_epoch=0)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_only_the_leader_may_alter_the_isr() -> None:
    h = three_brokers()
    answer = raw(h, request_for(h, [1, 2], broker_id=2)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_fenced_replica_may_not_join_the_isr() -> None:
    h = three_brokers()
    h.alter_partition("t", 0, [1, 2])
    h.heartbeat(3, want_fence=True)
    answer = raw(h, request_for(h, [1, 2, 3])).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA
    assert h.partition("t").isr == (1, 2)


def test_a_shutting_down_replica_may_not_join_the_isr() -> None:
    h = three_brokers()
    h.create_topic("u", assignments=[[3]])
    h.alter_partition("t", 0, [1, 2])
    h.heartbeat(3, want_shut_down=True)        # leads "u": controlled shutdown begins
    b = h.image.cluster.get(3)
    assert b.in_controlled_shutdown and not b.fenced
    answer = raw(h, request_for(h, [1, 2, 3])).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA


def test_a_replica_named_with_an_old_broker_epoch_is_ineligible() -> None:
    h = three_brokers()
    h.alter_partition("t", 0, [1, 2])
    old_epoch = h.image.cluster.get(3).broker_epoch
    h.register(3, incarnation=uuid.UUID(int=33))       # broker 3 restarted
    h.heartbeat(3)
    assert not h.image.cluster.get(3).fenced
    stale = request_for(h, [1, 2, 3], epochs={3: old_epoch})
    assert raw(h, stale).topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    fresh = request_for(h, [1, 2, 3], epochs={3: h.image.cluster.get(3).broker_epoch})
    assert raw(h, fresh).topics[0].partitions[0].error_code == 0


def test_v0_requests_name_the_isr_without_epochs() -> None:
    h = three_brokers()
    answer = h.alter_partition("t", 0, [1, 3], with_epochs=False)
    assert (answer.error_code, answer.isr) == (0, [1, 3])


@pytest.mark.parametrize("new_isr", [[], [2, 3], [1, 1], [1, 4]],
                         ids=["empty", "without leader", "duplicate", "not a replica"])
def test_malformed_isrs_are_invalid_requests(new_isr) -> None:
    h = three_brokers()
    answer = raw(h, request_for(h, new_isr)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.INVALID_REQUEST


def test_unknown_topics_and_partitions() -> None:
    h = three_brokers()
    by_id = raw(h, request_for(h, [1], topic_id=uuid.UUID(int=77)))
    assert by_id.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert by_id.topics[0].topic_id == uuid.UUID(int=77)
    by_name = raw(h, request_for(h, [1], topic_name="nope"))
    assert by_name.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    named = raw(h, request_for(h, [1, 2], topic_name="t"))           # v0-1 style, by name
    assert named.topics[0].partitions[0].error_code == 0
    assert named.topics[0].topic_id == h.topic("t").topic_id
    missing = raw(h, request_for(h, [1], partition=5))
    assert missing.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_stale_broker_epoch_fails_the_whole_request() -> None:
    h = three_brokers()
    request = request_for(h, [1, 2])
    request = dataclasses.replace(request, broker_epoch=request.broker_epoch + 100)
    response = raw(h, request)
    assert (response.error_code, response.topics) == (ErrorCode.STALE_BROKER_EPOCH, [])


def test_the_same_partition_twice_in_one_request() -> None:
    h = three_brokers()
    request = request_for(h, [1, 2])
    request.topics[0].partitions.append(request_for(h, [1, 3]).topics[0].partitions[0])
    result = h.controller.handle_alter_partition(request, h.now_ms)
    codes = [p.error_code for p in result.response.topics[0].partitions]
    assert codes == [0, ErrorCode.INVALID_REQUEST] and len(result.records) == 1


def test_a_recovering_leader_reports_recovery() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]],
                   configs={"unclean.leader.election.enable": "true"})
    h.alter_partition("t", 0, [1])
    h.heartbeat(1, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.leader_recovery_state) == (2, LeaderRecoveryState.RECOVERING)
    # While recovering the ISR cannot grow ...
    h.heartbeat(1)
    growing = raw(h, request_for(h, [2, 1], broker_id=2, lrs=1))
    assert growing.topics[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    # ... the leader first reports that it has recovered, then grows the ISR.
    recovered = h.alter_partition("t", 0, [2], leader_recovery_state=0)
    assert recovered.leader_recovery_state == 0
    assert h.partition("t").leader_recovery_state == LeaderRecoveryState.RECOVERED
    assert h.alter_partition("t", 0, [2, 1]).isr == [2, 1]
    # and can never go back to recovering
    back = raw(h, request_for(h, [2], broker_id=2, lrs=1))
    assert back.topics[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
