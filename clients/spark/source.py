"""The ``ketch`` PySpark data source: Spark's Kafka source and sink in Python, over Ketch's client.

Theory of operation. Spark calls a Python data source in two places: the driver (options,
schema, planning offsets, committing) and the executors' Python workers (reading one input
partition, writing one task's rows). Both use Ketch's blocking client facades
(``clients.Admin``, ``clients.Consumer``, ``clients.Producer``), which run the asyncio core
on one loop thread per process, so each worker talks Kafka's protocol directly to the
partition leaders: there is no JVM jar and no central reader.

- Driver, batch (``KetchBatchReader``): resolve the topic partitions (an unknown topic or
  partition is an error naming it), turn starting/ending options into offsets with
  ListOffsets (earliest, latest = the high watermark or, under read_committed, the last
  stable offset; by timestamp), and hand Spark one ``OffsetRange`` per partition (split
  for ``minPartitions``).
- Driver, streaming (``KetchStreamReader``): offsets are Spark's Kafka source's JSON,
  ``{"topic": {"0": 120}}``; ``latestOffset`` reads the high watermarks (so records are
  only ever read through what the leader has committed; under
  ``kafka.isolation.level=read_committed`` the last stable offsets, so a batch never ends
  inside an open transaction, as Spark's Kafka source), picks up new partitions (read
  from their start), applies ``maxOffsetsPerTrigger`` / ``minOffsetsPerTrigger`` +
  ``maxTriggerDelay`` unless the trigger asks for everything (AvailableNow, Once), and
  ``commit`` optionally commits the batch's end offsets to a consumer group.
- Executor (``read_range``): a group-less consumer assigned to one partition seeks to the
  range's start, polls until its position reaches the end, and yields pyarrow
  RecordBatches in the Kafka source's schema. Under read_committed the consumer skips
  aborted records and transaction markers, so offsets in a range may have gaps: the
  consumer's position, not a record count, says when the range is done (not data loss).
  Records below the log start (removed by
  retention between planning and reading) fail the task, or with failOnDataLoss=false
  are skipped with a warning. A dead leader is the client's business: it refreshes
  metadata and fetches from the new leader.
- Archive (tiered storage), with ``ketch.remote.storage``: the part of a range below the
  local log that the archive holds is its own task, whose executor reads the remote
  segments from the store itself (``clients.spark.archive``); without the option, or
  when the store is not readable from an executor, the leader serves it (its fetch path
  reads the archive).
- Sink (``KetchBatchWriter`` / ``KetchStreamWriter``): each task sends its rows with an
  idempotent acks=all producer and flushes before reporting success; a failure fails the
  task and Spark retries it, so a record may be written twice but never lost
  (at-least-once, as Spark documents for its Kafka sink).

Pure parts live in ``clients.spark.options`` and ``clients.spark.planning``.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
    DataSourceStreamReader, InputPartition, WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from clients._core.config import config_keys
from clients.spark.options import (
    KetchSourceError, SinkOptions, SourceOptions, parse_sink_options, parse_source_options,
)
from clients.spark.archive import ArchiveReader, archive_spans
from clients.spark.planning import (
    ArchiveSpan, OffsetRange, checkpoint, from_checkpoint, plan_ranges, rate_limit, resolve,
    split_archived,
)
from clients.tiered.metadata import RemoteLogSegmentMetadata
from clients.types import TopicPartition

__all__ = ["KetchDataSource", "SCHEMA", "SCHEMA_WITH_HEADERS", "ARROW_SCHEMA"]

log = logging.getLogger("clients.spark")

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")
SCHEMA_WITH_HEADERS = SCHEMA + ", headers array<struct<key: string, value: binary>>"

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", pa.list_(_HEADER)))

_ROWS_PER_ARROW_BATCH = 10_000


# ------------------------------------------------------------------ client configuration

def _props_for(kind: str, props: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options a client of ``kind`` takes; keys no client knows are kept,
    so the client's own error names them."""
    mine = {k.name for k in config_keys(kind)}
    known = {k.name for other in ("producer", "consumer", "admin") for k in config_keys(other)}
    return {k: v for k, v in props.items() if k in mine or k not in known}


def _admin(props: Mapping[str, str]) -> Any:
    from clients import Admin
    return Admin(_props_for("admin", props))


class _ClusterView:
    """The driver's questions to the cluster, through one admin client."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.admin = _admin(opts.client)

    def close(self) -> None:
        self.admin.close()

    def partitions(self) -> list[TopicPartition]:
        from clients.errors import KafkaApiError
        o = self.opts
        if o.pattern is not None:
            names = [t for t in self.admin.list_topics() if o.matches(t)]
        elif o.subscribe is not None:
            names = list(o.subscribe)
        else:
            names = sorted({tp.topic for tp in o.assign or ()})
        if not names:
            return []
        try:
            described = self.admin.describe_topics(names)
        except KafkaApiError as e:
            raise KetchSourceError(f"Cannot read topics {', '.join(names)}: {e}") from None
        unknown = [n for n in names if n not in described or isinstance(described[n], BaseException)]
        if unknown:
            raise KetchSourceError(f"Unknown topic: {', '.join(unknown)} does not exist in the "
                                   f"cluster at {o.bootstrap}")
        existing = {TopicPartition(n, p.partition) for n in names for p in described[n].partitions}
        if o.assign is not None:
            missing = sorted(str(tp) for tp in o.assign if tp not in existing)
            if missing:
                raise KetchSourceError(f"Option 'assign' names partitions that do not exist: "
                                       f"{', '.join(missing)}")
            return sorted(o.assign)
        return sorted(existing)

    def bounds(self, partitions: list[TopicPartition]
               ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        from clients.admin import OffsetSpec
        if not partitions:
            return {}, {}
        iso = self.opts.isolation_level
        early = self.admin.list_offsets({tp: OffsetSpec.earliest() for tp in partitions},
                                        isolation_level=iso)
        late = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions},
                                       isolation_level=iso)
        return ({tp: r.offset for tp, r in early.items()}, {tp: r.offset for tp, r in late.items()})

    def by_time(self, partitions: list[TopicPartition], times: Mapping[TopicPartition, int]
                ) -> dict[TopicPartition, int]:
        from clients.admin import OffsetSpec
        answers = self.admin.list_offsets(
            {tp: OffsetSpec.for_timestamp(times[tp]) for tp in partitions},
            isolation_level=self.opts.isolation_level)
        return {tp: r.offset for tp, r in answers.items()}

    def archive_spans(self, starts: Mapping[TopicPartition, int]) -> dict[TopicPartition, ArchiveSpan]:
        """What the archive holds below each partition's local log (``ketch.remote.storage``),
        for reads from ``starts``; none when the remote log metadata cannot be read (the
        brokers serve it all then)."""
        try:
            spans = archive_spans(self.admin, _props_for("consumer", self.opts.client), starts)
        except Exception as e:      # noqa: BLE001 - a missing archive must not fail the query
            log.warning("ketch.remote.storage: the remote log metadata is not readable (%r); "
                        "archived ranges are read through the brokers", e)
            return {}
        for tp, span in sorted(spans.items()):
            log.info("%s: offsets [%d, %d) read from the archive directly (%d remote segments)",
                     tp, span.start, span.end, len(span.segments))
        return spans

    def resolve(self, which: str, partitions: list[TopicPartition],
                earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
                ) -> dict[TopicPartition, int]:
        spec = self.opts.starting if which == "starting" else self.opts.ending
        found = None
        if spec.kind == "timestamp":
            found = self.by_time(partitions, {tp: spec.timestamp for tp in partitions})
        elif spec.kind == "timestamps":
            known = [tp for tp in partitions if tp in spec.offsets]
            found = self.by_time(known, spec.offsets) if len(known) == len(partitions) else {}
        return resolve(spec, which, partitions, earliest, latest, found)


# ------------------------------------------------------------------ reading one range

class KetchInputPartition(InputPartition):
    """One Spark task: an offset range of one Kafka partition, and what reading needs;
    ``segments``: the remote segments to read it from directly (empty: through the broker)."""

    def __init__(self, rng: OffsetRange, opts: SourceOptions,
                 segments: tuple[RemoteLogSegmentMetadata, ...] = ()) -> None:
        super().__init__(rng)
        self.range = rng
        self.opts = opts
        self.segments = segments


def _input_partitions(view: _ClusterView, ranges: list[OffsetRange]) -> list[KetchInputPartition]:
    """The tasks: with ``ketch.remote.storage``, archived parts of the ranges apart."""
    opts = view.opts
    if opts.remote_storage is None or not ranges:
        return [KetchInputPartition(r, opts) for r in ranges]
    starts: dict[TopicPartition, int] = {}
    for r in ranges:
        tp = TopicPartition(r.topic, r.partition)
        starts[tp] = min(starts.get(tp, r.from_offset), r.from_offset)
    spans = view.archive_spans(starts)
    return [KetchInputPartition(p.range, opts, p.segments) for p in split_archived(ranges, spans)]


def _arrow(records: list, include_headers: bool) -> pa.RecordBatch:
    cols = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([r.topic for r in records], pa.string()),
        pa.array([r.partition for r in records], pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        pa.array([int(r.timestamp_type) for r in records], pa.int32()),
    ]
    schema = ARROW_SCHEMA
    if include_headers:
        cols.append(pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                             pa.list_(_HEADER)))
        schema = ARROW_SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def read_range(part: KetchInputPartition) -> Iterator[pa.RecordBatch]:
    """The records of ``part.range`` as Arrow batches (executor side): from the remote store
    when the task has segments to read (``clients.spark.archive``), and what that leaves
    through the broker."""
    rng, opts = part.range, part.opts
    if part.segments and opts.remote_storage is not None:
        reader = ArchiveReader(rng, part.segments, opts.remote_storage,
                               opts.isolation_level == "read_committed")
        pending: list = []
        for records in reader.records():
            pending += records
            if len(pending) >= _ROWS_PER_ARROW_BATCH:
                yield _arrow(pending, opts.include_headers)
                pending = []
        if pending:
            yield _arrow(pending, opts.include_headers)
        if reader.resume_at is None:
            log.info("%s-%d [%d, %d): read from the archive directly (%d bytes)", rng.topic,
                     rng.partition, rng.from_offset, rng.until_offset, reader.bytes_read)
            return
        rng = OffsetRange(rng.topic, rng.partition, reader.resume_at, rng.until_offset)
    yield from _read_through_broker(rng, opts)


def _read_through_broker(rng: OffsetRange, opts: SourceOptions) -> Iterator[pa.RecordBatch]:
    """A group-less consumer's poll loop over ``rng``."""
    from clients import Consumer
    from clients.errors import OffsetOutOfRangeError
    tp = TopicPartition(rng.topic, rng.partition)
    props = {"max.poll.records": "5000", **_props_for("consumer", opts.client),
             "enable.auto.commit": "false", "auto.offset.reset": "none"}
    props.pop("group.id", None)         # reading by offsets: no group, nothing committed
    consumer = Consumer(props)
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.from_offset)
        position, pending = rng.from_offset, []
        last_progress = time.monotonic()
        while position < rng.until_offset:
            try:
                got = consumer.poll(timeout_ms=500)
            except OffsetOutOfRangeError:
                start = consumer.beginning_offsets([tp])[tp]
                if start <= position:
                    raise
                message = (f"Records {tp} [{position}, {min(start, rng.until_offset)}) were "
                           f"removed before they were read (the log now starts at {start}); "
                           "records have been lost")
                if opts.fail_on_data_loss:
                    raise KetchSourceError(message + ". Set failOnDataLoss=false to skip them "
                                           "with a warning.") from None
                log.warning("%s: skipped (failOnDataLoss=false)", message)
                position = start
                consumer.seek(tp, start)
                continue
            for r in got:
                if r.offset >= rng.until_offset:
                    break
                pending.append(r)
            if got:
                last_progress = time.monotonic()
            position = max(position, consumer.position(tp))
            if len(pending) >= _ROWS_PER_ARROW_BATCH:
                yield _arrow(pending, opts.include_headers)
                pending = []
            if not got and time.monotonic() - last_progress > opts.poll_timeout_ms / 1000:
                raise TimeoutError(f"No records of {tp} from offset {position} within "
                                   f"kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms} "
                                   f"(reading up to {rng.until_offset})")
        if pending:
            yield _arrow(pending, opts.include_headers)
    finally:
        consumer.close()


# ------------------------------------------------------------------ batch and streaming reads

class KetchBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[KetchInputPartition]:
        view = _ClusterView(self.opts)
        try:
            return self._plan(view)
        finally:
            view.close()

    def _plan(self, view: _ClusterView) -> list[KetchInputPartition]:
        tps = view.partitions()
        earliest, latest = view.bounds(tps)
        start = view.resolve("starting", tps, earliest, latest)
        end = view.resolve("ending", tps, earliest, latest)
        for tp in tps:
            if start[tp] < earliest[tp]:
                _data_loss(self.opts, f"{tp} starts at {earliest[tp]}, after the requested "
                                      f"starting offset {start[tp]}")
                start[tp] = earliest[tp]
            if end[tp] > latest[tp]:
                raise KetchSourceError(f"Option 'endingOffsets': {tp} ends at {end[tp]}, after "
                                       f"the partition's end {latest[tp]}")
            if end[tp] < start[tp]:
                raise KetchSourceError(f"{tp}: ending offset {end[tp]} is before the starting "
                                       f"offset {start[tp]}")
        ranges = plan_ranges(start, end, self.opts.min_partitions,
                             self.opts.max_records_per_partition)
        return _input_partitions(view, ranges)

    def read(self, partition: KetchInputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)


def _data_loss(opts: SourceOptions, what: str) -> None:
    message = f"Some data may have been lost: {what}"
    if opts.fail_on_data_loss:
        raise KetchSourceError(message + ". Set failOnDataLoss=false to go on with a warning.")
    log.warning("%s (failOnDataLoss=false: going on)", message)


class KetchStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side of a streaming query; Spark keeps this object for the query's life."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._view: _ClusterView | None = None
        self._last_trigger = time.monotonic()
        self._available_now: dict[TopicPartition, int] | None = None
        self._group_committed: dict | None = None

    @property
    def view(self) -> _ClusterView:
        if self._view is None:
            self._view = _ClusterView(self.opts)
        return self._view

    def _latest(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        return self.view.bounds(self.view.partitions())

    def initialOffset(self) -> dict:
        tps = self.view.partitions()
        earliest, latest = self.view.bounds(tps)
        return checkpoint(self.view.resolve("starting", tps, earliest, latest))

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest()[1]

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # Micro-batches run one after another: ``start`` is the end of the last completed
        # batch. Committing it here (as well as in commit()) also covers a query's last
        # batch, which Spark never commit()s when Trigger.AvailableNow ends the query.
        self._commit_to_group(start)
        begin = from_checkpoint(start)
        earliest, latest = self._latest()
        if self._available_now is not None:
            # Trigger.AvailableNow: never past what was there when the query started;
            # partitions created since are left for a later query.
            latest = {tp: min(off, self._available_now[tp])
                      for tp, off in latest.items() if tp in self._available_now}
        # Partitions new to the query start at their log start (Spark's rule).
        begin_all = {tp: begin.get(tp, earliest[tp]) for tp in latest}
        end = dict(latest)
        if not isinstance(limit, ReadAllAvailable):
            waiting = sum(max(0, end[tp] - begin_all[tp]) for tp in end)
            minimum = limit.min_rows if isinstance(limit, ReadMinRows) \
                else self.opts.min_offsets_per_trigger
            if minimum is not None and waiting < minimum and \
                    (time.monotonic() - self._last_trigger) * 1000 < self.opts.max_trigger_delay_ms:
                return start
            maximum = limit.max_rows if isinstance(limit, ReadMaxRows) \
                else self.opts.max_offsets_per_trigger
            if maximum is not None:
                end = rate_limit(begin_all, end, maximum)
        for tp, off in begin.items():
            end.setdefault(tp, off)      # a partition that went away: partitions() says so
        if end != begin:
            self._last_trigger = time.monotonic()
        return checkpoint(end)

    def reportLatestOffset(self) -> dict | None:
        return checkpoint(self._latest()[1])

    def partitions(self, start: dict, end: dict) -> list[KetchInputPartition]:
        begin, finish = from_checkpoint(start), from_checkpoint(end)
        new = [tp for tp in finish if tp not in begin]
        gone = [tp for tp in begin if tp not in finish]
        if gone:
            _data_loss(self.opts, f"partitions {', '.join(map(str, sorted(gone)))} are gone")
        if new or any(finish[tp] < begin[tp] for tp in begin if tp in finish):
            earliest, _ = self.view.bounds(sorted(finish))
        for tp in new:
            begin[tp] = earliest[tp]
        for tp in list(finish):
            if finish[tp] < begin[tp]:
                _data_loss(self.opts, f"{tp}'s offset went back from {begin[tp]} to "
                                      f"{finish[tp]} (a recreated topic?)")
                begin[tp] = earliest[tp]
        ranges = plan_ranges(begin, finish, self.opts.min_partitions,
                             self.opts.max_records_per_partition)
        return _input_partitions(self.view, ranges)

    def read(self, partition: KetchInputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)

    def commit(self, end: dict) -> None:
        self._commit_to_group(end)

    def _commit_to_group(self, done: dict) -> None:
        """commitOffsetsToGroup: the group's offsets are where the query has got to."""
        if self.opts.commit_group is None or done == self._group_committed:
            return
        self.view.admin.alter_consumer_group_offsets(self.opts.commit_group, from_checkpoint(done))
        self._group_committed = dict(done)

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None


# ------------------------------------------------------------------ writing

class _Written(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


def _sink_columns(schema: StructType, opts: SinkOptions) -> None:
    """Spark's Kafka sink checks: value required; key/value string or binary; topic a
    string column or the topic option; headers and partition typed."""
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    if "value" not in types:
        raise KetchSourceError("Required attribute 'value' not found: the ketch sink writes a "
                               "'value' column (string or binary)")
    for col in ("key", "value"):
        if col in types and types[col] not in ("string", "binary"):
            raise KetchSourceError(f"{col} attribute type must be a string or binary, not "
                                   f"{types[col]}")
    if opts.topic is None and "topic" not in types:
        raise KetchSourceError("topic option required when no 'topic' attribute is present. "
                               "Use the topic option for setting a topic.")
    if "topic" in types and types["topic"] != "string":
        raise KetchSourceError(f"Topic type must be a string, not {types['topic']}")
    if "partition" in types and types["partition"] != "int":
        raise KetchSourceError(f"partition attribute type must be an int, not {types['partition']}")
    if "headers" in types and types["headers"] != "array<struct<key:string,value:binary>>":
        raise KetchSourceError("headers attribute type must be array<struct<key:string,"
                               f"value:binary>>, not {types['headers']}")


def _as_bytes(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def write_batches(batches: Iterator[pa.RecordBatch], opts: SinkOptions) -> int:
    """Send every row with an idempotent acks=all producer; return once all are acked."""
    from clients import Producer
    props = {**_props_for("producer", opts.client), "acks": "all", "enable.idempotence": "true"}
    sent = 0
    errors: list[BaseException] = []

    def on_done(_meta: Any, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)

    with Producer(props) as producer:
        for batch in batches:
            cols = {name.lower(): batch.column(i).to_pylist()
                    for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            topics = cols.get("topic", [None] * n)
            keys = cols.get("key", [None] * n)
            parts = cols.get("partition", [None] * n)
            headers = cols.get("headers", [None] * n)
            for i, value in enumerate(cols["value"]):
                topic = opts.topic or topics[i]      # the option wins, as in Spark
                if topic is None:
                    raise KetchSourceError("Null topic present in the data. Use the topic "
                                           "option for setting a default topic.")
                hs = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else None
                producer.send(topic, _as_bytes(value), key=_as_bytes(keys[i]),
                              partition=parts[i], headers=hs, callback=on_done)
                if errors:
                    raise errors[0]
            sent += n
        producer.flush()
    if errors:
        raise errors[0]
    return sent


class KetchBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Written:
        return _Written(write_batches(iterator, self.opts))


class KetchStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Written:
        return _Written(write_batches(iterator, self.opts))

    def commit(self, messages: list, batchId: int) -> None:
        """Each task flushed its records before reporting: nothing is left to do."""

    def abort(self, messages: list, batchId: int) -> None:
        """Records a failed task sent stay written (at-least-once); Spark retries the batch."""


# ------------------------------------------------------------------ the data source

class KetchDataSource(DataSource):
    """``spark.read.format("ketch")`` and friends; register with
    ``spark.dataSource.register(KetchDataSource)`` (or ``clients.spark.register(spark)``)."""

    @classmethod
    def name(cls) -> str:
        return "ketch"

    def _include_headers(self) -> bool:
        value = {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        return str(value).strip().lower() == "true"

    def schema(self) -> str:
        return SCHEMA_WITH_HEADERS if self._include_headers() else SCHEMA

    def reader(self, schema: StructType) -> KetchBatchReader:
        return KetchBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> KetchStreamReader:
        return KetchStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KetchBatchWriter:
        opts = parse_sink_options(self.options)
        _sink_columns(schema, opts)
        return KetchBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KetchStreamWriter:
        opts = parse_sink_options(self.options)
        _sink_columns(schema, opts)
        return KetchStreamWriter(opts)
