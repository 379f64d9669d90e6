"""``ketch quorum``, ``ketch leader-election`` and ``ketch reassign`` as a user runs them:
subprocesses against one real cluster (3 controllers, 3 brokers), output read through
``--output json`` and checked against the cluster itself (raw DescribeQuorum to the
controllers, Ketch's admin client, real Kafka clients for the data).

The controller calls go straight to the controllers (``--dir`` of the cluster gives the
CLI their addresses, as ``--bootstrap-controller`` does): brokers do not forward
ElectLeaders and the reassignment APIs yet. ``ketch quorum status`` is also run through
a broker (``--bootstrap``), which forwards DescribeQuorum.

The cluster runs with ``auto.leader.rebalance.enable=false`` so that leadership stays
where a restart left it until the test elects (the automatic election after a restart is
covered by the controller's unit tests).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CKTopicPartition

from clients.admin import NewTopic
from clients._core.admin import ConfigResource
from clients.protocol import ApiKey, messages
from tests.integration.integration_helpers import (
    STOP_TIMEOUT_S, admin_for, roundtrip, start_cluster, wait_until,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "cli-admin",
                      controller_props={"auto.leader.rebalance.enable": "false"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def ketch(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "clients.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": ROOT})
    if check:
        assert proc.returncode == 0, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def ketch_json(*args: str) -> Any:
    return json.loads(ketch(*args, "--output", "json").stdout)


def describe_quorum_raw(port: int) -> Any:
    D = messages.DescribeQuorumRequest
    resp = roundtrip(port, ApiKey.DESCRIBE_QUORUM, 2, D(topics=[D.TopicData(
        topic_name="__cluster_metadata", partitions=[D.PartitionData(partition_index=0)])]))
    return resp.topics[0].partitions[0]


def partition(cluster, topic: str, index: int):
    return admin_for(cluster).describe_topics([topic])[topic].partitions[index]


# ---------------------------------------------------------------- bad input first: nothing changes

def test_bad_plans_and_arguments_print_one_line_and_change_nothing(cluster, tmp_path) -> None:
    admin_for(cluster).create_topics([NewTopic("bad", replica_assignments={0: [1, 2]})])
    before = partition(cluster, "bad", 0)
    cases = {
        "dup.json": '{"version":1,"partitions":[{"topic":"bad","partition":0,"replicas":[2,2]}]}',
        "nobroker.json": '{"version":1,"partitions":[{"topic":"bad","partition":0,"replicas":[2,9]}]}',
        "nopart.json": '{"version":1,"partitions":[{"topic":"bad","partition":5,"replicas":[2,3]}]}',
        "notjson.json": '{"version":1,"partitions":[',
    }
    for name, text in cases.items():
        plan = tmp_path / name
        plan.write_text(text)
        proc = ketch("reassign", "execute", "--reassignment-json-file", str(plan),
                     "--throttle", "1000", "--dir", cluster.dir, check=False)
        assert proc.returncode == 1, (name, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout == ""
    proc = ketch("leader-election", "--preferred", "--dir", cluster.dir, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    proc = ketch("quorum", "status", "--bootstrap", "127.0.0.1:1",
                 "-X", "default.api.timeout.ms=2000", check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert partition(cluster, "bad", 0) == before
    topic_configs = admin_for(cluster).describe_configs([ConfigResource.topic("bad")])
    (entries,) = topic_configs.values()
    assert entries["leader.replication.throttled.replicas"].value in ("", None)


# ---------------------------------------------------------------- quorum

def test_quorum_status_and_replication_tell_the_quorum_as_describe_quorum_does(cluster) -> None:
    status = ketch_json("quorum", "status", "--dir", cluster.dir)
    via_broker = ketch_json("quorum", "status", "--bootstrap", cluster.spec.bootstrap_servers)
    controllers = {c.id: c.port for c in cluster.spec.controllers}
    raw = describe_quorum_raw(controllers[status["leader_id"]])
    assert status["leader_id"] == raw.leader_id == via_broker["leader_id"]
    assert status["leader_epoch"] == raw.leader_epoch
    assert status["current_voters"] == sorted(controllers)
    assert set(status["current_observers"]) == {b.id for b in cluster.spec.brokers}
    assert status["cluster_id"] == cluster.spec.cluster_id
    rows = ketch_json("quorum", "replication", "--dir", cluster.dir)
    assert [r["status"] for r in rows].count("Leader") == 1
    assert {r["node_id"] for r in rows if r["status"] != "Observer"} == set(controllers)
    # Every member's position is known to the leader: a log end offset, a fetch time.
    for r in rows:
        assert r["log_end_offset"] >= 0 and r["last_fetch_timestamp"] > 0, r
        assert r["lag"] is not None and r["lag"] >= 0, r


def test_quorum_status_follows_a_controller_kill(cluster) -> None:
    old = ketch_json("quorum", "status", "--dir", cluster.dir)["leader_id"]
    cluster.kill_node(old)
    try:
        def new_leader() -> int | None:
            s = ketch_json("quorum", "status", "--dir", cluster.dir, "-X", "default.api.timeout.ms=5000")
            return s["leader_id"] if s["leader_id"] not in (old, -1) else None
        leader = wait_until(new_leader, 60, "a new quorum leader named by ketch quorum status")
        ports = {c.id: c.port for c in cluster.spec.controllers}
        assert describe_quorum_raw(ports[leader]).leader_id == leader
        via_broker = ketch_json("quorum", "status", "--bootstrap", cluster.spec.bootstrap_servers)
        assert via_broker["leader_id"] == leader
        rows = {r["node_id"]: r for r in ketch_json("quorum", "replication", "--dir", cluster.dir)}
        assert rows[old]["status"] == "Follower"
    finally:
        cluster.start_node(old)
    # Back: the leader sees the restarted voter catch up.
    def caught_up() -> bool:
        rows = {r["node_id"]: r for r in ketch_json("quorum", "replication", "--dir", cluster.dir)}
        return rows[old]["lag"] == 0 and rows[old]["last_caught_up_timestamp"] > 0
    wait_until(caught_up, 60, f"controller {old} caught up again")


# ---------------------------------------------------------------- leader election

def test_a_preferred_election_moves_leadership_back(cluster) -> None:
    admin = admin_for(cluster)
    admin.create_topics([NewTopic("pe", replica_assignments={0: [1, 2], 1: [2, 1]})])
    wait_until(lambda: partition(cluster, "pe", 0).isr == (1, 2), 30, "pe-0 fully in sync")
    cluster.stop_node(1)                        # controlled shutdown: 2 takes over pe-0
    try:
        wait_until(lambda: partition(cluster, "pe", 0).leader == 2, 30, "pe-0 led by 2")
    finally:
        cluster.start_node(1)
    wait_until(lambda: 1 in partition(cluster, "pe", 0).isr, 60, "broker 1 back in pe-0's ISR")
    assert partition(cluster, "pe", 0).leader == 2     # auto rebalance is off here
    out = ketch_json("leader-election", "--preferred", "--topic", "pe", "--partition", "0",
                     "--partition", "1", "--dir", cluster.dir)
    assert out["elected"] == [{"topic": "pe", "partition": 0}]
    assert out["not_needed"] == [{"topic": "pe", "partition": 1}] and out["failed"] == []
    wait_until(lambda: partition(cluster, "pe", 0).leader == 1, 30, "pe-0 led by 1 again")
    # --all: whatever else broker 1's restart moved ("bad"-0) goes back too, then nothing is left.
    every = ketch_json("leader-election", "--preferred", "--all", "--dir", cluster.dir)
    assert {"topic": "pe", "partition": 0} not in every["elected"] and every["failed"] == []
    for name, d in admin.describe_topics(["pe", "bad"]).items():
        for p in d.partitions:
            wait_until(lambda: partition(cluster, name, p.partition).leader == p.replicas[0], 30,
                       f"{name}-{p.partition} led by its preferred replica")
    again = ketch_json("leader-election", "--preferred", "--all", "--dir", cluster.dir)
    assert again == {"election_type": "preferred", "elected": [], "not_needed": [], "failed": []}
    proc = ketch("leader-election", "--unclean", "--topic", "pe", "--partition", "0",
                 "--dir", cluster.dir)
    assert "Valid replica already elected" in proc.stdout


# ---------------------------------------------------------------- reassignment

def test_a_reassignment_from_1_2_to_2_3_completes_with_all_the_data(cluster, tmp_path) -> None:
    admin = admin_for(cluster)
    admin.create_topics([NewTopic("rs", replica_assignments={0: [1, 2]})])
    count = 3000
    producer = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})
    for i in range(count):
        producer.produce("rs", value=f"value-{i}".encode(), key=str(i).encode(), partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    moves = tmp_path / "move.json"
    moves.write_text('{"version": 1, "topics": [{"topic": "rs"}]}')
    generated = ketch_json("reassign", "generate", "--topics-to-move-json-file", str(moves),
                           "--broker-list", "2,3", "--seed", "7", "--dir", cluster.dir)
    assert generated["current"]["partitions"][0]["replicas"] == [1, 2]
    assert set(generated["proposed"]["partitions"][0]["replicas"]) == {2, 3}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "rs", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}))
    # A producer keeps writing (acks=all, idempotent) while the replicas move: the leader
    # epoch changes twice under it; every acknowledged record must survive, once, in order.
    acked: list[str] = []
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append(msg.value().decode())

    def keep_producing() -> None:
        i = count
        while not stop.is_set():
            producer.produce("rs", value=f"value-{i}".encode(), partition=0, on_delivery=on_delivery)
            producer.poll(0.002)
            i += 1
        producer.flush(30)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    started = ketch_json("reassign", "execute", "--reassignment-json-file", str(plan),
                         "--throttle", "50000000", "--dir", cluster.dir)
    assert started["current"]["partitions"][0]["replicas"] == [1, 2]
    assert started["throttle"]["brokers"] == [1, 2, 3]
    assert started["throttle"]["topics"]["rs"] == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3"}

    def verified() -> Any:
        out = ketch_json("reassign", "verify", "--reassignment-json-file", str(plan), "--dir", cluster.dir)
        assert out["partitions"][0]["state"] in ("complete", "in_progress"), out
        return out if out["complete"] else None
    done = wait_until(verified, 60, "the reassignment of rs-0 to complete")
    stop.set()
    writer.join(60)
    assert not writer.is_alive() and len(acked) > 0
    assert done["throttle_cleared"]["topics"] == ["rs"]
    p = partition(cluster, "rs", 0)
    assert p.replicas == (2, 3) and set(p.isr) == {2, 3} and p.leader in (2, 3)
    (entries,) = admin.describe_configs([ConfigResource.topic("rs")]).values()
    assert entries["leader.replication.throttled.replicas"].value in ("", None)
    (broker_entries,) = admin.describe_configs([ConfigResource.broker(2)]).values()
    assert broker_entries["leader.replication.throttled.rate"].source.name != "DYNAMIC_BROKER_CONFIG"

    # All the data is there, on the new replicas, read by a real Kafka client.
    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "rs-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([CKTopicPartition("rs", 0, 0)])
        values = []
        expected = [f"value-{i}" for i in range(count)] + acked
        deadline_polls = 600
        while len(values) < len(expected) and deadline_polls:
            deadline_polls -= 1
            for m in consumer.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                values.append(m.value().decode())
        # Acked records are all there, once, in order (an unacked one may be there too).
        assert values[:count] == expected[:count]
        later = values[count:]
        assert len(later) == len(set(later))
        positions = [later.index(v) for v in acked]
        assert positions == sorted(positions)
    finally:
        consumer.close()
    # Broker 1 is no longer a replica: its copy is gone.
    wait_until(lambda: not os.path.exists(os.path.join(cluster.spec.node(1).data_dir, "data", "rs-0"))
               and not os.path.exists(os.path.join(cluster.spec.node(1).data_dir, "rs-0")),
               30, "broker 1 to delete rs-0")
    assert ketch_json("reassign", "cancel", "--reassignment-json-file", str(plan),
                      "--dir", cluster.dir) == {"cancelled": []}
