"""Ketch's consumer reading on a real 3+3 cluster: standalone assign, manual commits of
specific offsets, seek and offsets_for_times, auto.offset.reset past the log end and
before the log start, pause/resume, pattern subscription, a listener that commits, and
records written by kafka-python, aiokafka and confluent-kafka with every compression."""
from __future__ import annotations

import asyncio
import time

import pytest

from clients import Consumer
from clients.errors import IllegalStateError, OffsetOutOfRangeError
from clients.types import OffsetAndMetadata, TopicPartition as TP
from groups_helpers import committed_offsets, create_topic, produce, wait_until

pytestmark = [pytest.mark.process]


def consumer(bootstrap: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": 100, "auto.offset.reset": "earliest",
                     **extra})


def read(c: Consumer, n: int, timeout_s: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        assert time.monotonic() < deadline, f"read {len(out)} of {n} records"
        out += c.poll(timeout_ms=500)
    return out


@pytest.fixture(scope="module")
def topic(cluster, bootstrap) -> str:
    """'reads': 3 partitions, 30 records each, values 'reads-<p>-<i>'."""
    create_topic(cluster, "reads", partitions=3)
    produce(bootstrap, "reads", per_partition=30, partitions=3, tag="reads")
    return "reads"


def test_standalone_assign_reads_a_partition_in_order(bootstrap, topic) -> None:
    with consumer(bootstrap) as c:
        c.assign([TP(topic, 1)])
        records = read(c, 30)
        assert [r.offset for r in records] == list(range(30))
        assert [r.value for r in records] == [f"reads-1-{i}".encode() for i in range(30)]
        assert {r.partition for r in records} == {1} and c.position(TP(topic, 1)) == 30
        with pytest.raises(IllegalStateError, match="group.id"):
            c.subscribe([topic])
        with pytest.raises(IllegalStateError, match="group.id"):
            c.commit()


def test_manual_commit_of_specific_offsets(cluster, bootstrap, topic) -> None:
    group = "g-manual"
    with consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False}) as c:
        c.assign([TP(topic, 0), TP(topic, 2)])
        read(c, 60)
        c.commit({TP(topic, 0): 5, TP(topic, 2): OffsetAndMetadata(17, "note")})
        assert c.committed([TP(topic, 0), TP(topic, 1), TP(topic, 2)]) == {
            TP(topic, 0): OffsetAndMetadata(5, "", -1), TP(topic, 1): None, TP(topic, 2): OffsetAndMetadata(17, "note", -1)}
        # async commit with a callback, of a specific offset
        done = []
        c.commit_async({TP(topic, 0): 9}, callback=lambda offsets, error: done.append((offsets, error)))
        wait_until(lambda: done, 10, "the commit callback")
        assert done == [({TP(topic, 0): OffsetAndMetadata(9)}, None)]
    assert committed_offsets(cluster, group, topic, 3) == {0: 9, 1: -1, 2: 17}
    # a new member of the group starts where the commits say
    with consumer(bootstrap, **{"group.id": group}) as c:
        c.assign([TP(topic, 0), TP(topic, 2)])
        records = read(c, (30 - 9) + (30 - 17))
        firsts = {p: min(r.offset for r in records if r.partition == p) for p in (0, 2)}
        assert firsts == {0: 9, 2: 17}


def test_seek_and_offsets_for_times(cluster, bootstrap) -> None:
    from confluent_kafka import Producer
    create_topic(cluster, "times", partitions=1)
    base = 1_700_000_000_000
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("times", value=f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
    assert p.flush(30) == 0
    tp = TP("times", 0)
    with consumer(bootstrap) as c:
        c.assign([tp])
        found = c.offsets_for_times({tp: base + 2500})
        assert found[tp].offset == 3 and found[tp].timestamp == base + 3000
        assert c.offsets_for_times({tp: base + 10_000}) == {tp: None}
        assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 10}
        c.seek(tp, found[tp].offset)
        assert [r.offset for r in read(c, 7)] == list(range(3, 10))
        c.seek(tp, 8)
        assert [r.value for r in read(c, 2)] == [b"v8", b"v9"]
        c.seek_to_beginning([tp])
        assert read(c, 10)[0].timestamp == base
        c.seek_to_end([tp])
        assert c.poll(timeout_ms=300) == [] and c.position(tp) == 10
        with pytest.raises(KeyError, match="not assigned"):
            c.seek(TP("times", 5), 0)


def test_seek_past_the_end_applies_auto_offset_reset(bootstrap, topic) -> None:
    tp = TP(topic, 0)
    with consumer(bootstrap, **{"auto.offset.reset": "earliest"}) as c:
        c.assign([tp])
        c.seek(tp, 10_000)
        assert read(c, 1)[0].offset == 0
    with consumer(bootstrap, **{"auto.offset.reset": "latest"}) as c:
        c.assign([tp])
        c.seek(tp, 10_000)
        wait_until(lambda: c.poll(timeout_ms=100) == [] and c.position(tp) == 30, 20, "reset to the log end")
    with consumer(bootstrap, **{"auto.offset.reset": "none"}) as c:
        c.assign([tp])
        c.seek(tp, 10_000)
        with pytest.raises(OffsetOutOfRangeError, match=f"{topic}-0"):
            for _ in range(100):
                c.poll(timeout_ms=200)
        # no position at all (no group, nothing committed) and none: the same error
        c.assign([TP(topic, 1)])
        with pytest.raises(OffsetOutOfRangeError, match="auto.offset.reset is none"):
            c.poll(timeout_ms=200)


def test_seek_before_the_log_start_applies_auto_offset_reset(cluster, bootstrap) -> None:
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient
    create_topic(cluster, "trimmed", partitions=1)
    produce(bootstrap, "trimmed", per_partition=20, partitions=1, tag="trim")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (f,) = admin.delete_records([CTP("trimmed", 0, 12)]).values()
    assert f.result(30).low_watermark == 12
    tp = TP("trimmed", 0)
    with consumer(bootstrap, **{"auto.offset.reset": "earliest"}) as c:
        c.assign([tp])
        c.seek(tp, 3)
        assert [r.offset for r in read(c, 8)] == list(range(12, 20))
    with consumer(bootstrap, **{"auto.offset.reset": "none"}) as c:
        c.assign([tp])
        c.seek(tp, 3)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(100):
                c.poll(timeout_ms=200)


def test_pause_and_resume(bootstrap, topic) -> None:
    with consumer(bootstrap) as c:
        c.assign([TP(topic, 0), TP(topic, 1)])
        c.pause([TP(topic, 0)])
        records = read(c, 30)
        assert {r.partition for r in records} == {1} and c.paused() == {TP(topic, 0)}
        assert c.poll(timeout_ms=300) == []
        c.resume([TP(topic, 0)])
        assert {r.partition for r in read(c, 30)} == {0}


def test_pattern_subscription_and_a_listener_that_commits(cluster, bootstrap) -> None:
    for name in ("pat-a", "pat-b", "other-c"):
        create_topic(cluster, name, partitions=2)
        produce(bootstrap, name, per_partition=5, partitions=2, tag=name)
    group = "g-pattern"
    events = []

    class CommitOnRevoke:
        def on_partitions_assigned(self, c, parts):
            events.append(("assigned", frozenset(parts)))

        def on_partitions_revoked(self, c, parts):
            # the blocking consumer, called from inside close(): commit what we read
            c.commit({tp: c.position(tp) for tp in parts})
            events.append(("revoked", frozenset(parts)))

    with consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False, "metadata.max.age.ms": 500}) as c:
        c.subscribe("^pat-.*", listener=CommitOnRevoke())
        records = read(c, 20)
        assert {r.topic for r in records} == {"pat-a", "pat-b"}
        assert c.subscription() == {"pat-a", "pat-b"}
    assert events[0][0] == "assigned" and events[-1][0] == "revoked"
    assert committed_offsets(cluster, group, "pat-a", 2) == {0: 5, 1: 5}
    assert committed_offsets(cluster, group, "pat-b", 2) == {0: 5, 1: 5}


COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _write_with(client: str, bootstrap: str, topic: str, compression: str, n: int) -> None:
    key = lambda i: f"k{i}".encode()                    # noqa: E731
    value = lambda i: f"{client}-{compression}-{i}".encode() * 3   # noqa: E731
    headers = [("h", b"x"), ("empty", None)] if client != "kafka-python" else [("h", b"x")]
    if client == "confluent":
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20})
        for i in range(n):
            p.produce(topic, key=key(i), value=value(i), partition=0, headers=headers)
        assert p.flush(30) == 0
    elif client == "kafka-python":
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if compression == "none" else compression,
                          linger_ms=20)
        for i in range(n):
            p.send(topic, key=key(i), value=value(i), partition=0, headers=headers)
        p.flush(30)
        p.close()
    else:
        from aiokafka import AIOKafkaProducer

        async def go() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                 compression_type=None if compression == "none" else compression)
            await p.start()
            try:
                for i in range(n):
                    await p.send(topic, key=key(i), value=value(i), partition=0, headers=headers)
                await p.flush()
            finally:
                await p.stop()
        asyncio.run(go())


def _compressions(client: str) -> list[str]:
    """What the client can write here: each library's own codec checks (kafka-python has
    no snappy without python-snappy, which is not installed)."""
    if client == "confluent":
        return COMPRESSIONS
    codec = __import__("kafka.codec" if client == "kafka-python" else "aiokafka.codec", fromlist=["x"])
    return ["none"] + [c for c in COMPRESSIONS[1:] if getattr(codec, f"has_{c}")()]


@pytest.mark.interop
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent"])
def test_ketch_reads_what_other_clients_wrote(cluster, bootstrap, client) -> None:
    topic = f"from-{client}"
    create_topic(cluster, topic, partitions=1)
    n = 40
    written = _compressions(client)
    assert {"none", "gzip", "lz4", "zstd"} <= set(written)
    for compression in written:
        _write_with(client, bootstrap, topic, compression, n)
    with consumer(bootstrap, **{"value.deserializer": lambda b: b.decode()}) as c:
        c.assign([TP(topic, 0)])
        records = read(c, n * len(written))
    assert [r.offset for r in records] == list(range(n * len(written)))
    expected = [f"{client}-{comp}-{i}" * 3 for comp in written for i in range(n)]
    assert [r.value for r in records] == expected
    assert [r.key for r in records] == [f"k{i}".encode() for _ in written for i in range(n)]
    assert all(("h", b"x") in r.headers for r in records)
    if client != "kafka-python":
        assert all(("empty", None) in r.headers for r in records)
    assert all(r.timestamp > 1_600_000_000_000 for r in records)


def _read_with(client: str, bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes, list]]:
    """(key, value, headers) of the first n records of partition 0, read by another client."""
    out: list = []
    deadline = time.monotonic() + 60
    if client == "confluent":
        from confluent_kafka import Consumer as C, TopicPartition as CTP
        c = C({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
        c.assign([CTP(topic, 0, 0)])
        try:
            while len(out) < n and time.monotonic() < deadline:
                for m in c.consume(100, 1.0):
                    assert m.error() is None, m.error()
                    out.append((m.key(), m.value(), list(m.headers() or [])))
        finally:
            c.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition as KTP
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        c.assign([KTP(topic, 0)])
        try:
            while len(out) < n and time.monotonic() < deadline:
                for recs in c.poll(1000).values():
                    out += [(r.key, r.value, list(r.headers)) for r in recs]
        finally:
            c.close()
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

        async def go() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            try:
                c.assign([ATP(topic, 0)])
                while len(out) < n and time.monotonic() < deadline:
                    for recs in (await c.getmany(timeout_ms=1000)).values():
                        out.extend((r.key, r.value, list(r.headers)) for r in recs)
            finally:
                await c.stop()
        asyncio.run(go())
    return out


@pytest.mark.interop
@pytest.mark.parametrize("client", ["confluent", "aiokafka", "kafka-python"])
def test_other_clients_read_what_ketch_wrote(cluster, bootstrap, client) -> None:
    """Ketch's producer writes with each compression the reading client can decompress
    here (kafka-python has no snappy without python-snappy); the other client reads it."""
    from clients import Producer
    topic = f"from-ketch-for-{client}"
    create_topic(cluster, topic, partitions=1)
    n = 30
    written = []
    for compression in _compressions(client):
        with Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5}) as p:
            futures = [p.send(topic, key=f"k{i}".encode(), value=f"ketch-{compression}-{i}".encode(), partition=0,
                              headers=[("h", b"x")]) for i in range(n)]
            for f in futures:
                f.get(timeout=30)
        written += [(f"k{i}".encode(), f"ketch-{compression}-{i}".encode()) for i in range(n)]
    got = _read_with(client, bootstrap, topic, len(written))
    assert [(k, v) for k, v, _ in got] == written
    assert all(("h", b"x") in [tuple(h) for h in hs] for _, _, hs in got)


def test_consumer_follows_a_sigkilled_leader_to_the_next(cluster, bootstrap) -> None:
    """Reading across a failover: the partition's leader is SIGKILLed halfway; the consumer
    finds the new leader (a higher leader epoch, so its position is validated against the
    new leader's log first, KIP-320) and reads every acknowledged record once, in order.
    It restarts the broker it killed and waits for it."""
    from groups_helpers import metadata_leaders
    topic = "failover"
    create_topic(cluster, topic, partitions=1, replication_factor=3)
    first = produce(bootstrap, topic, per_partition=100, partitions=1, tag="before")
    tp = TP(topic, 0)
    with consumer(bootstrap, **{"max.poll.records": 50}) as c:
        c.assign([tp])
        records = read(c, 50)
        leader = metadata_leaders(cluster, topic)[0]
        cluster.kill_node(leader)
        try:
            wait_until(lambda: metadata_leaders(cluster, topic)[0] not in (leader, -1), 30, "a new leader")
            second = produce(bootstrap, topic, per_partition=100, partitions=1, tag="after")
            records += read(c, 150, timeout_s=60)
            # the new leader was asked where our epoch ends; acks=all lost nothing, so no truncation
            assert c._aio.validations >= 1 and c._aio.log_truncations == 0
        finally:
            cluster.start_node(leader)
        cluster.wait_until_ready(timeout_s=60)      # the next test needs all three brokers
    assert [r.offset for r in records] == list(range(200))
    expected = {**first, **second}
    assert [r.value.decode() for r in records] == [expected[(0, o)] for o in range(200)]


def test_bad_input_gets_clear_errors(bootstrap) -> None:
    from clients.errors import ConfigError, UnknownTopicOrPartitionError
    with pytest.raises(ConfigError, match="fetch.min.byte"):
        Consumer({"bootstrap.servers": bootstrap, "fetch.min.byte": 1})
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "smallest"})
    with consumer(bootstrap) as c:
        c.assign([TP("no-such-topic", 0)])
        # poll() answers (empty) while the topic does not exist: it may be created later
        assert c.poll(timeout_ms=500) == []
        with pytest.raises(UnknownTopicOrPartitionError, match="no-such-topic"):
            c.position(TP("no-such-topic", 0), timeout_ms=2000)
        with pytest.raises(UnknownTopicOrPartitionError, match="no-such-topic"):
            c.offsets_for_times({TP("no-such-topic", 0): 0}, timeout_ms=2000)
        with pytest.raises(ValueError, match="seek offset"):
            c.seek(TP("no-such-topic", 0), -5)
        with pytest.raises(KeyError, match="other-9"):
            c.position(TP("other", 9))
