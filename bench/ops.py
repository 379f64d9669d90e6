"""Benchmark: what the metrics cost (issue 13; goal: metrics cost <= 5% of produce throughput),
and how long a Prometheus scrape of a broker with 10,000 partitions takes and how big it is.

1. Produce throughput, metrics on vs off, in the same run: two 1-controller/1-broker
   clusters, one with ``ketch.metrics.enable=true`` (the default) and one with ``false``;
   the same confluent-kafka producer (acks=1, 100-byte records, as fast as it can) runs on
   each for --seconds, alternating on/off --rounds times so drift hits both alike.
   Reported: records/s per side (median of rounds) and the ratio on/off, and, steadier on
   a shared machine, the broker's CPU time per record (utime + stime from /proc) per side.
2. /metrics at scale: on the metrics-on broker, a topic with --partitions partitions
   (replication 1); GET /metrics --scrapes times: median and worst time, bytes, series;
   then GET /metrics?name[]=kafka_server_replicamanager_leadercount (one count, what a
   probe asks) --scrapes times: its median, as a ratio to the whole scrape's.

Usage: python bench/ops.py [--seconds 10] [--rounds 3] [--partitions 10000] [--scrapes 5]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.admin import Admin, NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402

RECORD_BYTES = 100
TOPIC = "ops-bench"


def produce_rate(bootstrap: str, seconds: float) -> float:
    from confluent_kafka import Producer

    acked = [0]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "queue.buffering.max.kbytes": 8192})

    def delivered(err, msg) -> None:
        if err is None:
            acked[0] += 1

    value = b"x" * RECORD_BYTES
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(TOPIC, value=value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
            continue
        producer.poll(0)
    producer.flush(30)
    return acked[0] / (time.monotonic() - start)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int, query: str = "") -> tuple[float, int, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics{query}", timeout=120) as resp:
        body = resp.read()
    elapsed = time.perf_counter() - started
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return elapsed, len(body), series


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--scrapes", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ketch-bench-ops-") as d:
        clusters = {
            enabled: LocalCluster(f"{d}/{'on' if enabled else 'off'}", controllers=1, brokers=1,
                                  broker_props={"ketch.metrics.enable": str(enabled).lower(),
                                                "log.segment.bytes": str(1 << 30)})
            for enabled in (True, False)}
        try:
            for c in clusters.values():
                c.start(timeout_s=120)
                with Admin({"bootstrap.servers": c.spec.bootstrap_servers}) as admin:
                    admin.create_topics([NewTopic(TOPIC, 6, 1)])
            rates: dict[bool, list[float]] = {True: [], False: []}
            cpu_us: dict[bool, list[float]] = {True: [], False: []}
            for r in range(args.rounds):
                for enabled in (True, False) if r % 2 == 0 else (False, True):
                    pid = clusters[enabled].spec.brokers[0].pid
                    cpu_before = cpu_seconds(pid)
                    t0 = time.monotonic()
                    rate = produce_rate(clusters[enabled].spec.bootstrap_servers, args.seconds)
                    records = rate * (time.monotonic() - t0)
                    per_record = (cpu_seconds(pid) - cpu_before) / records * 1e6
                    rates[enabled].append(rate)
                    cpu_us[enabled].append(per_record)
                    print(f"round {r + 1}: metrics {'on ' if enabled else 'off'} {rate:,.0f} records/s, "
                          f"broker CPU {per_record:.2f} us/record", flush=True)
            on, off = statistics.median(rates[True]), statistics.median(rates[False])
            cpu_on, cpu_off = statistics.median(cpu_us[True]), statistics.median(cpu_us[False])
            cost = 1 - on / off
            print(f"produce: metrics on {on:,.0f} rec/s, off {off:,.0f} rec/s: ratio on/off "
                  f"{on / off:.3f} (cost {cost:.1%}; goal <= 5%)", flush=True)
            print(f"broker CPU per record: on {cpu_on:.2f} us, off {cpu_off:.2f} us: ratio "
                  f"{cpu_on / cpu_off:.3f}", flush=True)

            broker = clusters[True].spec.brokers[0]
            with Admin({"bootstrap.servers": clusters[True].spec.bootstrap_servers},
                       default_api_timeout_ms=300_000, request_timeout_ms=300_000) as admin:
                admin.create_topics([NewTopic("ops-wide", args.partitions, 1)])
            want = args.partitions + 6

            def hosted() -> int:
                with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/v1/node",
                                            timeout=60) as resp:
                    return json.load(resp)["partitions_hosted"]
            deadline = time.monotonic() + 600
            while hosted() < want and time.monotonic() < deadline:
                time.sleep(1)
            scrape(broker.http_port)          # warm: children and caches built once
            runs = [scrape(broker.http_port) for _ in range(args.scrapes)]
            times = sorted(t for t, _, _ in runs)
            size, series = runs[-1][1], runs[-1][2]
            print(f"/metrics with {hosted():,} partitions: median {statistics.median(times) * 1000:.0f} ms, "
                  f"worst {times[-1] * 1000:.0f} ms, {size / 1e6:.1f} MB, {series:,} series", flush=True)
            # A probe of one count (name[]): what a readiness script or bench/scale.py asks.
            probe = sorted(scrape(broker.http_port, "?name[]=kafka_server_replicamanager_leadercount")[0]
                           for _ in range(args.scrapes))
            probe_ratio = statistics.median(probe) / statistics.median(times)
            print(f"/metrics?name[]=kafka_server_replicamanager_leadercount: median "
                  f"{statistics.median(probe) * 1000:.1f} ms: ratio to the whole scrape "
                  f"{probe_ratio:.3f}", flush=True)
            print(json.dumps({
                "bench": "ops", "produce_records_per_s_metrics_on": round(on),
                "produce_records_per_s_metrics_off": round(off), "ratio_on_off": round(on / off, 3),
                "metrics_cost": round(cost, 3), "goal_cost_max": 0.05,
                "broker_cpu_us_per_record_on": round(cpu_on, 3),
                "broker_cpu_us_per_record_off": round(cpu_off, 3),
                "cpu_ratio_on_off": round(cpu_on / cpu_off, 3),
                "partitions": args.partitions, "scrape_ms_median": round(statistics.median(times) * 1000),
                "scrape_ms_worst": round(times[-1] * 1000), "scrape_bytes": size,
                "scrape_series": series,
                "probe_ms_median": round(statistics.median(probe) * 1000, 1),
                "probe_ratio_to_scrape": round(probe_ratio, 3)}))
        finally:
            for c in clusters.values():
                c.stop(timeout_s=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
