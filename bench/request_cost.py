"""Benchmark: the broker's fixed CPU per request, as a ratio to the protocol-only sink's.

Why: at 10,000 records/s acks=all RF 3 the brokers spend about 1 ms of CPU per request
(issue 22), and on this 2-core machine each hop of the end-to-end path waits for a CPU, so
CPU per request is what the latency goal turns on. Rates and latencies swing with whatever
else runs on a shared machine; the CPU a process spends on a fixed number of requests
swings much less, so this bench counts CPU (user + system, from /proc/PID/stat) and
divides by the number of requests. The same requests sent to the protocol-only sink of
bench/produce.py (framing and codec only, everything from memory) give the floor of a
Python asyncio server on this machine: the ratio to it is the figure to compare between
trees, each tree's figures taken in the same window.

Workloads, each sent with Ketch's own client (clients/connection.py) one request at a time
("seq": the next request leaves when the response came) and pipelined ("pipe": --window
requests outstanding on the connection):
  produce-acks1-p1 / -p6:   Produce, acks=1, one 1-record batch (100-byte value) for each
                            of 1 / 6 partitions (the same prebuilt batches every time)
  produce-acksall-p1 / -p6: the same with acks=all
  fetch-p1 / -p6:           consumer Fetch of an empty partition (1 / 6 partitions),
                            max_wait_ms=0, min_bytes=0, no fetch session (epoch -1)
Clusters: 1 broker (RF 1), then 3 brokers with RF 3 where one broker leads every partition,
so the requests go to one connection; there the CPU of all three brokers is counted (the
followers' fetches are part of what an acks=all Produce costs). The controller's CPU is not
counted. The client's own CPU is never counted. Each figure is the least of --repeats runs
(on a shared machine noise only adds CPU).

Known limit: nothing subtracts the brokers' background CPU (heartbeats, metadata polls,
idle follower fetch loops), which accrues per second, not per request; where a request
takes long (3 brokers, one at a time: each waits for a replication round), it weighs in
the 3-broker figures. Compare those between trees, not with the 1-broker ones. On a busy
machine (load 8 on 2 cores) figures swing by ~30% run to run: alternate trees, repeat.

Usage: python bench/request_cost.py [--requests 2000] [--repeats 2] [--window 16]
                                     [--brokers 1 3] [--only produce-acks1-p1,...]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from produce import FETCH_SINK_TOPIC, VALUE_BYTES, start_sink, stop_process  # noqa: E402

from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.connection import KafkaConnection, connect  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402
from clients.records import Record, build_batch  # noqa: E402

WORKLOADS = ("produce-acks1-p1", "produce-acks1-p6", "produce-acksall-p1", "produce-acksall-p6",
             "fetch-p1", "fetch-p6")
PRODUCE_TOPIC = "cost-produce"
FETCH_TOPIC = "cost-fetch"
PARTITIONS = 6


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


class Target:
    """Where the requests go: one connection, the topics' names and ids, the pids whose
    CPU is counted."""

    def __init__(self, conn: KafkaConnection, pids: list[int], produce_topic: str,
                 fetch_topic: str) -> None:
        self.conn = conn
        self.pids = pids
        self.produce_topic = produce_topic
        self.fetch_topic = fetch_topic
        self.topic_ids: dict[str, Any] = {}
        self.produce_version = conn.pick_version(ApiKey.PRODUCE, 3, 9)
        self.fetch_version = conn.pick_version(ApiKey.FETCH, 4, 13)

    async def load_metadata(self) -> None:
        md = await self.conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=n)
                    for n in (self.produce_topic, self.fetch_topic)],
            allow_auto_topic_creation=False))
        for t in md.topics:
            self.topic_ids[t.name] = t.topic_id

    def request(self, workload: str) -> tuple[int, int, Any]:
        partitions = range(6 if workload.endswith("p6") else 1)
        if workload.startswith("produce"):
            batch = build_batch([Record(0, 0, None, b"v" * VALUE_BYTES)])
            P = messages.ProduceRequest
            return ApiKey.PRODUCE, self.produce_version, P(
                acks=-1 if "acksall" in workload else 1, timeout_ms=30_000, topic_data=[
                    P.TopicProduceData(name=self.produce_topic, partition_data=[
                        P.TopicProduceData.PartitionProduceData(index=p, records=batch)
                        for p in partitions])])
        F = messages.FetchRequest
        by_id = self.fetch_version >= 13
        return ApiKey.FETCH, self.fetch_version, F(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                topic="" if by_id else self.fetch_topic,
                topic_id=self.topic_ids[self.fetch_topic] if by_id else F.FetchTopic().topic_id,
                partitions=[F.FetchPartition(partition=p, fetch_offset=self.fetch_offset(p),
                                             partition_max_bytes=1 << 20)
                            for p in partitions])])

    def fetch_offset(self, partition: int) -> int:
        # The sink's fetch topic holds one record per partition (offset 0): ask past it, so
        # both answer an empty partition.
        return 1 if self.fetch_topic == FETCH_SINK_TOPIC else 0

    async def run(self, workload: str, requests: int, window: int) -> float:
        """CPU microseconds per request of the counted processes."""
        api_key, version, body = self.request(workload)
        check = _check_produce if api_key == ApiKey.PRODUCE else _check_fetch
        for _ in range(20):                          # warm up (first-use paths, caches)
            check(await self.conn.request(api_key, version, body))
        before = cpu_seconds(self.pids)
        if window <= 1:
            for _ in range(requests):
                check(await self.conn.request(api_key, version, body))
        else:
            sem = asyncio.Semaphore(window)

            async def one() -> None:
                async with sem:
                    check(await self.conn.request(api_key, version, body))
            await asyncio.gather(*(one() for _ in range(requests)))
        return (cpu_seconds(self.pids) - before) * 1e6 / requests


def _check_produce(resp: Any) -> None:
    for t in resp.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise RuntimeError(f"produce error {p.error_code} on {t.name}-{p.index}")


def _check_fetch(resp: Any) -> None:
    if resp.error_code:
        raise RuntimeError(f"fetch error {resp.error_code}")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                raise RuntimeError(f"fetch error {p.error_code} on partition {p.partition_index}")


async def measure(target_args: tuple[int, list[int], str, str], workloads: list[str], requests: int,
                  window: int, repeats: int) -> dict[str, dict[str, float]]:
    port, pids, produce_topic, fetch_topic = target_args
    conn = await connect("127.0.0.1", port, client_id="request-cost", negotiate=True)
    try:
        target = Target(conn, pids, produce_topic, fetch_topic)
        await target.load_metadata()
        out: dict[str, dict[str, float]] = {}
        for workload in workloads:
            for mode, w in (("seq", 1), ("pipe", window)):
                out[f"{workload}/{mode}"] = {"cpu_us": round(min(
                    [await target.run(workload, requests, w) for _ in range(repeats)]), 1)}
        return out
    finally:
        conn.close()


def run_cluster(brokers: int, workloads: list[str], args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="ketch-reqcost-") as tmp:
        cluster = LocalCluster(tmp, controllers=1, brokers=brokers)
        try:
            cluster.start(timeout_s=120)
            nodes = cluster.spec.brokers
            leader = nodes[0]
            # Every partition led by the first broker: the requests all go to one connection.
            assignment = [[n.id for n in nodes] for _ in range(PARTITIONS)]
            _create_assigned(leader.port, assignment)
            _wait_leaders(cluster.spec.bootstrap_servers, leader.id, len(nodes))
            pids = [n.pid for n in nodes if n.pid]
            return asyncio.run(measure((leader.port, pids, PRODUCE_TOPIC, FETCH_TOPIC),
                                       workloads, args.requests, args.window, args.repeats))
        finally:
            cluster.stop()


def _create_assigned(port: int, assignment: list[list[int]]) -> None:
    async def create() -> None:
        conn = await connect("127.0.0.1", port, client_id="request-cost", negotiate=True)
        try:
            C = messages.CreateTopicsRequest.CreatableTopic
            resp = await conn.request(ApiKey.CREATE_TOPICS, 7, messages.CreateTopicsRequest(
                timeout_ms=30_000, topics=[C(name=t, num_partitions=-1, replication_factor=-1, assignments=[
                    C.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
                    for i, ids in enumerate(assignment)]) for t in (PRODUCE_TOPIC, FETCH_TOPIC)]))
            for t in resp.topics:
                if t.error_code:
                    raise RuntimeError(f"creating {t.name}: error {t.error_code} {t.error_message}")
        finally:
            conn.close()
    asyncio.run(create())


def _wait_leaders(bootstrap: str, leader: int, replicas: int, timeout_s: float = 60) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=10).topics
        parts = [p for t in (PRODUCE_TOPIC, FETCH_TOPIC) if t in topics
                 for p in topics[t].partitions.values()]
        if len(parts) == 2 * PARTITIONS and all(p.leader == leader and len(p.isrs) == replicas
                                                for p in parts):
            return
        time.sleep(0.2)
    raise TimeoutError("partitions not led by the first broker with a full ISR")


def run_sink(workloads: list[str], args: argparse.Namespace) -> dict:
    sink, port = start_sink(PARTITIONS, fetch_records=PARTITIONS)
    try:
        return asyncio.run(measure((port, [sink.pid], PRODUCE_TOPIC, FETCH_SINK_TOPIC),
                                   workloads, args.requests, args.window, args.repeats))
    finally:
        stop_process(sink)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000, help="requests per run")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each (the least CPU kept)")
    ap.add_argument("--window", type=int, default=16, help="requests outstanding when pipelined")
    ap.add_argument("--brokers", type=int, nargs="+", default=[1, 3], choices=(1, 3))
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    args = ap.parse_args()
    workloads = args.only.split(",") if args.only else list(WORKLOADS)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload {', '.join(unknown)}: choose from {', '.join(WORKLOADS)} "
                 "(each runs /seq and /pipe)")

    def interrupted(signum, frame):
        raise SystemExit(f"bench: signal {signum}")   # unwinds through the finallys that stop what runs
    signal.signal(signal.SIGTERM, interrupted)

    result: dict = {"bench": "request_cost", "cpus": os.cpu_count(), "requests": args.requests,
                    "window": args.window, "repeats": args.repeats}
    sink = run_sink(workloads, args)
    result["sink"] = sink
    print(f"{'workload':<28}{'sink us/req':>12}" + "".join(f"{f'{b}-broker us/req':>18}{'x sink':>8}"
                                                           for b in args.brokers))
    clusters = {}
    for brokers in args.brokers:
        clusters[brokers] = run_cluster(brokers, workloads, args)
        for key, fig in clusters[brokers].items():
            fig["ratio_to_sink"] = round(fig["cpu_us"] / max(sink[key]["cpu_us"], 0.1), 2)
        result[f"brokers_{brokers}"] = clusters[brokers]
    for key in sink:
        print(f"{key:<28}{sink[key]['cpu_us']:>12}" + "".join(
            f"{clusters[b][key]['cpu_us']:>18}{clusters[b][key]['ratio_to_sink']:>8}" for b in args.brokers))
    print("(CPU-us per request: user + system of the broker processes, /proc; 3-broker: all three, RF 3)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
