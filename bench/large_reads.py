"""Benchmark: a broker's CPU per MB of large fetch reads, under each event loop.

One controller and one broker per event loop (``ketch.event.loop``: asyncio's own, then
uvloop, the default), one after the other in the same run: a 4-partition topic of 128 MB
(1 KB values, acks=1), then a raw Fetch loop (8 MiB per partition, 32 MiB per request, one
request in flight, Ketch's asyncio client) reads it all back ``--passes`` times per
measurement. Each partition's answer is a log region far above SENDFILE_MIN_BYTES, so the
broker sends it with os.sendfile (quorum/network.py ``send_file_region``) under both loops:
its CPU per MB (utime + stime from /proc) should be about the same under each, and far
below a broker that copies the bytes through Python (session 10's uvloop broker: ~2.5
CPU-ms per MB against ~0.3). The client decodes only batch headers, but it is still one
Python process, so MB/s is as much its figure as the broker's.

Usage: python bench/large_reads.py [--repeats 3] [--passes 5] [--loops asyncio,uvloop]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.connection import connect  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402
from clients.records import iter_batches  # noqa: E402

TOPIC = "large-reads"
PARTITIONS = 4
VALUE_BYTES = 1000
RECORDS = 128_000
F = messages.FetchRequest


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _read_all(port: int, ends: dict[int, int]) -> int:
    """Every partition from offset 0 to its end; the bytes of records received."""
    conn = await connect("127.0.0.1", port)
    total = 0
    offsets = {p: 0 for p in ends}
    try:
        while any(offsets[p] < ends[p] for p in ends):
            resp = await conn.request(ApiKey.FETCH, 11, F(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=32 << 20, isolation_level=0,
                topics=[F.FetchTopic(topic=TOPIC, partitions=[
                    F.FetchPartition(partition=p, fetch_offset=offsets[p], partition_max_bytes=8 << 20)
                    for p in ends if offsets[p] < ends[p]])]))
            for part in resp.responses[0].partitions:
                assert part.error_code == 0, part
                total += len(part.records)
                last = None
                for _, header in iter_batches(part.records, partial_tail_ok=True, check_crc=False):
                    last = header
                assert last is not None, "a fetch below the log end brought no whole batch"
                offsets[part.partition_index] = last.base_offset + last.last_offset_delta + 1
    finally:
        conn.close()
    return total


def measure(loop_name: str, repeats: int, passes: int) -> dict:
    import produce  # bench/produce.py: topic creation and the producer's settings
    from confluent_kafka import Producer

    with tempfile.TemporaryDirectory(prefix="ketch-bench-reads-") as d:
        cluster = LocalCluster(d, controllers=1, brokers=1, broker_props={"ketch.event.loop": loop_name})
        cluster.start(timeout_s=120)
        try:
            bootstrap = cluster.spec.bootstrap_servers
            produce.create_topics(bootstrap, [(TOPIC, PARTITIONS, 1, {})])
            producer = Producer(produce.producer_config(bootstrap, "1"))
            value = os.urandom(VALUE_BYTES)
            for i in range(RECORDS):
                while True:
                    try:
                        producer.produce(TOPIC, value, partition=i % PARTITIONS)
                        break
                    except BufferError:
                        producer.poll(0.01)
            assert producer.flush(60) == 0
            broker = next(n for n in cluster.spec.nodes if n.role == "broker")
            ends = {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
            runs = []
            for _ in range(repeats):
                cpu0, t0 = _cpu_s(broker.pid), time.monotonic()
                mb = sum(asyncio.run(_read_all(broker.port, ends)) for _ in range(passes)) / 1e6
                cpu1, t1 = _cpu_s(broker.pid), time.monotonic()
                runs.append({"mb": round(mb, 1), "mb_per_s": round(mb / (t1 - t0), 1),
                             "broker_cpu_ms_per_mb": round((cpu1 - cpu0) * 1000 / mb, 3)})
                print(f"  {loop_name:7s}: {mb:.0f} MB in {t1 - t0:.2f} s = {mb / (t1 - t0):.0f} MB/s; "
                      f"broker {runs[-1]['broker_cpu_ms_per_mb']:.2f} CPU-ms per MB", flush=True)
            return {"runs": runs, "best_mb_per_s": max(r["mb_per_s"] for r in runs),
                    "min_broker_cpu_ms_per_mb": min(r["broker_cpu_ms_per_mb"] for r in runs)}
        finally:
            cluster.stop(timeout_s=20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="measurements per event loop")
    ap.add_argument("--passes", type=int, default=5, help="reads of the whole topic per measurement")
    ap.add_argument("--loops", default="asyncio,uvloop", help="event loops to measure, in this order")
    args = ap.parse_args()
    sys.path.append(str(pathlib.Path(__file__).resolve().parent))   # after the root: bench/clients.py
    print(f"machine: {os.cpu_count()} CPUs; {RECORDS * VALUE_BYTES / 1e6:.0f} MB in {PARTITIONS} partitions, "
          f"read {args.passes} times per measurement")
    result: dict = {"bench": "large_reads", "cpus": os.cpu_count(), "loops": {}}
    for loop_name in args.loops.split(","):
        result["loops"][loop_name] = measure(loop_name, args.repeats, args.passes)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
