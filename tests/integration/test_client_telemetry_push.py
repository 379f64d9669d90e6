"""KIP-714 from the outside: a real librdkafka producer and consumer (confluent-kafka 2.16,
``enable.metrics.push`` at its default, true) push their metrics to a Ketch broker, which
shows them on its Prometheus /metrics.

One controller and one broker. The subscription is created with Ketch's admin client:
confluent-kafka 2.16's ConfigResource has no CLIENT_METRICS type (librdkafka's admin API
lacks it), so it cannot create one. Without a subscription the clients are asked for
nothing, and push nothing (Kafka's behaviour; tests/broker/test_client_telemetry.py); with ``metrics=*`` every 500 ms they push,
and the broker's series carry their client ids. A producer that closes sends a
terminating push, and its series go while the consumer's stay.
"""
from __future__ import annotations

import re
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer

from clients._core.admin import AlterConfigOp, ConfigResource
from clients.errors import KafkaApiError
from clients.protocol.configs import ConfigSource
from integration_helpers import STOP_TIMEOUT_S, admin_for, start_cluster, wait_until

TOPIC = "telemetry-orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "telemetry", controllers=1, brokers=1)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def scrape(cluster) -> str:
    url = f"http://127.0.0.1:{cluster.spec.brokers[0].http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def client_series(text: str, client_id: str) -> dict[str, float]:
    """name{labels} -> value of the series pushed by ``client_id``."""
    found = {}
    for line in text.splitlines():
        if line.startswith("client_") and f'client_id="{client_id}"' in line:
            series, value = line.rsplit(" ", 1)
            found[series] = float(value)
    return found


def test_subscriptions_are_validated_and_described(cluster) -> None:
    admin = admin_for(cluster)
    with pytest.raises(KafkaApiError, match="interval must be between 100 and 3600000"):
        admin.incremental_alter_configs({ConfigResource.client_metrics("too-fast"): [
            AlterConfigOp("metrics", "*"), AlterConfigOp("interval.ms", "10")]})
    with pytest.raises(KafkaApiError, match="Illegal client matching pattern"):
        admin.incremental_alter_configs({ConfigResource.client_metrics("bad-match"): [
            AlterConfigOp("metrics", "*"), AlterConfigOp("match", "client_colour=red")]})
    resource = ConfigResource.client_metrics("everything")
    admin.incremental_alter_configs({resource: [
        AlterConfigOp("metrics", "*"), AlterConfigOp("interval.ms", "500"),
        AlterConfigOp("match", "client_software_name=.*")]})

    def described():
        entries = admin.describe_configs([resource])[resource]
        return entries if "interval.ms" in entries else None
    entries = wait_until(described, 15, "the broker's image has the subscription")
    assert {k: (e.value, e.source) for k, e in entries.items()} == {
        "metrics": ("*", ConfigSource.CLIENT_METRICS_CONFIG),
        "interval.ms": ("500", ConfigSource.CLIENT_METRICS_CONFIG),
        "match": ("client_software_name=.*", ConfigSource.CLIENT_METRICS_CONFIG)}
    refused = admin.describe_configs([ConfigResource.client_metrics("too-fast")])
    assert refused[ConfigResource.client_metrics("too-fast")] == {}


def test_librdkafka_clients_push_metrics_that_show_on_the_brokers_metrics(cluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "tele-producer"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "tele-consumer",
                         "group.id": "tele-group", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        for i in range(20):
            producer.produce(TOPIC, value=b"v%d" % i)
        assert producer.flush(15) == 0

        def both_pushed():
            producer.poll(0)
            consumer.poll(0.2)
            text = scrape(cluster)
            return text if client_series(text, "tele-producer") and \
                client_series(text, "tele-consumer") else None
        text = wait_until(both_pushed, 30, "both clients' pushed metrics on /metrics")
        produced = client_series(text, "tele-producer")
        names = {re.sub(r"\{.*", "", s) for s in produced}
        assert {"client_producer_record_queue_time_avg", "client_producer_request_latency_avg",
                "client_producer_connection_creation_total"} <= names
        instance_ids = {m.group(1) for s in produced
                        for m in [re.search(r'client_instance_id="([^"]+)"', s)] if m}
        assert len(instance_ids) == 1 and len(instance_ids.pop()) == 22     # a base64 Uuid
        latency = [v for s, v in produced.items()
                   if s.startswith("client_producer_node_request_latency_avg{") and 'node_id="1"' in s]
        assert latency and latency[0] > 0          # it did talk to broker 1
        consumed = client_series(text, "tele-consumer")
        assert any('group_id="tele-group"' in s for s in consumed)     # a resource attribute
        assert "# TYPE client_producer_connection_creation_total counter" in text
    finally:
        producer.flush(5)
        del producer                 # closes: librdkafka sends its terminating push

    def producer_gone():
        consumer.poll(0.2)
        text = scrape(cluster)
        return not client_series(text, "tele-producer") and client_series(text, "tele-consumer")
    try:
        wait_until(producer_gone, 20, "the closed producer's series dropped, the consumer's kept")
    finally:
        consumer.close()
