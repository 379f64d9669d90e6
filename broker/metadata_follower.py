"""MetadataObserver: follow the metadata log from the controllers, as a broker does.

A loop of Fetch requests on ``__cluster_metadata``-0 (by topic id from Fetch v13), with
long polling; each returned v2 record batch is one committed batch, handed to the
listener's ``handle_commit`` in offset order. When a controller answers with a
``snapshot_id`` (the fetch offset is below its log start), the observer downloads the
snapshot with FetchSnapshot (by position, ``snapshot_chunk_bytes`` at a time) and hands it
to ``handle_load_snapshot`` before fetching on from its end offset. Any controller can
answer (they serve their committed log); on a connection error the observer moves to
the next one. ``controllers`` is a fixed list, or a function giving the current one (a
broker's voters as it learns them, ``broker/controller_endpoints.py``): a controller that
left that list is not fetched from any more.

The listener interface is the quorum's (``handle_commit(CommittedBatch)``,
``handle_load_snapshot(MetadataSnapshot)``, value types from ``metadata_log.committed``),
so the same replaying code serves a controller and an observer. It depends only on
``clients`` and ``metadata_log``: the quorum's tests and benchmarks use it as a broker
would. ``MetadataImageListener`` turns what it hands over into a ``MetadataImage``.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Protocol, Sequence

from clients.connection import KafkaConnection, connect
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import decode_batch, decode_batches, iter_batches
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity
from metadata_log.delta import MetadataChange, replay_batch
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from metadata_log.records import decode_record
from metadata_log.snapshot import records_to_image
from metadata_log.committed import (
    METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID, CommittedBatch, MetadataSnapshot,
)

log = logging.getLogger(__name__)


class ObserverListener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...
    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None: ...


class MetadataObserver:
    def __init__(self, controllers: Sequence[tuple[str, int]] | Callable[[], Sequence[tuple[str, int]]],
                 listener: ObserverListener, *,
                 replica_id: int = -1, fetch_wait_max_ms: int = 500,
                 fetch_bytes_max: int = 8 * 1024 * 1024,
                 snapshot_chunk_bytes: int = 4 * 1024 * 1024,
                 retry_backoff_ms: int = 100,
                 security: ClientSecurity = PLAINTEXT_SECURITY) -> None:
        if not callable(controllers):
            fixed = list(controllers)
            controllers = lambda: fixed         # noqa: E731
        assert controllers()
        self.security = security            # TLS and the login on the controllers' listener
        self.controllers: Callable[[], Sequence[tuple[str, int]]] = controllers
        self.listener = listener
        self.replica_id = replica_id
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_bytes_max = fetch_bytes_max
        self.snapshot_chunk_bytes = snapshot_chunk_bytes
        self.retry_backoff_ms = retry_backoff_ms
        # Invariant: every committed record below fetch_offset was handed to the listener.
        self.fetch_offset = 0
        self.high_watermark = 0
        self.snapshots_loaded = 0
        self._conn: KafkaConnection | None = None
        self._conn_address: tuple[str, int] | None = None
        self._index = 0
        self._changed = asyncio.Condition()
        self._closed = False

    def _target(self) -> tuple[str, int]:
        controllers = self.controllers()
        return controllers[self._index % len(controllers)]

    async def _connection(self) -> KafkaConnection:
        if self._conn is not None and self._conn_address not in self.controllers():
            self._conn.close()          # no voter any more: its log stops moving
            self._conn = None
        if self._conn is None or self._conn.closed:
            self._conn_address = self._target()
            self._conn = await connect(*self._conn_address, client_id=f"observer-{self.replica_id}",
                                       security=self.security, negotiate=True)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._index += 1

    async def poll_once(self) -> None:
        """One Fetch (and the snapshot download it may call for)."""
        conn = await self._connection()
        version = conn.pick_version(ApiKey.FETCH, 4, 17)
        topic = messages.FetchRequest.FetchTopic(
            topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
            partitions=[messages.FetchRequest.FetchPartition(
                partition=METADATA_PARTITION, fetch_offset=self.fetch_offset,
                partition_max_bytes=self.fetch_bytes_max)])
        request = messages.FetchRequest(
            replica_id=self.replica_id,
            replica_state=messages.FetchRequest.ReplicaState(replica_id=self.replica_id),
            max_wait_ms=self.fetch_wait_max_ms, min_bytes=1, max_bytes=self.fetch_bytes_max,
            topics=[topic])
        response = await conn.request(ApiKey.FETCH, version, request,
                                      timeout_s=self.fetch_wait_max_ms / 1000 + 10)
        partition = response.responses[0].partitions[0]
        if partition.error_code != ErrorCode.NONE:
            raise ConnectionError(f"metadata fetch failed with error {partition.error_code}")
        if partition.snapshot_id.end_offset >= 0:
            await self._load_snapshot(conn, partition.snapshot_id.end_offset,
                                      partition.snapshot_id.epoch)
        else:
            self._take_batches(partition)
        async with self._changed:
            self._changed.notify_all()

    def _take_batches(self, partition: Any) -> None:
        self.high_watermark = partition.high_watermark
        for batch in decode_batches(partition.records or b""):
            header = batch.header
            if header.last_offset < self.fetch_offset:
                continue        # the batch holding an offset below ours: we have it
            if header.base_offset != self.fetch_offset:
                # Committed batches are atomic and contiguous; anything else is a controller
                # we should not trust: move on to the next one.
                raise ConnectionError(f"metadata batch at {header.base_offset} does not "
                                      f"follow offset {self.fetch_offset}")
            committed = CommittedBatch(header.base_offset, header.partition_leader_epoch,
                                       batch.records[0].timestamp,
                                       tuple(r.value or b"" for r in batch.records))
            self.listener.handle_commit(committed)
            self.fetch_offset = committed.next_offset

    async def _load_snapshot(self, conn: KafkaConnection, end_offset: int, epoch: int) -> None:
        version = conn.pick_version(ApiKey.FETCH_SNAPSHOT, 0, 1)
        position, chunks, size = 0, [], None
        while size is None or position < size:
            request = messages.FetchSnapshotRequest(
                replica_id=self.replica_id, max_bytes=self.snapshot_chunk_bytes,
                topics=[messages.FetchSnapshotRequest.TopicSnapshot(
                    name=METADATA_TOPIC, partitions=[messages.FetchSnapshotRequest.PartitionSnapshot(
                        partition=METADATA_PARTITION, current_leader_epoch=-1,
                        snapshot_id=messages.FetchSnapshotRequest.SnapshotId(
                            end_offset=end_offset, epoch=epoch),
                        position=position)])])
            response = await conn.request(ApiKey.FETCH_SNAPSHOT, version, request)
            part = response.topics[0].partitions[0]
            if part.error_code != ErrorCode.NONE:
                raise ConnectionError(f"snapshot fetch failed with error {part.error_code}")
            size = part.size
            data = part.unaligned_records or b""
            if not data and position < size:
                raise ConnectionError("snapshot fetch made no progress")
            chunks.append(data)
            position += len(data)
        data = b"".join(chunks)
        del chunks
        values: list[bytes] = []
        for pos, _ in iter_batches(data):       # one batch decoded at a time: bounded memory
            values.extend(r.value or b"" for r in decode_batch(data, pos).records)
        del data
        self.listener.handle_load_snapshot(MetadataSnapshot(end_offset, epoch, tuple(values)))
        self.fetch_offset = end_offset
        self.snapshots_loaded += 1

    async def run(self) -> None:
        # A flag, not only cancel(): Python 3.11's wait_for can swallow a cancellation.
        while not self._closed:
            try:
                await self.poll_once()
            except (OSError, ConnectionError, asyncio.TimeoutError) as e:
                log.debug("metadata fetch from %s failed: %s", self._conn_address, e)
                self._drop_connection()
                await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def wait_for_offset(self, offset: int, timeout_s: float) -> None:
        """Until every record up to `offset` has been handed to the listener."""
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.fetch_offset > offset)
        await asyncio.wait_for(reached(), timeout_s)

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class MetadataImageListener:
    """Replays what an observer (or a quorum) hands over into a MetadataImage, as a broker
    does: batches all-or-nothing (``metadata_log.replay_batch``), snapshots through
    ``records_to_image``."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.image = EMPTY_IMAGE
        self.batches_skipped = 0
        self.on_change = on_change
        # Typed changes since the last ``take_changes``, in log order; None after a
        # snapshot load (anything may have changed).
        self._changes: list[MetadataChange] | None = []

    def take_changes(self) -> tuple[MetadataImage, list[MetadataChange] | None]:
        """The current image and the typed changes that led to it since the last call."""
        changes, self._changes = self._changes, []
        return self.image, changes

    def handle_commit(self, batch: CommittedBatch) -> None:
        outcome = replay_batch(self.image, [decode_record(r) for r in batch.records],
                               Provenance(batch.last_offset, batch.epoch))
        if outcome.error is not None:
            self.batches_skipped += 1
            log.error("metadata batch at %d skipped on every replica: %s", batch.base_offset,
                      outcome.error)
        self.image = outcome.image
        if self._changes is not None:
            self._changes.extend(outcome.changes)
        self.on_change()

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        self.image = records_to_image((decode_record(r) for r in snapshot.records),
                                      Provenance(snapshot.end_offset - 1, snapshot.epoch))
        self._changes = None
        self.on_change()

    def handle_leader_change(self, leader: Any) -> None:
        pass
