"""Benchmark: costs at 1k, 10k and 100k partitions (RF 3, 3 brokers, 3 controllers, one machine).

For each size, on a fresh local cluster (LocalCluster, the nodes as real processes):

1. create: CreateTopics for N partitions (topics of up to 1,000 partitions, RF 3, sent
   in requests of `--partitions-per-request`), until every broker leads its share (the
   brokers' kafka_server_replicamanager_leadercount gauges sum to N); beside it, the
   brokers' CPU seconds meanwhile and the controllers' Raft journal fdatasyncs (the
   slowest controller's count and seconds, from its /metrics): whether creation waited
   for CPU or for the disk; and, measured just before, what a mkdir plus an empty file
   create costs the file system right then (ext4 after mass deletes: ~10x the usual);
2. broker RSS per replica: (RSS after - RSS before creation) / replicas per broker, for
   each broker (goal <= 4 KB);
3. new topic -> first acknowledged write: CreateTopics of a 1-partition RF-3 topic, then
   a confluent-kafka producer (acks=all) until its first delivery report;
4. controlled shutdown of broker 1 (which leads about a third of the partitions):
   SIGTERM -> the process exited (all its leaderships moved first);
5. restart of broker 1 after that clean shutdown -> the broker reports itself unfenced
   (GET /v1/ready: registered, caught up, unfenced);
6. controller failover: SIGKILL of the active controller -> the first metadata commit
   (a CreateTopics through the brokers, retried on NOT_CONTROLLER and timeouts, returns).

Each figure is printed for every size, and for the largest two sizes the growth from
one to the other as a factor (goal from 10k to 100k: <= 10x for creation, ~1x for the
per-change costs 3-6). The baseline of a figure is the same figure at the smaller size,
measured in the same run. No assertions: a benchmark reports.

Usage: python bench/scale.py [--max-partitions 100000] [--sizes 1000,10000,100000]
Prints figures, then ONE JSON line (the last line).
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.cli.launcher import LocalCluster  # noqa: E402

PARTITIONS_PER_TOPIC = 1000
BROKER_PROPS = {
    "broker.heartbeat.interval.ms": "500",
    "num.partitions": "1",
    "default.replication.factor": "3",
}
CONTROLLER_PROPS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "500",
}


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far (user + system)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


JOURNAL_SYNC = "kafka_log_logflushstats_logflushrateandtimems"


def http_get(port: int, path: str, timeout_s: float = 10.0) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as r:
        return r.read()


def gauge(port: int, name: str) -> float | None:
    try:
        # That one series only: a whole scrape at 100k partitions is ~0.5 s of the broker's
        # CPU, and wait_for's probe pauses grew with it (the last "all led" probe came up
        # to ~2.5 s after the fact).
        text = http_get(port, f"/metrics?name[]={name}").decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


# At most this long between two probes, so a figure is at most this much late: at 2 s
# the 100k creation read up to 2.4 s after its last CreateTopics (session 22: committed
# 16.9 s, led 19.3 s), where 10k's read 0.05 s after.
PROBE_PAUSE_MAX_S = 0.5


def wait_for(what: str, ready, timeout_s: float, interval_s: float = 0.05,
             probe_share: float | None = None):
    """Poll ``ready()`` until it returns something true; that value. ``probe_share``: sleep
    long enough between probes that probing takes at most that share of the time (a
    whole /metrics scrape at 100k partitions renders 500k per-partition series: ~0.15 s
    of a broker's event loop, so polled every 0.5 s it took a quarter of the brokers' CPU
    in py-spy and slowed what it was measuring; ``gauge`` now asks for one series)."""
    deadline = time.monotonic() + timeout_s
    while True:
        probed = time.monotonic()
        value = ready()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
        pause = interval_s
        if probe_share is not None:
            # At most PROBE_PAUSE_MAX_S: one probe slowed by a busy broker (17 s) had
            # stretched the next pause to minutes, and the create time with it (212 s
            # and 299 s measured where the partitions were led 100-170 s earlier).
            pause = max(pause, min(PROBE_PAUSE_MAX_S, (now - probed) * (1 - probe_share) / probe_share))
        time.sleep(pause)


def fs_create_us(directory: str, count: int = 2000) -> float:
    """Microseconds per mkdir plus empty-file create in ``directory`` (what a replica's
    first write costs the file system; a created replica is on disk only from then, since
    session 22), made there and left for the end of the run: a figure several times the
    usual (~75 us on this project's machine) says the file system is slow right now, e.g.
    after recent mass deletes (see main)."""
    os.makedirs(directory)
    t0 = time.perf_counter()
    for i in range(count):
        d = f"{directory}/p-{i}"
        os.mkdir(d)
        os.close(os.open(f"{d}/00000000000000000000.log", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    return (time.perf_counter() - t0) / count * 1e6


def log_lines(nodes):
    """Every line of these nodes' logs (a node without a log yet has none)."""
    for node in nodes:
        try:
            with open(node.log, errors="replace") as f:
                yield from f
        except OSError:
            pass


def stall_ms(line: str) -> float:
    """The milliseconds of a "... stalled for N ms" log line."""
    return float(line.rsplit("stalled for ", 1)[1].split()[0])


class Bench:
    def __init__(self, work: str, partitions: int, per_request: int) -> None:
        self.partitions = partitions
        self.per_request = per_request
        self.cluster = LocalCluster(work, controllers=3, brokers=3, broker_props=BROKER_PROPS,
                                    controller_props=CONTROLLER_PROPS)
        self._admin = None

    @property
    def admin(self):
        if self._admin is None:
            from clients import Admin
            self._admin = Admin({"bootstrap.servers": self.cluster.spec.bootstrap_servers,
                                 "client.id": "bench-scale", "request.timeout.ms": 30_000,
                                 "default.api.timeout.ms": 600_000})
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
        self.cluster.stop(timeout_s=120)

    def broker_pids(self) -> dict[int, int]:
        return {b.id: self.cluster.processes[b.id].pid for b in self.cluster.spec.brokers
                if b.id in self.cluster.processes}

    def leaders_total(self) -> int:
        total = 0
        for b in self.cluster.spec.brokers:
            if b.id not in self.cluster.processes:
                continue
            v = gauge(b.http_port, "kafka_server_replicamanager_leadercount")
            total += int(v or 0)
        return total

    def create(self, names_and_counts: list[tuple[str, int]]) -> None:
        """CreateTopics through the brokers; a topic that exists after a retry counts."""
        from clients.admin import NewTopic
        from clients.errors import KafkaApiError
        pending = list(names_and_counts)
        while pending:
            chunk, n = [], 0
            while pending and (not chunk or n + pending[0][1] <= self.per_request):
                chunk.append(pending.pop(0))
                n += chunk[-1][1]
            for _attempt in range(100):
                try:
                    self.admin.create_topics([NewTopic(name, count, 3) for name, count in chunk],
                                             timeout_ms=600_000)
                    break
                except KafkaApiError as e:
                    if type(e).__name__ == "TopicAlreadyExistsError":
                        break
                    if not getattr(e, "retriable", False):
                        # Which topics of a partly failed request exist? Ask, then resend.
                        existing = set(self.admin.list_topics(timeout_ms=60_000))
                        chunk = [(t, c) for t, c in chunk if t not in existing]
                        if not chunk:
                            break
                    time.sleep(0.2)
            else:
                raise RuntimeError(f"CreateTopics kept failing for {chunk[:3]}...")

    # ------------------------------------------------------------ the figures

    def run(self) -> dict:
        c = self.cluster
        fs_us = fs_create_us(os.path.join(c.dir, "fs-probe"))
        t0 = time.perf_counter()
        c.start(timeout_s=120)
        start_s = time.perf_counter() - t0
        pids = self.broker_pids()
        rss_before = {b: rss_kb(p) for b, p in pids.items()}
        cpu_before = {b: cpu_s(p) for b, p in pids.items()}
        syncs_before = self.journal_syncs()

        n = self.partitions
        topics = [(f"scale-{i}", min(PARTITIONS_PER_TOPIC, n - i * PARTITIONS_PER_TOPIC))
                  for i in range((n + PARTITIONS_PER_TOPIC - 1) // PARTITIONS_PER_TOPIC)]
        t0 = time.perf_counter()
        self.create(topics)
        committed_s = time.perf_counter() - t0
        # Probed every 0.1 s or so (one gauge per broker, ~1 ms of its CPU), so the figure
        # is late by about that much at any size.
        wait_for("every partition led", lambda: self.leaders_total() >= n, 3600, 0.1,
                 probe_share=0.1)
        create_s = time.perf_counter() - t0
        rss_after = {b: rss_kb(p) for b, p in pids.items()}
        broker_cpu_s = sum(cpu_s(p) - cpu_before[b] for b, p in pids.items())
        syncs = {c: (n - syncs_before[c][0], ms - syncs_before[c][1])
                 for c, (n, ms) in self.journal_syncs().items()}
        replicas_per_broker = n          # RF 3 over 3 brokers
        rss_per_replica = {b: (rss_after[b] - rss_before[b]) * 1024 / replicas_per_broker
                           for b in pids}

        first_write_s = self.new_topic_to_first_write("probe-1")
        led_by_1 = int(gauge(c.spec.node(c.spec.brokers[0].id).http_port,
                             "kafka_server_replicamanager_leadercount") or 0)
        shutdown_s = self.controlled_shutdown(c.spec.brokers[0].id)
        restart_s = self.restart_to_unfenced(c.spec.brokers[0].id)
        failover_s = self.controller_failover()
        stalls = self.controller_log_figures()
        return {
            "partitions": n, "topics": len(topics), "cluster_start_s": start_s,
            "fs_create_us": round(fs_us, 1),
            "create_committed_s": committed_s, "create_s": create_s,
            # Where creation's time went: the brokers' CPU (all three), and the slowest
            # controller's journal fdatasyncs (what every commit waits for on a majority).
            "create_broker_cpu_s": broker_cpu_s,
            "create_journal_syncs": max(n for n, _ in syncs.values()),
            "create_journal_sync_s": max(ms for _, ms in syncs.values()) / 1000,
            "broker_rss_before_mb": {b: v / 1024 for b, v in rss_before.items()},
            "broker_rss_after_mb": {b: v / 1024 for b, v in rss_after.items()},
            "rss_bytes_per_replica": {b: round(v) for b, v in rss_per_replica.items()},
            "rss_bytes_per_replica_max": round(max(rss_per_replica.values())),
            "new_topic_first_write_s": first_write_s,
            "broker1_leaderships": led_by_1,
            "controlled_shutdown_s": shutdown_s,
            "restart_to_unfenced_s": restart_s,
            "controller_failover_s": failover_s,
            **stalls,
        }

    def controller_log_figures(self) -> dict:
        """From the controllers' logs, over the whole run: Raft tick thread stalls longer
        than the election timeout (quorum/raft.py logs each) and how often a controller
        became the active one (the first election, the failover, and any other); from the
        brokers' logs, their event loops' stalls over 1 s (clients/loop_stalls.py)."""
        stalls: list[float] = []
        activations = 0
        for line in log_lines(self.cluster.spec.controllers):
            if "raft tick thread stalled for" in line:
                stalls.append(stall_ms(line))
            elif "active controller at epoch" in line:
                activations += 1
        loop_stalls = [stall_ms(line) for line in log_lines(self.cluster.spec.brokers)
                       if "event loop stalled for" in line]
        return {"tick_stalls": len(stalls), "tick_stall_max_ms": max(stalls, default=0.0),
                "controller_activations": activations,
                "broker_loop_stalls": len(loop_stalls),
                "broker_loop_stall_max_ms": max(loop_stalls, default=0.0)}

    def new_topic_to_first_write(self, name: str) -> float:
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.cluster.spec.bootstrap_servers,
                             "acks": "all", "linger.ms": 0,
                             "topic.metadata.refresh.fast.interval.ms": 10,
                             "retry.backoff.ms": 10, "message.timeout.ms": 120_000})
        producer.poll(0)
        delivered: list[object] = []

        def on_delivery(err, msg) -> None:
            delivered.append(err or msg.offset())

        t0 = time.perf_counter()
        self.create([(name, 1)])
        producer.produce(name, b"first", on_delivery=on_delivery)
        while not delivered:
            producer.poll(0.005)
        elapsed = time.perf_counter() - t0
        producer.flush(10)
        if not isinstance(delivered[0], int):
            raise RuntimeError(f"first write failed: {delivered[0]}")
        return elapsed

    def controlled_shutdown(self, broker_id: int) -> float:
        t0 = time.perf_counter()
        code = self.cluster.stop_node(broker_id, timeout_s=600)
        elapsed = time.perf_counter() - t0
        if code != 0:
            print(f"  (broker {broker_id} exited with {code})", file=sys.stderr)
        return elapsed

    def restart_to_unfenced(self, broker_id: int) -> float:
        node = self.cluster.spec.node(broker_id)

        def unfenced() -> bool:
            # /v1/ready: registered, caught up and unfenced. (/v1/node lists every replica:
            # polled every 50 ms it took a fifth of the restarting broker's CPU at 10k.)
            try:
                return json.loads(http_get(node.http_port, "/v1/ready", 2)).get("status") == "ready"
            except (OSError, ValueError):       # 503 while not ready
                return False
        t0 = time.perf_counter()
        self.cluster.start_node(broker_id)
        wait_for(f"broker {broker_id} unfenced", unfenced, 1800)
        return time.perf_counter() - t0

    def journal_syncs(self) -> dict[int, tuple[float, float]]:
        """Each controller's journal fdatasyncs so far: (count, ms)."""
        out = {}
        for c in self.cluster.spec.controllers:
            out[c.id] = (gauge(c.http_port, JOURNAL_SYNC + "_count") or 0.0,
                         gauge(c.http_port, JOURNAL_SYNC + "_sum") or 0.0)
        return out

    def controller_failover(self) -> float:
        info = self.admin.describe_quorum(timeout_ms=60_000)
        active = info.leader_id
        t0 = time.perf_counter()
        self.cluster.kill_node(active)
        self.create([("after-failover", 1)])
        return time.perf_counter() - t0


def print_result(r: dict) -> None:
    print(f"{r['partitions']:>7} partitions: create {r['create_s']:.1f} s (committed {r['create_committed_s']:.1f} s"
          f"; brokers' CPU {r['create_broker_cpu_s']:.1f} s; file system {r['fs_create_us']:.0f} us"
          f" per mkdir+create before it; controller journal fdatasyncs "
          f"{r['create_journal_syncs']:.0f} taking {r['create_journal_sync_s']:.1f} s)"
          f"; broker RSS/replica {r['rss_bytes_per_replica_max']} B (max of 3)"
          f"; new topic -> first ack {r['new_topic_first_write_s'] * 1000:.0f} ms"
          f"; controlled shutdown ({r['broker1_leaderships']} leaderships) "
          f"{r['controlled_shutdown_s']:.1f} s"
          f"; restart -> unfenced {r['restart_to_unfenced_s']:.1f} s"
          f"; controller failover -> commit {r['controller_failover_s'] * 1000:.0f} ms"
          f"; raft tick stalls {r['tick_stalls']} (max {r['tick_stall_max_ms']:.0f} ms)"
          f", controller activations {r['controller_activations']}"
          f"; broker event-loop stalls over 1 s {r['broker_loop_stalls']}"
          f" (max {r['broker_loop_stall_max_ms']:.0f} ms)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--max-partitions", type=int, default=100_000)
    # 1,000 as bench/quorum.py sends: one Raft entry of 5,000 PartitionRecords made
    # pysyncobj's transport fail ("pickle data was truncated") under load at 100k.
    parser.add_argument("--partitions-per-request", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the cluster directories")
    args = parser.parse_args()
    sizes = [s for s in (int(x) for x in args.sizes.split(",")) if s <= args.max_partitions]
    # Bytecode, as an installed package has it: where PYTHONDONTWRITEBYTECODE is set (this
    # machine, CI) every node process would compile the sources at each start, ~1 s of
    # each restart measured (tests/conftest.py does the same for the tests).
    root = pathlib.Path(__file__).resolve().parents[1]
    for package in ("clients", "broker", "quorum", "metadata_log"):
        compileall.compile_dir(root / package, quiet=1)
    results = []
    print(f"scale: RF 3, 3 brokers, 3 controllers on one machine ({os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f})")
    # Each size's cluster directory is deleted at the end of the run, not before the next
    # size: ext4's inode allocator passes over inodes freed in the last 60 s (360 s while
    # their inode table block is unwritten), so a mkdir or file create right after a mass
    # delete can cost ~10x (30,000 empty directories made just after 100,000 were
    # removed: 9 s per 10,000 instead of 0.8 s). Deletes made before the run still count:
    # see docs/operations.md, "Many partitions".
    works: list[str] = []
    try:
        for n in sizes:
            os.sync()       # earlier work's write-back does not land on this size's creation
            work = tempfile.mkdtemp(prefix=f"bench-scale-{n}-")
            works.append(work)
            bench = Bench(work, n, args.partitions_per_request)
            try:
                r = bench.run()
            finally:
                bench.close()
            results.append(r)
            print_result(r)
    finally:
        if not args.keep:
            for work in works:
                shutil.rmtree(work, ignore_errors=True)
    growth = {}
    if len(results) >= 2:
        a, b = results[-2], results[-1]
        for key in ("create_s", "rss_bytes_per_replica_max", "new_topic_first_write_s",
                    "controlled_shutdown_s", "restart_to_unfenced_s", "controller_failover_s"):
            growth[key] = round(b[key] / a[key], 2) if a[key] else None
        print(f"growth {a['partitions']} -> {b['partitions']} partitions "
              f"({b['partitions'] / a['partitions']:.0f}x): "
              + ", ".join(f"{k} {v}x" for k, v in growth.items()))
    summary = {
        "bench": "scale", "load_average": round(os.getloadavg()[0], 2),
        "results": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                    for r in results],
        "growth": growth,
        "goals": {"rss_bytes_per_replica_max": 4096, "new_topic_first_write_s": 1.0,
                  "controlled_shutdown_s": 10.0, "restart_to_unfenced_s": 30.0,
                  "controller_failover_s": 2.0, "create_growth_10k_to_100k": 10.0},
    }
    print(json.dumps(summary, separators=(",", ":"), default=str))


if __name__ == "__main__":
    main()
