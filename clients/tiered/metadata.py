"""Remote log metadata (KIP-405): the records of ``__remote_log_metadata`` and the per-partition
index of remote segments rebuilt by replaying them. Pure: no I/O, no clock.

Theory of operation
-------------------
Which segments of a partition are in remote storage is not kept on any one broker's disk: the
leader that copies a segment writes its story to the internal topic ``__remote_log_metadata``
(Kafka's TopicBasedRemoteLogMetadataManager; a fixed partition count, replicated like
``__consumer_offsets``), and every broker replays that topic into a ``RemoteLogMetadataCache``.
A new leader after a failover therefore knows what is uploaded and carries on from there, and
followers know which of their local segments may go (local retention).

A remote segment goes through these states (Kafka's RemoteLogSegmentState), each step one
record, so that no state is reachable without the records before it:

    COPY_SEGMENT_STARTED --> COPY_SEGMENT_FINISHED --> DELETE_SEGMENT_STARTED --> DELETE_SEGMENT_FINISHED
            |                                                  ^
            +--------------------------------------------------+   (an abandoned upload)

The leader writes STARTED (acknowledged by the replicas) before the first byte goes to the
store, and FINISHED after the last; a reader serves only FINISHED segments. A leader that dies
mid-upload leaves a STARTED segment behind: the next leader writes DELETE_STARTED, deletes its
objects (maybe half there) and writes DELETE_FINISHED, and uploads the segment again under a
new segment id. Deletion likewise writes DELETE_STARTED before deleting any object, so a
reader never picks a segment whose objects may be gone.

Records are Kafka's storage schemas (kafka-protocol/storage/RemoteLogSegmentMetadataRecord,
...UpdateRecord, RemotePartitionDeleteMetadataRecord, version 0, flexible), framed as Kafka's
RemoteLogMetadataSerde frames them (as KRaft metadata records: frame version 1, api key,
version, then the body), encoded by hand as the producer snapshot is (broker/producer_state).
A record that does not follow the transitions above is reported and ignored: a record from a
confused broker must not stop every broker's replay.
"""
from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Iterable, Union

from clients.tiered.remote_storage import RemoteSegmentId
from clients.protocol.types import read_uvarint, write_uvarint

__all__ = [
    "REMOTE_LOG_METADATA_TOPIC", "MetadataFormatError", "RemoteLogMetadataCache",
    "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate", "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata", "RemotePartitionDeleteState", "RemotePartitionIndex",
    "decode_metadata", "encode_metadata", "metadata_key", "metadata_partition_for",
    "segment_for_offset",
]

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
FRAME_VERSION = 1
_VERSION = 0
_SEGMENT_METADATA, _SEGMENT_UPDATE, _PARTITION_DELETE = 0, 1, 2   # the schemas' apiKeys


class RemoteLogSegmentState(IntEnum):
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


# Kafka's RemoteLogSegmentState.isValidTransition, as data.
_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset({
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset({
        RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset({
        RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(IntEnum):
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


class MetadataFormatError(ValueError):
    """A ``__remote_log_metadata`` value this version cannot read."""


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """RemoteLogSegmentMetadataRecord: one remote segment, as its copy starts; in the cache,
    ``state`` is its latest state."""
    segment: RemoteSegmentId
    start_offset: int
    end_offset: int                 # the last offset in the segment (inclusive)
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    # (leader epoch, its first offset in this segment), ascending.
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_bytes: int
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        assert 0 <= self.start_offset <= self.end_offset, (self.start_offset, self.end_offset)
        assert self.segment_size_bytes >= 0


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    segment: RemoteSegmentId
    broker_id: int
    event_timestamp_ms: int
    state: RemoteLogSegmentState


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    topic_id: uuid.UUID
    topic: str
    partition: int
    broker_id: int
    event_timestamp_ms: int
    state: RemotePartitionDeleteState


RemoteMetadataRecord = Union[RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                             RemotePartitionDeleteMetadata]


def metadata_partition_for(topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    """The ``__remote_log_metadata`` partition holding one user partition's records (all of
    them, so they are read in the order they were written)."""
    return zlib.crc32(f"{topic_id}:{partition}".encode()) % partitions


def metadata_key(topic_id: uuid.UUID, partition: int) -> bytes:
    return f"{topic_id}:{partition}".encode()


# ---------------------------------------------------------------- the codec

_I8, _I32, _I64 = struct.Struct(">b"), struct.Struct(">i"), struct.Struct(">q")


def _string(out: bytearray, s: str) -> None:
    raw = s.encode()
    write_uvarint(out, len(raw) + 1)            # compact string
    out += raw


def _topic_id_partition(out: bytearray, topic: str, topic_id: uuid.UUID, partition: int) -> None:
    _string(out, topic)
    out += topic_id.bytes
    out += _I32.pack(partition)
    write_uvarint(out, 0)                       # no tagged fields


def _segment_id(out: bytearray, s: RemoteSegmentId) -> None:
    _topic_id_partition(out, s.topic, s.topic_id, s.partition)
    out += s.segment_id.bytes
    write_uvarint(out, 0)


def encode_metadata(record: RemoteMetadataRecord) -> bytes:
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    if isinstance(record, RemoteLogSegmentMetadata):
        write_uvarint(out, _SEGMENT_METADATA)
        write_uvarint(out, _VERSION)
        _segment_id(out, record.segment)
        out += _I64.pack(record.start_offset)
        out += _I64.pack(record.end_offset)
        out += _I32.pack(record.broker_id)
        out += _I64.pack(record.max_timestamp_ms)
        out += _I64.pack(record.event_timestamp_ms)
        write_uvarint(out, len(record.segment_leader_epochs) + 1)     # compact array
        for epoch, offset in record.segment_leader_epochs:
            out += _I32.pack(epoch)
            out += _I64.pack(offset)
            write_uvarint(out, 0)
        out += _I32.pack(record.segment_size_bytes)
        write_uvarint(out, 0)                   # CustomMetadata: null
        out += _I8.pack(record.state)
    elif isinstance(record, RemoteLogSegmentMetadataUpdate):
        write_uvarint(out, _SEGMENT_UPDATE)
        write_uvarint(out, _VERSION)
        _segment_id(out, record.segment)
        out += _I32.pack(record.broker_id)
        out += _I64.pack(record.event_timestamp_ms)
        write_uvarint(out, 0)                   # CustomMetadata: null
        out += _I8.pack(record.state)
    else:
        write_uvarint(out, _PARTITION_DELETE)
        write_uvarint(out, _VERSION)
        _topic_id_partition(out, record.topic, record.topic_id, record.partition)
        out += _I32.pack(record.broker_id)
        out += _I64.pack(record.event_timestamp_ms)
        out += _I8.pack(record.state)
    write_uvarint(out, 0)                       # the record's tagged fields
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise MetadataFormatError("truncated remote log metadata")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def uvarint(self) -> int:
        try:
            v, self.pos = read_uvarint(self.buf, self.pos)
        except ValueError as e:
            raise MetadataFormatError(str(e)) from None
        return v

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise MetadataFormatError("truncated remote log metadata")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise MetadataFormatError("a null string where the schema has none")
        try:
            return self.raw(n - 1).decode()
        except UnicodeDecodeError as e:
            raise MetadataFormatError(str(e)) from None

    def read_uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):         # unknown tags: skipped, as Kafka does
            self.uvarint()
            self.raw(self.uvarint())

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1)

    def topic_id_partition(self) -> tuple[str, uuid.UUID, int]:
        topic, topic_id, partition = self.string(), self.read_uuid(), self.fixed(_I32)
        self.tagged_fields()
        return topic, topic_id, partition

    def segment_id(self) -> RemoteSegmentId:
        topic, topic_id, partition = self.topic_id_partition()
        segment_id = self.read_uuid()
        self.tagged_fields()
        return RemoteSegmentId(topic_id, topic, partition, segment_id)


def decode_metadata(data: bytes) -> RemoteMetadataRecord:
    r = _Reader(data)
    if r.uvarint() != FRAME_VERSION:
        raise MetadataFormatError("unknown remote log metadata frame version")
    api_key, version = r.uvarint(), r.uvarint()
    if version != _VERSION:
        raise MetadataFormatError(f"remote log metadata record version {version}")
    record: RemoteMetadataRecord
    try:
        if api_key == _SEGMENT_METADATA:
            segment = r.segment_id()
            start, end = r.fixed(_I64), r.fixed(_I64)
            broker_id = r.fixed(_I32)
            max_ts, event_ts = r.fixed(_I64), r.fixed(_I64)
            epochs = []
            for _ in range(r.uvarint() - 1):
                epoch, offset = r.fixed(_I32), r.fixed(_I64)
                r.tagged_fields()
                epochs.append((epoch, offset))
            size = r.fixed(_I32)
            r.nullable_bytes()
            state = RemoteLogSegmentState(r.fixed(_I8))
            if not 0 <= start <= end or size < 0:
                raise MetadataFormatError(f"remote segment [{start}, {end}] of {size} bytes")
            record = RemoteLogSegmentMetadata(segment, start, end, broker_id, max_ts, event_ts,
                                              tuple(epochs), size, state)
        elif api_key == _SEGMENT_UPDATE:
            segment = r.segment_id()
            broker_id, event_ts = r.fixed(_I32), r.fixed(_I64)
            r.nullable_bytes()
            record = RemoteLogSegmentMetadataUpdate(segment, broker_id, event_ts,
                                                    RemoteLogSegmentState(r.fixed(_I8)))
        elif api_key == _PARTITION_DELETE:
            topic, topic_id, partition = r.topic_id_partition()
            broker_id, event_ts = r.fixed(_I32), r.fixed(_I64)
            record = RemotePartitionDeleteMetadata(topic_id, topic, partition, broker_id, event_ts,
                                                   RemotePartitionDeleteState(r.fixed(_I8)))
        else:
            raise MetadataFormatError(f"unknown remote log metadata type {api_key}")
    except ValueError as e:                     # an unknown state id
        raise MetadataFormatError(str(e)) from None
    r.tagged_fields()
    if r.pos != len(data):
        raise MetadataFormatError(f"{len(data) - r.pos} trailing bytes")
    return record


# ---------------------------------------------------------------- the index


def segment_for_offset(copied: Iterable[RemoteLogSegmentMetadata],
                       offset: int) -> RemoteLogSegmentMetadata | None:
    """Of the readable segments ``copied`` (by start offset), the one holding ``offset``, or
    the first one after it (the offset fell in a gap: a batch a compaction or a transaction
    left out, or retention in progress); None above every segment. Among segments holding
    it (a segment copied again by a new leader with other bounds), the one reaching
    furthest."""
    best: RemoteLogSegmentMetadata | None = None
    for s in copied:
        if s.end_offset < offset:
            continue
        if s.start_offset <= offset:
            if best is None or best.start_offset > offset or s.end_offset > best.end_offset:
                best = s
        elif best is None:
            best = s
    return best


class RemotePartitionIndex:
    """One partition's remote segments, by segment id, in their latest state."""

    __slots__ = ("segments", "deleted")

    def __init__(self) -> None:
        self.segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}
        # Invariant: once a RemotePartitionDeleteMetadata record is replayed the index only
        # shrinks (the partition's topic is gone).
        self.deleted: RemotePartitionDeleteState | None = None

    def replay(self, record: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> str | None:
        """Apply one record; why it was ignored, or None."""
        sid = record.segment.segment_id
        if isinstance(record, RemoteLogSegmentMetadata):
            if sid in self.segments:
                return f"segment {sid} added twice"
            if record.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                return f"segment {sid} added in state {record.state.name}"
            self.segments[sid] = record
            return None
        current = self.segments.get(sid)
        if current is None:
            return f"update of unknown segment {sid}"
        if record.state not in _TRANSITIONS[current.state]:
            return f"segment {sid}: {current.state.name} -> {record.state.name} is not a transition"
        if record.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self.segments[sid]      # nothing of it is left to serve or to delete
        else:
            self.segments[sid] = replace(current, state=record.state,
                                         event_timestamp_ms=record.event_timestamp_ms)
        return None

    def in_state(self, state: RemoteLogSegmentState) -> list[RemoteLogSegmentMetadata]:
        """The segments in ``state``, by start offset."""
        return sorted((s for s in self.segments.values() if s.state is state),
                      key=lambda s: (s.start_offset, s.end_offset))

    def copied(self) -> list[RemoteLogSegmentMetadata]:
        """The segments a reader may use (COPY_SEGMENT_FINISHED), by start offset."""
        return self.in_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)

    def highest_copied_offset(self) -> int:
        """The last offset held by a readable remote segment; -1 when none is."""
        return max((s.end_offset for s in self.copied()), default=-1)

    def log_start_offset(self) -> int | None:
        """Where the remote part of the log starts; None when nothing is readable."""
        copied = self.copied()
        return copied[0].start_offset if copied else None

    def segment_for_offset(self, offset: int) -> RemoteLogSegmentMetadata | None:
        return segment_for_offset(self.copied(), offset)

    def size_bytes(self) -> int:
        return sum(s.segment_size_bytes for s in self.copied())


class RemoteLogMetadataCache:
    """Every partition's ``RemotePartitionIndex``, fed by replaying ``__remote_log_metadata``."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[uuid.UUID, int], RemotePartitionIndex] = {}

    def index(self, topic_id: uuid.UUID, partition: int) -> RemotePartitionIndex:
        """The partition's index (empty when nothing was ever written for it)."""
        return self.partitions.get((topic_id, partition)) or RemotePartitionIndex()

    def replay(self, record: RemoteMetadataRecord) -> str | None:
        """Apply one record; why it was ignored, or None."""
        if isinstance(record, RemotePartitionDeleteMetadata):
            key = (record.topic_id, record.partition)
            if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self.partitions.pop(key, None)
            else:
                self.partitions.setdefault(key, RemotePartitionIndex()).deleted = record.state
            return None
        s = record.segment
        key = (s.topic_id, s.partition)
        index = self.partitions.get(key)
        if index is None:
            index = self.partitions[key] = RemotePartitionIndex()
        return index.replay(record)
