"""The broker process: the data-plane core and its shells, wired up (nothing else here).

Lifecycle (KRaft's broker lifecycle, simplified):

1. identify storage: ``meta.properties`` in each log dir names the cluster id, the node id
   and the directory's own ``directory.id`` (KIP-858; written on first start from
   ``ketch.cluster.id``; a mismatch refuses to start, and so does an unusable directory:
   see 7);
2. open the log manager over every log dir (recovering after an unclean stop);
3. register with the active controller (BrokerRegistration: incarnation id, listener,
   rack) and get a broker epoch; start following the metadata log as an observer;
4. heartbeat every ``broker.heartbeat.interval.ms`` with the metadata offset reached; the
   controller unfences the broker once it has caught up, and fences it when heartbeats stop;
5. serve clients; followers fetch from leaders; leaders propose ISR changes;
6. on SIGTERM: controlled shutdown: heartbeat ``want_shut_down`` until the controller has
   moved every leadership away and answers ``should_shut_down``, then stop cleanly (flush,
   checkpoints, clean-shutdown marker).
7. on a log directory failure (an I/O error in a log dir): the replicas there stop and
   answer KAFKA_STORAGE_ERROR, and the broker shuts down in a controlled way, so the
   controller moves their leaderships to in-sync replicas elsewhere before it stops.
   This is the interim, after Kafka's KRaft brokers before 3.7, which had one log dir
   and stopped when it failed. Done of KIP-858: the registration carries the dirs' ids
   (BrokerRegistration LogDirs). Not done: the rest, which keeps the broker up with its
   healthy dirs: BrokerHeartbeat OfflineLogDirs, the controller tracking each replica's
   directory (PartitionRecord Directories, AssignReplicasToDirs) and moving leadership
   off the replicas of an offline dir only. For the same reason a broker does not start
   while a log dir is unusable: repair it or remove it from ``log.dirs``; its replicas
   (out of every ISR since the controlled shutdown) copy their data again. A missing dir
   is created and formatted, as Kafka does, with the same consequence.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import uuid
from typing import Callable

from broker.admin_http import BrokerView
from broker.apis import KafkaApis
from broker.auth_helper import AuthHelper
from broker.auto_topic_creation import AutoTopicCreationManager
from broker.delayed.driver import INDEX_DIR, DelayedDeliveryConfig, DelayedDeliveryDriver
from clients.tiered.factory import remote_storage_from_config
from clients.tiered.remote_storage import RemoteStorageConfigError
from metadata_log.node_config import ConfigError
from broker.tiered.manager import STAGING_DIR as TIERED_STAGING_DIR
from broker.tiered.manager import RemoteLogManager, TieredStorageConfig
from broker.cleaner_driver import CleanerDriver, CleanerSettings
from broker.config import BrokerConfig
from metadata_log.cluster_links import cluster_link, parse_link, source_client_properties
from metadata_log.authorizer import StandardAuthorizer
from broker.controller_channel import ControllerChannel
from broker.controller_endpoints import ControllerEndpoints
from broker.client_quotas import ClientQuotas
from broker.fetch_session import FetchSessionCache
from broker.fetcher import ReplicaFetcherManager
from broker.find_coordinator import (
    FIND_COORDINATOR_VERSIONS, CoordinatorKeyType, CoordinatorTopic, FindCoordinatorHandler,
)
from broker.group.coordinator import GroupConfig
from broker.group.driver import GroupCoordinatorDriver
from broker.group.records import CONSUMER_OFFSETS_TOPIC, partition_for_group
from broker.lifecycle import BrokerLifecycleManager, Registration
from broker.log import FileStorage, LogConfig, LogManager, LogManagerConfig
from broker.metadata_follower import MetadataImageListener, MetadataObserver
from broker.group_lag import GroupLagMonitor
from broker.latency_trace import LatencyTracer
from broker.link_manager import LinkManagerDriver
from broker.client_metrics_export import ClientMetricsExport
from broker.client_telemetry import ClientTelemetryManager
from broker.metrics import (BrokerMetrics, BrokerStateCollector, ClientMetricsCollector, GroupLagCollector,
                            MirrorCollector, PartitionStateCollector)
from broker.mirror.manager import LinkSettings, MirrorManager
from broker.telemetry_driver import ClientTelemetryDriver
from broker.producer_ids import ProducerIdManager
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import ReplicaManager
from broker.txn.channel import BrokerChannel
from broker.txn.coordinator import TransactionConfig
from broker.txn.driver import TransactionCoordinatorDriver
from broker.txn.records import TRANSACTION_STATE_TOPIC, partition_for_transactional_id
from clients.clock import SYSTEM_CLOCK, Clock
from clients.http_api import AdminHttpServer, BrokerAdmins, HttpAuthError, http_security
from clients.loop_stalls import watch_gc_pauses, watch_loop_stalls
from clients.protocol import ApiKey
from clients.protocol.types import parse_uuid_text, random_uuid, uuid_text
from clients.properties import format_properties, load_properties
from metadata_log.config_layers import ConfigLayers
from metadata_log.delta import MetadataChange
from metadata_log.image import EMPTY_IMAGE
from clients.security.client_auth import ClientSecurity, listener_client_properties
from clients.security.listeners import controller_listener
from clients.security.scram import ScramCredential, ScramMechanism
from quorum.network import KafkaServer, ListenerConfigError, listener_security

log = logging.getLogger(__name__)

__all__ = ["Broker"]

META_PROPERTIES = "meta.properties"
# Metadata changes (about one partition each) applied per turn of the event loop: a
# CreateTopics of 1,000 partitions made every broker create 1,000 logs in one go, and
# deltas that piled up meanwhile were applied together, holding the loop (heartbeats,
# fetches, produce) for 1-9 s at 100k partitions (bench/scale.py's stall count).
APPLY_CHANGES_PER_TURN = 250
# Metadata changes applied between two freezes of the garbage collector's survivors
# (Broker._maybe_freeze_gc).
GC_FREEZE_CHANGES = 1000


def _server_assignors(value: str) -> tuple[str, ...]:
    """group.consumer.assignors: short names, or Kafka's class names for the same ones."""
    names = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        name = {"UniformAssignor": "uniform", "RangeAssignor": "range"}.get(
            item.rsplit(".", 1)[-1], item)
        if name not in ("uniform", "range"):
            raise SystemExit(f"group.consumer.assignors: unknown assignor {item!r} "
                             "(Ketch has uniform and range)")
        names.append(name)
    if not names:
        raise SystemExit("group.consumer.assignors is empty")
    return tuple(names)


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
        consumer_group_session_timeout_ms=num("group.consumer.session.timeout.ms", 45_000),
        consumer_group_heartbeat_interval_ms=num("group.consumer.heartbeat.interval.ms", 5_000),
        consumer_group_max_size=num("group.consumer.max.size", 2**31 - 1),
        consumer_group_assignors=_server_assignors(props.get("group.consumer.assignors",
                                                             "uniform,range")),
        consumer_group_migration_policy=props.get(
            "group.consumer.migration.policy", "bidirectional").lower(),
    )


def _transaction_config(config: BrokerConfig) -> TransactionConfig:
    return TransactionConfig(
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
        abort_timed_out_transaction_cleanup_interval_ms=(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
        remove_expired_transaction_cleanup_interval_ms=(
            config.transaction_remove_expired_transaction_cleanup_interval_ms),
        offsets_topic_num_partitions=config.offsets_topic_num_partitions)


def _coordinator_topics(config: BrokerConfig) -> dict[CoordinatorKeyType, CoordinatorTopic]:
    """The coordinators' internal topics, as FindCoordinator creates them on first use."""
    return {
        CoordinatorKeyType.GROUP: CoordinatorTopic(
            CONSUMER_OFFSETS_TOPIC, config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor, partition_for_group,
            (("cleanup.policy", "compact"), ("segment.bytes", str(100 * 1024 * 1024)))),
        CoordinatorKeyType.TRANSACTION: CoordinatorTopic(
            TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor, partition_for_transactional_id,
            (("cleanup.policy", "compact"),
             ("segment.bytes", str(config.transaction_state_log_segment_bytes))),
            min_insync_replicas=config.transaction_state_log_min_isr),
    }


def _directory_id(log_dir: str) -> uuid.UUID:
    """The ``directory.id`` a log dir's meta.properties holds, as a UUID."""
    meta = load_properties(os.path.join(log_dir, META_PROPERTIES))   # not a config
    return parse_uuid_text(meta["directory.id"])


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
        # Issue 22: sampled per-stage latency of the acks=all path, with the metrics.
        tracer = LatencyTracer(self.metrics.observe_stage, enabled=config.metrics_enable)
        self.cluster_id, offline_dirs = self._identify_storage()
        self.directory_ids = tuple(_directory_id(d) for d in config.log_dirs if d not in offline_dirs)
        self.storage = FileStorage()
        # Until the metadata image arrives, logs open with the static topic defaults.
        static_layers = ConfigLayers(EMPTY_IMAGE.configs, config.node_id, properties)
        default_log_config = LogConfig.from_properties(static_layers.topic_config(""))
        # The cyclic GC is paused while the logs load: what loading makes stays, and
        # collections over the growing heap were a third of it (3.5 of 10.5 s for 100,000
        # logs). The survivors are then frozen, as the metadata's are (_maybe_freeze_gc).
        gc.disable()
        try:
            self.logs, reports = LogManager.open(self.storage, config.log_dirs, now_ms=now_ms(),
                                                 default_config=default_log_config,
                                                 offline_dirs=offline_dirs)
        finally:
            gc.enable()
        gc.freeze()
        if self.logs.offline_dirs:
            # The interim of step 7 at start-up: the controller cannot be told which
            # replicas are unusable here (KIP-858's OfflineLogDirs), so it could make this
            # broker lead one it cannot serve.
            self.logs.shutdown()
            raise SystemExit(f"log director{'ies' if len(self.logs.offline_dirs) > 1 else 'y'} "
                             f"{', '.join(sorted(self.logs.offline_dirs))} unusable (see the "
                             "log): repair it, or remove it from log.dirs (its replicas then "
                             "copy their data from the other replicas again)")
        # Set when a log dir fails: the process entry point then shuts down (step 7).
        self.log_dir_failed = asyncio.Event()
        for key, report in reports.items():
            if report.dropped_anything:
                log.warning("%s-%d: recovery dropped %d bytes", key[0], key[1], report.truncated_bytes)
        # How this broker logs in to the controllers' listener (Kafka's
        # controller.listener.names, its protocol, sasl.mechanism.controller.protocol).
        controller_name, controller_protocol = controller_listener(properties)
        try:
            controller_security = ClientSecurity.from_config(listener_client_properties(
                properties, controller_name, controller_protocol,
                "sasl.mechanism.controller.protocol").get)
        except ValueError as e:
            raise SystemExit(f"controller listener {controller_name}: {e}") from None
        # Where the controllers are, as configured and then as the quorum describes its
        # voters (KIP-853): one home for the three channels below.
        self.controller_endpoints = ControllerEndpoints(
            voters=config.controller_voters, bootstrap_servers=config.controller_bootstrap_servers)
        self.controller = ControllerChannel(self.controller_endpoints, f"broker-{config.node_id}",
                                            security=controller_security,
                                            listener_name=controller_name)
        # Heartbeats on a connection of their own: the controller fences a broker soon after
        # that connection closes (ketch.broker.disconnect.fence.ms), so it must close only
        # when this process dies, never because a slow forwarded admin request or a slow
        # heartbeat timed out (the session timeout covers a controller that never answers).
        self.heartbeat_channel = ControllerChannel(
            self.controller_endpoints, f"broker-{config.node_id}-heartbeat",
            on_connection_lost=lambda: self.lifecycle.connection_lost(), security=controller_security,
            listener_name=controller_name, keep_on_timeout=True)
        self.observer_listener = MetadataImageListener(self._schedule_apply)
        self.observer = MetadataObserver(self.controller_endpoints.addresses, self.observer_listener,
                                         replica_id=config.node_id,
                                         fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
                                         security=controller_security)
        self.lifecycle = BrokerLifecycleManager(
            Registration(config.node_id, self.cluster_id, config.listeners, config.rack,
                         config.heartbeat_interval_ms, self.directory_ids),
            self.heartbeat_channel,
            metadata_offset=lambda: max(self.observer.fetch_offset - 1, -1),
            on_registered=self._on_registered,
            previous_broker_epoch=self.logs.previous_broker_epoch)
        self.core = ReplicaManager(config.node_id, self.logs, properties, config.replica_lag_time_max_ms,
                                   rack_aware_reads=config.rack_aware_reads)
        self.replicas = ReplicaDriver(self.core, self.controller, now_ms,
                                      broker_epoch=lambda: self.lifecycle.broker_epoch,
                                      on_log_dir_failure=self._on_log_dir_failure, tracer=tracer)
        # How this broker logs in to the other brokers' (and its own) inter-broker listener.
        inter_broker = next(s for s in config.listeners if s.name == config.listener_name)
        inter_broker_client = listener_client_properties(
            properties, inter_broker.name, inter_broker.security_protocol,
            "sasl.mechanism.inter.broker.protocol")
        try:
            inter_broker_security = ClientSecurity.from_config(inter_broker_client.get)
        except ValueError as e:
            raise SystemExit(f"inter-broker listener {inter_broker.name}: {e}") from None
        self.fetchers = ReplicaFetcherManager(self.replicas, config.node_id, self._endpoint_of,
                                              broker_epoch=lambda: self.lifecycle.broker_epoch,
                                              fetch_max_wait_ms=config.replica_fetch_wait_max_ms,
                                              security=inter_broker_security, tracer=tracer)
        # Issue 21: the leaders of active mirror partitions fetch from the source clusters.
        self.mirrors = MirrorManager(self.replicas, self._link_settings, f"ketch-broker-{config.node_id}")
        # The last stable offset bounds cleaning: never at or past an ongoing transaction.
        self.cleaner = CleanerDriver(self.logs, self.storage, self.core.last_stable_offset_of, now_ms,
                                     last_records_of=self.core.last_records_of)
        self._apply_broker_configs()
        self.topic_creation = AutoTopicCreationManager(
            self.controller, lambda: self.core.image, self.replicas.wait_for_image,
            config.num_partitions, config.default_replication_factor)
        producer_ids = ProducerIdManager(config.node_id, self.controller)
        self.transactions = TransactionCoordinatorDriver(
            config.node_id, _transaction_config(config), self.replicas,
            BrokerChannel(config.node_id, self._endpoint_of, config.request_timeout_ms,
                          inter_broker_security),
            producer_ids, lambda: self.lifecycle.broker_epoch, config.request_timeout_ms, now_ms,
            verification_enable=lambda: (self.core.config_layers.broker_value(
                "transaction.partition.verification.enable") or "true").lower() == "true")
        self.groups = GroupCoordinatorDriver(
            _group_config(config, properties), self.replicas, config.request_timeout_ms, now_ms, rng,
            verify_txn_offset_commit=self.transactions.verify_txn_offset_commit)
        self.find_coordinator = FindCoordinatorHandler(
            self.replicas, self.topic_creation, config.listener_name, _coordinator_topics(config))
        coordinator_apis = {
            **self.groups.apis(), **self.transactions.apis(),
            ApiKey.FIND_COORDINATOR: (self.find_coordinator.handle_find_coordinator,
                                      FIND_COORDINATOR_VERSIONS)}
        self.client_metrics = ClientMetricsExport()
        self.telemetry = ClientTelemetryDriver(
            ClientTelemetryManager(self._telemetry_max_bytes(), random.Random(rng.getrandbits(64))),
            self.client_metrics, lambda: self.core.image.configs, now_ms)
        # Delayed delivery (issue 18): its clients log in to this broker's own listener.
        self.delayed = DelayedDeliveryDriver(
            config.node_id, DelayedDeliveryConfig(properties),
            lambda: f"{config.advertised_host}:{self.server.port}", inter_broker_client,
            lambda: self.core.image, self.topic_creation,
            os.path.join(config.log_dirs[0], INDEX_DIR), now_ms, random.Random(rng.getrandbits(64)),
            self.replicas)
        # Tiered storage (issue 18's historical archive, KIP-405), when switched on.
        tiered_config = TieredStorageConfig(properties)
        self.tiered: RemoteLogManager | None = None
        if tiered_config.enable:
            try:
                remote_storage = remote_storage_from_config(properties)
            except (ConfigError, RemoteStorageConfigError) as e:
                raise SystemExit(str(e)) from None
            self.tiered = RemoteLogManager(
                config.node_id, tiered_config, remote_storage,
                lambda: f"{config.advertised_host}:{self.server.port}", inter_broker_client,
                lambda: self.core.image, self.topic_creation, self.replicas.local_log,
                self.core.high_watermark_of, os.path.join(config.log_dirs[0], TIERED_STAGING_DIR),
                now_ms, random.Random(rng.getrandbits(64)))
        auth = AuthHelper(None if config.authorizer is None else StandardAuthorizer(config.authorizer),
                          lambda: self.core.image.acls)
        self.apis = KafkaApis(config, self.cluster_id, self.replicas, self.controller, self.topic_creation,
                              producer_ids, lambda: self.lifecycle.broker_epoch, self.metrics,
                              coordinator_apis,
                              FetchSessionCache(config.fetch_session_cache_slots,
                                                rng=random.Random(rng.getrandbits(64))),
                              ClientQuotas(), self.telemetry, self.transactions,
                              auth, self.delayed, self.tiered)
        # One server per listener; SCRAM verifiers come from the newest applied image.
        try:
            self.servers = {
                spec.name: KafkaServer(
                    self.apis, spec.host, spec.port, frame_bytes_max=config.socket_request_max_bytes,
                    # TLS encrypts in user space: sendfile cannot carry a TLS stream.
                    use_sendfile=not spec.security_protocol.uses_tls,
                    listener=listener_security(spec, properties, self._scram_credential))
                for spec in config.listeners}
        except ListenerConfigError as e:
            raise SystemExit(str(e)) from None
        self.server = self.servers[config.listener_name]      # the inter-broker listener
        # One admin client, through this broker's own listener, for the HTTP API and the
        # group-lag metrics.
        self.admins = BrokerAdmins(lambda: f"{config.advertised_host}:{self.server.port}",
                                   f"ketch-broker-{config.node_id}-admin", inter_broker_client)
        self.group_lag = GroupLagMonitor(self.groups.core.committed_offsets,
                                         self.admins.cluster_admin, config.group_lag_interval_ms)
        # Cluster links (issue 21): run by the lowest-id active broker only; the others idle.
        self.link_manager = LinkManagerDriver(config.node_id, lambda: self.core.image,
                                              self.admins.cluster_admin, clock.now_ms,
                                              f"ketch-broker-{config.node_id}")
        self.metrics.registry.register(BrokerStateCollector(
            self.core, lambda: (self.replicas.produce_purgatory_size, self.replicas.fetch_purgatory_size),
            lambda: sum(s.connection_count for s in self.servers.values()),
            lambda: self.core.image.provenance.offset))
        self.metrics.registry.register(PartitionStateCollector(self.core))
        self.metrics.registry.register(GroupLagCollector(self.group_lag.snapshot))
        self.metrics.registry.register(ClientMetricsCollector(self.client_metrics))
        self.metrics.registry.register(MirrorCollector(self.mirrors.describe))
        try:
            # Logins by the same users as the listeners (the inter-broker listener's PLAIN
            # table, the image's SCRAM credentials), ACLs by the same authorizer.
            http_sec = http_security(properties, config.listener_name, self._scram_credential,
                                     auth.authorize)
        except HttpAuthError as e:
            raise SystemExit(f"HTTP admin API: {e}") from None
        self.http = (AdminHttpServer(BrokerView(config.node_id, self.core, self._lifecycle_state,
                                                self.mirrors.describe),
                                     self.admins, self.metrics.exposition, config.listener_host,
                                     config.http_port, link_status=self.link_manager.describe,
                                     security=http_sec)
                     if config.http_port >= 0 else None)
        self._tasks: list[asyncio.Task] = []
        self._apply_scheduled = False
        self._unapplied: list[MetadataChange] | None = None    # of a delta applied in part
        self._stop_gc_watch: Callable[[], None] = lambda: None
        self._changes_since_gc_freeze = 0
        self._caught_up = False

    # ------------------------------------------------------------ storage identity

    def _identify_storage(self) -> tuple[str, list[str]]:
        """The cluster id every log dir agrees on, and the dirs that could not be read
        (the broker then refuses to start: step 7). Each dir's
        meta.properties is Kafka's version 1 with ``directory.id`` (KIP-858)."""
        wanted = self.properties.get("ketch.cluster.id")
        found: dict[str, dict[str, str]] = {}
        offline: list[str] = []
        for log_dir in self.config.log_dirs:
            path = os.path.join(log_dir, META_PROPERTIES)
            try:
                os.makedirs(log_dir, exist_ok=True)
                if os.path.exists(path):
                    found[log_dir] = load_properties(path)
            except OSError as e:
                log.error("log directory %s is offline: %s", log_dir, e)
                offline.append(log_dir)
        cluster_ids = {meta.get("cluster.id") for meta in found.values()}
        if wanted:
            cluster_ids.add(wanted)
        for log_dir, meta in found.items():
            path = os.path.join(log_dir, META_PROPERTIES)
            if int(meta.get("node.id", "-1")) != self.config.node_id:
                raise SystemExit(f"{path}: node.id {meta.get('node.id')} is not this broker's "
                                 f"{self.config.node_id}; refusing to start on another node's data")
            if len(cluster_ids) > 1:
                raise SystemExit(f"{path}: cluster.id {meta.get('cluster.id')} differs from "
                                 f"{'ketch.cluster.id ' + wanted if wanted else 'another log dir'}; "
                                 "refusing to start")
        if not cluster_ids:
            raise SystemExit(f"{', '.join(self.config.log_dirs)}: no meta.properties and "
                             "ketch.cluster.id is not set: format the storage first (ketch up does it)")
        cluster_id = cluster_ids.pop()
        assert cluster_id is not None
        for log_dir in self.config.log_dirs:
            if log_dir in offline or "directory.id" in found.get(log_dir, {}):
                continue
            try:
                # New, or formatted before KIP-858 (no directory.id): Kafka adds one too.
                self._format_dir(log_dir, cluster_id)
            except OSError as e:
                log.error("log directory %s is offline: formatting failed: %s", log_dir, e)
                offline.append(log_dir)
        return cluster_id, offline

    def _format_dir(self, log_dir: str, cluster_id: str) -> None:
        path = os.path.join(log_dir, META_PROPERTIES)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(format_properties({"version": "1", "cluster.id": cluster_id,
                                       "node.id": str(self.config.node_id),
                                       "directory.id": uuid_text(random_uuid())}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # ------------------------------------------------------------ running

    async def start(self) -> None:
        for name, server in self.servers.items():
            port = await server.start()
            log.info("broker %d listening on %s:%d (%s, %s)", self.config.node_id, server.host, port,
                     name, server.listener.security_protocol.name)
        if self.http is not None:
            http_port = await self.http.start()
            log.info("broker %d HTTP admin API and /metrics on %s:%d", self.config.node_id,
                     self.config.listener_host, http_port)
        loop = asyncio.get_running_loop()
        self.replicas.start(self.fetchers.fetch_from)
        self.groups.start()
        self.transactions.start()
        self.metrics.process.start()
        self._tasks = [loop.create_task(self.observer.run(), name="metadata-observer"),
                       loop.create_task(self.controller.follow_voters(), name="controller-voters"),
                       loop.create_task(self.lifecycle.run(), name="heartbeats"),
                       loop.create_task(self.cleaner.run(), name="log-cleaner"),
                       loop.create_task(self.group_lag.run(), name="group-lag"),
                       loop.create_task(self.link_manager.run(), name="link-manager"),
                       loop.create_task(self.telemetry.run(), name="client-telemetry-expiry"),
                       loop.create_task(watch_loop_stalls(), name="loop-stalls")]
        self._stop_gc_watch = watch_gc_pauses()

    @property
    def port(self) -> int:
        return self.server.port

    def _lifecycle_state(self) -> dict:
        return {"cluster_id": self.cluster_id, "broker_epoch": self.lifecycle.broker_epoch,
                "fenced": self.lifecycle.fenced, "caught_up": self._caught_up,
                "rack": self.config.rack}

    def _on_registered(self) -> None:
        # The clean-shutdown marker will carry this epoch (KIP-966's previous broker epoch).
        self.logs.broker_epoch = self.lifecycle.broker_epoch
        self._schedule_apply()

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
        if self._unapplied is not None:
            # The rest of a big delta goes before what came since (None: a snapshot
            # loaded since, which the whole image is applied for).
            changes = None if changes is None else self._unapplied + changes
            self._unapplied = None
        if changes is not None and len(changes) > APPLY_CHANGES_PER_TURN:
            changes, self._unapplied = changes[:APPLY_CHANGES_PER_TURN], changes[APPLY_CHANGES_PER_TURN:]
        try:
            self.replicas.apply_metadata(image, changes)
            self._apply_broker_configs()
        except Exception:
            log.exception("applying metadata offset %d failed", image.provenance.offset)
            raise
        self._maybe_freeze_gc(len(changes) if changes is not None else len(self.core.partitions))
        if self._unapplied is not None:
            # The next turn of the event loop applies more; the components below see the
            # image once the replicas hold all of it (a coordinator never looks for the
            # log of a partition not created yet).
            self._schedule_apply()
            return
        self.groups.on_metadata(image)
        self.transactions.on_metadata(image)
        self.delayed.on_metadata(image)
        if self.tiered is not None:
            self.tiered.on_metadata(image)
        self.mirrors.on_metadata()

    def _maybe_freeze_gc(self, changes: int) -> None:
        """Keep what the metadata built out of the cyclic GC's full collections, which
        walk every tracked object while holding the GIL: at 100k partitions a broker's
        took 0.6-2.5 s each, 30-36 s in all while the partitions were created (the
        controllers do the same for their image: quorum/server.py). After every
        GC_FREEZE_CHANGES changes applied, one full collection frees the cycles that are
        garbage now (it walks only what was made since the last freeze), then the
        survivors move to the permanent generation (gc.freeze), where refcounting still
        frees them. The cost: a cycle that becomes garbage after it was frozen is never
        collected."""
        self._changes_since_gc_freeze += changes
        if self._changes_since_gc_freeze >= GC_FREEZE_CHANGES:
            self._changes_since_gc_freeze = 0
            gc.collect()
            gc.freeze()

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

    def _telemetry_max_bytes(self) -> int:
        # Read-only in Kafka (server.properties); the catalogue validates it.
        try:
            return max(1, int(self.core.config_layers.broker_value("telemetry.max.bytes") or 1048576))
        except ValueError:
            raise SystemExit("telemetry.max.bytes must be an integer") from None

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.core.image.scram.get(user, mechanism.wire_type)

    def _link_settings(self, name: str) -> LinkSettings | None:
        """How to reach cluster link ``name``'s source, from the applied image."""
        configs = cluster_link(self.core.image, name)
        if configs is None:
            return None
        link, problem = parse_link(name, configs)
        if link is None:
            log.error("cluster link %s unusable: %s", name, problem)
            return None
        props = source_client_properties(configs)
        try:
            security = ClientSecurity.from_config(props.get)
        except ValueError as e:
            log.error("cluster link %s: %s", name, e)
            return None
        servers = tuple((host, int(port)) for host, _, port in
                        (s.rpartition(":") for s in link.bootstrap_servers))
        return LinkSettings(servers, security, link.metadata_max_age_ms, tuple(sorted(configs.items())))

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        reg = self.core.image.cluster.get(broker_id)
        if reg is None or not reg.endpoints:
            return None
        endpoint = reg.endpoint(self.config.listener_name) or reg.endpoints[0]
        return endpoint.host, endpoint.port

    # ------------------------------------------------------------ stopping

    def _on_log_dir_failure(self, log_dir: str) -> None:
        # The interim of step 7: the entry point answers with a controlled shutdown.
        log.error("broker %d: log directory %s failed; shutting down in a controlled way so "
                  "that leadership moves to the other replicas (KIP-858 would keep the "
                  "broker up; not done yet)", self.config.node_id, log_dir)
        self.log_dir_failed.set()

    async def controlled_shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask the controller to move leadership away, then stop (SIGTERM)."""
        await self.lifecycle.controlled_shutdown(timeout_s)
        await self.stop()

    async def stop(self) -> None:
        self._stop_gc_watch()
        self.lifecycle.stop()
        self.cleaner.stop()
        self.telemetry.stop()
        self.observer.close()   # its loop checks this: cancel() alone can be swallowed (3.11)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.metrics.process.stop()
        await self.delayed.stop()       # its clients talk to this broker's own listener
        if self.tiered is not None:
            await self.tiered.stop()        # so do these
        for server in self.servers.values():
            await server.stop()
        if self.http is not None:
            await self.http.stop()
        await self.admins.close()
        await self.groups.stop()
        await self.transactions.stop()
        await self.fetchers.close()
        await self.mirrors.close()
        self.controller.close()
        self.heartbeat_channel.close()
        await self.replicas.stop()
        self.storage.close()
