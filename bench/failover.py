"""Benchmark: SIGKILL of a partition leader -> the first write acknowledged by the new
leader, with fast crash detection on and off in the same run (issue 17).

Two clusters in turn (3 controllers, 3 brokers, Kafka's default broker.session.timeout.ms
of 9000 ms), the same workload on each: a paced idempotent acks=all confluent-kafka producer
writes 1,000 records/s to a 1-partition RF-3 topic (min.insync.replicas 2); the leader is
SIGKILLed; the time to the first acknowledged record of the new leader epoch is reported
(bench/produce.py's failover measurement). "off" sets ketch.broker.disconnect.fence.ms=-1,
so the controller fences the dead broker only when its session times out; "on" keeps the
default (fenced 250 ms after its heartbeat connection closed). Goal: on <= 1,000 ms.

Usage: python bench/failover.py [--repeats 2]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients.cli.launcher import LocalCluster  # noqa: E402

# bench/produce.py's failover measurement, loaded from its file (bench/ is not a package).
_spec = importlib.util.spec_from_file_location("bench_produce", ROOT / "bench" / "produce.py")
produce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(produce)

SESSION_TIMEOUT_MS = 9000


def run(fence_ms: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ketch-bench-failover-") as d:
        cluster = LocalCluster(d, controllers=3, brokers=3, controller_props={
            "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "ketch.broker.disconnect.fence.ms": str(fence_ms)})
        try:
            cluster.start(timeout_s=120)
            produce.create_topics(cluster.spec.bootstrap_servers,
                                  [("failover", 1, 3, {"min.insync.replicas": "2"})])
            produce.wait_in_sync(cluster, "failover", 3)
            kills = []
            for _ in range(repeats):
                kills.append(produce.measure_failover(cluster, "failover", "sigkill"))
                produce.wait_in_sync(cluster, "failover", 3)
        finally:
            cluster.stop(timeout_s=30)
    firsts = [k["first_new_leader_ack_ms"] for k in kills if k["first_new_leader_ack_ms"] is not None]
    return {"disconnect_fence_ms": fence_ms, "runs": kills,
            "first_new_leader_ack_ms": firsts,
            "median_first_new_leader_ack_ms": statistics.median(firsts) if firsts else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="SIGKILLs per cluster")
    args = ap.parse_args()
    off = run(-1, args.repeats)
    on = run(250, args.repeats)
    result = {"bench": "failover", "session_timeout_ms": SESSION_TIMEOUT_MS, "off": off, "on": on}
    for label, r in (("fast detection off", off), ("fast detection on ", on)):
        print(f"{label}: SIGKILL of the leader -> first ack from the new leader: "
              f"{r['first_new_leader_ack_ms']} ms (median {r['median_first_new_leader_ack_ms']})")
    if on["median_first_new_leader_ack_ms"] and off["median_first_new_leader_ack_ms"]:
        result["ratio_on_to_off"] = round(on["median_first_new_leader_ack_ms"]
                                          / off["median_first_new_leader_ack_ms"], 3)
        print(f"on / off: {result['ratio_on_to_off']} (goal: on <= 1000 ms)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
