"""The asyncio shell of delayed delivery: parking on the Produce path, and one scheduler
per delay-store partition this broker leads.

Parking (Produce, for each partition before its append): ``diversion`` decides
(``divert``); then Produce asks the target partition's producer state
(``ReplicaManager.check_produce``): a batch refused there (not the leader, a bad sequence)
or a duplicate (an idempotent producer's retry, whatever became of its first copy: its
reserved empty batch or gaps carry its sequence numbers) is answered at once and parks
nothing, so a retry arriving after the first copy was delivered is not delivered again.
Otherwise ``park`` writes the parked records of all of the request's partitions at once
to ``__ketch_delayed_delivery`` with acks=all and awaits them: to a store partition this
broker leads, appended directly (as the group coordinator appends to
``__consumer_offsets``; with this broker alone in its ISR nothing is awaited at all, and the
Produce's connection, which serves one request at a time, is not held up); to the others
with an idempotent producer of this broker (one round trip). Only then are the re-encoded
batches appended to their targets. So an acknowledged delayed record is replicated in the
store. The order matters on a failure: had the target been appended first, a crash
before parking would let the producer's retry be acknowledged as a duplicate of a batch
whose delayed records were never parked (lost). Parked first, a retry parks the same keys
again (an idempotent producer's keys come from its sequence numbers), which compaction
and the scheduler's index collapse into one. (What is left: a batch parked whose append
then failed, say the leader changed, and whose retry reaches the new leader after the
first parking was delivered: delivered twice. The new leader's producer state never saw
the batch.)

Delivery (``on_metadata``): for each store partition this broker leads, a task runs a
``DeliveryScheduler`` (its docstring tells the protocol): fence with InitProducerId of
``__ketch_delayed_delivery-<p>``, rebuild the on-disk index by reading the partition
read_committed from this broker's own log (it leads the partition: what a consumer
would fetch, without the round trip), then loop: sleep until the next due record (or new
store records), append the due ones to their targets and their tombstones to the store
in one transaction. Any failure restarts the task from the fencing (a rebuild), after a
short backoff, as long as this broker still leads the partition; a lost leadership
cancels it. Produce requests of the delivery producers themselves are never diverted
(their records are due).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
from typing import Any, Callable, Mapping

from broker.auto_topic_creation import AutoTopicCreationManager
from broker.delayed.divert import Diversion, DivertError, divert
from broker.delayed.index import SqliteDueIndex
from broker.delayed.scheduler import DeliveryScheduler
from broker.delayed.store import (
    DELAY_STORE_TOPIC, TRANSACTIONAL_ID_PREFIX, ParkedRecord, encode_parked, store_batches,
    store_partition_for, transactional_id_for,
)
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import READ_COMMITTED
from clients._core.fetcher import records_from_batches
from clients.aio.producer import Producer
from clients.errors import KafkaApiError
from clients.protocol import messages
from clients.protocol.errors import ERROR_INFO, ErrorCode, raise_for_code
from clients.types import TopicPartition
from metadata_log.image import MetadataImage, TopicImage
from metadata_log.node_config import read_node_properties

__all__ = ["DelayedDeliveryConfig", "DelayedDeliveryDriver"]

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = 1.0
READ_MAX_BYTES = 1 << 20         # one read of the local store partition
STORE_BATCH_BYTES = 256 << 10    # a batch parked locally: well under max.message.bytes
INDEX_DIR = "ketch-delayed-index"      # in the first log dir; not a partition dir name


def _parking_failed(count: int, code: int, message: str | None) -> tuple[int, str]:
    """The Produce's answer when parking failed: a retriable code as it is (the producer
    retries), any other as KAFKA_STORAGE_ERROR."""
    info = ERROR_INFO.get(code)       # type: ignore[call-overload]
    name = info.code.name if info is not None else str(code)
    log.warning("parking %d delayed record(s) failed: %s %s", count, name, message or "")
    return (code if info is not None and info.retriable else ErrorCode.KAFKA_STORAGE_ERROR,
            f"delayed delivery: parking failed: {message or name}")


class DelayedDeliveryConfig:
    """``ketch.delayed.delivery.*`` broker properties."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        # The values were checked against the catalogue when the broker read its config.
        num = read_node_properties(properties).get_int
        self.enable = str(properties.get("ketch.delayed.delivery.enable", "true")).lower() != "false"
        self.max_delay_ms = num("ketch.delayed.delivery.max.delay.ms", 30 * 24 * 3600 * 1000)
        self.topic_partitions = max(1, num("ketch.delayed.delivery.topic.partitions", 8))
        self.topic_replication_factor = max(1, num("ketch.delayed.delivery.topic.replication.factor", 3))
        self.batch_max = max(1, num("ketch.delayed.delivery.batch.max.records", 500))
        self.park_timeout_ms = max(1, num("ketch.delayed.delivery.park.timeout.ms", 30_000))


class DelayedDeliveryDriver:
    def __init__(self, node_id: int, config: DelayedDeliveryConfig, bootstrap: Callable[[], str],
                 client_properties: Mapping[str, object], image: Callable[[], MetadataImage],
                 topic_creation: AutoTopicCreationManager, index_dir: str,
                 now_ms: Callable[[], int], rng: random.Random, replicas: ReplicaDriver) -> None:
        """``bootstrap()``: this broker's own HOST:PORT; ``client_properties``: how its
        clients log in there; ``index_dir``: where the schedulers' sqlite files live;
        ``replicas``: this broker's partitions, whose store partitions it reads locally."""
        self.node_id = node_id
        self.config = config
        self.bootstrap = bootstrap
        self.client_properties = dict(client_properties)
        self.image = image
        self.topic_creation = topic_creation
        self.index_dir = index_dir
        self.now_ms = now_ms
        self.rng = rng
        self.replicas = replicas
        self._park_producer: Producer | None = None
        self._creating: asyncio.Task | None = None
        self._schedulers: dict[int, asyncio.Task] = {}
        self._stopped = False

    # ------------------------------------------------------------ the Produce path

    def diversion(self, tp: TopicPartition, records: Any, transactional_id: str | None
                  ) -> tuple[Diversion | None, tuple[int, str | None] | None]:
        """(what to park and append instead of ``records``, None: append them as they are;
        refusal (code, message) or None). Decides only: ``park`` writes."""
        if (not self.config.enable or not records or tp.topic == DELAY_STORE_TOPIC
                or (transactional_id or "").startswith(TRANSACTIONAL_ID_PREFIX)):
            return None, None
        try:
            diversion = divert(tp, records, self.now_ms(), self.config.max_delay_ms, self.rng)
        except DivertError as e:
            return None, (ErrorCode.INVALID_RECORD, str(e))
        return diversion, None

    async def park(self, diversions: list[Diversion]) -> tuple[int, str | None] | None:
        """Parks the delayed records of ``diversions`` (a Produce request's, all at once:
        one round trip) with acks=all; a refusal (code, message) for all of them or None.
        The caller has checked the targets' producer state first (the module docstring)."""
        return await self._park(tuple(r for d in diversions for r in d.parked))

    async def _park(self, parked: tuple[ParkedRecord, ...]) -> tuple[int, str | None] | None:
        try:
            topic = await self._store_topic()
            if topic is None:
                return ErrorCode.NOT_ENOUGH_REPLICAS, f"{DELAY_STORE_TOPIC} is not available yet"
            local: dict[int, list[ParkedRecord]] = {}
            remote: list[tuple[int, ParkedRecord]] = []
            for r in parked:
                p = store_partition_for(r.target, len(topic.partitions))
                if topic.partitions[p].leader == self.node_id:
                    local.setdefault(p, []).append(r)
                else:
                    remote.append((p, r))
            futures = []
            if remote:
                producer = await self._producer_for_parking()
                futures = [await producer.send(DELAY_STORE_TOPIC, encode_parked(r), r.store_key,
                                               partition=p) for p, r in remote]
            # A store partition led here is appended to directly, as the group coordinator
            # appends to __consumer_offsets: no round trip through this broker's own
            # listener, which the Produce's connection would wait for (it serves one
            # request at a time).
            waits = []
            for p, records in local.items():
                tp = TopicPartition(DELAY_STORE_TOPIC, p)
                result = self.replicas.append(
                    tp, store_batches(records, self.now_ms(), STORE_BATCH_BYTES), -1)
                if result.error_code != ErrorCode.NONE:
                    return _parking_failed(len(parked), result.error_code, result.error_message)
                if result.required_offset is not None:
                    waits.append((tp, result.required_offset))

            # Awaited without a task (wait_for would make one): with the store's HW
            # already past them (an ISR of this broker alone) nothing here suspends, and
            # the Produce goes on to its appends in the same step. The core times these
            # waits out itself.
            codes = (await self.replicas.await_replications(waits, self.config.park_timeout_ms)
                     if waits else [])
            for code in codes:
                if code != ErrorCode.NONE:
                    return _parking_failed(len(parked), code, None)
            if futures:
                async def acknowledged() -> None:
                    for f in futures:       # one by one: gather would make a task of each
                        await f
                await asyncio.wait_for(acknowledged(), self.config.park_timeout_ms / 1000)
            return None
        except KafkaApiError as e:
            return _parking_failed(len(parked), e.error_code, str(e))
        except (asyncio.TimeoutError, OSError) as e:
            log.warning("parking %d delayed record(s) failed: %r", len(parked), e)
            return ErrorCode.REQUEST_TIMED_OUT, f"delayed delivery: parking failed: {e!r}"

    async def _store_topic(self) -> TopicImage | None:
        """The store topic's image, creating the topic on first use."""
        topic = self.image().topics.get(DELAY_STORE_TOPIC)
        if topic is None:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.get_running_loop().create_task(self._create_store())
            await asyncio.shield(self._creating)
            topic = self.image().topics.get(DELAY_STORE_TOPIC)
        return topic

    async def _create_store(self) -> None:
        rf = max(1, min(self.config.topic_replication_factor, self.topic_creation.live_brokers()))
        cls = messages.CreateTopicsRequest
        configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, rf))}
        await self.topic_creation.create([cls.CreatableTopic(
            name=DELAY_STORE_TOPIC, num_partitions=self.config.topic_partitions,
            replication_factor=rf,
            configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
            timeout_s=20.0)

    def _client_config(self, **extra: object) -> dict[str, object]:
        return {**self.client_properties, "bootstrap.servers": self.bootstrap(), **extra}

    async def _producer_for_parking(self) -> Producer:
        if self._park_producer is None:
            self._park_producer = Producer(self._client_config(
                **{"client.id": f"ketch-broker-{self.node_id}-delayed-park", "acks": "all",
                   "enable.idempotence": True, "linger.ms": 0}))
            await self._park_producer.start()
        return self._park_producer

    # ------------------------------------------------------------ delivery

    def on_metadata(self, image: MetadataImage) -> None:
        """Start a scheduler for each store partition led here; cancel the others."""
        if self._stopped or not self.config.enable:
            return
        topic = image.topics.get(DELAY_STORE_TOPIC)
        led = set() if topic is None else {p for p, reg in topic.partitions.items()
                                           if reg.leader == self.node_id}
        for p in list(self._schedulers):
            if p not in led:
                log.info("delayed delivery: no longer leading %s-%d", DELAY_STORE_TOPIC, p)
                self._schedulers.pop(p).cancel()
        loop = asyncio.get_running_loop()
        for p in led:
            if p not in self._schedulers or self._schedulers[p].done():
                self._schedulers[p] = loop.create_task(self._run_partition(p),
                                                       name=f"delayed-delivery-{p}")

    async def _run_partition(self, p: int) -> None:
        while True:
            try:
                await self._deliver_partition(p)
            except asyncio.CancelledError:
                raise
            except Exception as e:        # noqa: BLE001 - any failure: fence and rebuild again
                log.warning("delayed delivery of %s-%d restarts after: %r", DELAY_STORE_TOPIC, p, e)
            await asyncio.sleep(RESTART_BACKOFF_S)

    async def _deliver_partition(self, p: int) -> None:
        tp = TopicPartition(DELAY_STORE_TOPIC, p)
        index = SqliteDueIndex(os.path.join(self.index_dir, f"{p}.sqlite"))
        core = DeliveryScheduler(index, self.config.batch_max)
        producer = Producer(self._client_config(
            **{"client.id": f"ketch-broker-{self.node_id}-delayed-{p}",
               "transactional.id": transactional_id_for(p), "linger.ms": 0}))
        try:
            # Fence first: the previous leader's producer can no longer commit, and its
            # open transaction is aborted, so the read below ends at a stable offset.
            await producer.init_transactions()
            offset, end = 0, None
            while True:
                # The partition is led here: read from the local log, read_committed,
                # what a consumer would get (without its round trip and re-decoding).
                before = offset
                records, offset, stable = self._read_store(tp, offset)
                if end is None:
                    end = stable
                    log.info("delayed delivery: leading %s, rebuilding its index up to offset %d",
                             tp, end)
                for i, e in core.replay([(k, v) for _, k, v in records]):
                    log.error("%s offset %d: not delivered: %s", tp, records[i][0], e)
                if not core.is_caught_up and offset >= end:
                    core.caught_up()
                    log.info("delayed delivery: %s rebuilt, %d record(s) pending", tp, core.pending)
                due = core.due(self.now_ms())
                if due:
                    await self._deliver(producer, core, p, due)
                    continue
                if offset == before:
                    # Nothing more to read: until the store changes or the next is due.
                    wait = core.poll(self.now_ms()) if core.is_caught_up else 100
                    if wait > 0:
                        await self.replicas.wait_for_data([tp], wait / 1000)
        finally:
            await producer.close(5.0)
            index.close()

    def _read_store(self, tp: TopicPartition, offset: int
                    ) -> tuple[list[tuple[int, bytes | None, bytes | None]], int, int]:
        """(offset, key, value) of the committed records of store partition ``tp`` from
        ``offset``, the offset to read next, and the partition's last stable offset.
        Raises when this broker does not lead it (the task restarts or is cancelled)."""
        result = self.replicas.read(tp, offset, READ_MAX_BYTES, -1, -1, True,
                                    isolation_level=READ_COMMITTED)
        if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and offset < result.log_start_offset:
            return [], result.log_start_offset, result.last_stable_offset
        if result.error_code != ErrorCode.NONE:
            raise_for_code(result.error_code, f"reading {tp} locally")
        if result.records is None:
            return [], offset, result.last_stable_offset
        aborted = sorted((a.first_offset, a.producer_id) for a in result.aborted_transactions or ())
        records, next_offset, _ = records_from_batches(
            tp, self.replicas.records_bytes(result), offset,
            lambda topic, partition, o, ts, ts_type, key, value, headers, epoch: (o, key, value),
            aborted, check_crcs=False)
        return records, next_offset, result.last_stable_offset

    async def _deliver(self, producer: Producer, core: DeliveryScheduler, p: int,
                       due: list[ParkedRecord]) -> None:
        image = self.image()
        await producer.begin_transaction()
        try:
            for r in due:
                topic = image.topics.get(r.target.topic)
                if topic is not None and r.target.partition in topic.partitions:
                    await producer.send(r.target.topic, r.value, r.key, partition=r.target.partition,
                                        timestamp_ms=r.timestamp_ms, headers=list(r.headers))
                else:
                    log.warning("delayed record %r: its target %s no longer exists; dropped",
                                r.store_key, r.target)
                await producer.send(DELAY_STORE_TOPIC, None, r.store_key, partition=p)
            await producer.commit_transaction()
        except BaseException:
            core.failed()
            raise         # the task restarts: fence, rebuild
        core.delivered()

    async def stop(self) -> None:
        self._stopped = True
        tasks = list(self._schedulers.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._schedulers.clear()
        if self._park_producer is not None:
            await self._park_producer.close(5.0)
