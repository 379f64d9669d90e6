"""Benchmark: mirror topics (issue 21) against intra-cluster follower replication, and the
mirror's lag under a paced load.

Two clusters on 127.0.0.1: a source (1 controller, 2 brokers) and a destination
(1 controller, 1 broker), one cluster link between them.

1. Preload: ``--records`` records of 100 bytes into a 6-partition topic whose replicas are
   all on source broker 1 (acks=1).
2. Follower replication: the topic is reassigned to brokers [1, 2]; the time until broker
   2's replicas are in the ISR of every partition gives MB/s and records/s copied by
   Ketch's own followers (the same bytes, the same broker, the same run).
3. Mirror: a mirror topic of it is created on the destination; the time until its high
   watermarks equal the source's gives the mirror's MB/s and records/s. Ratio = mirror /
   follower (goal >= 0.8).
4. Lag: a second mirrored 6-partition topic; a paced producer writes ``--rate`` records/s
   (default 10,000) for ``--seconds``; a consumer on each cluster notes when each record
   became readable there: mirror lag = destination time - source time (p50/p99 ms), and
   ``/v1/mirrors`` is sampled every 100 ms (source HW at the last fetch - LEO, records).

The follower figure includes what a reassignment adds (the controller's two commits and
the ISR expansion); the mirror figure what creating the mirror topic adds (CreateTopics,
the source's metadata). Both copy the same bytes from the same source broker.

The machine may be shared: compare figures taken in the same window.
Usage: python bench/mirror.py [--records 600000] [--rate 10000] [--seconds 20]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients.admin import Admin, OffsetSpec  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402
from clients.connection import roundtrip  # noqa: E402
from clients.types import TopicPartition  # noqa: E402

PARTITIONS = 6
VALUE_BYTES = 100
LINK = "bench"
FAST = {"broker.heartbeat.interval.ms": "300", "replica.fetch.wait.max.ms": "200"}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def alter_configs(cluster: LocalCluster, resource_type: int, name: str, configs: dict[str, str]) -> None:
    IAC = messages.IncrementalAlterConfigsRequest
    req = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IAC.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
    port = cluster.spec.brokers[0].port
    resp = roundtrip("127.0.0.1", port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req)
    assert resp.responses[0].error_code == 0, resp.responses[0]


def create_topic(admin: Admin, name: str, assignment: dict[int, list[int]] | None = None,
                 configs: dict[str, str] | None = None, rf: int = 1) -> None:
    from clients.admin import NewTopic
    topic = (NewTopic(name, replica_assignments=assignment, configs=configs or {}) if assignment
             else NewTopic(name, PARTITIONS, rf, configs=configs or {}))
    admin.create_topics([topic], timeout_ms=30_000)


def high_watermarks(admin: Admin, topic: str) -> dict[int, int]:
    latest = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                                 for p in range(PARTITIONS)}, timeout_ms=10_000)
    return {tp.partition: r.offset for tp, r in latest.items()}


def preload(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False})
    value = b"x" * VALUE_BYTES
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i & 0x3FFF == 0:
            producer.poll(0)
    assert producer.flush(300) == 0


def wait(condition, timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:       # a call during a leader move: ask again
            pass
        time.sleep(interval_s)
    raise TimeoutError(what)


def in_sync(admin: Admin, topic: str, replicas: int) -> bool:
    described = admin.describe_topics([topic], timeout_ms=10_000)[topic]
    return all(len(p.isr) == replicas for p in described.partitions)


def mirror_lags(cluster: LocalCluster) -> list[int]:
    out = []
    for b in cluster.spec.brokers:
        with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/v1/mirrors", timeout=5) as r:
            out.extend(row["lag"] for row in json.load(r)["mirrors"])
    return out


def measure_lag(source: LocalCluster, destination: LocalCluster, topic: str, rate: int,
                seconds: float) -> dict:
    """A paced producer on the source; one consumer on each cluster notes when each
    (partition, offset) became readable there. The mirror's lag for a record is its time
    on the destination minus its time on the source (the producer's own queueing cancels
    out); ``/v1/mirrors`` lag (source HW at the last fetch - LEO, records) is sampled too."""
    from confluent_kafka import Consumer, Producer, TopicPartition as CTP

    seen: dict[str, dict[tuple[int, int], float]] = {"source": {}, "destination": {}}
    lag_samples: list[int] = []
    stop = threading.Event()

    def consume(cluster: LocalCluster, where: str) -> None:
        consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                             "group.id": f"bench-mirror-lag-{where}", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 5, "auto.offset.reset": "earliest"})
        consumer.assign([CTP(topic, p, 0) for p in range(PARTITIONS)])
        times = seen[where]
        while not stop.is_set():
            msgs = consumer.consume(1000, 0.05)
            now = time.monotonic()
            for m in msgs:
                if m.error() is None:
                    times[(m.partition(), m.offset())] = now
        consumer.close()

    def sample() -> None:
        while not stop.is_set():
            try:
                lag_samples.extend(x for x in mirror_lags(destination) if x >= 0)
            except OSError:
                pass
            time.sleep(0.1)

    threads = [threading.Thread(target=consume, args=(source, "source"), daemon=True),
               threading.Thread(target=consume, args=(destination, "destination"), daemon=True),
               threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(3)       # the consumers' assignments settle before the load starts
    producer = Producer({"bootstrap.servers": source.spec.bootstrap_servers, "acks": "1",
                         "linger.ms": 5, "enable.idempotence": False})
    value = b"y" * VALUE_BYTES
    started = time.monotonic()
    sent = 0
    # Paced in 5 ms steps (a record at a time spins and starves this process's consumers).
    while time.monotonic() - started < seconds:
        due = int((time.monotonic() - started + 0.005) * rate)
        while sent < due:
            try:
                producer.produce(topic, value=value, partition=sent % PARTITIONS)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(max(0.0, sent / rate - (time.monotonic() - started)))
    producer.flush(60)
    achieved = sent / (time.monotonic() - started)
    deadline = time.monotonic() + 30
    while len(seen["destination"]) < sent and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(10)
    src, dst = seen["source"], seen["destination"]
    lags = [(dst[k] - src[k]) * 1000 for k in dst if k in src]
    return {"rate_wanted": rate, "rate_achieved": round(achieved), "records": sent,
            "on_source": len(src), "on_destination": len(dst),
            "mirror_lag_ms_p50": round(percentile(lags, 0.5), 1),
            "mirror_lag_ms_p99": round(percentile(lags, 0.99), 1),
            "gauge_lag_records_p99": percentile([float(x) for x in lag_samples], 0.99),
            "gauge_lag_records_max": max(lag_samples) if lag_samples else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ketch-bench-mirror-") as d:
        source = LocalCluster(f"{d}/source", controllers=1, brokers=2, broker_props=FAST)
        destination = LocalCluster(f"{d}/destination", controllers=1, brokers=1, broker_props=FAST)
        try:
            source.start(timeout_s=120)
            destination.start(timeout_s=120)
            src = Admin({"bootstrap.servers": source.spec.bootstrap_servers})
            dst = Admin({"bootstrap.servers": destination.spec.bootstrap_servers})
            broker1, broker2 = (b.id for b in source.spec.brokers)
            create_topic(src, "data", {p: [broker1] for p in range(PARTITIONS)})
            preload(source.spec.bootstrap_servers, "data", args.records)
            source_hw = high_watermarks(src, "data")
            total = sum(source_hw.values())
            size_mb = total * VALUE_BYTES / 1e6

            start = time.perf_counter()
            src.alter_partition_reassignments({TopicPartition("data", p): [broker1, broker2]
                                               for p in range(PARTITIONS)}, timeout_ms=30_000)
            wait(lambda: in_sync(src, "data", 2), 600, "follower replication")
            follower_s = time.perf_counter() - start

            alter_configs(destination, 64, LINK, {"bootstrap.servers": source.spec.bootstrap_servers,
                                                  "metadata.max.age.ms": "1000"})
            start = time.perf_counter()
            create_topic(dst, "data", configs={"ketch.mirror.link": LINK})
            wait(lambda: high_watermarks(dst, "data") == source_hw, 600, "mirror")
            mirror_s = time.perf_counter() - start

            print(f"follower replication {follower_s:.2f} s, mirror {mirror_s:.2f} s for {total} "
                  "records", flush=True)
            create_topic(src, "paced", rf=2)
            create_topic(dst, "paced", configs={"ketch.mirror.link": LINK})
            wait(lambda: len(mirror_lags(destination)) == 2 * PARTITIONS, 60, "paced mirror up")
            lag = measure_lag(source, destination, "paced", args.rate, args.seconds)
            src.close()
            dst.close()
        finally:
            destination.stop(timeout_s=30)
            source.stop(timeout_s=30)
    follower = {"seconds": round(follower_s, 2), "records_per_s": round(total / follower_s),
                "mb_per_s": round(size_mb / follower_s, 1)}
    mirror = {"seconds": round(mirror_s, 2), "records_per_s": round(total / mirror_s),
              "mb_per_s": round(size_mb / mirror_s, 1)}
    ratio = round(follower_s / mirror_s, 3)
    print(f"preloaded {total} records of {VALUE_BYTES} B ({size_mb:.1f} MB of values), "
          f"{PARTITIONS} partitions")
    print(f"follower replication: {follower['records_per_s']} records/s, {follower['mb_per_s']} MB/s")
    print(f"mirror:               {mirror['records_per_s']} records/s, {mirror['mb_per_s']} MB/s")
    print(f"mirror / follower: {ratio} (goal >= 0.8)")
    print(f"at {lag['rate_achieved']} records/s: readable on the source -> readable on the "
          f"destination p50 {lag['mirror_lag_ms_p50']} ms, p99 {lag['mirror_lag_ms_p99']} ms; "
          f"lag gauge p99 {lag['gauge_lag_records_p99']} records (max {lag['gauge_lag_records_max']})")
    print(json.dumps({"bench": "mirror", "records": total, "value_bytes": VALUE_BYTES,
                      "follower": follower, "mirror": mirror, "ratio_mirror_to_follower": ratio,
                      "lag": lag}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
