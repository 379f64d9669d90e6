"""Produce's per-topic counters, summed per request (ProduceTally): the scraped values are
what one add per partition gave, failure counters exist at 0, and a topic whose every
partition failed gets no messages-in / bytes-in series."""
from __future__ import annotations

from broker.metrics import BrokerMetrics, ProduceTally
from clients.protocol.errors import ErrorCode


def _scrape(metrics: BrokerMetrics) -> dict[str, float]:
    pieces, _ = metrics.exposition()
    out = {}
    for line in "".join(pieces).splitlines():
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


def test_request_path_metrics_scrape_as_prometheus_client_counters_and_histograms() -> None:
    """The plain-number counters and histogram give the exposition prometheus_client's
    labelled Counter and Histogram give for the same adds (names, help, samples, order)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram

    from broker.metrics import STAGE_BUCKETS_MS, TOTAL_TIME_BUCKETS_MS
    from clients.http_api.exposition import text_exposition

    metrics = BrokerMetrics()
    reference = CollectorRegistry()
    docs = {}
    for counter in (metrics.messages_in, metrics.bytes_in, metrics.bytes_out, metrics.produce_requests,
                    metrics.failed_produce, metrics.fetch_requests, metrics.failed_fetch):
        docs[counter.name] = Counter(counter.name, counter.doc, ["topic"], registry=reference)
    requests = Counter("kafka_network_requestmetrics_requests", "Requests by API", ["request"],
                       registry=reference)
    total_time = Histogram("kafka_network_requestmetrics_totaltimems",
                           "Time from a request's arrival to its response, in ms", ["request"],
                           buckets=TOTAL_TIME_BUCKETS_MS, registry=reference)
    stage_time = Histogram("ketch_replication_stage_ms", metrics.stage_time.doc, ["stage"],
                           buckets=STAGE_BUCKETS_MS, registry=reference)
    for stage, ms in (("leader_append", 0.04), ("follower_fetch", 0.5), ("leader_append", 7.0),
                      ("total", 2000.0)):
        metrics.observe_stage(stage, ms)
        stage_time.labels(stage).observe(ms)
    tally = ProduceTally()
    tally.add("a", ErrorCode.NONE, 3, 100)
    tally.add("b", ErrorCode.CORRUPT_MESSAGE, 0, 70)
    metrics.record_produce(tally)
    p = "kafka_server_brokertopicmetrics_"
    docs[p + "totalproducerequests"].labels("a").inc(1)
    docs[p + "failedproducerequests"].labels("a").inc(0)
    docs[p + "messagesin"].labels("a").inc(3)
    docs[p + "bytesin"].labels("a").inc(100)
    docs[p + "totalproducerequests"].labels("b").inc(1)
    docs[p + "failedproducerequests"].labels("b").inc(1)
    metrics.record_fetch("a", ErrorCode.NONE, 512)
    docs[p + "totalfetchrequests"].labels("a").inc(1)
    docs[p + "failedfetchrequests"].labels("a").inc(0)
    docs[p + "bytesout"].labels("a").inc(512)
    for name, ms in (("Produce", 0.5), ("Produce", 0.2), ("Fetch", 3.0), ("Produce", 40000.0),
                     ("Fetch", 1.0), ("Metadata", 2.5)):
        metrics.requests.inc(name)
        metrics.total_time.observe(name, ms)
        requests.labels(name).inc()
        total_time.labels(name).observe(ms)

    def name(line: str) -> str:
        return line.split(" ")[2] if line.startswith("#") else line.split("{")[0].split(" ")[0]
    ours = [line for line in "".join(metrics.exposition()[0]).splitlines()
            if name(line).startswith(("kafka_server_brokertopicmetrics_", "kafka_network_requestmetrics_",
                                      "ketch_replication_stage_"))]
    assert ours == text_exposition(reference).decode().splitlines()
