"""A PySpark Structured Streaming pipeline on Ketch: click events in, counts per page and
1-minute event-time window out.

    python examples/clicks_pipeline.py produce --bootstrap 127.0.0.1:9092 --events 1000
    python examples/clicks_pipeline.py run --bootstrap 127.0.0.1:9092 --checkpoint /tmp/clicks-ckpt

``produce`` writes JSON click events ({"user", "page", "ts"} with ts in epoch ms, keyed by
user) to the ``clicks`` topic with Ketch's own producer. ``run`` reads ``clicks`` with the
``ketch`` Spark source, counts clicks per page over 1-minute event-time windows with a
2-minute watermark, and writes each window's running count to ``click-counts`` as JSON
(key: page and window start; each micro-batch's updated windows, through the ketch batch
writer), the latest record per key being the count so far. With
``--available-now`` it processes what is there and stops; otherwise it runs until Ctrl-C.
The query's progress is committed to the consumer group ``clicks-pipeline``, so
``ketch group describe clicks-pipeline`` shows how far behind it is.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

CLICKS, COUNTS, GROUP = "clicks", "click-counts", "clicks-pipeline"
PAGES = ("/", "/cart", "/checkout", "/search")


def produce_clicks(bootstrap: str, events: list[dict]) -> None:
    from clients import Producer

    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as p:
        for e in events:
            p.send(CLICKS, key=e["user"].encode(), value=json.dumps(e).encode())
        p.flush()


def random_events(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    return [{"user": f"u{rng.randrange(50)}", "page": rng.choice(PAGES),
             "ts": now - rng.randrange(5 * 60_000)} for _ in range(n)]


def build_query(spark, bootstrap: str, checkpoint: str, available_now: bool):
    """The pipeline: the streaming query, started."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from clients.spark import register
    register(spark)
    event = StructType([StructField("user", StringType()), StructField("page", StringType()),
                        StructField("ts", LongType())])
    clicks = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", CLICKS).option("startingOffsets", "earliest")
              .option("commitOffsetsToGroup", GROUP).load()
              .select(F.from_json(F.col("value").cast("string"), event).alias("e"))
              .select("e.page", (F.col("e.ts") / 1000).cast("timestamp").alias("event_time")))
    counts = (clicks.withWatermark("event_time", "2 minutes")
              .groupBy(F.window("event_time", "1 minute"), "page").count())
    out = counts.select(
        F.concat_ws("@", "page", F.col("window.start").cast("long")).alias("key"),
        F.to_json(F.struct(F.col("page"), F.col("window.start").cast("long").alias("window_start"),
                           F.col("count"))).alias("value"))
    def write_updates(batch, _batch_id: int) -> None:
        # Spark's Python streaming sinks take appends only; the windows' running counts
        # (update mode) go out through the batch writer, once per micro-batch.
        (batch.write.format("ketch").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", COUNTS).mode("append").save())

    writer = (out.writeStream.foreachBatch(write_updates).option("checkpointLocation", checkpoint)
              .outputMode("update"))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def latest_counts(bootstrap: str) -> dict[tuple[str, int], int]:
    """(page, window start in s) -> the count the pipeline last wrote."""
    from clients import Consumer

    from clients import Admin
    from clients.types import TopicPartition

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        partitions = admin.describe_topics([COUNTS])[COUNTS].partitions
    out: dict[tuple[str, int], int] = {}
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}) as c:
        c.assign([TopicPartition(COUNTS, p.partition) for p in partitions])
        idle = time.monotonic()
        while time.monotonic() - idle < 2:        # until nothing more arrives for 2 s
            for r in c.poll(500):
                v = json.loads(r.value)
                out[(v["page"], v["window_start"])] = v["count"]
                idle = time.monotonic()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("produce", "run", "show"))
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--checkpoint", default="/tmp/ketch-clicks-checkpoint")
    ap.add_argument("--available-now", action="store_true")
    args = ap.parse_args(argv)
    if args.action == "produce":
        produce_clicks(args.bootstrap, random_events(args.events))
        return 0
    if args.action == "show":
        for (page, start), n in sorted(latest_counts(args.bootstrap).items(), key=lambda kv: kv[0][1]):
            print(f"{time.strftime('%H:%M', time.gmtime(start))} {page:10s} {n}")
        return 0
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[2]").appName("clicks").getOrCreate()
    query = build_query(spark, args.bootstrap, args.checkpoint, args.available_now)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
