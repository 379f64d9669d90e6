"""Sending a transaction's markers: the decisions of each round, pure (Kafka's
``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``).

A round asks the metadata image for each remaining partition's leader and sends one
WriteTxnMarkers per leader (``plan_round``); a partition whose topic is gone needs no
marker. The markers of every transaction waiting for the same broker travel in one
request (``next_batch``, ``marker_request``, ``marker_answers``), as Kafka's
TransactionMarkerChannelManager drains its queue per broker: one request in flight per
broker, the next carrying whatever queued meanwhile. The answers (``judge_answers``) then say, per partition: written (done), try again
next round (the leader moved, is not known, could not be reached, or could not replicate
in time), never going to work (given up, logged), or fenced: this coordinator, or the
producer epoch it writes, is no longer current (another coordinator has taken over), so
the whole send stops and the new coordinator finishes the job.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, TypeVar

from clients.frozen import fast_init
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log.image import MetadataImage

__all__ = [
    "MARKER_FENCED", "MARKER_RETRIABLE", "MarkerAnswers", "MarkerEntry", "judge_answers",
    "marker_answers", "marker_entries", "marker_request", "marker_response", "next_batch",
    "plan_round",
]

E = ErrorCode

# Answers after which a partition is tried again.
MARKER_RETRIABLE = frozenset({
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
    E.UNKNOWN_SERVER_ERROR, E.NETWORK_EXCEPTION, E.LEADER_NOT_AVAILABLE,
})
# Answers after which this coordinator stops sending: it, or the producer, was fenced.
MARKER_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


def plan_round(remaining: Iterable[TopicPartition], image: MetadataImage
               ) -> tuple[dict[int, list[TopicPartition]], set[TopicPartition]]:
    """The partitions to send to each leader now, and those whose topic or partition no
    longer exists (no marker needed). A partition without a leader waits for a round."""
    by_leader: dict[int, list[TopicPartition]] = {}
    deleted: set[TopicPartition] = set()
    for tp in sorted(remaining):
        topic = image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        if reg is None:
            deleted.add(tp)
        elif reg.leader >= 0:
            by_leader.setdefault(reg.leader, []).append(tp)
    return by_leader, deleted


@dataclass(slots=True)
class MarkerAnswers:
    written: set[TopicPartition] = field(default_factory=set)
    given_up: dict[TopicPartition, int] = field(default_factory=dict)
    fenced: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def settled(self) -> set[TopicPartition]:
        """Partitions not to send again."""
        return self.written | set(self.given_up)


def judge_answers(answers: dict[TopicPartition, int]) -> MarkerAnswers:
    out = MarkerAnswers()
    for tp, code in answers.items():
        if code == E.NONE:
            out.written.add(tp)
        elif code in MARKER_FENCED:
            out.fenced[tp] = code
        elif code not in MARKER_RETRIABLE:
            # UNSUPPORTED_FOR_MESSAGE_FORMAT, CORRUPT_MESSAGE and the like.
            out.given_up[tp] = code
    return out


@fast_init
@dataclass(frozen=True, slots=True)
class MarkerEntry:
    """One transaction's markers for the partitions one broker leads."""
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


T = TypeVar("T")


def next_batch(queue: Sequence[tuple[MarkerEntry, T]]
               ) -> tuple[list[tuple[MarkerEntry, T]], list[tuple[MarkerEntry, T]]]:
    """The queued entries that go in the next request, and the rest, both in queue order.
    The answers name only the producer id, so one producer id per request."""
    batch: list[tuple[MarkerEntry, T]] = []
    rest: list[tuple[MarkerEntry, T]] = []
    producers: set[int] = set()
    for item in queue:
        if item[0].producer_id in producers:
            rest.append(item)
        else:
            producers.add(item[0].producer_id)
            batch.append(item)
    return batch, rest


def marker_request(entries: Sequence[MarkerEntry]) -> Any:
    cls = messages.WriteTxnMarkersRequest
    markers = []
    for e in entries:
        by_topic: dict[str, list[int]] = {}
        for tp in e.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        markers.append(cls.WritableTxnMarker(
            producer_id=e.producer_id, producer_epoch=e.producer_epoch,
            transaction_result=e.committed, coordinator_epoch=e.coordinator_epoch,
            topics=[cls.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()]))
    return cls(markers=markers)


def marker_answers(entries: Sequence[MarkerEntry], response: Any) -> list[dict[TopicPartition, int]]:
    """Each entry's answer per partition; a partition the response leaves out counts as
    UNKNOWN_SERVER_ERROR (tried again)."""
    codes: dict[tuple[int, TopicPartition], int] = {
        (m.producer_id, TopicPartition(t.name, p.partition_index)): p.error_code
        for m in response.markers for t in m.topics for p in t.partitions}
    return [{tp: codes.get((e.producer_id, tp), E.UNKNOWN_SERVER_ERROR) for tp in e.partitions}
            for e in entries]


def marker_entries(request: Any) -> list[MarkerEntry]:
    """A WriteTxnMarkers request as the leader reads it: one entry per marker."""
    return [MarkerEntry(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                        m.coordinator_epoch,
                        tuple(TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes))
            for m in request.markers]


def marker_response(entries: Sequence[MarkerEntry],
                    answers: Sequence[dict[TopicPartition, int]]) -> Any:
    """The leader's WriteTxnMarkers response: each entry's answer per partition, topics in
    the order the entry names them."""
    R = messages.WriteTxnMarkersResponse
    markers = []
    for e, codes in zip(entries, answers):
        by_topic: dict[str, list[int]] = {}
        for tp in e.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        markers.append(R.WritableTxnMarkerResult(producer_id=e.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t, partitions=[
                R.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=codes[TopicPartition(t, p)]) for p in ps])
            for t, ps in by_topic.items()]))
    return R(markers=markers)
