"""A controller's side of the HTTP admin API and its Prometheus metrics.

``ControllerView`` is what only this controller knows, for ``clients.http_api``: its role
in the quorum, its metadata image's view of brokers and partitions, its newest snapshot.
``ControllerStateCollector`` reads the quorum and the image at scrape time, under the
names Kafka's KRaft controllers export through the JMX exporter
(``kafka_controller_kafkacontroller_*``, ``kafka_server_raftmetrics_*``); see
docs/operations.md for the list. As in Kafka, the counts only the active controller keeps
(offline partitions, the active controller count itself) are 0 on a standby.
"""
from __future__ import annotations

import time
from typing import Any, Collection, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from clients.http_api.auth import Caller
from clients.http_api.exposition import CONTENT_TYPE, exposition_pieces
from clients.http_api.process_metrics import ProcessMetrics
from clients.protocol.acls import AclOperation, AclResourceType
from clients.security.scram import ScramCredential, ScramMechanism
from clients.types import TopicPartition
from metadata_log.authorizer import StandardAuthorizer
from metadata_log.cluster_view import broker_states, health_report
from metadata_log.config_layers import ConfigLayers
from metadata_log.image import EMPTY_IMAGE, MetadataImage
from quorum.port import MetadataQuorum
from quorum.server import ControllerDriver

__all__ = ["ControllerAccess", "ControllerMetrics", "ControllerView"]

COMMIT_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


def _image(driver: ControllerDriver) -> MetadataImage:
    return driver.controller.image if driver.controller is not None else EMPTY_IMAGE


class ControllerAccess:
    """Who may use this controller's HTTP API: the SCRAM users and the ACLs of its
    metadata image, decided by its authorizer (none: everyone may do everything)."""

    def __init__(self, driver: ControllerDriver, authorizer: StandardAuthorizer | None) -> None:
        self.driver = driver
        self.authorizer = authorizer

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return _image(self.driver).scram.get(user, mechanism.wire_type)

    def authorize(self, caller: Caller, operation: AclOperation, resource_type: AclResourceType,
                  name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(_image(self.driver).acls, caller.principal, caller.host,
                                         operation, resource_type, name)


class ControllerView:
    role = "controller"

    def __init__(self, node_id: int, cluster_id: str | None, quorum: MetadataQuorum,
                 driver: ControllerDriver, properties: Mapping[str, str]) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.quorum = quorum
        self.driver = driver
        self.properties = dict(properties)

    def _layers(self, image: MetadataImage) -> ConfigLayers:
        return ConfigLayers(image.configs, None, self.properties)

    def identity(self) -> dict[str, Any]:
        leader = self.quorum.leader
        return {"cluster_id": self.cluster_id, "metadata_offset": _image(self.driver).provenance.offset,
                "active": self.quorum.is_active, "quorum_leader_id": leader.leader_id,
                "quorum_epoch": leader.epoch, "high_watermark": self.quorum.log.high_watermark}

    def not_ready(self) -> str | None:
        if self.quorum.leader_id < 0:
            return "the metadata quorum has no leader (an election is on)"
        return None

    def brokers(self) -> list[dict[str, Any]]:
        return broker_states(_image(self.driver))

    def health(self, problems_max: int) -> dict[str, Any]:
        image = _image(self.driver)
        return health_report(image, self._layers(image), problems_max)

    def has_topic(self, name: str) -> bool:
        return _image(self.driver).topics.get(name) is not None

    def local_replicas(self) -> Mapping[TopicPartition, Mapping[str, Any]]:
        return {}       # a controller hosts no partition

    def mirrors(self) -> list[Mapping[str, Any]]:
        return []       # nor leads a mirror partition

    def snapshot(self) -> dict[str, Any] | None:
        snap = self.quorum.log.snapshot
        if snap is None:
            return None
        return {"end_offset": snap.end_offset, "epoch": snap.epoch,
                "taken_at_ms": self.driver.snapshot_time_ms}

    def live_broker_endpoints(self) -> list[str]:
        out = []
        for b in _image(self.driver).cluster.brokers.values():
            if not b.fenced and b.endpoints:
                out.append(f"{b.endpoints[0].host}:{b.endpoints[0].port}")
        return out


class ControllerStateCollector(Collector):
    def __init__(self, quorum: MetadataQuorum, driver: ControllerDriver,
                 connections: Any) -> None:
        self.quorum = quorum
        self.driver = driver
        self.connections = connections

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        kc = "kafka_controller_kafkacontroller_"
        raft = "kafka_server_raftmetrics_"
        active = self.quorum.is_active
        image = _image(self.driver)
        fenced = sum(1 for b in image.cluster.brokers.values() if b.fenced)
        registered = len(image.cluster.brokers)
        offline = sum(1 for t in image.topics.by_id.values() for p in t.partitions.values()
                      if not p.has_leader()) if active else 0
        imbalance = sum(1 for t in image.topics.by_id.values() for p in t.partitions.values()
                        if p.has_leader() and p.leader != p.preferred_leader) if active else 0
        yield GaugeMetricFamily(kc + "activecontrollercount", "1 on the active controller",
                                value=1 if active else 0)
        yield GaugeMetricFamily(kc + "activebrokercount", "Registered brokers not fenced",
                                value=registered - fenced)
        yield GaugeMetricFamily(kc + "fencedbrokercount", "Registered brokers fenced", value=fenced)
        yield GaugeMetricFamily(kc + "globaltopiccount", "Topics", value=len(image.topics.by_id))
        yield GaugeMetricFamily(kc + "globalpartitioncount", "Partitions",
                                value=image.topics.partition_count())
        yield GaugeMetricFamily(kc + "offlinepartitionscount",
                                "Partitions without a leader (active controller only)", value=offline)
        yield GaugeMetricFamily(kc + "preferredreplicaimbalancecount",
                                "Partitions not led by their preferred replica (active controller only)",
                                value=imbalance)
        yield GaugeMetricFamily(kc + "lastappliedrecordoffset",
                                "Offset of the newest metadata record applied to the image",
                                value=image.provenance.offset)
        yield GaugeMetricFamily(kc + "lastcommittedrecordoffset",
                                "Offset of the newest committed metadata record",
                                value=self.quorum.last_committed_offset)
        yield GaugeMetricFamily(kc + "metadataerrorcount", "Committed batches that failed to replay",
                                value=self.driver.replay_errors)
        yield GaugeMetricFamily(raft + "current_leader", "The quorum leader's id (-1: none)",
                                value=self.quorum.leader_id)
        yield GaugeMetricFamily(raft + "current_epoch", "The quorum epoch", value=self.quorum.epoch)
        yield GaugeMetricFamily(raft + "high_watermark", "The metadata log's high watermark",
                                value=self.quorum.log.high_watermark)
        yield CounterMetricFamily(raft + "append_records", "Records this controller appended as leader",
                                  value=self.driver.records_appended)
        yield CounterMetricFamily(raft + "commit_records", "Records committed and replayed here",
                                  value=self.driver.records_committed)
        yield CounterMetricFamily(raft + "leader_changes", "Quorum leader changes this controller saw",
                                  value=self.driver.leader_changes)
        # Kafka counts a controller's metadata log flushes under LogFlushStats, too.
        syncs, sync_seconds = self.quorum.journal_syncs
        yield SummaryMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                  "Raft journal fdatasyncs on this controller, and their ms",
                                  count_value=syncs, sum_value=sync_seconds * 1000)
        snap = self.quorum.log.snapshot
        yield GaugeMetricFamily("kafka_server_snapshotemitter_latestsnapshotgeneratedbytes",
                                "Bytes of the newest metadata snapshot",
                                value=0 if snap is None else sum(len(r) for r in snap.records))
        taken = self.driver.snapshot_time_ms
        yield GaugeMetricFamily("kafka_server_snapshotemitter_latestsnapshotgeneratedagems",
                                "Age of the newest snapshot this controller took (-1: none yet)",
                                value=-1 if taken is None else int(time.time() * 1000) - taken)
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Open connections to this controller's listener",
                                value=self.connections())


class ControllerMetrics:
    def __init__(self, quorum: MetadataQuorum, driver: ControllerDriver, connections: Any) -> None:
        # ControllerStateCollector names nothing up front; it still answers a scrape of
        # some names (/metrics?name[]=...).
        self.registry = CollectorRegistry(support_collectors_without_names=True)
        self.commit_latency = Histogram(
            "kafka_server_raftmetrics_commit_latency_ms",
            "Time from appending metadata records to their commit, on the active controller",
            buckets=COMMIT_BUCKETS_MS, registry=self.registry)
        driver.observe_commit_ms = self.commit_latency.observe
        self.registry.register(ControllerStateCollector(quorum, driver, connections))
        self.process = ProcessMetrics(self.registry)

    def exposition(self, names: Collection[str] | None = None) -> tuple[Iterator[str], str]:
        """The Prometheus exposition in pieces (``exposition_pieces``; ``names``: only
        those series), its content type."""
        return exposition_pieces(self.registry, names=names), CONTENT_TYPE
