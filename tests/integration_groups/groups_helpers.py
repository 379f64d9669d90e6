"""Helpers for the consumer-group process tests.

- cluster start (fast failure detection, groups tuned for tests): tests/integration's
  ``start_cluster`` with the group settings below;
- questions about groups and topics through Ketch's own admin client (``admin_for``, one
  per cluster: DescribeGroups with each member's assignment decoded, OffsetFetch,
  Metadata, CreateTopics), whose Kafka errors become ValueError ("not yet" for
  ``wait_until``); the admin client is not the client under test here, the consumers are;
- FindCoordinator as one particular broker answers it, raw (``roundtrip``): the failover
  test asks every broker in turn;
- a producer that records where each value landed (confluent-kafka, acks=all);
- ``ConsumerProcess``: one group consumer in a subprocess (``group_consumer.py`` for the
  Python libraries, ``kcat -G`` for kcat), its report file read back as events.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from integration_helpers import (  # noqa: E402
    ADMIN_CALL_MS, FAST_BROKER, FAST_CONTROLLER, STOP_TIMEOUT_S, admin_for, roundtrip, wait_until,
)
from integration_helpers import start_cluster as _start_cluster  # noqa: E402

from clients.errors import GroupIdNotFoundError, KafkaApiError, KafkaTimeoutError  # noqa: E402
from clients.admin import NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402
from clients.protocol.errors import ErrorCode  # noqa: E402
from clients.types import TopicPartition  # noqa: E402

__all__ = [
    "GROUP_BROKER", "GROUP_CONTROLLER", "STOP_TIMEOUT_S", "REPO", "ConsumerProcess", "GroupView",
    "Member", "broker_port", "committed_offsets", "create_topic", "describe_group",
    "find_coordinator", "live_brokers", "metadata_leaders", "produce", "records_by_partition",
    "roundtrip", "start_cluster", "wait_for_assignment", "wait_until",
]

GROUP_BROKER = {
    **FAST_BROKER,
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "6",
    # KIP-848 groups: the coordinator sets the heartbeat pace and detects dead members.
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}
GROUP_CONTROLLER = dict(FAST_CONTROLLER)
# A group with no answer (its coordinator moving or loading) is reported as None soon,
# so that callers polling for a change are not held up by one slow question.
DESCRIBE_GROUP_MS = 5000


def start_cluster(tmp_path_factory, name: str = "groups", attempts: int = 3) -> LocalCluster:
    """A started 3+3 cluster in a fresh directory, tuned for group tests; a start lost to
    a port race is retried on new ports."""
    return _start_cluster(tmp_path_factory, name, broker_props=GROUP_BROKER,
                          controller_props=GROUP_CONTROLLER, attempts=attempts)


def live_brokers(cluster: LocalCluster) -> list[Any]:
    return [b for b in cluster.spec.brokers
            if cluster.processes.get(b.id) is not None and cluster.processes[b.id].poll() is None]


def broker_port(cluster: LocalCluster, node_id: int) -> int:
    return cluster.spec.node(node_id).port


def find_coordinator(cluster: LocalCluster, group: str, via: int | None = None) -> int | None:
    """The coordinator's node id as one live broker answers (v4, batched keys), or None
    while it answers an error (COORDINATOR_NOT_AVAILABLE during creation or failover).
    Raw on purpose: the failover test asks each broker for its own answer."""
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


def describe_group(cluster: LocalCluster, group: str, topic: str) -> GroupView | None:
    """The group as its coordinator describes it (DescribeGroups through the admin
    client, which finds the coordinator); None while it has no answer (moving, loading)."""
    try:
        d = admin_for(cluster).describe_consumer_groups([group], timeout_ms=DESCRIBE_GROUP_MS)[group]
    except GroupIdNotFoundError:
        return GroupView("Dead", "", {})
    except (KafkaApiError, KafkaTimeoutError):
        return None
    members = {m.client_id: Member(m.member_id, m.client_id,
                                   frozenset(tp.partition for tp in m.assignment if tp.topic == topic))
               for m in d.members}
    assert len(members) == len(d.members), f"client ids are not unique in {d.members}"
    return GroupView(d.state, d.protocol, members)


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


def _asked(call, what: str):
    try:
        return call()
    except KafkaApiError as e:
        raise ValueError(f"{what}: {e}") from e


def committed_offsets(cluster: LocalCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch, require_stable) on its coordinator:
    partition -> committed offset (-1: none)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    offsets = _asked(lambda: admin_for(cluster).list_consumer_group_offsets(
        group, tps, require_stable=True, timeout_ms=ADMIN_CALL_MS), f"OffsetFetch {group}")
    return {tp.partition: offsets[tp].offset if tp in offsets else -1 for tp in tps}


def metadata_leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """partition -> leader id (-1: none), as a live broker's metadata shows it."""
    desc = _asked(lambda: admin_for(cluster).describe_topics([topic], timeout_ms=ADMIN_CALL_MS)[topic],
                  f"metadata {topic}")
    return {p.partition: p.leader for p in desc.partitions}


def create_topic(cluster: LocalCluster, topic: str, partitions: int = 6, replication_factor: int = 3) -> None:
    """CreateTopics through the admin client, then until every partition has a live leader."""
    admin_for(cluster).create_topics([NewTopic(topic, partitions, replication_factor)],
                                     timeout_ms=30_000)
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
                 pause_at: int | None = None, hold_after_autocommit: bool = False,
                 group_protocol: str = "classic") -> None:
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
            argv += ["--group-protocol", group_protocol]
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
