"""Kafka's RemoteStorageManager (KIP-405), async: the port between a reader or writer of the
archive (a broker's tiered-storage shell, broker/tiered/; the Spark source's executors,
clients/spark/archive.py) and a remote store (a filesystem path, S3-compatible object storage).

A store holds, per closed log segment, its records file and its indexes as separate objects
named by ``RemoteSegmentId.key``. It knows nothing of offsets or of which segments exist:
that is the remote log metadata (``__remote_log_metadata``), replicated like any topic.
Every method may raise ``RemoteStorageError``; callers retry with backoff, and a fetch of an
archived range answers a retriable Kafka error rather than wrong data.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["LOG_SUFFIX", "IndexType", "LogSegmentData", "RemoteResourceNotFound", "RemoteSegmentId",
           "RemoteStorageConfigError", "RemoteStorageError", "RemoteStorageManager"]


class RemoteStorageConfigError(ValueError):
    """The properties naming a store are wrong; the message names the key at fault. A
    broker refuses to start on it, the Spark source refuses the query."""


class RemoteStorageError(Exception):
    """Retriable: the store is unreachable or timed out. Callers retry with backoff; an
    archived fetch answers a retriable Kafka error (KAFKA_STORAGE_ERROR), never wrong data."""


class RemoteResourceNotFound(RemoteStorageError):
    """The object is absent (not retriable)."""


class IndexType(enum.Enum):
    """The files uploaded beside a segment's records; the value is the object's suffix."""
    OFFSET = "offset"
    TIMESTAMP = "timeindex"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"
    PRODUCER_SNAPSHOT = "snapshot"


@dataclass(frozen=True)
class RemoteSegmentId:
    """Kafka's RemoteLogSegmentId: a fresh ``segment_id`` per upload attempt, so a retried
    upload never overwrites objects another attempt's metadata still names."""
    topic_id: uuid.UUID
    topic: str
    partition: int
    segment_id: uuid.UUID

    def key(self, suffix: str) -> str:
        """The object name of one file of this segment:
        '<topic>-<partition>-<topic_id>/<segment_id>.<suffix>' (suffix LOG_SUFFIX for the records,
        IndexType.value for an index). One home for naming."""
        return f"{self.topic}-{self.partition}-{self.topic_id}/{self.segment_id}.{suffix}"


LOG_SUFFIX = "log"      # the records file's suffix in RemoteSegmentId.key


@dataclass(frozen=True)
class LogSegmentData:
    """What is uploaded for one closed segment."""
    segment: Path                 # the .log file (only its first `size` bytes: it is closed)
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot: Path | None
    leader_epoch_index: bytes     # the epochs covering the segment, Kafka's checkpoint text


class RemoteStorageManager(Protocol):
    async def copy_log_segment_data(self, segment: RemoteSegmentId, data: LogSegmentData) -> None:
        """Upload every file; idempotent (a retry after a crash overwrites)."""
        ...

    async def fetch_log_segment(self, segment: RemoteSegmentId, start_position: int,
                                end_position: int | None = None) -> bytes:
        """Bytes [start_position, end_position] inclusive of the records file (None: to the end)."""
        ...

    async def fetch_index(self, segment: RemoteSegmentId, index_type: IndexType) -> bytes:
        ...

    async def delete_log_segment_data(self, segment: RemoteSegmentId) -> None:
        """Delete every file of the segment; absent files are not an error."""
        ...

    async def close(self) -> None:
        ...
