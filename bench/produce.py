"""Benchmark: a local Ketch cluster under the confluent-kafka (librdkafka) producer.

Measured in one run, on one machine (the cluster, the clients and the baseline share it):

1. Produce throughput, records/s and MB/s of record values: 100-byte values, no key,
   linger.ms=5, batch.size 1 MiB, no compression, one producer, topics of 6 partitions:
     (a) acks=1 to a replication-factor-1 topic, (b) acks=all to a replication-factor-3 topic.
   Each is divided by the same workload against a **protocol-only sink** started by this
   script: one asyncio process (plain asyncio, like the broker) built on
   ``clients.protocol.ServerConnection`` and Ketch's codec that answers ApiVersions (the
   broker's SUPPORTED_VERSIONS), Metadata (itself leading every partition) and Produce
   (success, offsets counted from the batch headers) with no CRC check, storage or
   replication. The ratio is how much of the protocol ceiling the real broker keeps;
   the goals are >= 0.7 for (a) and >= 0.6 for (b) (issue 22 raised (b) from 0.35). One producer in one Python process
   (its produce() loop plus librdkafka's threads) can itself be the limit for the sink:
   then a ratio near 1 says the broker keeps up with that client, not that the two match.
   Sink and cluster runs alternate and the best of --repeats is kept, since on a shared
   machine other load only ever slows a run down (the medians are in the JSON too).
2. Consumer throughput: one confluent-kafka consumer (assign, no group) reading each of
   those topics back from offset 0.
3. End-to-end latency at a fixed 10,000 records/s with acks=all (RF 3, 5 requests in flight
   per connection, linger.ms=0 as in Kafka's EndToEndLatency tool; --latency-linger-ms
   adds the client's own batching delay): the send time is in the value; a consumer in another process
   (fetch.wait.max.ms=100) measures receive - send (p50/p99). Beside it, the brokers' own
   request-time histograms over the run (kafka_network_requestmetrics_totaltimems):
   Produce (append and the acks=all wait), FetchFollower and FetchConsumer; and the
   per-stage breakdown of sampled batches (ketch_replication_stage_ms, stages named in
   broker/latency_trace.py): queue, append, follower fetch, its response written, follower
   append, its next fetch, HW, acks=all answer, consumer fetch, flush. After the cluster
   stops, the same rate through bench/latency_floor.py (the same messages between three
   relay processes, without codec or storage): its p50/p99 and CPU, and Ketch's as ratios.
4. Failover on a 1-partition RF-3 topic under a paced idempotent acks=all producer: SIGKILL
   of the leader -> the first write acknowledged by the new leader (the first offset of
   the new leader epoch, found in the log), and the same for SIGTERM (controlled shutdown).
   After SIGKILL the controller fences the broker once its heartbeat connection has been
   closed for ``ketch.broker.disconnect.fence.ms`` (250 ms), not a whole
   ``broker.session.timeout.ms`` (9000 ms here unless --session-timeout-ms says otherwise);
   bench/failover.py compares the two in one run.

5. Large records (issue 20): 1,000 records of 500 KB, acks=all, RF 3, in MB/s as a ratio to
   the protocol-only sink at that size (--skip-large leaves it out). The sink stores
   nothing, while the cluster writes every byte three times to this one machine's disk, so
   the run is also compared with the disk: right after it, the same 1.5 GB is written as
   500 KB pwrite calls into the cluster's directory (the page cache and its write-back
   throttling, as the brokers meet them), and RF 3 cannot beat a third of that rate.

Usage: python bench/produce.py [--records 300000] [--repeats 3] [--latency-seconds 5] [--skip-failover] [--skip-large]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.cli.launcher import LocalCluster, free_ports  # noqa: E402
from clients.protocol import (  # noqa: E402
    NEED_DATA, ApiKey, CorruptFrameError, ServerConnection, UnsupportedRequest, messages,
)
from clients.records import iter_batches  # noqa: E402
from latency_floor import measure_floor, stop_process  # noqa: E402  (bench/, this script's directory)

VALUE_BYTES = 100
LARGE_VALUE_BYTES = 500_000
LARGE_RECORDS = 1000
PARTITIONS = 6
KAFKA_2014 = {"acks1_no_replication_records_per_s": 821_557,
              "three_x_sync_replication_records_per_s": 421_823,
              "note": "Kafka 0.8.1 on 6-core 2.5 GHz Xeons, 7200 rpm disks, 1 GbE; a producer, 3 brokers"}


# ------------------------------------------------------------------ protocol-only sink


def _supported_versions() -> dict[int, tuple[int, int]]:
    # The broker's own table, so that librdkafka picks the same Produce/Metadata versions.
    from broker.apis import SUPPORTED_VERSIONS
    return dict(SUPPORTED_VERSIONS)


FETCH_SINK_TOPIC = "fetch-sink"
FETCH_SINK_BATCH_RECORDS = 1000


class Sink:
    """Answers exactly what a producer needs, from memory; with ``fetch_records``, also
    what a consumer of FETCH_SINK_TOPIC needs (issue 22's fetch-only sink): that many
    100-byte records spread over the partitions, in prebuilt batches."""

    def __init__(self, port: int, partitions: int, fetch_records: int = 0) -> None:
        self.port = port
        self.partitions = partitions
        self.versions = _supported_versions()
        self.next_offset: dict[tuple[str, int], int] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        # partition -> [(base offset, batch bytes)], and its high watermark
        self.batches: dict[int, list[tuple[int, bytes]]] = {}
        self.hw: dict[int, int] = {}
        if fetch_records:
            from clients.records import Record, build_batch
            self.topic_ids[FETCH_SINK_TOPIC] = uuid.uuid4()
            value = b"x" * VALUE_BYTES
            for p in range(partitions):
                n = fetch_records // partitions + (1 if p < fetch_records % partitions else 0)
                out = []
                for base in range(0, n, FETCH_SINK_BATCH_RECORDS):
                    count = min(FETCH_SINK_BATCH_RECORDS, n - base)
                    out.append((base, build_batch([Record(base + i, 0, None, value) for i in range(count)],
                                                  base_offset=base)))
                self.batches[p], self.hw[p] = out, n

    def api_versions(self, error_code: int = 0):
        cls = messages.ApiVersionsResponse
        return cls(error_code=error_code, api_keys=[
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.versions.items())])

    def metadata(self, req):
        cls = messages.MetadataResponse
        names = [t.name for t in req.topics or [] if t.name is not None] or list(self.topic_ids)
        topics = []
        for name in names:
            topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
            topics.append(cls.MetadataResponseTopic(
                error_code=0, name=name, topic_id=topic_id, partitions=[
                    cls.MetadataResponsePartition(error_code=0, partition_index=p, leader_id=1,
                                                  leader_epoch=0, replica_nodes=[1], isr_nodes=[1])
                    for p in range(self.partitions)]))
        return cls(brokers=[cls.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                   cluster_id="protocol-only-sink", controller_id=1, topics=topics)

    def produce(self, req):
        cls = messages.ProduceResponse
        out = []
        for topic in req.topic_data:
            parts = []
            for p in topic.partition_data:
                count = sum(h.records_count for _, h in iter_batches(p.records or b"", check_crc=False))
                key = (topic.name, p.index)
                base = self.next_offset.get(key, 0)
                self.next_offset[key] = base + count
                parts.append(cls.PartitionProduceResponse(index=p.index, error_code=0, base_offset=base,
                                                          log_append_time_ms=-1, log_start_offset=0))
            out.append(cls.TopicProduceResponse(name=topic.name, partition_responses=parts))
        if req.acks == 0:
            return None
        return cls(responses=out)

    def fetch(self, req):
        cls = messages.FetchResponse
        out = []
        ids = {i: n for n, i in self.topic_ids.items()}
        for t in req.topics:
            # Fetch v13+ names topics by id (KIP-516), as librdkafka does once Metadata gave one.
            name = t.topic or ids.get(t.topic_id)
            parts = []
            for p in t.partitions:
                batches = self.batches.get(p.partition) if name == FETCH_SINK_TOPIC else None
                if batches is None:
                    parts.append(cls.PartitionData(partition_index=p.partition, error_code=3, records=b""))
                    continue
                chunks, size = [], 0
                for base, data in batches:
                    if base + FETCH_SINK_BATCH_RECORDS <= p.fetch_offset:
                        continue
                    if chunks and size + len(data) > p.partition_max_bytes:
                        break
                    chunks.append(data)
                    size += len(data)
                hw = self.hw[p.partition]
                parts.append(cls.PartitionData(partition_index=p.partition, high_watermark=hw,
                                               last_stable_offset=hw, log_start_offset=0,
                                               records=b"".join(chunks)))
            out.append(cls.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
        return cls(responses=out)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        try:
            while data := await reader.read(256 * 1024):
                conn.receive_data(data)
                while (event := conn.next_event()) is not NEED_DATA:
                    if isinstance(event, UnsupportedRequest):
                        if event.api_key != ApiKey.API_VERSIONS:
                            return
                        api_key, version, cid, body = event.api_key, 0, event.correlation_id, self.api_versions(35)
                    else:
                        h = event.header
                        api_key, version, cid = h.api_key, h.api_version, h.correlation_id
                        if api_key == ApiKey.API_VERSIONS:
                            body = self.api_versions()
                        elif api_key == ApiKey.METADATA:
                            body = self.metadata(event.body)
                        elif api_key == ApiKey.PRODUCE:
                            body = self.produce(event.body)
                            if body is None:
                                continue
                        elif api_key == ApiKey.FETCH and self.batches:
                            body = self.fetch(event.body)
                        else:
                            return
                    for part in conn.send(api_key, version, cid, body):
                        writer.write(part)
                await writer.drain()
        except (CorruptFrameError, ConnectionError):
            pass
        finally:
            writer.close()

    async def run(self) -> None:
        server = await asyncio.start_server(self.serve_connection, "127.0.0.1", self.port, reuse_address=True)
        print(f"SINK READY {self.port}", flush=True)
        async with server:
            await server.serve_forever()


def start_sink(partitions: int, fetch_records: int = 0) -> tuple[subprocess.Popen, int]:
    port, = free_ports(1)
    proc = subprocess.Popen([sys.executable, __file__, "--serve-sink", str(port), "--partitions", str(partitions),
                             "--fetch-records", str(fetch_records)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    line = proc.stdout.readline().decode()
    if not line.startswith("SINK READY"):
        proc.kill()
        raise RuntimeError(f"sink failed to start: {line}{proc.stdout.read().decode()}")
    return proc, port


# ------------------------------------------------------------------ producer / consumer


def interpreter() -> str:
    """The Python that runs the cluster (``ketch``'s launcher starts every node with this
    process's interpreter): its build moves every figure here by 20-30% (a PGO/LTO build
    against one without; docs/operations.md, "The interpreter matters")."""
    return f"Python {platform.python_version()} ({sys.executable})"


def producer_config(bootstrap: str, acks: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
            "compression.type": "none", "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
            "message.max.bytes": 2 << 20, **extra}


def measure_produce(bootstrap: str, topic: str, acks: str, records: int,
                    value_bytes: int = VALUE_BYTES) -> dict:
    """One producer as fast as it goes: records/s from the first send to the last ack."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, acks))
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(err)

    value = b"x" * value_bytes
    for _ in range(max(10, 2000 * VALUE_BYTES // value_bytes)):   # warm up: metadata, connections
        producer.produce(topic, value=value, on_delivery=on_delivery)
    producer.flush(60)
    start = time.perf_counter()
    produce = producer.produce
    for i in range(records):
        try:
            produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        if i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    return {"records": records, "seconds": round(elapsed, 3), "records_per_s": round(records / elapsed),
            "mb_per_s": round(records * value_bytes / elapsed / 1e6, 2), "failed": len(failed) + left}


def measure_disk_writes(directory: str, writes: int, size: int) -> float:
    """MB/s of ``writes`` pwrite calls of ``size`` bytes into a new file in ``directory``
    (no fsync: the brokers do not sync per write either), the file removed after."""
    path = os.path.join(directory, "bench-disk-writes")
    block = b"x" * size
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for i in range(writes):
            os.pwrite(fd, block, i * size)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return round(writes * size / elapsed / 1e6, 2)


def measure_consume(bootstrap: str, topic: str, expected: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 4 << 20})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    # Timed from the first record: connecting and finding the leaders are not throughput.
    total = 0                   # records read
    count = 0                   # records read after the first batch (timed)
    start = None
    deadline = time.monotonic() + 300
    while total < expected and time.monotonic() < deadline:
        msgs = consumer.consume(num_messages=10000, timeout=1.0)
        good = sum(1 for m in msgs if m.error() is None)
        total += good
        if start is None:
            if good:
                start = time.perf_counter()
        else:
            count += good
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    return {"records": count, "seconds": round(elapsed, 3), "records_per_s": round(count / max(elapsed, 1e-9)),
            "mb_per_s": round(count * VALUE_BYTES / max(elapsed, 1e-9) / 1e6, 2)}


def latency_consumer(bootstrap: str, topic: str, expected: int) -> None:
    """Another process: print READY at the first warm-up record, then one JSON line."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latencies_us: list[int] = []
    ready = False
    idle_since = time.monotonic()
    # poll() hands over each record as soon as librdkafka has it: consume(num_messages=N)
    # waits until N records or its timeout, which added up to 200 ms of the consumer's
    # own waiting to every figure this benchmark printed before (issue 22).
    while len(latencies_us) < expected and time.monotonic() - idle_since < 10:
        m = consumer.poll(0.2)
        now = time.time_ns()
        if m is None or m.error() is not None:
            continue
        idle_since = time.monotonic()
        v = m.value()
        if v[8:9] == b"W":
            if not ready:
                ready = True
                print("READY", flush=True)
            continue
        latencies_us.append((now - int.from_bytes(v[:8], "big")) // 1000)
    consumer.close()
    print(json.dumps({"count": len(latencies_us), "latencies_us": latencies_us}), flush=True)


def measure_latency(bootstrap: str, topic: str, rate: int, seconds: float,
                    on_warm: Callable[[], None] = lambda: None, linger_ms: float = 0) -> dict:
    """``on_warm``: called once the consumer has seen a warm-up record, before the paced
    run (the brokers' histograms are read there, so the warm-up records, which the
    consumer reads late from offset 0, stay out of the breakdown)."""
    from confluent_kafka import Producer

    expected = int(rate * seconds)
    proc = subprocess.Popen([sys.executable, __file__, "--latency-consumer", bootstrap, topic, str(expected)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        # At most 5 requests in flight per connection, the Java producer's default. With
        # librdkafka's (1,000,000) a new request leaves every linger.ms while the broker
        # serves a connection one request at a time, each waiting for replication; once a
        # replication round outlasts linger.ms the queue of tiny requests only grows.
        # linger.ms 0 by default, as Kafka's own EndToEndLatency tool sets it: a linger is a
        # delay the client chooses to add before sending, not time spent in the platform.
        producer = Producer(producer_config(bootstrap, "all", **{"max.in.flight.requests.per.connection": 5,
                                                                  "linger.ms": linger_ms}))
        pad = b"." * (VALUE_BYTES - 9)
        while True:                             # warm-up records until the consumer sees one
            for p in range(PARTITIONS):
                producer.produce(topic, value=time.time_ns().to_bytes(8, "big") + b"W" + pad, partition=p)
            producer.flush(30)
            line = proc.stdout.readline().decode().strip()
            if line == "READY" or proc.poll() is not None:
                break
        on_warm()
        # Paced in small bursts: each turn sends what is due by now, then waits ~1 ms.
        start = time.perf_counter()
        sent = 0
        while sent < expected:
            due = min(expected, int((time.perf_counter() - start) * rate) + 1)
            while sent < due:
                producer.produce(topic, value=time.time_ns().to_bytes(8, "big") + b"M" + pad,
                                 partition=sent % PARTITIONS)
                sent += 1
            producer.poll(0.001)
        producer.flush(60)
        achieved = expected / (time.perf_counter() - start)
        out, err = proc.communicate(timeout=120)
        data = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        stop_process(proc)
    lat = sorted(data["latencies_us"])
    if not lat:
        return {"records": 0, "error": err.decode()[-500:]}
    q = statistics.quantiles(lat, n=100, method="inclusive")
    return {"target_records_per_s": rate, "achieved_records_per_s": round(achieved), "records": len(lat),
            "p50_ms": round(q[49] / 1000, 2), "p99_ms": round(q[98] / 1000, 2), "max_ms": round(lat[-1] / 1000, 2)}


# ------------------------------------------------------------------ broker-side breakdown


def request_histograms(cluster: LocalCluster, metric: str = "kafka_network_requestmetrics_totaltimems",
                       label: str = "request") -> dict[str, dict[str, float]]:
    """Every broker's ``metric`` histogram, summed over the brokers:
    {<label value>: {"le=<bound>": count, "sum": ms, "count": n}}."""
    import re
    import urllib.request
    out: dict[str, dict[str, float]] = {}
    pattern = re.compile(rf'^{metric}_(bucket|sum|count)'
                         rf'\{{(?:le="([^"]+)",)?{label}="([^"]+)"(?:,le="([^"]+)")?\}} (\S+)$')
    for b in cluster.spec.brokers:
        if not b.http_port:
            continue
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10) as r:
                text = r.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            m = pattern.match(line)
            if not m:
                continue
            kind, le1, request, le2, value = m.groups()
            key = f"le={le1 or le2}" if kind == "bucket" else kind
            series = out.setdefault(request, {})
            series[key] = series.get(key, 0.0) + float(value)
    return out


class BrokerCpu:
    """CPU seconds (user + system) the cluster's broker processes have used, from /proc."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.pids = [n.pid for n in cluster.spec.nodes if n.role == "broker" and n.pid]
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        total = 0.0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                return float("nan")       # not Linux, or a broker is gone
            total += (int(fields[11]) + int(fields[12])) / self.tick
        return total


def stage_histograms(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    """The brokers' sampled per-stage latency of the acks=all path (broker/latency_trace.py)."""
    return request_histograms(cluster, "ketch_replication_stage_ms", "stage")


# The order a traced batch goes through them (broker/latency_trace.py says what each is).
STAGES = ("produce_queue", "leader_append", "follower_fetch", "follower_flush", "follower_append",
          "follower_refetch", "follower_report", "hw_advance", "produce_ack", "consumer_fetch",
          "consumer_flush", "total")


def histogram_delta(before: dict, after: dict) -> dict[str, dict]:
    """Per request type over the interval: count, mean, and the bucket bounds that hold
    the median and the 99th percentile (a histogram gives bounds, not exact values)."""
    out = {}
    for request, series in after.items():
        old = before.get(request, {})
        count = series.get("count", 0) - old.get("count", 0)
        if count <= 0:
            continue
        buckets = sorted(((float(k[3:]), v - old.get(k, 0)) for k, v in series.items()
                          if k.startswith("le=")), key=lambda x: x[0])

        def bound(q: float) -> float:
            for le, c in buckets:
                if c >= q * count:
                    return le
            return float("inf")
        out[request] = {"requests": int(count),
                        "mean_ms": round((series.get("sum", 0) - old.get("sum", 0)) / count, 2),
                        "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99)}
    return out


# ------------------------------------------------------------------ failover


class PacedProducer(threading.Thread):
    """Idempotent acks=all writes to one partition at ``rate``/s; ack time per offset."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 1000) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.ack_time: dict[int, float] = {}
        self.errors = 0
        self.stop_event = threading.Event()

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors += 1
        else:
            self.ack_time[msg.offset()] = time.monotonic()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 1, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                             "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000})
        start = time.perf_counter()
        i = 0
        while not self.stop_event.is_set():
            delay = start + i / self.rate - time.perf_counter()
            producer.poll(max(0.0, delay))
            producer.produce(self.topic, value=b"%d" % i, partition=0, on_delivery=self._on_delivery)
            i += 1
        producer.flush(120)


def _leader(bootstrap_ports: list[int], topic: str) -> tuple[int, int]:
    from clients.protocol import ClientConnection
    for port in bootstrap_ports:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                conn = ClientConnection(client_id="bench")
                _, data = conn.send(ApiKey.METADATA, 12, messages.MetadataRequest(
                    topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False))
                s.sendall(data)
                while (event := conn.next_event()) is NEED_DATA:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        raise ConnectionError
                    conn.receive_data(chunk)
                p = event.body.topics[0].partitions[0]
                return p.leader_id, p.leader_epoch
        except (OSError, ConnectionError, IndexError):
            continue
    raise ConnectionError("no broker answered")


def first_offset_of_epoch(bootstrap: str, topic: str, epoch_after: int, hw_wait_s: float = 30) -> int | None:
    """The first offset whose batch carries a leader epoch above ``epoch_after``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + hw_wait_s
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10000, timeout=0.5):
                if m.error() is None and (m.leader_epoch() or -1) > epoch_after:
                    return m.offset()
    finally:
        consumer.close()
    return None


def measure_failover(cluster: LocalCluster, topic: str, how: str) -> dict:
    bootstrap = cluster.spec.bootstrap_servers
    ports = [b.port for b in cluster.spec.brokers]
    producer = PacedProducer(bootstrap, topic)
    producer.start()
    try:
        deadline = time.monotonic() + 30
        while len(producer.ack_time) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        leader, epoch = _leader(ports, topic)
        t0 = time.monotonic()
        if how == "sigkill":
            cluster.kill_node(leader)
        else:
            cluster.stop_node(leader)           # SIGTERM; returns when the process has exited
        stopped_s = time.monotonic() - t0
        others = [b.port for b in cluster.spec.brokers if b.id != leader]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:      # until the producer is well past the change
            new_leader, new_epoch = _leader(others, topic)
            if new_epoch > epoch and new_leader not in (leader, -1) and \
                    max(producer.ack_time.values(), default=t0) > time.monotonic() - 0.2:
                break
            time.sleep(0.1)
        time.sleep(1)
    finally:
        producer.stop_event.set()
        producer.join(150)
    offset = first_offset_of_epoch(bootstrap, topic, epoch)
    acked_after = sorted(t for t in producer.ack_time.values() if t > t0)
    gaps = [b - a for a, b in zip([t0] + acked_after, acked_after)]
    out = {"old_leader": leader, "process_exit_ms": round(stopped_s * 1000),
           "first_new_leader_ack_ms": None, "longest_ack_gap_ms": round(max(gaps, default=0) * 1000),
           "producer_errors": producer.errors}
    if offset is not None and offset in producer.ack_time:
        out["first_new_leader_ack_ms"] = round((producer.ack_time[offset] - t0) * 1000)
    cluster.start_node(leader)
    cluster.wait_until_ready(120)
    return out


# ------------------------------------------------------------------ main


def create_topics(bootstrap: str, specs: list[tuple[str, int, int, dict]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=r, config=c)
                                   for n, p, r, c in specs], operation_timeout=30)
    for f in futures.values():
        f.result(60)


def wait_in_sync(cluster: LocalCluster, topic: str, replicas: int, timeout_s: float = 60) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.partitions and all(len(p.isrs) == replicas and p.leader >= 0
                                                    for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic} not in sync")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, help="records per throughput run")
    ap.add_argument("--repeats", type=int, default=3, help="throughput runs of each kind (best and median kept)")
    ap.add_argument("--latency-rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--latency-linger-ms", type=float, default=0,
                    help="the latency producer's linger.ms (0, as Kafka's EndToEndLatency tool)")
    ap.add_argument("--session-timeout-ms", type=int, default=9000, help="broker.session.timeout.ms")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--skip-large", action="store_true", help="skip the 500 KB-record run")
    ap.add_argument("--latency-only", action="store_true",
                    help="only the end-to-end latency run (and failover unless skipped)")
    ap.add_argument("--dir", help="cluster directory (default: a temporary one, removed after)")
    ap.add_argument("--broker-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for this run, e.g. ketch.event.loop=uvloop (repeatable)")
    ap.add_argument("--serve-sink", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help=argparse.SUPPRESS)
    ap.add_argument("--fetch-records", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--latency-consumer", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.serve_sink:
        asyncio.run(Sink(args.serve_sink, args.partitions, args.fetch_records).run())
        return 0
    if args.latency_consumer:
        bootstrap, topic, expected = args.latency_consumer
        latency_consumer(bootstrap, topic, int(expected))
        return 0

    def interrupted(signum, frame):
        raise SystemExit(f"bench: signal {signum}")   # unwinds through the finally that stops the cluster
    signal.signal(signal.SIGTERM, interrupted)

    result: dict = {"bench": "produce", "cpus": os.cpu_count(), "python": interpreter(),
                    "value_bytes": VALUE_BYTES, "partitions": PARTITIONS, "records": args.records}
    print(f"machine: {os.cpu_count()} CPUs, {interpreter()}; {args.records} records of {VALUE_BYTES} B per run; "
          f"{PARTITIONS} partitions; linger.ms=5, batch.size=1 MiB, no compression")

    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="ketch-bench-")
    broker_props = dict(kv.split("=", 1) for kv in args.broker_prop)
    if broker_props:
        result["broker_props"] = broker_props
    cluster = LocalCluster(args.dir or tmp.name, controllers=3, brokers=3, broker_props=broker_props,
                           controller_props={"broker.session.timeout.ms": str(args.session_timeout_ms)})
    sink = None
    try:
        cluster.start(timeout_s=120)
        bootstrap = cluster.spec.bootstrap_servers
        create_topics(bootstrap, [("rf1", PARTITIONS, 1, {}), ("rf3", PARTITIONS, 3, {}),
                                  ("latency", PARTITIONS, 3, {}),
                                  ("failover", 1, 3, {"min.insync.replicas": "2"})])
        for t, r in (("rf1", 1), ("rf3", 3), ("latency", 3), ("failover", 3)):
            wait_in_sync(cluster, t, r)

        if not args.latency_only:
            # The sink runs while the (idle) cluster is up, and sink and cluster runs alternate,
            # so that both see the same machine; the best of --repeats runs is compared, since
            # on a shared machine anything else only ever makes a run slower.
            sink, port = start_sink(PARTITIONS)
            runs: dict[str, list[dict]] = {"sink_acks1": [], "acks1_rf1": [], "sink_acks_all": [], "acks_all_rf3": []}
            for _ in range(args.repeats):
                runs["sink_acks1"].append(measure_produce(f"127.0.0.1:{port}", "sink-a", "1", args.records))
                runs["acks1_rf1"].append(measure_produce(bootstrap, "rf1", "1", args.records))
                runs["sink_acks_all"].append(measure_produce(f"127.0.0.1:{port}", "sink-b", "all", args.records))
                runs["acks_all_rf3"].append(measure_produce(bootstrap, "rf3", "all", args.records))
            if not args.skip_large:
                # Large records (issue 20): a client suite producing 500 KB records saw ~8 MB/s.
                runs["sink_large"] = [measure_produce(f"127.0.0.1:{port}", "sink-c", "all",
                                                      LARGE_RECORDS, LARGE_VALUE_BYTES)]
                runs["large_acks_all_rf3"] = [measure_produce(bootstrap, "rf3", "all", LARGE_RECORDS,
                                                              LARGE_VALUE_BYTES)]
                disk_mb_per_s = measure_disk_writes(cluster.dir, 3 * LARGE_RECORDS, LARGE_VALUE_BYTES)
            stop_process(sink)
            sink = None
            best = {k: max(v, key=lambda r: r["records_per_s"]) for k, v in runs.items()}
            for k, v in runs.items():
                best[k] = dict(best[k], runs_records_per_s=[r["records_per_s"] for r in v],
                               median_records_per_s=round(statistics.median(r["records_per_s"] for r in v)))
            sink_acks1, sink_acks_all = best["sink_acks1"], best["sink_acks_all"]
            acks1, acks_all = best["acks1_rf1"], best["acks_all_rf3"]
            acks1["ratio_to_sink"] = round(acks1["records_per_s"] / sink_acks1["records_per_s"], 3)
            acks_all["ratio_to_sink"] = round(acks_all["records_per_s"] / sink_acks_all["records_per_s"], 3)
            acks1["median_ratio_to_sink"] = round(acks1["median_records_per_s"] / sink_acks1["median_records_per_s"], 3)
            acks_all["median_ratio_to_sink"] = round(
                acks_all["median_records_per_s"] / sink_acks_all["median_records_per_s"], 3)
            for label, r in (("protocol-only sink acks=1  ", sink_acks1), ("protocol-only sink acks=all", sink_acks_all)):
                print(f"{label}: {r['records_per_s']:>9,} rec/s {r['mb_per_s']:>7} MB/s (best of {r['runs_records_per_s']})")
            print(f"ketch acks=1   RF=1:        {acks1['records_per_s']:>9,} rec/s {acks1['mb_per_s']:>7} MB/s "
                  f"= {acks1['ratio_to_sink']} x sink (goal >= 0.7; medians: {acks1['median_ratio_to_sink']}; "
                  f"runs {acks1['runs_records_per_s']})")
            print(f"ketch acks=all RF=3:        {acks_all['records_per_s']:>9,} rec/s {acks_all['mb_per_s']:>7} MB/s "
                  f"= {acks_all['ratio_to_sink']} x sink (goal >= 0.6; medians: {acks_all['median_ratio_to_sink']}; "
                  f"runs {acks_all['runs_records_per_s']})")
            if not args.skip_large:
                large, sink_large = best["large_acks_all_rf3"], best["sink_large"]
                large["ratio_to_sink"] = round(large["mb_per_s"] / sink_large["mb_per_s"], 3)
                disk_bound = round(disk_mb_per_s / 3, 2)
                large["ratio_to_disk_bound"] = round(large["mb_per_s"] / disk_bound, 3)
                print(f"large records ({LARGE_RECORDS} x {LARGE_VALUE_BYTES:,} B) acks=all RF=3: "
                      f"{large['mb_per_s']} MB/s = {large['ratio_to_sink']} x the sink's "
                      f"{sink_large['mb_per_s']} MB/s (goal >= 0.5); the disk took "
                      f"{disk_mb_per_s} MB/s of 500 KB writes, so RF 3 is bounded by {disk_bound} MB/s: "
                      f"{large['ratio_to_disk_bound']} x that bound")
                result["large"] = {"sink": sink_large, "acks_all_rf3": large,
                                   "disk_write_mb_per_s": disk_mb_per_s}
            result["sink"] = {"acks1": sink_acks1, "acks_all": sink_acks_all}
            result["produce"] = {"acks1_rf1": acks1, "acks_all_rf3": acks_all}
            in_topic = args.repeats * (args.records + 2000)

            consume_rf1 = measure_consume(bootstrap, "rf1", in_topic)
            consume_rf3 = measure_consume(bootstrap, "rf3", in_topic)
            # The fetch-only sink: the same consumer reading as many records from memory.
            fetch_sink, fetch_port = start_sink(PARTITIONS, fetch_records=in_topic)
            try:
                consume_sink = measure_consume(f"127.0.0.1:{fetch_port}", FETCH_SINK_TOPIC, in_topic)
            finally:
                stop_process(fetch_sink)
            for r in (consume_rf1, consume_rf3):
                r["ratio_to_fetch_sink"] = round(r["records_per_s"] / max(consume_sink["records_per_s"], 1), 3)
            print(f"fetch-only sink:      {consume_sink['records_per_s']:>9,} rec/s {consume_sink['mb_per_s']:>7} MB/s")
            print(f"consumer RF=1 topic:  {consume_rf1['records_per_s']:>9,} rec/s {consume_rf1['mb_per_s']:>7} MB/s "
                  f"= {consume_rf1['ratio_to_fetch_sink']} x the fetch-only sink (goal >= 0.7)")
            print(f"consumer RF=3 topic:  {consume_rf3['records_per_s']:>9,} rec/s {consume_rf3['mb_per_s']:>7} MB/s "
                  f"= {consume_rf3['ratio_to_fetch_sink']} x the fetch-only sink")
            result["consume"] = {"rf1": consume_rf1, "rf3": consume_rf3, "fetch_sink": consume_sink}

        snapshots: dict[str, dict] = {}

        cpu = BrokerCpu(cluster)
        cpu_at_warm: list[float] = []

        def warm() -> None:
            snapshots["requests"], snapshots["stages"] = request_histograms(cluster), stage_histograms(cluster)
            cpu_at_warm.append(cpu.seconds())
        latency = measure_latency(bootstrap, "latency", args.latency_rate, args.latency_seconds, warm,
                                  linger_ms=args.latency_linger_ms)
        latency["linger_ms"] = args.latency_linger_ms
        run_cpu_s = cpu.seconds() - cpu_at_warm[0] if cpu_at_warm else 0.0
        if latency.get("records") and cpu_at_warm:
            # Steadier than the latency on a shared machine: what the run cost the brokers.
            latency["broker_cpu_ms_per_1000_records"] = round(run_cpu_s * 1e6 / latency["records"], 1)
        # Latency on a shared machine is mostly how long each hop waits for a CPU: say how busy it was.
        latency["load_average_1m"] = round(os.getloadavg()[0], 2)
        breakdown = histogram_delta(snapshots.get("requests", {}), request_histograms(cluster))
        stages = histogram_delta(snapshots.get("stages", {}), stage_histograms(cluster))
        print(f"end-to-end latency at {args.latency_rate:,} rec/s acks=all RF=3, linger.ms={args.latency_linger_ms}: "
              f"p50 {latency.get('p50_ms')} ms, p99 {latency.get('p99_ms')} ms, max {latency.get('max_ms')} ms "
              f"({latency.get('records')} records, achieved {latency.get('achieved_records_per_s')} rec/s; "
              f"load average {latency['load_average_1m']} on {os.cpu_count()} CPUs; the brokers used "
              f"{latency.get('broker_cpu_ms_per_1000_records')} CPU-ms per 1000 records)")
        for name in ("Produce", "FetchFollower", "FetchConsumer"):
            b = breakdown.get(name)
            if b:
                print(f"  broker-side {name:<13} {b['requests']:>7,} requests, mean {b['mean_ms']} ms, "
                      f"p50 <= {b['p50_le_ms']} ms, p99 <= {b['p99_le_ms']} ms")
        print("  (Produce: arrival to answer, the acks=all wait for the ISR included; Fetch*: "
              "arrival to answer, long-poll wait included)")
        latency["broker_request_time"] = breakdown
        # Per message the brokers handle (a follower fetch is two: the leader answers it,
        # the follower takes in the answer): the figure docs/operations.md compares with
        # what bench/latency_floor.py --sweep says the latency goal allows (~120 us here).
        messages = sum(breakdown.get(name, {}).get("requests", 0) * n
                       for name, n in (("Produce", 1), ("FetchFollower", 2), ("FetchConsumer", 1)))
        if messages and cpu_at_warm:
            latency["broker_messages"] = messages
            latency["broker_cpu_us_per_message"] = round(run_cpu_s * 1e6 / messages, 1)
            print(f"  the brokers used {latency['broker_cpu_us_per_message']} us of CPU per message "
                  f"({messages:,}: Produce, follower fetches answered and taken in, consumer fetches)")
        print("  per stage (sampled batches, broker/latency_trace.py; follower_append/refetch: every "
              "follower fetch that brought records):")
        for name in STAGES:
            b = stages.get(name)
            if b:
                print(f"    {name:<17} {b['requests']:>6,} samples, mean {b['mean_ms']:>7} ms, "
                      f"p50 <= {b['p50_le_ms']} ms, p99 <= {b['p99_le_ms']} ms")
        latency["stages"] = stages
        result["latency"] = latency

        if not args.skip_failover:
            kill = measure_failover(cluster, "failover", "sigkill")
            print(f"SIGKILL of the leader -> first ack from the new leader: {kill['first_new_leader_ack_ms']} ms "
                  f"(broker.session.timeout.ms={args.session_timeout_ms}; longest ack gap "
                  f"{kill['longest_ack_gap_ms']} ms; producer errors {kill['producer_errors']})")
            term = measure_failover(cluster, "failover", "sigterm")
            print(f"SIGTERM of the leader -> first ack from the new leader: {term['first_new_leader_ack_ms']} ms "
                  f"(process exited after {term['process_exit_ms']} ms; longest ack gap "
                  f"{term['longest_ack_gap_ms']} ms; producer errors {term['producer_errors']})")
            result["failover"] = {"session_timeout_ms": args.session_timeout_ms, "sigkill": kill, "sigterm": term}
    finally:
        if sink is not None:
            stop_process(sink)
        cluster.stop(timeout_s=30)
        if tmp is not None:
            tmp.cleanup()

    measured = result.get("latency", {})
    if measured.get("records"):
        # The same rate through a bare relay of the same messages (bench/latency_floor.py),
        # with the cluster stopped: how far Ketch's figures are from Python's floor here.
        floor = measure_floor(args.latency_rate, args.latency_seconds)
        ratios = {key: round(measured[key] / floor[key], 2)
                  for key in ("p50_ms", "p99_ms", "broker_cpu_ms_per_1000_records")
                  if measured.get(key) and floor.get(key)}
        print(f"latency floor (bench/latency_floor.py: the same messages between three relay "
              f"processes, no codec or storage): p50 {floor['p50_ms']} ms, p99 {floor['p99_ms']} ms, "
              f"{floor['broker_cpu_ms_per_1000_records']} CPU-ms per 1000 records; Ketch / floor: "
              + ", ".join(f"{key} {value}x" for key, value in ratios.items()))
        result["latency_floor"] = {**floor, "ketch_ratio": ratios}
    result["kafka_2014"] = KAFKA_2014
    if args.latency_only:
        print(json.dumps(result, separators=(",", ":")))
        return 0
    print(f"for scale, Kafka 2014 (6-core machines): {KAFKA_2014['acks1_no_replication_records_per_s']:,} rec/s "
          f"acks=1 no replication, {KAFKA_2014['three_x_sync_replication_records_per_s']:,} rec/s 3x sync replication; "
          f"here: {result['produce']['acks1_rf1']['records_per_s']:,} and "
          f"{result['produce']['acks_all_rf3']['records_per_s']:,} on {os.cpu_count()} CPUs running client, "
          "3 controllers and 3 brokers together")
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
