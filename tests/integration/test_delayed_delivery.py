"""Delayed delivery (issue 18) on a real cluster (3 controllers, 3 brokers; one module).

1. Unmodified clients: confluent-kafka producers set ``ketch.deliver.at`` /
   ``ketch.deliver.after`` (and Ketch's producer its ``deliver_at=``); a batch mixing due and delayed records is appended with gaps
   (an all-delayed one as an empty batch), and kafka-python, aiokafka, confluent-kafka and
   kcat read it: the due records at once, the delayed ones only after their time. Bad
   delivery times are refused with INVALID_RECORD and a message.
2. Many delayed records with their times spread over a few seconds, the leader of the
   delay store (one partition here) SIGKILLed midway: every record delivered exactly
   once, none before its time; the lateness p50/p99 printed.
3. An idempotent producer's batch sent again (same producer id, epoch and sequence) while
   its delayed record waits and again after it was delivered: a duplicate each time,
   answered with the original offsets, delivered once.
   Issue 18's 10,000 records over 30 s (about 35 s of test time);
   KETCH_DELAYED_RECORDS / KETCH_DELAYED_SPREAD_S scale it.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import time

import pytest

from clients.admin import NewTopic
from clients.protocol import ApiKey, messages
from clients.records import Record, build_batch
from clients.types import TopicPartition
from integration_helpers import STOP_TIMEOUT_S, admin_for, metadata, roundtrip, start_cluster, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

STORE = "__ketch_delayed_delivery"
RECORDS = int(os.environ.get("KETCH_DELAYED_RECORDS", "10000"))
SPREAD_S = float(os.environ.get("KETCH_DELAYED_SPREAD_S", "30"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory, "delayed", broker_props={
        "ketch.delayed.delivery.topic.partitions": "1",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
    })
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def now_ms() -> int:
    return int(time.time() * 1000)


def create(cluster, topic: str, partitions: int) -> None:
    admin_for(cluster).create_topics([NewTopic(topic, partitions, 3)], timeout_ms=30_000)
    wait_until(lambda: all(p.leader_id >= 0 for t in metadata(cluster.spec.brokers[0].port, [topic]).topics
                           for p in t.partitions) or None, 30, f"leaders of {topic}")


def store_leader(cluster) -> int:
    for b in cluster.spec.brokers:
        p = cluster.processes.get(b.id)
        if p is None or p.poll() is not None:
            continue
        try:
            md = metadata(b.port, [STORE])
        except Exception:         # noqa: BLE001 - a broker that cannot answer: ask the next
            continue
        for t in md.topics:
            for part in t.partitions:
                if t.error_code == 0 and part.leader_id >= 0:
                    return part.leader_id
    return -1


def confluent_produce(bootstrap: str, topic: str, records: list[tuple[bytes, list]], **conf) -> list:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, **conf})
    reports: list = []
    for value, headers in records:
        p.produce(topic, value=value, headers=headers, partition=0,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset() if err is None else -1)))
    assert p.flush(30) == 0
    return reports


def read_all(bootstrap: str, topic: str, client: str, want: int, timeout_s: float) -> list[tuple[bytes, int]]:
    """(value, offset) of the first ``want`` records of partition 0, by one client."""
    deadline = time.time() + timeout_s
    out: list[tuple[bytes, int]] = []
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                          isolation_level="read_committed", fetch_max_wait_ms=100)
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        while len(out) < want and time.time() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                out += [(r.value, r.offset) for r in recs]
        c.close()
    elif client == "aiokafka":
        async def go() -> None:
            from aiokafka import AIOKafkaConsumer
            from aiokafka import TopicPartition as ATP
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 isolation_level="read_committed", fetch_max_wait_ms=100)
            await c.start()
            try:
                c.assign([ATP(topic, 0)])
                await c.seek_to_beginning()
                while len(out) < want and time.time() < deadline:
                    for recs in (await c.getmany(timeout_ms=200)).values():
                        out.extend((r.value, r.offset) for r in recs)
            finally:
                await c.stop()
        asyncio.run(go())
    elif client == "confluent-kafka":
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CTP
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 100})
        c.assign([CTP(topic, 0, 0)])
        while len(out) < want and time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((m.value(), m.offset()))
        c.close()
    else:
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        assert kcat, "kcat is installed"
        proc = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
                               "-c", str(want), "-f", "%o %s\n", "-X", "fetch.wait.max.ms=100"],
                              capture_output=True, text=True, timeout=timeout_s)
        for line in proc.stdout.splitlines():
            off, _, value = line.partition(" ")
            out.append((value.encode(), int(off)))
    return out


def test_unmodified_clients_read_gapped_and_empty_batches(cluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    create(cluster, "gaps", 1)
    start = now_ms()
    due = start + 8000
    at = [("ketch.deliver.at", str(due).encode())]
    after = [("ketch.deliver.after", b"8000")]
    # One batch: due, delayed, due, delayed (linger groups them); then an all-delayed batch.
    reports = confluent_produce(bootstrap, "gaps", [(b"now-1", []), (b"later-1", at), (b"now-2", []),
                                                    (b"later-2", after)])
    reports += confluent_produce(bootstrap, "gaps", [(b"later-3", at), (b"later-4", after)])
    from clients import Producer
    with Producer({"bootstrap.servers": bootstrap}) as ketch:     # Ketch's own argument
        reports.append((None, ketch.send("gaps", b"later-5", partition=0, deliver_at=due).get(30).offset))
    assert [e for e, _ in reports] == [None] * 7
    assert sorted(o for _, o in reports) == list(range(7))       # the holes are reserved offsets
    for client in ("kafka-python", "aiokafka", "confluent-kafka", "kcat"):
        got = read_all(bootstrap, "gaps", client, 2, 20)
        assert [v for v, _ in got] == [b"now-1", b"now-2"], client
        assert [o for _, o in got] == [0, 2], client
    assert now_ms() < due, "the reads above ran before the due time"
    for client in ("kafka-python", "aiokafka", "confluent-kafka", "kcat"):
        got = read_all(bootstrap, "gaps", client, 7, 30)
        assert now_ms() >= due
        values = [v for v, _ in got]
        assert sorted(values) == [b"later-1", b"later-2", b"later-3", b"later-4", b"later-5",
                                  b"now-1", b"now-2"], client
        assert [o for _, o in got][:2] == [0, 2] and min(o for _, o in got[2:]) >= 7, client


def test_bad_delivery_times_are_refused(cluster) -> None:
    from confluent_kafka import KafkaError
    create(cluster, "bad-times", 1)
    for headers in ([("ketch.deliver.at", b"tomorrow")],
                    [("ketch.deliver.after", str(400 * 24 * 3600 * 1000).encode())]):
        reports = confluent_produce(cluster.spec.bootstrap_servers, "bad-times", [(b"x", headers)],
                                    **{"message.send.max.retries": 0, "enable.idempotence": False})
        (err, _), = reports
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert read_all(cluster.spec.bootstrap_servers, "bad-times", "confluent-kafka", 1, 2) == []


def test_an_idempotent_retry_is_a_duplicate_whether_pending_or_delivered(cluster) -> None:
    create(cluster, "retried", 1)
    (topic,) = metadata(cluster.spec.brokers[0].port, ["retried"]).topics
    port = next(b.port for b in cluster.spec.brokers if b.id == topic.partitions[0].leader_id)
    init = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    after = (("ketch.deliver.after", b"1500"),)

    def batch(sequence: int, records: list[tuple[bytes, tuple]]) -> bytes:
        return build_batch([Record(i, now_ms(), None, v, h) for i, (v, h) in enumerate(records)],
                           producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                           base_sequence=sequence)

    def produce(records: bytes) -> tuple[int, int]:
        P = messages.ProduceRequest
        (t,) = roundtrip(port, ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
            P.TopicProduceData(name="retried", partition_data=[
                P.PartitionProduceData(index=0, records=records)])])).responses
        (p,) = t.partition_responses
        return p.error_code, p.base_offset

    first = batch(0, [(b"now", ()), (b"once", after)])
    assert produce(first) == (0, 0)
    assert produce(first) == (0, 0)         # its delayed record still parked
    got = read_all(cluster.spec.bootstrap_servers, "retried", "confluent-kafka", 2, 30)
    assert [v for v, _ in got] == [b"now", b"once"]
    assert produce(first) == (0, 0)         # delivered already
    # Due after a second parking of "once" would be: delivered after it, in offset order.
    assert produce(batch(2, [(b"later", after)]))[0] == 0
    got = read_all(cluster.spec.bootstrap_servers, "retried", "confluent-kafka", 3, 30)
    assert [v for v, _ in got] == [b"now", b"once", b"later"]


def pct(xs: list[int], q: int) -> int:
    return xs[min(len(xs) - 1, len(xs) * q // 100)] if xs else -1


def test_many_delayed_records_exactly_once_across_a_store_leader_kill(cluster) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    bootstrap = cluster.spec.bootstrap_servers
    create(cluster, "due", 3)
    received: dict[bytes, list[int]] = {}
    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 50, "isolation.level": "read_committed"})
        c.assign([CTP("due", p, 0) for p in range(3)])
        while not stop.is_set():
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                received.setdefault(m.value(), []).append(now_ms())
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    t0 = now_ms() + 2000            # producing takes a while: the first ones are due after it
    due: dict[bytes, int] = {}
    errors: list = []
    for i in range(RECORDS):
        when = t0 + int(i * SPREAD_S * 1000 / RECORDS)
        value = f"r{i}:{when}".encode()
        due[value] = when
        p.produce("due", value=value, key=str(i).encode(), headers=[("ketch.deliver.at", str(when).encode())],
                  on_delivery=lambda err, msg: err is not None and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0 and errors == []
    produced_by = now_ms()
    victim = store_leader(cluster)
    assert victim >= 0
    # Midway: half the time spread and half the records delivered (on a loaded machine
    # producing can take longer than the spread), so that the kill finds records pending.
    wait_until(lambda: (now_ms() >= t0 + SPREAD_S * 1000 / 2 and len(received) >= RECORDS // 2) or None,
               SPREAD_S + 60, lambda: f"{len(received)} of {RECORDS} delivered before the kill")
    killed_at = now_ms()
    pending_at_kill = RECORDS - len(received)
    cluster.kill_node(victim)
    wait_until(lambda: len(received) == RECORDS or None, SPREAD_S + 60,
               lambda: f"{len(received)} of {RECORDS} delivered")
    time.sleep(1.0)                 # a duplicate would show up within this
    stop.set()
    reader.join(10)
    dupes = {v: ts for v, ts in received.items() if len(ts) > 1}
    early = {v: (ts[0], due[v]) for v, ts in received.items() if ts[0] < due[v]}
    assert dupes == {} and early == {} and set(received) == set(due)
    lateness = sorted(ts[0] - due[v] for v, ts in received.items())
    before = sorted(ts[0] - due[v] for v, ts in received.items() if due[v] < killed_at)
    print(f"\ndelayed delivery: {RECORDS} records due over {SPREAD_S:.0f} s, produced by "
          f"t0{produced_by - t0:+d} ms, store leader {victim} SIGKILLed at t0+{killed_at - t0} ms "
          f"with {pending_at_kill} pending; "
          f"lateness p50 {pct(lateness, 50)} ms, p99 {pct(lateness, 99)} ms, max {lateness[-1]} ms; "
          f"of the {len(before)} due before the kill: p50 {pct(before, 50)} ms, p99 {pct(before, 99)} ms")
    cluster.start_node(victim)
