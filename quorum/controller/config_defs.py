"""Topic and broker configs Ketch knows, with Kafka's names, types, defaults and limits.

Theory of operation
-------------------
A config value travels and is stored as a string (ConfigRecord.Value). Each known name has
a ``ConfigDef``: its type, Kafka's default, and a validator. ``validate_value`` turns a
proposed string into an error message (or None), worded as Kafka words it
("Invalid value x for configuration y: Value must be at least 1"), so that an admin tool
shows something a person can act on. Unknown names are refused rather than stored: a
typo such as ``retention.msec`` silently doing nothing is worse than an error.

The tables follow Kafka's ``LogConfig`` (topic configs) and the dynamically alterable
subset of ``KafkaConfig`` that maps onto them (broker configs), limited to what Ketch's
broker can act on or store harmlessly. Tiered storage and throttling configs are absent on
purpose: Ketch has neither, so accepting them would be a lie.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping

__all__ = [
    "BROKER_CONFIGS", "ConfigDef", "ConfigType", "TOPIC_CONFIGS", "list_items",
    "parse_bool", "validate_value",
]

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


class ConfigType(Enum):
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


Validator = Callable[[object], "str | None"]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    validator: Validator | None = None


def _at_least(low: float) -> Validator:
    def check(v: object) -> str | None:
        return None if v >= low else f"Value must be at least {low}"  # type: ignore[operator]
    return check


def _between(low: float, high: float) -> Validator:
    def check(v: object) -> str | None:
        ok = low <= v <= high  # type: ignore[operator]
        return None if ok else f"Value must be no less than {low} and no more than {high}"
    return check


def _one_of(*allowed: str) -> Validator:
    def check(v: object) -> str | None:
        items = v if isinstance(v, list) else [v]
        for item in items:
            if item not in allowed:
                return f"String must be one of: {', '.join(allowed)}"
        return None
    return check


def _non_empty_list_of(*allowed: str) -> Validator:
    inner = _one_of(*allowed)

    def check(v: object) -> str | None:
        if not v:
            return "Empty list is not allowed"
        return inner(v)
    return check


def parse_bool(value: str) -> bool | None:
    """Kafka parses booleans case-insensitively, ignoring surrounding blanks."""
    v = value.strip().lower()
    return True if v == "true" else False if v == "false" else None


def list_items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _parse(defn: ConfigDef, value: str) -> tuple[object, str | None]:
    """(parsed value, error) for one string value."""
    t = defn.type
    if t is ConfigType.BOOLEAN:
        b = parse_bool(value)
        return b, None if b is not None else "Expected value to be either true or false"
    if t in (ConfigType.INT, ConfigType.LONG):
        try:
            n = int(value.strip())
        except ValueError:
            return None, f"Not a number of type {t.value.upper()}"
        limit = INT32_MAX if t is ConfigType.INT else INT64_MAX
        if not -limit - 1 <= n <= limit:
            return None, f"Not a number of type {t.value.upper()}"
        return n, None
    if t is ConfigType.DOUBLE:
        try:
            return float(value.strip()), None
        except ValueError:
            return None, "Not a number of type DOUBLE"
    if t is ConfigType.LIST:
        return list_items(value), None
    return value.strip(), None


def validate_value(defn: ConfigDef, value: str) -> str | None:
    """None if ``value`` is acceptable for ``defn``, else Kafka's wording of why not."""
    parsed, error = _parse(defn, value)
    if error is None and defn.validator is not None:
        error = defn.validator(parsed)
    if error is None:
        return None
    return f"Invalid value {value} for configuration {defn.name}: {error}"


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("compact", "delete")

_T = ConfigType
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    ConfigDef("cleanup.policy", _T.LIST, "delete", _non_empty_list_of(*_CLEANUP)),
    ConfigDef("compression.type", _T.STRING, "producer", _one_of(*_COMPRESSION)),
    ConfigDef("delete.retention.ms", _T.LONG, "86400000", _at_least(0)),
    ConfigDef("file.delete.delay.ms", _T.LONG, "60000", _at_least(0)),
    ConfigDef("flush.messages", _T.LONG, str(INT64_MAX), _at_least(1)),
    ConfigDef("flush.ms", _T.LONG, str(INT64_MAX), _at_least(0)),
    ConfigDef("index.interval.bytes", _T.INT, "4096", _at_least(0)),
    ConfigDef("max.compaction.lag.ms", _T.LONG, str(INT64_MAX), _at_least(1)),
    ConfigDef("max.message.bytes", _T.INT, "1048588", _at_least(0)),
    ConfigDef("message.downconversion.enable", _T.BOOLEAN, "true"),
    ConfigDef("message.timestamp.after.max.ms", _T.LONG, str(INT64_MAX), _at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", _T.LONG, str(INT64_MAX), _at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", _T.LONG, str(INT64_MAX), _at_least(0)),
    ConfigDef("message.timestamp.type", _T.STRING, "CreateTime", _one_of(*_TIMESTAMP_TYPES)),
    ConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", _between(0, 1)),
    ConfigDef("min.compaction.lag.ms", _T.LONG, "0", _at_least(0)),
    ConfigDef("min.insync.replicas", _T.INT, "1", _at_least(1)),
    ConfigDef("preallocate", _T.BOOLEAN, "false"),
    ConfigDef("retention.bytes", _T.LONG, "-1"),
    ConfigDef("retention.ms", _T.LONG, "604800000", _at_least(-1)),
    # Kafka's pre-4.0 floor (LegacyRecord.RECORD_OVERHEAD_V0): tests use tiny segments.
    ConfigDef("segment.bytes", _T.INT, "1073741824", _at_least(14)),
    ConfigDef("segment.index.bytes", _T.INT, "10485760", _at_least(4)),
    ConfigDef("segment.jitter.ms", _T.LONG, "0", _at_least(0)),
    ConfigDef("segment.ms", _T.LONG, "604800000", _at_least(1)),
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
)}

# Dynamic broker configs (per broker id, or "" for the cluster-wide default).
BROKER_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    ConfigDef("compression.type", _T.STRING, "producer", _one_of(*_COMPRESSION)),
    ConfigDef("log.cleanup.policy", _T.LIST, "delete", _non_empty_list_of(*_CLEANUP)),
    ConfigDef("log.flush.interval.messages", _T.LONG, str(INT64_MAX), _at_least(1)),
    ConfigDef("log.flush.interval.ms", _T.LONG, str(INT64_MAX), _at_least(0)),
    ConfigDef("log.message.timestamp.type", _T.STRING, "CreateTime",
              _one_of(*_TIMESTAMP_TYPES)),
    ConfigDef("log.retention.bytes", _T.LONG, "-1"),
    ConfigDef("log.retention.ms", _T.LONG, "604800000", _at_least(-1)),
    ConfigDef("log.roll.ms", _T.LONG, "604800000", _at_least(1)),
    ConfigDef("log.segment.bytes", _T.INT, "1073741824", _at_least(14)),
    ConfigDef("message.max.bytes", _T.INT, "1048588", _at_least(0)),
    ConfigDef("min.insync.replicas", _T.INT, "1", _at_least(1)),
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
)}
