"""The asyncio shell of tiered storage (KIP-405): Kafka's RemoteLogManager and its
TopicBasedRemoteLogMetadataManager, on one broker.

Three duties:

1. **Metadata replay** (every broker): a consumer of ``__remote_log_metadata`` (all its
   partitions, from the beginning) replays each record into the pure
   ``RemoteLogMetadataCache`` and tells each hosted local log the highest offset now in
   remote storage (``PartitionLog.highest_offset_in_remote``), so the log's own retention
   deletes local segments only once copied, on the leader and on followers alike.
2. **Copy and expire** (the leader of each partition of a topic with remote.storage.enable):
   one task per partition, every remote.log.manager.task.interval.ms. It waits until the
   replay has caught up with the metadata topic (so it knows what earlier leaders did);
   each round first finishes what was left half done (segments whose copy STARTED but
   never FINISHED, by a leader that died or by a failed upload here, and deletions that
   STARTED: their objects are deleted and DELETE_SEGMENT_FINISHED written); then copies each closed segment below the high
   watermark not yet copied (STARTED acknowledged by the metadata topic's replicas before
   the first byte is uploaded, FINISHED after the last, each waited for until replayed
   here), and expires remote segments by total retention (DELETE_SEGMENT_STARTED, delete
   the objects, DELETE_SEGMENT_FINISHED). A RemoteStorageError backs off exponentially
   (remote.log.manager.task.retry.backoff.ms up to ...max.ms) and retries; nothing local is
   deleted meanwhile, since local retention needs FINISHED.
3. **Reads below the local log start** (``read``): the Fetch path asks here when a
   consumer's offset is below the leader's local log: the remote segment holding it is
   found in the cache, its offset index fetched (and kept in a small cache), and a chunk of
   its records file read from the indexed position; whole batches from the fetch offset are
   returned, as a local read returns them. A failure of the store is KAFKA_STORAGE_ERROR,
   retriable, never wrong data.

Decisions are the pure ``plan`` module's; state changes only by replaying records.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from broker.auto_topic_creation import AutoTopicCreationManager
from broker.log import (
    EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, EpochEntry, LeaderEpochCache, PartitionLog,
)
from broker.log.partition_log import SNAPSHOT_SUFFIX
from broker.log.transaction_index import AbortedTxn
from broker.log.segment import segment_file_name
from clients.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC, MetadataFormatError, RemoteLogMetadataCache,
    RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
    RemoteMetadataRecord, RemotePartitionDeleteMetadata, RemotePartitionDeleteState, decode_metadata, encode_metadata, metadata_key, metadata_partition_for,
)
from broker.tiered.plan import (
    LocalSegment, backoff_ms, first_record_at_or_after, remote_segments_to_delete,
    segment_leader_epochs, segments_to_copy, time_index_floor_offset,
)
from clients.tiered.remote_storage import (
    IndexType, LogSegmentData, RemoteResourceNotFound, RemoteSegmentId, RemoteStorageError,
    RemoteStorageManager,
)
from clients.aio.consumer import Consumer
from clients.aio.producer import Producer
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.records import RecordError
from clients.tiered.reading import (
    AbortedTransactions, position_for_offset, select_batches, txn_index_entries,
)
from clients.types import TopicPartition
from metadata_log.config_defs import parse_bool
from metadata_log.image import MetadataImage
from metadata_log.node_config import read_node_properties

__all__ = ["RemoteLogManager", "RemoteRead", "TieredStorageConfig"]


def _epoch_at(segment: RemoteLogSegmentMetadata, offset: int) -> int:
    """The leader epoch of ``offset`` in a remote segment (-1: unknown)."""
    epoch = -1
    for e, start in segment.segment_leader_epochs:
        if start > offset:
            break
        epoch = e
    return epoch

log = logging.getLogger(__name__)

# Offset indexes of remote segments kept in memory for reads (Kafka keeps them on disk,
# remote.log.index.file.cache.total.size.bytes); an entry is 8 bytes per 4 KiB of records.
_INDEX_CACHE_ENTRIES = 256
# The first read of a remote records file: at least this much, so a small fetch still
# reads a useful chunk in one round trip to the store.
_READ_CHUNK_BYTES_MIN = 64 * 1024
STAGING_DIR = "ketch-tiered-staging"      # in the first log dir; not a partition dir name


class TieredStorageConfig:
    """The broker keys of tiered storage (Kafka's names; docs/tiered_storage.md)."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        # The values were checked against the catalogue when the broker read its config.
        num = read_node_properties(properties).get_int
        self.properties = dict(properties)
        self.enable = parse_bool(properties.get("remote.log.storage.system.enable", "false")) is True
        self.task_interval_ms = max(1, num("remote.log.manager.task.interval.ms", 30_000))
        self.retry_backoff_ms = max(1, num("remote.log.manager.task.retry.backoff.ms", 500))
        self.retry_backoff_max_ms = max(1, num("remote.log.manager.task.retry.backoff.max.ms", 30_000))
        self.metadata_partitions = max(1, num("rlmm.config.remote.log.metadata.topic.num.partitions", 50))
        self.metadata_replication_factor = max(
            1, num("rlmm.config.remote.log.metadata.topic.replication.factor", 3))


@dataclass(frozen=True, slots=True)
class RemoteRead:
    error_code: int
    records: bytes = b""
    log_start_offset: int = -1
    # read_committed: the aborted transactions overlapping the records; None otherwise.
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


class RemoteLogManager:
    def __init__(self, node_id: int, config: TieredStorageConfig, storage: RemoteStorageManager,
                 bootstrap: Callable[[], str], client_properties: Mapping[str, object],
                 image: Callable[[], MetadataImage], topic_creation: AutoTopicCreationManager,
                 local_log: Callable[[TopicPartition], PartitionLog | None],
                 high_watermark_of: Callable[[str, int], int], staging_dir: str,
                 now_ms: Callable[[], int], rng: random.Random) -> None:
        """``bootstrap()``: this broker's own HOST:PORT, where the metadata topic's clients
        connect, logging in with ``client_properties``; ``local_log`` and
        ``high_watermark_of``: the hosted partitions' logs and high watermarks."""
        self.node_id = node_id
        self.config = config
        self.storage = storage
        self.bootstrap = bootstrap
        self.client_properties = dict(client_properties)
        self.image = image
        self.topic_creation = topic_creation
        self.local_log = local_log
        self.high_watermark_of = high_watermark_of
        self.staging_dir = staging_dir
        self.now_ms = now_ms
        self.rng = rng
        self.cache = RemoteLogMetadataCache()
        # The metadata topic's replay: how far it got per partition, and its end offsets
        # when it started (caught up once past them).
        self._replayed: dict[int, int] = {}
        self._start_end_offsets: dict[int, int] | None = None
        self._replay_progress = asyncio.Event()
        self._caught_up = asyncio.Event()
        self._producer: Producer | None = None
        self._tasks: dict[TopicPartition, asyncio.Task] = {}
        # Tiered topics seen in the image (topic id -> name, partitions): one that vanishes
        # was deleted, and its remote data goes too (``_delete_partition``).
        self._tiered_topics: dict[uuid.UUID, tuple[str, int]] = {}
        self._partition_deletions: dict[tuple[uuid.UUID, int], asyncio.Task] = {}
        self._replay_task: asyncio.Task | None = None
        # Indexes of remote segments, by (segment id, index type), least recently used first.
        self._index_cache: OrderedDict[tuple[uuid.UUID, IndexType], bytes] = OrderedDict()
        self._stopped = False

    # ------------------------------------------------------------ lifecycle

    def on_metadata(self, image: MetadataImage) -> None:
        """Start the replay once; a copy task per tiered partition led here, cancel others."""
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        if self._replay_task is None:
            self._replay_task = loop.create_task(self._run_replay(), name="remote-log-metadata")
        led = set()
        tiered_now: dict[uuid.UUID, tuple[str, int]] = {}
        for name, topic in image.topics.by_name.items():
            if not self._tiered(image, name):
                continue
            tiered_now[topic.topic_id] = (name, len(topic.partitions))
            for p, reg in topic.partitions.items():
                if reg.leader == self.node_id:
                    led.add(TopicPartition(name, p))
                # A log hosted here since the last replay learns what is remote.
                plog = self.local_log(TopicPartition(name, p))
                if plog is not None:
                    plog.highest_offset_in_remote = self.cache.index(
                        topic.topic_id, p).highest_copied_offset()
        for tp in list(self._tasks):
            if tp not in led:
                log.info("tiered storage: no longer copying %s", tp)
                self._tasks.pop(tp).cancel()
        for tp in led:
            if tp not in self._tasks or self._tasks[tp].done():
                self._tasks[tp] = loop.create_task(self._run_partition(tp),
                                                   name=f"remote-log-{tp.topic}-{tp.partition}")
        for topic_id, (name, partitions) in self._tiered_topics.items():
            if topic_id not in tiered_now and image.topics.get_by_id(topic_id) is None:
                for p in range(partitions):
                    key = (topic_id, p)
                    if key not in self._partition_deletions:
                        self._partition_deletions[key] = loop.create_task(
                            self._delete_partition(topic_id, name, p),
                            name=f"remote-log-delete-{name}-{p}")
        self._tiered_topics = tiered_now

    @staticmethod
    def _tiered(image: MetadataImage, topic: str) -> bool:
        return parse_bool(image.configs.topic(topic).get("remote.storage.enable", "false")) is True

    async def stop(self) -> None:
        self._stopped = True
        tasks = [*self._tasks.values(), *self._partition_deletions.values(),
                 *([self._replay_task] if self._replay_task else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self._producer is not None:
            await self._producer.close(5.0)
        await self.storage.close()

    def _client_config(self, **extra: object) -> dict[str, object]:
        return {**self.client_properties, "bootstrap.servers": self.bootstrap(), **extra}

    # ------------------------------------------------------------ the metadata topic

    async def _metadata_partitions(self) -> int:
        """The metadata topic's partition count, creating it first if absent (Kafka's
        TopicBasedRemoteLogMetadataManager creates it at start-up)."""
        while True:
            topic = self.image().topics.get(REMOTE_LOG_METADATA_TOPIC)
            if topic is not None and topic.partitions:
                return len(topic.partitions)
            rf = max(1, min(self.config.metadata_replication_factor,
                            self.topic_creation.live_brokers()))
            cls = messages.CreateTopicsRequest
            # Never compacted or expired: the records are the only account of what is in
            # remote storage (Kafka: retention.ms=-1, cleanup.policy=delete).
            configs = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete",
                       "min.insync.replicas": str(min(2, rf))}
            try:
                await self.topic_creation.create([cls.CreatableTopic(
                    name=REMOTE_LOG_METADATA_TOPIC, num_partitions=self.config.metadata_partitions,
                    replication_factor=rf,
                    configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
                    timeout_s=20.0)
            except Exception as e:        # noqa: BLE001 - retried: the controller may be moving
                log.warning("creating %s failed: %r", REMOTE_LOG_METADATA_TOPIC, e)
            await asyncio.sleep(0.5)

    async def _run_replay(self) -> None:
        while True:
            try:
                await self._replay()
            except asyncio.CancelledError:
                raise
            except Exception as e:        # noqa: BLE001 - start again from the beginning
                log.warning("%s replay restarts after: %r", REMOTE_LOG_METADATA_TOPIC, e)
            self.cache = RemoteLogMetadataCache()
            self._replayed.clear()
            self._start_end_offsets = None
            self._caught_up.clear()
            await asyncio.sleep(1.0)

    async def _replay(self) -> None:
        partitions = await self._metadata_partitions()
        tps = [TopicPartition(REMOTE_LOG_METADATA_TOPIC, p) for p in range(partitions)]
        consumer = Consumer(self._client_config(
            **{"client.id": f"ketch-broker-{self.node_id}-remote-log-metadata",
               "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
        try:
            await consumer.start()
            consumer.assign(tps)
            consumer.seek_to_beginning(tps)
            ends = await consumer.end_offsets(tps)
            self._start_end_offsets = {tp.partition: end for tp, end in ends.items()}
            self._maybe_caught_up()
            while True:
                records = await consumer.poll(timeout_ms=200)
                touched: set[tuple[uuid.UUID, int]] = set()
                for r in records:
                    if isinstance(r.value, (bytes, bytearray, memoryview)):
                        touched |= self._replay_one(r.partition, r.offset, bytes(r.value))
                    self._replayed[r.partition] = r.offset + 1
                if records:
                    self._apply_to_local_logs(touched)
                    self._replay_progress.set()
                    self._replay_progress = asyncio.Event()
                if not self._caught_up.is_set():
                    for tp in tps:
                        self._replayed.setdefault(tp.partition, 0)
                        position = await consumer.position(tp)
                        self._replayed[tp.partition] = max(self._replayed[tp.partition], position)
                    self._maybe_caught_up()
        finally:
            await consumer.close()

    def _replay_one(self, partition: int, offset: int, value: bytes) -> set[tuple[uuid.UUID, int]]:
        try:
            record = decode_metadata(value)
        except MetadataFormatError as e:
            log.error("%s-%d offset %d: unreadable (%s); skipped", REMOTE_LOG_METADATA_TOPIC,
                      partition, offset, e)
            return set()
        problem = self.cache.replay(record)
        if problem is not None:
            log.warning("%s-%d offset %d ignored: %s", REMOTE_LOG_METADATA_TOPIC, partition,
                        offset, problem)
        if isinstance(record, (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate)):
            return {(record.segment.topic_id, record.segment.partition)}
        return {(record.topic_id, record.partition)}

    def _maybe_caught_up(self) -> None:
        ends = self._start_end_offsets
        if ends is not None and all(self._replayed.get(p, 0) >= end for p, end in ends.items()):
            if not self._caught_up.is_set():
                log.info("tiered storage: %s replayed (%d partitions with remote segments)",
                         REMOTE_LOG_METADATA_TOPIC, len(self.cache.partitions))
            self._caught_up.set()

    def _apply_to_local_logs(self, touched: set[tuple[uuid.UUID, int]]) -> None:
        image = self.image()
        for topic_id, partition in touched:
            topic = image.topics.get_by_id(topic_id)
            if topic is None:
                continue
            plog = self.local_log(TopicPartition(topic.name, partition))
            if plog is not None:
                plog.highest_offset_in_remote = self.cache.index(topic_id, partition).highest_copied_offset()

    async def _publish(self, record: RemoteMetadataRecord, topic_id: uuid.UUID,
                       partition: int) -> None:
        """Write one record (acks=all) and wait until this broker's replay has applied it:
        only replay changes the cache."""
        partitions = await self._metadata_partitions()
        if self._producer is None:
            self._producer = Producer(self._client_config(
                **{"client.id": f"ketch-broker-{self.node_id}-remote-log-metadata", "acks": "all",
                   "enable.idempotence": True, "linger.ms": 0}))
            await self._producer.start()
        p = metadata_partition_for(topic_id, partition, partitions)
        future = await self._producer.send(REMOTE_LOG_METADATA_TOPIC, encode_metadata(record),
                                           metadata_key(topic_id, partition), partition=p)
        written = await future
        while self._replayed.get(p, 0) <= written.offset:
            await self._replay_progress.wait()

    # ------------------------------------------------------------ copy and expire (leader)

    async def _run_partition(self, tp: TopicPartition) -> None:
        attempt = 0
        while True:
            try:
                await self._caught_up.wait()
                # Every round, not only on taking over: this task is the partition's only
                # copier here and copies one segment at a time, so a STARTED segment at
                # the top of a round is one an earlier round (a failed upload) or an
                # earlier leader abandoned.
                await self._finish_abandoned(tp)
                await self._copy(tp)
                await self._expire(tp)
                attempt = 0
                await asyncio.sleep(self.config.task_interval_ms / 1000)
            except asyncio.CancelledError:
                raise
            except RemoteStorageError as e:
                attempt += 1
                wait_ms = backoff_ms(attempt, self.config.retry_backoff_ms,
                                     self.config.retry_backoff_max_ms, self.rng)
                log.warning("tiered storage %s: remote storage failed (%s); retry in %d ms",
                            tp, e, wait_ms)
                await asyncio.sleep(wait_ms / 1000)
            except Exception as e:        # noqa: BLE001 - a bug or a lost leadership: retry
                attempt += 1
                log.exception("tiered storage %s: task failed (%r)", tp, e)
                await asyncio.sleep(backoff_ms(attempt, self.config.retry_backoff_ms,
                                               self.config.retry_backoff_max_ms, self.rng) / 1000)

    async def _delete_partition(self, topic_id: uuid.UUID, topic: str, partition: int) -> None:
        """A deleted tiered topic's remote data (Kafka: the remote log metadata partition's
        leader does it): DELETE_PARTITION_STARTED, every segment's objects, then
        DELETE_PARTITION_FINISHED, which drops the partition from every broker's cache.
        Done by the broker leading the metadata partition that holds its records; retried
        with backoff while the store fails."""
        attempt = 0
        while True:
            try:
                await self._caught_up.wait()
                partitions = await self._metadata_partitions()
                holder = self.image().topics.get(REMOTE_LOG_METADATA_TOPIC)
                reg = None if holder is None else holder.partitions.get(
                    metadata_partition_for(topic_id, partition, partitions))
                if reg is None or reg.leader != self.node_id:
                    return
                index = self.cache.index(topic_id, partition)
                if not index.segments and index.deleted is None:
                    return                  # nothing was ever copied
                if index.deleted is None:
                    await self._publish(RemotePartitionDeleteMetadata(
                        topic_id, topic, partition, self.node_id, self.now_ms(),
                        RemotePartitionDeleteState.DELETE_PARTITION_STARTED), topic_id, partition)
                for metadata in list(self.cache.index(topic_id, partition).segments.values()):
                    await self.storage.delete_log_segment_data(metadata.segment)
                await self._publish(RemotePartitionDeleteMetadata(
                    topic_id, topic, partition, self.node_id, self.now_ms(),
                    RemotePartitionDeleteState.DELETE_PARTITION_FINISHED), topic_id, partition)
                log.info("tiered storage: deleted the remote data of %s-%d (topic deleted)",
                         topic, partition)
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:        # noqa: BLE001 - the store or the metadata topic: retry
                attempt += 1
                wait_ms = backoff_ms(attempt, self.config.retry_backoff_ms,
                                     self.config.retry_backoff_max_ms, self.rng)
                log.warning("tiered storage: deleting %s-%d's remote data failed (%r); retry in "
                            "%d ms", topic, partition, e, wait_ms)
                await asyncio.sleep(wait_ms / 1000)

    def _topic_id(self, tp: TopicPartition) -> uuid.UUID | None:
        topic = self.image().topics.get(tp.topic)
        return None if topic is None else topic.topic_id

    def _still_leader(self, tp: TopicPartition) -> bool:
        topic = self.image().topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        return reg is not None and reg.leader == self.node_id

    async def _update(self, segment: RemoteSegmentId, state: RemoteLogSegmentState) -> None:
        await self._publish(RemoteLogSegmentMetadataUpdate(segment, self.node_id, self.now_ms(), state),
                            segment.topic_id, segment.partition)

    async def _delete_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED (unless already), the objects, DELETE_SEGMENT_FINISHED."""
        if metadata.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            await self._update(metadata.segment, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        await self.storage.delete_log_segment_data(metadata.segment)
        await self._update(metadata.segment, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
        for index_type in (IndexType.OFFSET, IndexType.TRANSACTION):
            self._index_cache.pop((metadata.segment.segment_id, index_type), None)

    async def _finish_abandoned(self, tp: TopicPartition) -> None:
        """Copies STARTED and never FINISHED (by a previous leader that died, or a failed
        upload here) are orphans, their objects maybe half there: deleted; deletions
        started are finished. The segments are copied again under new ids by ``_copy``."""
        topic_id = self._topic_id(tp)
        if topic_id is None:
            return
        index = self.cache.index(topic_id, tp.partition)
        for state in (RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                      RemoteLogSegmentState.DELETE_SEGMENT_STARTED):
            for metadata in index.in_state(state):
                log.info("tiered storage %s: deleting abandoned remote segment %s [%d, %d] (%s)",
                         tp, metadata.segment.segment_id, metadata.start_offset,
                         metadata.end_offset, state.name)
                await self._delete_segment(metadata)

    async def _copy(self, tp: TopicPartition) -> None:
        topic_id = self._topic_id(tp)
        plog = self.local_log(tp)
        if topic_id is None or plog is None or not plog.config.remote_storage_enable:
            return
        index = self.cache.index(topic_id, tp.partition)
        segments = plog.segments
        local = [LocalSegment(s.base_offset,
                              segments[i + 1].base_offset if i + 1 < len(segments) else s.next_offset,
                              s.size_bytes, i == len(segments) - 1)
                 for i, s in enumerate(segments)]
        for chosen in segments_to_copy(local, self.high_watermark_of(tp.topic, tp.partition),
                                       index.highest_copied_offset()):
            if not self._still_leader(tp):
                return
            segment = next((s for s in plog.segments if s.base_offset == chosen.base_offset), None)
            if segment is None:
                return              # deleted meanwhile (DeleteRecords): plan again next round
            await self._copy_segment(tp, topic_id, plog, segment, chosen)

    async def _copy_segment(self, tp: TopicPartition, topic_id: uuid.UUID, plog: PartitionLog,
                            segment: Any, chosen: LocalSegment) -> None:
        end_offset = chosen.next_offset - 1
        rsid = RemoteSegmentId(topic_id, tp.topic, tp.partition,
                               uuid.UUID(int=self.rng.getrandbits(128), version=4))
        epochs = segment_leader_epochs(
            [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries()],
            chosen.base_offset, end_offset)
        metadata = RemoteLogSegmentMetadata(
            rsid, chosen.base_offset, end_offset, self.node_id, segment.largest_timestamp_ms(),
            self.now_ms(), epochs, chosen.size_bytes)
        data = LogSegmentData(
            segment=Path(segment.log_path),
            offset_index=self._existing_or_empty(segment.index_path),
            time_index=self._existing_or_empty(segment.time_index_path),
            transaction_index=Path(segment.txn_index_path) if os.path.exists(segment.txn_index_path) else None,
            producer_snapshot=self._snapshot_at(plog, chosen.next_offset),
            leader_epoch_index=LeaderEpochCache(
                [EpochEntry(e, o) for e, o in epochs]).to_checkpoint())
        # Recorded before the first byte is uploaded: whoever finds it unfinished deletes
        # the objects, so no upload is ever forgotten in the store.
        await self._publish(metadata, topic_id, tp.partition)
        await self.storage.copy_log_segment_data(rsid, data)
        await self._update(rsid, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        log.info("tiered storage %s: copied segment [%d, %d] (%d bytes) as %s", tp,
                 chosen.base_offset, end_offset, chosen.size_bytes, rsid.segment_id)

    def _existing_or_empty(self, path: str) -> Path:
        """An index file, or an empty one in the staging directory: a segment whose batches
        never reached index.interval.bytes has none on disk (an empty index)."""
        if os.path.exists(path):
            return Path(path)
        os.makedirs(self.staging_dir, exist_ok=True)
        empty = Path(self.staging_dir) / "empty.index"
        empty.touch()
        return empty

    @staticmethod
    def _snapshot_at(plog: PartitionLog, offset: int) -> Path | None:
        if offset not in plog.producer_snapshot_offsets:
            return None
        path = Path(plog.dir_path) / segment_file_name(offset, SNAPSHOT_SUFFIX)
        return path if path.exists() else None

    async def _expire(self, tp: TopicPartition) -> None:
        """Total retention over the remote segments (``plan.remote_segments_to_delete``)."""
        topic_id = self._topic_id(tp)
        plog = self.local_log(tp)
        if topic_id is None or plog is None or not plog.config.delete:
            return
        index = self.cache.index(topic_id, tp.partition)
        highest = index.highest_copied_offset()
        local_above = sum(s.size_bytes for s in plog.segments if s.base_offset > highest)
        # DeleteRecords below the local log start is not supported on tiered topics yet:
        # the local log start offset is not the log's (left for later), so it is not
        # passed here.
        for metadata, reason in remote_segments_to_delete(
                index.copied(), self.now_ms(), plog.config.retention_ms,
                plog.config.retention_bytes, local_above, log_start_offset=-1):
            if not self._still_leader(tp):
                return
            log.info("tiered storage %s: deleting remote segment [%d, %d] (%s)", tp,
                     metadata.start_offset, metadata.end_offset, reason)
            await self._delete_segment(metadata)

    # ------------------------------------------------------------ reads (Fetch, ListOffsets)

    def log_start_offset(self, tp: TopicPartition, local_log_start_offset: int) -> int:
        """The log start offset a consumer is told: the remote one when the partition has
        remote segments (KIP-405), else the local one."""
        topic_id = self._topic_id(tp)
        if topic_id is None:
            return local_log_start_offset
        remote = self.cache.index(topic_id, tp.partition).log_start_offset()
        return local_log_start_offset if remote is None else min(remote, local_log_start_offset)

    async def list_offset(self, tp: TopicPartition, timestamp: int, local_timestamp: int,
                          local_offset: int, local_epoch: int) -> tuple[int, int, int, int]:
        """ListOffsets on a tiered partition, given the local log's answer: (error code,
        timestamp, offset, leader epoch). EARLIEST (-2) is the log's start, remote part
        included; EARLIEST_LOCAL (-4) stays the local log's; LATEST_TIERED (-5, KIP-1005) is
        the highest offset in remote storage. A timestamp older than the local log's records
        is searched in the first remote segment whose newest record is at or after it (its
        time index, then its batches), as Kafka's RemoteLogManager.findOffsetByTimestamp."""
        local = (ErrorCode.NONE, local_timestamp, local_offset, local_epoch)
        topic_id = self._topic_id(tp)
        if topic_id is None:
            return local
        copied = self.cache.index(topic_id, tp.partition).copied()
        if timestamp == EARLIEST_TIMESTAMP:
            if copied and copied[0].start_offset < local_offset:
                first = copied[0]
                return (ErrorCode.NONE, -1, first.start_offset,
                        _epoch_at(first, first.start_offset))
            return local
        if timestamp == LATEST_TIERED_TIMESTAMP:
            if not copied:
                return ErrorCode.NONE, -1, -1, -1
            last = max(copied, key=lambda s: s.end_offset)
            return ErrorCode.NONE, -1, last.end_offset, _epoch_at(last, last.end_offset)
        if timestamp < 0:
            return local
        plog = self.local_log(tp)
        for segment in copied:
            if plog is not None and segment.start_offset >= plog.log_start_offset:
                break                       # the local log answered for these
            if segment.max_timestamp_ms < timestamp:
                continue
            try:
                found = await self._search_timestamp(segment, timestamp)
            except (RemoteStorageError, RecordError) as e:
                log.warning("tiered storage %s: timestamp lookup failed: %s", tp, e)
                return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1
            if found is not None:
                ts, offset = found
                return ErrorCode.NONE, ts, offset, _epoch_at(segment, offset)
        return local

    async def _search_timestamp(self, segment: RemoteLogSegmentMetadata,
                                timestamp: int) -> tuple[int, int] | None:
        key = (segment.segment.segment_id, IndexType.TIMESTAMP)
        time_index = self._index_cache.get(key)
        if time_index is None:
            time_index = await self.storage.fetch_index(segment.segment, IndexType.TIMESTAMP)
            self._cache_index(key, time_index)
        start = time_index_floor_offset(time_index, segment.start_offset, timestamp)
        size = segment.segment_size_bytes
        position = position_for_offset(await self._offset_index(segment), segment.start_offset, start)
        position = position if position < size else 0
        length = _READ_CHUNK_BYTES_MIN * 16
        while position < size:
            end = min(size, position + length)
            chunk = await self.storage.fetch_log_segment(segment.segment, position, end - 1)
            found, consumed = first_record_at_or_after(chunk, timestamp)
            if found is not None:
                return found
            if consumed == 0:
                if end >= size:
                    raise RecordError(f"a torn batch at {position} of a remote segment")
                length *= 2                 # a batch larger than the chunk
            position += consumed
        return None

    def is_tiered(self, tp: TopicPartition) -> bool:
        return self._tiered(self.image(), tp.topic)

    async def read(self, tp: TopicPartition, fetch_offset: int, max_bytes: int,
                   min_one_batch: bool, local_log_start_offset: int,
                   read_committed: bool = False) -> RemoteRead:
        """Whole batches from ``fetch_offset`` out of remote storage (below the local log);
        ``read_committed``: with the aborted transactions overlapping them."""
        topic_id = self._topic_id(tp)
        if topic_id is None:
            return RemoteRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        start = self.log_start_offset(tp, local_log_start_offset)
        if fetch_offset < start or fetch_offset >= local_log_start_offset:
            return RemoteRead(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=start)
        metadata = self.cache.index(topic_id, tp.partition).segment_for_offset(fetch_offset)
        if metadata is None:
            return RemoteRead(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=start)
        try:
            records, next_offset = await self._read_segment(metadata, fetch_offset, max_bytes,
                                                            min_one_batch)
            aborted = None
            if read_committed:
                aborted = await self._aborted_transactions(tp, metadata, fetch_offset, next_offset)
        except RemoteStorageError as e:
            log.warning("tiered storage %s: remote read at %d failed: %s", tp, fetch_offset, e)
            return RemoteRead(ErrorCode.KAFKA_STORAGE_ERROR, log_start_offset=start)
        except RecordError as e:
            log.error("tiered storage %s: remote segment %s is corrupt at offset %d: %s", tp,
                      metadata.segment.segment_id, fetch_offset, e)
            return RemoteRead(ErrorCode.KAFKA_STORAGE_ERROR, log_start_offset=start)
        return RemoteRead(ErrorCode.NONE, records, start, aborted)

    async def _aborted_transactions(self, tp: TopicPartition, first: RemoteLogSegmentMetadata,
                                    fetch_offset: int, upper: int) -> tuple[AbortedTxn, ...]:
        """Kafka's collectAbortedTransactions over the archive: the transaction indexes of
        the remote segments from the one read on, until an entry's last stable offset
        reaches ``upper`` (no later marker can overlap the range), then the local log's."""
        collected = AbortedTransactions(fetch_offset, upper)
        later = [s for s in self.cache.index(first.segment.topic_id, tp.partition).copied()
                 if s.end_offset >= first.start_offset]
        for metadata in later:
            if collected.add_segment(await self._txn_index(metadata)):
                return collected.sorted()
        plog = self.local_log(tp)
        if plog is not None:
            collected.add(plog.collect_aborted_transactions(fetch_offset, upper))
        return collected.sorted()

    async def _txn_index(self, metadata: RemoteLogSegmentMetadata) -> list[AbortedTxn]:
        key = (metadata.segment.segment_id, IndexType.TRANSACTION)
        data = self._index_cache.get(key)
        if data is None:
            try:
                data = await self.storage.fetch_index(metadata.segment, IndexType.TRANSACTION)
            except RemoteResourceNotFound:
                data = b""              # no aborted transaction in the segment: none uploaded
            self._cache_index(key, data)
        return txn_index_entries(data)

    def _cache_index(self, key: tuple[uuid.UUID, IndexType], data: bytes) -> None:
        self._index_cache[key] = data
        while len(self._index_cache) > _INDEX_CACHE_ENTRIES:
            self._index_cache.popitem(last=False)

    async def _offset_index(self, metadata: RemoteLogSegmentMetadata) -> bytes:
        key = (metadata.segment.segment_id, IndexType.OFFSET)
        cached = self._index_cache.get(key)
        if cached is not None:
            self._index_cache.move_to_end(key)
            return cached
        data = await self.storage.fetch_index(metadata.segment, IndexType.OFFSET)
        self._cache_index(key, data)
        return data

    async def _read_segment(self, metadata: RemoteLogSegmentMetadata, fetch_offset: int,
                            max_bytes: int, min_one_batch: bool) -> tuple[bytes, int]:
        """Whole batches from ``fetch_offset`` and the offset after them."""
        index = await self._offset_index(metadata)
        size = metadata.segment_size_bytes
        position = position_for_offset(index, metadata.start_offset, fetch_offset)
        position = position if position < size else 0      # an index that disagrees: walk all
        length = max(max_bytes, _READ_CHUNK_BYTES_MIN)
        while True:
            end = min(size, position + length)
            if end <= position:
                return b"", fetch_offset
            chunk = await self.storage.fetch_log_segment(metadata.segment, position, end - 1)
            at_end = end >= size
            if len(chunk) != end - position:
                raise RemoteStorageError(f"short read of {metadata.segment.key('log')}: "
                                         f"{len(chunk)} of {end - position} bytes")
            chosen = select_batches(chunk, fetch_offset, max_bytes, min_one_batch, at_end)
            if chosen.more_bytes_needed == 0:
                return chunk[chosen.start:chosen.end], chosen.next_offset
            length = max(length * 2, end - position + chosen.more_bytes_needed)
