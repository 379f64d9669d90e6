"""Exactly-once with unmodified clients on a 3-controller / 3-broker cluster (issue 15).

- confluent-kafka's read-process-write loop (a read_committed consumer in a group, a
  transactional producer, ``send_offsets_to_transaction``): the output read with
  read_committed holds every input record exactly once and the group's offsets are the
  input's end; a transaction aborted after its records were written is visible to
  read_uncommitted readers (kafka-python, aiokafka) and never to read_committed ones.
- Zombie fencing: a second producer with the same transactional id fences the first,
  which gets a fatal error at commit; nothing it wrote becomes visible.
- A producer that dies with a transaction open: the coordinator aborts it after its
  ``transaction.timeout.ms`` and read_committed consumers move past it.

Ketch's own client and the SIGKILL loops are in test_transactions_ketch.py and chaos N12.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from integration_helpers import STOP_TIMEOUT_S, start_cluster, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

# librdkafka's RD_KAFKA_RESP_ERR__PARTITION_EOF (KafkaError._PARTITION_EOF): end of a partition.
PARTITION_EOF = -191
# The coordinator looks for timed-out transactions every 500 ms here (Kafka: 10 s).
TXN_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "txn", broker_props=TXN_BROKER)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 3) for n in names]).values():
        f.result(60)


def read_all(bootstrap: str, topic: str, partitions: int, isolation_level: str,
             timeout_s: float = 60.0) -> dict[int, list[bytes]]:
    """Every record a fresh confluent-kafka consumer with ``isolation.level`` reads to the
    end of each partition (the LSO for read_committed), per partition in order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation_level, "enable.partition.eof": True,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 2})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()

        def step() -> bool:
            for m in consumer.consume(num_messages=500, timeout=0.3):
                if m.error() is None:
                    out[m.partition()].append(m.value())
                    at_end.discard(m.partition())
                elif m.error().code() == PARTITION_EOF:
                    at_end.add(m.partition())
            return len(at_end) == partitions
        wait_until(step, timeout_s, f"{topic} read to the end with {isolation_level}", interval_s=0.001)
    finally:
        consumer.close()
    return out


def test_confluent_read_process_write_is_exactly_once(cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    bootstrap = cluster.spec.bootstrap_servers
    src, dst = "rpw-in", "rpw-out"
    create_topics(bootstrap, src, dst)
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2})
    inputs = {p: [f"in-{p}-{i}".encode() for i in range(40)] for p in range(3)}
    for p, values in inputs.items():
        for v in values:
            plain.produce(src, value=v, partition=p)
    assert plain.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rpw-group",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "log_level": 2})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rpw-txn",
                         "linger.ms": 5, "log_level": 2})
    producer.init_transactions(60)
    consumer.subscribe([src])
    copied = 0
    total = sum(len(v) for v in inputs.values())
    # A transaction of its own, aborted after its records reached the log.
    producer.begin_transaction()
    for i in range(5):
        producer.produce(dst, value=f"doomed-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    producer.abort_transaction(60)

    def step() -> bool:
        nonlocal copied
        msgs = [m for m in consumer.consume(num_messages=15, timeout=0.5) if m.error() is None]
        if not msgs:
            return copied >= total
        producer.begin_transaction()
        ends: dict[int, int] = {}
        for m in msgs:
            producer.produce(dst, value=m.value().upper(), partition=m.partition())
            ends[m.partition()] = m.offset() + 1
        producer.send_offsets_to_transaction([TopicPartition(src, p, o) for p, o in ends.items()],
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        copied += len(msgs)
        return copied >= total
    wait_until(step, 120, "every input record copied in transactions", interval_s=0.001)
    committed = consumer.committed([TopicPartition(src, p) for p in range(3)], timeout=30)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: len(v) for p, v in inputs.items()}

    got = read_all(bootstrap, dst, 3, "read_committed")
    assert got == {p: [v.upper() for v in values] for p, values in inputs.items()}
    seen = read_all(bootstrap, dst, 3, "read_uncommitted")
    doomed = sorted(v for values in seen.values() for v in values if v.startswith(b"doomed-"))
    assert doomed == [f"doomed-{i}".encode() for i in range(5)]
    assert sum(len(v) for v in seen.values()) == total + 5


def test_read_uncommitted_clients_see_aborted_records_and_skip_markers(cluster) -> None:
    """kafka-python and aiokafka, read_uncommitted (their default) and read_committed."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    bootstrap = cluster.spec.bootstrap_servers
    topic = "txn-mixed"
    create_topics(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mixed-txn", "log_level": 2})
    producer.init_transactions(60)
    expected_all, expected_committed = [], []
    for t, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        values = [f"t{t}-{i}".encode() for i in range(4)]
        for v in values:
            producer.produce(topic, value=v, partition=0)
        assert producer.flush(30) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(60)
        expected_all += values
        expected_committed += values if commit else []

    def kafka_python(isolation: str) -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                          enable_auto_commit=False, consumer_timeout_ms=3000)
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        try:
            return [m.value for m in c]
        finally:
            c.close()

    async def aiokafka(isolation: str) -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            await c.seek_to_beginning(ATP(topic, 0))
            out: list[bytes] = []
            end = (await c.end_offsets([ATP(topic, 0)]))[ATP(topic, 0)]
            while await c.position(ATP(topic, 0)) < end:
                for records in (await c.getmany(timeout_ms=500)).values():
                    out += [r.value for r in records]
            return out
        finally:
            await c.stop()

    assert kafka_python("read_uncommitted") == expected_all
    assert asyncio.run(aiokafka("read_uncommitted")) == expected_all
    assert asyncio.run(aiokafka("read_committed")) == expected_committed
    assert read_all(bootstrap, topic, 1, "read_committed")[0] == expected_committed


def test_a_second_producer_with_the_same_id_fences_the_first(cluster) -> None:
    from confluent_kafka import KafkaException, Producer
    bootstrap = cluster.spec.bootstrap_servers
    topic = "txn-zombie"
    create_topics(bootstrap, topic, partitions=1)
    conf = {"bootstrap.servers": bootstrap, "transactional.id": "zombie-txn", "log_level": 2}
    zombie = Producer(conf)
    zombie.init_transactions(60)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"from-the-zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = Producer(conf)
    successor.init_transactions(60)        # bumps the epoch: the zombie's transaction is aborted
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort(), e.value
    successor.begin_transaction()
    successor.produce(topic, value=b"from-the-successor", partition=0)
    successor.commit_transaction(60)
    assert read_all(bootstrap, topic, 1, "read_committed")[0] == [b"from-the-successor"]


def test_a_transaction_left_open_by_a_dead_producer_is_aborted_after_its_timeout(cluster, tmp_path) -> None:
    from confluent_kafka import Producer
    bootstrap = cluster.spec.bootstrap_servers
    topic = "txn-timeout"
    create_topics(bootstrap, topic, partitions=1)
    script = tmp_path / "dying_producer.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": {bootstrap!r}, "transactional.id": "dying-txn",
                      "transaction.timeout.ms": 3000, "log_level": 2}})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(10):
            p.produce({topic!r}, value=b"never-committed-%d" % i, partition=0)
        assert p.flush(30) == 0
        print("open", flush=True)
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # Another producer commits after the open transaction: read_committed can only
        # reach it once the coordinator has aborted the dead one's transaction.
        later = Producer({"bootstrap.servers": bootstrap, "transactional.id": "living-txn", "log_level": 2})
        later.init_transactions(60)
        later.begin_transaction()
        later.produce(topic, value=b"committed-later", partition=0)
        later.commit_transaction(60)
        wait_until(lambda: read_all(bootstrap, topic, 1, "read_committed")[0] == [b"committed-later"],
                   60, "the dead producer's transaction aborted by its timeout")
        assert b"never-committed-0" in read_all(bootstrap, topic, 1, "read_uncommitted")[0]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
