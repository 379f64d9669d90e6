"""Benchmark: a producer under a client quota (producer_byte_rate) against its quota, and an
unlimited one beside it, in the same run (issue 20; goal: the limited producer within 10%
of its quota).

A 1-controller, 1-broker cluster; one 6-partition topic. Client id ``limited`` gets
producer_byte_rate = --quota-mb MB/s through AlterClientQuotas (the same request
``kafka-configs --alter --entity-type clients`` sends). A confluent-kafka producer (acks=1,
1 KiB records, as fast as it can) runs for --seconds as ``limited``, then as ``unlimited``.
The broker answers over-quota requests with throttle_time_ms and mutes the connection
(KIP-219); librdkafka waits out the throttle too. Throughput counts acknowledged bytes over
the run, after the first --warmup seconds (the broker measures rates over an 11 s window).

Usage: python bench/quota.py [--quota-mb 1] [--seconds 25] [--warmup 5]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients import connection  # noqa: E402
from clients.admin import Admin, NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402

RECORD_BYTES = 1024


def set_quota(port: int, client_id: str, bytes_per_s: int) -> None:
    A = messages.AlterClientQuotasRequest
    resp = connection.roundtrip("127.0.0.1", port, ApiKey.ALTER_CLIENT_QUOTAS, 1, A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[A.OpData(key="producer_byte_rate", value=float(bytes_per_s), remove=False)])],
        validate_only=False))
    assert resp.entries[0].error_code == 0, resp


def run_producer(bootstrap: str, client_id: str, seconds: float, warmup: float) -> dict:
    from confluent_kafka import Producer

    acked: list[tuple[float, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 4096})

    def delivered(err, msg) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    value = b"x" * RECORD_BYTES
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce("quota", value=value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            continue
        producer.poll(0)
    producer.flush(30)
    counted = [n for t, n in acked if start + warmup <= t <= start + seconds]
    return {"client_id": client_id, "acked_bytes": sum(n for _, n in acked),
            "bytes_per_s": round(sum(counted) / (seconds - warmup))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quota-mb", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    args = ap.parse_args()
    quota = int(args.quota_mb * 1_000_000)
    with tempfile.TemporaryDirectory(prefix="ketch-bench-quota-") as d:
        cluster = LocalCluster(d, controllers=1, brokers=1)
        try:
            cluster.start(timeout_s=120)
            port = cluster.spec.brokers[0].port
            admin = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers})
            try:
                admin.create_topics([NewTopic("quota", num_partitions=6, replication_factor=1)])
            finally:
                admin.close()
            set_quota(port, "limited", quota)
            time.sleep(1)      # the broker applies the committed quota from its metadata log
            limited = run_producer(cluster.spec.bootstrap_servers, "limited", args.seconds, args.warmup)
            unlimited = run_producer(cluster.spec.bootstrap_servers, "unlimited", args.seconds, args.warmup)
        finally:
            cluster.stop(timeout_s=30)
    ratio = round(limited["bytes_per_s"] / quota, 3)
    print(f"limited producer:   {limited['bytes_per_s']:>12,} B/s = {ratio} x its quota of {quota:,} B/s "
          f"(goal: within 10%)")
    print(f"unlimited producer: {unlimited['bytes_per_s']:>12,} B/s = "
          f"{round(unlimited['bytes_per_s'] / quota, 1)} x that quota")
    print(json.dumps({"bench": "quota", "quota_bytes_per_s": quota, "limited": limited,
                      "unlimited": unlimited, "limited_to_quota": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
