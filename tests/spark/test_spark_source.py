"""The ``ketch`` Spark data source against a real 3+3 cluster and a real local SparkSession
(issue 14): batch and streaming reads with Spark's Kafka source schema and options, writes,
checkpoints, the group-commit option and a broker killed under a streaming query.

One cluster and one SparkSession for the module (local[2], UI off)."""
from __future__ import annotations

import shutil
import threading

import pytest

from clients.admin import NewTopic
from clients.producer import Producer
from clients.types import TopicPartition
from tests.integration.integration_helpers import STOP_TIMEOUT_S, admin_for, start_cluster, wait_until

pyspark = pytest.importorskip("pyspark", reason="the spark extra (pyspark, pyarrow)")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java 17 (.ci/run installs openjdk-17-jre-headless)", allow_module_level=True)

pytestmark = [pytest.mark.process]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-spark")
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    from clients.spark import register
    session = (SparkSession.builder.master("local[2]").appName("ketch-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def produce(cluster, topic: str, values: list[tuple[int, bytes]], headers: bool = False) -> None:
    """(partition, value) pairs, acks=all; the key is the value's first byte."""
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all"})
    try:
        for partition, value in values:
            p.send(topic, key=value[:1], value=value, partition=partition,
                   headers=[("n", value)] if headers else None)
        p.flush()
    finally:
        p.close()


def create(cluster, topic: str, partitions: int) -> None:
    admin_for(cluster).create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])


def reader(spark, cluster, **options: str):
    r = spark.read.format("ketch").option("kafka.bootstrap.servers", cluster.spec.bootstrap_servers)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_a_batch_read_with_exact_offsets_returns_exactly_those_records(spark, cluster) -> None:
    create(cluster, "batch6", 6)
    produce(cluster, "batch6", [(p, b"%d-%d" % (p, i)) for p in range(6) for i in range(10)], headers=True)
    # As Spark's Kafka source: offsets JSON names every partition read (here, assigned).
    df = reader(spark, cluster, assign='{"batch6": [0, 3]}', includeHeaders="true",
                startingOffsets='{"batch6": {"0": 2, "3": -2}}',
                endingOffsets='{"batch6": {"0": 5, "3": 4}}')
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, bytes(r.value)) for r in rows] == \
        [(0, o, b"0-%d" % o) for o in (2, 3, 4)] + [(3, o, b"3-%d" % o) for o in range(4)]
    for r in rows:
        assert r.topic == "batch6" and bytes(r.key) == bytes(r.value)[:1] and r.timestampType == 0
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("n", bytes(r.value))]
        assert r.timestamp.year >= 2024
    everything = reader(spark, cluster, subscribe="batch6").count()
    assert everything == 60


def test_read_committed_reads_committed_transactions_up_to_the_lso(spark, cluster) -> None:
    """Needs the transaction coordinator and markers (issue 15): runs after the merge."""
    create(cluster, "txn1", 1)
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                  "transactional.id": "spark-txn"})
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send("txn1", b"c%d" % i, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(2):
            p.send("txn1", b"a%d" % i, partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send("txn1", b"open", partition=0)
        p.flush()             # written, left open: the LSO stays before it
        committed = reader(spark, cluster, subscribe="txn1",
                           **{"kafka.isolation.level": "read_committed"}).collect()
        assert sorted(bytes(r.value) for r in committed) == [b"c0", b"c1", b"c2"]
        everything = reader(spark, cluster, subscribe="txn1").collect()
        assert sorted(bytes(r.value) for r in everything) == [b"a0", b"a1", b"c0", b"c1", b"c2",
                                                               b"open"]
        p.abort_transaction()
    finally:
        p.close()


def test_a_batch_write_then_read_round_trips_keys_values_and_headers(spark, cluster) -> None:
    from pyspark.sql.types import (ArrayType, BinaryType, StringType, StructField, StructType)
    create(cluster, "written", 2)
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("headers", ArrayType(StructType([
                             StructField("key", StringType()), StructField("value", BinaryType())])))])
    data = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(50)]
    (spark.createDataFrame(data, schema).write.format("ketch")
     .option("kafka.bootstrap.servers", cluster.spec.bootstrap_servers).option("topic", "written")
     .mode("append").save())
    back = reader(spark, cluster, subscribe="written", includeHeaders="true").collect()
    assert sorted((bytes(r.key), bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers])
                  for r in back) == sorted((k, v, [(hk, hv) for hk, hv in h]) for k, v, h in data)


def test_bad_options_are_named(spark, cluster) -> None:
    from pyspark.errors import PySparkException
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("ketch").option("subscribe", "x").load().collect()
    with pytest.raises(Exception, match="subscribe"):
        reader(spark, cluster).collect()
    with pytest.raises(Exception, match="no-such-topic"):
        reader(spark, cluster, subscribe="no-such-topic").collect()
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, cluster, subscribe="batch6", startingOffsets='{"batch6": {0: 1').collect()
    with pytest.raises(Exception, match="batch6-9"):
        reader(spark, cluster, assign='{"batch6": [0, 9]}').collect()
    assert PySparkException is not None


class Sink:
    """foreachBatch target: every (partition, offset, value) once per micro-batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, bytes]] = []
        self.batches = 0
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        got = [(r.partition, r.offset, bytes(r.value)) for r in df.collect()]
        with self.lock:
            if got:
                self.batches += 1
            self.rows += got


def stream(spark, cluster, topic: str, checkpoint: str, sink: Sink, **options: str):
    r = (spark.readStream.format("ketch")
         .option("kafka.bootstrap.servers", cluster.spec.bootstrap_servers)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return (r.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


def test_streaming_with_max_offsets_per_trigger_restarts_from_its_checkpoint_exactly_once(
        spark, cluster, tmp_path) -> None:
    create(cluster, "events", 3)
    produce(cluster, "events", [(i % 3, b"a%d" % i) for i in range(90)])
    checkpoint = str(tmp_path / "ckpt")
    first = Sink()
    q = stream(spark, cluster, "events", checkpoint, first, maxOffsetsPerTrigger="30",
               commitOffsetsToGroup="spark-events")
    q.awaitTermination(300)
    assert q.exception() is None
    assert len(first.rows) == 90 and first.batches == 3          # 90 records, 30 a trigger
    # The group commit option: the group's committed offsets are the log ends (lag 0).
    admin = admin_for(cluster)
    committed = wait_until(lambda: (c := admin.list_consumer_group_offsets("spark-events"))
                           and sum(o.offset for o in c.values()) == 90 and c, 30,
                           "the query's offsets committed to its group")
    assert {tp.partition: o.offset for tp, o in committed.items()} == {0: 30, 1: 30, 2: 30}
    produce(cluster, "events", [(i % 3, b"b%d" % i) for i in range(30)])
    second = Sink()
    q = stream(spark, cluster, "events", checkpoint, second, maxOffsetsPerTrigger="30")
    q.awaitTermination(300)
    assert q.exception() is None
    assert sorted(v for _, _, v in second.rows) == sorted(b"b%d" % i for i in range(30))
    everything = first.rows + second.rows
    assert len(set(everything)) == len(everything) == 120          # each record exactly once


def test_a_leader_killed_during_a_streaming_query_loses_nothing(spark, cluster, tmp_path) -> None:
    create(cluster, "failover", 3)
    produce(cluster, "failover", [(i % 3, b"f%d" % i) for i in range(300)])
    leaders = {p.partition: p.leader
               for p in admin_for(cluster).describe_topics(["failover"])["failover"].partitions}
    victim = leaders[0]
    sink = Sink()
    r = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", cluster.spec.bootstrap_servers)
         .option("subscribe", "failover").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "20").load())
    q = (r.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="100 milliseconds").start())
    try:
        wait_until(lambda: len(sink.rows) >= 40, 120, "the query under way")
        cluster.kill_node(victim)
        wait_until(lambda: len(sink.rows) >= 300 or q.exception() is not None, 180,
                   "every record through the query")
        assert q.exception() is None
    finally:
        q.stop()
        cluster.start_node(victim)
        cluster.wait_until_ready(60)        # registered and unfenced: later topics need RF 3
    values = [v for _, _, v in sink.rows]
    assert sorted(values) == sorted(b"f%d" % i for i in range(300))
    assert TopicPartition("failover", 0) is not None


def test_the_example_pipeline_counts_clicks_per_page_and_window(spark, cluster, tmp_path) -> None:
    import collections
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "clicks_pipeline.py"
    spec = importlib.util.spec_from_file_location("clicks_pipeline", path)
    pipeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pipeline)
    create(cluster, pipeline.CLICKS, 3)
    events = pipeline.random_events(400, seed=7)
    pipeline.produce_clicks(cluster.spec.bootstrap_servers, events)
    query = pipeline.build_query(spark, cluster.spec.bootstrap_servers, str(tmp_path / "ck"),
                                 available_now=True)
    query.awaitTermination(300)
    assert query.exception() is None
    expected = collections.Counter((e["page"], e["ts"] // 60_000 * 60) for e in events)
    got = wait_until(lambda: (c := pipeline.latest_counts(cluster.spec.bootstrap_servers))
                     and c == dict(expected) and c, 60, "the window counts in click-counts")
    assert sum(got.values()) == 400
    # Its progress went to the group: no lag after the last batch.
    committed = admin_for(cluster).list_consumer_group_offsets(pipeline.GROUP)
    assert sum(o.offset for o in committed.values()) == 400
