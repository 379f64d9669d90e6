"""Helpers for the consumer-group process tests.

- cluster start (fast failure detection, groups tuned for tests) with a retry on a port race;
- raw Kafka round trips with Ketch's codec over a plain socket (FindCoordinator,
  DescribeGroups with each member's assignment decoded, OffsetFetch, Metadata, ListOffsets),
  so what the tests assert about the group does not come from the client under test;
- a producer that records where each value landed (confluent-kafka, acks=all);
- ``ConsumerProcess``: one group consumer in a subprocess (``group_consumer.py`` for the
  Python libraries, ``kcat -G`` for kcat), its report file read back as events.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from clients.launcher import LocalCluster
from clients.protocol import NEED_DATA, ApiKey, ClientConnection, decode_message, messages
from clients.protocol.errors import ErrorCode

T = TypeVar("T")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

GROUP_BROKER = {
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "6",
}
GROUP_CONTROLLER = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "300",
}
STOP_TIMEOUT_S = 10


def start_cluster(tmp_path_factory, name: str = "groups", attempts: int = 3) -> LocalCluster:
    """A started 3+3 cluster in a fresh directory; a start lost to a port race is retried
    on new ports (LocalCluster picks free ports before the nodes bind them)."""
    for attempt in range(attempts):
        c = LocalCluster(str(tmp_path_factory.mktemp(name)), controllers=3, brokers=3,
                         broker_props=dict(GROUP_BROKER), controller_props=dict(GROUP_CONTROLLER))
        try:
            c.start(timeout_s=90)
            return c
        except RuntimeError as e:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            if "address already in use" not in str(e) or attempt == attempts - 1:
                raise
            shutil.rmtree(c.dir, ignore_errors=True)
        except BaseException:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            raise
    raise AssertionError("not reached")


def wait_until(probe: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Poll ``probe`` until it returns something truthy. Connection errors count as "not yet"."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    last_value: Any = None
    while True:
        try:
            last_value = probe()
            if last_value:
                return last_value
        except (OSError, ConnectionError, TimeoutError, ValueError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; "
                                 f"last value {last_value!r}, last error {last_error!r}")
        time.sleep(interval_s)


# ------------------------------------------------------------------ raw round trips


def roundtrip(port: int, api_key: int, api_version: int, body: Any, timeout_s: float = 10.0) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        conn = ClientConnection(client_id="ketch-groups-it")
        _, data = conn.send(api_key, api_version, body)
        s.sendall(data)
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"broker on port {port} closed the connection")
            conn.receive_data(chunk)
            event = conn.next_event()
            if event is not NEED_DATA:
                return event.body


def live_brokers(cluster: LocalCluster) -> list[Any]:
    return [b for b in cluster.spec.brokers
            if cluster.processes.get(b.id) is not None and cluster.processes[b.id].poll() is None]


def broker_port(cluster: LocalCluster, node_id: int) -> int:
    return cluster.spec.node(node_id).port


def find_coordinator(cluster: LocalCluster, group: str, via: int | None = None) -> int | None:
    """The coordinator's node id as one live broker answers (v4, batched keys), or None
    while it answers an error (COORDINATOR_NOT_AVAILABLE during creation or failover)."""
    brokers = [cluster.spec.node(via)] if via is not None else live_brokers(cluster)
    for b in brokers:
        try:
            resp = roundtrip(b.port, ApiKey.FIND_COORDINATOR, 4, messages.FindCoordinatorRequest(
                key_type=0, coordinator_keys=[group]))
        except OSError:
            continue
        (c,) = resp.coordinators
        return c.node_id if c.error_code == ErrorCode.NONE else None
    return None


def coordinator_port(cluster: LocalCluster, group: str) -> int:
    node = wait_until(lambda: find_coordinator(cluster, group), 30, f"a coordinator for {group}")
    return broker_port(cluster, node)


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    partitions: frozenset[int]          # of the test's topic, from the member's assignment


@dataclass(frozen=True)
class GroupView:
    state: str
    protocol: str
    members: dict[str, Member]          # by client id (each test consumer has its own)

    def assignment(self) -> dict[str, frozenset[int]]:
        return {cid: m.partitions for cid, m in self.members.items()}


def decode_assignment(data: bytes, topic: str) -> frozenset[int]:
    """A ConsumerProtocolAssignment (int16 version, then the body) as written by the
    group leader's assignor."""
    if not data:
        return frozenset()
    version = int.from_bytes(data[:2], "big", signed=True)
    spec_max = messages.ConsumerProtocolAssignment.SCHEMA.max_version
    a = decode_message(messages.ConsumerProtocolAssignment, min(version, spec_max), data[2:])
    return frozenset(p for tp in a.assigned_partitions if tp.topic == topic for p in tp.partitions)


def describe_group(cluster: LocalCluster, group: str, topic: str) -> GroupView | None:
    """DescribeGroups v5 on the coordinator; None while it has no answer (moving, loading)."""
    node = find_coordinator(cluster, group)
    if node is None:
        return None
    resp = roundtrip(broker_port(cluster, node), ApiKey.DESCRIBE_GROUPS, 5,
                     messages.DescribeGroupsRequest(groups=[group]))
    (g,) = resp.groups
    if g.error_code != ErrorCode.NONE:
        return None
    members = {m.client_id: Member(m.member_id, m.client_id, decode_assignment(m.member_assignment, topic))
               for m in g.members}
    assert len(members) == len(g.members), f"client ids are not unique in {g.members}"
    return GroupView(g.group_state, g.protocol_data, members)


def wait_for_assignment(cluster: LocalCluster, group: str, topic: str, client_ids: set[str],
                        partitions: int, timeout_s: float = 30) -> GroupView:
    """Until the group is Stable with exactly these members, whose assignments partition
    the topic: disjoint, covering every partition."""
    def probe() -> GroupView | None:
        g = describe_group(cluster, group, topic)
        if g is None or g.state != "Stable" or set(g.members) != client_ids:
            return None
        sets = list(g.assignment().values())
        if sum(len(s) for s in sets) != partitions or frozenset().union(*sets) != frozenset(range(partitions)):
            return None
        return g
    return wait_until(probe, timeout_s, f"{group} Stable with {sorted(client_ids)} owning all {partitions} partitions")


def committed_offsets(cluster: LocalCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """OffsetFetch v7 on the coordinator: partition -> committed offset (-1: none)."""
    port = coordinator_port(cluster, group)
    req = messages.OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        messages.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))])
    resp = roundtrip(port, ApiKey.OFFSET_FETCH, 7, req)
    if resp.error_code != ErrorCode.NONE:
        raise ValueError(f"OffsetFetch {group}: error {resp.error_code}")
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise ValueError(f"OffsetFetch {group} {topic}-{p.partition_index}: error {p.error_code}")
            out[p.partition_index] = p.committed_offset
    return out


def metadata_leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    for b in live_brokers(cluster):
        try:
            resp = roundtrip(b.port, ApiKey.METADATA, 12, messages.MetadataRequest(
                topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False))
        except OSError:
            continue
        (t,) = resp.topics
        if t.error_code != ErrorCode.NONE:
            raise ValueError(f"metadata {topic}: error {t.error_code}")
        return {p.partition_index: p.leader_id for p in t.partitions}
    raise ConnectionError("no broker answered Metadata")


def create_topic(cluster: LocalCluster, topic: str, partitions: int = 6, replication_factor: int = 3) -> None:
    cls = messages.CreateTopicsRequest
    port = live_brokers(cluster)[0].port
    resp = roundtrip(port, ApiKey.CREATE_TOPICS, 5, cls(timeout_ms=15_000, topics=[cls.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=replication_factor)]))
    (t,) = resp.topics
    assert t.error_code == ErrorCode.NONE, f"CreateTopics {topic}: error {t.error_code} {t.error_message}"
    live = {b.id for b in live_brokers(cluster)}
    wait_until(lambda: (lambda leaders: len(leaders) == partitions and set(leaders.values()) <= live)(
        metadata_leaders(cluster, topic)), 30, f"leaders for {topic}")


# ------------------------------------------------------------------ producing


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int, tag: str) -> dict[tuple[int, int], str]:
    """``per_partition`` records to each partition, acks=all; (partition, offset) -> value
    as the delivery reports say."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    landed: dict[tuple[int, int], str] = {}
    errors: list[str] = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            landed[(msg.partition(), msg.offset())] = msg.value().decode()

    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p, on_delivery=report)
    left = producer.flush(60)
    assert left == 0 and not errors, f"produce to {topic}: {left} unflushed, errors {errors[:3]}"
    assert len(landed) == per_partition * partitions
    return landed


# ------------------------------------------------------------------ consumer processes


class ConsumerProcess:
    """A group consumer in a subprocess. ``client`` is kafka-python, aiokafka, confluent or
    kcat; the process is killed by pid at teardown if the test left it running."""

    def __init__(self, workdir: str, client: str, bootstrap: str, group: str, topic: str,
                 client_id: str, assignor: str = "range", commit: str = "manual",
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 300,
                 auto_commit_interval_ms: int = 200, max_poll_records: int = 50,
                 pause_at: int | None = None, hold_after_autocommit: bool = False) -> None:
        self.client = client
        self.client_id = client_id
        self.out = os.path.join(workdir, f"{client_id}.jsonl")
        self.err = os.path.join(workdir, f"{client_id}.stderr")
        if client == "kcat":
            # -X auto.offset.reset, not -o: kcat's -o would override the committed offsets
            # at every assignment. kcat commits automatically (librdkafka's auto-commit).
            argv = ["kcat", "-b", bootstrap, "-G", group, topic, "-q", "-u",
                    "-f", r"%p %o %s\n", "-X", "auto.offset.reset=earliest",
                    "-X", f"client.id={client_id}", "-X", f"session.timeout.ms={session_timeout_ms}",
                    "-X", f"heartbeat.interval.ms={heartbeat_interval_ms}",
                    "-X", f"auto.commit.interval.ms={auto_commit_interval_ms}",
                    "-X", f"partition.assignment.strategy={assignor}",
                    "-X", "fetch.wait.max.ms=200"]
            stdout = open(self.out, "wb")
            stdin = subprocess.DEVNULL
        else:
            argv = [sys.executable, os.path.join(HERE, "group_consumer.py"), "--client", client,
                    "--bootstrap", bootstrap, "--group", group, "--topic", topic,
                    "--client-id", client_id, "--out", self.out, "--assignor", assignor,
                    "--commit", commit, "--session-timeout-ms", str(session_timeout_ms),
                    "--heartbeat-interval-ms", str(heartbeat_interval_ms),
                    "--auto-commit-interval-ms", str(auto_commit_interval_ms),
                    "--max-poll-records", str(max_poll_records)]
            if pause_at is not None:
                argv += ["--pause-at", str(pause_at)]
            if hold_after_autocommit:
                argv.append("--hold-after-autocommit")
            stdout = subprocess.DEVNULL
            stdin = subprocess.PIPE
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=err, env=env,
                                         start_new_session=True)
        if client == "kcat":
            stdout.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self) -> list[dict]:
        if not os.path.exists(self.out):
            return []
        with open(self.out, "rb") as f:
            lines = f.read().decode(errors="replace").split("\n")
        lines.pop()                                     # "" or a line still being written
        if self.client == "kcat":
            out = []
            for line in lines:
                p, o, v = line.split(" ", 2)
                out.append({"ev": "record", "p": int(p), "o": int(o), "v": v})
            return out
        return [json.loads(line) for line in lines]

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["p"], e["o"], e["v"]) for e in self.events() if e["ev"] == "record"]

    def first_event(self, ev: str) -> dict | None:
        return next((e for e in self.events() if e["ev"] == ev), None)

    def stderr_tail(self) -> str:
        with open(self.err, "rb") as f:
            return f.read()[-3000:].decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout_s: float = 30) -> int:
        """A clean close: the library's close() (LeaveGroup). kcat closes on SIGTERM."""
        if self.client == "kcat":
            self.proc.send_signal(signal.SIGTERM)
        else:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.write(b"close\n")
                self.proc.stdin.flush()
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.client_id} did not close in {timeout_s}s: {self.stderr_tail()}")

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit, nothing flushed by the library."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def reap(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


def records_by_partition(records: list[tuple[int, int, str]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p, o, _ in records:
        out.setdefault(p, []).append(o)
    return out
