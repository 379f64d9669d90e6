"""Plain value types shared by Ketch's producer, consumer and admin client.

Everything here is immutable and cheap: NamedTuples (`TopicPartition` is hashable, a dict
key in every client). Names follow
Kafka's Java client (`TopicPartition`, `OffsetAndMetadata`, `RecordMetadata`,
`ConsumerRecord`, `OffsetAndTimestamp`), so code written against kafka-python or the Java
API reads the same.

Not here: cluster metadata views (`clients._core.metadata`), configuration
(`clients._core.config`), exceptions (`clients.errors`).
"""
from __future__ import annotations

import uuid
from typing import NamedTuple

from clients.records import NO_PARTITION_LEADER_EPOCH, NO_TIMESTAMP, TimestampType

__all__ = [
    "TopicPartition", "TopicIdPartition", "TopicPartitionReplica", "OffsetAndMetadata",
    "OffsetAndTimestamp", "RecordMetadata", "ConsumerGroupMetadata",
    "ConsumerRecord", "Header", "NO_TIMESTAMP", "TimestampType", "NO_LEADER_EPOCH",
]

# Kafka's "no leader epoch known" sentinel (-1), as in OffsetCommit / Fetch / ListOffsets.
NO_LEADER_EPOCH = NO_PARTITION_LEADER_EPOCH

Header = tuple[str, "bytes | None"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class TopicPartitionReplica(NamedTuple):
    """A partition's replica on one broker (Kafka's TopicPartitionReplica): what
    AlterReplicaLogDirs moves between that broker's log directories."""
    topic: str
    partition: int
    broker_id: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} on broker {self.broker_id}"


class TopicIdPartition(NamedTuple):
    """A partition named by its topic's id (KIP-516), as Fetch v13+ names them: the id
    outlives renames and tells a recreated topic from the old one."""
    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the *next* record to read (Kafka's rule)."""
    offset: int
    metadata: str = ""
    leader_epoch: int = NO_LEADER_EPOCH


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's place in its group, for ``send_offsets_to_transaction`` (KIP-447: the
    group coordinator fences a transactional commit of a member that left the generation).
    -1 / "" / None: a consumer outside group management."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetAndTimestamp(NamedTuple):
    """An answer of `offsets_for_times`: the first offset whose timestamp is >= the query."""
    offset: int
    timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH


class RecordMetadata(NamedTuple):
    """Where an acknowledged record went (Kafka's RecordMetadata).

    `offset` is -1 for acks=0 (nothing came back), as in the Java client. `timestamp` is
    the record's CreateTime, or the broker's append time when the topic uses LogAppendTime.

    A NamedTuple, as kafka-python's is and for ConsumerRecord's reason: one is built for
    every acknowledged record a callback or future is told of, and a tuple costs half of
    a slotted frozen dataclass's __init__ (0.28 against 0.52 us here).
    """
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    log_start_offset: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    """One record as a consumer hands it out (Kafka's ConsumerRecord).

    A NamedTuple rather than a frozen dataclass: a consumer builds one per record, and a
    tuple costs a sixth of a frozen dataclass's __init__ (0.35 us against 2.2 us here),
    which is most of what separates a Python consumer from librdkafka's throughput."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: object
    value: object
    headers: tuple[Header, ...] = ()
    leader_epoch: int = NO_LEADER_EPOCH
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
