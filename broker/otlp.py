"""A reader for the OTLP ``MetricsData`` protobuf that KIP-714 clients push
(opentelemetry-proto ``opentelemetry/proto/metrics/v1/metrics.proto``, v1).

Theory of operation
-------------------
Protobuf is a sequence of (field number, wire type, value) triples; a message field is a
length-delimited value holding another such sequence. ``_fields`` walks one level; the
functions below know which field numbers matter in each message and skip the rest
(unknown fields are legal and skipped, as every protobuf reader does). Only the wire
types of proto3 occur: VARINT, I64, LEN, I32; the deprecated group types are an error.

What comes out is flat: one ``MetricPoint`` per number data point, with the resource's
attributes and the point's attributes merged (the point's win). Histograms and summaries
become their ``count`` and ``sum`` (as two points named ``<name>.count`` / ``<name>.sum``),
which is what a Prometheus gauge or counter can carry without buckets; exponential
histograms are skipped. Attribute values are turned into strings (a bool as
``true``/``false``, as OpenTelemetry's Prometheus exporter writes them).

Why by hand: the message is small and stable, and the whole of it is ~150 lines here
against a generated-code dependency (protobuf + opentelemetry-proto) for one broker feature.
``tests/broker/test_otlp.py`` checks it against payloads librdkafka pushed.

Bad input raises ``OtlpDecodeError`` and nothing else; ``points_max`` bounds the output.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum
from typing import Iterator

from clients.protocol.types import CorruptFrameError, read_uvarint

__all__ = ["MetricKind", "MetricPoint", "OtlpDecodeError", "decode_metrics_data"]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_SFIXED64 = struct.Struct("<q")
_FIXED64 = struct.Struct("<Q")

# AggregationTemporality (metrics.proto)
AGGREGATION_TEMPORALITY_DELTA = 1
AGGREGATION_TEMPORALITY_CUMULATIVE = 2


class OtlpDecodeError(ValueError):
    """The bytes are not a well-formed MetricsData message."""


class MetricKind(Enum):
    GAUGE = "gauge"
    SUM = "sum"          # monotonic sums are counters; non-monotonic ones read as gauges


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    kind: MetricKind
    monotonic: bool
    delta: bool                               # AGGREGATION_TEMPORALITY_DELTA
    attributes: tuple[tuple[str, str], ...]   # resource attributes, then the point's, by key
    value: float
    time_unix_nano: int


Field = tuple[int, int, "int | memoryview"]


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    # Protobuf varints are the LEB128 of Kafka's unsigned varints; 64-bit ones take 10 bytes.
    try:
        return read_uvarint(buf, pos, max_bytes=10)
    except CorruptFrameError as e:
        raise OtlpDecodeError(str(e)) from None


def _fields(buf: memoryview) -> Iterator[Field]:
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OtlpDecodeError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == _I64:
            if pos + 8 > end:
                raise OtlpDecodeError("truncated 64-bit field")
            yield number, wire, _FIXED64.unpack_from(buf, pos)[0]
            pos += 8
        elif wire == _I32:
            if pos + 4 > end:
                raise OtlpDecodeError("truncated 32-bit field")
            yield number, wire, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise OtlpDecodeError(f"field {number}: {length} bytes overrun the message")
            yield number, wire, buf[pos:pos + length]
            pos += length
        else:
            raise OtlpDecodeError(f"field {number}: unsupported wire type {wire}")


def _bytes(value: int | memoryview, wire: int) -> memoryview:
    if wire != _LEN or not isinstance(value, memoryview):
        raise OtlpDecodeError("expected a length-delimited field")
    return value


def _int(value: int | memoryview, wire: int, expected: int) -> int:
    if wire != expected or isinstance(value, memoryview):
        raise OtlpDecodeError("unexpected wire type for a scalar field")
    return value


def _str(value: int | memoryview, wire: int) -> str:
    try:
        return bytes(_bytes(value, wire)).decode("utf-8")
    except UnicodeDecodeError:
        raise OtlpDecodeError("string field is not UTF-8") from None


def _as_double(bits: int) -> float:
    return float(_DOUBLE.unpack(_FIXED64.pack(bits))[0])


def _as_sfixed64(bits: int) -> int:
    return int(_SFIXED64.unpack(_FIXED64.pack(bits))[0])


def _signed(v: int) -> int:
    """A varint's int64 reading (two's complement over 64 bits)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _any_value(buf: memoryview) -> str:
    """AnyValue as text: string 1, bool 2, int 3, double 4; arrays, lists, bytes as ''."""
    text = ""
    for number, wire, value in _fields(buf):
        if number == 1:
            text = _str(value, wire)
        elif number == 2:
            text = "true" if _int(value, wire, _VARINT) else "false"
        elif number == 3:
            text = str(_signed(_int(value, wire, _VARINT)))
        elif number == 4:
            text = repr(_as_double(_int(value, wire, _I64)))
    return text


def _key_value(buf: memoryview) -> tuple[str, str]:
    key = value_text = ""
    for number, wire, value in _fields(buf):
        if number == 1:
            key = _str(value, wire)
        elif number == 2:
            value_text = _any_value(_bytes(value, wire))
    return key, value_text


def _resource_attributes(buf: memoryview) -> dict[str, str]:
    attributes = {}
    for number, wire, value in _fields(buf):
        if number == 1:       # Resource.attributes
            k, v = _key_value(_bytes(value, wire))
            attributes[k] = v
    return attributes


class _Builder:
    def __init__(self, points_max: int) -> None:
        self.points: list[MetricPoint] = []
        self.points_max = points_max

    def add(self, point: MetricPoint) -> None:
        if len(self.points) >= self.points_max:
            raise OtlpDecodeError(f"more than {self.points_max} data points")
        self.points.append(point)


def _point_fields(buf: memoryview, resource: dict[str, str], attributes_field: int
                  ) -> tuple[tuple[tuple[str, str], ...], int, list[Field]]:
    """A data point's merged attributes, its time, and its other fields."""
    attributes = dict(resource)
    time_unix_nano = 0
    rest = []
    for number, wire, value in _fields(buf):
        if number == attributes_field:
            k, v = _key_value(_bytes(value, wire))
            attributes[k] = v
        elif number == 3:
            time_unix_nano = _int(value, wire, _I64)
        else:
            rest.append((number, wire, value))
    return tuple(sorted(attributes.items())), time_unix_nano, rest


def _number_points(buf: memoryview, name: str, kind: MetricKind, resource: dict[str, str],
                   out: _Builder) -> None:
    """Gauge or Sum: NumberDataPoint 1 (repeated), temporality 2, is_monotonic 3."""
    raw_points = []
    delta = monotonic = False
    for number, wire, value in _fields(buf):
        if number == 1:
            raw_points.append(_bytes(value, wire))
        elif number == 2:
            delta = _int(value, wire, _VARINT) == AGGREGATION_TEMPORALITY_DELTA
        elif number == 3:
            monotonic = bool(_int(value, wire, _VARINT))
    for raw in raw_points:
        attributes, t, rest = _point_fields(raw, resource, 7)
        number_value = 0.0
        for number, wire, value in rest:
            if number == 4:                              # as_double
                number_value = _as_double(_int(value, wire, _I64))
            elif number == 6:                            # as_int (sfixed64)
                number_value = float(_as_sfixed64(_int(value, wire, _I64)))
        out.add(MetricPoint(name, kind, monotonic, delta, attributes, number_value, t))


def _count_sum_points(buf: memoryview, name: str, resource: dict[str, str], attributes_field: int,
                      out: _Builder) -> None:
    """Histogram (points 1, temporality 2; point count 4, sum 5 as fixed64 / double) and
    Summary (points 1; cumulative; point count 4, sum 5) as their count and sum."""
    raw_points = []
    delta = False
    for number, wire, value in _fields(buf):
        if number == 1:
            raw_points.append(_bytes(value, wire))
        elif number == 2:
            delta = _int(value, wire, _VARINT) == AGGREGATION_TEMPORALITY_DELTA
    for raw in raw_points:
        attributes, t, rest = _point_fields(raw, resource, attributes_field)
        count = total = 0.0
        for number, wire, value in rest:
            if number == 4:
                count = float(_int(value, wire, _I64))
            elif number == 5:
                total = _as_double(_int(value, wire, _I64))
        out.add(MetricPoint(name + ".count", MetricKind.SUM, True, delta, attributes, count, t))
        out.add(MetricPoint(name + ".sum", MetricKind.SUM, True, delta, attributes, total, t))


def _metric(buf: memoryview, resource: dict[str, str], out: _Builder) -> None:
    name = ""
    data: list[tuple[int, memoryview]] = []
    for number, wire, value in _fields(buf):
        if number == 1:
            name = _str(value, wire)
        elif number in (5, 7, 9, 10, 11):
            data.append((number, _bytes(value, wire)))
    for number, body in data:
        if number == 5:
            _number_points(body, name, MetricKind.GAUGE, resource, out)
        elif number == 7:
            _number_points(body, name, MetricKind.SUM, resource, out)
        elif number == 9:
            _count_sum_points(body, name, resource, 9, out)
        elif number == 11:
            _count_sum_points(body, name, resource, 7, out)
        # 10: ExponentialHistogram, not carried into Prometheus gauges


def decode_metrics_data(data: bytes | bytearray | memoryview, points_max: int) -> list[MetricPoint]:
    """Every number data point in a MetricsData message, in message order."""
    assert points_max >= 0, points_max
    out = _Builder(points_max)
    for number, wire, value in _fields(memoryview(data)):
        if number != 1:                                   # MetricsData.resource_metrics
            continue
        resource: dict[str, str] = {}
        scopes = []
        for n2, w2, v2 in _fields(_bytes(value, wire)):
            if n2 == 1:                                   # ResourceMetrics.resource
                resource = _resource_attributes(_bytes(v2, w2))
            elif n2 == 2:                                 # ResourceMetrics.scope_metrics
                scopes.append(_bytes(v2, w2))
        for scope in scopes:
            for n3, w3, v3 in _fields(scope):
                if n3 == 2:                               # ScopeMetrics.metrics
                    _metric(_bytes(v3, w3), resource, out)
    return out.points
