"""The OTLP MetricsData reader: on payloads librdkafka 2.16.0 pushed to a Ketch broker
(tests/broker/telemetry_golden/, one producer's and one consumer's push in each codec it
was offered; captured from a PushTelemetry request's Metrics field, still compressed), on
hand-built messages for what librdkafka does not send (histograms, summaries, negative
integers, unknown fields), and on garbage (OtlpDecodeError or points, nothing else)."""
from __future__ import annotations

import pathlib
import struct

import pytest
from hypothesis import given, strategies as st

from broker.otlp import MetricKind, OtlpDecodeError, decode_metrics_data
from clients.records.compression import CompressionType, decompress

GOLDEN = pathlib.Path(__file__).parent / "telemetry_golden"
CODECS = {"gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
          "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}

# What librdkafka 2.16.0 reports (rdkafka_telemetry.c's producer and consumer metric sets).
PRODUCER_NAMES = {
    "org.apache.kafka.producer.connection.creation.rate",
    "org.apache.kafka.producer.connection.creation.total",
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
    "org.apache.kafka.producer.produce.throttle.time.avg",
    "org.apache.kafka.producer.produce.throttle.time.max",
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.record.queue.time.max",
    "org.apache.kafka.producer.request.latency.avg",
    "org.apache.kafka.producer.request.latency.max",
}


# The clients' names end in the codec the broker offered them alone; the zstd pushes come
# from the clients offered the broker's whole list (zstd first), named "none".
CLIENT_SUFFIX = {"gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "none"}


def golden(role: str, codec: str) -> bytes:
    data = (GOLDEN / f"librdkafka-2.16.0-{role}-{codec}.bin").read_bytes()
    return decompress(CODECS[codec], data, decompressed_bytes_max=1 << 20)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_librdkafka_producer_push_in_every_codec(codec: str) -> None:
    points = decode_metrics_data(golden("producer", codec), points_max=1000)
    assert {p.name for p in points} == PRODUCER_NAMES
    by_name = {p.name: p for p in points}
    total = by_name["org.apache.kafka.producer.connection.creation.total"]
    assert (total.kind, total.monotonic, total.delta) == (MetricKind.SUM, True, True)
    latency = by_name["org.apache.kafka.producer.node.request.latency.avg"]
    assert (latency.kind, latency.monotonic) == (MetricKind.GAUGE, False)
    assert dict(latency.attributes) == {"node.id": "1"}     # the broker it measured
    assert latency.value > 0 and latency.time_unix_nano > 1_700_000_000 * 10**9
    queue_max = by_name["org.apache.kafka.producer.record.queue.time.max"]
    assert queue_max.value == int(queue_max.value) >= 0     # librdkafka sends it as an int


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_librdkafka_consumer_push_carries_group_resource_attributes(codec: str) -> None:
    points = decode_metrics_data(golden("consumer", codec), points_max=1000)
    assert len(points) == 15
    assert all(p.name.startswith("org.apache.kafka.consumer.") for p in points)
    for p in points:
        attributes = dict(p.attributes)
        assert attributes["group_id"] == f"g-{CLIENT_SUFFIX[codec]}"
        assert attributes["member_id"].startswith(f"cap-consumer-{CLIENT_SUFFIX[codec]}-")
    nodes = {dict(p.attributes).get("node.id") for p in points
             if p.name == "org.apache.kafka.consumer.node.request.latency.avg"}
    assert nodes == {"1", "-1"}                            # the broker, and the bootstrap connection
    idle = next(p for p in points if p.name == "org.apache.kafka.consumer.poll.idle.ratio.avg")
    assert 0 < idle.value <= 1


def test_the_points_limit_is_an_error_not_a_silent_cut() -> None:
    payload = golden("producer", "zstd")
    assert len(decode_metrics_data(payload, points_max=10)) == 10
    with pytest.raises(OtlpDecodeError):
        decode_metrics_data(payload, points_max=9)


# ------------------------------------------------------------ a test-only protobuf writer

def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def vint(number: int, v: int) -> bytes:
    return _varint(number << 3) + _varint(v)


def i64(number: int, raw: bytes) -> bytes:
    assert len(raw) == 8
    return _varint(number << 3 | 1) + raw


def ln(number: int, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def s(number: int, text: str) -> bytes:
    return ln(number, text.encode())


def kv(key: str, any_value: bytes) -> bytes:
    """A KeyValue's body: key 1, AnyValue 2."""
    return s(1, key) + ln(2, any_value)


def body(*parts: bytes) -> bytes:
    return b"".join(parts)


def metrics_data(resource_attributes: list[bytes], metrics: list[bytes]) -> bytes:
    return ln(1, ln(1, *(ln(1, a) for a in resource_attributes)),
              ln(2, ln(1, s(1, "scope")), *(ln(2, m) for m in metrics)))


def test_hand_built_message_covers_every_kind_and_value() -> None:
    double = lambda v: struct.pack("<d", v)                             # noqa: E731
    payload = metrics_data(
        [kv("client_rack", s(1, "r1")), kv("enabled", vint(2, 1)), kv("n", vint(3, -5)),
         kv("ratio", i64(4, double(0.5)))],
        [
            # Gauge, as_int negative (sfixed64), with a point attribute overriding the resource
            body(s(1, "a.gauge"), s(2, "doc"), s(3, "ms"),
               ln(5, ln(1, i64(6, struct.pack("<q", -7)), i64(3, struct.pack("<Q", 42)),
                        ln(7, kv("client_rack", s(1, "r2")))))),
            # cumulative monotonic Sum, as_double
            body(s(1, "a.sum"), ln(7, ln(1, i64(4, double(2.5))), vint(2, 2), vint(3, 1))),
            # Histogram: count 3, sum 9.0, buckets ignored; attributes are field 9
            body(s(1, "a.hist"), ln(9, ln(1, i64(4, struct.pack("<Q", 3)), i64(5, double(9.0)),
                                           ln(6, struct.pack("<QQ", 1, 2)),
                                           ln(9, kv("k", s(1, "v")))), vint(2, 1))),
            # Summary: count 4, sum 1.0
            body(s(1, "a.summary"), ln(11, ln(1, i64(4, struct.pack("<Q", 4)), i64(5, double(1.0))))),
            # ExponentialHistogram: skipped; an unknown field 99 in a metric: skipped
            body(s(1, "a.exp"), ln(10, ln(1, i64(4, struct.pack("<Q", 1)))), vint(99, 1)),
        ])
    points = decode_metrics_data(payload, points_max=100)
    got = [(p.name, p.kind, p.monotonic, p.delta, p.value, dict(p.attributes)) for p in points]
    resource = {"client_rack": "r1", "enabled": "true", "n": "-5", "ratio": "0.5"}
    assert got == [
        ("a.gauge", MetricKind.GAUGE, False, False, -7.0, {**resource, "client_rack": "r2"}),
        ("a.sum", MetricKind.SUM, True, False, 2.5, resource),
        ("a.hist.count", MetricKind.SUM, True, True, 3.0, {**resource, "k": "v"}),
        ("a.hist.sum", MetricKind.SUM, True, True, 9.0, {**resource, "k": "v"}),
        ("a.summary.count", MetricKind.SUM, True, False, 4.0, resource),
        ("a.summary.sum", MetricKind.SUM, True, False, 1.0, resource),
    ]
    assert points[0].time_unix_nano == 42


@pytest.mark.parametrize("payload", [
    b"\x0a\x05\x01",                 # a length past the end
    b"\x0a",                         # a key with no length
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",   # a varint of 11 bytes
    b"\x0b",                         # wire type 3 (start group)
    b"\x00\x01",                     # field number 0
    ln(1, ln(2, ln(2, ln(1, b"\xff\xfe")))),  # a metric name that is not UTF-8
])
def test_malformed_messages_are_decode_errors(payload: bytes) -> None:
    with pytest.raises(OtlpDecodeError):
        decode_metrics_data(payload, points_max=100)


@given(st.binary(max_size=300))
def test_garbage_gives_points_or_a_decode_error(data: bytes) -> None:
    try:
        decode_metrics_data(data, points_max=1000)
    except OtlpDecodeError:
        pass


@given(st.integers(min_value=0, max_value=4000))
def test_every_truncation_of_a_real_push_is_handled(cut: int) -> None:
    payload = golden("consumer", "zstd")
    try:
        points = decode_metrics_data(payload[:cut % len(payload)], points_max=1000)
    except OtlpDecodeError:
        return
    assert len(points) <= 15
