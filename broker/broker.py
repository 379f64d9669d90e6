"""The broker process: storage, the metadata image, replication and the network, wired up.

Lifecycle (KRaft's broker lifecycle, simplified):

1. identify storage: ``meta.properties`` in the log dir names the cluster id and node id
   (written on first start from ``ketch.cluster.id``; a mismatch refuses to start);
2. open the log manager (recovering after an unclean stop);
3. register with the active controller (BrokerRegistration: incarnation id, listener,
   rack) and get a broker epoch; start following the metadata log as an observer;
4. heartbeat every ``broker.heartbeat.interval.ms`` with the metadata offset reached; the
   controller unfences the broker once it has caught up, and fences it when heartbeats stop;
5. serve clients; followers fetch from leaders; leaders propose ISR changes;
6. on SIGTERM: controlled shutdown: heartbeat ``want_shut_down`` until the controller has
   moved every leadership away and answers ``should_shut_down``, then stop cleanly (flush,
   checkpoints, clean-shutdown marker).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from typing import Any, Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from broker.admin_http import AdminHttpServer
from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.controller_channel import ControllerChannel, ControllerUnavailableError
from broker.fetcher import ReplicaFetcherManager
from broker.group.coordinator import GroupConfig
from broker.group.driver import GroupCoordinatorDriver
from broker.cleaner_driver import CleanerDriver, CleanerSettings
from broker.log import FileStorage, LogConfig, LogManager, LogManagerConfig
from broker.metadata_follower import MetadataImageListener, MetadataObserver
from broker.replica.partition import AlterIsr, Role, TopicPartition
from broker.replica_manager import HostedPartition, ReplicaManager, now_ms
from quorum.network import KafkaServer
from clients.properties import format_properties, load_properties
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from metadata_log.config_layers import ConfigLayers
from metadata_log.image import EMPTY_IMAGE

log = logging.getLogger(__name__)

__all__ = ["Broker", "BrokerMetrics"]

META_PROPERTIES = "meta.properties"
# AlterPartition answers that prove the controller did not apply the proposal.
_ALTER_PARTITION_NOT_APPLIED = {
    ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INVALID_REQUEST,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
}
ALTER_PARTITION_RETRY_S = 0.5
SECURITY_PROTOCOL_PLAINTEXT = 0


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ketch_broker_requests", "Requests handled", ["api"], registry=self.registry)
        self.produced_bytes = Counter("ketch_broker_produced_bytes", "Record bytes received", registry=self.registry)
        self.fetched_bytes = Counter("ketch_broker_fetched_bytes", "Record bytes served", registry=self.registry)
        self.partitions_led = Gauge("ketch_broker_partitions_led", "Partitions this broker leads", registry=self.registry)
        self.metadata_offset = Gauge("ketch_broker_metadata_offset", "Metadata log offset applied", registry=self.registry)


def _group_config(config: BrokerConfig, props: dict[str, str]) -> GroupConfig:
    def num(key: str, default: int) -> int:
        try:
            return int(props.get(key, default))
        except ValueError:
            raise SystemExit(f"{key}={props[key]!r} is not an integer") from None
    return GroupConfig(
        group_min_session_timeout_ms=num("group.min.session.timeout.ms", 6_000),
        group_max_session_timeout_ms=num("group.max.session.timeout.ms", 1_800_000),
        group_initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms", 3_000),
        group_max_size=num("group.max.size", 2**31 - 1),
        offsets_retention_minutes=num("offsets.retention.minutes", 7 * 24 * 60),
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
    )


class Broker:
    def __init__(self, config: BrokerConfig, properties: dict[str, str]) -> None:
        self.config = config
        self.properties = properties
        self.metrics = BrokerMetrics()
        self.cluster_id = self._identify_storage()
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.storage = FileStorage()
        # Until the metadata image arrives, logs open with the static topic defaults.
        static_layers = ConfigLayers(EMPTY_IMAGE.configs, config.node_id, properties)
        default_log_config = LogConfig.from_properties(static_layers.topic_config(""))
        self.logs, reports = LogManager.open(self.storage, config.log_dir, now_ms=now_ms(),
                                             default_config=default_log_config)
        for key, report in reports.items():
            if report.dropped_anything:
                log.warning("%s-%d: recovery dropped %d bytes", key[0], key[1], report.truncated_bytes)
        zero_copy = config.event_loop == "asyncio"   # uvloop has no loop.sendfile
        self.replicas = ReplicaManager(config.node_id, self.logs, properties,
                                       config.replica_lag_time_max_ms, use_sendfile=zero_copy)
        self.cleaner = CleanerDriver(self.logs, self.storage, self._high_watermark_of, now_ms)
        self._apply_broker_configs()
        self.controller = ControllerChannel(config.controller_voters, f"broker-{config.node_id}")
        self.fetchers = ReplicaFetcherManager(self.replicas, config.node_id, self._endpoint_of,
                                              fetch_max_wait_ms=config.replica_fetch_wait_max_ms)
        self.replicas.on_become_follower = self.fetchers.add
        self.replicas.on_stop_following = self.fetchers.remove
        self.replicas.send_alter_isr = self._send_alter_isr
        self.listener = MetadataImageListener(self._schedule_apply)
        self.observer = MetadataObserver(list(config.controller_voters.values()), self.listener,
                                         replica_id=config.node_id,
                                         fetch_wait_max_ms=config.replica_fetch_wait_max_ms)
        # APIs served by other components (the group coordinator).
        self.extra_handlers: dict[int, Callable[..., Awaitable[Any]]] = {}
        self.extra_versions: dict[int, tuple[int, int]] = {}
        self.groups = GroupCoordinatorDriver(self, _group_config(config, properties))
        self.groups.install()
        self._partition_counts: dict[str, int] = {}
        self.apis = KafkaApis(self)
        self.server = KafkaServer(self.apis, config.listener_host, config.listener_port,
                                  frame_bytes_max=config.socket_request_max_bytes,
                                  use_sendfile=zero_copy)
        self.http = (AdminHttpServer(self, config.listener_host, config.http_port)
                     if config.http_port >= 0 else None)
        self._tasks: list[asyncio.Task] = []
        self._apply_scheduled = False
        self._alter_in_flight: set[TopicPartition] = set()
        # The newest ISR proposal per partition, for its sender task.
        self._alter_wanted: dict[TopicPartition, tuple[AlterIsr, HostedPartition]] = {}
        self._image_changed = asyncio.Event()
        self._stopping = False

    # ------------------------------------------------------------ storage identity

    def _identify_storage(self) -> str:
        os.makedirs(self.config.log_dir, exist_ok=True)
        path = os.path.join(self.config.log_dir, META_PROPERTIES)
        wanted = self.properties.get("ketch.cluster.id")
        if os.path.exists(path):
            meta = load_properties(path)
            if int(meta.get("node.id", "-1")) != self.config.node_id:
                raise SystemExit(f"{path}: node.id {meta.get('node.id')} is not this broker's "
                                 f"{self.config.node_id}; refusing to start on another node's data")
            if wanted and meta.get("cluster.id") != wanted:
                raise SystemExit(f"{path}: cluster.id {meta.get('cluster.id')} differs from "
                                 f"ketch.cluster.id {wanted}; refusing to start")
            return meta["cluster.id"]
        if not wanted:
            raise SystemExit(f"{path} is missing and ketch.cluster.id is not set: "
                             "format the storage first (ketch up does it)")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(format_properties({"version": "1", "cluster.id": wanted,
                                       "node.id": str(self.config.node_id)}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return wanted

    # ------------------------------------------------------------ running

    async def start(self) -> None:
        port = await self.server.start()
        log.info("broker %d listening on %s:%d", self.config.node_id, self.config.listener_host, port)
        if self.http is not None:
            http_port = await self.http.start()
            log.info("broker %d HTTP admin API and /metrics on %s:%d", self.config.node_id,
                     self.config.listener_host, http_port)
        loop = asyncio.get_running_loop()
        self.groups.start()
        self._tasks = [loop.create_task(self.observer.run(), name="metadata-observer"),
                       loop.create_task(self._lifecycle(), name="heartbeats"),
                       loop.create_task(self._poll_loop(), name="replica-poll"),
                       loop.create_task(self.cleaner.run(), name="log-cleaner")]

    @property
    def port(self) -> int:
        return self.server.port

    def _schedule_apply(self) -> None:
        # Coalesce: a fetch response can hold many batches; apply the image once.
        if not self._apply_scheduled:
            self._apply_scheduled = True
            asyncio.get_running_loop().call_soon(self._apply_image)

    def _apply_image(self) -> None:
        self._apply_scheduled = False
        image, changes = self.listener.take_changes()
        try:
            self.replicas.apply_image(image, now_ms(), changes)
            self._apply_broker_configs()
        except Exception:
            log.exception("applying metadata offset %d failed", image.provenance.offset)
            raise
        counts = {t.name: len(t.partitions) for t in image.topics.by_id.values()}
        grown = [n for n, c in counts.items() if self._partition_counts.get(n, c) < c]
        self._partition_counts = counts
        if grown:
            self.groups._run(self.groups.core.on_partition_count_change(grown, now_ms()))
        self.metrics.metadata_offset.set(image.provenance.offset)
        self.metrics.partitions_led.set(sum(1 for h in self.replicas.partitions.values()
                                            if h.replica.leader_id == self.config.node_id))
        self._image_changed.set()

    def _apply_broker_configs(self) -> None:
        """Dynamic broker keys that steer broker-wide duties (not a topic's log) take
        effect with the image that carries them."""
        layers = self.replicas.config_layers

        def num(key: str, default: int) -> int:
            try:
                return int(layers.broker_value(key) or default)
            except ValueError:
                return default      # the controller validates; never crash on a value
        self.logs.reconfigure(LogManagerConfig(
            flush_offset_checkpoint_interval_ms=num("log.flush.offset.checkpoint.interval.ms", 60_000),
            retention_check_interval_ms=num("log.retention.check.interval.ms", 300_000)), now_ms())
        self.cleaner.reconfigure(CleanerSettings(
            enable=(layers.broker_value("log.cleaner.enable") or "true").strip().lower() != "false",
            backoff_ms=max(1, num("log.cleaner.backoff.ms", 15_000)),
            dedupe_buffer_size=max(1, num("log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024))))

    def _high_watermark_of(self, topic: str, partition: int) -> int:
        hosted = self.replicas.partitions.get(TopicPartition(topic, partition))
        return 0 if hosted is None else hosted.replica.high_watermark

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        reg = self.replicas.image.cluster.get(broker_id)
        if reg is None or not reg.endpoints:
            return None
        endpoint = reg.endpoint(self.config.listener_name) or reg.endpoints[0]
        return endpoint.host, endpoint.port

    async def _register(self) -> None:
        cls = messages.BrokerRegistrationRequest
        req = cls(broker_id=self.config.node_id, cluster_id=self.cluster_id,
                  incarnation_id=self.incarnation_id,
                  listeners=[cls.Listener(name=self.config.listener_name, host=self.config.advertised_host,
                                          port=self.config.advertised_port,
                                          security_protocol=SECURITY_PROTOCOL_PLAINTEXT)],
                  features=[cls.Feature(name="metadata.version", min_supported_version=1,
                                        max_supported_version=21)],
                  rack=self.config.rack, previous_broker_epoch=self.broker_epoch)
        while not self._stopping:
            try:
                _, resp = await self.controller.request(ApiKey.BROKER_REGISTRATION, (0, 4), req, timeout_s=10)
            except ControllerUnavailableError as e:
                log.warning("registration: %s", e)
                continue
            if resp.error_code == ErrorCode.NONE:
                self.broker_epoch = resp.broker_epoch
                log.info("registered as broker %d with epoch %d", self.config.node_id, self.broker_epoch)
                return
            log.warning("registration refused: %s", ErrorCode(resp.error_code).name)
            await asyncio.sleep(1)

    async def _heartbeat(self, want_shut_down: bool) -> Any:
        req = messages.BrokerHeartbeatRequest(
            broker_id=self.config.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=max(self.observer.fetch_offset - 1, -1),
            want_fence=False, want_shut_down=want_shut_down)
        _, resp = await self.controller.request(ApiKey.BROKER_HEARTBEAT, (0, 1), req,
                                                timeout_s=self.config.heartbeat_interval_ms / 1000 * 2)
        return resp

    async def _lifecycle(self) -> None:
        await self._register()
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._stopping:
            try:
                resp = await self._heartbeat(want_shut_down=False)
                if resp.error_code == ErrorCode.STALE_BROKER_EPOCH or resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    await self._register()
                    continue
                if resp.error_code == ErrorCode.NONE and resp.is_fenced != self.fenced:
                    self.fenced = resp.is_fenced
                    log.info("broker %d is now %s", self.config.node_id,
                             "fenced" if self.fenced else "unfenced")
            except ControllerUnavailableError as e:
                log.warning("heartbeat: %s", e)
            await asyncio.sleep(interval if not self.fenced else min(interval, 0.2))

    async def _poll_loop(self) -> None:
        checkpoint_every = 5.0
        loop = asyncio.get_running_loop()
        next_checkpoint = loop.time() + checkpoint_every
        while not self._stopping:
            delay = self.replicas.poll(now_ms())
            if loop.time() >= next_checkpoint:
                self.replicas.checkpoint_high_watermarks()
                next_checkpoint = loop.time() + checkpoint_every
            await asyncio.sleep(min(delay, 0.25))

    # ------------------------------------------------------------ controller requests

    def _send_alter_isr(self, effect: AlterIsr, hosted: HostedPartition) -> None:
        # Kafka's leaders do not propose fenced or shutting-down replicas for the ISR (the
        # controller would refuse with INELIGIBLE_REPLICA, again on every fetch).
        cluster = self.replicas.image.cluster
        for broker_id in set(effect.new_isr) - set(hosted.replica.isr):
            reg = cluster.get(broker_id)
            if reg is None or reg.fenced or reg.in_controlled_shutdown:
                hosted.replica.abandon_pending_isr()    # never sent: nothing to undo
                return
        self._alter_wanted[effect.partition] = (effect, hosted)
        if effect.partition in self._alter_in_flight:
            return      # the running sender picks the newest proposal up
        self._alter_in_flight.add(effect.partition)
        asyncio.get_running_loop().create_task(self._alter_isr_sender(effect.partition))

    def _proposal_current(self, effect: AlterIsr, hosted: HostedPartition) -> bool:
        replica = hosted.replica
        return (self.replicas.partitions.get(effect.partition) is hosted
                and replica.role is Role.LEADER and replica.leader_epoch == effect.leader_epoch
                and replica.pending_isr == effect.new_isr)

    async def _alter_isr_sender(self, tp: TopicPartition) -> None:
        """Send the partition's ISR proposals one at a time; resend one whose answer was
        lost until an answer comes or the proposal is no longer current."""
        try:
            while not self._stopping:
                effect, hosted = self._alter_wanted.pop(tp, (None, None))
                if effect is None or not self._proposal_current(effect, hosted):
                    if tp in self._alter_wanted:
                        continue
                    return
                if await self._alter_isr(effect, hosted) and tp not in self._alter_wanted:
                    self._alter_wanted[tp] = (effect, hosted)
                    await asyncio.sleep(ALTER_PARTITION_RETRY_S)
        finally:
            self._alter_in_flight.discard(tp)

    async def _alter_isr(self, effect: AlterIsr, hosted: HostedPartition) -> bool:
        """One AlterPartition round trip; True when the answer was lost (send it again).

        Only an answer saying the controller did *not* apply the proposal lets the leader
        fall back to its committed ISR (Kafka's Partition.handleAlterPartitionError). A
        lost answer, or a refusal that may hide a committed change (INVALID_UPDATE_VERSION:
        our own earlier try may be that change), keeps the proposal pending, so the high
        watermark still counts the maximal ISR, until a resend is answered or the metadata
        log brings the committed state. Falling back on a lost answer lost acknowledged
        writes: an expansion committed, the leader acked with the smaller ISR, and the new
        member was then elected cleanly without them (found by the chaos suite)."""
        cls = messages.AlterPartitionRequest
        image = self.replicas.image
        epochs = {b: (image.cluster.get(b).broker_epoch if image.cluster.get(b) else -1)
                  for b in effect.new_isr}
        req = cls(broker_id=self.config.node_id, broker_epoch=self.broker_epoch, topics=[cls.TopicData(
            topic_name=effect.partition.topic, topic_id=hosted.topic_id, partitions=[cls.PartitionData(
                partition_index=effect.partition.partition, leader_epoch=effect.leader_epoch,
                new_isr=list(effect.new_isr),
                new_isr_with_epochs=[cls.BrokerState(broker_id=b, broker_epoch=epochs[b])
                                     for b in effect.new_isr],
                leader_recovery_state=0, partition_epoch=effect.partition_epoch)])])
        try:
            _, resp = await self.controller.request(ApiKey.ALTER_PARTITION, (0, 3), req, timeout_s=5)
        except (ControllerUnavailableError, ConnectionError) as e:
            log.warning("%s: AlterPartition answer lost (%s); the proposal stays pending", effect.partition, e)
            return self._proposal_current(effect, hosted)
        code = resp.error_code
        part = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
        if code == ErrorCode.NONE and part is not None:
            code = part.error_code
        if code == ErrorCode.NONE and part is not None:
            if self.replicas.partitions.get(effect.partition) is hosted and hosted.replica.role is Role.LEADER:
                log.info("%s: ISR %s committed at partition epoch %d", effect.partition,
                         part.isr, part.partition_epoch)
                self.replicas._complete(hosted.replica.apply_committed(
                    part.leader_epoch, part.partition_epoch, tuple(part.isr), hosted.replica.replicas))
            return False
        log.info("%s: AlterPartition refused: %s", effect.partition, ErrorCode(code).name)
        if code in _ALTER_PARTITION_NOT_APPLIED and self._proposal_current(effect, hosted):
            hosted.replica.abandon_pending_isr()
        return False

    async def allocate_producer_ids(self) -> tuple[int, int]:
        req = messages.AllocateProducerIdsRequest(broker_id=self.config.node_id, broker_epoch=self.broker_epoch)
        _, resp = await self.controller.request(ApiKey.ALLOCATE_PRODUCER_IDS, (0, 0), req, timeout_s=5)
        if resp.error_code != ErrorCode.NONE:
            raise ConnectionError(f"producer id block refused: {ErrorCode(resp.error_code).name}")
        return resp.producer_id_start, resp.producer_id_len

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Metadata's auto-creation (auto.create.topics.enable): create through the
        controller with num.partitions and default.replication.factor (capped by the live
        brokers), then wait for this broker's image to show them."""
        live = sum(1 for b in self.replicas.image.cluster.brokers.values() if not b.fenced)
        rf = max(1, min(self.config.default_replication_factor, live))
        cls = messages.CreateTopicsRequest
        req = cls(topics=[cls.CreatableTopic(name=n, num_partitions=self.config.num_partitions,
                                             replication_factor=rf) for n in names],
                  timeout_ms=10_000)
        try:
            _, resp = await self.controller.request(ApiKey.CREATE_TOPICS, (2, 7), req, timeout_s=10)
        except ControllerUnavailableError:
            return {n: ErrorCode.LEADER_NOT_AVAILABLE for n in names}
        errors = {}
        for t in resp.topics:
            if t.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                errors[t.name] = (ErrorCode.INVALID_TOPIC_EXCEPTION
                                  if t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
                                  else ErrorCode.LEADER_NOT_AVAILABLE)
        await self.wait_for_topics([n for n in names if n not in errors], 5.0)
        for n in names:
            if n not in errors and self.replicas.image.topics.get(n) is None:
                errors[n] = ErrorCode.LEADER_NOT_AVAILABLE
        return errors

    async def wait_for_topics(self, names: list[str], timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

        def ready() -> bool:
            image = self.replicas.image
            for n in names:
                topic = image.topics.get(n)
                if topic is None or any(p.leader < 0 for p in topic.partitions.values()):
                    return False
            return True
        while not ready() and loop.time() < deadline:
            self._image_changed.clear()
            try:
                await asyncio.wait_for(self._image_changed.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                break

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        hosted = self.replicas.partitions.get(tp)
        if hosted is None or hosted.replica.leader_id != self.config.node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        hw = hosted.replica.high_watermark
        if offset == -1:
            offset = hw
        code = hosted.log.maybe_increment_log_start_offset(offset, hw)
        hosted.replica.on_log_start_offset(hosted.log.log_start_offset)
        return code, hosted.log.log_start_offset

    def disk_usage(self) -> tuple[int, int]:
        usage = shutil.disk_usage(self.config.log_dir)
        return usage.total, usage.free

    # ------------------------------------------------------------ stopping

    async def controlled_shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask the controller to move leadership away, then stop (SIGTERM)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._stopping = True
        if self.broker_epoch >= 0:
            while loop.time() < deadline:
                try:
                    resp = await self._heartbeat(want_shut_down=True)
                    if resp.error_code == ErrorCode.NONE and resp.should_shut_down:
                        log.info("controlled shutdown: controller released broker %d", self.config.node_id)
                        break
                except ControllerUnavailableError as e:
                    log.warning("controlled shutdown heartbeat: %s", e)
                    break
                await asyncio.sleep(0.1)
        await self.stop()

    async def stop(self) -> None:
        self._stopping = True
        self.cleaner.stop()
        self.observer.close()   # its loop checks this: cancel() alone can be swallowed (3.11)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.stop()
        if self.http is not None:
            await self.http.stop()
        await self.groups.stop()
        await self.fetchers.close()
        self.observer.close()
        self.controller.close()
        self.replicas.shutdown()
        self.storage.close()
