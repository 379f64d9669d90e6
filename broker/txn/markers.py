"""Sending a transaction's markers: the decisions of each round, pure (Kafka's
``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``).

A round asks the metadata image for each remaining partition's leader and sends one
WriteTxnMarkers per leader (``plan_round``); a partition whose topic is gone needs no
marker. The answers (``judge_answers``) then say, per partition: written (done), try again
next round (the leader moved, is not known, could not be reached, or could not replicate
in time), never going to work (given up, logged), or fenced: this coordinator, or the
producer epoch it writes, is no longer current (another coordinator has taken over), so
the whole send stops and the new coordinator finishes the job.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log.image import MetadataImage

__all__ = ["MARKER_FENCED", "MARKER_RETRIABLE", "MarkerAnswers", "judge_answers", "plan_round"]

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
