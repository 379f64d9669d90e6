"""Unmodified Kafka clients against a 3-controller / 3-broker cluster.

kafka-python's admin client creates a topic (6 partitions, replication factor 3); three
producers write to every partition, one after the other so each partition's order is
known: confluent-kafka (acks=all, uncompressed), kafka-python (its idempotent acks=all
default, gzip) and kcat (a subprocess, ``-K:`` keys, ``-H`` headers, lz4). (kafka-python
has no snappy codec on this machine: python-snappy is not installed, so snappy and zstd
get their own test, read by aiokafka and kcat.) Then three
consumers with assigned partitions and no group (kcat, kafka-python, aiokafka) must each
read every record back, per partition in produce order, with keys, values, headers and
timestamps intact. Record contents stay valid UTF-8 so kcat's JSON output carries them.
"""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field

import pytest

from clients.protocol import NEED_DATA, ApiKey, ClientConnection, messages
from clients.records import Record, build_batch, decode_batches
from integration_helpers import large_read, metadata, partition_states, roundtrip, runs_uvloop, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 6
CONFLUENT_PER_PARTITION = 12
KAFKA_PYTHON_PER_PARTITION = 12
KCAT_PER_PARTITION = 8

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Expected:
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int | None          # None: set by the client at send time (kcat)
    timestamp_range: tuple[int, int] | None = None


@dataclass
class Produced:
    topic: str
    records: dict[int, list[Expected]] = field(default_factory=dict)   # partition -> in order
    acked_offsets: dict[tuple[int, int], Expected] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.records.values())


def _norm_headers(headers) -> Headers:
    return tuple((k, None if v is None else bytes(v)) for k, v in (headers or ()))


def _check_partition(produced: Produced, partition: int, got: list[tuple], client: str) -> None:
    """got: (offset, key, value, headers, timestamp_ms, timestamp_type) in consumed order."""
    want = produced.records[partition]
    offsets = [g[0] for g in got]
    assert offsets == list(range(len(want))), f"{client}: partition {partition} offsets {offsets}"
    for (offset, key, value, headers, ts, ts_type), exp in zip(got, want):
        where = f"{client}: {produced.topic}-{partition}@{offset}"
        assert key == exp.key, where
        assert value == exp.value, where
        assert headers == exp.headers, where
        assert ts_type == "create", where
        if exp.timestamp_ms is not None:
            assert ts == exp.timestamp_ms, where
        else:
            lo, hi = exp.timestamp_range
            assert lo <= ts <= hi, f"{where}: timestamp {ts} outside the send window {lo}..{hi}"
        acked = produced.acked_offsets.get((partition, offset))
        if acked is not None:
            assert acked == exp, f"{where}: the producer was told this offset for another record"


# ---------------------------------------------------------------- the topic and producers


@pytest.fixture(scope="module")
def produced(cluster) -> Produced:
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = cluster.spec.bootstrap_servers
    topic = f"interop-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        resp = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)])
        assert [(t["name"], t["error_code"]) for t in resp["topics"]] == [(topic, 0)], resp
    finally:
        admin.close()
    # Every replica in sync before any write, so the spread and ISR checks see a settled topic.
    wait_until(lambda: (s := partition_states(cluster, topic)) and len(s) == PARTITIONS and
               all(len(p.isr) == 3 and p.leader > 0 for p in s.values()), 30, f"{topic} fully in sync")

    out = Produced(topic, {p: [] for p in range(PARTITIONS)})
    base_ts = int(time.time() * 1000) - 3_600_000   # recent: retention must not touch it

    # confluent-kafka, acks=all; null keys, tombstones, repeated and empty header values.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False, "retries": 5})
    reports: list = []

    def on_delivery(err, msg, exp):
        reports.append((err, msg.partition(), msg.offset(), exp))

    for p in range(PARTITIONS):
        for i in range(CONFLUENT_PER_PARTITION):
            key = None if i == 0 else f"ck-{p}-{i}".encode()
            value = None if i == 1 else f"confluent été ✓ {p}/{i}".encode()
            headers = (("src", b"confluent"), ("i", str(i).encode()), ("dup", b"a"), ("dup", b"b"))
            if i == 2:
                headers += (("empty", b""),)
            exp = Expected(key, value, headers, base_ts + p * 1000 + i)
            out.records[p].append(exp)
            producer.produce(topic, key=key, value=value, partition=p, headers=list(headers),
                             timestamp=exp.timestamp_ms,
                             on_delivery=lambda err, msg, exp=exp: on_delivery(err, msg, exp))
    assert producer.flush(30) == 0
    assert all(err is None for err, *_ in reports), [r for r in reports if r[0] is not None]
    for _, p, offset, exp in reports:
        out.acked_offsets[(p, offset)] = exp

    # kafka-python: its defaults are acks=all and enable_idempotence=True.
    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    assert kp.config["enable_idempotence"] and kp.config["acks"] == -1
    futures = []
    for p in range(PARTITIONS):
        for i in range(KAFKA_PYTHON_PER_PARTITION):
            key = f"kp-{p}-{i}".encode()
            value = f"kafka-python ünïcode {p}/{i}".encode() * (1 + i % 3)
            headers = (("src", b"kafka-python"), ("seq", str(i).encode()))
            exp = Expected(key, value, headers, base_ts + 500_000 + p * 1000 + i)
            out.records[p].append(exp)
            futures.append((p, exp, kp.send(topic, key=key, value=value, partition=p,
                                            headers=list(headers), timestamp_ms=exp.timestamp_ms)))
    kp.flush(30)
    for p, exp, fut in futures:
        meta = fut.get(timeout=30)
        assert meta.partition == p
        out.acked_offsets[(p, meta.offset)] = exp
    kp.close(timeout=10)

    # kcat: one producer process per partition (-p), keys split off with -K:, lz4.
    for p in range(PARTITIONS):
        lines = [f"kc-{p}-{i}:kcat value {p}/{i} ☃" for i in range(KCAT_PER_PARTITION)]
        before = int(time.time() * 1000)
        result = subprocess.run(
            ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(p), "-K:", "-z", "lz4",
             "-H", "src=kcat", "-H", f"part={p}", "-X", "acks=all"],
            input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=60)
        after = int(time.time() * 1000)
        assert result.returncode == 0, result.stderr.decode()
        for line in lines:
            k, v = line.split(":", 1)
            out.records[p].append(Expected(k.encode(), v.encode(), (("src", b"kcat"), ("part", str(p).encode())),
                                           None, (before, after)))
    return out


# ---------------------------------------------------------------- tests


def test_admin_created_topic_has_leaders_spread_over_the_brokers(cluster, produced: Produced) -> None:
    states = partition_states(cluster, produced.topic)
    assert sorted(states) == list(range(PARTITIONS))
    broker_ids = sorted(b.id for b in cluster.spec.brokers)
    for s in states.values():
        assert s.error_code == 0
        assert sorted(s.replicas) == broker_ids, s
        assert sorted(s.isr) == broker_ids, s
        assert s.leader in s.replicas
    led = {b: sum(1 for s in states.values() if s.leader == b) for b in broker_ids}
    assert led == {b: PARTITIONS // len(broker_ids) for b in broker_ids}, led
    # Every broker answers Metadata from its own image, and the images agree.
    for b in cluster.spec.brokers:
        assert wait_until(lambda: partition_states(cluster, produced.topic, port=b.port) == states,
                          10, f"broker {b.id}'s metadata to match")


def test_kafka_python_admin_describes_the_topic(cluster, produced: Produced) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    try:
        (desc,) = admin.describe_topics([produced.topic])
        assert desc["error_code"] == 0
        assert len(desc["partitions"]) == PARTITIONS
        assert all(sorted(p["replica_nodes"]) == [1, 2, 3] for p in desc["partitions"]), desc
        assert produced.topic in admin.list_topics()
    finally:
        admin.close()


def test_kcat_consumer_reads_every_record(cluster, produced: Produced) -> None:
    for p in range(PARTITIONS):
        result = subprocess.run(
            ["kcat", "-C", "-b", cluster.spec.bootstrap_servers, "-t", produced.topic, "-p", str(p),
             "-o", "beginning", "-e", "-J", "-q"],
            capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr.decode()
        got = []
        for line in result.stdout.decode().splitlines():
            m = json.loads(line)
            assert m["topic"] == produced.topic and m["partition"] == p
            flat = m.get("headers") or []
            headers = tuple((flat[j], None if flat[j + 1] is None else flat[j + 1].encode())
                            for j in range(0, len(flat), 2))
            got.append((m["offset"], None if m["key"] is None else m["key"].encode(),
                        None if m["payload"] is None else m["payload"].encode(), headers, m["ts"],
                        m["tstype"]))
        _check_partition(produced, p, got, "kcat")


def test_kcat_consumer_starts_at_a_timestamp(cluster, produced: Produced) -> None:
    """``-o s@ts`` is ListOffsets by timestamp: the first record at or after ts."""
    p = 3
    target = produced.records[p][5].timestamp_ms
    result = subprocess.run(
        ["kcat", "-C", "-b", cluster.spec.bootstrap_servers, "-t", produced.topic, "-p", str(p),
         "-o", f"s@{target}", "-e", "-J", "-q"], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    offsets = [json.loads(line)["offset"] for line in result.stdout.decode().splitlines()]
    assert offsets == list(range(5, len(produced.records[p])))


def test_kafka_python_consumer_reads_every_record(cluster, produced: Produced) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    try:
        tps = [TopicPartition(produced.topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        count = 0
        for msg in consumer:
            got[msg.partition].append((msg.offset, msg.key, msg.value, _norm_headers(msg.headers),
                                       msg.timestamp, "create" if msg.timestamp_type == 0 else "append"))
            count += 1
            if count == produced.total:
                break
        for p in range(PARTITIONS):
            _check_partition(produced, p, got[p], "kafka-python")
        # ListOffsets: earliest, latest and by timestamp.
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: len(produced.records[tp.partition]) for tp in tps}
        tp = tps[2]
        target = produced.records[2][CONFLUENT_PER_PARTITION + 3].timestamp_ms
        found = consumer.offsets_for_times({tp: target})[tp]
        assert (found.offset, found.timestamp) == (CONFLUENT_PER_PARTITION + 3, target)
        assert consumer.offsets_for_times({tp: int(time.time() * 1000) + 3_600_000})[tp] is None
    finally:
        consumer.close()


def test_aiokafka_consumer_reads_every_record(cluster, produced: Produced) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def consume() -> dict[int, list]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers, group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(produced.topic, p) for p in range(PARTITIONS)])
            got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
            count = 0
            deadline = time.monotonic() + 30
            while count < produced.total and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, msgs in batches.items():
                    for msg in msgs:
                        got[tp.partition].append(
                            (msg.offset, msg.key, msg.value, _norm_headers(msg.headers), msg.timestamp,
                             "create" if msg.timestamp_type == 0 else "append"))
                        count += 1
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(consume())
    for p in range(PARTITIONS):
        _check_partition(produced, p, got[p], "aiokafka")


def test_confluent_consumer_reads_every_record(cluster, produced: Produced) -> None:
    from confluent_kafka import Consumer, TopicPartition, TIMESTAMP_CREATE_TIME

    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        consumer.assign([TopicPartition(produced.topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        count = 0
        deadline = time.monotonic() + 30
        while count < produced.total and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                ts_type, ts = msg.timestamp()
                got[msg.partition()].append((msg.offset(), msg.key(), msg.value(),
                                             _norm_headers(msg.headers()), ts,
                                             "create" if ts_type == TIMESTAMP_CREATE_TIME else "append"))
                count += 1
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        _check_partition(produced, p, got[p], "confluent-kafka")


def test_snappy_and_zstd_batches_round_trip(cluster) -> None:
    """kcat writes snappy (xerial framing, as librdkafka does) and confluent-kafka zstd;
    aiokafka decodes both."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from confluent_kafka import Producer

    topic = f"codecs-{uuid.uuid4().hex[:8]}"   # auto-created with num.partitions
    bootstrap = cluster.spec.bootstrap_servers
    lines = [f"s{i}:snappy value {i} " + "x" * (i * 7) for i in range(50)]
    result = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K:", "-z", "snappy",
                             "-X", "acks=all"], input="\n".join(lines).encode() + b"\n",
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "zstd",
                         "linger.ms": 20})
    zstd_values = [f"zstd value {i} ".encode() + bytes(range(256)) * (i % 4) for i in range(50)]
    errors = []
    for i, v in enumerate(zstd_values):
        producer.produce(topic, key=f"z{i}".encode(), value=v, partition=0,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    want = [(line.split(":", 1)[0].encode(), line.split(":", 1)[1].encode()) for line in lines] + \
        [(f"z{i}".encode(), v) for i, v in enumerate(zstd_values)]

    async def consume() -> list:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < len(want) and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                    got.extend((m.offset, m.key, m.value) for m in msgs)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(consume())
    assert got == [(i, k, v) for i, (k, v) in enumerate(want)]


def test_parked_consumer_fetch_is_answered_when_the_high_watermark_moves(cluster) -> None:
    """A consumer long-polls an RF-3 partition with max_wait 60 s; an acks=all record is
    written; the fetch must come back with it as soon as it is below the high watermark.
    (With RF 3 the HW moves on a follower's fetch, not on the append: that path once
    forgot to wake parked fetches, which then waited for max_wait_ms.)"""
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"long-poll-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])
    finally:
        admin.close()
    states = wait_until(lambda: (s := partition_states(cluster, topic)) and len(s[0].isr) == 3 and s,
                        30, f"{topic} in sync")
    leader_port = cluster.spec.node(states[0].leader).port
    cls = messages.FetchRequest
    fetch = cls(replica_id=-1, max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, session_id=0,
                session_epoch=-1, topics=[cls.FetchTopic(topic=topic, partitions=[cls.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=1 << 20)])])
    with socket.create_connection(("127.0.0.1", leader_port), timeout=8) as s:
        conn = ClientConnection(client_id="long-poll")
        s.sendall(conn.send(ApiKey.FETCH, 12, fetch)[1])
        # A round trip on another connection to the same broker: the fetch, sent first,
        # has been read and parked by the time this is answered.
        roundtrip(leader_port, ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]))
        batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"wake up")])
        resp = roundtrip(leader_port, ApiKey.PRODUCE, 9, messages.ProduceRequest(
            acks=-1, timeout_ms=10000, topic_data=[messages.ProduceRequest.TopicProduceData(
                name=topic, partition_data=[messages.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
        try:
            while (event := conn.next_event()) is NEED_DATA:
                chunk = s.recv(1 << 20)
                assert chunk, "connection closed"
                conn.receive_data(chunk)
        except socket.timeout:
            raise AssertionError("the parked fetch was not answered when the record became readable "
                                 "(still waiting for max_wait_ms)")
    part = event.body.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1
    assert [r.value for b in decode_batches(part.records) for r in b.records] == [b"wake up"]


def test_confluent_admin_client_manages_a_topic(cluster) -> None:
    """librdkafka's admin client: create, describe and alter configs, add partitions,
    describe the cluster and the topic, list and delete records, delete the topic."""
    from confluent_kafka import Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
        OffsetSpec,
    )

    bootstrap = cluster.spec.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"admin-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3,
                                  config={"retention.ms": "3600000"})])[topic].result(30)
    wait_until(lambda: (s := partition_states(cluster, topic)) and len(s) == 2 and
               all(len(p.isr) == 3 for p in s.values()), 30, f"{topic} in sync")

    resource = ConfigResource("topic", topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])])[
        ConfigResource("topic", topic)].result(30)
    assert wait_until(lambda: admin.describe_configs([resource])[resource].result(30)["retention.ms"].value
                      == "7200000", 30, "the altered retention.ms")

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    states = wait_until(lambda: (s := partition_states(cluster, topic)) and len(s) == 5 and
                        all(p.leader > 0 for p in s.values()) and s, 30, f"{topic} with 5 partitions")
    assert all(len(p.replicas) == 3 for p in states.values())

    described = admin.describe_cluster().result(30)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.cluster_id == cluster.spec.cluster_id
    # Brokers learn the new partitions from the metadata log each at its own pace: wait
    # until the broker librdkafka asks has them too.
    wait_until(lambda: len(admin.describe_topics(TopicCollection([topic]))[topic].result(30).partitions) == 5,
               30, f"{topic} described with 5 partitions")

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=4)
    assert producer.flush(30) == 0
    tp = TopicPartition(topic, 4)
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert latest.offset == 10
    deleted = admin.delete_records([TopicPartition(topic, 4, 6)])[TopicPartition(topic, 4, 6)].result(30)
    assert deleted.low_watermark == 6
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(30)
    assert earliest.offset == 6

    admin.delete_topics([topic])[topic].result(30)
    for b in cluster.spec.brokers:
        wait_until(lambda: metadata(b.port, [topic]).topics[0].error_code == 3, 30,
                   f"{topic} gone from broker {b.id}'s metadata")
    assert topic not in {t.name for t in metadata(cluster.spec.brokers[0].port, None).topics}


def test_confluent_admin_lists_all_topics(cluster, produced: Produced) -> None:
    """librdkafka's all-topics Metadata v12 carries 3 bytes after the body (its topics count
    goes out as a 4-byte placeholder where a 1-byte varint belongs); Kafka ignores them, so
    must Ketch (it once closed the connection: 'Broker transport failure')."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})
    listed = admin.list_topics(timeout=10)
    assert produced.topic in listed.topics
    assert len(listed.topics[produced.topic].partitions) == PARTITIONS
    assert sorted(listed.brokers) == [1, 2, 3]


def test_under_uvloop_a_large_read_reaches_the_consumer_and_the_followers_whole(cluster) -> None:
    # This module's brokers run the default event loop, uvloop (test_fetch_from_follower's
    # run asyncio's): a read far above SENDFILE_MIN_BYTES leaves by os.sendfile either way.
    values, fetched, followers = large_read(cluster, "large-uvloop", seed=2)
    assert fetched == values
    assert followers == {2: values, 3: values}
    assert [runs_uvloop(cluster, b) for b in (1, 2, 3)] == [True] * 3
