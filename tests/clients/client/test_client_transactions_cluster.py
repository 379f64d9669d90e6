"""Ketch's transactional producer and read_committed consumer against a real 3+3 cluster.

Needs the transaction coordinator (txncoord) and the partition log's markers / LSO
(txnlog): it fails on the txnclient branch alone (no transaction coordinator) and passed
on a trial merge of the three branches (25 s). The reader of committed data is an
independent client (confluent-kafka)."""
from __future__ import annotations

import asyncio

import pytest

from ketch_client_helpers import create_topic

from clients.aio import Admin, Consumer, Producer
from clients.errors import KafkaApiError, TransactionAbortedError
from clients.types import OffsetAndMetadata, TopicPartition

pytestmark = [pytest.mark.process, pytest.mark.interop]


@pytest.fixture(scope="module")
def boot(cluster) -> str:
    return cluster.spec.bootstrap_servers


def read_committed(boot: str, topic: str, partitions: int, timeout_s: float = 10.0) -> list[bytes]:
    """Values a read_committed confluent-kafka consumer sees up to the end of each partition."""
    from confluent_kafka import Consumer as CConsumer, TopicPartition as CTP

    import time
    c = CConsumer({"bootstrap.servers": boot, "group.id": "txn-reader", "enable.auto.commit": False,
                   "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                   "enable.partition.eof": True})
    try:
        c.assign([CTP(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error():
                    if m.error().code() == -191:        # _PARTITION_EOF
                        eof.add(m.partition())
                        continue
                    raise AssertionError(m.error())
                eof.discard(m.partition())
                out.append(m.value())
        assert len(eof) == partitions, "the reader did not reach the LSO of every partition"
        return out
    finally:
        c.close()


def test_commit_abort_offsets_failover_and_fencing(cluster, boot: str) -> None:
    topic, source = "txn-out", "txn-in"
    create_topic(boot, topic, 2, 3)
    create_topic(boot, source, 1, 3)
    group = "txn-group"
    src = TopicPartition(source, 0)

    async def go() -> None:
        p = Producer({"bootstrap.servers": boot, "transactional.id": "ketch-txn-1",
                      "linger.ms": 5})
        await p.start()
        await p.init_transactions()
        # 0. KIP-447: offsets sent with a generation the member no longer has (or never
        # had) make the transaction abortable; the producer aborts and goes on.
        member = Consumer({"bootstrap.servers": boot, "group.id": group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        await member.start()
        member.subscribe([source])
        for _ in range(60):
            await member.poll(200)
            if member.assignment():
                break
        meta = member.group_metadata()
        assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id
        await p.begin_transaction()
        with pytest.raises(KafkaApiError) as stale:
            await p.send_offsets_to_transaction(
                {src: 1}, meta._replace(generation_id=meta.generation_id + 1))
        assert type(stale.value).__name__ == "IllegalGenerationError"
        await p.abort_transaction()
        # 1. A committed transaction: records and the member's offset together.
        await p.begin_transaction()
        futures = [await p.send(topic, f"c{i}".encode(), partition=i % 2) for i in range(10)]
        await p.send_offsets_to_transaction({src: OffsetAndMetadata(7, "m")},
                                            member.group_metadata())
        await p.commit_transaction()
        assert all(f.done() and f.exception() is None for f in futures)
        await member.close()         # the group is Empty: later offsets come without a member
        # 2. An aborted one: neither its records nor its offset are visible.
        await p.begin_transaction()
        for i in range(5):
            await (await p.send(topic, f"a{i}".encode(), partition=i % 2))
        queued = await p.send(topic, b"never-sent", partition=0)
        await p.send_offsets_to_transaction({src: 99}, group)
        await p.abort_transaction()
        assert queued.done()
        if queued.exception() is not None:
            assert isinstance(queued.exception(), TransactionAbortedError)
        # 3. read_committed / read_uncommitted through Ketch's consumer.
        for level, expect_aborted in (("read_committed", False), ("read_uncommitted", True)):
            c = Consumer({"bootstrap.servers": boot, "isolation.level": level,
                          "auto.offset.reset": "earliest"})
            await c.start()
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            values: set[bytes] = set()
            for _ in range(40):
                values |= {r.value for r in await c.poll(500)}
                if len([v for v in values if v.startswith(b"c")]) == 10 and (
                        not expect_aborted or len([v for v in values if v.startswith(b"a")]) == 5):
                    break
            assert {v for v in values if v.startswith(b"c")} == {f"c{i}".encode() for i in range(10)}
            assert any(v.startswith(b"a") for v in values) == expect_aborted, level
            if level == "read_committed":
                # latest = the LSO: nothing is open, so it is the log end.
                ends = await c.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
                assert sum(ends.values()) >= 15
            await c.close()
        # The group sees the committed transaction's offset, not the aborted one's.
        g = Consumer({"bootstrap.servers": boot, "group.id": group})
        await g.start()
        committed = await g.committed([src])
        assert committed[src] is not None and committed[src].offset == 7
        await g.close()
        # 4. Another committed transaction of the same producer and epoch: its offsets
        # batch (base sequence 0 again, as Kafka writes them) must reach the log too, so a
        # new coordinator after a SIGKILL reads it back.
        await p.begin_transaction()
        await p.send(topic, b"c10", partition=0)
        await p.send_offsets_to_transaction({src: 11}, group)
        await p.commit_transaction()
        admin = Admin({"bootstrap.servers": boot})
        await admin.start()
        coordinator = (await admin.describe_consumer_groups([group]))[group].coordinator
        await admin.close()
        cluster.kill_node(coordinator)
        g = Consumer({"bootstrap.servers": boot, "group.id": group})
        await g.start()
        committed = await g.committed([src], timeout_ms=60_000)
        assert committed[src] is not None and committed[src].offset == 11
        await g.close()
        # 5. A new producer with the same transactional id fences this one.
        p2 = Producer({"bootstrap.servers": boot, "transactional.id": "ketch-txn-1"})
        await p2.start()
        await p2.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"zombie", partition=0)
        with pytest.raises(KafkaApiError) as e:
            await p.commit_transaction()
        assert type(e.value).__name__ in ("ProducerFencedError", "InvalidProducerEpochError")
        await p.close()
        await p2.close()

    asyncio.run(go())
    values = read_committed(boot, topic, 2)
    assert sorted(values) == sorted(f"c{i}".encode() for i in range(11))


def test_a_transactional_producer_refuses_sends_outside_a_transaction(boot: str) -> None:
    """Runs without a transaction coordinator: the refusal is the client's own (before
    any metadata: the topic need not exist)."""
    from clients import Producer as BlockingProducer
    from clients.errors import IllegalStateError
    p = BlockingProducer({"bootstrap.servers": boot, "transactional.id": "never-initialized"})
    try:
        with pytest.raises(IllegalStateError, match="UNINITIALIZED"):
            p.send("txn-refused", b"v")
        with pytest.raises(IllegalStateError, match="begin a transaction"):
            p.begin_transaction()
    finally:
        p.close()
    with pytest.raises(IllegalStateError, match="transactional.id"):
        with BlockingProducer({"bootstrap.servers": boot}) as plain:
            plain.begin_transaction()
