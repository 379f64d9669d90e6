"""The asyncio Producer: Kafka's producer semantics over `RecordAccumulator` and `Cluster`.

    async with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
        future = await p.send("events", b"value", key=b"k")     # queued: a RecordFuture
        metadata = await future                                   # acknowledged
        await p.send_and_wait("events", b"x")                     # both at once

`send` serializes, picks the partition (murmur2 for keys, sticky for keyless, KIP-480),
checks the record against `max.request.size` and `buffer.memory`, and appends it to the
accumulator; it waits only for metadata of a new topic and for buffer space, each up to
`max.block.ms`. One sender task drains ready batches into Produce requests, at most
`max.in.flight.requests.per.connection` per broker, and settles each partition's answer:
success, a retry (at the front of its queue, after a backoff, with a metadata refresh for
NOT_LEADER_OR_FOLLOWER and its family), a split (RECORD_TOO_LARGE for a batch of several
records), or a failure of that batch only. Idempotence (on by default, as in Kafka 3+)
asks InitProducerId once, then numbers batches per partition; the rules for retries and
epoch bumps live in `clients._core.accumulator`.

`flush()` makes every queued batch ready and waits for all batches accepted before the
call; `close()` flushes, then stops the sender. Nothing accepted is dropped silently: each
record's future ends with its metadata or its error.

Transactions (`transactional.id`, KIP-98), as Kafka's Java producer::

    await p.init_transactions()
    await p.begin_transaction()
    await p.send("out", b"v")
    await p.send_offsets_to_transaction({tp: offset}, consumer.group_metadata())
    await p.commit_transaction()        # or abort_transaction()

The decisions are `clients._core.transactions.TransactionManager`'s; this shell sends
FindCoordinator (key type 1), InitProducerId, AddPartitionsToTxn (once per sender step for
the partitions new to the transaction; nothing is sent to a partition before it is
added), AddOffsetsToTxn then TxnOffsetCommit (to the group's coordinator), and EndTxn
after a flush. An abortable error fails the commit (the user aborts); a fatal one
(PRODUCER_FENCED ...) fails every later call but `close`.
"""
from __future__ import annotations

import asyncio
import collections
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from clients._core.accumulator import (
    FAIL, RETRY_AND_BUMP, IdempotenceState, ProducerBatch, RecordAccumulator,
    record_metadata, record_size_upper_bound,
)
from clients._core.delayed import with_delivery_time
from clients._core.transactions import Outcome, TransactionManager
from clients._core.config import ClientConfig, parse_config
from clients._core.metadata import BrokerMetadata
from clients._core.partitioner import StickyPartitioner, partition_for_key
from clients.aio._cluster import Cluster, dedicated_node
from clients._blocking import wait_until
from clients.clock import now_ms
from clients.errors import (
    ClientClosedError, IllegalStateError, KafkaApiError, KafkaTimeoutError,
    NoBrokersAvailableError, RecordTooLargeError, SerializationError,
    TransactionAbortedError, UnknownTopicOrPartitionError, for_code,
)
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ERROR_INFO, ErrorCode
from clients.records import BATCH_HEADER_SIZE, CompressionType
from clients.types import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition

__all__ = ["Producer", "RecordFuture"]

PRODUCE_VERSIONS = (3, 11)          # v3: record batches v2 (magic 2)
INIT_PRODUCER_ID_VERSIONS = (0, 5)
# v4+ of AddPartitionsToTxn is the brokers' batched form; EndTxn v5 is KIP-890 part 2
# (a new epoch per transaction, with Produce v12), which Ketch's schemas do not have.
ADD_PARTITIONS_TO_TXN_VERSIONS = (0, 3)
ADD_OFFSETS_TO_TXN_VERSIONS = (0, 4)
END_TXN_VERSIONS = (0, 4)
TXN_OFFSET_COMMIT_VERSIONS = (0, 4)
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_GROUP = 0
TXN_RETRY_BACKOFF_MS = 20     # Java's sender retries CONCURRENT_TRANSACTIONS this soon
_COMPRESSION = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP,
                "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4,
                "zstd": CompressionType.ZSTD}


def _default_serializer(value: Any) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise SerializationError(f"cannot send a {type(value).__name__} without a serializer "
                             "(key.serializer / value.serializer); give bytes or str")


class RecordFuture:
    """The outcome of one `send`: awaitable, with `done()`, `result()`, `exception()` and
    `add_done_callback(fn)` (fn gets this future). Cheap: one small object per record;
    the waiting is done per batch."""

    __slots__ = ("_batch", "_index", "_timestamp", "_key_size", "_value_size",
                 "_timestamp_type")

    def __init__(self, batch: ProducerBatch, index: int, timestamp_ms: int, key_size: int,
                 value_size: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp_ms
        self._key_size = key_size
        self._value_size = value_size

    @property
    def topic_partition(self) -> TopicPartition:
        return self._batch.tp

    def done(self) -> bool:
        return self._batch.is_done

    def result(self) -> RecordMetadata:
        if not self._batch.is_done:
            raise asyncio.InvalidStateError("the record is not acknowledged yet")
        offset, log_append_time, log_start_offset, error = self._batch.record_result(self._index)
        if error is not None:
            raise error
        return record_metadata(self._batch.tp, offset, log_append_time, log_start_offset,
                               self._timestamp, self._key_size, self._value_size)

    def exception(self) -> BaseException | None:
        if not self._batch.is_done:
            raise asyncio.InvalidStateError("the record is not acknowledged yet")
        return self._batch.record_result(self._index)[3]

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Call fn(self) once the record is acknowledged or failed (at once if it is)."""
        if self._batch.is_done:
            fn(self)
        else:
            self._batch.callbacks.append(lambda _batch: fn(self))

    def __await__(self):  # type: ignore[no-untyped-def]
        if not self._batch.is_done:
            yield from _batch_waiter(self._batch).__await__()
        return self.result()


def _batch_waiter(batch: ProducerBatch) -> asyncio.Future:
    if batch.waiter is None:
        waiter = asyncio.get_running_loop().create_future()
        batch.waiter = waiter
        batch.callbacks.append(lambda _b: waiter.done() or waiter.set_result(None))
    return batch.waiter


def buffer_memory_timeout(buffer_memory: int, topic: str) -> KafkaTimeoutError:
    """A send that found no room in buffer.memory within max.block.ms."""
    return KafkaTimeoutError(f"no room in buffer.memory ({buffer_memory} bytes) for a record "
                             f"of topic {topic!r} within max.block.ms")


class Producer:
    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None, /,
                 *, rng: random.Random | None = None, **overrides: Any) -> None:
        if isinstance(config, ClientConfig):
            assert config.kind == "producer" and not overrides, "a producer config, as is"
            self.config = config
        else:
            self.config = parse_config("producer", config, **overrides)
        c = self.config
        self._rng = rng or random.Random()
        self._cluster = Cluster(c, rng=self._rng)
        self._acks: int = c["acks"]
        self._transactional_id: str | None = c["transactional.id"]
        self._idempotence = IdempotenceState(transactional=self._transactional_id is not None) \
            if c["enable.idempotence"] else None
        compression = _COMPRESSION[c["compression.type"]]
        level = {CompressionType.GZIP: None if c["compression.gzip.level"] == -1
                 else c["compression.gzip.level"],
                 CompressionType.LZ4: None if c["compression.lz4.level"] == 9
                 else c["compression.lz4.level"],
                 CompressionType.ZSTD: c["compression.zstd.level"]}.get(compression)
        self._accumulator = RecordAccumulator(
            batch_size=c["batch.size"], linger_ms=c["linger.ms"],
            buffer_memory=c["buffer.memory"], delivery_timeout_ms=c["delivery.timeout.ms"],
            retry_backoff_ms=c["retry.backoff.ms"], retry_backoff_max_ms=c["retry.backoff.max.ms"],
            compression=compression, compression_level=level, idempotence=self._idempotence)
        self._txn: TransactionManager | None = None
        if self._transactional_id is not None:
            assert self._idempotence is not None, "parse_config: transactions imply idempotence"
            self._txn = TransactionManager(self._transactional_id, c["transaction.timeout.ms"],
                                           self._idempotence)
            self._accumulator.may_send_to = self._txn.can_send_to
        self._add_partitions_task: asyncio.Task | None = None
        self._txn_coordinator_lock = asyncio.Lock()
        self._sticky = StickyPartitioner(self._rng, c["batch.size"],
                                         c["partitioner.adaptive.partitioning.enable"])
        self._key_serializer = c["key.serializer"] or _default_serializer
        self._value_serializer = c["value.serializer"] or _default_serializer
        self._plain_serializers = (self._key_serializer is _default_serializer
                                   and self._value_serializer is _default_serializer)
        self._partitioner = c["partitioner.class"]
        self._ignore_keys = c["partitioner.ignore.keys"]
        # What the sticky partitioner asks at a switch: one bound method, not a closure
        # made per keyless record.
        self._queue_sizes = self._queued_batches
        self._max_request_size = c["max.request.size"]
        self._max_block_s = c["max.block.ms"] / 1000
        self._max_in_flight = c["max.in.flight.requests.per.connection"]
        self._request_timeout_ms = c["request.timeout.ms"]
        self._retries = c["retries"]
        self._in_flight: dict[int, int] = {}
        self._connecting: set[int] = set()
        self._refresh_topics: set[str] = set()
        self._refresh_task: asyncio.Task | None = None
        self._last_refresh_ms = -(1 << 40)
        self._wake: asyncio.Event | None = None
        self._memory: asyncio.Event | None = None
        self._sender: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id: int | None = None
        # Guards the accumulator and the partitioner when other threads append
        # (share_with_threads). Always a real lock: uncontended, a C RLock costs less
        # than a no-op context manager written in Python.
        self._lock = threading.RLock()
        # Other threads blocked in send() on buffer.memory wait here (wait_for_memory_in_thread).
        self._memory_freed = threading.Condition(self._lock)
        self._threads_waiting_for_memory = 0
        self._starting: asyncio.Task | None = None
        self._closed = False
        self._fatal: BaseException | None = None
        self._pid_task: asyncio.Task | None = None
        # Counters in Kafka's producer-metrics names; retries_by_error counts failed
        # attempts that were retried, by Kafka error name.
        self.metrics: dict[str, Any] = {"batch-split-total": 0, "record-retry-total": 0,
                                        "record-error-total": 0, "epoch-bump-total": 0,
                                        "retries_by_error": collections.Counter()}
        self._size_limit = min(self._max_request_size, c["buffer.memory"])
        self._metadata_idle_ms = c["metadata.max.idle.ms"]
        self._topic_used_ms: dict[str, int] = {}
        self._next_idle_check_ms = 0
        self._counts_of: Any = None                 # the metadata view _counts is from
        # topic -> its TopicPartitions (so, its partition count), per metadata view
        self._counts: dict[str, list[TopicPartition]] = {}

    # --- lifecycle ---

    async def start(self) -> None:
        """Bootstrap (first metadata) and start the sender. Concurrent callers (several
        first sends at once) share one start."""
        if self._started:
            return
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self._start())
        try:
            await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():
                self._starting = None   # a failed start may be tried again
            raise

    @property
    def plain_serializers(self) -> bool:
        """Both serializers are the default (bytes pass through, str is UTF-8): callers may
        size and encode records without calling them."""
        return self._plain_serializers

    @property
    def record_size_limit(self) -> int:
        """Largest batch one record may make (header included): max.request.size, capped
        by buffer.memory."""
        return self._size_limit

    def share_with_threads(self) -> threading.RLock:
        """Let other threads call `append_record` (the blocking facade does): from now
        on the accumulator is used under a lock. Call before `start`."""
        assert not self._started, "share_with_threads before start"
        return self._lock

    async def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        await self._cluster.start()
        self._wake = asyncio.Event()
        self._memory = asyncio.Event()
        self._sender = asyncio.get_running_loop().create_task(self._run_sender())
        self._started = True

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    def _now_ms(self) -> int:
        """The loop's clock (monotonic; readable from any thread)."""
        loop = self._loop or asyncio.get_running_loop()
        return int(loop.time() * 1000)

    def _on_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn on the loop thread: now if this is it, else soon."""
        if threading.get_ident() == self._loop_thread_id:
            fn(*args)
        else:
            self._loop.call_soon_threadsafe(fn, *args)  # type: ignore[union-attr]

    # --- sending ---

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None, *,
                   deliver_at: int | None = None, deliver_after: int | None = None) -> RecordFuture:
        """Queue one record; the returned future resolves to its RecordMetadata.

        ``deliver_at`` (ms since the epoch) / ``deliver_after`` (ms): delayed delivery
        (issue 18, docs/delayed_delivery.md): the broker appends the record when due; the
        metadata names an offset reserved for it, the delivered copy gets a new one.

        Waits (up to max.block.ms) only for the topic's metadata and for buffer space.
        Raises at once for what can never succeed: a serializer error, a record above
        max.request.size or buffer.memory (RecordTooLargeError), a partition the topic
        does not have, a closed producer."""
        if not self._started and not self._closed:
            await self.start()
        if deliver_at is not None or deliver_after is not None:
            headers = with_delivery_time(headers, deliver_at, deliver_after)
        if (not headers and type(value) is bytes and (key is None or type(key) is bytes)
                and self._plain_serializers):
            # The common case, without a call: bytes in, nothing to serialize.
            key_bytes, value_bytes, header_list = key, value, ()
            size = 21 + len(value) + (0 if key is None else len(key))
            if size + BATCH_HEADER_SIZE > self._size_limit:
                self.serialize(topic, key, value, headers)   # raises RecordTooLargeError
        else:
            key_bytes, value_bytes, header_list, size = self.serialize(topic, key, value,
                                                                       headers)
        if timestamp_ms is None:
            timestamp_ms = now_ms()
        found = self.append_record(topic, key_bytes, value_bytes, partition, timestamp_ms,
                                   header_list, size)
        if found is not None:
            return RecordFuture(found[0], found[1], timestamp_ms,
                                -1 if key_bytes is None else len(key_bytes),
                                -1 if value_bytes is None else len(value_bytes))
        return await self.append_serialized(topic, key_bytes, value_bytes, partition,
                                            timestamp_ms, header_list, size)

    def serialize(self, topic: str, key: Any, value: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None
                  ) -> tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]:
        """(key bytes, value bytes, headers, size bound); raises SerializationError or
        RecordTooLargeError. Pure and thread-safe: the blocking facade calls it in the
        caller's thread so that these errors reach the caller at once."""
        ks, vs = self._key_serializer, self._value_serializer
        try:
            # bytes through the default serializer: no call at all (the common case)
            key_bytes = key if ks is _default_serializer and (key is None or type(key) is bytes) \
                else ks(key)
            value_bytes = value if vs is _default_serializer and type(value) is bytes \
                else vs(value)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(f"serializing the record for topic {topic!r}: {e}") from e
        if key_bytes is not None and not isinstance(key_bytes, (bytes, bytearray, memoryview)):
            raise SerializationError(f"the key serializer returned a "
                                     f"{type(key_bytes).__name__}, not bytes")
        if value_bytes is not None and not isinstance(value_bytes, (bytes, bytearray, memoryview)):
            raise SerializationError(f"the value serializer returned a "
                                     f"{type(value_bytes).__name__}, not bytes")
        header_list = list(headers) if headers else ()
        for header in header_list:
            if not (isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str)
                    and (header[1] is None
                         or isinstance(header[1], (bytes, bytearray, memoryview)))):
                raise SerializationError(f"a header of a record for topic {topic!r} is "
                                         f"{header!r}; headers are (str, bytes or None) pairs")
        size = record_size_upper_bound(key_bytes, value_bytes, header_list)
        if size + BATCH_HEADER_SIZE > self._size_limit:
            for limit, name in ((self._max_request_size, "max.request.size"),
                                (self._accumulator.buffer_memory, "buffer.memory")):
                if size + BATCH_HEADER_SIZE > limit:
                    raise RecordTooLargeError(
                        f"a record for topic {topic!r} is {size + BATCH_HEADER_SIZE} bytes "
                        f"when serialized, larger than {name} ({limit})")
        return key_bytes, value_bytes, header_list, size

    def append_record(self, topic: str, key_bytes: bytes | None, value_bytes: bytes | None,
                      partition: int | None, timestamp_ms: int,
                      headers: Sequence[tuple[str, bytes | None]], size: int
                      ) -> tuple[ProducerBatch, int] | None:
        """Append a serialized record without waiting: (its batch, its index there), or
        None when the topic's metadata is not known yet or the buffer is full (then
        `append_serialized` waits). On the loop thread, or on any thread once
        `share_with_threads` was called."""
        with self._lock:
            if self._closed or self._fatal is not None:
                if self._fatal is not None:
                    raise self._fatal
                raise ClientClosedError("the producer is closed")
            txn = self._txn
            if txn is not None:
                self.check_send_allowed()
            meta = self._cluster.metadata
            if meta is not self._counts_of:
                self._counts_of, self._counts = meta, {}
            tps = self._counts.get(topic)
            if tps is None:
                count = meta.partition_count(topic)
                if count is None:
                    return None
                tps = self._counts[topic] = [TopicPartition(topic, i) for i in range(count)]
            count = len(tps)
            acc = self._accumulator
            if acc.used_bytes + size > acc.buffer_memory and acc.used_bytes:
                return None
            sticky = False
            if partition is not None:
                if not 0 <= partition < count:
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
            elif self._partitioner is not None:
                partition = int(self._partitioner(topic, key_bytes, count))
                if not 0 <= partition < count:
                    raise UnknownTopicOrPartitionError(
                        f"partitioner.class chose partition {partition} of topic {topic!r}, "
                        f"which has {count}")
            elif key_bytes is not None and not self._ignore_keys:
                partition = partition_for_key(key_bytes, count)
            else:
                partition = self._sticky.partition(
                    topic, meta.available_partitions(topic), count, self._queue_sizes)
                sticky = True
            tp = tps[partition]
            if txn is not None and not txn.can_send_to(tp) and txn.maybe_add_partition(tp):
                # Once per partition and transaction: waking the sender for every record
                # while AddPartitionsToTxn is out cost a cross-thread wake-up per send.
                self._on_loop(self._wake.set)  # type: ignore[union-attr]
            found = acc.append_to_open(tp, timestamp_ms, key_bytes, value_bytes, headers, size)
            if found is None:
                now = self._now_ms()
                found = acc.append(tp, timestamp_ms, key_bytes, value_bytes, headers, size, now)
                if topic not in self._topic_used_ms:
                    self._on_loop(self._cluster.add_topics, [topic])  # back in the refresh
                self._topic_used_ms[topic] = now   # per new batch: enough for metadata.max.idle.ms
            batch, index, wake = found
            if sticky:
                self._sticky.on_append(topic, partition, size)
            if wake:
                self._on_loop(self._wake.set)  # type: ignore[union-attr]
            return batch, index

    def _queued_batches(self, topic: str, partition: int) -> int:
        return self._accumulator.queued_batches(TopicPartition(topic, partition))

    def append_now(self, topic: str, key_bytes: bytes | None, value_bytes: bytes | None,
                   partition: int | None, timestamp_ms: int,
                   headers: Sequence[tuple[str, bytes | None]], size: int
                   ) -> RecordFuture | None:
        """`append_record`, as a RecordFuture."""
        found = self.append_record(topic, key_bytes, value_bytes, partition, timestamp_ms,
                                   headers, size)
        if found is None:
            return None
        return RecordFuture(found[0], found[1], timestamp_ms,
                            -1 if key_bytes is None else len(key_bytes),
                            -1 if value_bytes is None else len(value_bytes))

    async def append_serialized(self, topic: str, key_bytes: bytes | None,
                                value_bytes: bytes | None, partition: int | None,
                                timestamp_ms: int, headers: Sequence[tuple[str, bytes | None]],
                                size: int) -> RecordFuture:
        """`append_now`, waiting up to max.block.ms for metadata and buffer space."""
        batch, index = await self.append_record_waiting(topic, key_bytes, value_bytes, partition,
                                                        timestamp_ms, headers, size)
        return RecordFuture(batch, index, timestamp_ms,
                            -1 if key_bytes is None else len(key_bytes),
                            -1 if value_bytes is None else len(value_bytes))

    async def append_record_waiting(self, topic: str, key_bytes: bytes | None,
                                    value_bytes: bytes | None, partition: int | None,
                                    timestamp_ms: int,
                                    headers: Sequence[tuple[str, bytes | None]],
                                    size: int) -> tuple[ProducerBatch, int]:
        """`append_record`, waiting up to max.block.ms for metadata and buffer space."""
        if not self._started and not self._closed:
            await self.start()
        deadline = asyncio.get_running_loop().time() + self._max_block_s
        while True:
            found = self.append_record(topic, key_bytes, value_bytes, partition, timestamp_ms,
                                       headers, size)
            if found is not None:
                return found
            if self._cluster.metadata.partition_count(topic) is None:
                await self._wait_on_metadata(topic, partition, deadline)
            else:
                await self._wait_for_memory(size, deadline, topic)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Sequence[tuple[str, bytes | None]] | None = None
                            ) -> RecordMetadata:
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    async def _wait_on_metadata(self, topic: str, partition: int | None, deadline: float) -> int:
        """The topic's partition count, refreshing metadata (with auto-creation allowed,
        as the Java producer asks) until known or max.block.ms passes."""
        self._cluster.add_topics([topic])
        loop = asyncio.get_running_loop()
        attempt = 0
        last_error: BaseException | None = None
        while True:
            try:
                meta = await self._cluster.refresh_metadata([topic], allow_auto_topic_creation=True)
                t = meta.topic(topic)
                if t is not None and t.error_code not in (ErrorCode.NONE,) and not for_code(
                        t.error_code).retriable:
                    raise for_code(t.error_code)(f"topic {topic!r}: "
                                                 f"{ErrorCode(t.error_code).name}")
                count = meta.partition_count(topic)
                if count is not None:
                    return count
            except NoBrokersAvailableError as e:
                last_error = e
            backoff = self._cluster.retry_backoff.backoff_ms(attempt) / 1000
            attempt += 1
            if loop.time() + backoff >= deadline:
                t = self._cluster.metadata.topic(topic)
                why = ("it does not exist and was not auto-created" if t is None or
                       t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else
                       ErrorCode(t.error_code).name)
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} not present in metadata after "
                    f"{int(self._max_block_s * 1000)} ms (max.block.ms): {why}"
                    + (f"; {last_error}" if last_error else ""))
            await asyncio.sleep(backoff)

    def buffer_is_full_for(self, topic: str, size: int) -> bool:
        """Whether `append_record` refused a record of `topic` for want of buffer.memory
        alone (its metadata is known). Under the lock."""
        return (self._cluster.metadata.partition_count(topic) is not None
                and not self._accumulator.has_room(size))

    def wait_for_memory_in_thread(self, size: int, topic: str) -> None:
        """Block this (non-loop) thread, holding the lock, until buffer.memory has room for
        `size` bytes, as Java's send() blocks on its BufferPool: up to max.block.ms, then
        KafkaTimeoutError. Meanwhile every queued batch is sendable at once."""
        acc = self._accumulator
        acc.waiting_for_memory += 1
        self._threads_waiting_for_memory += 1
        self._on_loop(self._wake.set)  # type: ignore[union-attr]
        try:
            # Woken when batches complete (_memory_may_be_free); at close, by the slices.
            wait_until(self._memory_freed,
                       lambda: acc.has_room(size) or self._closed or self._fatal is not None,
                       time.monotonic() + self._max_block_s,
                       lambda: buffer_memory_timeout(acc.buffer_memory, topic))
        finally:
            acc.waiting_for_memory -= 1
            self._threads_waiting_for_memory -= 1

    def _memory_may_be_free(self) -> None:
        """Tell senders waiting for buffer.memory to look again (on the loop thread)."""
        self._memory.set()  # type: ignore[union-attr]
        if self._threads_waiting_for_memory:
            with self._lock:
                self._memory_freed.notify_all()

    async def _wait_for_memory(self, size: int, deadline: float, topic: str) -> None:
        acc = self._accumulator
        acc.waiting_for_memory += 1
        self._wake.set()  # type: ignore[union-attr]
        try:
            while not acc.has_room(size):
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    raise buffer_memory_timeout(acc.buffer_memory, topic)
                self._memory.clear()  # type: ignore[union-attr]
                try:
                    await asyncio.wait_for(self._memory.wait(), remaining)  # type: ignore[union-attr]
                except asyncio.TimeoutError:
                    pass
        finally:
            acc.waiting_for_memory -= 1

    # --- flush and close ---

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send everything queued now, and wait until every record accepted so far is
        acknowledged or failed (linger.ms does not apply meanwhile)."""
        if not self._started:
            return
        acc = self._accumulator
        with self._lock:
            pending = list(acc.incomplete)
            if not pending:
                return
            acc.flushes_in_progress += 1
            waits = [_batch_waiter(b) for b in pending if not b.is_done]
        self._wake.set()  # type: ignore[union-attr]
        try:
            if waits:
                done, not_done = await asyncio.wait(waits, timeout=timeout_s)
                if not_done:
                    raise KafkaTimeoutError(f"flush: {len(not_done)} batches still unacknowledged "
                                            f"after {timeout_s} s")
        finally:
            with self._lock:
                acc.flushes_in_progress -= 1

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush, stop the sender, close connections. With a timeout that passes, what is
        still unsent fails with KafkaTimeoutError (nothing is dropped silently)."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        try:
            self._accumulator.closing = True
            await self.flush(timeout_s)
        except KafkaTimeoutError:
            self._abort_unsent(KafkaTimeoutError(f"producer closed after {timeout_s} s "
                                                 "with the record unsent"))
        finally:
            if self._sender is not None:
                self._sender.cancel()
                try:
                    await self._sender
                except (asyncio.CancelledError, Exception):  # noqa: BLE001
                    pass
            for task in list(self._tasks):
                task.cancel()
            for task in list(self._tasks):
                try:
                    await task
                except (asyncio.CancelledError, Exception):  # noqa: BLE001
                    pass
            self._abort_unsent(ClientClosedError("the producer closed before the record "
                                                 "was acknowledged"))
            await self._cluster.close()

    def _abort_unsent(self, error: BaseException) -> None:
        acc = self._accumulator
        with self._lock:
            for batch in acc.abort_all():
                if not batch.is_done:
                    acc.fail(batch, error)
            for batch in list(acc.incomplete):
                if not batch.is_done and batch.children is None:
                    acc.fail(batch, error)

    # --- the sender ---

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run_sender(self) -> None:
        loop = asyncio.get_running_loop()
        acc = self._accumulator
        wake = self._wake
        assert wake is not None
        while True:
            wake.clear()
            now = self._now_ms()
            try:
                with self._lock:
                    next_ms = self._sender_step(now)
            except Exception as e:  # a bug: fail loudly, through every pending record
                self._fatal = e
                self._abort_unsent(e)
                raise
            if next_ms is None:
                await wake.wait()
            elif next_ms > 0:
                handle = loop.call_later(next_ms / 1000, wake.set)
                await wake.wait()
                handle.cancel()
            else:
                await asyncio.sleep(0)
            if acc.waiting_for_memory:
                self._memory_may_be_free()

    def _sender_step(self, now: int) -> int | None:
        """One pass: expire, send what is ready. Returns ms until the next pass is
        needed (None: only when woken)."""
        acc = self._accumulator
        idem = self._idempotence
        for batch in acc.expired(now):
            self.metrics["record-error-total"] += batch.record_count
            if self._txn is not None:
                self._txn.on_batch_failed(ErrorCode.REQUEST_TIMED_OUT)
            acc.fail(batch, KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.tp}: "
                f"{now - batch.created_ms} ms passed since the batch was created "
                "(delivery.timeout.ms)"))
        if acc.waiting_for_memory:
            self._memory_may_be_free()
        if now >= self._next_idle_check_ms:
            self._forget_idle_topics(now)
        if not acc.has_queued():
            return None
        if self._txn is not None:
            if self._txn.has_error:
                # Nothing more is sent in a transaction that cannot commit (Kafka's
                # sender aborts the undrained batches with the transaction's error).
                self._fail_queued_in_error(self._txn_error("the transaction failed"))
                return None
            # The epoch is the coordinator's (InitProducerId, EndTxn): no local bump here.
            self._maybe_add_partitions()
        elif idem is not None:
            if idem.epoch_bump_required:
                self.metrics["epoch-bump-total"] += 1
            if not idem.maybe_bump_epoch() or not idem.has_producer_id:
                self._ensure_producer_id()
                return None
        meta = self._cluster.metadata
        leader_cache: dict[TopicPartition, int | None] = {}

        def leader_of(tp: TopicPartition) -> int | None:
            if tp in leader_cache:
                return leader_cache[tp]
            known = meta.leader_for(tp)
            leader = None if known is None else known[0]
            leader_cache[tp] = leader
            return leader

        nodes, next_ms, unknown = acc.ready(now, leader_of)
        if unknown:
            wait = self._request_refresh({tp.topic for tp in unknown}, now)
            next_ms = min(next_ms, wait)
        if nodes:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in acc.partitions_queued():
                leader = leader_of(tp)
                if leader in nodes:
                    by_leader.setdefault(leader, []).append(tp)
            for node in nodes:
                if self._in_flight.get(node, 0) >= self._max_in_flight:
                    continue
                if not self._cluster.is_connected(node):
                    self._connect(node)
                    continue
                # Fill the node's pipeline: up to max.in.flight requests at once.
                while self._in_flight.get(node, 0) < self._max_in_flight:
                    batches = acc.drain(node, by_leader.get(node, ()), self._max_request_size,
                                        now)
                    if not batches:
                        break
                    self._in_flight[node] = self._in_flight.get(node, 0) + 1
                    self._spawn(self._produce(node, batches))
        return None if next_ms >= 1 << 30 else next_ms

    def _forget_idle_topics(self, now: int) -> None:
        """metadata.max.idle.ms: a topic with no new batch for that long leaves the
        periodic metadata refresh; the next send to it fetches its metadata again."""
        self._next_idle_check_ms = now + min(1000, self._metadata_idle_ms)
        idle = [t for t, used in self._topic_used_ms.items()
                if now - used >= self._metadata_idle_ms]
        for topic in idle:
            del self._topic_used_ms[topic]
            self._counts.pop(topic, None)
        if idle:
            self._cluster.remove_topics(idle)

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def go() -> None:
            try:
                await self._cluster.ready(node)
            except ConnectionError:
                self._request_refresh(set(), self._now_ms())  # the broker may have moved
            finally:
                self._connecting.discard(node)
                self._wake.set()  # type: ignore[union-attr]
        self._spawn(go())

    def _request_refresh(self, topics: set[str], now: int) -> int:
        """Refresh metadata for `topics` in the background, at most once per
        retry.backoff.ms; ms until the next refresh may start."""
        self._refresh_topics |= topics
        if self._refresh_task is not None:
            return 1 << 30
        wait = self._last_refresh_ms + self.config["retry.backoff.ms"] - now
        if wait > 0:
            return wait
        self._last_refresh_ms = now
        wanted = sorted(self._refresh_topics | {tp.topic for tp in self._accumulator.partitions_queued()})
        self._refresh_topics = set()

        async def go() -> None:
            try:
                await self._cluster.refresh_metadata(wanted, allow_auto_topic_creation=True)
            except (ConnectionError, KafkaApiError):
                pass  # tried again on the next pass that needs it
            finally:
                self._refresh_task = None
                self._wake.set()  # type: ignore[union-attr]
        self._refresh_task = self._spawn(go())
        return 1 << 30

    def _ensure_producer_id(self) -> None:
        if self._pid_task is not None:
            return

        async def go() -> None:
            idem = self._idempotence
            assert idem is not None
            attempt = 0
            try:
                while not idem.has_producer_id:
                    try:
                        _, resp = await self._cluster.request(
                            None, ApiKey.INIT_PRODUCER_ID,
                            messages.InitProducerIdRequest(transactional_id=None,
                                                           transaction_timeout_ms=2147483647,
                                                           producer_id=-1, producer_epoch=-1),
                            versions=INIT_PRODUCER_ID_VERSIONS)
                        if resp.error_code == ErrorCode.NONE:
                            idem.set_producer_id(resp.producer_id, resp.producer_epoch)
                            break
                        err = for_code(resp.error_code)("InitProducerId")
                        if not err.retriable:
                            self._fatal = err
                            self._abort_unsent(err)
                            return
                    except ConnectionError:
                        pass
                    await asyncio.sleep(self._cluster.retry_backoff.backoff_ms(attempt) / 1000)
                    attempt += 1
            finally:
                self._pid_task = None
                self._wake.set()  # type: ignore[union-attr]
        self._pid_task = self._spawn(go())

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        P = messages.ProduceRequest
        by_topic: dict[str, list[Any]] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(
                P.TopicProduceData.PartitionProduceData(index=b.tp.partition, records=b.payload))
        request = P(transactional_id=self._transactional_id, acks=self._acks,
                    timeout_ms=self._request_timeout_ms,
                    topic_data=[P.TopicProduceData(name=t, partition_data=parts)
                                for t, parts in by_topic.items()])
        acc = self._accumulator
        try:
            if self._acks == 0:
                self._cluster.send_without_response(node, ApiKey.PRODUCE, request,
                                                    versions=PRODUCE_VERSIONS)
                with self._lock:
                    for b in batches:
                        acc.complete(b, -1)
                return
            _, response = await self._cluster.request(node, ApiKey.PRODUCE, request,
                                                      versions=PRODUCE_VERSIONS)
        except ConnectionError as e:
            now = self._now_ms()
            with self._lock:
                for b in batches:
                    self._retry_or_fail(b, ErrorCode.NETWORK_EXCEPTION, -1, e, now, True)
            self._request_refresh({b.tp.topic for b in batches}, now)
            return
        finally:
            self._in_flight[node] -= 1
            self._wake.set()  # type: ignore[union-attr]
        answers: dict[tuple[str, int], Any] = {}
        for topic_response in response.responses:
            for p in topic_response.partition_responses:
                answers[(topic_response.name, p.index)] = p
        with self._lock:
            refresh, moved = self._handle_answers(batches, answers)
        if moved:
            # KIP-951 (Produce v10+): the answer named the new leaders; retry there without
            # waiting for Metadata (a refresh still follows where the view did not take one).
            refresh |= self._cluster.update_leaders(moved, [
                BrokerMetadata(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints])
        if refresh:
            self._request_refresh(refresh, self._now_ms())

    def _handle_answers(self, batches: list[ProducerBatch], answers: dict[tuple[str, int], Any]
                        ) -> tuple[set[str], dict[TopicPartition, tuple[int, int]]]:
        """Each batch's answer: complete, split, retry or fail. Topics to refresh, and the
        new leaders the answers named (leader id, leader epoch)."""
        acc = self._accumulator
        now = self._now_ms()
        refresh: set[str] = set()
        moved: dict[TopicPartition, tuple[int, int]] = {}
        for b in batches:
            p = answers.get((b.tp.topic, b.tp.partition))
            if p is None:
                self._retry_or_fail(b, ErrorCode.UNKNOWN_SERVER_ERROR, -1, KafkaApiError(
                    f"the Produce response has no answer for {b.tp}"), now, False)
                continue
            code = p.error_code
            if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                acc.complete(b, p.base_offset, p.log_append_time_ms,
                             p.log_start_offset if p.log_start_offset is not None else -1)
                continue
            if code == ErrorCode.MESSAGE_TOO_LARGE and b.record_count > 1:
                acc.split_and_reenqueue(b, now)
                self.metrics["batch-split-total"] += 1
                continue
            error = for_code(code)(self._describe(b, p))
            if error.invalid_metadata:
                leader = p.current_leader
                if leader is not None and leader.leader_id >= 0:
                    moved[b.tp] = (leader.leader_id, leader.leader_epoch)
                else:
                    refresh.add(b.tp.topic)
            lso = p.log_start_offset if p.log_start_offset is not None else -1
            self._retry_or_fail(b, code, lso, error, now, error.retriable)
        return refresh, moved

    @staticmethod
    def _describe(b: ProducerBatch, p: Any) -> str:
        code = p.error_code
        name = ErrorCode(code).name if code in ERROR_INFO else f"code {code}"
        message = p.error_message or name
        if p.error_code == ErrorCode.MESSAGE_TOO_LARGE:
            return (f"{b.tp}: the broker refused a batch of {len(b.payload or b'')} bytes "
                    "(the topic's max.message.bytes or the broker's limit)")
        return f"{b.tp}: {message}"

    def _retry_or_fail(self, b: ProducerBatch, code: int, log_start_offset: int,
                       error: BaseException, now: int, retriable: bool) -> None:
        acc = self._accumulator
        if self._idempotence is not None:
            verdict = self._idempotence.on_error(b, code, log_start_offset, retriable)
            if self._txn is not None and verdict == RETRY_AND_BUMP:
                verdict = FAIL   # a transactional producer's epoch is bumped by an abort
        else:
            verdict = FAIL if not retriable or b.attempts > self._retries else "retry"
        if verdict != FAIL and now < b.deadline_ms and b.attempts <= self._retries:
            acc.reenqueue(b, now)
            self.metrics["record-retry-total"] += b.record_count
            name = ErrorCode(code).name if code in ERROR_INFO else str(code)
            self.metrics["retries_by_error"][name] += 1
        else:
            if self._txn is not None:
                self._txn.on_batch_failed(code)
            acc.fail(b, error)
            self.metrics["record-error-total"] += b.record_count

    def partitions_for(self, topic: str) -> list[int] | None:
        t = self._cluster.metadata.topic(topic)
        return None if t is None else sorted(t.partitions)

    # --- transactions ---

    def _require_txn(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("transactional methods need a transactional.id")
        if self._closed:
            raise ClientClosedError("the producer is closed")
        return self._txn

    def check_send_allowed(self) -> None:
        """A transactional producer sends only inside a transaction: raise (IllegalStateError,
        or the transaction's abortable / fatal error) otherwise, as Kafka's send() does.
        The blocking facade calls it in the caller's thread."""
        txn = self._txn
        if txn is not None:
            why = txn.check_send()
            if why is not None:
                raise self._txn_error(why)

    def _txn_error(self, why: str) -> BaseException:
        """The exception for a refused call: the fatal or abortable Kafka error itself
        (ProducerFencedError ...), else IllegalStateError."""
        txn = self._txn
        assert txn is not None
        if txn.has_error:
            return for_code(txn.last_error)(why)
        return IllegalStateError(why)

    def _txn_deadline(self, timeout_s: float | None) -> float:
        return asyncio.get_running_loop().time() + (
            self._max_block_s if timeout_s is None else timeout_s)

    async def _txn_request(self, api_key: ApiKey, body: Any, versions: tuple[int, int],
                           handle: Callable[[Any], Outcome], deadline: float, what: str,
                           key: str | None = None, key_type: int = KEY_TYPE_TRANSACTION
                           ) -> None:
        """Send ``body`` to the coordinator of ``key`` (the transactional id by default)
        until ``handle`` (the core) says DONE; raise on ABORTABLE / FATAL or at ``deadline``."""
        txn = self._txn
        assert txn is not None
        key = self._transactional_id if key is None else key
        assert key is not None
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            remaining_ms = int((deadline - loop.time()) * 1000)
            if remaining_ms <= 0:
                raise KafkaTimeoutError(f"{what} did not complete within the time allowed "
                                        "(max.block.ms); it may be called again")
            try:
                node = await self._cluster.coordinator(key, key_type, timeout_ms=remaining_ms)
                if key_type == KEY_TYPE_TRANSACTION:
                    # One request to the transaction coordinator at a time, as Java's
                    # sender: AddOffsetsToTxn sent while AddPartitionsToTxn is being
                    # written would only hear CONCURRENT_TRANSACTIONS.
                    async with self._txn_coordinator_lock:
                        _, resp = await self._cluster.request(dedicated_node(node), api_key,
                                                              body, versions=versions)
                else:
                    _, resp = await self._cluster.request(dedicated_node(node), api_key, body,
                                                          versions=versions)
                outcome = handle(resp)
            except ConnectionError:
                outcome = Outcome.LOOKUP
            if outcome is Outcome.DONE:
                return
            if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                raise self._txn_error(f"{what}: {txn.state.value}")
            if outcome is Outcome.LOOKUP:
                self._cluster.invalidate_coordinator(key, key_type)
                delay_ms = self._cluster.retry_backoff.backoff_ms(attempt)
            else:
                delay_ms = TXN_RETRY_BACKOFF_MS
            attempt += 1
            await asyncio.sleep(delay_ms / 1000)

    async def _init_producer_id(self, deadline: float) -> None:
        txn = self._txn
        assert txn is not None

        def body(version: int) -> Any:
            producer_id, producer_epoch = txn.init_producer_id_fields()
            return messages.InitProducerIdRequest(
                transactional_id=self._transactional_id,
                transaction_timeout_ms=txn.transaction_timeout_ms,
                producer_id=producer_id, producer_epoch=producer_epoch)
        await self._txn_request(
            ApiKey.INIT_PRODUCER_ID, body, INIT_PRODUCER_ID_VERSIONS,
            lambda r: txn.handle_init_producer_id_response(r.error_code, r.producer_id,
                                                           r.producer_epoch),
            deadline, "InitProducerId")

    async def init_transactions(self, timeout_s: float | None = None) -> None:
        """Register the transactional id with its coordinator (InitProducerId): fences
        older producers of the id and completes their open transaction. Call once,
        before the first transaction; after a timeout it may be called again."""
        txn = self._require_txn()
        await self.start()
        why = txn.initialize()
        if why is not None:
            raise self._txn_error(why)
        await self._init_producer_id(self._txn_deadline(timeout_s))
        self._wake.set()  # type: ignore[union-attr]

    async def begin_transaction(self) -> None:
        txn = self._require_txn()
        why = txn.begin()
        if why is not None:
            raise self._txn_error(why)

    async def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
            group_metadata: ConsumerGroupMetadata | str,
            timeout_s: float | None = None) -> None:
        """Commit a consumer's offsets as part of this transaction: visible to the group
        only if the transaction commits (AddOffsetsToTxn, then TxnOffsetCommit to the
        group's coordinator). ``group_metadata`` is ``consumer.group_metadata()``; a bare
        group id is a consumer outside group management."""
        txn = self._require_txn()
        why = txn.check_send_offsets()
        if why is not None:
            raise self._txn_error(why)
        if not offsets:
            return            # as Kafka's producer: nothing to add to the transaction
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        deadline = self._txn_deadline(timeout_s)
        await self._await_add_partitions()    # Java's sender sends AddPartitions first
        idem = txn.idempotence
        group_id = group_metadata.group_id
        await self._txn_request(
            ApiKey.ADD_OFFSETS_TO_TXN,
            messages.AddOffsetsToTxnRequest(
                transactional_id=txn.transactional_id, producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch, group_id=group_id),
            ADD_OFFSETS_TO_TXN_VERSIONS,
            lambda r: txn.handle_add_offsets_response(r.error_code), deadline, "AddOffsetsToTxn")
        T = messages.TxnOffsetCommitRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            by_topic.setdefault(tp[0], []).append(T.TxnOffsetCommitRequestPartition(
                partition_index=tp[1], committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        body = T(transactional_id=txn.transactional_id, group_id=group_id,
                 producer_id=idem.producer_id, producer_epoch=idem.producer_epoch,
                 generation_id=group_metadata.generation_id, member_id=group_metadata.member_id,
                 group_instance_id=group_metadata.group_instance_id,
                 topics=[T.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                         for t, ps in by_topic.items()])

        def handle(resp: Any) -> Outcome:
            return txn.handle_txn_offset_commit_response({
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in resp.topics for p in t.partitions})
        await self._txn_request(ApiKey.TXN_OFFSET_COMMIT, body, TXN_OFFSET_COMMIT_VERSIONS,
                                handle, deadline, "TxnOffsetCommit", group_id, KEY_TYPE_GROUP)

    async def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Flush, then commit (EndTxn). An abortable error (a record that failed, a
        consumer fenced from its group) raises it: abort the transaction then."""
        txn = self._require_txn()
        why = txn.begin_commit()
        if why is not None:
            raise self._txn_error(why)
        deadline = self._txn_deadline(timeout_s)
        await self.flush(max(0.0, deadline - asyncio.get_running_loop().time()))
        await self._await_add_partitions()
        if txn.has_error:
            raise self._txn_error("cannot commit the transaction")
        await self._end_transaction(deadline)

    async def abort_transaction(self, timeout_s: float | None = None) -> None:
        """Abort: queued records fail with TransactionAbortedError, records in flight are
        awaited, and the coordinator writes ABORT markers (EndTxn)."""
        txn = self._require_txn()
        why = txn.begin_abort()
        if why is not None:
            raise self._txn_error(why)
        deadline = self._txn_deadline(timeout_s)
        with self._lock:
            for batch in self._accumulator.abort_all():
                if not batch.is_done:
                    self._accumulator.fail(batch, TransactionAbortedError(
                        f"the transaction was aborted before the record to {batch.tp} was sent"))
        await self.flush(max(0.0, deadline - asyncio.get_running_loop().time()))
        await self._await_add_partitions()
        await self._end_transaction(deadline)
        if txn.needs_epoch_bump:
            # A batch failed for good: its sequence gap is closed by a new epoch (KIP-360).
            txn.begin_epoch_bump()
            await self._init_producer_id(deadline)

    async def _end_transaction(self, deadline: float) -> None:
        txn = self._txn
        assert txn is not None
        if not txn.needs_end_txn:
            txn.complete_transaction()   # the coordinator never heard of it
            return
        idem = txn.idempotence
        await self._txn_request(
            ApiKey.END_TXN,
            messages.EndTxnRequest(transactional_id=txn.transactional_id,
                                   producer_id=idem.producer_id,
                                   producer_epoch=idem.producer_epoch,
                                   committed=txn.committing),
            END_TXN_VERSIONS, lambda r: txn.handle_end_txn_response(r.error_code), deadline,
            "EndTxn")

    async def _await_add_partitions(self) -> None:
        task = self._add_partitions_task
        if task is not None:
            await asyncio.gather(asyncio.shield(task), return_exceptions=True)

    def _maybe_add_partitions(self) -> None:
        """Sender step: one AddPartitionsToTxn at a time, for every partition new to the
        transaction so far."""
        txn = self._txn
        assert txn is not None
        if self._add_partitions_task is not None:
            return
        partitions = txn.take_partitions_to_add()
        if not partitions:
            return
        idem = txn.idempotence
        A = messages.AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = A(v3_and_below_transactional_id=txn.transactional_id,
                 v3_and_below_producer_id=idem.producer_id,
                 v3_and_below_producer_epoch=idem.producer_epoch,
                 v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                      for t, ps in by_topic.items()])

        def handle(resp: Any) -> Outcome:
            errors = {TopicPartition(t.name, p.partition_index): p.partition_error_code
                      for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}
            for tp in partitions:    # v4+ may answer with one top-level error
                errors.setdefault(tp, resp.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
            with self._lock:         # senders in other threads add partitions meanwhile
                return txn.handle_add_partitions_response(errors)

        async def go() -> None:
            try:
                # One request; a RETRY/LOOKUP puts the partitions back for the next step.
                deadline = asyncio.get_running_loop().time() + self._request_timeout_ms / 1000
                loop_once: list[Outcome] = []

                def once(resp: Any) -> Outcome:
                    outcome = handle(resp)
                    loop_once.append(outcome)
                    return Outcome.DONE if outcome in (Outcome.RETRY, Outcome.LOOKUP) else outcome
                try:
                    await self._txn_request(ApiKey.ADD_PARTITIONS_TO_TXN, body,
                                            ADD_PARTITIONS_TO_TXN_VERSIONS, once, deadline,
                                            "AddPartitionsToTxn")
                except (KafkaApiError, KafkaTimeoutError) as e:
                    if txn.has_error:
                        self._fail_queued_in_error(e)
                    elif not loop_once:
                        with self._lock:
                            txn.handle_add_partitions_response({})   # puts them back
                if loop_once and loop_once[-1] is Outcome.LOOKUP:
                    self._cluster.invalidate_coordinator(self._transactional_id or "",
                                                         KEY_TYPE_TRANSACTION)
                if loop_once and loop_once[-1] in (Outcome.RETRY, Outcome.LOOKUP):
                    await asyncio.sleep(TXN_RETRY_BACKOFF_MS / 1000)
            finally:
                self._add_partitions_task = None
                self._wake.set()  # type: ignore[union-attr]
        self._add_partitions_task = self._spawn(go())

    def _fail_queued_in_error(self, error: BaseException) -> None:
        """The transaction cannot commit: records still queued fail now (Kafka's sender
        fails them with the abortable or fatal error) instead of waiting for a partition
        that will never be added."""
        with self._lock:
            for batch in self._accumulator.abort_all():
                if not batch.is_done:
                    self._accumulator.fail(batch, error)
