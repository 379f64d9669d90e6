"""Client telemetry's pure parts: the per-instance rules of ClientTelemetryManager (ids,
subscriptions, intervals, errors, bounds), client-metrics subscriptions as parsed from
configs, and the Prometheus series pushed metrics become (ClientMetricsExport)."""
from __future__ import annotations

import random
import uuid

import pytest

from broker.client_metrics_export import ClientMetricsExport, prometheus_name
from broker.client_telemetry import (
    ClientAttributes, ClientTelemetryManager, format_client_instance_id,
)
from broker.otlp import MetricKind, MetricPoint
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log.client_metrics import Subscription, parse_subscription, subscriptions_of
from metadata_log.image import ConfigResource, ConfigResourceType, ConfigsImage

ZERO = uuid.UUID(int=0)
ZSTD, GZIP = 4, 1
LIBRDKAFKA = ClientAttributes("app-1", "librdkafka", "2.16.0", "127.0.0.1", 50000)
JAVA = ClientAttributes("app-2", "apache-kafka-java", "4.0.0", "127.0.0.1", 50001)


def sub(name: str, **configs: str) -> Subscription:
    s, problem = parse_subscription(name, {k.replace("_", "."): v for k, v in configs.items()})
    assert problem is None and s is not None, problem
    return s


ALL_1S = (sub("all", metrics="*", interval_ms="1000"),)


def manager(**kw) -> ClientTelemetryManager:
    return ClientTelemetryManager(telemetry_max_bytes=kw.pop("telemetry_max_bytes", 1000),
                                  rng=random.Random(7), **kw)


def get(m: ClientTelemetryManager, instance: uuid.UUID, subs, now_ms: int,
        client: ClientAttributes = LIBRDKAFKA) -> M.GetTelemetrySubscriptionsResponse:
    return m.handle_get_telemetry_subscriptions_request(
        M.GetTelemetrySubscriptionsRequest(client_instance_id=instance), client, subs, now_ms)


def push(m: ClientTelemetryManager, instance: uuid.UUID, subscription_id: int, subs, now_ms: int,
         metrics: bytes = b"x", terminating: bool = False, compression_type: int = ZSTD,
         client: ClientAttributes = LIBRDKAFKA) -> int:
    outcome = m.handle_push_telemetry_request(M.PushTelemetryRequest(
        client_instance_id=instance, subscription_id=subscription_id, terminating=terminating,
        compression_type=compression_type, metrics=metrics), client, subs, now_ms)
    assert (outcome.metrics is not None) == (outcome.response.error_code == 0 and bool(metrics))
    return outcome.response.error_code


def test_a_new_client_gets_an_id_and_its_subscription() -> None:
    m = manager()
    r = get(m, ZERO, ALL_1S, now_ms=0)
    assert r.error_code == 0 and r.client_instance_id != ZERO
    assert r.requested_metrics == ["*"] and r.push_interval_ms == 1000
    assert r.accepted_compression_types == [4, 3, 1, 2]      # zstd, lz4, gzip, snappy: Kafka's order
    assert r.telemetry_max_bytes == 1000 and r.delta_temporality is True
    assert r.client_instance_id in m.instances
    # The subscription id is a function of what is asked and of the instance.
    again = manager()
    again_r = get(again, r.client_instance_id, ALL_1S, now_ms=0)
    assert again_r.subscription_id == r.subscription_id


def test_without_a_matching_subscription_nothing_is_asked_for() -> None:
    m = manager()
    r = get(m, ZERO, (), now_ms=0)
    assert r.error_code == 0 and r.requested_metrics == [] and r.push_interval_ms == 300_000
    only_java = (sub("java", metrics="*", match="client_software_name=apache-kafka-java"),)
    r = get(m, ZERO, only_java, now_ms=0)
    assert r.requested_metrics == []


def test_matching_subscriptions_merge_prefixes_and_take_the_lowest_interval() -> None:
    subs = (sub("a", metrics="org.apache.kafka.producer.", interval_ms="5000",
                match="client_software_name=librdkafka,client_id=app-.*"),
            sub("b", metrics="org.apache.kafka.consumer.,org.apache.kafka.producer.",
                interval_ms="2000", match="client_source_address=127\\.0\\.0\\.1"),
            sub("c", metrics="*", interval_ms="100", match="client_id=app"))   # must match in full
    r = get(manager(), ZERO, subs, now_ms=0)
    assert r.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert r.push_interval_ms == 2000
    r = get(manager(), ZERO, subs + (sub("d", metrics="*", match="client_id=app-1"),), now_ms=0)
    assert r.requested_metrics == ["*"]         # "*" alone stands for every metric
    r = get(manager(), ZERO, (sub("e", metrics=""),), now_ms=0)
    assert r.requested_metrics == []            # an empty list asks for nothing, as in Kafka
    r = get(manager(), ZERO, subs, now_ms=0, client=JAVA)
    assert r.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]


def test_a_subscription_can_match_on_the_instance_id() -> None:
    m = manager()
    first = get(m, ZERO, (), now_ms=0).client_instance_id
    subs = (sub("one", metrics="*", match=f"client_instance_id={format_client_instance_id(first)}"),)
    assert get(m, first, subs, now_ms=1).requested_metrics == ["*"]
    assert get(m, ZERO, subs, now_ms=1).requested_metrics == []


def test_asking_again_within_the_interval_is_throttled() -> None:
    m = manager()
    r = get(m, ZERO, ALL_1S, now_ms=0)
    me = r.client_instance_id
    assert get(m, me, ALL_1S, now_ms=999).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert get(m, me, ALL_1S, now_ms=1000).error_code == 0
    assert push(m, me, r.subscription_id, ALL_1S, now_ms=1500) == 0
    # The push counts as contact too.
    assert get(m, me, ALL_1S, now_ms=2400).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_pushes_are_accepted_once_per_interval_and_after_each_get() -> None:
    m = manager()
    r = get(m, ZERO, ALL_1S, now_ms=0)
    me, sid = r.client_instance_id, r.subscription_id
    assert push(m, me, sid, ALL_1S, now_ms=500) == 0          # the first push after a Get
    assert push(m, me, sid, ALL_1S, now_ms=1400) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(m, me, sid, ALL_1S, now_ms=2400) == 0          # counted from the last push
    assert push(m, me, sid, ALL_1S, now_ms=3400) == 0


def test_a_push_with_a_stale_subscription_id_asks_the_client_to_get_again() -> None:
    m = manager()
    r = get(m, ZERO, ALL_1S, now_ms=0)
    me, sid = r.client_instance_id, r.subscription_id
    changed = (sub("all", metrics="org.apache.kafka.producer.", interval_ms="1000"),)
    assert push(m, me, sid, changed, now_ms=100) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    fresh = get(m, me, changed, now_ms=101)                   # at once, not throttled
    assert fresh.error_code == 0 and fresh.subscription_id != sid
    assert fresh.requested_metrics == ["org.apache.kafka.producer."]
    assert push(m, me, fresh.subscription_id, changed, now_ms=600) == 0


def test_unsupported_compression_and_oversized_pushes_are_refused() -> None:
    m = manager(telemetry_max_bytes=10)
    r = get(m, ZERO, ALL_1S, now_ms=0)
    me, sid = r.client_instance_id, r.subscription_id
    assert push(m, me, sid, ALL_1S, now_ms=1, compression_type=7) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    r = get(m, me, ALL_1S, now_ms=2)                          # may ask again at once
    assert r.error_code == 0
    assert push(m, me, sid, ALL_1S, now_ms=3, metrics=b"x" * 11) == ErrorCode.TELEMETRY_TOO_LARGE
    assert push(m, me, sid, ALL_1S, now_ms=1003, metrics=b"x" * 10, compression_type=GZIP) == 0


def test_a_terminating_push_is_accepted_early_and_is_the_last() -> None:
    m = manager()
    r = get(m, ZERO, ALL_1S, now_ms=0)
    me, sid = r.client_instance_id, r.subscription_id
    assert push(m, me, sid, ALL_1S, now_ms=100) == 0
    assert push(m, me, sid, ALL_1S, now_ms=200, terminating=True) == 0   # not throttled
    assert m.take_removed() == [me]                           # its series go now
    assert push(m, me, sid, ALL_1S, now_ms=5000) == ErrorCode.INVALID_REQUEST
    assert push(m, me, sid, ALL_1S, now_ms=6000, terminating=True) == ErrorCode.INVALID_REQUEST


def test_a_push_needs_a_real_instance_id_and_may_come_to_another_broker() -> None:
    m = manager()
    assert push(m, ZERO, 0, ALL_1S, now_ms=0) == ErrorCode.INVALID_REQUEST
    r = get(m, ZERO, ALL_1S, now_ms=0)
    other = manager()            # a broker that never saw this instance accepts its push
    assert push(other, r.client_instance_id, r.subscription_id, ALL_1S, now_ms=10) == 0


def test_idle_instances_expire_after_three_intervals_or_the_minimum() -> None:
    m = manager(expiry_ms_min=60_000)
    slow = (sub("slow", metrics="*", interval_ms="30000"),)
    a = get(m, ZERO, ALL_1S, now_ms=0).client_instance_id
    b = get(m, ZERO, slow, now_ms=0).client_instance_id       # subscriptions differ per call here
    assert m.poll(now_ms=59_999) == 1
    assert a in m.instances and m.take_removed() == []
    m.poll(now_ms=60_000)
    assert m.take_removed() == [a] and a not in m.instances
    assert m.poll(now_ms=60_000) == 30_000                    # b: 3 x 30 s after it was seen
    m.poll(now_ms=90_000)
    assert m.take_removed() == [b] and not m.instances


def test_the_least_recently_seen_instance_is_evicted_past_the_bound() -> None:
    m = manager(instances_max=2)
    a = get(m, ZERO, ALL_1S, now_ms=0).client_instance_id
    b = get(m, ZERO, ALL_1S, now_ms=1).client_instance_id
    get(m, a, ALL_1S, now_ms=2000)                            # a seen again: b is now the oldest
    c = get(m, ZERO, ALL_1S, now_ms=2001).client_instance_id
    assert set(m.instances) == {a, c} and m.take_removed() == [b]


def test_subscriptions_come_from_client_metrics_config_resources() -> None:
    configs = ConfigsImage({
        ConfigResource(ConfigResourceType.CLIENT_METRICS, "b"): {"metrics": "x.", "interval.ms": "500"},
        ConfigResource(ConfigResourceType.CLIENT_METRICS, "a"): {"metrics": "*"},
        ConfigResource(ConfigResourceType.TOPIC, "t"): {"retention.ms": "1"},
        ConfigResource(ConfigResourceType.CLIENT_METRICS, "bad"): {"interval.ms": "1"},
    })
    subs = subscriptions_of(configs)
    assert [(s.name, s.metrics, s.interval_ms) for s in subs] == [("a", ("*",), 300_000),
                                                                  ("b", ("x.",), 500)]


# ------------------------------------------------------------ the exported series

def point(name: str, value: float, kind: MetricKind = MetricKind.GAUGE, monotonic: bool = False,
          delta: bool = False, **attributes: str) -> MetricPoint:
    return MetricPoint(name, kind, monotonic, delta, tuple(sorted(attributes.items())), value, 0)


def samples(export: ClientMetricsExport) -> dict[tuple[str, str, tuple], float]:
    return {(f.type, s.name, tuple(sorted(s.labels.items()))): s.value
            for f in export.families() for s in f.samples}


def test_names_are_prometheus_safe_with_a_client_prefix() -> None:
    assert prometheus_name("org.apache.kafka.producer.record.queue.time.avg") == \
        "client_producer_record_queue_time_avg"
    assert prometheus_name("my-app.requests/s") == "client_my_app_requests_s"


def test_gauges_keep_the_last_value_and_delta_counters_add_up() -> None:
    e = ClientMetricsExport()
    e.update("I1", "app", [point("org.apache.kafka.producer.request.latency.avg", 3.0, **{"node.id": "1"}),
                           point("org.apache.kafka.producer.connection.creation.total", 2,
                                 MetricKind.SUM, monotonic=True, delta=True)])
    e.update("I1", "app", [point("org.apache.kafka.producer.request.latency.avg", 5.0, **{"node.id": "1"}),
                           point("org.apache.kafka.producer.connection.creation.total", 1,
                                 MetricKind.SUM, monotonic=True, delta=True)])
    fixed = (("client_id", "app"), ("client_instance_id", "I1"))
    assert samples(e) == {
        ("counter", "client_producer_connection_creation_total", fixed): 3.0,
        ("gauge", "client_producer_request_latency_avg", (*fixed, ("node_id", "1"))): 5.0,
    }
    e.drop("I1")
    assert samples(e) == {} and e.series_count == 0


def test_cumulative_sums_replace_and_fixed_labels_win() -> None:
    e = ClientMetricsExport()
    e.update("I1", "app", [point("c", 10, MetricKind.SUM, monotonic=True, client_id="spoof")])
    e.update("I1", "app", [point("c", 12, MetricKind.SUM, monotonic=True, client_id="spoof")])
    assert samples(e) == {("counter", "client_c_total",
                           (("client_id", "app"), ("client_instance_id", "I1"))): 12.0}


def test_the_series_bound_and_one_type_per_name() -> None:
    e = ClientMetricsExport(series_max=2)
    e.update("I1", None, [point("g", 1, p="0"), point("g", 1, p="1"), point("g", 1, p="2")])
    assert e.series_count == 2 and e.dropped_points == 1
    e.update("I1", None, [point("g", 1, MetricKind.SUM, monotonic=True, p="0")])  # g is a gauge
    assert e.dropped_points == 2
    e.drop("I1")
    e.update("I2", None, [point("g", 1, p="2")])
    assert e.series_count == 1 and e.dropped_points == 2


@pytest.mark.parametrize("key, label", [("node.id", "node_id"), ("9lives", "attr_9lives"),
                                        ("__name__", "attr_name__")])
def test_attribute_names_become_label_names(key: str, label: str) -> None:
    e = ClientMetricsExport()
    e.update("I", "c", [point("g", 1, **{key: "v"})])
    ((_, _, labels),) = samples(e)
    assert (label, "v") in labels
