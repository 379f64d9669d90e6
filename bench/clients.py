"""Benchmark: Ketch's own client against kafka-python, aiokafka and confluent-kafka.

One run, one local 3+3 cluster, 100-byte values, no key, six partitions (records spread
round-robin by explicit partition, as bench/produce.py does), linger.ms=5, batch.size
256 KiB, no compression, idempotence off, every client configured alike:

  producer records/s, first send to last acknowledgement, for
    (a) acks=1 to a replication-factor-1 topic,
    (b) acks=all to a replication-factor-3 topic;
  for Ketch's asyncio Producer (`await p.send(...)` per record), Ketch's blocking Producer
  (`p.send(...)` per record; and with a delivery callback per record, as confluent-kafka's
  run has, `ketch_blocking_callback`), kafka-python, aiokafka (as installed, with its compiled
  record builder, and pure: AIOKAFKA_NO_EXTENSIONS=1) and confluent-kafka (librdkafka),
  each as a ratio to confluent-kafka measured in the same run.

Goals (issue 10): Ketch >= 1.5x the faster of the two pure-Python clients, and >= 0.5x
confluent-kafka. Each measurement runs in its own Python process (no client's threads or
memory linger into the next); clients take turns, and the best of --repeats is kept,
since on a shared machine other load only ever slows a run down (medians are in the JSON).

Adding a measurement (the consumer half comes next): write `measure_<name>(bootstrap,
topic, records, **options) -> dict` (it runs in a child process), register it in
MEASUREMENTS, and call `run_measurement(name, ...)` from `main`; put the figures under a
key of `result`. The last line printed is ONE JSON object.

Usage: python bench/clients.py [--records 100000] [--repeats 2] [--clients ketch,confluent,...]
No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients.cli.launcher import LocalCluster  # noqa: E402

VALUE_BYTES = 100
PARTITIONS = 6
LINGER_MS = 5
BATCH_BYTES = 256 * 1024
WARMUP_RECORDS = 2000
PRODUCERS = ("ketch", "ketch_blocking", "ketch_blocking_callback", "kafka_python", "aiokafka",
             "aiokafka_pure", "confluent")


# --- producer measurements (each runs in a child process) ---

def _result(records: int, elapsed: float, failed: int) -> dict:
    return {"records": records, "seconds": round(elapsed, 3),
            "records_per_s": round(records / elapsed), "failed": failed}


async def _timed_async_sends(p, topic: str, records: int) -> dict:
    """Warm up, then time `records` sends and the final flush of an asyncio producer whose
    send returns a future (Ketch's and aiokafka's share that shape)."""
    value = b"x" * VALUE_BYTES
    for i in range(WARMUP_RECORDS):
        await p.send(topic, value, partition=i % PARTITIONS)
    await p.flush()
    send = p.send
    futures = []
    start = time.perf_counter()
    for i in range(records):
        f = await send(topic, value, partition=i % PARTITIONS)
        if i & 0x3FF == 0:
            futures.append(f)
    await p.flush()
    elapsed = time.perf_counter() - start
    failed = sum(1 for f in futures if f.exception() is not None)
    return _result(records, elapsed, failed)


def _best_of(runs: dict[str, list[dict]]) -> dict:
    """Per client: its best run, with every run's figure and the median beside it."""
    table: dict = {}
    for client, rs in runs.items():
        good = [r for r in rs if "error" not in r]
        if not good:
            table[client] = {"error": rs[-1]["error"]}
            continue
        best = max(good, key=lambda r: r["records_per_s"])
        table[client] = dict(best, runs_records_per_s=[r["records_per_s"] for r in good],
                             median_records_per_s=round(statistics.median(
                                 r["records_per_s"] for r in good)))
    return table


def _ketch_producer_config(bootstrap: str, acks: str) -> dict:
    """Ketch's producers' settings in every measurement (the others' match them)."""
    return {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES, "enable.idempotence": False, "max.request.size": 4 << 20}


def measure_produce_ketch(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    from clients.aio import Producer

    async def run() -> dict:
        p = Producer(_ketch_producer_config(bootstrap, acks))
        await p.start()
        result = await _timed_async_sends(p, topic, records)
        await p.close()
        return result
    return asyncio.run(run())


def measure_produce_ketch_blocking(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    from clients import Producer

    p = Producer(_ketch_producer_config(bootstrap, acks))
    value = b"x" * VALUE_BYTES
    for i in range(WARMUP_RECORDS):
        p.send(topic, value, partition=i % PARTITIONS)
    p.flush()
    send = p.send
    futures = []
    start = time.perf_counter()
    for i in range(records):
        f = send(topic, value, partition=i % PARTITIONS)
        if i & 0x3FF == 0:
            futures.append(f)
    p.flush()
    elapsed = time.perf_counter() - start
    failed = sum(1 for f in futures if f.exception(10) is not None)
    p.close()
    return _result(records, elapsed, failed)


def measure_produce_ketch_blocking_callback(bootstrap: str, topic: str, records: int,
                                            acks: str) -> dict:
    """Ketch's blocking Producer with a delivery callback per record, as the confluent-kafka
    measurement has (on_delivery): what an application that wants each outcome pays."""
    from clients import Producer

    p = Producer(_ketch_producer_config(bootstrap, acks))
    failed = []

    def on_delivery(metadata, error) -> None:
        if error is not None:
            failed.append(error)

    value = b"x" * VALUE_BYTES
    for i in range(WARMUP_RECORDS):
        p.send(topic, value, partition=i % PARTITIONS, callback=on_delivery)
    p.flush()
    send = p.send
    start = time.perf_counter()
    for i in range(records):
        send(topic, value, partition=i % PARTITIONS, callback=on_delivery)
    p.flush()
    elapsed = time.perf_counter() - start
    p.close()
    return _result(records, elapsed, len(failed))


def measure_produce_kafka_python(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks=1 if acks == "1" else "all",
                      linger_ms=LINGER_MS, batch_size=BATCH_BYTES, enable_idempotence=False,
                      max_request_size=4 << 20)
    value = b"x" * VALUE_BYTES
    for i in range(WARMUP_RECORDS):
        p.send(topic, value, partition=i % PARTITIONS)
    p.flush()
    send = p.send
    futures = []
    start = time.perf_counter()
    for i in range(records):
        f = send(topic, value, partition=i % PARTITIONS)
        if i & 0x3FF == 0:
            futures.append(f)
    p.flush()
    elapsed = time.perf_counter() - start
    failed = sum(1 for f in futures if f.failed())
    p.close()
    return _result(records, elapsed, failed)


def measure_produce_aiokafka(bootstrap: str, topic: str, records: int, acks: str,
                             pure: bool = False) -> dict:
    if pure:
        os.environ["AIOKAFKA_NO_EXTENSIONS"] = "1"      # its pure-Python record builder
    from aiokafka import AIOKafkaProducer

    async def run() -> dict:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1 if acks == "1" else "all",
                             linger_ms=LINGER_MS, max_batch_size=BATCH_BYTES,
                             enable_idempotence=False, max_request_size=4 << 20)
        await p.start()
        result = await _timed_async_sends(p, topic, records)
        await p.stop()
        return result
    return asyncio.run(run())


def measure_produce_aiokafka_pure(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    return measure_produce_aiokafka(bootstrap, topic, records, acks, pure=True)


def measure_produce_confluent(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS,
                  "batch.size": BATCH_BYTES, "compression.type": "none",
                  "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, "message.max.bytes": 4 << 20})
    failed = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failed.append(err)

    value = b"x" * VALUE_BYTES
    for i in range(WARMUP_RECORDS):
        p.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
    p.flush(60)
    produce = p.produce
    start = time.perf_counter()
    for i in range(records):
        try:
            produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
            produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        if i & 0x3FFF == 0:
            p.poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - start
    return _result(records, elapsed, len(failed) + left)


MEASUREMENTS = {
    "produce_ketch": measure_produce_ketch,
    "produce_ketch_blocking": measure_produce_ketch_blocking,
    "produce_ketch_blocking_callback": measure_produce_ketch_blocking_callback,
    "produce_kafka_python": measure_produce_kafka_python,
    "produce_aiokafka": measure_produce_aiokafka,
    "produce_aiokafka_pure": measure_produce_aiokafka_pure,
    "produce_confluent": measure_produce_confluent,
}


def run_measurement(name: str, bootstrap: str, topic: str, records: int, timeout_s: float = 600,
                    **options: str) -> dict:
    """Run MEASUREMENTS[name] in a fresh Python process; its dict (or an error entry)."""
    cmd = [sys.executable, __file__, "--measure", name, bootstrap, topic, str(records),
           json.dumps(options)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


# --- cluster ---

def create_topics(bootstrap: str, specs: list[tuple[str, int, int]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=r)
                                   for n, p, r in specs], operation_timeout=30)
    for f in futures.values():
        f.result(60)
    deadline = time.monotonic() + 60
    for name, _, rf in specs:
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=10).topics.get(name)
            if md is not None and md.partitions and all(
                    len(p.isrs) == rf and p.leader >= 0 for p in md.partitions.values()):
                break
            time.sleep(0.2)


def producer_half(bootstrap: str, clients: list[str], records: int, repeats: int) -> dict:
    """Producer records/s for every client, both settings; ratios to confluent-kafka."""
    out: dict = {}
    for label, topic, acks in (("acks1_rf1", "rf1", "1"), ("acks_all_rf3", "rf3", "all")):
        runs: dict[str, list[dict]] = {c: [] for c in clients}
        for _ in range(repeats):
            for client in clients:             # clients take turns: same machine state
                r = run_measurement(f"produce_{client}", bootstrap, topic, records, acks=acks)
                runs[client].append(r)
                print(f"  {label:13s} {client:23s} "
                      + (f"{r['records_per_s']:>9,} records/s" if "error" not in r
                         else f"error: {r['error']}"), flush=True)
        table = _best_of(runs)
        base = table.get("confluent", {}).get("records_per_s")
        for client, row in table.items():
            if "records_per_s" in row and base:
                row["ratio_to_confluent"] = round(row["records_per_s"] / base, 3)
        # "pure-Python": kafka-python, and aiokafka without its compiled record builder;
        # aiokafka as installed (with it) is reported beside them.
        for key, names in (("ratio_to_faster_pure_python", ("kafka_python", "aiokafka_pure")),
                           ("ratio_to_aiokafka_compiled", ("aiokafka",))):
            others = [table[c]["records_per_s"] for c in names
                      if "records_per_s" in table.get(c, {})]
            for c in ("ketch", "ketch_blocking", "ketch_blocking_callback"):
                if others and "records_per_s" in table.get(c, {}):
                    table[c][key] = round(table[c]["records_per_s"] / max(others), 3)
        out[label] = table
    return out


def print_producer_table(producer: dict) -> None:
    for label, table in producer.items():
        print(f"\nproducer {label} (records/s, ratio to confluent-kafka):")
        for client, row in table.items():
            if "error" in row:
                print(f"  {client:23s} error: {row['error']}")
                continue
            extra = ""
            if "ratio_to_faster_pure_python" in row:
                extra = (f"   {row['ratio_to_faster_pure_python']:.2f}x the faster pure-Python "
                         f"client (goal >= 1.5); {row.get('ratio_to_aiokafka_compiled', 0):.2f}x "
                         "aiokafka with its compiled builder")
            print(f"  {client:23s} {row['records_per_s']:>9,}  {row.get('ratio_to_confluent', 0):.2f}"
                  f"{extra}")


# --- consumer measurements (each runs in a child process) ---
#
# Every consumer reads the same `records` records of the "consume" topic (6 partitions,
# replication factor 1, filled once by confluent-kafka before the consumer half) from the
# beginning, by assign() to all six partitions (no group, no commits), `POLL_RECORDS` per
# poll (Kafka's max.poll.records default), other settings at each client's defaults. The
# clock runs from the first poll to the record that completes the count.

POLL_RECORDS = 500
CONSUMERS = ("ketch", "ketch_blocking", "kafka_python", "aiokafka", "aiokafka_pure", "confluent")
IDLE_CONSUMERS = 10


def _consume_result(records: int, elapsed: float, got: int) -> dict:
    return {"records": got, "seconds": round(elapsed, 3), "records_per_s": round(got / elapsed),
            "failed": max(0, records - got)}


def measure_consume_ketch(bootstrap: str, topic: str, records: int) -> dict:
    from clients.aio import Consumer
    from clients.types import TopicPartition

    async def run() -> dict:
        c = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                      "max.poll.records": POLL_RECORDS})
        await c.start()
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got = 0
        start = time.perf_counter()
        while got < records:
            got += len(await c.poll(1000))
        elapsed = time.perf_counter() - start
        await c.close()
        return _consume_result(records, elapsed, got)
    return asyncio.run(run())


def measure_consume_ketch_blocking(bootstrap: str, topic: str, records: int) -> dict:
    from clients import Consumer
    from clients.types import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                  "max.poll.records": POLL_RECORDS})
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        got += len(c.poll(1000))
    elapsed = time.perf_counter() - start
    c.close()
    return _consume_result(records, elapsed, got)


def measure_consume_kafka_python(bootstrap: str, topic: str, records: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                      auto_offset_reset="earliest", max_poll_records=POLL_RECORDS)
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        for batch in c.poll(1000).values():
            got += len(batch)
    elapsed = time.perf_counter() - start
    c.close()
    return _consume_result(records, elapsed, got)


def measure_consume_aiokafka(bootstrap: str, topic: str, records: int, pure: bool = False) -> dict:
    if pure:
        os.environ["AIOKAFKA_NO_EXTENSIONS"] = "1"      # its pure-Python record reader
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got = 0
        start = time.perf_counter()
        while got < records:
            for batch in (await c.getmany(timeout_ms=1000, max_records=POLL_RECORDS)).values():
                got += len(batch)
        elapsed = time.perf_counter() - start
        await c.stop()
        return _consume_result(records, elapsed, got)
    return asyncio.run(run())


def measure_consume_aiokafka_pure(bootstrap: str, topic: str, records: int) -> dict:
    return measure_consume_aiokafka(bootstrap, topic, records, pure=True)


def measure_consume_confluent(bootstrap: str, topic: str, records: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        for m in c.consume(POLL_RECORDS, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    return _consume_result(records, elapsed, got)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_idle_ketch(bootstrap: str, topic: str, records: int) -> dict:
    """Memory per idle consumer: IDLE_CONSUMERS Ketch consumers in one group, joined, each
    with its partitions' positions, fetching (long polls) but handed nothing new; the RSS
    growth of the process divided by their number (imports and the first one's warm-up
    excluded)."""
    from clients.aio import Consumer

    async def run() -> dict:
        def make(i: int) -> Consumer:
            return Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-idle",
                             "client.id": f"idle-{i}", "auto.offset.reset": "latest"})
        warm = make(-1)
        await warm.start()
        await warm.close()
        before = _rss_bytes()
        consumers = [make(i) for i in range(IDLE_CONSUMERS)]
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while sum(len(c.assignment()) for c in consumers) < PARTITIONS and time.monotonic() < deadline:
            await asyncio.gather(*(c.poll(100) for c in consumers))
        for _ in range(5):
            await asyncio.gather(*(c.poll(100) for c in consumers))
        after = _rss_bytes()
        for c in consumers:
            await c.close()
        return {"consumers": IDLE_CONSUMERS, "bytes_per_consumer": (after - before) // IDLE_CONSUMERS}
    return asyncio.run(run())


def measure_idle_confluent(bootstrap: str, topic: str, records: int) -> dict:
    from confluent_kafka import Consumer

    warm = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-idle-c"})
    warm.close()
    before = _rss_bytes()
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-idle-c",
                           "client.id": f"idle-{i}", "auto.offset.reset": "latest"})
                 for i in range(IDLE_CONSUMERS)]
    for c in consumers:
        c.subscribe([topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(len(c.assignment()) for c in consumers) < PARTITIONS:
        for c in consumers:
            c.poll(0.05)
    after = _rss_bytes()
    for c in consumers:
        c.close()
    return {"consumers": IDLE_CONSUMERS, "bytes_per_consumer": (after - before) // IDLE_CONSUMERS}


MEASUREMENTS.update({f"consume_{c}": globals()[f"measure_consume_{c}"] for c in CONSUMERS})
MEASUREMENTS.update({"idle_ketch": measure_idle_ketch, "idle_confluent": measure_idle_confluent})


def fill_consume_topic(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
                  "batch.size": BATCH_BYTES, "enable.idempotence": False,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * VALUE_BYTES
    for i in range(records):
        try:
            p.produce(topic, value=value, partition=i % PARTITIONS)
        except BufferError:
            p.poll(0.05)
            p.produce(topic, value=value, partition=i % PARTITIONS)
    assert p.flush(300) == 0, "the consume topic was not filled"


def consumer_half(bootstrap: str, clients: list[str], records: int, repeats: int) -> dict:
    """Consumer records/s for every client, ratios to confluent-kafka; memory per idle
    consumer for Ketch and confluent-kafka."""
    create_topics(bootstrap, [("consume", PARTITIONS, 1), ("idle", PARTITIONS, 1)])
    fill_consume_topic(bootstrap, "consume", records)
    runs: dict[str, list[dict]] = {c: [] for c in clients}
    for _ in range(repeats):
        for client in clients:
            r = run_measurement(f"consume_{client}", bootstrap, "consume", records)
            runs[client].append(r)
            print(f"  consume       {client:23s} "
                  + (f"{r['records_per_s']:>9,} records/s" if "error" not in r
                     else f"error: {r['error']}"), flush=True)
    table = _best_of(runs)
    base = table.get("confluent", {}).get("records_per_s")
    for row in table.values():
        if "records_per_s" in row and base:
            row["ratio_to_confluent"] = round(row["records_per_s"] / base, 3)
    # "pure-Python": kafka-python, and aiokafka without its compiled record reader; aiokafka
    # as installed (with it) is reported beside them.
    for label, names in (("ratio_to_faster_pure_python", ("kafka_python", "aiokafka_pure")),
                         ("ratio_to_aiokafka_compiled", ("aiokafka",))):
        others = [table[c]["records_per_s"] for c in names if "records_per_s" in table.get(c, {})]
        for c in ("ketch", "ketch_blocking"):
            if others and "records_per_s" in table.get(c, {}):
                table[c][label] = round(table[c]["records_per_s"] / max(others), 3)
    idle = {}
    for client in ("ketch", "confluent"):
        idle[client] = run_measurement(f"idle_{client}", bootstrap, "idle", 0)
    return {"consume": table, "idle_memory": idle}


def print_consumer_table(consumer: dict) -> None:
    print("\nconsumer (records/s, ratio to confluent-kafka):")
    for client, row in consumer["consume"].items():
        if "error" in row:
            print(f"  {client:23s} error: {row['error']}")
            continue
        extra = ""
        if "ratio_to_faster_pure_python" in row:
            extra = (f"   {row['ratio_to_faster_pure_python']:.2f}x the faster pure-Python client "
                     f"(goal >= 1.5); {row.get('ratio_to_aiokafka_compiled', 0):.2f}x aiokafka with "
                     "its compiled reader")
        print(f"  {client:23s} {row['records_per_s']:>9,}  {row.get('ratio_to_confluent', 0):.2f}{extra}")
    print("memory per idle consumer (RSS growth / consumers):")
    for client, row in consumer["idle_memory"].items():
        print(f"  {client:23s} " + (f"{row['bytes_per_consumer'] / 1024:,.0f} KiB" if "error" not in row
                                    else f"error: {row['error']}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000, help="records per producer run")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each (best and median kept)")
    ap.add_argument("--clients", default=",".join(PRODUCERS),
                    help=f"producers to measure, of {','.join(PRODUCERS)}")
    ap.add_argument("--consumers", default=",".join(CONSUMERS),
                    help=f"consumers to measure, of {','.join(CONSUMERS)}")
    ap.add_argument("--consume-records", type=int, default=200_000, help="records per consumer run")
    ap.add_argument("--half", default="producer,consumer", help="which halves to run")
    ap.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.measure:
        name, bootstrap, topic, records, options = args.measure
        print(json.dumps(MEASUREMENTS[name](bootstrap, topic, int(records), **json.loads(options))))
        return 0

    def interrupted(signum, frame):
        raise SystemExit(f"bench: signal {signum}")   # unwinds through the cluster's stop
    signal.signal(signal.SIGTERM, interrupted)

    clients = [c for c in args.clients.split(",") if c]
    result: dict = {"bench": "clients", "cpus": os.cpu_count(), "value_bytes": VALUE_BYTES,
                    "partitions": PARTITIONS, "records": args.records, "repeats": args.repeats}
    print(f"machine: {os.cpu_count()} CPUs; {args.records} records of {VALUE_BYTES} B per run; "
          f"{PARTITIONS} partitions; linger.ms={LINGER_MS}, batch.size={BATCH_BYTES}, "
          "no compression, idempotence off")
    with tempfile.TemporaryDirectory(prefix="ketch-bench-clients-") as tmp:
        cluster = LocalCluster(tmp, controllers=3, brokers=3)
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.spec.bootstrap_servers
            create_topics(bootstrap, [("rf1", PARTITIONS, 1), ("rf3", PARTITIONS, 3)])
            halves = args.half.split(",")
            if "producer" in halves:
                result["producer"] = producer_half(bootstrap, clients, args.records, args.repeats)
            if "consumer" in halves:
                consumers = [c for c in args.consumers.split(",") if c]
                result["consume_records"] = args.consume_records
                result["consumer"] = consumer_half(bootstrap, consumers, args.consume_records,
                                                   args.repeats)
        finally:
            cluster.stop(timeout_s=30)
    if "producer" in result:
        print_producer_table(result["producer"])
    if "consumer" in result:
        print_consumer_table(result["consumer"])
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
