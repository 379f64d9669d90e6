"""The broker process: the data-plane core and its shells, wired up (nothing else here).

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
import random

from broker.admin_http import BrokerView
from broker.apis import KafkaApis
from broker.auto_topic_creation import AutoTopicCreationManager
from broker.cleaner_driver import CleanerDriver, CleanerSettings
from broker.config import BrokerConfig
from broker.controller_channel import ControllerChannel
from broker.client_quotas import ClientQuotas
from broker.fetch_session import FetchSessionCache
from broker.fetcher import ReplicaFetcherManager
from broker.group.coordinator import GroupConfig
from broker.group.driver import GroupCoordinatorDriver
from broker.lifecycle import BrokerLifecycleManager, Registration
from broker.log import FileStorage, LogConfig, LogManager, LogManagerConfig
from broker.metadata_follower import MetadataImageListener, MetadataObserver
from broker.group_lag import GroupLagMonitor
from broker.metrics import BrokerMetrics, BrokerStateCollector
from broker.producer_ids import ProducerIdManager
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import ReplicaManager
from clients.clock import SYSTEM_CLOCK, Clock
from clients.http_api import AdminHttpServer, BrokerAdmins
from clients.properties import format_properties, load_properties
from metadata_log.config_layers import ConfigLayers
from metadata_log.image import EMPTY_IMAGE
from quorum.network import KafkaServer

log = logging.getLogger(__name__)

__all__ = ["Broker"]

META_PROPERTIES = "meta.properties"


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
    def __init__(self, config: BrokerConfig, properties: dict[str, str], clock: Clock = SYSTEM_CLOCK,
                 rng: random.Random | None = None) -> None:
        """``clock`` and ``rng``: the process's one clock and one random source, passed to
        every part that needs them (the seed is logged so a run's choices can be replayed)."""
        self.config = config
        self.properties = properties
        self.clock = clock
        if rng is None:
            seed = random.SystemRandom().randrange(2**63)
            log.info("broker %d random seed %d", config.node_id, seed)
            rng = random.Random(seed)
        now_ms = clock.now_ms
        self.metrics = BrokerMetrics(enabled=config.metrics_enable)
        self.cluster_id = self._identify_storage()
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
        self.controller = ControllerChannel(config.controller_voters, f"broker-{config.node_id}")
        # Heartbeats on a connection of their own: the controller fences a broker soon after
        # that connection closes (ketch.broker.disconnect.fence.ms), so it must close only
        # when this process dies, never because a slow forwarded admin request timed out.
        self.heartbeat_channel = ControllerChannel(
            config.controller_voters, f"broker-{config.node_id}-heartbeat",
            on_connection_lost=lambda: self.lifecycle.connection_lost())
        self.observer_listener = MetadataImageListener(self._schedule_apply)
        self.observer = MetadataObserver(list(config.controller_voters.values()), self.observer_listener,
                                         replica_id=config.node_id,
                                         fetch_wait_max_ms=config.replica_fetch_wait_max_ms)
        self.lifecycle = BrokerLifecycleManager(
            Registration(config.node_id, self.cluster_id, config.listener_name, config.advertised_host,
                         config.advertised_port, config.rack, config.heartbeat_interval_ms),
            self.heartbeat_channel,
            metadata_offset=lambda: max(self.observer.fetch_offset - 1, -1),
            on_registered=self._schedule_apply)
        self.core = ReplicaManager(config.node_id, self.logs, properties, config.replica_lag_time_max_ms,
                                   rack_aware_reads=config.rack_aware_reads)
        self.replicas = ReplicaDriver(self.core, self.controller, now_ms,
                                      broker_epoch=lambda: self.lifecycle.broker_epoch,
                                      use_sendfile=zero_copy)
        self.fetchers = ReplicaFetcherManager(self.replicas, config.node_id, self._endpoint_of,
                                              broker_epoch=lambda: self.lifecycle.broker_epoch,
                                              fetch_max_wait_ms=config.replica_fetch_wait_max_ms)
        self.cleaner = CleanerDriver(self.logs, self.storage, self.core.high_watermark_of, now_ms)
        self._apply_broker_configs()
        self.topic_creation = AutoTopicCreationManager(
            self.controller, lambda: self.core.image, self.replicas.wait_for_image,
            config.num_partitions, config.default_replication_factor)
        self.groups = GroupCoordinatorDriver(
            _group_config(config, properties), self.replicas, self.topic_creation,
            config.listener_name, config.offsets_topic_replication_factor, config.request_timeout_ms,
            now_ms, rng)
        self.apis = KafkaApis(config, self.cluster_id, self.replicas, self.controller, self.topic_creation,
                              ProducerIdManager(config.node_id, self.controller),
                              lambda: self.lifecycle.broker_epoch, self.metrics, self.groups.apis(),
                              FetchSessionCache(config.fetch_session_cache_slots,
                                                rng=random.Random(rng.getrandbits(64))),
                              ClientQuotas())
        self.server = KafkaServer(self.apis, config.listener_host, config.listener_port,
                                  frame_bytes_max=config.socket_request_max_bytes,
                                  use_sendfile=zero_copy)
        # One admin client, through this broker's own listener, for the HTTP API and the
        # group-lag metrics.
        self.admins = BrokerAdmins(lambda: f"{config.advertised_host}:{self.server.port}",
                                   f"ketch-broker-{config.node_id}-admin")
        self.group_lag = GroupLagMonitor(self.groups.core.committed_offsets,
                                         self.admins.cluster_admin, config.group_lag_interval_ms)
        self.metrics.registry.register(BrokerStateCollector(
            self.core, lambda: (self.replicas.produce_purgatory_size, self.replicas.fetch_purgatory_size),
            lambda: self.server.connection_count, lambda: self.core.image.provenance.offset,
            self.group_lag.snapshot))
        self.http = (AdminHttpServer(BrokerView(config.node_id, self.core, self._lifecycle_state),
                                     self.admins, self.metrics.exposition, config.listener_host,
                                     config.http_port)
                     if config.http_port >= 0 else None)
        self._tasks: list[asyncio.Task] = []
        self._apply_scheduled = False
        self._caught_up = False

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
        self.replicas.start(self.fetchers.fetch_from)
        self.groups.start()
        self.metrics.process.start()
        self._tasks = [loop.create_task(self.observer.run(), name="metadata-observer"),
                       loop.create_task(self.lifecycle.run(), name="heartbeats"),
                       loop.create_task(self.cleaner.run(), name="log-cleaner"),
                       loop.create_task(self.group_lag.run(), name="group-lag")]

    @property
    def port(self) -> int:
        return self.server.port

    def _lifecycle_state(self) -> dict:
        return {"cluster_id": self.cluster_id, "broker_epoch": self.lifecycle.broker_epoch,
                "fenced": self.lifecycle.fenced, "caught_up": self._caught_up,
                "rack": self.config.rack}

    def _schedule_apply(self) -> None:
        # Coalesce: a fetch response can hold many batches; apply the image once.
        if not self._apply_scheduled:
            self._apply_scheduled = True
            asyncio.get_running_loop().call_soon(self._apply_image)

    def _apply_image(self) -> None:
        self._apply_scheduled = False
        if not self._caught_up:
            # Kafka's initial catch-up: act on the metadata only once it holds this
            # process's own registration. Before that commit, an image can still name this
            # broker leader at its old epoch, and a restarted broker that lost its unflushed
            # tail would lead with the shortened log; the followers would truncate to it
            # (found by tests/sim). The new registration fences this incarnation's
            # predecessor and moves its leaderships first.
            reg = self.observer_listener.image.cluster.get(self.config.node_id)
            epoch = self.lifecycle.broker_epoch
            if epoch < 0 or reg is None or reg.broker_epoch != epoch:
                return
            self._caught_up = True
            log.info("broker %d caught up with its registration at metadata offset %d",
                     self.config.node_id, self.observer_listener.image.provenance.offset)
        image, changes = self.observer_listener.take_changes()
        try:
            self.replicas.apply_metadata(image, changes)
            self._apply_broker_configs()
        except Exception:
            log.exception("applying metadata offset %d failed", image.provenance.offset)
            raise
        self.groups.on_metadata(image)

    def _apply_broker_configs(self) -> None:
        """Dynamic broker keys that steer broker-wide duties (not a topic's log) take
        effect with the image that carries them."""
        layers = self.core.config_layers

        def num(key: str, default: int) -> int:
            try:
                return int(layers.broker_value(key) or default)
            except ValueError:
                return default      # the controller validates; never crash on a value
        self.logs.reconfigure(LogManagerConfig(
            flush_offset_checkpoint_interval_ms=num("log.flush.offset.checkpoint.interval.ms", 60_000),
            retention_check_interval_ms=num("log.retention.check.interval.ms", 300_000)), self.clock.now_ms())
        self.cleaner.reconfigure(CleanerSettings(
            enable=(layers.broker_value("log.cleaner.enable") or "true").strip().lower() != "false",
            backoff_ms=max(1, num("log.cleaner.backoff.ms", 15_000)),
            dedupe_buffer_size=max(1, num("log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024))))

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        reg = self.core.image.cluster.get(broker_id)
        if reg is None or not reg.endpoints:
            return None
        endpoint = reg.endpoint(self.config.listener_name) or reg.endpoints[0]
        return endpoint.host, endpoint.port

    # ------------------------------------------------------------ stopping

    async def controlled_shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask the controller to move leadership away, then stop (SIGTERM)."""
        await self.lifecycle.controlled_shutdown(timeout_s)
        await self.stop()

    async def stop(self) -> None:
        self.lifecycle.stop()
        self.cleaner.stop()
        self.observer.close()   # its loop checks this: cancel() alone can be swallowed (3.11)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.metrics.process.stop()
        await self.server.stop()
        if self.http is not None:
            await self.http.stop()
        await self.admins.close()
        await self.groups.stop()
        await self.fetchers.close()
        self.controller.close()
        self.heartbeat_channel.close()
        await self.replicas.stop()
        self.storage.close()
