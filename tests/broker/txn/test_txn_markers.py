"""Each round of sending a transaction's markers: where they go, and what the answers
mean (pure)."""
from __future__ import annotations

from broker.txn.markers import judge_answers, plan_round
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from tests.metadata_log.builders import image_of, partition, register, topic

E = ErrorCode
A0, A1, A2, B0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2),
                  TopicPartition("b", 0))


def test_a_round_groups_partitions_per_leader_and_drops_deleted_ones() -> None:
    image = image_of([register(1), register(2),
                      topic("a", 1), partition(1, 0, [1, 2]), partition(1, 1, [2, 1]),
                      partition(1, 2, [1], isr=[], leader=-1)])
    by_leader, deleted = plan_round({A0, A1, A2, B0, TopicPartition("a", 7)}, image)
    assert by_leader == {1: [A0], 2: [A1]}                  # a-2 has no leader: next round
    assert deleted == {B0, TopicPartition("a", 7)}           # no topic b, no partition a-7


def test_answers_are_written_retried_given_up_or_fenced() -> None:
    judged = judge_answers({A0: E.NONE, A1: E.NOT_LEADER_OR_FOLLOWER, A2: E.NETWORK_EXCEPTION,
                            B0: E.UNSUPPORTED_FOR_MESSAGE_FORMAT})
    assert judged.written == {A0} and judged.given_up == {B0: E.UNSUPPORTED_FOR_MESSAGE_FORMAT}
    assert judged.settled == {A0, B0} and not judged.fenced      # a-1, a-2: again
    fenced = judge_answers({A0: E.NONE, A1: E.TRANSACTION_COORDINATOR_FENCED,
                            A2: E.INVALID_PRODUCER_EPOCH})
    assert fenced.fenced == {A1: E.TRANSACTION_COORDINATOR_FENCED, A2: E.INVALID_PRODUCER_EPOCH}
