"""clients/http_api/exposition.py writes what prometheus_client's generate_latest writes."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from clients.http_api import process_metrics  # noqa: F401  (no *_created series, as served)
from clients.http_api.exposition import text_exposition


def _families(text: bytes) -> list[tuple[str, str, str, list]]:
    return [(f.name, f.type, f.documentation,
             sorted((s.name, tuple(sorted(s.labels.items())), repr(s.value)) for s in f.samples))
            for f in text_string_to_metric_families(text.decode())]


def test_the_same_families_and_samples_as_generate_latest() -> None:
    r = CollectorRegistry()
    c = Counter("kafka_server_brokertopicmetrics_bytesin", "Bytes in\nper topic", ["topic"], registry=r)
    c.labels("orders").inc(5)
    c.labels('we"ird\\name').inc(1)
    Gauge("kafka_server_replicamanager_leadercount", "Leaders", registry=r).set(3)
    h = Histogram("kafka_network_requestmetrics_totaltimems", "ms", ["request"],
                  buckets=(1, 10, 100), registry=r)
    h.labels("Produce").observe(5)
    h.labels("Produce").observe(float("inf"))
    Gauge("nan_gauge", "not a number", registry=r).set(float("nan"))
    ours, theirs = text_exposition(r), generate_latest(r)
    assert _families(ours) == _families(theirs)
    assert b"# TYPE kafka_server_brokertopicmetrics_bytesin_total counter" in ours


def test_gauge_rows_write_what_a_gauge_family_of_the_same_series_writes() -> None:
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    from clients.http_api.exposition import GaugeRows

    rows = [("orders", 0, 120), ("orders", 1, 0), ("__consumer_offsets", 49, 2.5), ("t.x-y_z", 7, float("nan"))]

    class Rows(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            g = GaugeRows("kafka_log_log_size", "Bytes of a\nlog", ["topic", "partition"])
            g.rows.extend(rows)
            yield g
            lag = GaugeRows("kafka_server_fetcherlagmetrics_consumerlag", "Lag", ["topic", "partition", "replica"])
            lag.rows.append(("orders", 0, 2, 5))
            yield lag

    class Family(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            g = GaugeMetricFamily("kafka_log_log_size", "Bytes of a\nlog", labels=["topic", "partition"])
            for topic, partition, value in rows:
                g.add_metric([topic, str(partition)], value)
            yield g
            lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag", "Lag",
                                    labels=["topic", "partition", "replica"])
            lag.add_metric(["orders", "0", "2"], 5)
            yield lag

    with_rows, with_family = CollectorRegistry(), CollectorRegistry()
    with_rows.register(Rows())
    with_family.register(Family())
    assert _families(text_exposition(with_rows)) == _families(generate_latest(with_family))
    # Other readers of the registry see the same samples.
    assert _families(generate_latest(with_rows)) == _families(generate_latest(with_family))


def test_exposition_pieces_split_gauge_rows_and_join_to_the_whole_text() -> None:
    # The HTTP server yields to its event loop between pieces: a broker's rows at 100k
    # partitions were ~0.5 s of the loop in one go.
    from prometheus_client.registry import Collector

    from clients.http_api.exposition import GaugeRows, exposition_pieces

    class Rows(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            g = GaugeRows("kafka_log_log_size", "Bytes", ["topic", "partition"])
            g.rows.extend(("t", p, p * 10) for p in range(25))
            yield g

    r = CollectorRegistry()
    r.register(Rows())
    Gauge("kafka_server_replicamanager_leadercount", "Leaders", registry=r).set(3)
    pieces = list(exposition_pieces(r, rows_per_piece=10))
    assert [piece.count("kafka_log_log_size{") for piece in pieces] == [10, 10, 5, 0]
    assert "".join(pieces).encode() == text_exposition(r)
    assert _families(text_exposition(r)) == _families(generate_latest(r))


def test_a_scrape_of_some_names_reads_only_the_collectors_that_describe_them() -> None:
    # A probe of a broker's leader count must not read (and write) every partition's rows.
    from prometheus_client.core import GaugeMetricFamily, SummaryMetricFamily
    from prometheus_client.registry import Collector

    from clients.http_api.exposition import GaugeRows, exposition_pieces

    collected: list[str] = []

    class Counts(Collector):
        def describe(self):  # type: ignore[no-untyped-def]
            return [GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Leaders")]

        def collect(self):  # type: ignore[no-untyped-def]
            collected.append("counts")
            yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Leaders", value=3)

    class Rows(Collector):
        def describe(self):  # type: ignore[no-untyped-def]
            return [GaugeRows("kafka_log_log_size", "Bytes", ["topic", "partition"])]

        def collect(self):  # type: ignore[no-untyped-def]
            collected.append("rows")
            g = GaugeRows("kafka_log_log_size", "Bytes", ["topic", "partition"])
            g.rows.extend(("t", p, p * 10) for p in range(25))
            yield g

    class Nameless(Collector):       # families known only when collected (client-pushed ones)
        def describe(self):  # type: ignore[no-untyped-def]
            return []

        def collect(self):  # type: ignore[no-untyped-def]
            collected.append("nameless")
            yield SummaryMetricFamily("kafka_log_logflushstats_logflushrateandtimems", "Syncs",
                                      count_value=4, sum_value=9.5)

    r = CollectorRegistry(support_collectors_without_names=True)     # as the nodes' are
    r.register(Counts())
    r.register(Rows())
    r.register(Nameless())
    c = Counter("kafka_network_requestmetrics_requests", "Requests", ["request"], registry=r)
    c.labels("Fetch").inc(2)

    def scrape(*names: str) -> list[tuple[str, str, str, list]]:
        return _families("".join(exposition_pieces(r, names=names)).encode())

    whole = {f[0]: f for f in _families(text_exposition(r))}
    collected.clear()
    assert scrape("kafka_server_replicamanager_leadercount") == [
        whole["kafka_server_replicamanager_leadercount"]]
    assert sorted(collected) == ["counts", "nameless"]      # never "rows"
    (syncs,) = scrape("kafka_log_logflushstats_logflushrateandtimems_count")
    assert syncs[3] == [("kafka_log_logflushstats_logflushrateandtimems_count", (), "4.0")]
    # Rows asked by name are the same rows; a counter is asked by its series' name.
    assert sorted(scrape("kafka_log_log_size", "kafka_network_requestmetrics_requests_total")) == [
        whole["kafka_log_log_size"], whole["kafka_network_requestmetrics_requests"]]
    assert scrape("no_such_series") == []
