"""A real Prometheus (Debian's ``prometheus``, installed by .ci/run) scrapes a cluster that
``ketch up``'s launcher formatted, through the ``prometheus/prometheus.yml`` and
``targets.json`` it wrote: every node is scraped, every PromQL expression of every shipped
Grafana dashboard returns data under a small workload, under-replicated partitions rise
while a follower is SIGSTOPped and fall after SIGCONT, and the consumer-lag metric the
brokers compute equals log end minus committed offset."""
from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import urllib.parse
from typing import Any

import pytest

from clients import Consumer, Producer
from clients.admin import Admin, NewTopic, OffsetSpec
from clients.cli.launcher import free_ports
from clients.types import TopicPartition
from tests.http_api.http_helpers import get
from clients.waiting import WaitTimeout
from tests.integration.integration_helpers import STOP_TIMEOUT_S, start_cluster, wait_until

pytestmark = pytest.mark.process

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "docs" / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS = shutil.which("prometheus")
if PROMETHEUS is None:
    pytest.skip("Debian's prometheus is not installed (.ci/run installs it)", allow_module_level=True)

WORK_TOPIC = "prom-orders"
LAG_TOPIC = "prom-lag"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "prom", broker_props={"ketch.metrics.group.lag.interval.ms": "1000"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory: pytest.TempPathFactory):
    """Prometheus with the configuration ketch up wrote; its HTTP port."""
    config = os.path.join(cluster.dir, "prometheus", "prometheus.yml")
    assert os.path.exists(config) and os.path.exists(os.path.join(cluster.dir, "prometheus", "targets.json"))
    (port,) = free_ports(1)
    data = tmp_path_factory.mktemp("tsdb")
    log = open(data / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: _ready(port), timeout_s=60, what="prometheus ready")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _ready(port: int) -> bool:
    try:
        return get(port, "/-/ready", timeout_s=2)[0] == 200
    except OSError:
        return False


def query(port: int, promql: str) -> list[dict[str, Any]]:
    status, body = get(port, "/api/v1/query?query=" + urllib.parse.quote(promql))
    assert status == 200 and body["status"] == "success", (promql, body)
    return body["data"]["result"]


def _values(result: list[dict[str, Any]]) -> list[float]:
    return [float(r["value"][1]) for r in result]


@pytest.fixture(scope="module")
def workload(cluster):
    """A producer (a few records a second) and a consumer group committing, until teardown."""
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(WORK_TOPIC, 3, 3), NewTopic(LAG_TOPIC, 2, 3)])
    stop = threading.Event()

    def produce() -> None:
        with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}) as p:
            i = 0
            while not stop.is_set():
                p.send(WORK_TOPIC, b"v%d" % i, key=b"k%d" % (i % 11))
                i += 1
                stop.wait(0.05)

    def consume() -> None:
        with Consumer({"bootstrap.servers": bootstrap, "group.id": "prom-workers",
                       "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500}) as c:
            c.subscribe([WORK_TOPIC])
            while not stop.is_set():
                c.poll(timeout_ms=200)

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    yield
    stop.set()
    for t in threads:
        t.join(timeout=30)


def test_prometheus_scrapes_every_node_through_the_generated_targets(cluster, prometheus) -> None:
    def all_up() -> list[dict[str, Any]]:
        result = query(prometheus, 'up{job="ketch"}')
        return result if len(result) == 6 and all(v == 1 for v in _values(result)) else []
    result = wait_until(all_up, timeout_s=60, what="all six nodes scraped")
    roles = sorted(r["metric"]["ketch_role"] for r in result)
    assert roles == ["broker"] * 3 + ["controller"] * 3


def _dashboard_expressions() -> list[tuple[str, str, str]]:
    out = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel.get("targets", ()):
                if target.get("expr"):
                    out.append((path.name, panel["title"], target["expr"]))
    return out


def _concrete(expr: str) -> str:
    for var in ("$topic", "$group", "$broker"):
        expr = expr.replace(var, ".*")
    return expr.replace("$__rate_interval", "1m")


def test_every_dashboard_expression_returns_data(cluster, prometheus, workload) -> None:
    expressions = _dashboard_expressions()
    assert len(DASHBOARDS) >= 5 and len(expressions) > 50
    # Rates need two scrapes of traffic, the lag metrics a committed group, the controller's
    # commit latency a metadata write in the last minute.
    wait_until(lambda: any(v > 0 for v in _values(query(
        prometheus, 'sum(rate(kafka_server_brokertopicmetrics_messagesin_total[1m]))'))),
        timeout_s=90, what="produce traffic in Prometheus")
    wait_until(lambda: query(prometheus, 'kafka_consumergroup_lag{consumergroup="prom-workers"}'),
               timeout_s=90, what="consumer lag of prom-workers in Prometheus")
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("prom-metadata-write", 1, 1)])
    wait_until(lambda: any(not math.isnan(v) for v in _values(query(
        prometheus, 'histogram_quantile(0.99, sum by (le) '
                    '(rate(kafka_server_raftmetrics_commit_latency_ms_bucket[1m])))'))),
        timeout_s=60, what="a commit latency in Prometheus")

    def empty() -> list[str]:
        missing = []
        for board, title, expr in expressions:
            values = _values(query(prometheus, _concrete(expr)))
            if not any(not math.isnan(v) for v in values):
                missing.append(f"{board} / {title}: {expr}")
        return missing
    # All of them on one evaluation; a few scrapes' time for those that need the newest.
    try:
        wait_until(lambda: not empty(), timeout_s=30, interval_s=2, what="every expression")
    except WaitTimeout:
        pytest.fail("expressions without data:\n" + "\n".join(empty()))


def test_the_lag_metric_is_log_end_minus_committed(cluster, prometheus, workload) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as p:
        for i in range(50):
            p.send(LAG_TOPIC, b"x%d" % i, key=b"k%d" % i)
        p.flush()
    with Consumer({"bootstrap.servers": bootstrap, "group.id": "prom-lag-group",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                   "max.poll.records": 7}) as c:
        c.subscribe([LAG_TOPIC])
        seen = 0
        while seen < 14:
            seen += len(c.poll(timeout_ms=1000))
        c.commit()
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets("prom-lag-group")
        tps = [TopicPartition(LAG_TOPIC, p) for p in (0, 1)]
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    expected = {tp.partition: ends[tp].offset - (committed[tp].offset if tp in committed else 0)
                for tp in tps}
    assert sum(expected.values()) == 50 - sum(o.offset for o in committed.values())

    def scraped() -> dict[int, float]:
        result = query(prometheus, 'kafka_consumergroup_lag{consumergroup="prom-lag-group"}')
        got = {int(r["metric"]["partition"]): float(r["value"][1]) for r in result}
        return got if got == expected else {}
    wait_until(scraped, timeout_s=60, what=f"kafka_consumergroup_lag == {expected}")
    total = query(prometheus, 'kafka_consumergroup_lag_sum{consumergroup="prom-lag-group"}')
    assert _values(total) == [sum(expected.values())]


def test_under_replicated_partitions_rise_while_a_follower_is_stopped(cluster, prometheus, workload) -> None:
    urp = 'sum(kafka_server_replicamanager_underreplicatedpartitions)'
    wait_until(lambda: _values(query(prometheus, urp)) == [0.0], timeout_s=60, what="no URP at first")
    cluster.signal_node(3, signal.SIGSTOP)
    try:
        wait_until(lambda: any(v > 0 for v in _values(query(prometheus, urp))), timeout_s=60,
                   what="under-replicated partitions while broker 3 is stopped")
    finally:
        cluster.signal_node(3, signal.SIGCONT)
    wait_until(lambda: _values(query(prometheus, urp)) == [0.0], timeout_s=90,
               what="no under-replicated partitions after SIGCONT")


def test_a_scrape_of_named_series_returns_those_only(cluster, workload) -> None:
    # prometheus_client's name[] filter (a scrape job's `params`, or a probe by hand): a
    # broker's leader count without every partition's series.
    from prometheus_client.parser import text_string_to_metric_families
    broker = cluster.spec.node(cluster.spec.brokers[0].id)

    def families(path: str) -> dict[str, list]:
        status, text = get(broker.http_port, path)
        assert status == 200, text
        return {f.name: sorted((s.name, tuple(sorted(s.labels.items()))) for s in f.samples)
                for f in text_string_to_metric_families(text)}

    def led() -> dict[str, list] | None:
        some = families("/metrics?name[]=kafka_server_replicamanager_leadercount"
                        "&name[]=kafka_log_log_logendoffset")
        return some if any(l[1] == (("partition", "0"), ("topic", WORK_TOPIC))
                           for l in some.get("kafka_log_log_logendoffset", [])) else None
    some = wait_until(led, timeout_s=30, what=f"{WORK_TOPIC} on broker {broker.id}")
    assert set(some) == {"kafka_server_replicamanager_leadercount", "kafka_log_log_logendoffset"}
    everything = families("/metrics")
    assert len(everything) > 20
    # The same series (values move under the workload; the series do not).
    assert some["kafka_log_log_logendoffset"] == everything["kafka_log_log_logendoffset"]
    assert families("/metrics?name[]=no_such_series") == {}
    # A controller's, from a collector that names nothing up front.
    controller = cluster.spec.node(cluster.spec.controllers[0].id)
    status, text = get(controller.http_port,
                       "/metrics?name[]=kafka_log_logflushstats_logflushrateandtimems_count")
    assert status == 200 and [(s.name, s.value > 0) for f in text_string_to_metric_families(text)
                              for s in f.samples] == [
        ("kafka_log_logflushstats_logflushrateandtimems_count", True)]
