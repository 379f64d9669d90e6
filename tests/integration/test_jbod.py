"""Brokers with two log directories each (JBOD), under a live acks=all producer: a
replica moved between directories with AlterReplicaLogDirs, and a directory that fails.

One controller and three brokers, RF 3. Every record the producer was told is written
must be readable afterwards at its offset (test_faults' checker). A failed directory is
simulated by renaming it away (the broker runs as root here, so chmod 000 would not stop
it): open files still take writes, and the next file the broker creates there (a
checkpoint, every ``log.flush.offset.checkpoint.interval.ms``) fails, which takes the
directory offline; the broker then shuts down in a controlled way (the interim before
KIP-858, broker.broker step 7) and leadership moves to the other replicas.
"""
from __future__ import annotations

import os

import pytest
from kafka.admin import KafkaAdminClient

from clients.cli.launcher import broker_log_dirs
from clients.errors import KafkaApiError
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition, TopicPartitionReplica
from integration_helpers import STOP_TIMEOUT_S, admin_for, partition_states, start_cluster, wait_until
from test_faults import BackgroundProducer, check_every_acked_record, create_topic

pytestmark = [pytest.mark.process, pytest.mark.interop]


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-jbod", controllers=1, brokers=3, broker_log_dirs=2,
                      broker_props={"log.flush.offset.checkpoint.interval.ms": "300",
                                    # small segments: the move copies several files
                                    "log.segment.bytes": str(256 * 1024)})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def dirs_of(cluster, broker_id: int) -> list[str]:
    return broker_log_dirs(cluster.spec.node(broker_id), 2)


def test_every_log_dir_is_formatted_and_described(jbod) -> None:
    for b in jbod.spec.brokers:
        ids = set()
        for d in dirs_of(jbod, b.id):
            with open(os.path.join(d, "meta.properties")) as f:
                meta = dict(line.strip().split("=", 1) for line in f if "=" in line)
            assert meta["node.id"] == str(b.id) and meta["cluster.id"] == jbod.spec.cluster_id
            ids.add(meta["directory.id"])
        assert len(ids) == 2 and all(len(i) == 22 for i in ids)     # Kafka's Uuid text form


def test_a_replica_moves_between_log_dirs_while_producing(jbod) -> None:
    admin = admin_for(jbod)
    topic = create_topic(jbod, 1)
    tp = TopicPartition(topic, 0)
    leader = partition_states(jbod, topic)[0].leader
    follower = next(b.id for b in jbod.spec.brokers if b.id != leader)
    replicas = [TopicPartitionReplica(topic, 0, b) for b in (leader, follower)]
    with BackgroundProducer(jbod.spec.bootstrap_servers, topic, [0], rate=3000) as producer:
        producer.wait_acked(0, 3000)
        before = admin.describe_replica_log_dirs(replicas)
        targets = {}
        for r in replicas:
            current = before[r].current_replica_log_dir
            assert current in dirs_of(jbod, r.broker_id) and before[r].future_replica_log_dir is None
            targets[r] = next(d for d in dirs_of(jbod, r.broker_id) if d != current)
        # Errors as Kafka: a directory the broker does not have, a replica it does not host.
        with pytest.raises(KafkaApiError) as bad:
            admin.alter_replica_log_dirs({replicas[0]: "/nonexistent/dir"})
        assert bad.value.error_code == ErrorCode.LOG_DIR_NOT_FOUND
        with pytest.raises(KafkaApiError) as missing:
            admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 5, leader): targets[replicas[0]]})
        assert missing.value.error_code == ErrorCode.REPLICA_NOT_AVAILABLE
        # The leader's replica moves with Ketch's admin client, the follower's with
        # kafka-python's (the wire format as another client writes and reads it).
        admin.alter_replica_log_dirs({replicas[0]: targets[replicas[0]]})
        other = KafkaAdminClient(bootstrap_servers=jbod.spec.bootstrap_servers, request_timeout_ms=30000)
        try:
            answer = other.alter_replica_log_dirs({replicas[1]: targets[replicas[1]]})
            assert [e.errno for e in answer.values()] == [ErrorCode.NONE], answer
            described = other.describe_log_dirs(topic_partitions={topic: [0]}, brokers=[follower])
        finally:
            other.close()
        assert sorted(str(described).count(d) > 0 for d in dirs_of(jbod, follower)) == [True, True]
        wait_until(lambda: all((i.current_replica_log_dir, i.future_replica_log_dir) == (targets[r], None)
                               for r, i in admin.describe_replica_log_dirs(replicas).items()),
                   60, "both replicas in their new log dirs")
        moved_at = producer.acked_count(0)
        producer.wait_acked(0, moved_at + 2000)     # the moved leader log keeps taking writes
    check_every_acked_record(jbod, producer)
    for r in replicas:
        old = next(d for d in dirs_of(jbod, r.broker_id) if d != targets[r])
        # (retired as <topic>-0.<id>-delete, removed a file a poll)
        wait_until(lambda: not [n for n in os.listdir(old) if n.startswith(f"{topic}-0")], 10,
                   f"the old log of {r} removed")
    assert admin.describe_log_dirs([tp])[tp].log_dir == targets[replicas[0]]


def test_a_failed_log_dir_moves_leadership_away_and_loses_nothing(jbod) -> None:
    topic = create_topic(jbod, 1)
    leader = partition_states(jbod, topic)[0].leader
    info = admin_for(jbod).describe_replica_log_dirs([TopicPartitionReplica(topic, 0, leader)])
    failing = next(iter(info.values())).current_replica_log_dir
    assert failing is not None
    with BackgroundProducer(jbod.spec.bootstrap_servers, topic, [0], rate=2000) as producer:
        producer.wait_acked(0, 2000)
        os.rename(failing, failing + ".failed")
        try:
            process = jbod.processes[leader]
            # The broker notices at its next checkpoint and stops in a controlled way.
            assert process.wait(timeout=60) == 1, "a failed log dir stops the broker with exit 1"
            new_leader = wait_until(lambda: (s := partition_states(jbod, topic)) and s[0].leader > 0
                                    and s[0].leader != leader and s[0].leader, 30,
                                    "leadership on another replica")
            assert new_leader != leader
            acked = producer.acked_count(0)
            producer.wait_acked(0, acked + 2000)    # served by the other replicas
        finally:
            os.rename(failing + ".failed", failing)
    check_every_acked_record(jbod, producer)
    with open(jbod.spec.node(leader).log) as f:
        text = f.read()
    assert f"log directory {failing} is offline" in text and "Traceback" not in text
    # Repaired (renamed back), the broker starts again and its replica catches up.
    jbod.start_node(leader)
    wait_until(lambda: (s := partition_states(jbod, topic)) and leader in s[0].isr, 60,
               f"broker {leader} back in the ISR of {topic}-0")


def test_ketch_log_dirs_describes_and_moves(jbod, tmp_path) -> None:
    import json
    import subprocess
    import sys

    def ketch(*args: str, rc: int = 0, verb: str = "log-dirs") -> str:
        proc = subprocess.run([sys.executable, "-m", "clients.cli", verb, *args,
                               "--bootstrap", jbod.spec.bootstrap_servers],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == rc, proc.stderr
        return proc.stdout

    topic = create_topic(jbod, 1)
    broker = partition_states(jbod, topic)[0].leader

    def where() -> dict[str, list[str]]:
        """Log dir -> the topic's logs there, as `ketch log-dirs describe` prints them."""
        view = json.loads(ketch("describe", "--broker-list", str(broker), "--topic-list", topic,
                                "--output", "json"))
        [entry] = view["brokers"]
        assert entry["broker"] == broker and all(d["error"] is None for d in entry["logDirs"])
        return {d["logDir"]: [p["partition"] for p in d["partitions"]] for d in entry["logDirs"]}

    before = where()
    assert sorted(before) == sorted(dirs_of(jbod, broker))
    assert sorted(before.values()) == [[], [f"{topic}-0"]]
    target = next(d for d, logs in before.items() if not logs)
    ketch("alter", "--topic", topic, "--partition", "0", "--broker", str(broker), "--log-dir", target)
    source = next(d for d in before if d != target)
    # (a future log in the target is listed too, until the swap leaves the source empty)
    wait_until(lambda: where() == {target: [f"{topic}-0"], source: []}, 30, "the log in its new dir")
    out = ketch("alter", "--topic", topic, "--partition", "0", "--broker", str(broker),
                "--log-dir", "/not/a/log/dir", rc=1)
    assert "LOG_DIR_NOT_FOUND" in out
    # kafka-reassign-partitions' way: a plan whose log_dirs names a directory moves it back.
    replicas = partition_states(jbod, topic)[0].replicas
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{
        "topic": topic, "partition": 0, "replicas": list(replicas),
        "log_dirs": [source if b == broker else "any" for b in replicas]}]}))
    ketch("execute", "--reassignment-json-file", str(plan), verb="reassign")
    wait_until(lambda: "to its log dir is completed" in ketch(
        "verify", "--reassignment-json-file", str(plan), verb="reassign"), 30, "the plan's log dir move")
    assert where() == {target: [], source: [f"{topic}-0"]}
