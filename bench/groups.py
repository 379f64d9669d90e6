"""Benchmark: the group coordinator of a local 3-controller / 3-broker Ketch cluster.

Group members here are Ketch-protocol-level clients (``clients.connection`` and Ketch's
codec), one asyncio task and one coordinator connection each, all in this process. They
speak the classic consumer protocol exactly as a Kafka consumer does (JoinGroup with the
KIP-394 member-id round trip, the leader's ``range`` assignment in SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit), without a client library's own timers and threads in the way,
so every timestamp is taken where the request goes out or the response comes in.

1. Rebalance after one member of a 10-member group leaves (LeaveGroup): from the moment
   the leaver sends LeaveGroup to the moment the last of the 9 others holds its SyncGroup
   answer for the new generation. Members heartbeat every ``--heartbeat-ms`` (100 ms
   here; Kafka consumers default to 3000 ms); a member learns of a rebalance only from its
   next heartbeat (REBALANCE_IN_PROGRESS), so the figure is split into *detection* (leave
   -> last member told) and *join + sync* (last member told -> last assignment received).
   Repeated ``--rounds`` times (a fresh member joins between rounds); median, min, max.
   Baseline: the heartbeat interval itself (the detection floor) and the median Heartbeat
   round trip of the stable group.
2. Offset commits/s: the 10 members of the stable group commit their own partition's
   offset in a loop, one OffsetCommit in flight per member (as a consumer's synchronous
   commit), for ``--seconds``. Each commit is an acks=all append to the group's
   ``__consumer_offsets`` partition, replication factor 3. Baseline: the same load as
   Produce requests (acks=all, one record of the same size as a commit record) from 10
   connections to one partition of a replication-factor-3 topic: commits/s divided by
   produce/s is what the coordinator keeps of the plain replicated append path.

Usage: python bench/groups.py [--rounds 7] [--seconds 5] [--heartbeat-ms 100]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.connection import KafkaConnection, connect  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.protocol import ApiKey, decode_message, encode_message, messages  # noqa: E402
from clients.protocol.errors import ErrorCode  # noqa: E402
from clients.records import Record, build_batch  # noqa: E402

MEMBERS = 10
TOPIC = "bench-groups"              # what the group subscribes to: one partition per member
MEMBERS_PARTITIONS = MEMBERS
PRODUCE_TOPIC = "bench-groups-produce"
GROUP = "bench-group"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
# Kafka's OffsetCommit record for this group and topic is about this size (key + value).
COMMIT_RECORD_BYTES = 70

E = ErrorCode
REJOIN = {E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID}


def _now() -> float:
    return time.monotonic()


def subscription(topics: list[str]) -> bytes:
    return (0).to_bytes(2, "big") + encode_message(messages.ConsumerProtocolSubscription(topics=topics), 0)


def assignment(partitions: list[int]) -> bytes:
    A = messages.ConsumerProtocolAssignment
    body = A(assigned_partitions=[A.TopicPartition(topic=TOPIC, partitions=partitions)])
    return (0).to_bytes(2, "big") + encode_message(body, 0)


def decode_assignment(data: bytes) -> list[int]:
    if not data:
        return []
    a = decode_message(messages.ConsumerProtocolAssignment, 0, data[2:])
    return [p for tp in a.assigned_partitions for p in tp.partitions]


async def request(conn: KafkaConnection, api: int, lo: int, hi: int, body, timeout_s: float | None = 30.0):
    return await conn.request(api, conn.pick_version(api, lo, hi), body, timeout_s=timeout_s)


async def find_coordinator(port: int) -> tuple[str, int]:
    conn = await connect("127.0.0.1", port, client_id="bench-groups")
    try:
        await conn.negotiate_versions()
        while True:
            resp = await request(conn, ApiKey.FIND_COORDINATOR, 4, 4,
                                 messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
            (c,) = resp.coordinators
            if c.error_code == E.NONE:
                return c.host, c.port
            await asyncio.sleep(0.2)        # __consumer_offsets being created on first use
    finally:
        conn.close()


@dataclass
class Member:
    name: str
    coordinator: tuple[str, int]
    heartbeat_ms: int
    member_id: str = ""
    generation: int = -1
    partitions: list[int] = field(default_factory=list)
    synced_at: dict[int, float] = field(default_factory=dict)     # generation -> time
    told_at: list[float] = field(default_factory=list)           # REBALANCE_IN_PROGRESS heartbeats
    heartbeat_rtts: list[float] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    conn: KafkaConnection | None = None
    task: asyncio.Task | None = None
    leaving: bool = False

    async def start(self) -> None:
        self.conn = await connect(*self.coordinator, client_id=self.name)
        await self.conn.negotiate_versions()
        await self.join_and_sync()
        self.task = asyncio.get_running_loop().create_task(self.heartbeat_loop())

    async def join_and_sync(self) -> None:
        while True:
            join = await request(self.conn, ApiKey.JOIN_GROUP, 5, 9, messages.JoinGroupRequest(
                group_id=GROUP, session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, member_id=self.member_id,
                protocol_type="consumer", protocols=[messages.JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=subscription([TOPIC]))]), timeout_s=REBALANCE_TIMEOUT_MS / 1000 + 5)
            if join.error_code == E.MEMBER_ID_REQUIRED:     # KIP-394: join again with this id
                self.member_id = join.member_id
                continue
            if join.error_code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            assert join.error_code == E.NONE, f"{self.name}: JoinGroup error {join.error_code}"
            self.member_id, self.generation = join.member_id, join.generation_id
            assignments = []
            if join.leader == self.member_id:
                members = sorted(m.member_id for m in join.members)
                per, extra = divmod(MEMBERS_PARTITIONS, len(members))
                start = 0
                for i, mid in enumerate(members):
                    n = per + (1 if i < extra else 0)
                    assignments.append(messages.SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=mid, assignment=assignment(list(range(start, start + n)))))
                    start += n
            sync = await request(self.conn, ApiKey.SYNC_GROUP, 3, 5, messages.SyncGroupRequest(
                group_id=GROUP, generation_id=self.generation, member_id=self.member_id,
                protocol_type="consumer", protocol_name="range", assignments=assignments),
                timeout_s=REBALANCE_TIMEOUT_MS / 1000 + 5)
            if sync.error_code in REJOIN:
                continue
            assert sync.error_code == E.NONE, f"{self.name}: SyncGroup error {sync.error_code}"
            self.partitions = decode_assignment(sync.assignment)
            self.synced_at[self.generation] = _now()
            return

    async def heartbeat_loop(self) -> None:
        phase_s = 0.0
        while not self.leaving:
            await asyncio.sleep(self.heartbeat_ms / 1000 + phase_s)
            phase_s = 0.0
            if self.leaving:
                return
            sent = _now()
            resp = await request(self.conn, ApiKey.HEARTBEAT, 3, 4, messages.HeartbeatRequest(
                group_id=GROUP, generation_id=self.generation, member_id=self.member_id))
            if resp.error_code == E.NONE:
                self.heartbeat_rtts.append(_now() - sent)
            elif resp.error_code in REJOIN:
                self.told_at.append(_now())
                await self.join_and_sync()
                # All members get their SyncGroup answers together, which would line their
                # heartbeat timers up: shift each by its own random phase, so that the next
                # rebalance is learnt as in a long-running group whose members' timers are
                # independent (the last of 9 members then learns ~0.9 intervals after it starts).
                phase_s = self.rng.uniform(0, self.heartbeat_ms / 1000)
            else:
                raise AssertionError(f"{self.name}: Heartbeat error {resp.error_code}")

    async def leave(self) -> None:
        self.leaving = True
        resp = await request(self.conn, ApiKey.LEAVE_GROUP, 3, 5, messages.LeaveGroupRequest(
            group_id=GROUP, members=[messages.LeaveGroupRequest.MemberIdentity(member_id=self.member_id)]))
        assert resp.error_code == E.NONE, f"{self.name}: LeaveGroup error {resp.error_code}"

    async def stop(self) -> None:
        self.leaving = True
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.conn is not None:
            self.conn.close()

    async def commit(self, offset: int) -> int:
        O = messages.OffsetCommitRequest
        resp = await request(self.conn, ApiKey.OFFSET_COMMIT, 7, 8, O(
            group_id=GROUP, generation_id_or_member_epoch=self.generation, member_id=self.member_id,
            topics=[O.OffsetCommitRequestTopic(name=TOPIC, partitions=[O.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata="") for p in self.partitions])]))
        codes = {p.error_code for t in resp.topics for p in t.partitions}
        return codes.pop() if len(codes) == 1 else max(codes)


async def wait_stable(members: list[Member], timeout_s: float = 60) -> int:
    """Until every member holds the same generation's assignment, covering every partition."""
    deadline = _now() + timeout_s
    while _now() < deadline:
        gens = {m.generation for m in members}
        if len(gens) == 1 and all(m.synced_at.get(m.generation) for m in members):
            owned = sorted(p for m in members for p in m.partitions)
            if owned == list(range(MEMBERS_PARTITIONS)):
                return gens.pop()
        await asyncio.sleep(0.01)
    raise TimeoutError(f"group not stable: {[(m.name, m.generation, m.partitions) for m in members]}")


# ------------------------------------------------------------------ admin over the wire


async def create_topic(port: int, name: str, partitions: int) -> None:
    conn = await connect("127.0.0.1", port, client_id="bench-groups")
    try:
        await conn.negotiate_versions()
        cls = messages.CreateTopicsRequest
        resp = await request(conn, ApiKey.CREATE_TOPICS, 2, 7, cls(timeout_ms=30_000, topics=[
            cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=3)]))
        code = resp.topics[0].error_code
        assert code in (E.NONE, E.TOPIC_ALREADY_EXISTS), f"CreateTopics {name}: {code}"
        for _ in range(300):
            md = await request(conn, ApiKey.METADATA, 9, 12, messages.MetadataRequest(
                topics=[messages.MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False))
            (t,) = md.topics
            if t.error_code == E.NONE and len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{name} has no leaders")
    finally:
        conn.close()


async def partition_leader_port(port: int, name: str, partition: int) -> int:
    conn = await connect("127.0.0.1", port, client_id="bench-groups")
    try:
        await conn.negotiate_versions()
        md = await request(conn, ApiKey.METADATA, 9, 12, messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
        leader = next(p.leader_id for p in md.topics[0].partitions if p.partition_index == partition)
        return next(b.port for b in md.brokers if b.node_id == leader)
    finally:
        conn.close()


# ------------------------------------------------------------------ measurements


async def measure_rebalances(members: list[Member], coordinator: tuple[str, int], heartbeat_ms: int,
                             rounds: int) -> list[dict]:
    out = []
    for r in range(rounds):
        before = await wait_stable(members)
        # Two heartbeat intervals of steady state, so that the members' heartbeat timers
        # are spread as in a running group when the leaver goes.
        await asyncio.sleep(2 * heartbeat_ms / 1000)
        leaver, stayers = members[-1], members[:-1]
        for m in stayers:
            m.told_at.clear()
        sent = _now()
        await leaver.leave()
        left = _now()
        generation = await wait_stable(stayers)
        assert generation > before
        done = max(m.synced_at[generation] for m in stayers)
        told = max(m.told_at[0] for m in stayers)
        out.append({"rebalance_ms": (done - sent) * 1000, "leave_rtt_ms": (left - sent) * 1000,
                    "detection_ms": (told - sent) * 1000, "join_sync_ms": (done - told) * 1000})
        await leaver.stop()
        fresh = Member(f"member-{MEMBERS + r}", coordinator, heartbeat_ms, rng=random.Random(MEMBERS + r))
        await fresh.start()
        members[:] = stayers + [fresh]
    await wait_stable(members)
    return out


async def measure_commits(members: list[Member], seconds: float) -> dict:
    generation = await wait_stable(members)
    latencies: list[float] = []
    errors: dict[int, int] = {}
    stop_at = _now() + seconds

    async def run(m: Member) -> int:
        offset = 0
        while _now() < stop_at:
            offset += 1
            sent = _now()
            code = await m.commit(offset)
            latencies.append(_now() - sent)
            if code != E.NONE:
                errors[code] = errors.get(code, 0) + 1
        return offset

    started = _now()
    last = await asyncio.gather(*(run(m) for m in members))
    elapsed = _now() - started
    assert generation == members[0].generation, "the group rebalanced during the commit run"
    return {"commits": len(latencies) - sum(errors.values()), "errors": errors, "elapsed_s": elapsed,
            "last_offsets": last, "latencies": latencies}


async def measure_produce(port: int, seconds: float) -> dict:
    """The baseline: acks=all Produce of one small record, 10 connections, one partition."""
    leader_port = await partition_leader_port(port, PRODUCE_TOPIC, 0)
    conns = [await connect("127.0.0.1", leader_port, client_id=f"bench-produce-{i}") for i in range(MEMBERS)]
    for c in conns:
        await c.negotiate_versions()
    value = b"x" * (COMMIT_RECORD_BYTES - 20)
    key = b"k" * 20
    latencies: list[float] = []
    errors: dict[int, int] = {}
    stop_at = _now() + seconds
    P = messages.ProduceRequest

    async def run(conn: KafkaConnection) -> None:
        while _now() < stop_at:
            batch = build_batch([Record(0, int(time.time() * 1000), key, value)])
            sent = _now()
            resp = await request(conn, ApiKey.PRODUCE, 3, 9, P(acks=-1, timeout_ms=30_000, topic_data=[
                P.TopicProduceData(name=PRODUCE_TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
            latencies.append(_now() - sent)
            code = resp.responses[0].partition_responses[0].error_code
            if code != E.NONE:
                errors[code] = errors.get(code, 0) + 1

    started = _now()
    await asyncio.gather(*(run(c) for c in conns))
    elapsed = _now() - started
    for c in conns:
        c.close()
    return {"produces": len(latencies) - sum(errors.values()), "errors": errors, "elapsed_s": elapsed,
            "latencies": latencies}


async def fetch_committed(coordinator: tuple[str, int]) -> dict[int, int]:
    conn = await connect(*coordinator, client_id="bench-groups")
    try:
        await conn.negotiate_versions()
        F = messages.OffsetFetchRequest
        resp = await request(conn, ApiKey.OFFSET_FETCH, 7, 7, F(group_id=GROUP, topics=[
            F.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(MEMBERS_PARTITIONS)))]))
        return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
    finally:
        conn.close()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def run_bench(cluster: LocalCluster, args: argparse.Namespace) -> dict:
    port = cluster.spec.brokers[0].port
    await create_topic(port, TOPIC, MEMBERS_PARTITIONS)
    await create_topic(port, PRODUCE_TOPIC, 1)
    t = _now()
    coordinator = await find_coordinator(port)      # creates __consumer_offsets (50 partitions, RF 3)
    print(f"coordinator {coordinator[0]}:{coordinator[1]} ready in {_now() - t:.2f}s "
          f"(includes creating __consumer_offsets)")

    members = [Member(f"member-{i}", coordinator, args.heartbeat_ms, rng=random.Random(i)) for i in range(MEMBERS)]
    t = _now()
    await asyncio.gather(*(m.start() for m in members))
    await wait_stable(members)
    print(f"{MEMBERS} members formed a stable group in {(_now() - t) * 1000:.0f} ms")
    # A quiet second of the stable group: the Heartbeat round trips (a baseline).
    await asyncio.sleep(1.0)
    rtts = [x * 1000 for m in members for x in m.heartbeat_rtts]

    rounds = await measure_rebalances(members, coordinator, args.heartbeat_ms, args.rounds)
    rebalance = [r["rebalance_ms"] for r in rounds]
    detection = [r["detection_ms"] for r in rounds]
    join_sync = [r["join_sync_ms"] for r in rounds]
    print(f"\nrebalance after one of {MEMBERS} members leaves ({args.rounds} rounds, heartbeat {args.heartbeat_ms} ms):")
    for i, r in enumerate(rounds):
        print(f"  round {i}: {r['rebalance_ms']:.0f} ms = detection {r['detection_ms']:.0f} "
              f"+ join/sync {r['join_sync_ms']:.0f} (LeaveGroup answered in {r['leave_rtt_ms']:.1f} ms)")
    print(f"  median {statistics.median(rebalance):.0f} ms (min {min(rebalance):.0f}, max {max(rebalance):.0f}); "
          f"detection median {statistics.median(detection):.0f} ms, join+sync median {statistics.median(join_sync):.0f} ms")
    print(f"  Heartbeat round trip p50 {pct(rtts, 0.5):.2f} ms, p99 {pct(rtts, 0.99):.2f} ms ({len(rtts)} heartbeats)")

    commits = await measure_commits(members, args.seconds)
    commits_per_s = commits["commits"] / commits["elapsed_s"]
    committed = await fetch_committed(coordinator)
    expected = {m.partitions[0]: off for m, off in zip(members, commits["last_offsets"])}
    lat = [x * 1000 for x in commits["latencies"]]
    print(f"\noffset commits (acks=all, RF 3), {MEMBERS} members, one commit in flight each, {args.seconds:.0f} s:")
    print(f"  {commits_per_s:.0f} commits/s, latency p50 {pct(lat, 0.5):.2f} ms p99 {pct(lat, 0.99):.2f} ms, "
          f"errors {commits['errors'] or 'none'}; OffsetFetch returns the last commits: {committed == expected}")

    produce = await measure_produce(port, args.seconds)
    produce_per_s = produce["produces"] / produce["elapsed_s"]
    plat = [x * 1000 for x in produce["latencies"]]
    print(f"baseline: acks=all Produce of one {COMMIT_RECORD_BYTES}-byte record, {MEMBERS} connections, one partition (RF 3):")
    print(f"  {produce_per_s:.0f} produces/s, latency p50 {pct(plat, 0.5):.2f} ms p99 {pct(plat, 0.99):.2f} ms, "
          f"errors {produce['errors'] or 'none'}")
    print(f"  commits/s / produces/s = {commits_per_s / produce_per_s:.2f}")

    for m in members:
        await m.stop()
    return {
        "bench": "groups",
        "members": MEMBERS,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "rebalance_after_leave_ms_p50": round(statistics.median(rebalance), 1),
        "rebalance_after_leave_ms_min": round(min(rebalance), 1),
        "rebalance_after_leave_ms_max": round(max(rebalance), 1),
        "rebalance_detection_ms_p50": round(statistics.median(detection), 1),
        "rebalance_join_sync_ms_p50": round(statistics.median(join_sync), 1),
        "heartbeat_rtt_ms_p50": round(pct(rtts, 0.5), 2),
        "rebalance_vs_heartbeat_interval": round(statistics.median(rebalance) / args.heartbeat_ms, 2),
        "offset_commits_per_s": round(commits_per_s),
        "offset_commit_latency_ms_p50": round(pct(lat, 0.5), 2),
        "offset_commit_latency_ms_p99": round(pct(lat, 0.99), 2),
        "offset_commit_errors": sum(commits["errors"].values()),
        "committed_offsets_match": committed == expected,
        "baseline_produce_acks_all_per_s": round(produce_per_s),
        "offset_commits_vs_produce": round(commits_per_s / produce_per_s, 3),
        "rounds": args.rounds,
        "seconds": args.seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--heartbeat-ms", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ketch-bench-groups-") as d:
        # Kafka's defaults, except no initial rebalance delay (it only slows the first join).
        cluster = LocalCluster(d, broker_props={"group.initial.rebalance.delay.ms": "0"})
        try:
            t = _now()
            cluster.start(timeout_s=90)
            print(f"cluster of 3 controllers and 3 brokers up in {_now() - t:.1f}s")
            result = asyncio.run(run_bench(cluster, args))
        finally:
            cluster.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
