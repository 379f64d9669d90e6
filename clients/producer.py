"""The blocking Producer: the asyncio Producer on the shared client loop thread.

    from clients import Producer
    with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
        p.send("events", b"fire and forget")                       # 1. fire-and-forget
        metadata = p.send("events", b"sync").get(timeout=10)       # 2. synchronous
        p.send("events", b"async", callback=on_delivery)           # 3. asynchronous:
        p.send("events", b"async").add_callback(ok).add_errback(failed)  #    or the future

The three sending modes of the seed notes are one `send` used three ways. `send` runs the
serializers and the size checks in the caller's thread (so a SerializationError or a
RecordTooLargeError reaches the caller at once), then appends the record to the
accumulator right there, under the accumulator's lock (as the Java client's send does in
the caller's thread). A record that must wait (metadata of a new topic, a full buffer)
is handed to the loop thread instead, through a queue, and every record sent after it
follows it there until the queue is empty, so records keep their order. `callback(metadata, exception)` and the future's callbacks run on the loop thread,
as Kafka's run on its I/O thread: keep them short.

Back-pressure: a record that finds `buffer.memory` full waits in `send` for room (up to
`max.block.ms`), as Java's send() does, and is then appended in the caller's thread.
Records queued for the loop (behind one waiting for metadata) count against
`buffer.memory` too; `send` blocks while they would exceed it. Once the loop is only
appending queued records (none waits), `send` waits for it to finish rather than queue
behind: the loop appends them more slowly than a thread sends, so the queue would
otherwise not empty while the thread kept sending.

Not here: pushing client metrics to brokers (KIP-714, ``enable.metrics.push``). Ketch's
brokers accept pushes from clients that make them (librdkafka, Kafka's Java clients);
Ketch's own producer and consumer do not push.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from clients._blocking import LoopThread, wait_until
from clients._core.accumulator import SendCallback
from clients.clock import now_ms
from clients._core.delayed import with_delivery_time
from clients._core.config import ClientConfig, parse_config
from clients.aio.producer import Producer as AioProducer
from clients.aio.producer import RecordFuture, buffer_memory_timeout
from clients.errors import ClientClosedError, IllegalStateError, KafkaTimeoutError
from clients.records import BATCH_HEADER_SIZE
from clients.types import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition

__all__ = ["Producer", "FutureRecordMetadata"]

Callback = SendCallback
log = logging.getLogger(__name__)


class FutureRecordMetadata(RecordFuture):
    """The outcome of one blocking `send`: `get(timeout)`, `done()`, `exception()`,
    `add_callback(fn(metadata))`, `add_errback(fn(exception))`, `add_both(fn(md, exc))`.

    Made in the caller's thread before the record reaches a batch; the producer then
    `attach`es the batch and index (a RecordFuture's fields), or calls `failure` if the
    record could not be appended (unknown topic, closed producer, ...)."""

    __slots__ = ("_loop", "_error", "_listeners")

    def __init__(self, loop: asyncio.AbstractEventLoop, timestamp_ms: int, key_size: int,
                 value_size: int) -> None:
        self._batch = None        # type: ignore[assignment]  # set on the loop thread
        self._index = -1
        self._timestamp = timestamp_ms
        self._key_size = key_size
        self._value_size = value_size
        self._loop = loop
        self._error: BaseException | None = None
        self._listeners: list[Callable[[FutureRecordMetadata], Any]] | None = None

    # --- loop thread ---

    def attach(self, batch: Any, index: int, callback: Callback | None = None) -> None:
        """The producer appended the record: index ``index`` of ``batch``; ``callback``:
        send's, which the batch calls when it is done (not through this future, which the
        caller may drop)."""
        self._batch, self._index = batch, index
        if callback is not None:
            batch.add_record_callback(callback, index, self._timestamp, self._key_size,
                                      self._value_size)
        if self._listeners:
            batch.callbacks.append(lambda _b: self._fire())

    def failure(self, error: BaseException) -> None:
        """The producer could not append the record (kafka-python's Future.failure)."""
        self._error = error
        self._fire()

    def _fire(self) -> None:
        listeners, self._listeners = self._listeners or [], None
        for fn in listeners:
            try:
                fn(self)
            except Exception:  # noqa: BLE001 -- as kafka-python's Future: logged, the rest run
                log.exception("a callback of a record's future raised")

    def _listen(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """On the loop thread: call fn(self) when done (now, if it is)."""
        if self.done():
            fn(self)
            return
        if self._listeners is None:
            self._listeners = []
        first = not self._listeners
        self._listeners.append(fn)
        if first and self._batch is not None:
            self._batch.callbacks.append(lambda _b: self._fire())

    # --- any thread ---

    def done(self) -> bool:
        return self._error is not None or (self._batch is not None and self._batch.is_done)

    @property
    def is_done(self) -> bool:
        return self.done()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is acknowledged; its RecordMetadata, or its error."""
        if not self.done():
            if _on_loop_thread(self._loop):
                raise IllegalStateError(
                    "get() on an unacknowledged record from a delivery callback would block "
                    "the client's loop thread, which acknowledges it; use the callback's "
                    "arguments instead")
            event = threading.Event()
            self._loop.call_soon_threadsafe(self._listen, lambda _f: event.set())
            if not event.wait(timeout):
                raise KafkaTimeoutError(f"the record was not acknowledged within {timeout} s")
        if self._error is not None:
            raise self._error
        return RecordFuture.result(self)

    def result(self) -> RecordMetadata:
        if not self.done():
            raise IllegalStateError("the record is not acknowledged yet")
        return self.get(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:  # type: ignore[override]
        try:
            self.get(timeout)
        except KafkaTimeoutError:
            raise
        except BaseException as e:  # noqa: BLE001 -- the record's own error is the answer
            return e
        return None

    def add_done_callback(self, fn: Callable[[Any], Any]) -> None:
        self._loop.call_soon_threadsafe(self._listen, fn)

    def __await__(self):  # type: ignore[no-untyped-def]
        raise TypeError("a blocking producer's future is not awaitable; use .get(), or "
                        "clients.aio.Producer")

    def add_both(self, fn: Callback) -> FutureRecordMetadata:
        self._loop.call_soon_threadsafe(self._listen, _both_adapter(fn))
        return self

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> FutureRecordMetadata:
        return self.add_both(lambda md, error: None if error is not None else fn(md))

    def add_errback(self, fn: Callable[[BaseException], Any]) -> FutureRecordMetadata:
        return self.add_both(lambda md, error: None if error is None else fn(error))


def _both_adapter(fn: Callback) -> Callable[[FutureRecordMetadata], None]:
    def call(f: FutureRecordMetadata) -> None:
        error = f._error if f._error is not None else f._batch.record_result(f._index)[3]
        fn(None if error is not None else RecordFuture.result(f), error)
    return call


class Producer:
    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None, /,
                 **overrides: Any) -> None:
        self.config = (config if isinstance(config, ClientConfig)
                       else parse_config("producer", config, **overrides))
        self._loop_thread = LoopThread.shared()
        self._loop = self._loop_thread.loop
        self._producer = AioProducer(self.config)
        self._lock = self._producer.share_with_threads()
        self._plain_serializers = self._producer.plain_serializers
        self._size_limit = self._producer.record_size_limit - BATCH_HEADER_SIZE
        self._append = self._producer.append_record
        self._drain_busy = False    # the loop is appending handed-over records
        self._drain_waiting = False  # ... and one of them waits (metadata, buffer.memory)
        self._drained = threading.Condition(self._lock)     # told when either ends
        self._max_block_s = self.config["max.block.ms"] / 1000
        self._buffer_memory = self.config["buffer.memory"]
        # Records handed to the loop, not yet appended: (topic, key, value, partition,
        # timestamp, headers, size, future, callback).
        self._handoff: collections.deque[tuple] = collections.deque()
        self._handoff_bytes = 0
        self._handoff_room = threading.Condition()
        self._drain_task: asyncio.Task | None = None
        self._drain_scheduled = False
        self._schedule_lock = threading.Lock()
        self._closed = False
        self._transactional = self.config["transactional.id"] is not None
        self._loop_thread.run(self._producer.start(), self._max_block_s + 30)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sending ---

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None,
             callback: Callback | None = None, *, deliver_at: int | None = None,
             deliver_after: int | None = None) -> FutureRecordMetadata:
        """Queue one record and return at once (unless the buffer is full).

        `callback(metadata, exception)`, if given, is called once on the loop thread.
        `deliver_at` (ms since the epoch) / `deliver_after` (ms): delayed delivery (issue
        18): the broker appends the record to its partition only when due."""
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if deliver_at is not None or deliver_after is not None:
            headers = with_delivery_time(headers, deliver_at, deliver_after)
        if self._transactional:
            self._producer.check_send_allowed()   # outside a transaction: raised here
        if (not headers and type(value) is bytes and (key is None or type(key) is bytes)
                and self._plain_serializers):
            # The common case, without a call: bytes in, nothing to serialize.
            key_bytes, value_bytes, header_list = key, value, ()
            size = 21 + len(value) + (0 if key is None else len(key))
            if size > self._size_limit:
                self._producer.serialize(topic, key, value, headers)  # RecordTooLargeError
        else:
            key_bytes, value_bytes, header_list, size = self._producer.serialize(
                topic, key, value, headers)
        if timestamp_ms is None:
            timestamp_ms = now_ms()
        future = FutureRecordMetadata(self._loop, timestamp_ms,
                                      -1 if key_bytes is None else len(key_bytes),
                                      -1 if value_bytes is None else len(value_bytes))
        # Fast path: append here, in the caller's thread, under the accumulator's lock,
        # unless records handed to the loop earlier are still on their way (they must
        # not be overtaken) or this one must wait for metadata.
        if self._handoff or self._drain_busy:
            self._wait_for_drain()
        if not self._handoff and not self._drain_busy:
            with self._lock:
                if not self._handoff and not self._drain_busy:
                    try:
                        found = self._append(topic, key_bytes, value_bytes, partition,
                                             timestamp_ms, header_list, size)
                        if (found is None and self._producer.buffer_is_full_for(topic, size)
                                and not _on_loop_thread(self._loop)):
                            # Wait here for buffer.memory, as Java's send() does: handed
                            # to the loop, this record and every one after it would go
                            # through the slower drain until the caller paused.
                            self._producer.wait_for_memory_in_thread(size, topic)
                            found = self._append(topic, key_bytes, value_bytes, partition,
                                                 timestamp_ms, header_list, size)
                    except Exception as e:  # noqa: BLE001 -- the record's outcome, as on the loop
                        future.failure(e)
                        if callback is not None:
                            self._loop.call_soon_threadsafe(callback, None, e)
                        return future
                    if found is not None:
                        future.attach(*found, callback)
                        return future
        if self._handoff_bytes + size > self._buffer_memory and self._handoff:
            self._wait_for_handoff_room(size, topic)
        self._handoff_bytes += size
        self._handoff.append((topic, key_bytes, value_bytes, partition, timestamp_ms, header_list,
                              size, future, callback))
        # Unlocked first look: while a drain is scheduled or running it will see this
        # record (it re-checks the queue after clearing the flag; see _drain).
        if not self._drain_scheduled:
            with self._schedule_lock:
                if not self._drain_scheduled:
                    self._drain_scheduled = True
                    self._loop.call_soon_threadsafe(self._start_drain)
        return future

    def _wait_for_drain(self) -> None:
        """Wait while the loop appends records handed to it earlier, unless one of them
        waits (for metadata or buffer.memory: then this record queues behind it, and send
        returns at once). The loop appends handed-over records more slowly than a thread
        sending in a loop hands them over, so without this wait the queue would not empty
        until the sender paused, and every record would take the slower way (a topic's
        first records wait for its metadata: 195k -> 283k records/s when the sender then
        waits here once)."""
        if self._drain_waiting or _on_loop_thread(self._loop):
            return
        with self._lock:
            wait_until(self._drained,
                       lambda: (not self._handoff and not self._drain_busy) or self._drain_waiting
                       or self._closed)

    def _wait_for_handoff_room(self, size: int, topic: str) -> None:
        if _on_loop_thread(self._loop):  # a callback sending: waiting would stop the loop
            raise KafkaTimeoutError(f"no room in buffer.memory for a record of topic {topic!r} "
                                    "sent from a delivery callback")
        with self._handoff_room:
            wait_until(self._handoff_room,
                       lambda: not self._handoff or self._handoff_bytes + size <= self._buffer_memory,
                       time.monotonic() + self._max_block_s,
                       lambda: buffer_memory_timeout(self._buffer_memory, topic))

    def _start_drain(self) -> None:
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = self._loop.create_task(self._drain())

    async def _drain(self) -> None:
        """Append handed-over records in order; only a record that must wait (metadata of
        a new topic, a full buffer) makes the ones behind it wait too."""
        producer = self._producer
        append = producer.append_record
        handoff = self._handoff
        while True:
            if not handoff:
                with self._schedule_lock:
                    self._drain_scheduled = False
                # A sender may have appended after the check above and seen the flag
                # still set: look again now that it is clear.
                if not handoff:
                    return
                with self._schedule_lock:
                    if self._drain_scheduled:
                        return      # that sender scheduled another drain for it
                    self._drain_scheduled = True
            drained = 0
            while True:
                with self._lock:
                    if not handoff:
                        self._drain_busy = False
                        self._drained.notify_all()
                        break
                    (topic, key, value, partition, ts, headers, size, future,
                     callback) = handoff.popleft()
                    self._drain_busy = True
                drained += size
                try:
                    found = append(topic, key, value, partition, ts, headers, size)
                    if found is None:
                        with self._lock:
                            self._drain_waiting = True
                            self._drained.notify_all()  # senders queue behind it meanwhile
                        try:
                            found = await producer.append_record_waiting(
                                topic, key, value, partition, ts, headers, size)
                        finally:
                            self._drain_waiting = False
                except Exception as e:  # noqa: BLE001 -- the record's outcome, given to its future
                    future.failure(e)
                    if callback is not None:
                        # Through the loop, as send's own path does: a callback that raises
                        # is logged there and cannot end this drain.
                        self._loop.call_soon(callback, None, e)
                    continue
                with self._lock:   # callers' threads add callbacks to batches too
                    future.attach(*found, callback)
                if drained > 65536:
                    self._release_handoff(drained)
                    drained = 0
            self._release_handoff(drained)

    def _release_handoff(self, size: int) -> None:
        self._handoff_bytes -= size
        if self._handoff_bytes < self._buffer_memory:
            with self._handoff_room:
                self._handoff_room.notify_all()

    async def _flush(self, timeout_s: float | None) -> None:
        while self._drain_task is not None and not self._drain_task.done():
            await asyncio.shield(self._drain_task)
        await self._producer.flush(timeout_s)

    def flush(self, timeout: float | None = None) -> None:
        """Block until every record sent so far is acknowledged or failed."""
        # The drain may not have started yet for records just sent: wait for it too.
        self._loop_thread.run(self._wait_handoff_then_flush(timeout),
                              None if timeout is None else timeout + 1)

    async def _wait_handoff_then_flush(self, timeout_s: float | None) -> None:
        while self._handoff or self._drain_scheduled:
            self._start_drain()
            await asyncio.shield(self._drain_task)  # type: ignore[arg-type]
        await self._flush(timeout_s)

    def close(self, timeout: float | None = None) -> None:
        """Flush, then release connections; with a timeout that passes, unsent records
        fail with KafkaTimeoutError."""
        if self._closed:
            return
        self._closed = True

        async def go() -> None:
            try:
                while self._handoff or self._drain_scheduled:
                    self._start_drain()
                    await asyncio.shield(self._drain_task)  # type: ignore[arg-type]
            finally:
                await self._producer.close(timeout)
        self._loop_thread.run(go(), None if timeout is None else timeout + 5)

    # --- transactions (the asyncio producer's, waited for) ---

    def _run_txn(self, coro: Any, timeout: float | None) -> Any:
        return self._loop_thread.run(coro, (self._max_block_s if timeout is None else timeout) + 5)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._run_txn(self._producer.init_transactions(timeout), timeout)

    def begin_transaction(self) -> None:
        self._run_txn(self._producer.begin_transaction(), None)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        self._run_txn(self._producer.send_offsets_to_transaction(offsets, group_metadata,
                                                                 timeout), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every record sent so far (those handed to the loop too), then commit."""
        async def go() -> None:
            while self._handoff or self._drain_scheduled:
                self._start_drain()
                await asyncio.shield(self._drain_task)  # type: ignore[arg-type]
            await self._producer.commit_transaction(timeout)
        self._run_txn(go(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        async def go() -> None:
            while self._handoff or self._drain_scheduled:
                self._start_drain()
                await asyncio.shield(self._drain_task)  # type: ignore[arg-type]
            await self._producer.abort_transaction(timeout)
        self._run_txn(go(), timeout)

    def partitions_for(self, topic: str) -> list[int] | None:
        async def go() -> list[int] | None:
            if self._producer.partitions_for(topic) is None:
                await self._producer.cluster.refresh_metadata([topic],
                                                              allow_auto_topic_creation=True)
            return self._producer.partitions_for(topic)
        return self._loop_thread.run(go(), self._max_block_s)

    @property
    def metrics(self) -> dict[str, Any]:
        """The asyncio producer's counters (a snapshot)."""
        m = self._producer.metrics
        return {**m, "retries_by_error": dict(m["retries_by_error"])}

    @property
    def aio(self) -> AioProducer:
        """The asyncio producer underneath (use it only on the loop thread)."""
        return self._producer


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
