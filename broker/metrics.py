"""The broker's Prometheus metrics (its own registry, served at /metrics)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ketch_broker_requests", "Requests handled", ["api"], registry=self.registry)
        self.produced_bytes = Counter("ketch_broker_produced_bytes", "Record bytes received", registry=self.registry)
        self.fetched_bytes = Counter("ketch_broker_fetched_bytes", "Record bytes served", registry=self.registry)
        self.partitions_led = Gauge("ketch_broker_partitions_led", "Partitions this broker leads", registry=self.registry)
        self.metadata_offset = Gauge("ketch_broker_metadata_offset", "Metadata log offset applied", registry=self.registry)
