"""Produce's per-topic counters, summed per request (ProduceTally): the scraped values are
what one add per partition gave, failure counters exist at 0, and a topic whose every
partition failed gets no messages-in / bytes-in series."""
from __future__ import annotations

from broker.metrics import BrokerMetrics, ProduceTally
from clients.protocol.errors import ErrorCode


def _scrape(metrics: BrokerMetrics) -> dict[str, float]:
    text, _ = metrics.exposition()
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("kafka_server_brokertopicmetrics_") and "_total{" in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_one_add_per_topic_scrapes_as_the_partitions_sum() -> None:
    metrics = BrokerMetrics()
    for _ in range(2):                         # two requests
        tally = ProduceTally()
        tally.add("a", ErrorCode.NONE, 3, 100)
        tally.add("a", ErrorCode.NONE, 5, 200)
        tally.add("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, 50)
        tally.add("b", ErrorCode.NONE, 1, 10)
        tally.add("c", ErrorCode.CORRUPT_MESSAGE, 0, 70)
        metrics.record_produce(tally)
    got = _scrape(metrics)
    p = "kafka_server_brokertopicmetrics_"
    assert got[p + 'totalproducerequests_total{topic="a"}'] == 6
    assert got[p + 'failedproducerequests_total{topic="a"}'] == 2
    assert got[p + 'messagesin_total{topic="a"}'] == 16
    assert got[p + 'bytesin_total{topic="a"}'] == 600
    assert got[p + 'failedproducerequests_total{topic="b"}'] == 0     # exists at 0
    assert got[p + 'messagesin_total{topic="b"}'] == 2
    assert got[p + 'failedproducerequests_total{topic="c"}'] == 2
    assert p + 'messagesin_total{topic="c"}' not in got
    assert p + 'bytesin_total{topic="c"}' not in got


def test_disabled_metrics_count_nothing() -> None:
    metrics = BrokerMetrics(enabled=False)
    tally = ProduceTally()
    tally.add("a", ErrorCode.NONE, 3, 100)
    metrics.record_produce(tally)
    assert _scrape(metrics) == {}
