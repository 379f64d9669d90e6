"""The broker's Prometheus metrics, named as Kafka's JMX exporter names Kafka's MBeans
(Strimzi's rules: ``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=t>``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``), so dashboards built
for Kafka read Ketch unchanged. The full list is in docs/operations.md.

Two kinds:

- counted on the request path (``BrokerMetrics``): messages and bytes in and out per
  topic, produce and fetch requests and failures, requests and their total time per API.
  A Produce request's partitions are summed per topic first (``ProduceTally``), so each
  counter takes one add per topic and request (the scraped values are the same as one
  add per partition). They are plain numbers (``_Counter``, ``_Histogram``), exposed
  at scrape time as prometheus_client's Counter and Histogram would expose them, without
  a lock per add; ``ketch.metrics.enable=false`` turns them off (bench/ops.py measures
  what they cost);
- read when Prometheus scrapes: partition and leader counts, under-replicated and
  under-min-ISR partitions, ISR shrinks and expands, purgatory sizes, connections
  (``BrokerStateCollector``); each log's size and offsets, followers' lag
  (``PartitionStateCollector``); consumer-group lag (``GroupLagCollector``,
  ``broker/group_lag.py``). Nothing is kept up to date between scrapes. They name their
  families up front, so a scrape of some series (``/metrics?name[]=...``) reads only the
  collectors that make them.
"""
from __future__ import annotations

import bisect
import time
from typing import Any, Callable, Collection, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from broker.client_metrics_export import ClientMetricsExport
from broker.replica.partition import Role
from broker.replica_manager import ReplicaManager
from clients.http_api.exposition import CONTENT_TYPE, GaugeRows, exposition_pieces
from clients.http_api.process_metrics import ProcessMetrics
from clients.protocol import ApiKey

__all__ = ["BrokerMetrics", "BrokerStateCollector", "ClientMetricsCollector", "GroupLagCollector",
           "PartitionStateCollector", "ProduceTally", "request_name"]

# Kafka's TotalTimeMs, as a histogram in milliseconds (p50/p99 by histogram_quantile).
TOTAL_TIME_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# The stages of the acks=all path (broker.latency_trace): finer at the bottom, where the goal is.
STAGE_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 1000)


def request_name(api_key: int) -> str:
    """Kafka's request label: FETCH -> Fetch, LIST_OFFSETS -> ListOffsets."""
    return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))


class _Counter(Collector):
    """A counter with one label, kept as plain numbers and exposed at scrape time exactly
    as prometheus_client's labelled Counter is (same family, samples and order): its
    inc() takes a lock per add, this one a dict update (the request path calls these
    for every request; the event loop is the only writer)."""

    def __init__(self, name: str, doc: str, label: str, registry: CollectorRegistry) -> None:
        self.name = name
        self.doc = doc
        self.label = label
        self.values: dict[str, float] = {}
        registry.register(self)

    def inc(self, value: str, amount: float = 1) -> None:
        values = self.values
        values[value] = values.get(value, 0) + amount

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.doc, labels=[self.label])
        for value, total in list(self.values.items()):
            family.add_metric([value], total)
        yield family


class _Histogram(Collector):
    """A histogram with one label, kept as plain numbers and exposed as
    prometheus_client's labelled Histogram is (see _Counter)."""

    def __init__(self, name: str, doc: str, label: str, buckets: tuple[float, ...],
                 registry: CollectorRegistry) -> None:
        self.name = name
        self.doc = doc
        self.label = label
        self.bounds = [float(b) for b in buckets]
        self.les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        # label value -> [sum, count of bucket 0, ..., count of +Inf] (not cumulative)
        self.values: dict[str, list[float]] = {}
        registry.register(self)

    def observe(self, value: str, amount: float) -> None:
        sums = self.values.get(value)
        if sums is None:
            sums = self.values[value] = [0.0] * (len(self.les) + 1)
        sums[0] += amount
        sums[1 + bisect.bisect_left(self.bounds, amount)] += 1     # the first bound >= amount

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.doc, labels=[self.label])
        for value, sums in list(self.values.items()):
            cumulative, acc = [], 0.0
            for le, count in zip(self.les, sums[1:]):
                acc += count
                cumulative.append((le, acc))
            family.add_metric([value], cumulative, sums[0])
        yield family


class ProduceTally:
    """One Produce request's partitions summed per topic: [partitions, failed, records,
    record bytes]: a request adds once per topic rather than once per partition."""

    __slots__ = ("topics",)

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}

    def add(self, topic: str, error_code: int, records: int, size: int) -> None:
        sums = self.topics.get(topic)
        if sums is None:
            sums = self.topics[topic] = [0, 0, 0, 0]
        sums[0] += 1
        if error_code:
            sums[1] += 1
        else:
            sums[2] += records
            sums[3] += size


class BrokerMetrics:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        # Collectors that name nothing up front (client-pushed families, counters built at
        # scrape time) still answer a scrape of some names (/metrics?name[]=...).
        self.registry = CollectorRegistry(support_collectors_without_names=True)
        r = self.registry

        def per_topic(name: str, doc: str) -> _Counter:
            return _Counter(f"kafka_server_brokertopicmetrics_{name}", doc, "topic", r)
        self.messages_in = per_topic("messagesin", "Records appended by produce requests")
        self.bytes_in = per_topic("bytesin", "Record bytes received from producers")
        self.bytes_out = per_topic("bytesout", "Record bytes sent to consumers and followers")
        self.produce_requests = per_topic("totalproducerequests", "Produce requests, per partition")
        self.failed_produce = per_topic("failedproducerequests", "Produce requests that failed, per partition")
        self.fetch_requests = per_topic("totalfetchrequests", "Fetch requests, per partition")
        self.failed_fetch = per_topic("failedfetchrequests", "Fetch requests that failed, per partition")
        self.requests = _Counter("kafka_network_requestmetrics_requests", "Requests by API",
                                 "request", r)
        self.total_time = _Histogram("kafka_network_requestmetrics_totaltimems",
                                     "Time from a request's arrival to its response, in ms",
                                     "request", TOTAL_TIME_BUCKETS_MS, r)
        # Observed twice for every follower fetch that brings records: lock-free, as the
        # request times (0.80 -> 0.22 us per observe in-process; the tracer's stages were
        # ~4% of a follower's CPU in py-spy, the histogram's observe ~1.7%).
        self.stage_time = _Histogram("ketch_replication_stage_ms",
                                     "Sampled batches: time of each stage of the produce -> "
                                     "replicate -> consume path, in ms (broker/latency_trace.py)",
                                     "stage", STAGE_BUCKETS_MS, r)
        self.process = ProcessMetrics(r)

    def exposition(self, names: Collection[str] | None = None) -> tuple[Iterator[str], str]:
        """The Prometheus exposition in pieces (``exposition_pieces``; ``names``: only
        those series), its content type."""
        return exposition_pieces(self.registry, names=names), CONTENT_TYPE

    def observe_request(self, request: str, started: float) -> None:
        """One request answered; ``started``: its time.perf_counter() on arrival."""
        if not self.enabled:
            return
        self.requests.inc(request)
        self.total_time.observe(request, (time.perf_counter() - started) * 1000)

    def observe_stage(self, stage: str, ms: float) -> None:
        """One stage of a traced batch (``broker.latency_trace.LatencyTracer``'s observe)."""
        self.stage_time.observe(stage, ms)

    def record_produce(self, tally: ProduceTally) -> None:
        if not self.enabled:
            return
        for topic, (partitions, failed, records, size) in tally.topics.items():
            self.produce_requests.inc(topic, partitions)
            # inc(0) too: a topic's failure counter exists at 0, as Kafka's meters do, so a
            # dashboard's failure rate reads 0 rather than no data.
            self.failed_produce.inc(topic, failed)
            if failed < partitions:
                self.messages_in.inc(topic, records)
                self.bytes_in.inc(topic, size)

    def record_fetch(self, topic: str, error_code: int, size: int) -> None:
        if not self.enabled:
            return
        self.fetch_requests.inc(topic)
        self.failed_fetch.inc(topic, 1 if error_code else 0)
        if not error_code:
            self.bytes_out.inc(topic, size)


class _Described(Collector):
    """A collector that names its families up front (``describe``: the same families,
    empty), so that a scrape asking for some series only (``/metrics?name[]=...``, the
    registry's ``restricted_registry``) calls only the collectors that make them: a
    leader count must not cost the per-partition rows at 100k partitions."""

    def describe(self) -> Iterable[Metric]:
        return list(self._families(None))

    def collect(self) -> Iterable[Metric]:
        return self._families(self._read())

    def _read(self) -> Any:
        raise NotImplementedError

    def _families(self, state: Any) -> Iterator[Metric]:
        """The families filled from ``state``; empty ones when ``state`` is None."""
        raise NotImplementedError


class BrokerStateCollector(_Described):
    """Counts read from the broker's state at scrape time: partitions, leaders,
    under-replicated and under-min-ISR partitions, offline replicas and log dirs, ISR
    shrinks and expands, purgatory sizes, connections, the applied metadata offset."""

    def __init__(self, core: ReplicaManager, purgatory_sizes: Callable[[], tuple[int, int]],
                 connections: Callable[[], int], metadata_offset: Callable[[], int]) -> None:
        """``purgatory_sizes()``: (produce, fetch)."""
        self.core = core
        self.purgatory_sizes = purgatory_sizes
        self.connections = connections
        self.metadata_offset = metadata_offset

    def _read(self) -> dict[str, Any]:
        core = self.core
        partitions = leaders = urp = under_min = 0
        for tp, hosted in core.partitions.items():
            partitions += 1
            replica = hosted.replica
            if replica.role is not Role.LEADER:
                continue
            leaders += 1
            if len(replica.isr) < len(replica.replicas):
                urp += 1
            if len(replica.isr) < core.min_insync_replicas(tp.topic):
                under_min += 1
        return {"partitions": partitions, "leaders": leaders, "urp": urp, "under_min": under_min,
                "offline": len(core.offline_partitions), "offline_dirs": len(core.logs.offline_dirs),
                "shrinks": core.isr_shrinks, "expands": core.isr_expands,
                "purgatory": self.purgatory_sizes(), "connections": self.connections(),
                "metadata_offset": self.metadata_offset()}

    def _families(self, state: dict[str, Any] | None) -> Iterator[Metric]:
        def value(key: str) -> float | None:
            return None if state is None else state[key]
        rm = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(rm + "partitioncount", "Partitions with a replica on this broker",
                                value=value("partitions"))
        yield GaugeMetricFamily(rm + "leadercount", "Partitions this broker leads",
                                value=value("leaders"))
        yield GaugeMetricFamily(rm + "underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set",
                                value=value("urp"))
        yield GaugeMetricFamily(rm + "underminisrpartitioncount",
                                "Partitions led here whose ISR is below min.insync.replicas",
                                value=value("under_min"))
        yield GaugeMetricFamily(rm + "offlinereplicacount",
                                "Replicas here whose log directory failed (KAFKA_STORAGE_ERROR)",
                                value=value("offline"))
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                "Log directories of this broker taken offline by an I/O error",
                                value=value("offline_dirs"))
        yield CounterMetricFamily(rm + "isrshrinks", "ISR shrinks committed for partitions led here",
                                  value=value("shrinks"))
        yield CounterMetricFamily(rm + "isrexpands", "ISR expansions committed for partitions led here",
                                  value=value("expands"))
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting in a purgatory", labels=["delayedoperation"])
        if state is not None:
            produce, fetch = state["purgatory"]
            purgatory.add_metric(["Produce"], produce)
            purgatory.add_metric(["Fetch"], fetch)
        yield purgatory
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Open client and broker connections", value=value("connections"))
        yield GaugeMetricFamily("kafka_server_metadataloader_lastappliedrecordoffset",
                                "Metadata log offset this broker has applied",
                                value=value("metadata_offset"))


class PartitionStateCollector(_Described):
    """Per replica on this broker, read at scrape time: its log's size, end and start
    offsets and the high watermark; per follower of a partition led here, its lag; the
    largest such lag."""

    def __init__(self, core: ReplicaManager) -> None:
        self.core = core

    def _read(self) -> tuple[list[GaugeRows], int]:
        # Four series per replica (GaugeRows: rows, not a Sample each).
        families = self._rows()
        size, end, start, hw, follower_lag = families
        add_size, add_end, add_start, add_hw = (size.rows.append, end.rows.append,
                                                start.rows.append, hw.rows.append)
        max_lag = 0
        for tp, hosted in self.core.partitions.items():
            topic, index = tp.topic, tp.partition
            log = hosted.log
            add_size((topic, index, log.size_bytes))
            add_end((topic, index, log.log_end_offset))
            add_start((topic, index, log.log_start_offset))
            replica = hosted.replica
            add_hw((topic, index, replica.high_watermark))
            if replica.role is not Role.LEADER:
                continue
            for follower_id, progress in replica.followers.items():
                if progress.log_end_offset < 0:
                    continue
                lag = max(0, log.log_end_offset - progress.log_end_offset)
                max_lag = max(max_lag, lag)
                follower_lag.rows.append((topic, index, follower_id, lag))
        return families, max_lag

    @staticmethod
    def _rows() -> list[GaugeRows]:
        topic_partition = ["topic", "partition"]
        return [GaugeRows("kafka_log_log_size", "Bytes of a partition's log on this broker",
                          topic_partition),
                GaugeRows("kafka_log_log_logendoffset", "A partition's log end offset here",
                          topic_partition),
                GaugeRows("kafka_log_log_logstartoffset", "A partition's log start offset here",
                          topic_partition),
                GaugeRows("kafka_cluster_partition_highwatermark",
                          "A partition's high watermark as this broker knows it", topic_partition),
                GaugeRows("kafka_server_fetcherlagmetrics_consumerlag",
                          "Records a follower is behind this leader's log end (as the leader "
                          "last saw it)", ["topic", "partition", "replica"])]

    def _families(self, state: tuple[list[GaugeRows], int] | None) -> Iterator[Metric]:
        families, max_lag = state if state is not None else (self._rows(), None)
        yield GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "The largest follower lag behind a partition led here, in records",
                                value=max_lag)
        yield from families


class GroupLagCollector(_Described):
    """Consumer-group lag for the groups this broker coordinates (broker/group_lag.py)."""

    def __init__(self, group_lag: Callable[[], dict[tuple[str, str, int], tuple[int, int]]]) -> None:
        """``group_lag()``: (group, topic, partition) -> (committed offset, lag)."""
        self.group_lag = group_lag

    def _read(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        return self.group_lag()

    def _families(self, state: dict[tuple[str, str, int], tuple[int, int]] | None) -> Iterator[Metric]:
        group_lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                      "Log end offset minus committed offset, per group and "
                                      "partition (computed by the group's coordinator)",
                                      labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "A group's committed offset", labels=["consumergroup", "topic", "partition"])
        totals: dict[str, int] = {}
        for (group, topic, partition), (committed, value) in sorted((state or {}).items()):
            group_lag.add_metric([group, topic, str(partition)], value)
            current.add_metric([group, topic, str(partition)], committed)
            totals[group] = totals.get(group, 0) + value
        yield group_lag
        yield current
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag over all partitions",
                                    labels=["consumergroup"])
        for group, total in sorted(totals.items()):
            lag_sum.add_metric([group], total)
        yield lag_sum


class ClientMetricsCollector(Collector):
    """What clients pushed (KIP-714, broker/client_metrics_export.py), read at scrape time,
    and how many pushed points the series bound turned away."""

    def __init__(self, export: ClientMetricsExport) -> None:
        self.export = export

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        yield from self.export.families()
        yield GaugeMetricFamily("kafka_server_clienttelemetry_series",
                                "Series of client-pushed metrics this broker holds",
                                value=self.export.series_count)
        yield CounterMetricFamily("kafka_server_clienttelemetry_droppedpoints",
                                  "Pushed data points not kept (series bound or type clash)",
                                  value=self.export.dropped_points)


class MirrorCollector(Collector):
    """Issue 21: per mirror partition this broker leads, its lag behind the source (source
    HW - local LEO; -1 until known) and its state (1 on the series of the current state)."""

    STATES = ("awaiting_source", "truncating", "fetching", "link_missing")

    def __init__(self, mirrors: Callable[[], list]) -> None:
        self.mirrors = mirrors      # MirrorManager.describe

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily("ketch_mirror_partition_lag",
                                "Records the mirror partition is behind its source's high watermark",
                                labels=["link", "topic", "partition"])
        state = GaugeMetricFamily("ketch_mirror_partition_state",
                                  "1 for the mirror partition's current fetch state",
                                  labels=["link", "topic", "partition", "state"])
        for row in self.mirrors():
            labels = [row["link"], row["topic"], str(row["partition"])]
            lag.add_metric(labels, row["lag"])
            for s in self.STATES:
                state.add_metric([*labels, s], 1 if row["state"] == s else 0)
        yield lag
        yield state
