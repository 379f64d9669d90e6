"""RetryingConsumer: a group consumer whose failed records go through retry topics to a
dead-letter topic (issue 18). The routing rules and headers are ``clients._core.retry``.

    async with RetryingConsumer({"bootstrap.servers": ..., "group.id": "billing"}, "orders",
                                handle, RetryPolicy((1000, 10_000))) as rc:
        await rc.run()                    # until rc.stop() (or run(max_records=N))

``handle(record)`` (a function or a coroutine function) succeeds by returning and fails by
raising. One member of the group reads the main topic *and* its retry topics, so the
group's members share the retry work as they share the main topic's partitions.

How a poll's records are handled, per partition in offset order:

- a record whose ``ketch.deliver.at`` is in the future is not handed out: its partition
  is paused and rewound to it, and resumed when it is due (a retry topic's records are
  due in offset order, so nothing behind it is due earlier); other partitions go on.
  A Ketch broker holds such records back itself (delayed delivery,
  docs/delayed_delivery.md), so this is for brokers without it (Kafka, or
  ``ketch.delayed.delivery.enable=false``) and for clocks that disagree;
- otherwise the handler runs; if it raises, the record is written to the next retry
  topic (or the dead-letter topic) with the same key, value, partition and headers plus
  Ketch's, by an idempotent acks=all producer;
- then every forward is awaited (acknowledged), and only then are the offsets of the
  handled records committed (synchronously).

So a crash loses nothing: a record whose commit did not happen is handled again (at
least once), and a forwarded record may then be forwarded twice (its copies carry the
same ``ketch.retry.original.*`` headers, so a handler can recognise them). Exactly-once
forwarding needs transactions (issue 15) and is not done here yet.

The retry and dead-letter topics are created at start when missing, with the main
topic's partition count and replication factor. Records are handed to the handler as
bytes (no key/value deserializers: what is forwarded must be the bytes that came in).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any, Awaitable, Callable, Mapping

from clients._core.retry import RetryPolicy, dlq_topic, due_at_ms, route_failure
from clients.aio.admin import Admin, NewTopic
from clients.aio.consumer import Consumer
from clients.aio.producer import Producer
from clients.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from clients.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["RetryingConsumer", "RetryStats"]

log = logging.getLogger(__name__)

Handler = Callable[[ConsumerRecord], Any | Awaitable[Any]]

# Client properties that belong to the producer (the rest configure the consumer).
_SHARED = ("bootstrap.servers", "client.id", "security.protocol", "request.timeout.ms",
           "metadata.max.age.ms", "retry.backoff.ms", "reconnect.backoff.ms")


def _now_ms() -> int:
    return int(time.time() * 1000)


class RetryStats:
    """Counts since start: handled (the handler returned), retried (written to a retry
    topic), dead (written to the dead-letter topic), waits (a partition paused until due)."""
    __slots__ = ("handled", "retried", "dead", "waits")

    def __init__(self) -> None:
        self.handled = self.retried = self.dead = self.waits = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


class RetryingConsumer:
    def __init__(self, config: Mapping[str, Any], topic: str, handler: Handler,
                 policy: RetryPolicy = RetryPolicy(), *, clock_ms: Callable[[], int] = _now_ms) -> None:
        if "group.id" not in config:
            raise ValueError("a RetryingConsumer needs group.id: the retry topics are shared by a group")
        for key in ("key.deserializer", "value.deserializer"):
            if key in config:
                raise ValueError(f"{key}: a RetryingConsumer hands out and forwards the bytes as they came")
        self.topic = topic
        self.handler = handler
        self.policy = policy
        self.clock_ms = clock_ms
        self.stats = RetryStats()
        self._consumer_config = {**config, "enable.auto.commit": False}
        self._producer_config = {k: v for k, v in config.items() if k in _SHARED}
        self._producer_config.update({"acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._admin_config = {k: v for k, v in config.items() if k in _SHARED}
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self._partitions: dict[str, int] = {}
        self._waiting: dict[TopicPartition, int] = {}      # paused until this time (ms)
        self._stopping = asyncio.Event()

    async def __aenter__(self) -> "RetryingConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        await self._ensure_topics()
        self.producer = Producer(self._producer_config)
        await self.producer.start()
        self.consumer = Consumer(self._consumer_config)
        await self.consumer.start()
        self.consumer.subscribe(self.policy.topics(self.topic))

    async def _ensure_topics(self) -> None:
        wanted = self.policy.topics(self.topic)[1:] + [dlq_topic(self.topic)]
        async with Admin(self._admin_config) as admin:
            main = (await admin.describe_topics([self.topic]))[self.topic]
            partitions = len(main.partitions)
            rf = len(main.partitions[0].replicas) if main.partitions else -1
            self._partitions[self.topic] = partitions
            for name in wanted:
                try:
                    found = (await admin.describe_topics([name]))[name]
                    self._partitions[name] = len(found.partitions)
                    continue
                except UnknownTopicOrPartitionError:
                    pass
                try:
                    await admin.create_topics([NewTopic(name, partitions, rf)])
                    log.info("created %s (%d partitions, replication factor %d)", name, partitions, rf)
                except TopicAlreadyExistsError:
                    pass        # another member created it first
                self._partitions[name] = (len((await admin.describe_topics([name]))[name].partitions))

    def stop(self) -> None:
        """``run`` returns after the poll in progress has been handled and committed."""
        self._stopping.set()

    async def run(self, max_records: int | None = None, poll_ms: int = 500) -> None:
        """Handle records until ``stop()`` (or until ``max_records`` were handed out)."""
        while not self._stopping.is_set():
            await self.process(poll_ms)
            if max_records is not None and self.stats.handled + self.stats.retried + self.stats.dead >= max_records:
                return

    async def process(self, timeout_ms: int = 500) -> int:
        """One poll: wait for records (no longer than the next due time), handle them,
        forward failures, commit. Returns how many records were handed to the handler."""
        consumer, producer = self.consumer, self.producer
        assert consumer is not None and producer is not None, "start() first"
        now = self.clock_ms()
        assigned = consumer.assignment()
        for tp in [tp for tp in self._waiting if tp not in assigned]:
            del self._waiting[tp]           # revoked while waiting: its new owner waits
        due = [tp for tp, at in self._waiting.items() if at <= now]
        if due:
            consumer.resume(due)
            for tp in due:
                del self._waiting[tp]
        if self._waiting:
            timeout_ms = max(0, min(timeout_ms, min(self._waiting.values()) - now))
        records = await consumer.poll(timeout_ms)
        if not records:
            return 0
        now = self.clock_ms()
        blocked: set[TopicPartition] = set()
        handed = 0
        forwards: list[Any] = []
        done: dict[TopicPartition, int] = {}
        for r in records:
            tp = r.topic_partition
            if tp in blocked:
                continue
            at = due_at_ms(r.headers) if r.topic != self.topic else None
            if at is not None and at > now:
                consumer.pause([tp])
                consumer.seek(tp, r.offset)
                self._waiting[tp] = at
                blocked.add(tp)
                self.stats.waits += 1
                continue
            handed += 1
            try:
                result = self.handler(r)
                if inspect.isawaitable(result):
                    await result
                self.stats.handled += 1
            except Exception as e:      # the handler's failure is data here, not ours
                forward = route_failure(r.topic, r.partition, r.offset, r.timestamp, r.headers, e,
                                        self.policy, now)
                partition = r.partition if r.partition < self._partitions.get(forward.topic, 0) else None
                forwards.append(await producer.send(forward.topic, r.value, key=r.key, partition=partition,
                                                    headers=list(forward.headers)))
                if forward.dead:
                    self.stats.dead += 1
                    log.warning("%s-%d@%d: dead letter after %d attempts: %s", r.topic, r.partition,
                                r.offset, forward.attempt, e)
                else:
                    self.stats.retried += 1
            done[tp] = r.offset + 1
        for f in forwards:
            await f                     # acknowledged before the offsets move past them
        if done:
            await consumer.commit({tp: OffsetAndMetadata(o) for tp, o in done.items()})
        return handed

    async def close(self) -> None:
        if self.consumer is not None:
            await self.consumer.close()
        if self.producer is not None:
            await self.producer.close()

