"""Each round of sending a transaction's markers: where they go, and what the answers
mean (pure)."""
from __future__ import annotations

from broker.txn.markers import judge_answers, plan_round
from clients.protocol import messages
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


def test_transactions_for_one_broker_share_a_request_one_producer_id_each() -> None:
    from broker.txn.markers import MarkerEntry, marker_answers, marker_request, next_batch
    a = MarkerEntry(7, 0, True, 3, (A0, A1))
    b = MarkerEntry(8, 2, False, 3, (B0,))
    a_again = MarkerEntry(7, 1, False, 3, (A2,))        # the same producer: next request
    batch, rest = next_batch([(a, "fa"), (a_again, "fa2"), (b, "fb")])
    assert batch == [(a, "fa"), (b, "fb")] and rest == [(a_again, "fa2")]
    req = marker_request([a, b])
    assert [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
             [(t.name, t.partition_indexes) for t in m.topics]) for m in req.markers] == \
        [(7, 0, True, 3, [("a", [0, 1])]), (8, 2, False, 3, [("b", [0])])]
    R = messages.WriteTxnMarkersResponse
    resp = R(markers=[
        R.WritableTxnMarkerResult(producer_id=8, topics=[R.WritableTxnMarkerTopicResult(
            name="b", partitions=[R.WritableTxnMarkerPartitionResult(
                partition_index=0, error_code=E.NOT_LEADER_OR_FOLLOWER)])]),
        R.WritableTxnMarkerResult(producer_id=7, topics=[R.WritableTxnMarkerTopicResult(
            name="a", partitions=[R.WritableTxnMarkerPartitionResult(
                partition_index=0, error_code=E.NONE)])])])
    # Matched by producer id, whatever the order; a partition left out is tried again.
    assert marker_answers([a, b], resp) == [{A0: E.NONE, A1: E.UNKNOWN_SERVER_ERROR},
                                            {B0: E.NOT_LEADER_OR_FOLLOWER}]


def test_the_leader_reads_entries_and_answers_what_the_coordinator_matches() -> None:
    from broker.txn.markers import (
        MarkerEntry, marker_answers, marker_entries, marker_request, marker_response,
    )
    a = MarkerEntry(7, 0, True, 3, (A0, A1, B0))
    b = MarkerEntry(8, 2, False, 3, (A2,))
    assert marker_entries(marker_request([a, b])) == [a, b]
    answers = [{A0: E.NONE, A1: E.NOT_ENOUGH_REPLICAS, B0: E.NONE}, {A2: E.INVALID_PRODUCER_EPOCH}]
    resp = marker_response([a, b], answers)
    assert [(m.producer_id, [(t.name, [p.partition_index for p in t.partitions]) for t in m.topics])
            for m in resp.markers] == [(7, [("a", [0, 1]), ("b", [0])]), (8, [("a", [2])])]
    assert marker_answers([a, b], resp) == answers
