"""AlterPartition batching: the proposals of several partitions and topics in one request,
through the wire codec and the real controller, and each proposal's own answer back."""
from __future__ import annotations

import uuid

import pytest

from broker import alter_partition_batch
from broker.replica.partition import AlterIsr
from broker.replica_manager import AlterPartitionAnswer, SendAlterPartition
from clients.protocol import messages as M
from clients.protocol._codec import decode_message, encode_message
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from tests.quorum.controller.harness import Harness


def cluster() -> Harness:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("a", assignments=[[1, 2, 3], [1, 3, 2]])
    h.create_topic("b", assignments=[[1, 2, 3]])
    return h


def proposal(h: Harness, topic: str, index: int, new_isr: tuple[int, ...],
             partition_epoch: int | None = None) -> SendAlterPartition:
    p = h.partition(topic, index)
    epoch = p.partition_epoch if partition_epoch is None else partition_epoch
    return SendAlterPartition(
        AlterIsr(TopicPartition(topic, index), p.leader_epoch, epoch, new_isr),
        h.topic(topic).topic_id,
        tuple((b, h.image.cluster.get(b).broker_epoch) for b in new_isr))


def round_trip(h: Harness, effects: list[SendAlterPartition], version: int,
               broker_epoch: int | None = None) -> list[AlterPartitionAnswer]:
    epoch = h.image.cluster.get(1).broker_epoch if broker_epoch is None else broker_epoch
    request = alter_partition_batch.request_for(1, epoch, effects)
    request = decode_message(M.AlterPartitionRequest, version, encode_message(request, version))
    response = h.commit(h.controller.handle_alter_partition(request, h.now_ms))
    response = decode_message(M.AlterPartitionResponse, version, encode_message(response, version))
    return alter_partition_batch.answers_for(effects, version, response)


@pytest.mark.parametrize("version", [1, 3])
def test_one_request_answers_every_partition_of_every_topic_on_its_own(version: int) -> None:
    h = cluster()
    effects = [proposal(h, "a", 0, (1, 2)), proposal(h, "b", 0, (1, 3)),
               proposal(h, "a", 1, (1, 3), partition_epoch=7)]     # stale: refused alone
    request = alter_partition_batch.request_for(1, 0, effects)
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.topics] == \
        [("a", [0, 1]), ("b", [0])]
    answers = round_trip(h, effects, version)
    assert [(a.error_code, a.isr, a.partition_epoch) for a in answers] == [
        (ErrorCode.NONE, (1, 2), 1), (ErrorCode.NONE, (1, 3), 1),
        (ErrorCode.INVALID_UPDATE_VERSION, (), -1)]
    # The committed state is what each answer says; the refused partition is unchanged.
    assert (h.partition("a", 0).isr, h.partition("b", 0).isr, h.partition("a", 1).isr) == \
        ((1, 2), (1, 3), (1, 3, 2))


def test_a_request_level_error_answers_every_proposal_and_commits_nothing() -> None:
    h = cluster()
    effects = [proposal(h, "a", 0, (1, 2)), proposal(h, "b", 0, (1, 3))]
    answers = round_trip(h, effects, 3, broker_epoch=12345)
    assert [a.error_code for a in answers] == [ErrorCode.STALE_BROKER_EPOCH] * 2
    assert (h.partition("a", 0).isr, h.partition("b", 0).isr) == ((1, 2, 3), (1, 2, 3))


def test_a_partition_the_response_leaves_out_is_not_taken_as_refused() -> None:
    h = cluster()
    effects = [proposal(h, "a", 0, (1, 2)), proposal(h, "b", 0, (1, 3))]
    R = M.AlterPartitionResponse
    response = R(error_code=0, topics=[R.TopicData(
        topic_name="a", topic_id=h.topic("a").topic_id, partitions=[R.PartitionData(
            partition_index=0, error_code=0, leader_id=1, leader_epoch=0, isr=[1, 2],
            partition_epoch=1)])])
    first, second = alter_partition_batch.answers_for(effects, 3, response)
    assert (first.error_code, first.isr) == (ErrorCode.NONE, (1, 2))
    # UNKNOWN_SERVER_ERROR is not among the codes that make the leader drop its proposal.
    assert second.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_topics_are_told_apart_by_id_from_v2() -> None:
    h = cluster()
    effects = [proposal(h, "a", 0, (1, 2))]
    R = M.AlterPartitionResponse
    other = R(error_code=0, topics=[R.TopicData(topic_name="a", topic_id=uuid.uuid4(), partitions=[
        R.PartitionData(partition_index=0, error_code=0, isr=[1, 2], partition_epoch=1)])])
    assert alter_partition_batch.answers_for(effects, 3, other)[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
