"""Process metrics every Ketch node exports: CPU seconds, resident memory and open file
descriptors (prometheus_client's process collector: ``process_*``, the names every
Prometheus dashboard knows) and the asyncio event loop's lag, the first sign of a node too
busy to answer in time."""
from __future__ import annotations

import asyncio
import time

from prometheus_client import (
    CollectorRegistry, Gauge, Histogram, ProcessCollector, disable_created_metrics,
)

__all__ = ["ProcessMetrics"]

# No `*_created` series beside every counter and histogram: Kafka's exporters have none, and
# at 10,000 partitions they would only add to every scrape.
disable_created_metrics()

LAG_PROBE_INTERVAL_S = 0.5


class ProcessMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        ProcessCollector(registry=registry)
        self.loop_lag = Gauge("ketch_event_loop_lag_seconds",
                              "How late the event loop last ran a timer that was due", registry=registry)
        self.loop_lag_histogram = Histogram(
            "ketch_event_loop_lag_distribution_seconds", "Event loop lag, sampled every 0.5 s",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5), registry=registry)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._probe(), name="event-loop-lag")

    async def _probe(self) -> None:
        while True:
            due = time.monotonic() + LAG_PROBE_INTERVAL_S
            await asyncio.sleep(LAG_PROBE_INTERVAL_S)
            lag = max(0.0, time.monotonic() - due)
            self.loop_lag.set(lag)
            self.loop_lag_histogram.observe(lag)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
