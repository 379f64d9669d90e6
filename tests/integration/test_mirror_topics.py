"""Issue 21's data path between two real clusters: a mirror topic on a destination cluster
follows a 6-partition topic of a source cluster while a confluent-kafka producer writes to
the source.

One story, in order (the clusters are shared; each step needs the one before):

1. every acknowledged record lands at the same partition and offset on the destination,
   and the batches are byte-identical (read from the segment files of both leaders);
   the destination refuses a produce to the mirror with INVALID_REQUEST and says why;
2. the source partition leader of several partitions is SIGKILLed mid-mirror: no gap or
   divergence on the destination;
3. the source cluster is stopped entirely: ``/v1/mirrors`` reports the error; the mirror is
   promoted, a producer writes to the destination, and nothing acknowledged on the source
   (all of it was mirrored before the stop) is missing.

The cluster link and the mirror topic are made with raw IncrementalAlterConfigs and
CreateTopics (the link manager and the CLI are another part of issue 21).
"""
from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from integration_helpers import (
    STOP_TIMEOUT_S, alive_broker_ports, high_watermarks, partition_states, roundtrip,
    segment_batches, start_cluster, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

TOPIC = "orders"
PARTITIONS = list(range(6))
LINK = "primary"
CLUSTER_LINK = 64


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory):
    source = start_cluster(tmp_path_factory, "source", controllers=1, brokers=3)
    try:
        destination = start_cluster(tmp_path_factory, "destination", controllers=1, brokers=2)
    except BaseException:
        source.stop(timeout_s=STOP_TIMEOUT_S)
        raise
    try:
        yield source, destination
    finally:
        destination.stop(timeout_s=STOP_TIMEOUT_S)
        source.stop(timeout_s=STOP_TIMEOUT_S)


class Producer:
    """confluent-kafka, acks=all, idempotent, numbered values over all partitions at about
    ``rate`` records/s in a thread; what was acknowledged, per partition."""

    def __init__(self, bootstrap: str, rate: int = 1000) -> None:
        self.bootstrap = bootstrap
        self.rate = rate
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PARTITIONS}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(f"{msg.partition()}: {err}")
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def _run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        producer = KafkaProducer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                                  "metadata.max.age.ms": 3000})
        seq = 0
        started = time.monotonic()
        while not self._stop.is_set():
            try:
                producer.produce(TOPIC, value=b"%08d" % seq, partition=seq % len(PARTITIONS),
                                 on_delivery=self._on_delivery)
            except BufferError:
                producer.poll(0.05)
                continue
            seq += 1
            producer.poll(max(0.0, seq / self.rate - (time.monotonic() - started)))
        producer.flush(90)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive()
        assert not self.errors, self.errors[:5]


def create_topic(cluster, replication_factor: int, configs: dict[str, str]) -> None:
    R = messages.CreateTopicsRequest
    req = R(topics=[R.CreatableTopic(name=TOPIC, num_partitions=len(PARTITIONS),
                                     replication_factor=replication_factor, assignments=[],
                                     configs=[R.CreatableTopicConfig(name=k, value=v)
                                              for k, v in configs.items()])],
            timeout_ms=30000, validate_only=False)
    resp = roundtrip(alive_broker_ports(cluster)[0], ApiKey.CREATE_TOPICS, 5, req, timeout_s=40)
    assert resp.topics[0].error_code == ErrorCode.NONE, resp.topics[0]
    wait_until(lambda: all(len(s.isr) == replication_factor
                           for s in partition_states(cluster, TOPIC).values()), 30,
               f"{TOPIC} fully replicated")


def alter_configs(cluster, resource_type: int, name: str, configs: dict[str, str]) -> None:
    IAC = messages.IncrementalAlterConfigsRequest
    req = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IAC.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
    resp = roundtrip(alive_broker_ports(cluster)[0], ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req)
    assert resp.responses[0].error_code == ErrorCode.NONE, resp.responses[0]


def leaders(cluster) -> dict[int, int]:
    return {p: s.leader for p, s in partition_states(cluster, TOPIC).items()}


def caught_up(source_hw: dict[int, int], destination) -> bool:
    try:
        return high_watermarks(destination, TOPIC, PARTITIONS) == source_hw
    except ValueError:
        return False


def leader_batches(cluster, partition: int, upto: int) -> list[bytes]:
    """The raw batches below ``upto`` in the partition leader's segment files."""
    leader = leaders(cluster)[partition]
    data_dir = cluster.spec.node(leader).data_dir
    return [raw for raw, batch in segment_batches(data_dir, TOPIC, partition)
            if batch.header.base_offset < upto]


def mirrors_route(cluster) -> list[dict]:
    rows = []
    for b in cluster.spec.brokers:
        with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/v1/mirrors", timeout=5) as r:
            rows.extend(json.load(r)["mirrors"])
    return rows


def test_mirror_follows_through_a_source_leader_kill_and_is_promoted_after_the_source_stops(
        clusters) -> None:
    source, destination = clusters
    create_topic(source, 3, {"min.insync.replicas": "2"})
    alter_configs(destination, CLUSTER_LINK, LINK,
                  {"bootstrap.servers": source.spec.bootstrap_servers, "metadata.max.age.ms": "1000"})
    create_topic(destination, 2, {"ketch.mirror.link": LINK})
    producer = Producer(source.spec.bootstrap_servers)
    try:
        wait_until(lambda: producer.count() >= 1500 or producer.errors, 60, "records acknowledged")
        # 2. SIGKILL the broker leading partition 0 (and whatever else it leads) mid-mirror.
        victim = leaders(source)[0]
        source.kill_node(victim)
        wait_until(lambda: all(l not in (victim, -1) for l in leaders(source).values()), 30,
                   f"leadership moved off broker {victim}")
        before = producer.count()
        wait_until(lambda: producer.count() >= before + 1500 or producer.errors, 60,
                   "records acknowledged after the kill")
    finally:
        producer.stop()
    source_hw = high_watermarks(source, TOPIC, PARTITIONS)
    assert sum(source_hw.values()) == producer.count()
    wait_until(lambda: caught_up(source_hw, destination), 60, "the mirror caught up")

    # 1. Same offsets, byte-identical batches (leader epochs, producer ids, timestamps kept).
    for p in PARTITIONS:
        src = leader_batches(source, p, source_hw[p])
        dst = leader_batches(destination, p, source_hw[p])
        assert dst == src, f"partition {p}: {len(dst)} batches here, {len(src)} at the source"
    rows = mirrors_route(destination)
    assert sorted((r["topic"], r["partition"], r["state"], r["lag"]) for r in rows) == [
        (TOPIC, p, "fetching", 0) for p in PARTITIONS]

    from confluent_kafka import Consumer, Producer as KafkaProducer, TopicPartition as CTP
    refused: list = []
    writer = KafkaProducer({"bootstrap.servers": destination.spec.bootstrap_servers,
                            "message.timeout.ms": 10000, "retries": 0})
    writer.produce(TOPIC, value=b"not allowed", partition=0,
                   on_delivery=lambda err, msg: refused.append(err))
    writer.flush(15)
    assert refused and refused[0] is not None and refused[0].name() == "INVALID_REQUEST", refused

    # 3. The source stops entirely; the mirror reports it, is promoted and takes writes.
    source.stop(timeout_s=STOP_TIMEOUT_S)
    wait_until(lambda: all(r["state"] == "awaiting_source" and r["last_error"]
                           for r in mirrors_route(destination)), 30, "the mirrors report the source gone")
    alter_configs(destination, 2, TOPIC, {"ketch.mirror.state": "promoted"})
    wait_until(lambda: mirrors_route(destination) == [], 30, "the mirror fetchers stopped")
    delivered: list = []
    writer = KafkaProducer({"bootstrap.servers": destination.spec.bootstrap_servers, "acks": "all",
                            "enable.idempotence": True, "message.timeout.ms": 30000})
    for p in PARTITIONS:
        writer.produce(TOPIC, value=b"after promote %d" % p, partition=p,
                       on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    writer.flush(40)
    assert sorted((err, p, off) for err, p, off in delivered) == [
        (None, p, source_hw[p]) for p in PARTITIONS]

    consumer = Consumer({"bootstrap.servers": destination.spec.bootstrap_servers,
                         "group.id": "mirror-check", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([CTP(TOPIC, p, 0) for p in PARTITIONS])
    seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PARTITIONS}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(len(seen[p]) < source_hw[p] + 1 for p in PARTITIONS):
        for m in consumer.consume(500, 1.0):
            assert m.error() is None, m.error()
            seen[m.partition()].append((m.offset(), m.value()))
    consumer.close()
    for p in PARTITIONS:
        assert seen[p][:source_hw[p]] == sorted(producer.acked[p]), f"partition {p}"
        assert seen[p][source_hw[p]:] == [(source_hw[p], b"after promote %d" % p)]
