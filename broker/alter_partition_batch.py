"""AlterPartition batching, pure: many ISR proposals in one request, one answer each.

Kafka's ``AlterPartitionManager`` keeps the proposals not yet sent and, with no request
in flight, sends all of them in one AlterPartition request; the controller answers per
partition. The replica core already keeps at most one proposal per partition in flight,
so a batch never names a partition twice. ``request_for`` builds the request from
``SendAlterPartition`` effects; ``answers_for`` reads each effect's answer out of the
response (a top-level error answers every partition; a partition the response leaves
out is answered UNKNOWN_SERVER_ERROR, which keeps the core from assuming either way).
"""
from __future__ import annotations

import uuid
from typing import Any, Sequence

from broker.replica_manager import AlterPartitionAnswer, SendAlterPartition
from clients.protocol import messages
from clients.protocol.errors import ErrorCode

__all__ = ["BATCH_MAX", "request_for", "answers_for"]

# Proposals in one request: one request commits as one batch of PartitionChangeRecords
# in the metadata log, which is kept at the size bench/scale.py's CreateTopics use
# (entries of thousands of records broke pysyncobj's transport under load).
BATCH_MAX = 1000


def request_for(broker_id: int, broker_epoch: int,
                effects: Sequence[SendAlterPartition]) -> messages.AlterPartitionRequest:
    cls = messages.AlterPartitionRequest
    topics: dict[uuid.UUID, Any] = {}
    for effect in effects:
        proposal = effect.proposal
        topic = topics.get(effect.topic_id)
        if topic is None:
            topic = topics[effect.topic_id] = cls.TopicData(
                topic_name=proposal.partition.topic, topic_id=effect.topic_id, partitions=[])
        topic.partitions.append(cls.PartitionData(
            partition_index=proposal.partition.partition, leader_epoch=proposal.leader_epoch,
            new_isr=list(proposal.new_isr),
            new_isr_with_epochs=[cls.BrokerState(broker_id=b, broker_epoch=e)
                                 for b, e in effect.new_isr_with_epochs],
            # RECOVERED: a leader proposes only once recovered (KIP-704; its first
            # proposal after an unclean election says so, with the ISR unchanged).
            leader_recovery_state=0, partition_epoch=proposal.partition_epoch))
    return cls(broker_id=broker_id, broker_epoch=broker_epoch, topics=list(topics.values()))


def answers_for(effects: Sequence[SendAlterPartition], version: int,
                response: messages.AlterPartitionResponse) -> list[AlterPartitionAnswer]:
    """One answer per effect, in the order of ``effects``."""
    if response.error_code != ErrorCode.NONE:
        return [AlterPartitionAnswer(response.error_code) for _ in effects]
    by_id = version >= 2        # v2+ names topics by id, v0-1 by name
    parts: dict[tuple[Any, int], Any] = {}
    for topic in response.topics:
        key = topic.topic_id if by_id else topic.topic_name
        for part in topic.partitions:
            parts[(key, part.partition_index)] = part
    answers = []
    for effect in effects:
        tp = effect.proposal.partition
        part = parts.get((effect.topic_id if by_id else tp.topic, tp.partition))
        if part is None:
            answers.append(AlterPartitionAnswer(ErrorCode.UNKNOWN_SERVER_ERROR))
        elif part.error_code != ErrorCode.NONE:
            answers.append(AlterPartitionAnswer(part.error_code))
        else:
            answers.append(AlterPartitionAnswer(ErrorCode.NONE, part.leader_epoch, part.partition_epoch,
                                                tuple(part.isr), part.leader_recovery_state == 1))
    return answers
