"""The ``ketch`` source reading archived ranges (tiered storage, KIP-405) from the store
directly, with ``ketch.remote.storage`` set.

Theory of operation. A topic with remote.storage.enable keeps its old segments in a remote
store; a consumer reads them through the partition's leader, which fetches the remote
segment and serves it. With the option, the Spark source does the leader's part itself:

- Driver (``archive_spans``): replays the partitions' records of ``__remote_log_metadata``
  (read with Ketch's consumer, from the beginning to the end offsets it saw) through the
  pure ``RemoteLogMetadataCache`` (the same code the brokers replay it with) and asks
  each leader its local log start (ListOffsets EARLIEST_LOCAL, -4). The span the archive
  holds below the local log becomes its own tasks (``planning.split_archived``).
- Executor (``ArchiveReader``): reads each remote segment's offset index, then ranged
  chunks of its records file from the indexed position, keeps whole batches
  (``reading.select_batches``) and decodes them with the consumer's own
  ``records_from_batches``, so the rows are the broker path's: same offsets, timestamps,
  headers, control batches skipped. Under read_committed the aborted transactions come
  from the uploaded transaction indexes (``reading.AbortedTransactions``), handed to the
  decoder per chunk exactly as a Fetch response lists them for that range; records of a
  transaction whose end the archive does not show (its marker in the local log) are held
  back and left, from the first of them, to the broker path (``reading.OpenTransactions``).
- Whatever cannot be read from the store (unreachable from this executor, boto3 missing,
  a segment deleted by retention since planning, a corrupt object) is read from that
  offset on through the broker, with a log line saying so.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from clients._core.fetcher import records_from_batches
from clients.records import RecordError
from clients.spark.planning import ArchiveSpan, OffsetRange, archive_span
from clients.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC, MetadataFormatError, RemoteLogMetadataCache,
    RemoteLogSegmentMetadata, decode_metadata, metadata_partition_for, segment_for_offset,
)
from clients.tiered.reading import (
    AbortedTransactions, OpenTransactions, position_for_offset, select_batches, txn_index_entries,
)
from clients.tiered.remote_storage import (
    IndexType, RemoteResourceNotFound, RemoteStorageConfigError, RemoteStorageError,
)
from clients.types import ConsumerRecord, TopicPartition

__all__ = ["ArchiveReader", "archive_spans"]

log = logging.getLogger("clients.spark")

# One ranged read of a remote records file: large enough to amortise a round trip to an
# object store, small enough to keep an executor's memory flat.
_CHUNK_BYTES = 4 << 20


# ------------------------------------------------------------------ driver

def _read_metadata(client_props: Mapping[str, str], partitions: Sequence[int],
                   timeout_s: float = 30.0) -> RemoteLogMetadataCache:
    """``__remote_log_metadata``'s ``partitions`` from the beginning to their end offsets
    now, replayed."""
    from clients import Consumer
    props = {**client_props, "enable.auto.commit": "false", "auto.offset.reset": "earliest",
             "isolation.level": "read_uncommitted", "max.poll.records": "5000"}
    props.pop("group.id", None)
    cache = RemoteLogMetadataCache()
    consumer = Consumer(props)
    try:
        tps = [TopicPartition(REMOTE_LOG_METADATA_TOPIC, p) for p in partitions]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        waiting = {tp for tp in tps if ends[tp] > 0}
        deadline = time.monotonic() + timeout_s
        while waiting:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{REMOTE_LOG_METADATA_TOPIC} not read to its end within "
                                   f"{timeout_s:.0f} s")
            for r in consumer.poll(timeout_ms=500):
                if isinstance(r.value, (bytes, bytearray)):
                    try:
                        cache.replay(decode_metadata(bytes(r.value)))
                    except MetadataFormatError as e:
                        log.warning("%s: a record at %s-%d ignored: %s",
                                    REMOTE_LOG_METADATA_TOPIC, r.partition, r.offset, e)
            waiting = {tp for tp in waiting if consumer.position(tp) < ends[tp]}
    finally:
        consumer.close()
    return cache


def archive_spans(admin: Any, client_props: Mapping[str, str],
                  starts: Mapping[TopicPartition, int]) -> dict[TopicPartition, ArchiveSpan]:
    """What of each partition the archive holds below the local log start, for the
    partitions whose reads start below it (``starts``: the lowest offset read of each). The
    remote log metadata is read only when some read does: a streaming query reading the
    tail costs one ListOffsets per micro-batch."""
    from clients.admin import OffsetSpec
    local = admin.list_offsets({tp: OffsetSpec.earliest_local() for tp in starts})
    below = sorted(tp for tp, start in starts.items() if start < local[tp].offset)
    if not below:
        return {}
    metadata_topic = admin.describe_topics([REMOTE_LOG_METADATA_TOPIC]).get(REMOTE_LOG_METADATA_TOPIC)
    if metadata_topic is None or isinstance(metadata_topic, BaseException):
        return {}                           # nothing was ever archived in this cluster
    count = len(metadata_topic.partitions)
    described = admin.describe_topics(sorted({tp.topic for tp in below}))
    ids = {tp: described[tp.topic].topic_id for tp in below}
    cache = _read_metadata(client_props, sorted({metadata_partition_for(ids[tp], tp.partition, count)
                                                 for tp in below}))
    spans = {}
    for tp in below:
        span = archive_span(cache.index(ids[tp], tp.partition).copied(), local[tp].offset)
        if span is not None:
            spans[tp] = span
    return spans


# ------------------------------------------------------------------ executor

class ArchiveReader:
    """The records of one range out of the remote store. ``records()`` yields them in offset
    order, in lists; afterwards ``resume_at`` is None when the whole range was read, or
    the offset from which the broker path reads the rest."""

    def __init__(self, rng: OffsetRange, segments: Sequence[RemoteLogSegmentMetadata],
                 store_properties: Mapping[str, str], read_committed: bool,
                 check_crcs: bool = True) -> None:
        self.rng = rng
        self.tp = TopicPartition(rng.topic, rng.partition)
        self.segments = list(segments)
        self.store_properties = dict(store_properties)
        self.read_committed = read_committed
        self.check_crcs = check_crcs
        self.resume_at: int | None = rng.from_offset
        self.bytes_read = 0

    def records(self) -> Iterator[list[ConsumerRecord]]:
        from clients.tiered.factory import remote_storage_from_config
        rng = self.rng
        position, barrier = rng.from_offset, math.inf
        loop = asyncio.new_event_loop()
        store = None
        try:
            store = remote_storage_from_config(self.store_properties)
            aborted = open_txns = None
            if self.read_committed:
                aborted = AbortedTransactions(rng.from_offset, rng.until_offset)
                for later in self.segments:
                    if aborted.add_segment(txn_index_entries(
                            loop.run_until_complete(self._txn_index(store, later)))):
                        break
                open_txns = OpenTransactions(aborted)
            held: list[ConsumerRecord] = []
            while position < rng.until_offset:
                metadata = segment_for_offset(self.segments, position)
                if metadata is None or metadata.start_offset >= rng.until_offset:
                    break                   # not in the archive (any more): the broker's
                index = loop.run_until_complete(store.fetch_index(metadata.segment, IndexType.OFFSET))
                size = metadata.segment_size_bytes
                at = position_for_offset(index, metadata.start_offset, position)
                at = at if at < size else 0         # an index that disagrees: walk all
                length = _CHUNK_BYTES
                while at < size and position < rng.until_offset:
                    end = min(size, at + length)
                    chunk = loop.run_until_complete(
                        store.fetch_log_segment(metadata.segment, at, end - 1))
                    self.bytes_read += len(chunk)
                    if len(chunk) != end - at:
                        raise RemoteStorageError(f"short read of {metadata.segment.key('log')}: "
                                                 f"{len(chunk)} of {end - at} bytes")
                    chosen = select_batches(chunk, position, len(chunk), True, end >= size)
                    if chosen.more_bytes_needed:
                        length = max(length * 2, end - at + chosen.more_bytes_needed)
                        continue
                    if chosen.start == chosen.end:
                        break               # nothing at or after the position in this segment
                    batches = memoryview(chunk)[chosen.start:chosen.end]
                    heap = None if aborted is None \
                        else aborted.overlapping(position, chosen.next_offset)
                    got, next_offset, _ = records_from_batches(self.tp, batches, position, None,
                                                               heap, self.check_crcs)
                    if open_txns is not None:
                        open_txns.scan(batches, position)
                        barrier = open_txns.barrier
                    held += [r for r in got if r.offset < rng.until_offset]
                    position = max(position, next_offset)
                    at += chosen.end
                    length = _CHUNK_BYTES
                    released = _released(held, barrier)
                    if released:
                        held = held[len(released):]
                        yield released
                position = max(position, metadata.end_offset + 1)
            position = min(position, rng.until_offset)
            self.resume_at = None if min(position, barrier) >= rng.until_offset \
                else int(min(position, barrier))
            if self.resume_at is not None and barrier < math.inf:
                log.info("%s [%d, %d): a transaction from offset %d does not end in the archive: "
                         "read on through the broker", self.tp, rng.from_offset,
                         rng.until_offset, self.resume_at)
        except (RemoteStorageError, RemoteStorageConfigError, RecordError, ImportError, OSError) as e:
            self.resume_at = int(min(position, barrier))
            log.warning("%s [%d, %d): the archive is not readable from this executor (%s: %s); "
                        "offsets from %d are read through the broker", self.tp, rng.from_offset,
                        rng.until_offset, type(e).__name__, e, self.resume_at)
        finally:
            if store is not None:
                loop.run_until_complete(store.close())
            loop.close()

    @staticmethod
    async def _txn_index(store: Any, metadata: RemoteLogSegmentMetadata) -> bytes:
        try:
            return await store.fetch_index(metadata.segment, IndexType.TRANSACTION)
        except RemoteResourceNotFound:
            return b""                      # none uploaded: no aborted transaction in it


def _released(held: list[ConsumerRecord], barrier: float) -> list[ConsumerRecord]:
    """The held records below ``barrier`` (held is in offset order)."""
    n = 0
    while n < len(held) and held[n].offset < barrier:
        n += 1
    return held[:n]
