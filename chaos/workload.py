"""Workloads: producers that log every attempt, readers of the final log, replica files.

Theory of operation
-------------------
The workload is kept apart from the faults (Kafka's trogdor pairs a workload spec with a
fault spec the same way). Every record a producer sends is an ``Attempt`` in a shared
``History``: its producer, a per-producer sequence number (the value is
``b"<producer>:<seq>"``, so a record found in the log names its attempt), the partition,
when it was sent and how it ended:

- ``acked``: the broker acknowledged it (with the offset it was told; acks=0 sends count
  as acked at offset -1, since such a producer is never told otherwise);
- ``failed``: the broker said no in a way that means "not written" (NOT_LEADER,
  NOT_ENOUGH_REPLICAS... after retries ran out);
- ``unknown``: the outcome was never learned (a connection lost or a request timed out
  after the request may have been written, REQUEST_TIMED_OUT,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND).

Producers:

- ``KetchProducer``: Ketch's own codec (``clients.connection``, ``clients.protocol``,
  ``clients.records.build_batch``) on an asyncio loop in a thread. acks 0/1/all,
  optionally idempotent (InitProducerId, a sequence per partition, the same bytes on a
  retry), one batch in flight per partition so a producer's order is its sequence order.
  It can be pinned to one broker (N10 keeps writing to an isolated leader) and routed
  through proxies (N6).
- ``ConfluentProducer``: librdkafka through confluent-kafka, with delivery reports.

After the faults heal, ``read_partition`` reads a partition from its log start to its
high watermark (Fetch from the leader, CRCs checked), and ``replica_batches`` reads one
replica's segment files from disk, for the byte-for-byte comparison below the HW.
"""
from __future__ import annotations

import asyncio
import glob
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from chaos.cluster import ChaosCluster, wait_until
from clients.clock import now_ms
from clients.connection import KafkaConnection, open_stream
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import Record, RecordError, build_batch, decode_batch, iter_batches

log = logging.getLogger(__name__)

__all__ = [
    "ACKED", "FAILED", "UNKNOWN", "Attempt", "ConfluentProducer", "History", "KetchProducer",
    "ReplicaBatch", "read_partition", "replica_batches", "parse_value",
]

ACKED = "acked"
FAILED = "failed"
UNKNOWN = "unknown"
PENDING = "pending"

# The broker refused the write: nothing was appended.
NOT_WRITTEN = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.INVALID_RECORD, ErrorCode.PRODUCER_FENCED,
}
# Retrying may help.
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.CORRUPT_MESSAGE,
}


def make_value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq}".encode()


def parse_value(value: bytes | None) -> tuple[str, int] | None:
    """(producer, seq) of a value written by this workload, or None (a phantom)."""
    if value is None:
        return None
    name, sep, seq = value.decode(errors="replace").rpartition(":")
    if not sep or not seq.isdigit():
        return None
    return name, int(seq)


@dataclass(slots=True)
class Attempt:
    producer: str
    seq: int
    topic: str
    partition: int
    t_send: float                       # time.monotonic()
    outcome: str = PENDING
    offset: int = -1                    # the offset the producer was told (acked)
    error: str | None = None
    t_done: float | None = None
    ambiguous: bool = False             # some try may have been written
    # When the last try was sent (KetchProducer; None where the client does not tell, as
    # librdkafka's retries): N11 judges acks by when their request left.
    t_try: float | None = None

    @property
    def value(self) -> bytes:
        return make_value(self.producer, self.seq)


@dataclass
class History:
    """Every attempt of every producer, and the faults as they happened."""
    attempts: list[Attempt] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def new(self, producer: str, seq: int, topic: str, partition: int) -> Attempt:
        a = Attempt(producer, seq, topic, partition, time.monotonic())
        with self._lock:
            self.attempts.append(a)
        return a

    def discard(self, attempt: Attempt) -> None:
        """Forget an attempt that never left the producer (its buffer was full)."""
        with self._lock:
            self.attempts.remove(attempt)

    def finish(self, attempt: Attempt, outcome: str, offset: int = -1, error: str | None = None) -> None:
        with self._lock:
            attempt.outcome = outcome
            attempt.offset = offset
            attempt.error = error
            attempt.t_done = time.monotonic()

    def event(self, text: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), text))

    def count(self, outcome: str, partition: int | None = None, producer: str | None = None) -> int:
        with self._lock:
            return sum(1 for a in self.attempts if a.outcome == outcome
                       and (partition is None or a.partition == partition)
                       and (producer is None or a.producer == producer))

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self.attempts)

    def errors(self, producer: str | None = None) -> dict[str, int]:
        """How often each error was seen (final outcomes and retried tries)."""
        out: dict[str, int] = {}
        with self._lock:
            for a in self.attempts:
                if a.error and (producer is None or a.producer == producer):
                    for e in a.error.split(","):
                        name, _, count = e.partition("*")
                        out[name] = out.get(name, 0) + int(count or 1)
        return out


# ---------------------------------------------------------------- Ketch's own producer


class _Batch:
    __slots__ = ("attempts", "data", "base_sequence", "tries", "errors", "first_send")

    def __init__(self, attempts: list[Attempt], data: bytes, base_sequence: int) -> None:
        self.attempts = attempts
        self.data = data
        self.base_sequence = base_sequence
        self.tries = 0
        self.errors: list[str] = []
        self.first_send = time.monotonic()


def _note_error(errors: list[str], name: str) -> None:
    """Errors of a batch's tries, repeats folded: ``NAME*count``."""
    if errors and errors[-1].split("*")[0] == name:
        head, _, count = errors[-1].partition("*")
        errors[-1] = f"{head}*{int(count or 1) + 1}"
    else:
        errors.append(name)


class KetchProducer:
    """Ketch's wire codec, acks 0/1/all, optionally idempotent; a thread with its own loop.

    ``send(partition, count)`` blocks until those records are resolved; ``start(...)``
    produces in the background until ``stop()``. ``pin_broker`` sends everything to that
    broker whatever Metadata says; ``route`` maps (host, port) to the address dialled."""

    def __init__(self, cluster: ChaosCluster, history: History, topic: str, name: str = "ketch",
                 *, acks: int = -1, idempotent: bool = False, records_per_batch: int = 1,
                 delivery_timeout_s: float = 60.0, request_timeout_s: float = 10.0,
                 retry_backoff_s: float = 0.1, pin_broker: int | None = None,
                 route: dict[tuple[str, int], tuple[str, int]] | None = None) -> None:
        assert acks in (-1, 0, 1)
        self.cluster = cluster
        self.security = cluster.security        # TLS and the admin login on a secured cluster
        self.history = history
        self.topic = topic
        self.name = name
        self.acks = acks
        self.idempotent = idempotent
        self.records_per_batch = records_per_batch
        self.delivery_timeout_s = delivery_timeout_s
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.pin_broker = pin_broker
        self.route = route or {}
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq = 0
        self._sequences: dict[int, int] = {}
        self._leaders: dict[int, int] = {}
        self._addresses: dict[int, tuple[str, int]] = {b.id: ("127.0.0.1", b.port)
                                                        for b in cluster.spec.brokers}
        self._conns: dict[int, KafkaConnection] = {}
        self._init_lock: asyncio.Lock | None = None
        self._closed = False
        # Every try's error so far, also of batches still being retried.
        self.error_counts: dict[str, int] = {}
        self._stop = threading.Event()
        self._bg: list[asyncio.Future] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"producer-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ public, blocking

    def _call(self, coro: Any, timeout_s: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def send(self, partition: int, count: int = 1) -> list[Attempt]:
        """Produce ``count`` records to ``partition`` (batches of ``records_per_batch``),
        one batch at a time; returns their attempts, resolved."""
        return self._call(self._send_many(partition, count))

    def start(self, partitions: Iterable[int], interval_s: float = 0.01) -> None:
        """Produce to each partition in the background, a batch every ``interval_s``."""
        self._stop.clear()
        for p in partitions:
            self._bg.append(asyncio.run_coroutine_threadsafe(self._background(p, interval_s), self._loop))

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop background producing; in-flight batches are resolved first."""
        self._stop.set()
        for f in self._bg:
            f.result(timeout_s if timeout_s is not None else self.delivery_timeout_s + 30)
        self._bg = []

    def close(self) -> None:
        self._stop.set()
        self._closed = True     # retry loops give up: their records end as unknown/failed
        if self._thread.is_alive():
            try:
                self._call(self._close_conns(), 10)
            except Exception:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> "KetchProducer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    async def _close_conns(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        # A cancel can be swallowed inside wait_for (3.11); the retry loops also stop on
        # _closed, so this wait is short.
        await asyncio.wait(tasks, timeout=5) if tasks else None

    async def _background(self, partition: int, interval_s: float) -> None:
        while not self._stop.is_set():
            await self._send_batch(partition)
            await asyncio.sleep(interval_s)

    async def _send_many(self, partition: int, count: int) -> list[Attempt]:
        out: list[Attempt] = []
        while len(out) < count:
            n = min(self.records_per_batch, count - len(out))
            out += await self._send_batch(partition, n)
        return out

    async def _conn(self, broker_id: int) -> KafkaConnection:
        conn = self._conns.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        host, port = self._addresses[broker_id]
        host, port = self.route.get((host, port), (host, port))
        reader, writer = await open_stream(host, port, self.security, 5)
        conn = KafkaConnection(reader, writer, client_id=f"chaos-{self.name}")
        try:
            # A paused broker accepts connections (the kernel does) but never answers.
            await asyncio.wait_for(conn.negotiate_versions(), min(5.0, self.request_timeout_s))
            if self.security.sasl_mechanism is not None:
                await asyncio.wait_for(conn.sasl_authenticate(self.security),
                                       min(5.0, self.request_timeout_s))
        except BaseException:
            conn.close()
            raise
        self._conns[broker_id] = conn
        return conn

    def _drop(self, broker_id: int) -> None:
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            conn.close()

    async def _refresh_metadata(self, suspect: int | None = None) -> None:
        """Ask the brokers in turn, the one that just failed us (``suspect``) last."""
        ids = [b for b in self.cluster.broker_ids if b not in (self.pin_broker, suspect)]
        # A partition long without a leader leaves suspect = -1 (NO_LEADER): not a broker.
        ids += [b for b in (suspect, self.pin_broker) if b is not None and b >= 0 and b not in ids]
        for b in ids:
            try:
                conn = await self._conn(b)
                resp = await conn.request(ApiKey.METADATA, 9, messages.MetadataRequest(
                    topics=[messages.MetadataRequest.MetadataRequestTopic(name=self.topic)],
                    allow_auto_topic_creation=False), timeout_s=min(5.0, self.request_timeout_s))
            except (ConnectionError, OSError, asyncio.TimeoutError):
                self._drop(b)
                continue
            for t in resp.topics:
                for p in t.partitions:
                    self._leaders[p.partition_index] = p.leader_id
            return

    async def _init_producer_id(self) -> None:
        # Partitions produce concurrently: one InitProducerId for all of them.
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            await self._init_producer_id_locked()

    async def _init_producer_id_locked(self) -> None:
        while self.producer_id < 0 and not self._stop.is_set():
            for b in self.cluster.broker_ids:
                try:
                    conn = await self._conn(b)
                    resp = await conn.request(ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
                        transactional_id=None, transaction_timeout_ms=60000,
                        producer_id=self.producer_id, producer_epoch=self.producer_epoch),
                        timeout_s=self.request_timeout_s)
                except (ConnectionError, OSError, asyncio.TimeoutError):
                    self._drop(b)
                    continue
                if resp.error_code == ErrorCode.NONE:
                    self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                    return
            await asyncio.sleep(self.retry_backoff_s)

    def _build(self, partition: int, count: int) -> _Batch:
        attempts = []
        for _ in range(count):
            attempts.append(self.history.new(self.name, self._next_seq, self.topic, partition))
            self._next_seq += 1
        base_sequence = -1
        if self.idempotent:
            base_sequence = self._sequences.get(partition, 0)
            self._sequences[partition] = (base_sequence + count) & 0x7FFFFFFF
        now = now_ms()
        data = build_batch(
            [Record(offset=i, timestamp=now, key=self.name.encode(), value=a.value)
             for i, a in enumerate(attempts)],
            producer_id=self.producer_id if self.idempotent else -1,
            producer_epoch=self.producer_epoch if self.idempotent else -1,
            base_sequence=base_sequence)
        return _Batch(attempts, data, base_sequence)

    async def _send_batch(self, partition: int, count: int | None = None) -> list[Attempt]:
        if self.idempotent and self.producer_id < 0:
            await self._init_producer_id()
        batch = self._build(partition, count or self.records_per_batch)
        deadline = batch.first_send + self.delivery_timeout_s
        ambiguous = False
        last_error = "no try"
        suspect: int | None = None
        while True:
            leader = self.pin_broker if self.pin_broker is not None else self._leaders.get(partition, -1)
            if leader < 0:
                await self._refresh_metadata(suspect)
                leader = self._leaders.get(partition, -1)
            code: int | None = None
            if leader >= 0:
                batch.tries += 1
                sent = time.monotonic()
                for a in batch.attempts:
                    a.t_try = sent
                try:
                    code, offset = await self._produce(leader, partition, batch)
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    self._drop(leader)
                    ambiguous = True     # the request may have been written
                    last_error = type(e).__name__
                    _note_error(batch.errors, last_error)
                    self.error_counts[last_error] = self.error_counts.get(last_error, 0) + 1
                else:
                    if code == ErrorCode.NONE:
                        for i, a in enumerate(batch.attempts):
                            a.ambiguous = ambiguous
                            self.history.finish(a, ACKED, offset + i if offset >= 0 else -1,
                                                ",".join(batch.errors) or None)
                        return batch.attempts
                    last_error = ErrorCode(code).name
                    _note_error(batch.errors, last_error)
                    self.error_counts[last_error] = self.error_counts.get(last_error, 0) + 1
                    if code not in NOT_WRITTEN:
                        ambiguous = True
                    if code not in RETRIABLE:
                        break
            if time.monotonic() >= deadline or self._closed:
                break
            if self.pin_broker is None:
                suspect = self._leaders.pop(partition, None)
            await asyncio.sleep(self.retry_backoff_s)
        outcome = UNKNOWN if ambiguous else FAILED
        for a in batch.attempts:
            a.ambiguous = ambiguous
            self.history.finish(a, outcome, -1, ",".join(batch.errors) or last_error)
        if self.idempotent and code is not None and code not in RETRIABLE:
            # The sequence is broken for this partition: start a new epoch (KIP-360).
            self.producer_id = -1
            self._sequences.clear()
        return batch.attempts

    async def _produce(self, broker_id: int, partition: int, batch: _Batch) -> tuple[int, int]:
        conn = await self._conn(broker_id)
        version = conn.pick_version(ApiKey.PRODUCE, 3, 9)
        cls = messages.ProduceRequest
        req = cls(transactional_id=None, acks=self.acks, timeout_ms=int(self.request_timeout_s * 1000),
                  topic_data=[cls.TopicProduceData(name=self.topic, partition_data=[
                      cls.TopicProduceData.PartitionProduceData(index=partition, records=batch.data)])])
        if self.acks == 0:
            conn.send_without_response(ApiKey.PRODUCE, version, req)
            await conn.drain()
            return ErrorCode.NONE, -1
        resp = await conn.request(ApiKey.PRODUCE, version, req, timeout_s=self.request_timeout_s + 5)
        p = resp.responses[0].partition_responses[0]
        return p.error_code, p.base_offset


# ---------------------------------------------------------------- confluent-kafka


class ConfluentProducer:
    """librdkafka (confluent-kafka) producing numbered records round-robin over
    ``partitions`` in a thread; every delivery report resolves an attempt."""

    def __init__(self, cluster: ChaosCluster, history: History, topic: str, name: str = "confluent",
                 *, acks: str = "all", idempotent: bool = True, rate: int = 500,
                 bootstrap: str | None = None, extra: dict[str, Any] | None = None) -> None:
        self.history = history
        self.topic = topic
        self.name = name
        self.rate = rate
        self.config = {**cluster.client_props,
                       "bootstrap.servers": bootstrap or cluster.bootstrap_servers, "acks": acks,
                       "enable.idempotence": idempotent, "linger.ms": 2,
                       "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                       "retry.backoff.ms": 50, "metadata.max.age.ms": 3000,
                       "topic.metadata.refresh.interval.ms": 1000, "log_level": 2,
                       "reconnect.backoff.max.ms": 1000,
                       # Requests to a paused broker give up after 10 s, not librdkafka's 60.
                       "socket.timeout.ms": 10000, **(extra or {})}
        self.unflushed = -1
        self._partitions: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = 0

    def start(self, partitions: Iterable[int]) -> None:
        self._partitions = list(partitions)
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.name}", daemon=True)
        self._thread.start()

    def _on_delivery(self, attempt: Attempt, err: Any, msg: Any) -> None:
        if err is None:
            self.history.finish(attempt, ACKED, msg.offset())
            return
        # librdkafka retries on its own; an earlier try may have been written even when
        # the last error says "not written", so a failed delivery is never "failed" here.
        self.history.finish(attempt, UNKNOWN, -1, err.name())

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(self.config)
        started = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            p = self._partitions[self._seq % len(self._partitions)]
            attempt = self.history.new(self.name, self._seq, self.topic, p)
            try:
                producer.produce(self.topic, key=self.name.encode(), value=attempt.value, partition=p,
                                 on_delivery=lambda err, msg, a=attempt: self._on_delivery(a, err, msg))
            except BufferError:
                self.history.discard(attempt)
                producer.poll(0.05)
                continue
            self._seq += 1
            sent += 1
            ahead = sent / self.rate - (time.monotonic() - started)
            producer.poll(max(0.0, ahead))
        self.unflushed = producer.flush(90)
        # Anything never reported is unknown: it may or may not have been written.
        for a in self.history.snapshot():
            if a.producer == self.name and a.outcome == PENDING:
                self.history.finish(a, UNKNOWN, -1, "not flushed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(150)
            assert not self._thread.is_alive(), "the confluent producer thread did not finish"


# ---------------------------------------------------------------- reading back


@dataclass(frozen=True, slots=True)
class ReadRecord:
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class PartitionRead:
    records: list[ReadRecord]
    high_watermark: int
    log_start_offset: int
    corrupt_batches: int = 0      # batches served with a bad CRC (must stay 0)
    leader: int = -1


def read_partition(cluster: ChaosCluster, topic: str, partition: int, timeout_s: float = 60.0) -> PartitionRead:
    """Every record from the log start to the high watermark, read from the leader with
    Fetch (as a consumer, replica id -1). The HW is taken once, at the start."""
    deadline = time.monotonic() + timeout_s
    leader = cluster.leader_of(topic, partition, timeout_s)
    hw = wait_until(lambda: cluster.high_watermark(topic, partition) + 1, timeout_s,
                    f"{topic}-{partition}'s high watermark") - 1
    records: list[ReadRecord] = []
    corrupt = 0
    offset = 0
    log_start = 0
    cls = messages.FetchRequest
    while offset < hw:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic}-{partition}: at {offset} of {hw} after {timeout_s}s")
        req = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[cls.FetchTopic(topic=topic, partitions=[
                      cls.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                    fetch_offset=offset, log_start_offset=-1,
                                                    partition_max_bytes=4 << 20)])])
        try:
            resp = cluster.ask(cluster.port(leader), ApiKey.FETCH, 11, req, timeout_s=10)
        except OSError:
            time.sleep(0.2)
            leader = cluster.leader_of(topic, partition, timeout_s)
            continue
        p = resp.responses[0].partitions[0]
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and offset == 0 and p.log_start_offset > 0:
            offset = log_start = p.log_start_offset
            continue
        if p.error_code != ErrorCode.NONE:
            time.sleep(0.2)
            leader = cluster.leader_of(topic, partition, timeout_s)
            continue
        log_start = p.log_start_offset if offset == 0 else log_start
        data = bytes(p.records or b"")
        if not data:
            if p.high_watermark < hw:      # a new leader with a lower HW (an unclean election)
                hw = p.high_watermark
            else:
                time.sleep(0.1)
            continue
        try:
            positions = [pos for pos, _ in iter_batches(data, partial_tail_ok=True)]
        except RecordError:
            corrupt += 1
            positions = [pos for pos, _ in iter_batches(data, partial_tail_ok=True, check_crc=False)]
        for pos in positions:
            batch = decode_batch(memoryview(data), pos, check_crc=False)
            if batch.header.is_control:
                offset = max(offset, batch.header.next_offset)
                continue
            for r in batch.records:
                if offset <= r.offset < hw:
                    records.append(ReadRecord(r.offset, r.key, r.value))
            offset = max(offset, batch.header.next_offset)
    return PartitionRead(records, hw, log_start, corrupt, leader)


@dataclass(frozen=True, slots=True)
class ReplicaBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    raw: bytes


def replica_batches(data_dir: str, topic: str, partition: int) -> list[ReplicaBatch]:
    """Every whole batch in one replica's segment files, in offset order (a torn tail,
    a batch being written, is left out)."""
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log"))):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:      # deleted by retention or a truncation meanwhile
            continue
        try:
            for pos, h in iter_batches(data, partial_tail_ok=True, check_crc=False):
                out.append(ReplicaBatch(h.base_offset, h.last_offset, h.partition_leader_epoch,
                                        bytes(data[pos:pos + h.size_in_bytes])))
        except RecordError:
            continue
    out.sort(key=lambda b: b.base_offset)
    return out


def log_end_on_disk(cluster: ChaosCluster, broker_id: int, topic: str, partition: int) -> int:
    batches = replica_batches(cluster.node(broker_id).data_dir, topic, partition)
    return batches[-1].last_offset + 1 if batches else 0


def checkpointed_high_watermark(cluster: ChaosCluster, broker_id: int, topic: str, partition: int) -> int | None:
    """The HW a broker last wrote to its replication-offset-checkpoint, or None."""
    path = os.path.join(cluster.node(broker_id).data_dir, "replication-offset-checkpoint")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
            return int(parts[2])
    return None


# ---------------------------------------------------------------- group consumers


class WorkerProcess:
    """A worker process of the chaos package (``python -m chaos.<module>``) and its log
    file. Stopped by pid: ``kill`` is SIGKILL, ``terminate`` is SIGTERM (a clean exit)."""

    module = ""

    def __init__(self, out_path: str, args: list[str]) -> None:
        self.out_path = out_path
        self.args = args
        self.proc: Any = None

    def start(self):  # type: ignore[no-untyped-def]
        import subprocess
        import sys
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        log_path = self.out_path + ".stderr"
        with open(log_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args],
                                         stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.running:
            os.kill(self.proc.pid, 9)
        if self.proc is not None:
            self.proc.wait(10)

    def terminate(self, timeout_s: float = 20.0) -> None:
        import subprocess
        if self.running:
            os.kill(self.proc.pid, 15)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def lines(self) -> list[str]:
        try:
            with open(self.out_path) as f:
                text = f.read()
        except FileNotFoundError:
            return []
        lines = text.split("\n")
        return lines[:-1]       # the last piece may be a line being written


class ConsumerWorker(WorkerProcess):
    """One ``chaos.consumer_worker`` process (confluent-kafka in a consumer group) and
    its processing log; ``terminate`` leaves the group cleanly."""

    module = "chaos.consumer_worker"

    def __init__(self, bootstrap: str, topic: str, group: str, out_path: str, *,
                 auto_commit_ms: int = 0, process_ms: float = 10.0, batch: int = 20,
                 client_properties: str | None = None) -> None:
        super().__init__(out_path, [
            "--bootstrap", bootstrap, "--group", group, "--topic", topic, "--out", out_path,
            "--auto-commit-ms", str(auto_commit_ms), "--process-ms", str(process_ms),
            "--batch", str(batch),
            *(["--client-properties", client_properties] if client_properties else [])])

    def processed(self) -> list[tuple[int, int, str]]:
        out = []
        for line in self.lines():
            if line.startswith("P "):
                _, p, o, v = line.split(" ", 3)
                out.append((int(p), int(o), v))
        return out

    def uncommitted(self) -> int:
        """Records processed since the last successful commit."""
        n = 0
        for line in self.lines():
            if line.startswith("P "):
                n += 1
            elif line == "C":
                n = 0
        return n


class TxnWorker(WorkerProcess):
    """One ``chaos.txn_worker`` process: consume-transform-produce in transactions
    (confluent-kafka), its story in the log file (see that module)."""

    module = "chaos.txn_worker"

    def __init__(self, bootstrap: str, group: str, input_topic: str, output_topic: str,
                 transactional_id: str, out_path: str, *, batch: int = 20, process_ms: float = 5.0,
                 client_properties: str | None = None) -> None:
        super().__init__(out_path, [
            "--bootstrap", bootstrap, "--group", group, "--input", input_topic,
            "--output", output_topic, "--transactional-id", transactional_id, "--out", out_path,
            "--batch", str(batch), "--process-ms", str(process_ms),
            *(["--client-properties", client_properties] if client_properties else [])])

    def events(self, kind: str) -> int:
        return sum(1 for line in self.lines() if line.split(" ", 1)[0] == kind)

    def written_in_transaction(self) -> bool:
        """Its open transaction has records in the output log (flushed), not yet ended."""
        for line in reversed(self.lines()):
            kind = line.split(" ", 1)[0]
            if kind == "W":
                return True
            if kind in ("B", "E", "C", "A", "S", "X", "F"):
                return False
        return False


# librdkafka's RD_KAFKA_RESP_ERR__PARTITION_EOF (confluent_kafka.KafkaError._PARTITION_EOF):
# the consumer reached the end of a partition (enable.partition.eof).
PARTITION_EOF = -191


def read_isolated(bootstrap: str, topic: str, partitions: list[int], isolation_level: str,
                  timeout_s: float = 60.0, client_props: dict[str, str] | None = None
                  ) -> dict[int, list[bytes | None]]:
    """Every record of the partitions, from the start to the end a fresh confluent-kafka
    consumer with ``isolation.level`` sees (the LSO for read_committed, the high watermark
    for read_uncommitted), as partition -> values in offset order. Control records are
    never returned (the client drops them)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTP
    consumer = Consumer({**(client_props or {}), "bootstrap.servers": bootstrap, "group.id": "chaos-reader",
                         "isolation.level": isolation_level, "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100, "log_level": 2})
    out: dict[int, list[bytes | None]] = {p: [] for p in partitions}
    try:
        consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while at_end != set(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read {isolation_level} did not reach the end of "
                                   f"partitions {sorted(set(partitions) - at_end)}")
            for m in consumer.consume(num_messages=500, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append(m.value())
                    at_end.discard(m.partition())
                elif m.error().code() == PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        consumer.close()
    return out
