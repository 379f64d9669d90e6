"""Benchmark: the metadata quorum, against a bare pysyncobj counter measured in the same run.

All runs: 3 processes on 127.0.0.1, cluster secret (pysyncobj password, Fernet) on, the
same pysyncobj settings (appendEntriesUseBatch=False, elections 0.15-0.3 s).

1. Commits. The baseline is a bare pysyncobj SyncObj whose replicated method increments a
   counter with a 200-byte argument (no journal file: pysyncobj's in-memory journal).
   Ketch is RaftQuorum (quorum/raft.py) appending encoded PartitionRecords (KRaft frames,
   ~100 bytes) with its fsync'd journal. Both are driven at the Raft leader:
   - latency: one command at a time, p50/p99 from call to commit;
   - throughput: the counter with `--raw-in-flight` commands in flight (its best shape:
     one command per Raft entry); Ketch with `--writers` concurrent single-record appends,
     which its group commit merges into one Raft entry per round trip.
   Ratios: Ketch records/s / counter commits/s; Ketch latency / counter latency. The issue's
   goals: records/s >= 10x a ZooKeeper 3.8 ensemble on this machine (~2,200 writes/s,
   measured in issue 4, not re-run here: 22,000 records/s) and p99 commit latency < 5 ms.
2. Failover: 3 controller processes (`python -m quorum`); a client writes continuously
   (BrokerRegistration, one record each); the active controller is SIGKILLed; the figure
   is the time from the kill to the next committed write, on whichever controller.
3. 100,000 partitions: 3 brokers registered and unfenced, then CreateTopics for
   `--topics` topics of 100000/topics partitions (replication 3): time until all are
   committed. Then a new observer process follows the metadata log (Fetch on
   __cluster_metadata) into a MetadataImage: from offset 0 replaying the whole log, and,
   after the controllers took a snapshot, from that snapshot (FetchSnapshot); time and
   peak RSS growth of the observer process, and a digest proving both reach the same topics.

4. Elections (issue 17, pre-vote): two 3-controller quorums run side by side, one with
   ``ketch.raft.pre.vote.enable=false`` and one with pre-vote (the default), so both see
   the same machine: metadata writes to each and `--cpu-hogs` busy-looping processes for
   `--election-seconds`; elections per hour = the rise of each quorum's epoch. Then a
   follower of each is SIGSTOPped for 1.5 s and resumed `--pause-rounds` times: how many
   pauses were followed by an election. And failover (as in 2) with and without pre-vote,
   since pre-vote adds a round trip before a campaign.

5. Membership (issue 17, KIP-853): a quorum started with controller 1 alone, controllers 2
   and 3 started to join; each round adds 2 and 3 (AddRaftVoter, once each is caught up)
   and removes them again (RemoveRaftVoter) while a client writes: the time from request
   to answer of each change (the VotersRecord and pysyncobj's membership entry committed),
   and the writes acknowledged meanwhile. Then the same with 5: controllers 1-3 form the
   quorum, 4 and 5 join and leave again (3 -> 5 -> 3, SCENARIOS.md N14's sizes).

Usage: python bench/quorum.py [--seconds 5] [--quick] [--only elections|membership]
Prints figures, then ONE JSON line (the last line).
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import pathlib
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from clients.cli.launcher import free_ports  # noqa: E402  (listeners below the ephemeral range)

SECRET = "bench-cluster-secret"
ZOOKEEPER_WRITES_PER_S = 2200       # issue 4: ZooKeeper 3.8 ensemble on this kind of machine
RAW_PAYLOAD = b"x" * 200


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def sample_record() -> bytes:
    """A realistic metadata record: a PartitionRecord with 3 replicas, KRaft-framed."""
    from clients.protocol import messages
    from metadata_log.records import encode_record
    return encode_record(messages.PartitionRecord(
        partition_id=17, topic_id=uuid.uuid4(), replicas=[1, 2, 3], isr=[1, 2, 3],
        leader=1, leader_epoch=0, partition_epoch=0))


# -- workers: one Raft node per process; the leader runs the load and prints RESULT --------------


def raw_worker(args: argparse.Namespace) -> None:
    from pysyncobj import SyncObj, SyncObjConf, replicated
    from pysyncobj.config import FAIL_REASON

    class Counter(SyncObj):
        def __init__(self, me: str, others: list[str], conf: SyncObjConf) -> None:
            self.value = 0
            super().__init__(me, others, conf)

        @replicated
        def add(self, payload: bytes) -> int:
            self.value += 1
            return self.value

    addresses = args.addresses.split(",")
    me = addresses[args.index]
    conf = SyncObjConf(password=SECRET, appendEntriesUseBatch=False, raftMinTimeout=0.15,
                       raftMaxTimeout=0.3, appendEntriesPeriod=0.04, connectionTimeout=1.0,
                       connectionRetryTime=0.25, leaderFallbackTimeout=1.0, bindAddress=me)
    counter = Counter(me, [a for a in addresses if a != me], conf)
    while counter._getLeader() is None:
        time.sleep(0.01)
    time.sleep(0.3)
    if not counter._isLeader():
        time.sleep(3600)
        return

    def one() -> float:
        done = threading.Event()
        t0 = time.perf_counter()
        counter.add(RAW_PAYLOAD, callback=lambda r, e: done.set())
        done.wait()
        return time.perf_counter() - t0

    for _ in range(200):
        one()
    latencies = sorted(one() for _ in range(args.latency_ops))
    gate = threading.Semaphore(args.raw_in_flight)
    committed = [0]

    def on_commit(result: object, error: int) -> None:
        if error == FAIL_REASON.SUCCESS:
            committed[0] += 1
        gate.release()

    t0 = time.perf_counter()
    end = t0 + args.seconds
    while time.perf_counter() < end:
        gate.acquire()
        counter.add(RAW_PAYLOAD, callback=on_commit)
    for _ in range(args.raw_in_flight):
        gate.acquire()
    elapsed = time.perf_counter() - t0
    print("RESULT " + json.dumps({
        "commits_per_s": committed[0] / elapsed,
        "latency_p50_ms": percentile(latencies, 0.5) * 1e3,
        "latency_p99_ms": percentile(latencies, 0.99) * 1e3,
    }), flush=True)
    time.sleep(3600)


def ketch_worker(args: argparse.Namespace) -> None:
    from quorum.raft import RaftQuorum, RaftSettings
    if os.environ.get("KETCH_NOSYNC"):      # experiment only: what fsync costs
        os.fdatasync = lambda fd: None
    if os.environ.get("KETCH_SWITCH"):
        sys.setswitchinterval(float(os.environ["KETCH_SWITCH"]))

    async def run() -> None:
        addresses = args.addresses.split(",")
        voters = {i + 1: a for i, a in enumerate(addresses)}
        node_id = args.index + 1
        quorum = RaftQuorum(node_id=node_id, raft_address=voters[node_id], voters=voters,
                            data_dir=os.path.join(args.dir, f"n{node_id}"),
                            settings=RaftSettings(cluster_secret=SECRET),
                            in_flight_max=args.in_flight)
        t0 = time.monotonic()
        while not quorum.is_active and time.monotonic() - t0 < 5:
            await asyncio.sleep(0.02)
        if not quorum.is_active:
            await asyncio.sleep(3600)
            return
        record = sample_record()
        for _ in range(200):
            await quorum.append([record])
        latencies = []
        for _ in range(args.latency_ops):
            t = time.perf_counter()
            await quorum.append([record])
            latencies.append(time.perf_counter() - t)
        latencies.sort()
        entries_before = quorum.raft_status()["commit_idx"]
        hw_before = quorum.log.high_watermark
        loaded: list[float] = []
        stop = time.perf_counter() + args.seconds

        batch = [record] * args.records_per_append

        async def writer() -> None:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                await quorum.append(batch)
                loaded.append(time.perf_counter() - t)

        t0p = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(args.writers)))
        elapsed = time.perf_counter() - t0p
        records = quorum.log.high_watermark - hw_before
        entries = quorum.raft_status()["commit_idx"] - entries_before
        loaded.sort()
        print("RESULT " + json.dumps({
            "records_per_s": records / elapsed,
            "records_per_entry": records / max(entries, 1),
            "latency_p50_ms": percentile(latencies, 0.5) * 1e3,
            "latency_p99_ms": percentile(latencies, 0.99) * 1e3,
            "loaded_latency_p50_ms": percentile(loaded, 0.5) * 1e3,
            "loaded_latency_p99_ms": percentile(loaded, 0.99) * 1e3,
            "record_bytes": len(record),
            "journal_fsyncs": quorum.journal.fsync_count,
        }), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(run())


def run_trio(kind: str, args: argparse.Namespace) -> dict:
    addresses = ",".join(f"127.0.0.1:{p}" for p in free_ports(3))
    work = tempfile.mkdtemp(prefix=f"bench-quorum-{kind}-")
    procs = []
    try:
        for index in range(3):
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--worker", kind, "--index", str(index),
                 "--addresses", addresses, "--dir", work, "--seconds", str(args.seconds),
                 "--latency-ops", str(args.latency_ops), "--writers", str(args.writers),
                 "--raw-in-flight", str(args.raw_in_flight), "--in-flight", str(args.in_flight),
                 "--records-per-append", str(args.records_per_append)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        result: dict | None = None
        deadline = time.monotonic() + args.seconds + 120
        lines: list[str] = []
        threads = [threading.Thread(target=lambda p=p: lines.extend(p.stdout), daemon=True)
                   for p in procs]
        for t in threads:
            t.start()
        while result is None and time.monotonic() < deadline:
            for line in list(lines):
                if line.startswith("RESULT "):
                    result = json.loads(line[len("RESULT "):])
            time.sleep(0.05)
        if result is None:
            raise RuntimeError(f"{kind}: no leader reported a result")
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)



# -- controller processes (failover, 100k partitions) --------------------------------------------


class Controllers:
    def __init__(self, work: str, extra: dict[str, str] | None = None, voters: int = 3,
                 nodes: int = 3) -> None:
        ports = free_ports(2 * nodes)
        self.work = work
        self.kafka = {i: ports[i - 1] for i in range(1, nodes + 1)}
        self.raft = {i: ports[nodes + i - 1] for i in range(1, nodes + 1)}
        self.procs: dict[int, subprocess.Popen] = {}
        self.extra = extra or {}
        self.voters = voters        # the first ones start the quorum; the others join it
        self.write_configs()

    def write_configs(self) -> None:
        initial = [i for i in self.kafka if i <= self.voters]
        voters = ",".join(f"{i}@127.0.0.1:{self.kafka[i]}" for i in initial)
        raft = ",".join(f"{i}@127.0.0.1:{self.raft[i]}" for i in initial)
        for i in self.kafka:
            offset = {} if i in initial else {"ketch.raft.port.offset": str(self.raft[i] - self.kafka[i])}
            props = {**offset, "node.id": i, "process.roles": "controller",
                     "controller.quorum.voters": voters, "ketch.raft.voters": raft,
                     "listeners": f"CONTROLLER://127.0.0.1:{self.kafka[i]}",
                     "metadata.log.dir": os.path.join(self.work, f"c{i}"),
                     "ketch.cluster.secret": SECRET,
                     "broker.session.timeout.ms": "3600000",
                     "ketch.controller.write.timeout.ms": "120000", **self.extra}
            with open(os.path.join(self.work, f"c{i}.properties"), "w") as f:
                f.write("".join(f"{k}={v}\n" for k, v in props.items()))

    def start(self, i: int) -> None:
        log = open(os.path.join(self.work, f"c{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "quorum", "--config", os.path.join(self.work, f"c{i}.properties")],
            cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=log)

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(i)
        os.kill(proc.pid, sig)
        proc.wait()

    def close(self) -> None:
        for i in list(self.procs):
            self.kill(i)

    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.kafka.values()]


async def connect_any(cluster: Controllers, i: int, timeout_s: float = 30.0):
    from clients.connection import connect
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = await connect("127.0.0.1", cluster.kafka[i], timeout_s=2)
            await conn.negotiate_versions()
            return conn
        except (OSError, ConnectionError, asyncio.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def register(conn, broker_id: int, incarnation: uuid.UUID | None = None):
    from clients.protocol import ApiKey, messages
    return await conn.request(ApiKey.BROKER_REGISTRATION, conn.pick_version(ApiKey.BROKER_REGISTRATION, 0, 4),
                              messages.BrokerRegistrationRequest(
                                  broker_id=broker_id, cluster_id="bench",
                                  incarnation_id=incarnation or uuid.uuid4(),
                                  listeners=[messages.BrokerRegistrationRequest.Listener(
                                      name="PLAINTEXT", host="127.0.0.1", port=9092,
                                      security_protocol=0)],
                                  rack=f"rack-{broker_id % 3}"))


async def find_active(cluster: Controllers, timeout_s: float = 30.0):
    """(node id, connection) of the controller that commits a write."""
    from clients.protocol.errors import ErrorCode
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i in list(cluster.procs):
            try:
                conn = await connect_any(cluster, i, timeout_s=2)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                continue
            try:
                if (await register(conn, 900_000 + i)).error_code == ErrorCode.NONE:
                    return i, conn
            except (OSError, ConnectionError, asyncio.TimeoutError):
                pass
            conn.close()
        await asyncio.sleep(0.01)
    raise RuntimeError("no active controller")


async def measure_failover(rounds: int, pre_vote: bool = True) -> dict:
    from clients.protocol.errors import ErrorCode
    work = tempfile.mkdtemp(prefix="bench-quorum-failover-")
    cluster = Controllers(work, {"ketch.controller.write.timeout.ms": "1000",
                                 "ketch.raft.pre.vote.enable": str(pre_vote).lower()})
    times: list[float] = []
    try:
        for i in (1, 2, 3):
            cluster.start(i)
        for _ in range(rounds):
            active, conn = await find_active(cluster)
            for n in range(20):                 # steady writes before the kill
                if (await register(conn, n)).error_code != ErrorCode.NONE:
                    conn.close()                # a loaded machine moved the leader: follow it
                    active, conn = await find_active(cluster)
            conn.close()
            conns = {i: await connect_any(cluster, i) for i in cluster.procs if i != active}
            t_kill = time.perf_counter()
            cluster.kill(active)
            done = None
            while done is None:
                for i, c in conns.items():
                    try:
                        if (await register(c, 12345)).error_code == ErrorCode.NONE:
                            done = time.perf_counter()
                            break
                    except (OSError, ConnectionError, asyncio.TimeoutError):
                        conns[i] = await connect_any(cluster, i)
                if time.perf_counter() - t_kill > 30:
                    raise RuntimeError("no write committed within 30 s of the kill")
            times.append(done - t_kill)
            for c in conns.values():
                c.close()
            cluster.start(active)                # back to 3 for the next round
            await asyncio.sleep(1.0)
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)
    times.sort()
    return {"failover_ms": [round(t * 1e3, 1) for t in times],
            "failover_p50_ms": statistics.median(times) * 1e3, "failover_max_ms": times[-1] * 1e3}


# -- 100k partitions -------------------------------------------------------------------------------


def topics_digest(image) -> str:
    """What the observer knows about topics and partitions, independent of log offsets."""
    from clients.protocol import messages
    from metadata_log.records import encode_record
    from metadata_log.snapshot import image_to_records
    h = hashlib.sha256()
    for record in image_to_records(image):
        if type(record) in (messages.TopicRecord, messages.PartitionRecord):
            h.update(encode_record(record))
    return h.hexdigest()


def observer_worker(args: argparse.Namespace) -> None:
    """A fresh process following the metadata log into an image until `--until` offset."""
    from broker.metadata_follower import MetadataImageListener, MetadataObserver

    async def run() -> None:
        rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        controllers = [("127.0.0.1", int(p)) for p in args.addresses.split(",")]
        follower = MetadataImageListener()
        observer = MetadataObserver(controllers, follower, fetch_wait_max_ms=200)
        t0 = time.perf_counter()
        task = asyncio.ensure_future(observer.run())
        await observer.wait_for_offset(args.until, timeout_s=600)
        elapsed = time.perf_counter() - t0
        task.cancel()
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("RESULT " + json.dumps({
            "seconds": elapsed, "rss_growth_mb": (rss_peak - rss_base) / 1024,
            "rss_peak_mb": rss_peak / 1024, "snapshots_loaded": observer.snapshots_loaded,
            "partitions": follower.image.topics.partition_count(),
            "offset": follower.image.provenance.offset,
            "digest": topics_digest(follower.image)}), flush=True)

    asyncio.run(run())


def run_observer(cluster: Controllers, until: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", "observer", "--until", str(until),
         "--addresses", ",".join(str(p) for p in cluster.kafka.values())],
        capture_output=True, text=True, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"observer failed: {out.stderr[-2000:]}")


async def describe_hw(conn) -> int:
    from clients.protocol import ApiKey, messages
    from metadata_log.committed import METADATA_TOPIC
    request = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
        topic_name=METADATA_TOPIC, partitions=[messages.DescribeQuorumRequest.PartitionData(
            partition_index=0)])])
    return (await conn.request(ApiKey.DESCRIBE_QUORUM, 1, request)).topics[0].partitions[0].high_watermark


async def measure_partitions(total: int, topics: int) -> dict:
    from clients.protocol import ApiKey, messages
    work = tempfile.mkdtemp(prefix="bench-quorum-100k-")
    # No snapshot while creating: the first observer replays the whole log.
    cluster = Controllers(work, {"metadata.log.max.record.bytes.between.snapshots": str(1 << 40)})
    try:
        for i in (1, 2, 3):
            cluster.start(i)
        active, conn = await find_active(cluster)
        for broker_id in (1, 2, 3):
            reg = await register(conn, broker_id)
            beat = await conn.request(ApiKey.BROKER_HEARTBEAT, 1, messages.BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=reg.broker_epoch, current_metadata_offset=1 << 40))
            assert not beat.is_fenced, beat
        per_topic = total // topics
        conn.close()
        t0 = time.perf_counter()
        retried = await create_topics(cluster, [f"bench-{n}" for n in range(topics)], per_topic)
        create_s = time.perf_counter() - t0
        during_create = log_counts(cluster)
        active, conn = await find_active(cluster)
        last = await describe_hw(conn) - 1
        conn.close()
        from_zero = run_observer(cluster, last)
        # Restart the controllers with a small snapshot threshold; the next commit makes
        # each of them snapshot its image and drop the log before it.
        for i in (1, 2, 3):
            cluster.kill(i, signal.SIGTERM)
        cluster.extra = {"metadata.log.max.record.bytes.between.snapshots": str(1 << 16)}
        cluster.write_configs()
        t_restart = time.perf_counter()
        for i in (1, 2, 3):
            cluster.start(i)
        active, conn = await find_active(cluster, timeout_s=300)
        restart_s = time.perf_counter() - t_restart
        snapshot_end = await wait_for_snapshot(conn, last)
        last2 = await describe_hw(conn) - 1
        conn.close()
        from_snapshot = run_observer(cluster, last2)
        assert from_snapshot["snapshots_loaded"] >= 1, from_snapshot
        return {
            "partitions": total, "topics": topics, "create_commit_s": create_s,
            "topics_resent": retried, **during_create,
            "log_records": last + 1, "restart_all_s": restart_s,
            "snapshot_end_offset": snapshot_end,
            "observer_from_zero": from_zero, "observer_from_snapshot": from_snapshot,
            "same_topics": from_zero["digest"] == from_snapshot["digest"],
        }
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)


async def create_topics(cluster: Controllers, names: list[str], partitions: int) -> int:
    """CreateTopics as an admin client does it: resend what failed with NOT_CONTROLLER or a
    timeout to the (new) active controller; TOPIC_ALREADY_EXISTS on a resend means the
    first attempt was committed. Returns how many topics had to be resent."""
    from clients.protocol import ApiKey, messages
    from clients.protocol.errors import ErrorCode
    pending, resent = list(names), 0
    while pending:
        _, conn = await find_active(cluster, timeout_s=120)
        version = conn.pick_version(ApiKey.CREATE_TOPICS, 2, 7)
        try:
            responses = await asyncio.gather(*(conn.request(
                ApiKey.CREATE_TOPICS, version, messages.CreateTopicsRequest(
                    topics=[messages.CreateTopicsRequest.CreatableTopic(
                        name=name, num_partitions=partitions, replication_factor=3)],
                    timeout_ms=120_000), timeout_s=600) for name in pending))
        except (OSError, ConnectionError, asyncio.TimeoutError):
            conn.close()
            continue
        conn.close()
        failed = []
        for name, response in zip(pending, responses):
            code = response.topics[0].error_code
            if code in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT):
                failed.append(name)
            else:
                assert code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), (name, code)
        if failed:
            codes = sorted({r.topics[0].error_code for r in responses if r.topics[0].error_code})
            print(f"  (resending {len(failed)} topics: error codes {codes})", file=sys.stderr)
        resent += len(failed)
        pending = failed
    return resent


def log_counts(cluster: Controllers) -> dict:
    text = ""
    for i in (1, 2, 3):
        try:
            with open(os.path.join(cluster.work, f"c{i}.log")) as f:
                text += f.read()
        except OSError:
            pass
    return {"raft_tick_stalls": text.count("raft tick thread stalled"),
            "activations": text.count("active controller at epoch")}


def fsync_probe(samples: int = 200) -> dict:
    """fdatasync of a small append in the same filesystem, to read the commit figures by."""
    fd, path = tempfile.mkstemp(prefix="bench-fsync-")
    try:
        times = []
        for _ in range(samples):
            os.write(fd, b"x" * 128)
            t = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return {"fdatasync_p50_ms": percentile(times, 0.5) * 1e3,
            "fdatasync_p99_ms": percentile(times, 0.99) * 1e3}


async def wait_for_snapshot(conn, covering: int) -> int:
    """Until a fetch from offset 0 is sent to a snapshot that covers `covering`; its end."""
    from clients.protocol import ApiKey, messages
    from metadata_log.committed import METADATA_TOPIC, METADATA_TOPIC_ID
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        request = messages.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=1, topics=[
            messages.FetchRequest.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                             partitions=[messages.FetchRequest.FetchPartition(
                                                 partition=0, fetch_offset=0, partition_max_bytes=1)])])
        part = (await conn.request(ApiKey.FETCH, 13, request)).responses[0].partitions[0]
        if part.snapshot_id.end_offset > covering:
            return part.snapshot_id.end_offset
        await register(conn, 800_000)           # a commit, so that the threshold is checked
        await asyncio.sleep(0.2)
    raise RuntimeError("the controllers took no snapshot")


# -- elections: a loaded quorum and a paused controller, with and without pre-vote ---------------


async def describe_leader(conn) -> tuple[int, int]:
    """(leader id, leader epoch) as this controller knows them."""
    from clients.protocol import ApiKey, messages
    request = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[messages.DescribeQuorumRequest.PartitionData(
            partition_index=0)])])
    partition = (await conn.request(ApiKey.DESCRIBE_QUORUM, 1, request)).topics[0].partitions[0]
    return partition.leader_id, partition.leader_epoch


async def max_epoch(cluster: Controllers) -> int:
    epochs = []
    for i in cluster.procs:
        conn = await connect_any(cluster, i)
        try:
            epochs.append((await describe_leader(conn))[1])
        finally:
            conn.close()
    return max(epochs)


async def keep_writing(cluster: Controllers, stop: asyncio.Event, writers: int) -> int:
    """Broker registrations through whichever controller is active; (commits)."""
    from clients.protocol.errors import ErrorCode
    committed = [0]

    async def writer(w: int) -> None:
        conn = None
        n = 0
        while not stop.is_set():
            try:
                if conn is None:
                    _, conn = await find_active(cluster)
                if (await register(conn, 100_000 * (w + 1) + n % 1000)).error_code == ErrorCode.NONE:
                    committed[0] += 1
                else:
                    conn.close()
                    conn = None
                n += 1
            except (OSError, ConnectionError, asyncio.TimeoutError, RuntimeError):
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    await asyncio.gather(*(writer(w) for w in range(writers)))
    return committed[0]


async def measure_elections(seconds: float, hogs: int, writers: int, pause_rounds: int) -> dict:
    """Two 3-controller quorums side by side, one without pre-vote and one with, so both
    see the same machine: metadata writes to each, and `hogs` busy-looping processes to
    starve the tick threads. Elections = the rise of the quorum's epoch (every campaign
    bumps the term). Then, one cluster at a time, a follower is SIGSTOPped for 1.5 s (10
    minimum election timeouts) and resumed, `pause_rounds` times: elections it caused."""
    modes = {"without_pre_vote": "false", "with_pre_vote": "true"}
    works = {m: tempfile.mkdtemp(prefix=f"bench-quorum-{m}-") for m in modes}
    clusters = {m: Controllers(works[m], {"ketch.raft.pre.vote.enable": v,
                                          "ketch.controller.write.timeout.ms": "2000"})
                for m, v in modes.items()}
    hog_procs: list[subprocess.Popen] = []
    result: dict = {}
    try:
        for cluster in clusters.values():
            for i in (1, 2, 3):
                cluster.start(i)
        for cluster in clusters.values():
            _, conn = await find_active(cluster, timeout_s=120)     # slow to start on a busy machine
            conn.close()
        await asyncio.sleep(1.0)
        before = {m: await max_epoch(c) for m, c in clusters.items()}
        stop = asyncio.Event()
        loads = [asyncio.ensure_future(keep_writing(c, stop, writers)) for c in clusters.values()]
        hog_procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        load_before = os.getloadavg()[0]
        await asyncio.sleep(seconds)
        load_after = os.getloadavg()[0]
        for p in hog_procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        hog_procs = []
        stop.set()
        commits = await asyncio.gather(*loads)
        await asyncio.sleep(1.0)
        for (m, c), n in zip(clusters.items(), commits):
            elections = await max_epoch(c) - before[m]
            result[m] = {"elections": elections, "elections_per_hour": elections * 3600 / seconds,
                         "commits": n}
        result["loaded_seconds"] = seconds
        result["cpu_hogs"] = hogs
        result["load_average"] = [round(load_before, 1), round(load_after, 1)]
        for m, cluster in clusters.items():
            caused = 0
            for _ in range(pause_rounds):
                active, conn = await find_active(cluster)
                _, epoch = await describe_leader(conn)
                paused = next(i for i in cluster.procs if i != active)
                os.kill(cluster.procs[paused].pid, signal.SIGSTOP)
                await asyncio.sleep(1.5)
                os.kill(cluster.procs[paused].pid, signal.SIGCONT)
                await asyncio.sleep(2.0)
                conn.close()
                caused += await max_epoch(cluster) != epoch
            result[m]["pause_rounds"] = pause_rounds
            result[m]["pauses_followed_by_an_election"] = caused
    finally:
        for p in hog_procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        for m, cluster in clusters.items():
            for i in list(cluster.procs):
                os.kill(cluster.procs[i].pid, signal.SIGCONT)   # a paused one dies too
            cluster.close()
            shutil.rmtree(works[m], ignore_errors=True)
    return result


# -- main ------------------------------------------------------------------------------------------


async def measure_membership(rounds: int, voters: int = 1, nodes: int = 3) -> dict:
    """Part 5 (module docstring): ``voters`` controllers start the quorum, the others up to
    ``nodes`` join; each round adds them in order and removes them in reverse."""
    from clients.properties import load_properties
    from clients.protocol import ApiKey, messages
    from clients.protocol.errors import ErrorCode
    from clients.protocol.types import parse_uuid_text
    work = tempfile.mkdtemp(prefix="bench-quorum-membership-")
    cluster = Controllers(work, {"ketch.controller.write.timeout.ms": "5000"}, voters=voters,
                          nodes=nodes)
    ids = list(range(1, nodes + 1))
    joiners = ids[voters:]
    stop = asyncio.Event()
    timings: dict[str, list[float]] = {"add_ms": [], "remove_ms": [], "catch_up_ms": []}
    try:
        for i in ids:
            cluster.start(i)
        _, conn = await find_active(cluster, 60)
        directories = {}
        for i in ids:
            await connect_any(cluster, i, 60)
            meta = load_properties(os.path.join(work, f"c{i}", "meta.properties"))
            directories[i] = parse_uuid_text(meta["directory.id"])
        writes = asyncio.ensure_future(keep_writing(cluster, stop, 2))

        async def change(request_of) -> tuple[float, float]:
            """(ms refused as not caught up, ms of the accepted request), on controller 1."""
            nonlocal conn
            first = time.perf_counter()
            while True:
                started = time.perf_counter()
                key, body = request_of()
                response = await conn.request(key, 0, body, timeout_s=30)
                if response.error_code == ErrorCode.NONE:
                    return (started - first) * 1000, (time.perf_counter() - started) * 1000
                if response.error_code == ErrorCode.NOT_CONTROLLER:
                    conn.close()
                    _, conn = await find_active(cluster, 60)
                elif response.error_code != ErrorCode.REQUEST_TIMED_OUT:
                    raise RuntimeError(f"voter change refused: {response}")
                await asyncio.sleep(0.01)

        def add(i: int):
            A = messages.AddRaftVoterRequest
            return ApiKey.ADD_RAFT_VOTER, A(timeout_ms=5000, voter_id=i, voter_directory_id=directories[i],
                                            listeners=[A.Listener(name="CONTROLLER", host="127.0.0.1", port=cluster.kafka[i]),
                                                       A.Listener(name="RAFT", host="127.0.0.1", port=cluster.raft[i])])

        def remove(i: int):
            return ApiKey.REMOVE_RAFT_VOTER, messages.RemoveRaftVoterRequest(
                voter_id=i, voter_directory_id=directories[i])

        for _ in range(rounds):
            for i in joiners:
                waited, took = await change(lambda i=i: add(i))
                timings["catch_up_ms"].append(waited)
                timings["add_ms"].append(took)
            for i in reversed(joiners):
                _, took = await change(lambda i=i: remove(i))
                timings["remove_ms"].append(took)
            # A removed controller keeps running pysyncobj with the old members: restart it
            # with a fresh directory so it can join again (a removed voter refuses to start).
            for i in joiners:
                cluster.kill(i, signal.SIGTERM)
                shutil.rmtree(os.path.join(work, f"c{i}"), ignore_errors=True)
                cluster.start(i)
                await connect_any(cluster, i, 60)
                meta = load_properties(os.path.join(work, f"c{i}", "meta.properties"))
                directories[i] = parse_uuid_text(meta["directory.id"])
        stop.set()
        written = await writes
        conn.close()
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)
    out: dict = {k: [round(v, 1) for v in vs] for k, vs in timings.items()}
    for k, vs in timings.items():
        out[k.replace("_ms", "_p50_ms")] = round(statistics.median(vs), 1) if vs else None
    out["writes_during"] = written
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=["raw", "ketch", "observer"])
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--addresses", default="")
    parser.add_argument("--dir", default="")
    parser.add_argument("--until", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--latency-ops", type=int, default=2000)
    parser.add_argument("--writers", type=int, default=256)
    parser.add_argument("--raw-in-flight", type=int, default=16)
    parser.add_argument("--in-flight", type=int, default=2, help="Raft entries in flight (Ketch)")
    parser.add_argument("--records-per-append", type=int, default=8)
    parser.add_argument("--failover-rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="short runs, 10k partitions")
    parser.add_argument("--membership-rounds", type=int, default=3)
    parser.add_argument("--only", choices=["all", "elections", "membership"], default="all",
                        help="elections: only part 4 (and failover with and without pre-vote)")
    parser.add_argument("--election-seconds", type=float, default=60.0,
                        help="loaded run, both quorums at once")
    parser.add_argument("--cpu-hogs", type=int, default=3, help="busy-looping processes")
    parser.add_argument("--election-writers", type=int, default=4, help="per quorum")
    parser.add_argument("--pause-rounds", type=int, default=5)
    args = parser.parse_args()
    if args.worker == "raw":
        return raw_worker(args)
    if args.worker == "ketch":
        return ketch_worker(args)
    if args.worker == "observer":
        return observer_worker(args)
    if args.quick:
        args.seconds, args.latency_ops, args.failover_rounds = 2.0, 500, 2
        args.partitions, args.topics = 10_000, 10
        args.election_seconds, args.pause_rounds = 20.0, 2
    if args.only == "membership" or args.only == "all":
        membership = asyncio.run(measure_membership(args.membership_rounds))
        # The same with 5: a quorum of 3 grows to 5 and shrinks back (SCENARIOS.md N14's sizes).
        membership5 = asyncio.run(measure_membership(args.membership_rounds, voters=3, nodes=5))
        for shape, m in (("1 -> 3 -> 1", membership), ("3 -> 5 -> 3", membership5)):
            print(f"membership ({shape}, {args.membership_rounds} rounds, load average "
                  f"{os.getloadavg()[0]:.1f}): add a voter p50 {m['add_p50_ms']} ms "
                  f"{m['add_ms']}, remove p50 {m['remove_p50_ms']} ms "
                  f"{m['remove_ms']}; refused as not caught up for {m['catch_up_ms']} ms; "
                  f"{m['writes_during']} writes acknowledged meanwhile")
        if args.only == "membership":
            print(json.dumps({"bench": "quorum", "membership": membership,
                              "membership_5": membership5}, separators=(",", ":")))
            return
    if args.only == "elections":
        summary = {"bench": "quorum", "elections": run_elections(args)}
        print(json.dumps(summary, separators=(",", ":")))
        return

    probe = fsync_probe()
    print(f"commits: 3 processes on loopback, cluster secret on, {args.seconds:.0f} s per run "
          f"(fdatasync here now: p50 {probe['fdatasync_p50_ms']:.2f} ms, "
          f"p99 {probe['fdatasync_p99_ms']:.2f} ms; load average {os.getloadavg()[0]:.1f})")
    raw = run_trio("raw", args)
    print(f"  bare pysyncobj counter   {raw['commits_per_s']:9.0f} commits/s "
          f"({args.raw_in_flight} in flight)   latency p50 {raw['latency_p50_ms']:.2f} ms"
          f"  p99 {raw['latency_p99_ms']:.2f} ms")
    ketch = run_trio("ketch", args)
    print(f"  Ketch RaftQuorum         {ketch['records_per_s']:9.0f} records/s "
          f"({args.writers} writers, {ketch['records_per_entry']:.0f} records/entry)"
          f"   latency p50 {ketch['latency_p50_ms']:.2f} ms  p99 {ketch['latency_p99_ms']:.2f} ms"
          f"  (under load p50 {ketch['loaded_latency_p50_ms']:.1f} / p99 {ketch['loaded_latency_p99_ms']:.1f} ms)")
    ratios = {
        "records_per_s_to_counter": ketch["records_per_s"] / raw["commits_per_s"],
        "latency_p50_to_counter": ketch["latency_p50_ms"] / raw["latency_p50_ms"],
        "latency_p99_to_counter": ketch["latency_p99_ms"] / raw["latency_p99_ms"],
    }
    print(f"  ratios: records/s {ratios['records_per_s_to_counter']:.1f}x counter; "
          f"p50 {ratios['latency_p50_to_counter']:.2f}x, p99 {ratios['latency_p99_to_counter']:.2f}x")
    zk_ratio = ketch["records_per_s"] / ZOOKEEPER_WRITES_PER_S
    print(f"  goal records/s >= 10x ZooKeeper ({ZOOKEEPER_WRITES_PER_S}/s): {zk_ratio:.1f}x "
          f"{'met' if zk_ratio >= 10 else 'NOT met'}; goal p99 < 5 ms: "
          f"{'met' if ketch['latency_p99_ms'] < 5 else 'NOT met'}")

    failover = asyncio.run(measure_failover(args.failover_rounds))
    print(f"failover (SIGKILL active -> next committed write): {failover['failover_ms']} ms, "
          f"p50 {failover['failover_p50_ms']:.0f} ms, max {failover['failover_max_ms']:.0f} ms")

    big = asyncio.run(measure_partitions(args.partitions, args.topics))
    zero, snap = big["observer_from_zero"], big["observer_from_snapshot"]
    print(f"{big['partitions']} partitions in {big['topics']} topics: committed in "
          f"{big['create_commit_s']:.1f} s ({big['log_records']} records in the log; "
          f"{big['topics_resent']} topics resent after a controller change; "
          f"{big['raft_tick_stalls']} raft tick stalls > election timeout in the logs)")
    print(f"  new observer from offset 0:  {zero['seconds']:.1f} s, +{zero['rss_growth_mb']:.0f} MB RSS"
          f" (peak {zero['rss_peak_mb']:.0f} MB), {zero['partitions']} partitions")
    print(f"  new observer from snapshot:  {snap['seconds']:.1f} s, +{snap['rss_growth_mb']:.0f} MB RSS"
          f" (peak {snap['rss_peak_mb']:.0f} MB), snapshot at offset {big['snapshot_end_offset']}")
    print(f"  same topics and partitions: {big['same_topics']}; restart of all 3 controllers "
          f"to an active one: {big['restart_all_s']:.1f} s")
    elections = run_elections(args)
    summary = {
        "bench": "quorum",
        "elections": elections,
        "membership": membership, "membership_5": membership5,
        "fsync_probe": {k: round(v, 3) for k, v in probe.items()},
        "load_average": round(os.getloadavg()[0], 2),
        "settings": {"appendEntriesUseBatch": False, "raftMinTimeout": 0.15, "raftMaxTimeout": 0.3,
                     "password": True, "fsync_journal": True},
        "counter": {k: round(v, 3) for k, v in raw.items()},
        "ketch": {k: round(v, 3) if isinstance(v, float) else v for k, v in ketch.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "records_per_s_to_zookeeper_reference": round(zk_ratio, 2),
        "failover": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in failover.items()},
        "partitions": {
            "count": big["partitions"], "create_commit_s": round(big["create_commit_s"], 2),
            "observer_from_zero_s": round(zero["seconds"], 2),
            "observer_from_zero_rss_growth_mb": round(zero["rss_growth_mb"], 1),
            "observer_from_snapshot_s": round(snap["seconds"], 2),
            "observer_from_snapshot_rss_growth_mb": round(snap["rss_growth_mb"], 1),
            "same_topics": big["same_topics"], "restart_all_s": round(big["restart_all_s"], 2),
            "topics_resent": big["topics_resent"], "raft_tick_stalls": big["raft_tick_stalls"],
        },
    }
    print(json.dumps(summary, separators=(",", ":")))


def run_elections(args: argparse.Namespace) -> dict:
    """Part 4 and failover with and without pre-vote; prints its figures."""
    print(f"elections: two 3-controller quorums side by side (without / with pre-vote), "
          f"{args.election_writers} writers each, {args.cpu_hogs} busy-looping processes, "
          f"{args.election_seconds:.0f} s (load average {os.getloadavg()[0]:.1f} before)")
    elections = asyncio.run(measure_elections(args.election_seconds, args.cpu_hogs,
                                              args.election_writers, args.pause_rounds))
    print(f"  load average during: {elections['load_average']}")
    for mode in ("without_pre_vote", "with_pre_vote"):
        e = elections[mode]
        print(f"  {mode:17s} {e['elections']:3d} elections in {args.election_seconds:.0f} s "
              f"({e['elections_per_hour']:.0f}/hour), {e['commits']} writes committed; "
              f"follower paused 1.5 s then resumed: {e['pauses_followed_by_an_election']} of "
              f"{e['pause_rounds']} followed by an election")
    for pre_vote in (False, True):
        f = asyncio.run(measure_failover(args.failover_rounds, pre_vote))
        key = "with_pre_vote" if pre_vote else "without_pre_vote"
        elections[key]["failover_ms"] = f["failover_ms"]
        elections[key]["failover_p50_ms"] = round(f["failover_p50_ms"], 1)
        print(f"  failover {key}: {f['failover_ms']} ms, p50 {f['failover_p50_ms']:.0f} ms")
    return elections


if __name__ == "__main__":
    main()
