"""Clients' pushed metrics (KIP-714) as Prometheus series on the broker's /metrics. Pure.

Theory of operation
-------------------
Each accepted push (decoded by ``broker/otlp.py``) updates the series of its client
instance; nothing else does. A series is named from its OTLP metric name: Kafka's
``org.apache.kafka.`` namespace dropped, every character outside ``[a-zA-Z0-9_]`` turned
into ``_``, prefixed ``client_`` (``org.apache.kafka.producer.record.queue.time.avg`` ->
``client_producer_record_queue_time_avg``). Its labels are the point's OTLP attributes
(resource and data point, names made Prometheus-safe the same way) plus
``client_instance_id`` (Kafka's base64 form) and ``client_id``, which win over an
attribute of the same name.

- Gauges and non-monotonic sums are gauges: the last value pushed.
- Monotonic sums are counters. The broker asks for delta temporality (as Kafka does), so
  each push carries the increase since the previous one and the series adds it up; a
  cumulative sum replaces the value.

When an instance terminates, expires or is evicted its series are dropped (``drop``).
At most ``series_max`` series exist; points that would open a series beyond that are
counted in ``dropped_points`` and otherwise ignored, so a client pushing thousands of
per-partition metrics cannot grow the scrape without bound. A name first seen as a
gauge stays a gauge (a point of another kind under it is dropped likewise): one name,
one type, as Prometheus requires.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.otlp import MetricKind, MetricPoint

__all__ = ["ClientMetricsExport", "SERIES_MAX", "prometheus_name"]

SERIES_MAX = 10_000
KAFKA_NAMESPACE = "org.apache.kafka."
PREFIX = "client_"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(otlp_name: str) -> str:
    if otlp_name.startswith(KAFKA_NAMESPACE):
        otlp_name = otlp_name[len(KAFKA_NAMESPACE):]
    return PREFIX + _UNSAFE.sub("_", otlp_name)


def _label_name(key: str) -> str:
    safe = _UNSAFE.sub("_", key) or "_"
    # Prometheus reserves names starting with "__"; and a name may not start with a digit.
    if safe[0].isdigit() or safe.startswith("__"):
        safe = "attr_" + safe.lstrip("_")
    return safe


@dataclass(slots=True)
class _Series:
    counter: bool
    value: float


SeriesKey = tuple[str, tuple[tuple[str, str], ...]]     # (prometheus name, labels)


class ClientMetricsExport:
    def __init__(self, series_max: int = SERIES_MAX) -> None:
        assert series_max >= 0, series_max
        self.series_max = series_max
        self.by_instance: dict[str, dict[SeriesKey, _Series]] = {}
        self.series_count = 0
        # Invariant: every name in kinds is a counter (True) or a gauge (False) in every
        # instance's series.
        self.kinds: dict[str, bool] = {}
        self.dropped_points = 0

    def update(self, client_instance_id: str, client_id: str | None,
               points: Sequence[MetricPoint]) -> None:
        series = self.by_instance.setdefault(client_instance_id, {})
        fixed = (("client_instance_id", client_instance_id), ("client_id", client_id or ""))
        for point in points:
            name = prometheus_name(point.name)
            counter = point.kind is MetricKind.SUM and point.monotonic
            if self.kinds.setdefault(name, counter) != counter:
                self.dropped_points += 1
                continue
            labels = {_label_name(k): v for k, v in point.attributes}
            labels.update(fixed)
            key = (name, tuple(sorted(labels.items())))
            current = series.get(key)
            if current is None:
                if self.series_count >= self.series_max:
                    self.dropped_points += 1
                    continue
                current = series[key] = _Series(counter, 0.0)
                self.series_count += 1
            if point.delta and point.kind is MetricKind.SUM:
                current.value += point.value
            else:
                current.value = point.value

    def drop(self, client_instance_id: str) -> None:
        series = self.by_instance.pop(client_instance_id, None)
        if series is not None:
            self.series_count -= len(series)
        assert self.series_count >= 0, self.series_count
        if not self.by_instance:
            self.kinds.clear()

    def families(self) -> Iterable[Metric]:
        grouped: dict[str, list[tuple[tuple[tuple[str, str], ...], _Series]]] = {}
        for series in self.by_instance.values():
            for (name, labels), s in series.items():
                grouped.setdefault(name, []).append((labels, s))
        for name in sorted(grouped):
            entries = grouped[name]
            doc = "Pushed by clients (KIP-714)"
            family: Metric
            if self.kinds[name]:
                family = CounterMetricFamily(name, doc)     # drops a trailing _total
                for labels, s in entries:
                    family.add_sample(family.name + "_total", dict(labels), s.value)
            else:
                family = GaugeMetricFamily(name, doc)
                for labels, s in entries:
                    family.add_sample(name, dict(labels), s.value)
            yield family
