"""Ketch's producer against a real 3+3 cluster (auto.create.topics.enable=false), checked
by an independent reader (confluent-kafka) and, for partitioning, by confluent-kafka's
own murmur2_random producer."""
from __future__ import annotations

import asyncio
import json

import pytest

from ketch_client_helpers import admin_cluster, create_topic, read_all

from clients import Producer as BlockingProducer
from clients.aio import Producer
from clients.errors import RecordTooLargeError, SerializationError, UnknownTopicOrPartitionError
from clients.types import RecordMetadata, TopicPartition

pytestmark = [pytest.mark.process, pytest.mark.interop]


@pytest.fixture(scope="module")
def boot(cluster) -> str:
    return cluster.spec.bootstrap_servers


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_and_acks_level_round_trips(boot: str, compression: str) -> None:
    topic = f"roundtrip-{compression}"
    create_topic(boot, topic, 3, 3)
    sent: dict[bytes, tuple] = {}
    metadata: dict[bytes, RecordMetadata] = {}

    async def go() -> None:
        for acks in ("0", "1", "all"):
            async with Producer({"bootstrap.servers": boot, "acks": acks,
                                 "compression.type": compression, "linger.ms": 20}) as p:
                futures = {}
                for i in range(150):
                    key = f"{acks}-{i}".encode()
                    value = (f"value {i} " * (i % 7 + 1)).encode()
                    headers = [("acks", acks.encode()), ("i", str(i).encode())]
                    ts = 1_700_000_000_000 + i
                    sent[key] = (value, tuple(headers), ts)
                    futures[key] = await p.send(topic, value, key=key, headers=headers,
                                                timestamp_ms=ts)
                for key, f in futures.items():
                    md = await f
                    metadata[key] = md
                    assert md.topic == topic and md.timestamp == sent[key][2]
                    assert md.serialized_key_size == len(key)
                    assert (md.offset == -1) == (acks == "0")
    asyncio.run(go())
    records = read_all(boot, topic, 3, len(sent))
    assert len(records) == len(sent) == 450
    got = {key: (value, headers, ts) for _, _, key, value, headers, ts in records}
    assert got == sent
    where = {key: (partition, offset) for partition, offset, key, *_ in records}
    for key, md in metadata.items():
        if md.offset != -1:
            assert where[key] == (md.partition, md.offset)


def test_keyed_records_land_where_confluent_kafka_puts_them(boot: str) -> None:
    from confluent_kafka import Producer as CfkProducer

    create_topic(boot, "keys-ketch", 6, 1)
    create_topic(boot, "keys-confluent", 6, 1)
    keys = [f"user-{i}".encode() for i in range(300)] + [b"", b"\xff\x00\xfe", b"x" * 100]
    theirs: dict[bytes, int] = {}
    cfk = CfkProducer({"bootstrap.servers": boot, "partitioner": "murmur2_random"})
    for k in keys:
        cfk.produce("keys-confluent", b"v", key=k,
                    on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    assert cfk.flush(30) == 0

    async def go() -> dict[bytes, int]:
        async with Producer({"bootstrap.servers": boot}) as p:
            futures = [(k, await p.send("keys-ketch", b"v", key=k)) for k in keys]
            return {k: (await f).partition for k, f in futures}
    ours = asyncio.run(go())
    assert ours == theirs
    assert len(set(ours.values())) == 6


def test_unknown_topic_without_auto_create_is_named_in_the_error(boot: str) -> None:
    async def go() -> None:
        async with Producer({"bootstrap.servers": boot, "max.block.ms": 1500}) as p:
            with pytest.raises(UnknownTopicOrPartitionError, match="'no-such-topic'"):
                await p.send("no-such-topic", b"v")
    asyncio.run(go())
    with BlockingProducer({"bootstrap.servers": boot, "max.block.ms": 1500}) as p:
        with pytest.raises(UnknownTopicOrPartitionError, match="'no-such-topic-either'"):
            p.send("no-such-topic-either", b"v").get(30)


def test_a_record_above_max_request_size_is_refused_and_nothing_else_is_lost(boot: str) -> None:
    create_topic(boot, "oversize-client", 1, 3)

    async def go() -> None:
        async with Producer({"bootstrap.servers": boot, "max.request.size": 10_000,
                             "linger.ms": 100}) as p:
            before = [await p.send("oversize-client", b"small-%d" % i) for i in range(5)]
            with pytest.raises(RecordTooLargeError, match="max.request.size"):
                await p.send("oversize-client", b"x" * 20_000)
            after = [await p.send("oversize-client", b"small-%d" % i) for i in range(5, 10)]
            offsets = [(await f).offset for f in before + after]
            assert offsets == list(range(10))
    asyncio.run(go())
    with BlockingProducer({"bootstrap.servers": boot, "max.request.size": 10_000}) as p:
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            p.send("oversize-client", b"x" * 20_000)               # refused in the caller
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            p.send("oversize-client", b"x" * 20_000, headers=[("h", b"")])
        p.send("oversize-client", b"small-10").get(30)
    values = [r[3] for r in read_all(boot, "oversize-client", 1, 11)]
    assert values == [b"small-%d" % i for i in range(11)]


def test_the_brokers_record_too_large_fails_only_that_record(boot: str) -> None:
    # The topic takes batches of at most 3000 bytes; the producer batches far more.
    create_topic(boot, "small-messages", 1, 3, {"max.message.bytes": "3000"})

    async def go() -> None:
        async with Producer({"bootstrap.servers": boot, "linger.ms": 2000,
                             "batch.size": 100_000}) as p:
            futures = [await p.send("small-messages", b"a%02d" % i + b"." * 200)
                       for i in range(10)]
            big = await p.send("small-messages", b"B" * 5000)
            futures += [await p.send("small-messages", b"c%02d" % i + b"." * 200)
                        for i in range(10)]
            await p.flush()
            with pytest.raises(RecordTooLargeError, match="small-messages-0"):
                await big
            for f in futures:
                assert (await f).offset >= 0
            assert p.metrics["batch-split-total"] >= 1      # the broker refused a batch
            assert p.metrics["record-error-total"] == 1
    asyncio.run(go())
    values = [r[3][:3] for r in read_all(boot, "small-messages", 1, 20)]
    assert values == [b"a%02d" % i for i in range(10)] + [b"c%02d" % i for i in range(10)]


def test_close_sends_everything_still_lingering(boot: str) -> None:
    create_topic(boot, "lingering", 3, 3)

    async def go() -> list:
        p = Producer({"bootstrap.servers": boot, "linger.ms": 600_000,
                      "delivery.timeout.ms": 700_000})
        futures = [await p.send("lingering", b"r%d" % i) for i in range(500)]
        assert not any(f.done() for f in futures)   # nothing would go before linger.ms
        await p.close()
        return [f.result() for f in futures]
    mds = asyncio.run(go())
    assert all(md.offset >= 0 for md in mds)
    assert sorted(r[3] for r in read_all(boot, "lingering", 3, 500)) == sorted(
        b"r%d" % i for i in range(500))


def test_blocking_producer_fire_and_forget_sync_and_async(boot: str) -> None:
    create_topic(boot, "three-modes", 3, 3)
    delivered: list = []
    callbacks: list = []
    with BlockingProducer({"bootstrap.servers": boot}) as p:
        for i in range(100):                                       # fire-and-forget
            p.send("three-modes", b"ff-%d" % i)
        sync = [p.send("three-modes", b"sync-%d" % i, key=b"k").get(timeout=30)
                for i in range(10)]                                # synchronous
        for i in range(100):                                       # asynchronous
            p.send("three-modes", b"cb-%d" % i,
                   callback=lambda md, err: delivered.append((md, err)))
        f = p.send("three-modes", b"future")
        f.add_callback(lambda md: callbacks.append(md)).add_errback(callbacks.append)
        p.flush()
        assert f.done() and f.exception() is None
    assert [md.offset for md in sync] == sorted(md.offset for md in sync)
    assert len({md.partition for md in sync}) == 1                 # one key, one partition
    assert len(delivered) == 100 and all(err is None and md.offset >= 0 for md, err in delivered)
    assert len(callbacks) == 1 and isinstance(callbacks[0], RecordMetadata)
    values = sorted(r[3] for r in read_all(boot, "three-modes", 3, 211))
    assert len(values) == 211 and values == sorted(
        [b"ff-%d" % i for i in range(100)] + [b"sync-%d" % i for i in range(10)]
        + [b"cb-%d" % i for i in range(100)] + [b"future"])


def test_serializers_are_callables_or_kafkas_names(boot: str) -> None:
    create_topic(boot, "serialized", 1, 3)
    with BlockingProducer({"bootstrap.servers": boot,
                           "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
                           "value.serializer": lambda v: json.dumps(v).encode()}) as p:
        md = p.send("serialized", {"n": 1, "s": "\u00e9"}, key="cl\u00e9").get(30)
        assert md.serialized_key_size == 4
        with pytest.raises(SerializationError, match="serialized"):
            p.send("serialized", {1, 2})        # a set is not JSON
        with pytest.raises(SerializationError, match="headers are"):
            p.send("serialized", {}, headers=[("h", "not bytes")])
    ((_, _, key, value, _, _),) = read_all(boot, "serialized", 1, 1)
    assert key == "cl\u00e9".encode() and json.loads(value) == {"n": 1, "s": "\u00e9"}


def test_kafka_python_and_aiokafka_read_what_ketch_wrote(boot: str) -> None:
    """Every compression Ketch writes, read back by the two pure-Python clients too."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    compressions = ["none", "gzip", "snappy", "lz4", "zstd"]
    create_topic(boot, "readers", len(compressions), 3)
    expected: set[tuple] = set()

    async def produce() -> None:
        for partition, compression in enumerate(compressions):
            async with Producer({"bootstrap.servers": boot,
                                 "compression.type": compression}) as p:
                for i in range(100):
                    key, value = f"{compression}-{i}".encode(), (b"%d " % i) * (i + 1)
                    expected.add((partition, key, value, (("c", compression.encode()),)))
                    await p.send("readers", value, key=key, partition=partition,
                                 headers=[("c", compression.encode())])
    asyncio.run(produce())

    # kafka-python decodes only the codecs whose Python library is installed (here it has
    # no snappy: it does not use cramjam); it reads the other partitions.
    import kafka.codec
    readable = [p for p, c in enumerate(compressions) if c == "none" or getattr(
        kafka.codec, f"has_{c}")()]
    assert len(readable) >= 3
    consumer = KafkaConsumer(bootstrap_servers=boot.split(","), enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=10_000)
    consumer.assign([KTP("readers", p) for p in readable])
    consumer.seek_to_beginning()
    want = {r for r in expected if r[0] in readable}
    got = set()
    for m in consumer:
        got.add((m.partition, m.key, m.value, tuple((k, v) for k, v in m.headers)))
        if len(got) == len(want):
            break
    consumer.close()
    assert got == want

    async def read_aiokafka() -> set:
        c = AIOKafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([ATP("readers", p) for p in range(len(compressions))])
            out: set = set()
            for _ in range(100):
                batches = await c.getmany(timeout_ms=500)
                for records in batches.values():
                    out.update((m.partition, m.key, m.value, tuple(m.headers)) for m in records)
                if len(out) >= len(expected):
                    break
            return out
        finally:
            await c.stop()
    assert asyncio.run(read_aiokafka()) == expected


def test_an_invalid_topic_name_is_refused_with_kafkas_error(boot: str) -> None:
    from clients.errors import InvalidTopicError

    async def go() -> None:
        async with Producer({"bootstrap.servers": boot, "max.block.ms": 3000}) as p:
            with pytest.raises((InvalidTopicError, UnknownTopicOrPartitionError),
                               match="bad topic!"):
                await p.send("bad topic!", b"v")
            assert p.metrics["record-error-total"] == 0   # refused before any batch
    asyncio.run(go())


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_lost_produce_answers_are_retried_without_duplicates_only_when_idempotent(
        boot: str, idempotent: bool) -> None:
    """A proxy in front of the leader forwards Produce requests (the broker appends) and
    drops the answers, closing the connection: the outcome is unknown and the producer
    retries. Idempotent: the broker recognizes the sequences, the log holds each record
    once. Not idempotent (the control): the same retries write duplicates."""
    from chaos.proxy import Link

    from clients.connection import CONNECT_VIA
    from clients.protocol import ApiKey

    topic = f"lost-answers-{'idem' if idempotent else 'plain'}"
    create_topic(boot, topic, 1, 3)
    records = 300

    async def go() -> dict:
        admin = admin_cluster(boot)
        await admin.start()
        leader, _ = await admin.leader_for(TopicPartition(topic, 0))
        b = admin.metadata.brokers[leader]
        await admin.close()
        link = Link("to-leader", 0, (b.host, b.port))
        await link.start()
        CONNECT_VIA[(b.host, b.port)] = ("127.0.0.1", link.listen_port)
        try:
            async with Producer({"bootstrap.servers": boot, "enable.idempotence": idempotent,
                                 "acks": "all", "linger.ms": 2, "batch.size": 2000,
                                 "retry.backoff.ms": 20}) as p:
                await p.send_and_wait(topic, b"warm-up")
                link.drop_responses([ApiKey.PRODUCE], count=3)
                futures = [await p.send(topic, b"%05d" % i) for i in range(records)]
                offsets = {i: (await f).offset for i, f in enumerate(futures)}
                assert link.drops_pending == 0
                assert p.metrics["retries_by_error"].get("NETWORK_EXCEPTION", 0) >= 3
                return offsets
        finally:
            del CONNECT_VIA[(b.host, b.port)]
            await link.stop()
    offsets = asyncio.run(go())
    values = [r[3] for r in read_all(boot, topic, 1, records + 1)][1:]   # after the warm-up
    if idempotent:
        assert values == [b"%05d" % i for i in range(records)]          # once each, in order
        assert all(offsets[i] == i + 1 for i in range(records))
    else:
        assert len(values) > records and set(values) == {b"%05d" % i for i in range(records)}


def test_concurrent_first_sends_share_one_start(boot: str) -> None:
    create_topic(boot, "first-sends", 3, 3)

    async def go() -> None:
        p = Producer({"bootstrap.servers": boot})     # not started: send starts it
        futures = await asyncio.gather(*(p.send("first-sends", b"x%d" % i) for i in range(50)))
        assert len({(await f).offset for f in futures if (await f).partition == 0}) == len(
            [f for f in futures if f.result().partition == 0])
        senders = [t for t in asyncio.all_tasks() if "_run_sender" in repr(t)]
        assert len(senders) == 1
        await p.close()
    asyncio.run(go())


def test_blocking_producer_shared_by_threads_keeps_each_threads_order(boot: str) -> None:
    """Four threads share one blocking producer; the topic is new to it, so the first
    records wait for metadata on the loop thread and the ones behind them must not
    overtake them. Per thread (one key each, so one partition): every record once, in
    order."""
    import threading

    create_topic(boot, "shared-by-threads", 2, 3)
    per_thread = 500
    with BlockingProducer({"bootstrap.servers": boot, "linger.ms": 1}) as p:
        def run(n: int) -> None:
            for i in range(per_thread):
                p.send("shared-by-threads", b"t%d-%04d" % (n, i), key=b"thread-%d" % n)
        threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
    records = read_all(boot, "shared-by-threads", 2, 4 * per_thread)
    assert len(records) == 4 * per_thread
    for n in range(4):
        mine = [r[3] for r in sorted(records, key=lambda r: (r[0], r[1]))
                if r[3].startswith(b"t%d-" % n)]
        assert mine == [b"t%d-%04d" % (n, i) for i in range(per_thread)]


def test_a_full_buffer_blocks_the_sending_thread_and_loses_nothing(boot: str, monkeypatch) -> None:
    """buffer.memory holds four 1 KB batches: the sending threads wait in send() for room,
    as Java's do, and every record still arrives once, in order, its callback told where."""
    import threading

    from clients.aio.producer import Producer as AioProducer

    waits = []
    wait = AioProducer.wait_for_memory_in_thread

    def counting(self, size: int, topic: str) -> None:
        waits.append(size)
        wait(self, size, topic)
    monkeypatch.setattr(AioProducer, "wait_for_memory_in_thread", counting)
    create_topic(boot, "full-buffer", 2, 3)
    per_thread = 1500
    told: list[RecordMetadata] = []
    with BlockingProducer({"bootstrap.servers": boot, "linger.ms": 0, "batch.size": 1024,
                           "buffer.memory": 4096, "max.block.ms": 30_000}) as p:
        def run(n: int) -> None:
            for i in range(per_thread):
                p.send("full-buffer", b"t%d-%04d" % (n, i), key=b"thread-%d" % n,
                       callback=lambda md, error: told.append(md) if error is None else None)
        threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
    assert waits, "no send waited for buffer.memory"
    assert len(told) == 2 * per_thread
    records = read_all(boot, "full-buffer", 2, 2 * per_thread)
    assert len(records) == 2 * per_thread
    assert {(md.partition, md.offset) for md in told} == {(r[0], r[1]) for r in records}
    for n in range(2):
        mine = [r[3] for r in sorted(records, key=lambda r: (r[0], r[1]))
                if r[3].startswith(b"t%d-" % n)]
        assert mine == [b"t%d-%04d" % (n, i) for i in range(per_thread)]


def test_a_tombstone_has_no_value(boot: str) -> None:
    create_topic(boot, "tombstones", 1, 3)

    async def go() -> RecordMetadata:
        async with Producer({"bootstrap.servers": boot}) as p:
            return await p.send_and_wait("tombstones", None, key=b"gone")
    md = asyncio.run(go())
    assert md.serialized_value_size == -1 and md.serialized_key_size == 4
    ((_, offset, key, value, _, _),) = read_all(boot, "tombstones", 1, 1)
    assert (offset, key, value) == (md.offset, b"gone", None)
