"""Benchmark: the ketch Spark data source (issue 14), in one run.

1. Batch read: --records 100-byte records in a 6-partition topic, read whole through Spark
   (local[2]; the values' lengths summed, so every value is materialized), in records/s as a
   ratio to Ketch's own consumer reading the same topic in the same run (goal >= 0.5).
2. Streaming: a producer writes --rate records/s for --seconds, each value carrying its send
   time; a query with a 1 s processing-time trigger sees them in foreachBatch; the latency
   is the time from send to the record's micro-batch (p50/p99).
3. Memory: the SparkSession's JVM resident set, and this Python driver's.

One cluster (1 controller, 1 broker); confluent-kafka produces the input (fast and outside
the measured paths). Prints figures, then ONE JSON line (the last line). No assertions.

Usage: python bench/spark.py [--records 1000000] [--rate 10000] [--seconds 20]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients import Consumer  # noqa: E402
from clients.admin import Admin, NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.types import TopicPartition  # noqa: E402

PARTITIONS = 6
VALUE_BYTES = 100


def fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20})
    value = b"x" * VALUE_BYTES
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        if i & 0xFFFF == 0:
            p.poll(0)
    p.flush(120)


def ketch_consumer_rate(bootstrap: str, topic: str, records: int) -> float:
    with Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                   "auto.offset.reset": "earliest", "max.poll.records": 100_000}) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        start, n = time.perf_counter(), 0
        while n < records:
            n += len(c.poll(1000))
        return n / (time.perf_counter() - start)


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return -1


def jvm_pids() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"java" in cmd and b"pyspark" in cmd and int(d) != os.getpid():
                out.append(int(d))
    return out


def streaming_latency(spark, bootstrap: str, rate: int, seconds: float, checkpoint: str) -> dict:
    from confluent_kafka import Producer
    latencies: list[float] = []

    def on_batch(df, _batch_id: int) -> None:
        now = time.time()
        latencies.extend(now - float(bytes(r.value).split(b" ", 1)[0])
                         for r in df.select("value").collect())

    query = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", "live").option("startingOffsets", "latest").load()
             .writeStream.foreachBatch(on_batch).option("checkpointLocation", checkpoint)
             .trigger(processingTime="1 second").start())
    while not query.recentProgress:          # the query has planned its first batch
        time.sleep(0.2)
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        start, i = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            due = int((time.perf_counter() - start) * rate)
            while i < due:
                p.produce("live", value=b"%.6f " % time.time() + b"x" * 80, partition=i % PARTITIONS)
                i += 1
            p.poll(0.001)
        p.flush(30)
    t = threading.Thread(target=produce)
    t.start()
    t.join()
    deadline = time.monotonic() + 30
    expected = int(rate * seconds * 0.99)
    while len(latencies) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()
    if not latencies:
        return {"records": 0}
    q = statistics.quantiles(sorted(latencies), n=100, method="inclusive")
    return {"records": len(latencies), "p50_ms": round(q[49] * 1000), "p99_ms": round(q[98] * 1000)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    from clients.spark import register
    with tempfile.TemporaryDirectory(prefix="ketch-bench-spark-") as d:
        cluster = LocalCluster(d, controllers=1, brokers=1)
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.spec.bootstrap_servers
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topics([NewTopic("bulk", num_partitions=PARTITIONS, replication_factor=1),
                                     NewTopic("live", num_partitions=PARTITIONS, replication_factor=1)])
            fill(bootstrap, "bulk", args.records)
            consumer_rate = ketch_consumer_rate(bootstrap, "bulk", args.records)
            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            register(spark)
            df = (spark.read.format("ketch").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "bulk").load())
            start = time.perf_counter()
            (total,) = df.selectExpr("sum(length(value))").collect()[0]
            spark_rate = args.records / (time.perf_counter() - start)
            assert total == args.records * VALUE_BYTES, total
            latency = streaming_latency(spark, bootstrap, args.rate, args.seconds, d + "/ckpt")
            memory = {"jvm_rss_mb": round(sum(rss_kb(p) for p in jvm_pids()) / 1024),
                      "python_driver_rss_mb": round(rss_kb(os.getpid()) / 1024)}
            spark.stop()
        finally:
            cluster.stop(timeout_s=30)
    ratio = round(spark_rate / consumer_rate, 3)
    print(f"batch read of {args.records:,} records: Spark {spark_rate:,.0f} rec/s, Ketch's consumer "
          f"{consumer_rate:,.0f} rec/s: {ratio} x (goal >= 0.5)")
    print(f"streaming at {args.rate:,} rec/s, 1 s trigger: produce -> micro-batch p50 "
          f"{latency.get('p50_ms')} ms, p99 {latency.get('p99_ms')} ms ({latency.get('records')} records)")
    print(f"memory: SparkSession JVM {memory['jvm_rss_mb']} MB, Python driver {memory['python_driver_rss_mb']} MB")
    print(json.dumps({"bench": "spark", "records": args.records, "spark_records_per_s": round(spark_rate),
                      "ketch_consumer_records_per_s": round(consumer_rate), "ratio": ratio,
                      "streaming": latency, "memory": memory}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
