"""Brokers failing under a live producer: SIGKILL, SIGTERM (controlled shutdown), SIGSTOP.

A confluent-kafka producer (acks=all, idempotent, retrying) writes numbered records in a
background thread; whatever happens to the brokers, every record it was told is written
must be readable at the offset it was told, each exactly once and in order, and replicas
that come back must hold the same batches, byte for byte, as the leader below the high
watermark (read from the segment files in each broker's data directory).

Two clusters: the module's ``cluster`` fences a silent broker after 2.5 s (for SIGKILL),
and ``slow_fencing`` keeps a silent or vanished broker registered for 60 s, so that what moves
leadership or shrinks the ISR there can only be a controlled shutdown or the leader's
``replica.lag.time.max.ms`` check (3 s), not the controller's session timeout.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from integration_helpers import STOP_TIMEOUT_S, start_cluster
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from integration_helpers import (
    high_watermarks, partition_states, roundtrip, segment_batches, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

SLOW_SESSION_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def slow_fencing(tmp_path_factory: pytest.TempPathFactory):
    # Fencing on a closed heartbeat connection (test_crash_detection.py) is off here: a
    # vanished broker must keep its registration for the whole session.
    c = start_cluster(tmp_path_factory, "ketch-slow",
                      controller_props={"broker.session.timeout.ms": str(SLOW_SESSION_TIMEOUT_MS),
                                        "ketch.broker.disconnect.fence.ms": "-1"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


# ---------------------------------------------------------------- helpers


class BackgroundProducer:
    """confluent-kafka, acks=all, idempotent: numbered values round-robin over partitions,
    about ``rate`` records/s, until stopped. Delivery reports are kept per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], rate: int = 1500) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
        self.errors: list[str] = []
        self.produced = 0
        self.unflushed = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)

    def __enter__(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_delivery(self, err, msg) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(f"{msg.partition()}: {err}")
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                             "retry.backoff.ms": 50, "metadata.max.age.ms": 5000})
        seq = 0
        started = time.monotonic()
        while not self._stop.is_set():
            p = self.partitions[seq % len(self.partitions)]
            try:
                producer.produce(self.topic, key=str(p).encode(), value=b"%08d" % seq, partition=p,
                                 on_delivery=self._on_delivery)
            except BufferError:
                producer.poll(0.05)
                continue
            seq += 1
            self.produced = seq
            ahead = seq / self.rate - (time.monotonic() - started)
            producer.poll(max(0.0, ahead))
        self.unflushed = producer.flush(90)

    def acked_count(self, partition: int) -> int:
        with self._lock:
            return len(self.acked[partition])

    def wait_acked(self, partition: int, count: int, timeout_s: float = 60) -> None:
        wait_until(lambda: self.acked_count(partition) >= count or self.errors, timeout_s,
                   f"{count} acknowledged records on {self.topic}-{partition}")
        assert not self.errors, self.errors[:5]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the producer thread did not finish"


def create_topic(cluster, partitions: int, configs: dict[str, str] | None = None,
                 assignment: dict[int, list[int]] | None = None) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"faults-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    if assignment:
        new = NewTopic(topic, replica_assignments=assignment, topic_configs=configs or {})
    else:
        new = NewTopic(topic, num_partitions=partitions, replication_factor=3, topic_configs=configs or {})
    try:
        resp = admin.create_topics([new])
        assert [(t["name"], t["error_code"]) for t in resp["topics"]] == [(topic, 0)], resp
    finally:
        admin.close()
    wait_for_full_isr(cluster, topic, partitions)
    return topic


def wait_for_full_isr(cluster, topic: str, partitions: int, timeout_s: float = 60) -> dict:
    return wait_until(lambda: (s := partition_states(cluster, topic)) and len(s) == partitions and
                      all(len(p.isr) == 3 and p.leader > 0 for p in s.values()) and s,
                      timeout_s, f"every replica of {topic} in the ISR")


def read_partitions(cluster, topic: str, partitions: list[int]) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every record below each partition's high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    hws = high_watermarks(cluster, topic, partitions)
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.max.bytes": 4 << 20})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions if hws[p] > 0])
        deadline = time.monotonic() + 60
        while any(len(out[p]) < hws[p] for p in partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                assert msg.error() is None, msg.error()
                if msg.offset() < hws[msg.partition()]:
                    out[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    for p in partitions:
        assert [o for o, _ in out[p]] == list(range(hws[p])), f"{topic}-{p}: offsets read are not 0..{hws[p]}"
    return out


def check_every_acked_record(cluster, producer: BackgroundProducer) -> None:
    """Each acknowledged record at the offset its producer was told, nothing lost, nothing
    twice (idempotence across leader changes), per-partition order kept."""
    assert not producer.errors, producer.errors[:5]
    assert producer.unflushed == 0
    assert sum(len(v) for v in producer.acked.values()) == producer.produced
    log = read_partitions(cluster, producer.topic, producer.partitions)
    for p in producer.partitions:
        by_offset = dict(log[p])
        for offset, value in producer.acked[p]:
            assert by_offset.get(offset) == value, \
                f"{producer.topic}-{p}@{offset}: acknowledged {value!r}, read {by_offset.get(offset)!r}"
        acked_values = [v for _, v in sorted(producer.acked[p])]
        assert [v for _, v in log[p]] == acked_values, f"{producer.topic}-{p}: the log holds other records"
        assert acked_values == sorted(acked_values), f"{producer.topic}-{p}: out of produce order"


def log_end_on_disk(cluster, broker_id: int, topic: str, partition: int) -> int:
    batches = segment_batches(cluster.spec.node(broker_id).data_dir, topic, partition)
    return batches[-1][1].header.next_offset if batches else 0


def check_replicas_match(cluster, topic: str, partitions: list[int], broker_ids: list[int]) -> None:
    """Once writes stopped and every replica is in the ISR: the high watermark is the
    leader's log end, and every replica holds exactly the leader's batches below it (the
    same bytes, so the same offsets, leader epochs, records and CRCs), and nothing above."""
    states = partition_states(cluster, topic)
    for p in partitions:
        leader = states[p].leader
        hw = wait_until(lambda: (h := high_watermarks(cluster, topic, [p])[p]) ==
                        log_end_on_disk(cluster, leader, topic, p) and h + 1,
                        30, f"{topic}-{p}: HW at the leader's log end") - 1
        reference = [raw for raw, _ in segment_batches(cluster.spec.node(leader).data_dir, topic, p)]
        for b in broker_ids:
            # A follower may be one fetch behind the leader's HW when this starts.
            wait_until(lambda: log_end_on_disk(cluster, b, topic, p) >= hw, 30,
                       f"broker {b}'s copy of {topic}-{p} to reach the HW {hw}")
            batches = segment_batches(cluster.spec.node(b).data_dir, topic, p)
            below = [raw for raw, batch in batches if batch.header.last_offset < hw]
            above = [batch.header.base_offset for _, batch in batches if batch.header.last_offset >= hw]
            assert below == reference, f"broker {b}'s {topic}-{p} differs from leader {leader}'s below HW {hw}"
            assert above == [], f"broker {b}'s {topic}-{p} has batches at {above} beyond the HW {hw}"
        if hw:
            offsets = [batch.header.base_offset for _, batch in
                       segment_batches(cluster.spec.node(leader).data_dir, topic, p)]
            assert offsets[0] == 0


def _produce_raw(port: int, topic: str, value: bytes, acks: int, producer_id: int = -1,
                 producer_epoch: int = -1, sequence: int = -1, count: int = 1) -> tuple[int, int]:
    """One Produce of ``count`` records to partition 0: (error code, base offset)."""
    now = int(time.time() * 1000)
    batch = build_batch([Record(i, now, None, value + b"-%d" % i) for i in range(count)],
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=sequence)
    resp = roundtrip(port, ApiKey.PRODUCE, 9, messages.ProduceRequest(
        acks=acks, timeout_ms=10000, topic_data=[messages.ProduceRequest.TopicProduceData(
            name=topic, partition_data=[messages.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def leaders_of(states: dict, broker_id: int) -> list[int]:
    return sorted(p for p, s in states.items() if s.leader == broker_id)


# ---------------------------------------------------------------- SIGKILL


def test_sigkill_of_a_leader_loses_no_acknowledged_record(cluster) -> None:
    partitions = [0, 1, 2]
    topic = create_topic(cluster, len(partitions), {"min.insync.replicas": "2"})
    states = partition_states(cluster, topic)
    victim = states[0].leader
    isr_before = states[0].isr
    with BackgroundProducer(cluster.spec.bootstrap_servers, topic, partitions) as producer:
        producer.wait_acked(0, 300)
        cluster.kill_node(victim)
        acked_at_kill = producer.acked_count(0)
        after = wait_until(lambda: (s := partition_states(cluster, topic)) and
                           s[0].leader not in (victim, -1) and s, 30, f"a new leader for {topic}-0")
        assert after[0].leader in isr_before, (after[0], isr_before)
        assert after[0].leader_epoch > states[0].leader_epoch
        producer.wait_acked(0, acked_at_kill + 300)     # the producer carries on
    check_every_acked_record(cluster, producer)

    # The old leader comes back, truncates whatever it had beyond what the new leader
    # kept, catches up and rejoins the ISR.
    cluster.start_node(victim)
    wait_for_full_isr(cluster, topic, len(partitions))
    check_replicas_match(cluster, topic, partitions, [b.id for b in cluster.spec.brokers])


def test_idempotent_producer_state_survives_a_leader_failover(cluster) -> None:
    """The new leader knows the last batches of a producer from replication: a retry of
    a batch the old leader appended is acknowledged at its first offset, not appended
    again, and the producer's next sequence follows on."""
    topic = create_topic(cluster, 1, {"min.insync.replicas": "2"})
    states = partition_states(cluster, topic)
    old_leader = states[0].leader
    port = cluster.spec.node(old_leader).port
    init = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    offsets = [_produce_raw(port, topic, b"batch%d" % i, -1, pid, epoch, 4 * i, count=4) for i in range(8)]
    assert offsets == [(0, 4 * i) for i in range(8)]
    cluster.kill_node(old_leader)
    try:
        after = wait_until(lambda: (s := partition_states(cluster, topic)) and
                           s[0].leader not in (old_leader, -1) and s, 30, f"a new leader for {topic}-0")
        new_port = cluster.spec.node(after[0].leader).port
        # The last five batches are remembered; the retry of each gets its first offset.
        for i in range(3, 8):
            assert _produce_raw(new_port, topic, b"batch%d" % i, -1, pid, epoch, 4 * i, count=4) == (0, 4 * i), i
        assert _produce_raw(new_port, topic, b"next", -1, pid, epoch, 32, count=1) == (0, 32)
        assert _produce_raw(new_port, topic, b"gap", -1, pid, epoch, 40, count=1)[0] == \
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert high_watermarks(cluster, topic, [0]) == {0: 33}
    finally:
        cluster.start_node(old_leader)
    wait_for_full_isr(cluster, topic, 1)
    check_replicas_match(cluster, topic, [0], [b.id for b in cluster.spec.brokers])


# ---------------------------------------------------------------- SIGTERM


def test_sigterm_moves_leadership_first_and_no_write_fails(slow_fencing) -> None:
    cluster = slow_fencing
    partitions = list(range(6))
    topic = create_topic(cluster, len(partitions), {"min.insync.replicas": "2"})
    states = partition_states(cluster, topic)
    victim = states[0].leader
    assert leaders_of(states, victim)
    proc = cluster.processes[victim]
    with BackgroundProducer(cluster.spec.bootstrap_servers, topic, partitions) as producer:
        for p in partitions:
            producer.wait_acked(p, 100)
        cluster.signal_node(victim, signal.SIGTERM)
        # A broker that just vanished keeps its leaderships until its 60 s session expires;
        # only a controlled shutdown hands them over this soon.
        moved = wait_until(
            lambda: (s := partition_states(cluster, topic, port=_other_port(cluster, victim))) and
            not leaders_of(s, victim) and all(x.leader > 0 for x in s.values()) and s,
            SLOW_SESSION_TIMEOUT_MS / 4000, f"broker {victim}'s leaderships to move")
        for p in leaders_of(states, victim):
            assert moved[p].leader in states[p].isr and moved[p].leader_epoch > states[p].leader_epoch
        counts = [producer.acked_count(p) for p in partitions]
        for p in partitions:
            producer.wait_acked(p, counts[p] + 100)
    # The process ends on its own (its clean exit is test_sigterm_stops_a_broker_cleanly's
    # business); stop_node only reaps it, escalating if it hangs.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(STOP_TIMEOUT_S)
    cluster.stop_node(victim, timeout_s=1)
    check_every_acked_record(cluster, producer)

    cluster.start_node(victim)
    wait_for_full_isr(cluster, topic, len(partitions))
    check_replicas_match(cluster, topic, partitions, [b.id for b in cluster.spec.brokers])


def _other_port(cluster, broker_id: int) -> int:
    return next(b.port for b in cluster.spec.brokers if b.id != broker_id)


def test_sigterm_stops_a_broker_cleanly(slow_fencing) -> None:
    """SIGTERM ends the process with status 0 by itself (a Python 3.11 wait_for that
    swallowed a cancel once kept brokers alive after their controlled shutdown, until
    LocalCluster escalated to SIGKILL)."""
    cluster = slow_fencing
    victim = cluster.spec.brokers[-1].id
    proc = cluster.processes[victim]
    cluster.signal_node(victim, signal.SIGTERM)
    try:
        code = proc.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        cluster.stop_node(victim, timeout_s=1)
        cluster.start_node(victim)
        cluster.wait_until_ready(60)
    assert code == 0, f"broker {victim} still running 15 s after SIGTERM"


# ---------------------------------------------------------------- SIGSTOP


def test_paused_follower_leaves_the_isr_and_rejoins(slow_fencing) -> None:
    cluster = slow_fencing
    topic = create_topic(cluster, 1, {"min.insync.replicas": "2"})
    states = partition_states(cluster, topic)
    follower = next(r for r in states[0].replicas if r != states[0].leader)
    # The same replicas, leader first, but min.insync.replicas=3: no acks=all write while
    # one of them is out of the ISR.
    strict = create_topic(cluster, 1, {"min.insync.replicas": "3"},
                          assignment={0: [states[0].leader] + [r for r in states[0].replicas
                                                               if r != states[0].leader]})
    leader_port = cluster.spec.node(states[0].leader).port
    with BackgroundProducer(cluster.spec.bootstrap_servers, topic, [0], rate=500) as producer:
        producer.wait_acked(0, 100)
        assert _produce_raw(leader_port, strict, b"before", acks=-1) == (0, 0)
        cluster.signal_node(follower, signal.SIGSTOP)
        try:
            # At the leader's LEO a paused follower stays in sync (Kafka's isCaughtUp): a
            # write it cannot fetch makes it lag.
            assert _produce_raw(leader_port, strict, b"while paused", acks=1) == (0, 1)
            shrunk = wait_until(lambda: (s := partition_states(cluster, topic)) and
                                follower not in s[0].isr and s, 30,
                                f"paused broker {follower} to leave the ISR of {topic}-0")
            assert sorted(shrunk[0].isr) == sorted(set(states[0].replicas) - {follower})
            assert shrunk[0].leader == states[0].leader
            # acks=all completes without the paused replica.
            producer.wait_acked(0, producer.acked_count(0) + 200)
            wait_until(lambda: follower not in partition_states(cluster, strict)[0].isr, 30,
                       f"paused broker {follower} to leave the ISR of {strict}-0")
            assert _produce_raw(leader_port, strict, b"refused", acks=-1) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
            assert _produce_raw(leader_port, strict, b"acks=1", acks=1) == (0, 2)
        finally:
            cluster.signal_node(follower, signal.SIGCONT)
        wait_until(lambda: follower in partition_states(cluster, topic)[0].isr, 60,
                   f"broker {follower} to rejoin the ISR of {topic}-0")
        producer.wait_acked(0, producer.acked_count(0) + 100)
    assert os.path.isdir(os.path.join(cluster.spec.node(follower).data_dir, f"{topic}-0"))
    check_every_acked_record(cluster, producer)
    check_replicas_match(cluster, topic, [0], [b.id for b in cluster.spec.brokers])
    wait_until(lambda: len(partition_states(cluster, strict)[0].isr) == 3, 60, f"{strict} back in sync")
    assert _produce_raw(leader_port, strict, b"after", acks=-1) == (0, 3)
    check_replicas_match(cluster, strict, [0], [b.id for b in cluster.spec.brokers])
