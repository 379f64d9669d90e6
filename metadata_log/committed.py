"""The committed metadata log as readers see it: batches of encoded records with offsets,
and snapshots. Value types shared by the controllers (which write the log) and the
brokers (which follow it); no I/O here.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["CommittedBatch", "METADATA_PARTITION", "METADATA_TOPIC", "METADATA_TOPIC_ID",
           "MetadataSnapshot"]

# The metadata log as Kafka names it: observers Fetch this topic-partition.
METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)        # Kafka: Uuid.METADATA_TOPIC_ID = new Uuid(0L, 1L)
METADATA_PARTITION = 0


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """Records appended atomically by one leader, with their offsets."""

    base_offset: int
    epoch: int                      # leader epoch (Raft term) of the controller that wrote it
    append_time_ms: int             # wall clock of the leader when it proposed the batch
    records: tuple[bytes, ...]      # Invariant: non-empty

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def size_bytes(self) -> int:
        return sum(len(r) for r in self.records)


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """The records of a metadata image that reflects every record below ``end_offset``.

    Kafka names a snapshot by (end_offset, epoch): end_offset is exclusive, epoch is the epoch
    of the last record it contains (KIP-630)."""

    end_offset: int                 # Invariant: >= 0; the log after it starts at end_offset
    epoch: int
    records: tuple[bytes, ...]

    @property
    def size_bytes(self) -> int:
        return sum(len(r) for r in self.records)
