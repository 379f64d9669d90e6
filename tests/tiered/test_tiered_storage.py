"""Tiered storage (issue 18's historical archive, KIP-405) on a real cluster (1 controller,
3 brokers; one module per remote store, ``remote_storage`` in conftest.py).

1. A topic with small segments and a local retention of a few segments: thousands of
   records produced with confluent-kafka; the leader copies closed segments to the store
   and deletes them locally; every record is then read from offset 0 by kcat,
   confluent-kafka and the Spark source (the fetches below the local log start are served
   from the archive), and ListOffsets answers the archive's start as EARLIEST and the local
   log's as EARLIEST_LOCAL (-4). With ``ketch.remote.storage`` the Spark source's tasks read
   the archived part from the store directly, the same rows as through the brokers.
2. The store unreachable: uploads fail and are retried (the STARTED records of the
   attempts are in ``__remote_log_metadata``), no local segment is deleted; the leader is
   SIGKILLed mid-upload, the store comes back, the broker restarts: the new leader deletes
   the abandoned uploads, copies the segments again, local retention deletes them, and
   every record is still read from offset 0.
"""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import subprocess
import time

import pytest

from clients.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC, RemoteLogMetadataCache, RemoteLogSegmentMetadata,
    RemoteLogSegmentState, decode_metadata,
)
from clients.admin import NewTopic
from clients.protocol import ApiKey, messages
from tests.integration.integration_helpers import (
    STOP_TIMEOUT_S, admin_for, partition_states, roundtrip, start_cluster, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

RECORDS = 3000
ARCHIVED_RANGE = 1000           # the Spark test reads offsets [0, 1000) (all archived)
VALUE_BYTES = 100
TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": "16384",
                 "local.retention.bytes": "40000", "file.delete.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, remote_storage):
    c = start_cluster(tmp_path_factory, "tiered", controllers=1, broker_props={
        **remote_storage,
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "300",
        "remote.log.manager.task.retry.backoff.ms": "200",
        "remote.log.manager.task.retry.backoff.max.ms": "1000",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "log.retention.check.interval.ms": "300",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        "ketch.delayed.delivery.enable": "false",
    }, controller_props={"remote.log.storage.system.enable": "true"})
    c.remote_storage = remote_storage       # type: ignore[attr-defined]
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def create(cluster, topic: str) -> int:
    """The topic (1 partition, RF 3); its leader's id."""
    admin_for(cluster).create_topics([NewTopic(topic, 1, 3, configs=dict(TOPIC_CONFIGS))],
                                     timeout_ms=30_000)
    return wait_until(lambda: (s := partition_states(cluster, topic).get(0)) is not None
                      and s.leader >= 0 and len(s.isr) == 3 and s.leader or None,
                      30, f"a leader of {topic} with 3 in sync")


def value(i: int) -> bytes:
    return b"%08d" % i + b"x" * (VALUE_BYTES - 8)


def produce(cluster, topic: str, start: int, count: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5, "batch.size": 4096})
    errors: list = []
    for i in range(start, start + count):
        p.produce(topic, value(i), partition=0,
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]


def local_base_offsets(cluster, broker_id: int, topic: str) -> list[int]:
    data_dir = cluster.spec.node(broker_id).data_dir
    return sorted(int(os.path.basename(p)[:-4])
                  for p in glob.glob(os.path.join(data_dir, "**", f"{topic}-0", "*.log"),
                                     recursive=True))


def remote_objects(cluster, topic: str) -> list[str]:
    """The records objects in the filesystem store."""
    if cluster.remote_storage.get("remote.log.storage.manager.class.name") == "s3":
        from s3_server import object_keys
        return [k for k in object_keys(cluster.remote_storage, f"{topic}-0-") if k.endswith(".log")]
    root = cluster.remote_storage["ketch.remote.storage.fs.path"]
    return sorted(glob.glob(os.path.join(root, f"{topic}-0-*", "*.log")))


def metadata_records(cluster) -> list:
    """Every record of __remote_log_metadata, decoded (read with confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition as TP
    c = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "t",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        parts = [TP(REMOTE_LOG_METADATA_TOPIC, p, 0) for p in range(3)]
        c.assign(parts)
        out, eof = [], set()
        deadline = time.monotonic() + 20
        while len(eof) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            out.append(decode_metadata(m.value()))
        assert len(eof) == 3, "did not reach the end of __remote_log_metadata"
        return out
    finally:
        c.close()


def copied_segments(cluster, topic: str) -> list[RemoteLogSegmentMetadata]:
    """The topic's readable remote segments, as __remote_log_metadata tells (any store)."""
    cache = RemoteLogMetadataCache()
    for r in metadata_records(cluster):
        cache.replay(r)
    return [s for index in cache.partitions.values() for s in index.copied()
            if s.segment.topic == topic]


def read_all_confluent(cluster, topic: str, expected: int, check_offsets: bool = True,
                       timestamps: list[int] | None = None) -> list[bytes]:
    """``expected`` records from offset 0 (read_committed, confluent-kafka's default);
    their timestamps appended to ``timestamps``."""
    from confluent_kafka import Consumer, TopicPartition as TP
    c = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": f"g-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TP(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                assert not check_offsets or m.offset() == len(values), (m.offset(), len(values))
                values.append(m.value())
                if timestamps is not None:
                    timestamps.append(m.timestamp()[1])
        return values
    finally:
        c.close()


def list_offset(cluster, broker_id: int, topic: str, timestamp: int) -> int:
    cls = messages.ListOffsetsRequest
    req = cls(replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(
        name=topic, partitions=[cls.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                                         current_leader_epoch=-1)])])
    resp = roundtrip(cluster.spec.node(broker_id).port, ApiKey.LIST_OFFSETS, 8, req)
    (p,) = resp.topics[0].partitions
    assert p.error_code == 0, p.error_code
    return p.offset


def test_archived_records_are_read_from_offset_0_by_every_client(cluster) -> None:
    topic = "archive"
    leader = create(cluster, topic)
    produce(cluster, topic, 0, RECORDS)
    # Copied, then deleted locally: the leader's and the followers' first local segments
    # move up, and the store holds the segments below.
    for broker in (b.id for b in cluster.spec.brokers):
        wait_until(lambda: (bases := local_base_offsets(cluster, broker, topic)) and bases[0] > 0
                   and len(bases) <= 5 or None, 30, f"local retention on broker {broker}")
    assert len(copied_segments(cluster, topic)) >= 5
    assert list_offset(cluster, leader, topic, -2) == 0           # EARLIEST: the archive's
    # EARLIEST_LOCAL (-4, KIP-405): the local log's (retention may still be moving it).
    wait_until(lambda: list_offset(cluster, leader, topic, -4)
               == local_base_offsets(cluster, leader, topic)[0] > 0 or None, 10, "EARLIEST_LOCAL")

    expected = [value(i) for i in range(RECORDS)]
    timestamps: list[int] = []
    assert read_all_confluent(cluster, topic, RECORDS, timestamps=timestamps) == expected
    # ListOffsets by time in archived data: the first record at or after the time.
    assert list_offset(cluster, leader, topic, 0) == 0
    wanted = timestamps[500]
    assert list_offset(cluster, leader, topic, wanted) == timestamps.index(wanted)

    from clients import Consumer
    from clients.types import TopicPartition
    ketch = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                      "enable.auto.commit": "false", "auto.offset.reset": "none"})
    try:
        tp = TopicPartition(topic, 0)
        ketch.assign([tp])
        ketch.seek(tp, 0)
        got: list[bytes] = []
        started = time.monotonic()
        while len(got) < RECORDS and time.monotonic() - started < 30:
            got += [r.value for r in ketch.poll(timeout_ms=500)]   # type: ignore[misc]
        print(f"Ketch's consumer read {len(got)} records in {time.monotonic() - started:.2f} s")
    finally:
        ketch.close()
    assert got == expected

    out = subprocess.run(["kcat", "-C", "-b", cluster.spec.bootstrap_servers, "-t", topic,
                          "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\\n"],
                         capture_output=True, timeout=60, check=True).stdout.decode().split("\n")
    assert [line for line in out if line] == [f"{i} {value(i).decode()}" for i in range(RECORDS)]


def test_read_committed_replay_of_the_archive_skips_aborted_transactions(cluster) -> None:
    """The aborted transactions of archived segments come from their uploaded indexes; the
    topic deleted, its remote data goes."""
    from confluent_kafka import Producer
    topic = "archive-txn"
    create(cluster, topic)
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                  "transactional.id": "tiered-txn", "linger.ms": 5, "batch.size": 4096})
    p.init_transactions(30)
    for aborted in (True, False, True):
        p.begin_transaction()
        for i in range(300):
            p.produce(topic, (b"aborted" if aborted else b"kept") + value(i), partition=0)
        (p.abort_transaction if aborted else p.commit_transaction)(30)
    produce(cluster, topic, 0, 700)     # more segments, so the transactions are archived
    wait_until(lambda: (bases := local_base_offsets(cluster, 1, topic)) and bases[0] > 400
               or None, 30, "the first transactions archived and gone from local disk")
    read = read_all_confluent(cluster, topic, 1000, check_offsets=False)
    assert read == [b"kept" + value(i) for i in range(300)] + [value(i) for i in range(700)]

    # Deleting the topic deletes its remote data (DELETE_PARTITION_STARTED .. FINISHED).
    assert copied_segments(cluster, topic)
    admin_for(cluster).delete_topics([topic], timeout_ms=30_000)
    wait_until(lambda: not copied_segments(cluster, topic) or None, 30,
               "the deleted topic's remote segments forgotten")
    wait_until(lambda: not remote_objects(cluster, topic) or None, 10,
               "the deleted topic's objects gone from the store")


def produce_spark_topic(cluster, topic: str) -> None:
    """Three transactions (the first and last aborted), then plain records, every record
    with headers: archived up to past the transactions, the rest local."""
    from confluent_kafka import Producer
    create(cluster, topic)
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                  "transactional.id": "tiered-spark", "linger.ms": 5, "batch.size": 4096})
    p.init_transactions(30)
    for aborted in (True, False, True):
        p.begin_transaction()
        for i in range(200):
            p.produce(topic, (b"aborted" if aborted else b"kept") + value(i), key=b"%d" % i,
                      partition=0, headers=[("n", b"%d" % i), ("txn", b"1")])
        p.flush(30)             # sent before the abort (which drops what is still queued)
        (p.abort_transaction if aborted else p.commit_transaction)(30)
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all",
                  "linger.ms": 5, "batch.size": 4096})
    for i in range(1700):
        p.produce(topic, value(i), key=b"%d" % i, partition=0, headers=[("n", b"%d" % i)])
    assert p.flush(30) == 0


def source_options(cluster, topic: str, *, read_committed: bool, direct: bool,
                   store: dict[str, str] | None = None) -> dict[str, str]:
    """A batch read of the whole partition with headers; ``direct``: with the archive's
    options (``store``: other store settings than the brokers')."""
    options = {"kafka.bootstrap.servers": cluster.spec.bootstrap_servers,
               "assign": f'{{"{topic}": [0]}}', "startingOffsets": "earliest",
               "endingOffsets": "latest", "includeHeaders": "true",
               "kafka.isolation.level": "read_committed" if read_committed else "read_uncommitted"}
    if direct:
        props = store or cluster.remote_storage
        options["ketch.remote.storage"] = props["remote.log.storage.manager.class.name"]
        options.update({k: v for k, v in props.items() if k.startswith("ketch.remote.storage.")})
    return options


def read_in_process(options: dict[str, str]) -> tuple[list[tuple], int]:
    """The source's planning and its tasks' reads, run here as Spark would run them: (the
    rows by offset, how many tasks read the archive directly)."""
    from clients.spark.options import parse_source_options
    from clients.spark.source import KetchBatchReader, read_range
    reader = KetchBatchReader(parse_source_options(options, streaming=False))
    parts = reader.partitions()
    rows = [tuple(r.values()) for part in parts for batch in read_range(part)
            for r in batch.to_pylist()]
    return sorted(rows, key=lambda r: r[4]), sum(1 for part in parts if part.segments)


def test_spark_source_reads_archived_ranges_from_the_store_directly(cluster, caplog) -> None:
    """With ketch.remote.storage the executors read the archived part of a range from the
    store themselves and the rest through the brokers: the same rows as the brokers' path
    (offsets, timestamps, keys, headers), read_uncommitted and read_committed (aborted
    transactions from the uploaded transaction indexes); a store the executor cannot
    reach falls back to the brokers. Then the same through a real SparkSession."""
    pyspark = pytest.importorskip("pyspark", reason="the spark extra (pyspark, pyarrow)")
    from pyspark.sql import SparkSession

    from clients.spark import register
    topic = "archive-spark"
    produce_spark_topic(cluster, topic)
    wait_until(lambda: (bases := local_base_offsets(cluster, 1, topic)) and bases[0] > 1000
               or None, 30, "the transactions archived and gone from local disk")
    caplog.set_level(logging.INFO, logger="clients.spark")
    for read_committed in (False, True):
        via_broker, direct_tasks = read_in_process(
            source_options(cluster, topic, read_committed=read_committed, direct=False))
        assert direct_tasks == 0
        caplog.clear()
        direct, direct_tasks = read_in_process(
            source_options(cluster, topic, read_committed=read_committed, direct=True))
        assert direct_tasks == 1
        assert "read from the archive directly" in caplog.text
        assert "through the broker" not in caplog.text
        assert direct == via_broker
        values = [bytes(r[1]) for r in direct]
        assert values[-1] == value(1699) and len(values) == (1900 if read_committed else 2300)
        assert any(v.startswith(b"aborted") for v in values) is not read_committed
        assert all(r[7] and r[7][0] == {"key": "n", "value": bytes(r[0])} for r in direct)
    # A store this executor cannot reach: its offsets are read through the broker.
    caplog.clear()
    unreachable = {"remote.log.storage.manager.class.name": "filesystem",
                   "ketch.remote.storage.fs.path": "/nonexistent/ketch-archive"}
    fallback, _ = read_in_process(source_options(cluster, topic, read_committed=True, direct=True,
                                                 store=unreachable))
    assert "not readable from this executor" in caplog.text
    assert fallback == via_broker

    wait_until(lambda: (bases := local_base_offsets(cluster, 1, "archive"))
               and bases[0] > ARCHIVED_RANGE or None, 30, "the archived range gone from local disk")
    session = (SparkSession.builder.master("local[2]").appName("ketch-tiered")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g").getOrCreate())
    try:
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        # A replay of history through the brokers: a range wholly in the archive.
        df = (session.read.format("ketch")
              .option("kafka.bootstrap.servers", cluster.spec.bootstrap_servers)
              .option("assign", '{"archive": [0]}')
              .option("startingOffsets", '{"archive": {"0": -2}}')
              .option("endingOffsets", f'{{"archive": {{"0": {ARCHIVED_RANGE}}}}}').load())
        rows = df.select("offset", "value").collect()
        # The archive + local read, the executors reading the archive directly.
        options = source_options(cluster, topic, read_committed=True, direct=True)
        spark_rows = session.read.format("ketch").options(**options).load().collect()
    finally:
        session.stop()
    assert pyspark is not None
    assert sorted((r.offset, bytes(r.value)) for r in rows) == [(i, value(i))
                                                                for i in range(ARCHIVED_RANGE)]
    assert sorted((r.offset, bytes(r.key), bytes(r.value)) for r in spark_rows) == \
        [(r[4], bytes(r[0]), bytes(r[1])) for r in via_broker]


def test_unreachable_store_keeps_local_segments_and_a_leader_killed_mid_upload_loses_nothing(
        cluster) -> None:
    topic = "archive-kill"
    s3 = cluster.remote_storage.get("remote.log.storage.manager.class.name") == "s3"
    leader = create(cluster, topic)
    outage = contextlib.ExitStack()
    if s3:
        # The store unreachable: moto paused (SIGSTOP), its objects kept.
        from s3_server import s3_unresponsive
        outage.enter_context(s3_unresponsive(cluster.remote_storage))
    else:
        # The store unreachable: its directory replaced by a file (root ignores permissions).
        root = cluster.remote_storage["ketch.remote.storage.fs.path"]
        hidden = root + ".away"
        os.rename(root, hidden)
        with open(root, "w") as f:
            f.write("not a directory")
    try:
        produce(cluster, topic, 0, RECORDS // 2)

        def attempts() -> list[RemoteLogSegmentMetadata]:
            return [r for r in metadata_records(cluster) if isinstance(r, RemoteLogSegmentMetadata)
                    and r.segment.topic == topic]
        # The first attempt is recorded, then fails; the next rounds try to delete its
        # objects first (an abandoned upload) and fail too, backing off: one orphan, not
        # one per retry.
        wait_until(lambda: len(attempts()) >= 1 or None, 30, "an upload attempt recorded as STARTED")
        time.sleep(1.5)        # failed retries and retention passes
        # Never deleted before copied: the local log still starts at 0.
        assert local_base_offsets(cluster, leader, topic)[0] == 0
        assert list_offset(cluster, leader, topic, -2) == 0
        cluster.kill_node(leader)                     # mid-upload: STARTED, never FINISHED
    finally:
        if s3:
            outage.close()
        else:
            os.remove(root)
            os.rename(hidden, root)
    produce(cluster, topic, RECORDS // 2, RECORDS // 2)     # to the new leader
    cluster.start_node(leader)
    for broker in (b.id for b in cluster.spec.brokers):
        wait_until(lambda: (bases := local_base_offsets(cluster, broker, topic)) and bases[0] > 0
                   or None, 60, f"local retention on broker {broker} after the store came back")
    expected = [value(i) for i in range(RECORDS)]
    assert read_all_confluent(cluster, topic, RECORDS) == expected
    # Every abandoned upload was deleted, and the store holds readable segments only.
    def settled() -> bool | None:
        cache = RemoteLogMetadataCache()
        for r in metadata_records(cluster):
            cache.replay(r)
        segments = [s for index in cache.partitions.values() for s in index.segments.values()
                    if s.segment.topic == topic]
        in_store = {os.path.basename(p)[:-4] for p in remote_objects(cluster, topic)}
        return (bool(segments) and all(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                                       for s in segments)
                and in_store == {str(s.segment.segment_id) for s in segments}) or None
    wait_until(settled, 30, "only finished segments in the metadata and in the store")
    if not s3:
        shutil.rmtree(hidden, ignore_errors=True)
