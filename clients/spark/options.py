"""The options of Spark's Kafka source and sink, parsed for the ``ketch`` data source.

Theory of operation: Spark hands a data source its options as a case-insensitive map of
strings. ``parse_source_options`` turns that map into a frozen ``SourceOptions`` once, on
the driver, and refuses bad input with one sentence naming the option (Spark's
AnalysisException wording: "Option 'x' ..."), so a typo fails the query before any task
runs. The names and meanings are those of Spark's Kafka connector
(https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html):
``kafka.*`` goes to the client with the prefix dropped, exactly one of ``subscribe`` /
``subscribePattern`` / ``assign`` says what to read, and ``startingOffsets`` /
``endingOffsets`` take ``earliest``, ``latest`` or per-partition JSON where -2 means
earliest and -1 latest. Timestamps (``startingTimestamp``, ``...ByTimestamp``) win over
offsets, as in Spark. Beyond Spark: ``commitOffsetsToGroup`` commits each finished
micro-batch's end offsets to a consumer group (``kafka.group.id``, or the group named by
the option itself); ``ketch.remote.storage`` (filesystem or s3) with that store's settings
under the broker's names (``ketch.remote.storage.fs.path``, ``ketch.remote.storage.s3.*``)
lets executors read archived ranges (tiered storage) from the store directly.

Pure: no I/O, no Spark import (the parsing is tested without a JVM).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clients.types import TopicPartition

__all__ = [
    "KetchSourceError", "SourceOptions", "SinkOptions", "OffsetSpec", "EARLIEST", "LATEST",
    "parse_source_options", "parse_sink_options", "parse_partition_offsets",
]

EARLIEST = -2       # Spark's and Kafka's sentinels in offsets JSON
LATEST = -1

# Spark's consumer settings that a user must not pass, because the source owns them
# (Spark refuses the same ones, for the same reasons).
_OWNED = {
    "auto.offset.reset": "use startingOffsets / endingOffsets instead",
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint",
    "key.deserializer": "keys are always binary; cast them in the query",
    "value.deserializer": "values are always binary; cast them in the query",
    "key.serializer": "the sink takes binary or string keys",
    "value.serializer": "the sink takes binary or string values",
    "interceptor.classes": "Ketch's client has no interceptors",
}


class KetchSourceError(ValueError):
    """Bad options or offsets: the message names what is wrong, in Spark's wording."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: ``kind`` is earliest, latest, offsets (per partition, with the
    -2/-1 sentinels), timestamps (per partition) or timestamp (one for every partition)."""
    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"          # no offset at/after a timestamp: error, or latest


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: Mapping[str, str]                # kafka.* without the prefix
    subscribe: tuple[str, ...] | None
    pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    isolation_level: str
    poll_timeout_ms: int
    commit_group: str | None                 # commitOffsetsToGroup
    # ketch.remote.storage: the store's properties under the broker's names (the kind as
    # remote.log.storage.manager.class.name); None: archived ranges through the brokers.
    remote_storage: Mapping[str, str] | None = None

    @property
    def bootstrap(self) -> str:
        return self.client["bootstrap.servers"]

    def matches(self, topic: str) -> bool:
        """Is ``topic`` one this source reads (for subscribe / subscribePattern)?"""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None   # Java's Pattern.matches
        return any(tp.topic == topic for tp in self.assign or ())


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: Mapping[str, str]
    topic: str | None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _client_props(opts: Mapping[str, str], original: Mapping[str, str]) -> dict[str, str]:
    # Client keys keep Kafka's spelling (dotted lower case), so lower-casing is harmless.
    props = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if not props.get("bootstrap.servers", "").strip():
        raise KetchSourceError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring the ketch source "
            "(host:port of one or more Ketch brokers, comma-separated)")
    for key, why in _OWNED.items():
        if key in props:
            raise KetchSourceError(f"Kafka option 'kafka.{key}' is not supported: {why}")
    return props


def _int(opts: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise KetchSourceError(f"Option '{name}' must be an integer, not {raw!r}") from None
    if value < minimum:
        raise KetchSourceError(f"Option '{name}' must be at least {minimum}, not {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise KetchSourceError(f"Option '{name}' must be true or false, not {raw!r}")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(opts: Mapping[str, str], name: str, default_ms: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default_ms
    m = _DURATION.match(raw)
    if m is None:
        raise KetchSourceError(f"Option '{name}' must be a duration such as 15m, 30s or 500ms, "
                               f"not {raw!r}")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def _json_object(name: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise KetchSourceError(f"Option '{name}' is not valid JSON ({e.msg} at character "
                               f"{e.pos}): {raw!r}") from None
    if not isinstance(value, dict):
        raise KetchSourceError(f"Option '{name}' must be a JSON object such as "
                               f'{{"topicA":{{"0":23,"1":-1}}}}, not {raw!r}')
    return value


def parse_partition_offsets(name: str, raw: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` -> {TopicPartition: offset}, checked."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(name, raw).items():
        if not isinstance(parts, dict):
            raise KetchSourceError(f"Option '{name}': topic {topic!r} must map partitions to "
                                   f"offsets, e.g. {{\"0\": 23}}, not {parts!r}")
        for p, off in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise KetchSourceError(f"Option '{name}': {p!r} of topic {topic!r} is not a "
                                       "partition number") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise KetchSourceError(f"Option '{name}': the offset of {topic}-{partition} must be "
                                       f"an integer >= -2 (-2 earliest, -1 latest), not {off!r}")
            out[TopicPartition(topic, partition)] = off
    return out


def _offset_spec(opts: Mapping[str, str], which: str, default: str, streaming: bool) -> OffsetSpec:
    """startingOffsets / endingOffsets and their timestamp forms, Spark's precedence:
    the global timestamp, then per-partition timestamps, then offsets."""
    strategy = opts.get(f"{which}offsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KetchSourceError(f"Option '{which}OffsetsByTimestampStrategy' must be error or "
                               f"latest, not {strategy!r}")
    ts = _int(opts, f"{which}Timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts, strategy=strategy)
    raw = opts.get(f"{which}offsetsbytimestamp")
    if raw is not None:
        by_ts = parse_partition_offsets(f"{which}OffsetsByTimestamp", raw)
        bad = [str(tp) for tp, t in by_ts.items() if t < 0]
        if bad:
            raise KetchSourceError(f"Option '{which}OffsetsByTimestamp': timestamps are ms since "
                                   f"the epoch (>= 0); {', '.join(bad)} has a negative one")
        return OffsetSpec("timestamps", offsets=by_ts, strategy=strategy)
    raw = opts.get(f"{which}offsets", default).strip()
    name = f"{which}Offsets"
    if raw.lower() in ("earliest", "latest"):
        kind = raw.lower()
    elif raw.startswith("{"):
        return OffsetSpec("offsets", offsets=parse_partition_offsets(name, raw))
    else:
        raise KetchSourceError(f"Option '{name}' must be earliest, latest or per-partition "
                               f'JSON such as {{"topicA":{{"0":23,"1":-1}}}}, not {raw!r}')
    return OffsetSpec(kind)


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = _lower(options)
    client = _client_props(opts, options)
    chosen = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(chosen) != 1:
        named = ", ".join(f"'{n}'" for n in chosen) if chosen else "none"
        raise KetchSourceError(
            "One of the options 'subscribe', 'subscribePattern' or 'assign' must be specified "
            f"for the ketch source (given: {named})")
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise KetchSourceError("Option 'subscribe' names no topic: give a comma-separated "
                                   "list such as 'topicA,topicB'")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise KetchSourceError(f"Option 'subscribePattern' is not a valid pattern ({e}): "
                                   f"{pattern!r}") from None
        if not pattern:
            raise KetchSourceError("Option 'subscribePattern' is empty")
    else:
        raw = _json_object("assign", opts["assign"])
        parts: list[TopicPartition] = []
        for topic, ps in raw.items():
            if not isinstance(ps, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                                   and p >= 0 for p in ps):
                raise KetchSourceError(f"Option 'assign': topic {topic!r} must map to a list of "
                                       f'partition numbers such as {{"{topic}":[0,1]}}, not {ps!r}')
            parts.extend(TopicPartition(topic, p) for p in ps)
        if not parts:
            raise KetchSourceError("Option 'assign' names no partition")
        assign = tuple(sorted(set(parts)))

    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in opts:
                raise KetchSourceError(f"Option '{name}' is for batch queries only; a streaming "
                                       "query reads on until it is stopped")
        ending = OffsetSpec("latest")
    else:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                raise KetchSourceError(f"Option '{name}' is for streaming queries only")
        ending = _offset_spec(opts, "ending", "latest", streaming)
        # Spark's rules for a batch: it starts at a fixed place and ends at one.
        if starting.kind == "latest" or (starting.kind == "offsets"
                                         and LATEST in starting.offsets.values()):
            raise KetchSourceError("Option 'startingOffsets': latest (or -1) is not allowed for "
                                   "batch queries")
        if ending.kind == "earliest" or (ending.kind == "offsets"
                                         and EARLIEST in ending.offsets.values()):
            raise KetchSourceError("Option 'endingOffsets': earliest (or -2) is not allowed for "
                                   "batch queries")

    isolation = client.get("isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KetchSourceError("Option 'kafka.isolation.level' must be read_uncommitted or "
                               f"read_committed, not {isolation!r}")

    group = opts.get("commitoffsetstogroup")
    commit_group: str | None = None
    if group is not None and group.strip().lower() != "false":
        if not streaming:
            raise KetchSourceError("Option 'commitOffsetsToGroup' is for streaming queries only")
        commit_group = client.get("group.id") if group.strip().lower() == "true" else group.strip()
        if not commit_group:
            raise KetchSourceError("Option 'commitOffsetsToGroup' is true but 'kafka.group.id' "
                                   "is not set: name the group in either option")

    max_per_trigger = _int(opts, "maxOffsetsPerTrigger", 1)
    min_per_trigger = _int(opts, "minOffsetsPerTrigger", 1)
    if max_per_trigger is not None and min_per_trigger is not None \
            and min_per_trigger > max_per_trigger:
        raise KetchSourceError(f"Option 'minOffsetsPerTrigger' ({min_per_trigger}) must not be "
                               f"larger than 'maxOffsetsPerTrigger' ({max_per_trigger})")
    return SourceOptions(
        client=client, subscribe=subscribe, pattern=pattern, assign=assign,
        starting=starting, ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60_000),
        min_partitions=_int(opts, "minPartitions", 1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", 1),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        isolation_level=isolation,
        poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", 1) or 120_000,
        commit_group=commit_group,
        remote_storage=_remote_storage(opts),
    )


REMOTE_STORAGE_OPTION = "ketch.remote.storage"
_REMOTE_STORAGE_KINDS = ("filesystem", "s3")


def _remote_storage(opts: Mapping[str, str]) -> dict[str, str] | None:
    kind = opts.get(REMOTE_STORAGE_OPTION)
    if kind is None:
        return None
    kind = kind.strip().lower()
    if kind not in _REMOTE_STORAGE_KINDS:
        raise KetchSourceError(f"Option '{REMOTE_STORAGE_OPTION}' must be filesystem or s3, "
                               f"not {kind!r}")
    props = {k: v for k, v in opts.items() if k.startswith(REMOTE_STORAGE_OPTION + ".")}
    if kind == "filesystem" and not props.get(REMOTE_STORAGE_OPTION + ".fs.path", "").strip():
        raise KetchSourceError(f"Option '{REMOTE_STORAGE_OPTION}.fs.path' is required with "
                               f"'{REMOTE_STORAGE_OPTION}'=filesystem (the archive's directory, "
                               "as the brokers' ketch.remote.storage.fs.path)")
    return {"remote.log.storage.manager.class.name": kind, **props}


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    opts = _lower(options)
    client = _client_props(opts, options)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise KetchSourceError("Option 'topic' is empty")
    return SinkOptions(client=client, topic=topic.strip() if topic else None)
