"""Issue 19 from the outside: config changes take effect live, on leader and followers.

One 3+3 cluster for the module. Each test changes a config of a live topic (or a broker)
through the wire (IncrementalAlterConfigs, legacy AlterConfigs, real admin clients), waits
until every broker's DescribeConfigs shows the change (one metadata propagation), and then
observes the effect where a user would: produce answers (Kafka error codes), consumed
records, ListOffsets, and the segment files of every replica under each broker's log dir.

Kafka's behaviour these tests hold Ketch to (apache/kafka, for reference):
- ``LogValidator``: a keyless record on a compacted topic and a timestamp outside
  ``message.timestamp.before/after.max.ms`` are refused per record (INVALID_RECORD,
  INVALID_TIMESTAMP); a batch over ``max.message.bytes`` is MESSAGE_TOO_LARGE.
- ``ConfigHelper``: DescribeConfigs sources (DYNAMIC_TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2,
  DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4, DEFAULT_CONFIG 5) and synonyms in
  that order, broker-key synonyms in ``DynamicBrokerConfig.brokerConfigSynonyms`` order.
- ``ConfigAdminManager``: a read-only broker key is INVALID_REQUEST ("Cannot update these
  configs dynamically"); ``ConfigurationControlManager``: a bad topic value or an unknown
  topic key is INVALID_CONFIG ("Unknown topic config name: x"); nothing of a refused
  resource is applied. (Kafka stores an unknown *broker* key as a custom config; issue 19
  asks Ketch to refuse it with INVALID_CONFIG as well, so a typo does not pass silently.)

The cluster-wide default (BROKER resource "") goes through Ketch's codec: librdkafka,
kafka-python and aiokafka all refuse an empty broker name on the client side. Two tests
stop broker 1 and start it again: max.message.bytes (a controlled shutdown, so that a
follower leads) and, last, unclean election (SIGKILL).
"""
from __future__ import annotations

import glob
import os
import signal
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from clients.clock import now_ms
from clients.protocol import ApiKey, messages
from clients.protocol.configs import ConfigSource
from clients.protocol.errors import ErrorCode
from clients.records import Record, TimestampType, build_batch, decode_batches, iter_batches
from integration_helpers import (
    STOP_TIMEOUT_S, partition_states, roundtrip, start_cluster, wait_until,
)

pytestmark = [pytest.mark.process]

# Short background intervals so that retention and the cleaner act within seconds.
BROKER_PROPS = {
    "log.retention.check.interval.ms": "300",
    "log.cleaner.backoff.ms": "200",
    "log.segment.delete.delay.ms": "0",
}

TOPIC, BROKER = 2, 4                       # ConfigResource types
SET, DELETE = 0, 1                         # IncrementalAlterConfigs operations
# DescribeConfigs' config_source values: the wire enum's one home.
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = (
    ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG)
# Kafka's documented default written out, as an oracle independent of the catalogue.
DEFAULT_MESSAGE_MAX_BYTES = "1048588"
PROPAGATION_S = 15.0                       # bound on a config reaching every broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "dynconf", broker_props=BROKER_PROPS)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


# ---------------------------------------------------------------- wire helpers


def port_of(cluster, broker_id: int) -> int:
    return cluster.spec.node(broker_id).port


def live_ports(cluster) -> list[int]:
    return [b.port for b in cluster.spec.brokers
            if cluster.processes.get(b.id) is not None and cluster.processes[b.id].poll() is None]


def new_topic(cluster, prefix: str, configs: dict[str, str] | None = None,
              replicas: list[int] | None = None) -> str:
    """A one-partition topic (replicas in order, the first is the preferred leader), with
    its leader and full ISR visible on every live broker."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    replicas = replicas or [1, 2, 3]
    cls = messages.CreateTopicsRequest
    req = cls(topics=[cls.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[cls.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])], timeout_ms=30000, validate_only=False)
    resp = roundtrip(live_ports(cluster)[0], ApiKey.CREATE_TOPICS, 5, req, timeout_s=40)
    (t,) = resp.topics
    assert t.error_code == ErrorCode.NONE, (t.error_code, t.error_message)

    def ready() -> bool:
        for p in live_ports(cluster):
            s = partition_states(cluster, name, port=p).get(0)
            if s is None or s.leader != replicas[0] or set(s.isr) != set(replicas):
                return False
        return True
    wait_until(ready, 30, f"{name} led by {replicas[0]} with a full ISR everywhere")
    return name


def alter(port: int, resource_type: int, name: str, ops: dict[str, tuple[int, str | None]],
          validate_only: bool = False) -> Any:
    """IncrementalAlterConfigs of one resource; its AlterConfigsResourceResponse."""
    cls = messages.IncrementalAlterConfigsRequest
    req = cls(resources=[cls.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[cls.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, (op, v) in ops.items()])], validate_only=validate_only)
    (r,) = roundtrip(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req, timeout_s=30).responses
    return r


def alter_ok(port: int, resource_type: int, name: str, ops: dict[str, tuple[int, str | None]]) -> None:
    r = alter(port, resource_type, name, ops)
    assert r.error_code == ErrorCode.NONE, (ErrorCode(r.error_code).name, r.error_message)


def set_topic(cluster, topic: str, **configs: str) -> None:
    """Set topic configs (``segment_bytes="1024"`` for segment.bytes) and wait until every
    live broker describes them."""
    named = {k.replace("_", "."): v for k, v in configs.items()}
    alter_ok(live_ports(cluster)[0], TOPIC, topic, {k: (SET, v) for k, v in named.items()})
    for k, v in named.items():
        wait_described_everywhere(cluster, TOPIC, topic, k, v)


def legacy_alter(port: int, resource_type: int, name: str, configs: dict[str, str],
                 validate_only: bool = False) -> Any:
    """AlterConfigs (API 33): the resource's whole set of dynamic configs."""
    cls = messages.AlterConfigsRequest
    req = cls(resources=[cls.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[cls.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    (r,) = roundtrip(port, ApiKey.ALTER_CONFIGS, 1, req, timeout_s=30).responses
    return r


def describe(port: int, resource_type: int, name: str, keys: list[str] | None = None,
             version: int = 4) -> dict[str, Any]:
    """DescribeConfigs with synonyms and documentation: name -> DescribeConfigsResourceResult."""
    cls = messages.DescribeConfigsRequest
    req = cls(resources=[cls.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                     configuration_keys=keys)],
              include_synonyms=True, include_documentation=True)
    (r,) = roundtrip(port, ApiKey.DESCRIBE_CONFIGS, version, req).results
    assert r.error_code == ErrorCode.NONE, (ErrorCode(r.error_code).name, r.error_message)
    return {c.name: c for c in r.configs}


def described(port: int, resource_type: int, name: str, key: str) -> Any:
    return describe(port, resource_type, name, [key]).get(key)


def wait_described_everywhere(cluster, resource_type: int, name: str, key: str, value: str | None) -> None:
    """Until every live broker's DescribeConfigs shows ``key`` = ``value`` for a topic
    (for a broker resource: the broker itself, or every broker for the cluster default)."""
    if resource_type == BROKER and name:
        ports = [port_of(cluster, int(name))]
    else:
        ports = live_ports(cluster)

    def probe() -> bool:
        for p in ports:
            entry = described(p, resource_type, name, key)
            if (entry.value if entry is not None else None) != value:
                return False
        return True
    wait_until(probe, PROPAGATION_S, f"{key}={value} described for {name or 'the cluster default'}")


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def produce(port: int, topic: str, records: list[Record], acks: int = -1,
            timestamp_type: TimestampType = TimestampType.CREATE_TIME, version: int = 9) -> Any:
    """One batch to partition 0 on the broker at ``port``; its PartitionProduceResponse."""
    cls = messages.ProduceRequest
    data = build_batch(records, timestamp_type=timestamp_type)
    req = cls(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[cls.TopicProduceData(
        name=topic, partition_data=[cls.TopicProduceData.PartitionProduceData(index=0, records=data)])])
    return roundtrip(port, ApiKey.PRODUCE, version, req, timeout_s=30).responses[0].partition_responses[0]


def records(n: int, value_size: int = 100, key: bytes | None = b"k", ts: int | None = None) -> list[Record]:
    ts = now_ms() if ts is None else ts
    return [Record(offset=i, timestamp=ts, key=key, value=bytes([65 + i % 26]) * value_size) for i in range(n)]


def produce_ok(port: int, topic: str, recs: list[Record], acks: int = -1) -> int:
    r = produce(port, topic, recs, acks)
    assert r.error_code == ErrorCode.NONE, (ErrorCode(r.error_code).name, r.error_message)
    return r.base_offset


def list_offset(port: int, topic: str, timestamp: int) -> int:
    """ListOffsets for partition 0: -2 earliest (the log start offset), -1 latest."""
    cls = messages.ListOffsetsRequest
    resp = roundtrip(port, ApiKey.LIST_OFFSETS, 7, cls(
        replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(name=topic, partitions=[
            cls.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))
    (p,) = resp.topics[0].partitions
    assert p.error_code == ErrorCode.NONE, ErrorCode(p.error_code).name
    return p.offset


# ---------------------------------------------------------------- files on disk


@dataclass(frozen=True, slots=True)
class SegmentFile:
    base_offset: int          # from the file name
    size: int
    batches: tuple            # decoded RecordBatch objects, whole batches only


def segment_files(cluster, broker_id: int, topic: str) -> list[SegmentFile]:
    """The replica's ``.log`` segments of partition 0, in offset order (a file deleted
    while it is being read is left out)."""
    out = []
    directory = os.path.join(cluster.spec.node(broker_id).data_dir, f"{topic}-0")
    for path in sorted(glob.glob(os.path.join(directory, "*.log"))):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        positions = [(pos, h.size_in_bytes) for pos, h in iter_batches(data, partial_tail_ok=True)]
        end = positions[-1][0] + positions[-1][1] if positions else 0
        out.append(SegmentFile(int(os.path.basename(path).split(".")[0]), len(data),
                               tuple(decode_batches(data[:end]))))
    return sorted(out, key=lambda s: s.base_offset)


def replica_ids(cluster, topic: str) -> tuple[int, ...]:
    return partition_states(cluster, topic)[0].replicas


def full_isr(cluster, topic: str) -> bool:
    s = partition_states(cluster, topic)[0]
    return set(s.isr) == set(s.replicas)


# ---------------------------------------------------------------- topic configs


def test_lowered_max_message_bytes_refuses_a_larger_record(cluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    topic = new_topic(cluster, "maxbytes")
    producer = KafkaProducer(bootstrap_servers=cluster.spec.bootstrap_servers, acks="all", retries=0,
                             max_request_size=1 << 20)
    try:
        big, small = b"x" * 50_000, b"y" * 5_000
        assert producer.send(topic, key=b"k", value=big, partition=0).get(30).offset == 0
        set_topic(cluster, topic, max_message_bytes="10000")
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, key=b"k", value=big, partition=0).get(30)
        assert producer.send(topic, key=b"k", value=small, partition=0).get(30).offset == 1
    finally:
        producer.close(timeout=10)
    # The same through the raw codec: Kafka's code, a message, nothing appended.
    leader = port_of(cluster, 1)
    r = produce(leader, topic, records(1, 20_000))
    assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE, ErrorCode(r.error_code).name
    assert r.error_message
    assert list_offset(leader, topic, -1) == 2
    # The followers hold the change too: after a controlled shutdown of the leader, the
    # new leader refuses the same record.
    assert cluster.stop_node(1, timeout_s=30) == 0
    try:
        state = wait_until(lambda: (s := partition_states(cluster, topic)[0]).leader in (2, 3) and s,
                           30, "a new leader")
        new_leader = port_of(cluster, state.leader)
        r = produce(new_leader, topic, records(1, 20_000))
        assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE, ErrorCode(r.error_code).name
        produce_ok(new_leader, topic, records(1, 5_000))
    finally:
        cluster.start_node(1)
        cluster.wait_until_ready(60)
    wait_until(lambda: full_isr(cluster, topic), 60, "broker 1 back in the ISR")


def test_compact_policy_refuses_keyless_records_and_compacts_every_replica(cluster) -> None:
    topic = new_topic(cluster, "compact", {"segment.bytes": "1024"})
    leader = port_of(cluster, 1)
    keys = [b"key-%d" % i for i in range(6)]
    latest: dict[bytes, tuple[int, bytes]] = {}        # key -> (offset, value) last written
    written: list[tuple[int, bytes, bytes]] = []
    for round_ in range(14):
        recs = [Record(offset=i, timestamp=now_ms(), key=k, value=b"round-%02d-" % round_ + k + b"." * 60)
                for i, k in enumerate(keys)]
        base = produce_ok(leader, topic, recs)
        for i, r in enumerate(recs):
            written.append((base + i, r.key, r.value))
    # Keyless records are fine under cleanup.policy=delete...
    assert produce(leader, topic, records(1, key=None)).error_code == ErrorCode.NONE
    set_topic(cluster, topic, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    end = list_offset(leader, topic, -1)
    # ...and refused once the topic is compacted (Kafka's LogValidator.validateKey).
    r = produce(leader, topic, records(1, key=None))
    assert r.error_code == ErrorCode.INVALID_RECORD, ErrorCode(r.error_code).name
    assert r.error_message, "INVALID_RECORD without a message"
    assert list_offset(leader, topic, -1) == end, "a refused keyless record was appended"
    # A few more keyed records, so the keyless one sits in a segment below the active one.
    for round_ in range(14, 17):
        recs = [Record(offset=i, timestamp=now_ms(), key=k, value=b"round-%02d-" % round_ + k + b"." * 60)
                for i, k in enumerate(keys)]
        base = produce_ok(leader, topic, recs)
        for i, r in enumerate(recs):
            written.append((base + i, r.key, r.value))
    for offset, key, value in written:
        latest[key] = (offset, value)

    def compacted(broker_id: int) -> bool:
        files = segment_files(cluster, broker_id, topic)
        if len(files) < 2:
            return False
        active_base = files[-1].base_offset
        below = [(r.offset, r.key, r.value) for f in files[:-1] for b in f.batches for r in b.records]
        expected = {}
        for offset, key, value in written:
            if offset < active_base:
                expected[key] = (offset, value)
        kept = {}
        for offset, key, value in below:
            if key is None or key in kept:
                return False          # a keyless record or an older value is still there
            kept[key] = (offset, value)
        return kept == expected

    for b in replica_ids(cluster, topic):
        wait_until(lambda: compacted(b), 30, f"broker {b}'s log of {topic} compacted below the active segment")
    # Nothing acknowledged is lost: the latest value of every key is still on every replica.
    for b in replica_ids(cluster, topic):
        on_disk = {(r.offset, r.key, r.value) for f in segment_files(cluster, b, topic)
                   for batch in f.batches for r in batch.records}
        assert {(o, k, v) for k, (o, v) in latest.items()} <= on_disk, f"broker {b} lost a latest value"


def test_lowered_retention_deletes_old_segments_on_every_replica(cluster) -> None:
    topic = new_topic(cluster, "retention", {"segment.bytes": "1024"})
    leader = port_of(cluster, 1)
    for _ in range(24):
        produce_ok(leader, topic, records(3, 120))
    replicas = replica_ids(cluster, topic)
    before = {b: segment_files(cluster, b, topic) for b in replicas}
    assert all(len(files) >= 8 for files in before.values()), {b: len(f) for b, f in before.items()}
    assert list_offset(leader, topic, -2) == 0

    # retention.bytes: the oldest segments go until the log fits.
    set_topic(cluster, topic, retention_bytes="3000")
    start = wait_until(lambda: list_offset(leader, topic, -2), 30, "the log start offset to move")

    def trimmed(b: int, limit: int) -> bool:
        files = segment_files(cluster, b, topic)
        return sum(f.size for f in files) <= limit and files[0].base_offset > 0
    for b in replicas:
        wait_until(lambda: trimmed(b, 3000 + 1024), 30, f"broker {b} to delete segments by retention.bytes")
    assert list_offset(leader, topic, -2) >= start

    # retention.ms: every segment older than that goes, up to the active one.
    last_base = max(f.base_offset for f in segment_files(cluster, 1, topic))
    set_topic(cluster, topic, retention_ms="1000")
    wait_until(lambda: list_offset(leader, topic, -2) >= last_base, 30,
               f"the log start offset to reach {last_base} (retention.ms)")
    for b in replicas:
        wait_until(lambda: all(f.base_offset >= last_base for f in segment_files(cluster, b, topic)), 30,
                   f"broker {b} to delete every segment below {last_base}")
    # Still writable, offsets go on.
    assert produce_ok(leader, topic, records(1)) >= last_base


def test_segment_bytes_and_segment_ms_roll_new_segments_on_every_replica(cluster) -> None:
    topic = new_topic(cluster, "segments")
    leader = port_of(cluster, 1)
    for _ in range(3):
        produce_ok(leader, topic, records(1, 300))
    replicas = replica_ids(cluster, topic)
    assert all(len(segment_files(cluster, b, topic)) == 1 for b in replicas)
    set_topic(cluster, topic, segment_bytes="2048")
    # acks=all with the full ISR: every follower has each batch before the next is sent, so
    # followers append batch by batch, as the leader does.
    assert full_isr(cluster, topic)
    for _ in range(20):
        produce_ok(leader, topic, records(1, 400))
    for b in replicas:
        files = segment_files(cluster, b, topic)
        assert len(files) >= 5, f"broker {b}: {[(f.base_offset, f.size) for f in files]}"
        assert all(f.size <= 2048 for f in files), f"broker {b}: {[(f.base_offset, f.size) for f in files]}"

    # segment.ms: time-based rolls, with segment.bytes back at its default.
    alter_ok(leader, TOPIC, topic, {"segment.bytes": (DELETE, None), "segment.ms": (SET, "1000")})
    wait_described_everywhere(cluster, TOPIC, topic, "segment.ms", "1000")
    counts = {b: len(segment_files(cluster, b, topic)) for b in replicas}

    def rolled_by_time() -> bool:
        produce_ok(leader, topic, records(1, 10))
        return all(len(segment_files(cluster, b, topic)) >= counts[b] + 2 for b in replicas)
    wait_until(rolled_by_time, 30, "two time-based rolls on every replica", interval_s=0.3)


def test_index_interval_bytes_densifies_the_offset_index_on_every_replica(cluster) -> None:
    """Kafka's offset index gets an 8-byte entry after index.interval.bytes of log; at 0,
    one per batch but a segment's first. Followers index what they append by their own copy
    of the config. Index bytes reach the file when a segment rolls (flushed then), so the
    rolled segments are the ones compared."""
    topic = new_topic(cluster, "index", {"segment.bytes": "6000"})
    leader = port_of(cluster, 1)
    replicas = replica_ids(cluster, topic)

    def index_sizes(b: int) -> dict[int, int]:
        """Rolled segments (all but the last): base offset -> bytes of offset index."""
        directory = os.path.join(cluster.spec.node(b).data_dir, f"{topic}-0")
        bases = [f.base_offset for f in segment_files(cluster, b, topic)][:-1]
        out = {}
        for base in bases:
            path = os.path.join(directory, f"{base:020d}.index")
            out[base] = os.path.getsize(path) if os.path.exists(path) else 0
        return out

    for _ in range(14):                      # ~470 bytes a batch: the first roll at 12
        produce_ok(leader, topic, records(1, 400))
    assert full_isr(cluster, topic)
    for b in replicas:
        sizes = wait_until(lambda: index_sizes(b), 15, f"broker {b} to roll a segment")
        assert sizes[0] <= 8, f"broker {b}: {sizes}"          # one entry at 4096 bytes
    set_topic(cluster, topic, index_interval_bytes="0")
    changed_at = list_offset(leader, topic, -1)
    for _ in range(26):
        produce_ok(leader, topic, records(1, 400))
    for b in replicas:
        dense = {base: size for base, size in index_sizes(b).items() if base >= changed_at}
        assert dense and all(size >= 10 * 8 for size in dense.values()), f"broker {b}: {index_sizes(b)}"


def test_a_restarted_follower_applies_the_live_config(cluster) -> None:
    """A config changed live is in the metadata log, so a broker that restarts loads its
    replicas with it (not with the static defaults): its new segments roll at the size set."""
    topic = new_topic(cluster, "restart")
    leader = port_of(cluster, 1)
    set_topic(cluster, topic, segment_bytes="2048")
    assert cluster.stop_node(3, timeout_s=30) == 0
    cluster.start_node(3)
    cluster.wait_until_ready(60)
    wait_until(lambda: full_isr(cluster, topic), 60, "broker 3 back in the ISR")
    for _ in range(12):
        produce_ok(leader, topic, records(1, 400))
    files = segment_files(cluster, 3, topic)
    assert len(files) >= 3 and all(f.size <= 2048 for f in files), [(f.base_offset, f.size) for f in files]


def test_log_append_time_and_timestamp_bounds(cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    leader = port_of(cluster, 1)
    # Bounds on CreateTime: accepted before the change, refused after it.
    bounded = new_topic(cluster, "tsbounds")
    hour = 3_600_000
    assert produce(leader, bounded, records(1, ts=now_ms() - 2 * hour)).error_code == ErrorCode.NONE
    assert produce(leader, bounded, records(1, ts=now_ms() + 2 * hour)).error_code == ErrorCode.NONE
    set_topic(cluster, bounded, message_timestamp_before_max_ms=str(hour),
              message_timestamp_after_max_ms=str(hour))
    for ts in (now_ms() - 2 * hour, now_ms() + 2 * hour):
        r = produce(leader, bounded, records(1, ts=ts))
        assert r.error_code == ErrorCode.INVALID_TIMESTAMP, ErrorCode(r.error_code).name
    assert produce(leader, bounded, records(1)).error_code == ErrorCode.NONE
    assert list_offset(leader, bounded, -1) == 3

    # LogAppendTime: the broker's clock replaces the producer's timestamp.
    topic = new_topic(cluster, "appendtime")
    set_topic(cluster, topic, message_timestamp_type="LogAppendTime")
    t0 = now_ms()
    r = produce(leader, topic, records(3, ts=1_000_000))
    t1 = now_ms()
    assert r.error_code == ErrorCode.NONE
    assert t0 <= r.log_append_time_ms <= t1, (t0, r.log_append_time_ms, t1)
    consumer = KafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                got.extend(batch)
    finally:
        consumer.close()
    assert len(got) == 3
    assert all(m.timestamp_type == 1 and m.timestamp == r.log_append_time_ms for m in got), \
        [(m.timestamp_type, m.timestamp) for m in got]
    # Every replica stored the leader's batch: LogAppendTime with the append time.
    for b in replica_ids(cluster, topic):
        def stored() -> bool:
            batches = [x for f in segment_files(cluster, b, topic) for x in f.batches]
            return len(batches) == 1 and batches[0].header.timestamp_type == TimestampType.LOG_APPEND_TIME \
                and batches[0].header.max_timestamp == r.log_append_time_ms
        wait_until(stored, 15, f"broker {b} to hold the LogAppendTime batch")


def test_lowered_delete_retention_drops_new_tombstones_on_every_replica(cluster) -> None:
    """KIP-534: the cleaner's first pass over a tombstone stamps its batch with a delete
    horizon (now + delete.retention.ms); a later pass drops it once the horizon passed. A
    tombstone cleaned under the default (a day) stays; ones written after the change go."""
    topic = new_topic(cluster, "tombstones", {"cleanup.policy": "compact", "segment.bytes": "1024",
                                              "min.cleanable.dirty.ratio": "0.01"})
    leader = port_of(cluster, 1)
    replicas = replica_ids(cluster, topic)

    def put(pairs: list[tuple[bytes, bytes | None]]) -> int:
        return produce_ok(leader, topic, [Record(offset=i, timestamp=now_ms(), key=k, value=v)
                                          for i, (k, v) in enumerate(pairs)])

    def filler() -> bool:
        put([(b"filler-%d" % i, b"f" * 100) for i in range(3)])
        return True

    def below_active(b: int) -> list[tuple[bytes, bytes | None]]:
        files = segment_files(cluster, b, topic)
        return [(r.key, r.value) for f in files[:-1] for batch in f.batches for r in batch.records]

    put([(b"gone-%d" % i, b"v" * 100) for i in range(3)])
    put([(b"gone-0", None)])
    for b in replicas:
        def kept_as_tombstone() -> bool:
            filler()
            seen = [v for k, v in below_active(b) if k == b"gone-0"]
            return seen == [None]
        wait_until(kept_as_tombstone, 30, f"broker {b} to compact gone-0 down to its tombstone", interval_s=0.3)

    set_topic(cluster, topic, delete_retention_ms="1000")
    tombstones_at = put([(b"gone-1", None), (b"gone-2", None)])
    for b in replicas:
        def dropped() -> bool:
            filler()
            # Below the active segment only: the active one is never cleaned.
            if segment_files(cluster, b, topic)[-1].base_offset <= tombstones_at + 1:
                return False
            below = below_active(b)
            later = [k for k, _ in below if k in (b"gone-1", b"gone-2")]
            return not later and [v for k, v in below if k == b"gone-0"] == [None]
        wait_until(dropped, 30, f"broker {b} to drop the tombstones written after the change", interval_s=0.3)


def test_keyless_records_are_named_in_record_errors(cluster) -> None:
    """Produce v8+ (KIP-467): Kafka lists each refused record by its index in the batch, with
    "Compacted topic cannot accept message without key in topic partition <tp>"."""
    topic = new_topic(cluster, "recorderrors", {"cleanup.policy": "compact"})
    recs = [Record(offset=0, timestamp=now_ms(), key=b"k", value=b"v"),
            Record(offset=1, timestamp=now_ms(), key=None, value=b"v")]
    r = produce(port_of(cluster, 1), topic, recs, version=9)
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in r.record_errors] == [1], r.record_errors
    assert f"{topic}-0" in (r.record_errors[0].batch_index_error_message or ""), r.record_errors


def test_compression_type_and_file_delete_delay_reach_every_replica(cluster) -> None:
    from clients.records import CompressionType

    leader = port_of(cluster, 1)
    # compression.type=gzip: the leader recompresses what producers send uncompressed, and
    # followers store the leader's batch.
    topic = new_topic(cluster, "compression")
    produce_ok(leader, topic, records(4, 200))
    set_topic(cluster, topic, compression_type="gzip")
    produce_ok(leader, topic, records(4, 200))
    for b in replica_ids(cluster, topic):
        def stored() -> list:
            batches = [x for f in segment_files(cluster, b, topic) for x in f.batches]
            return len(batches) == 2 and batches
        first, second = wait_until(stored, 15, f"broker {b} to hold both batches")
        assert first.header.compression == CompressionType.NONE
        assert second.header.compression == CompressionType.GZIP, second.header
        assert [r.value for r in second.records] == [r.value for r in records(4, 200)]

    # file.delete.delay.ms: segments retention drops wait as *.log.deleted files (the broker
    # default here is 0: gone at once, as test_lowered_retention shows).
    topic = new_topic(cluster, "deletedelay", {"segment.bytes": "1024"})
    set_topic(cluster, topic, file_delete_delay_ms="600000")
    for _ in range(12):
        produce_ok(leader, topic, records(3, 120))
    set_topic(cluster, topic, retention_bytes="2048")
    for b in replica_ids(cluster, topic):
        directory = os.path.join(cluster.spec.node(b).data_dir, f"{topic}-0")
        wait_until(lambda: glob.glob(os.path.join(directory, "*.log.deleted"))
                   and segment_files(cluster, b, topic)[0].base_offset > 0, 30,
                   f"broker {b} to retire segments as .deleted files")


def test_raised_min_insync_replicas_refuses_acks_all_with_a_paused_follower(cluster) -> None:
    topic = new_topic(cluster, "minisr")
    leader = port_of(cluster, 1)
    follower = 3
    assert described(leader, TOPIC, topic, "min.insync.replicas").value == "1"
    produce_ok(leader, topic, records(2))
    cluster.signal_node(follower, signal.SIGSTOP)
    try:
        wait_until(lambda: follower not in partition_states(cluster, topic, port=leader)[0].isr, 30,
                   f"broker {follower} out of the ISR")
        # min.insync.replicas=1: acks=all works with two in the ISR.
        produce_ok(leader, topic, records(2))
        alter_ok(leader, TOPIC, topic, {"min.insync.replicas": (SET, "3")})
        # Once the leader describes the change, its very next acks=all append is refused.
        wait_until(lambda: described(leader, TOPIC, topic, "min.insync.replicas").value == "3",
                   PROPAGATION_S, "the leader to see min.insync.replicas=3")
        end = list_offset(leader, topic, -1)
        r = produce(leader, topic, records(2))
        assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode(r.error_code).name
        assert list_offset(leader, topic, -1) == end
        # acks=1 does not wait for the ISR.
        produce_ok(leader, topic, records(2), acks=1)
    finally:
        cluster.signal_node(follower, signal.SIGCONT)
    wait_until(lambda: full_isr(cluster, topic), 60, f"broker {follower} back in the ISR")
    produce_ok(leader, topic, records(2))


# ---------------------------------------------------------------- broker configs


def test_broker_and_cluster_default_configs_take_effect_with_their_sources(cluster) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})

    def incremental(resource_name: str, key: str, value: str | None) -> None:
        if not resource_name:
            # librdkafka refuses an empty broker name on the client side ("Invalid
            # ConfigResource(4,)"), as kafka-python does: the cluster default goes as the
            # Java admin client sends it, BROKER "" to any broker.
            alter_ok(live_ports(cluster)[0], BROKER, "", {key: (SET, value) if value is not None
                                                          else (DELETE, None)})
            return
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        resource = ConfigResource("broker", resource_name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op)])
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(30)

    # Per broker: message.max.bytes on broker 2 only, for a topic it leads without an override.
    led_by_2 = new_topic(cluster, "perbroker", replicas=[2, 3, 1])
    led_by_1 = new_topic(cluster, "perbroker", replicas=[1, 2, 3])
    p1, p2 = port_of(cluster, 1), port_of(cluster, 2)
    try:
        incremental("2", "message.max.bytes", "5000")
        wait_described_everywhere(cluster, BROKER, "2", "message.max.bytes", "5000")
        r = produce(p2, led_by_2, records(1, 8000))
        assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE, ErrorCode(r.error_code).name
        produce_ok(p2, led_by_2, records(1, 1000))
        produce_ok(p1, led_by_1, records(1, 8000))          # broker 1 keeps the default
        entry = described(p2, BROKER, "2", "message.max.bytes")
        assert (entry.value, entry.config_source, entry.read_only) == ("5000", DYNAMIC_BROKER, False)
        assert synonyms(entry) == [("message.max.bytes", "5000", DYNAMIC_BROKER),
                                   ("message.max.bytes", DEFAULT_MESSAGE_MAX_BYTES, DEFAULT)]
        topic_entry = described(p2, TOPIC, led_by_2, "max.message.bytes")
        assert (topic_entry.value, topic_entry.config_source) == ("5000", DYNAMIC_BROKER)
        assert synonyms(topic_entry) == synonyms(entry)
        other = described(p1, TOPIC, led_by_2, "max.message.bytes")
        assert (other.value, other.config_source) == (DEFAULT_MESSAGE_MAX_BYTES, DEFAULT)
    finally:
        incremental("2", "message.max.bytes", None)
    wait_described_everywhere(cluster, BROKER, "2", "message.max.bytes", DEFAULT_MESSAGE_MAX_BYTES)
    produce_ok(p2, led_by_2, records(1, 8000))

    # Cluster default: log.retention.ms for every broker, for a topic without its own.
    topic = new_topic(cluster, "clusterdefault", {"segment.bytes": "1024"})
    for _ in range(12):
        produce_ok(p1, topic, records(3, 120))
    entry = described(p1, TOPIC, topic, "retention.ms")
    assert (entry.value, entry.config_source) == ("604800000", DEFAULT)
    assert synonyms(entry) == [("log.retention.hours", "168", DEFAULT)]
    try:
        incremental("", "log.retention.ms", "1000")
        wait_described_everywhere(cluster, BROKER, "", "log.retention.ms", "1000")
        cluster_entry = describe(p1, BROKER, "")["log.retention.ms"]
        assert cluster_entry.config_source == DYNAMIC_DEFAULT_BROKER
        last_base = max(f.base_offset for f in segment_files(cluster, 1, topic))
        wait_until(lambda: list_offset(p1, topic, -2) >= last_base, 30,
                   "the cluster-default retention to delete old segments")
        for b in replica_ids(cluster, topic):
            wait_until(lambda: all(f.base_offset >= last_base for f in segment_files(cluster, b, topic)),
                       30, f"broker {b} to delete every segment below {last_base}")
        # Describe shows every layer, the one in force first (Kafka's synonym order).
        entry = described(p1, TOPIC, topic, "retention.ms")
        assert (entry.value, entry.config_source) == ("1000", DYNAMIC_DEFAULT_BROKER)
        assert synonyms(entry) == [("log.retention.ms", "1000", DYNAMIC_DEFAULT_BROKER),
                                   ("log.retention.hours", "168", DEFAULT)]
        incremental("1", "log.retention.ms", "86400000")
        wait_described_everywhere(cluster, BROKER, "1", "log.retention.ms", "86400000")
        entry = described(p1, TOPIC, topic, "retention.ms")
        assert (entry.value, entry.config_source) == ("86400000", DYNAMIC_BROKER)
        assert synonyms(entry) == [("log.retention.ms", "86400000", DYNAMIC_BROKER),
                                   ("log.retention.ms", "1000", DYNAMIC_DEFAULT_BROKER),
                                   ("log.retention.hours", "168", DEFAULT)]
        set_topic(cluster, topic, retention_ms="7200000")
        entry = described(p1, TOPIC, topic, "retention.ms")
        assert (entry.value, entry.config_source) == ("7200000", DYNAMIC_TOPIC)
        assert synonyms(entry)[0] == ("retention.ms", "7200000", DYNAMIC_TOPIC)
        assert [s[2] for s in synonyms(entry)] == [DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, DEFAULT]
    finally:
        incremental("1", "log.retention.ms", None)
        incremental("", "log.retention.ms", None)
    wait_described_everywhere(cluster, BROKER, "", "log.retention.ms", None)

    # Static: server.properties sets min.insync.replicas (the launcher writes 1).
    entry = described(p1, TOPIC, topic, "min.insync.replicas")
    assert (entry.value, entry.config_source) == ("1", STATIC_BROKER)
    assert synonyms(entry) == [("min.insync.replicas", "1", STATIC_BROKER), ("min.insync.replicas", "1", DEFAULT)]
    # Read-only and documented.
    configs = describe(p1, BROKER, "1")
    assert configs["node.id"].read_only and configs["node.id"].value == "1"
    assert configs["node.id"].config_source == STATIC_BROKER
    assert not configs["message.max.bytes"].read_only
    assert described(p1, TOPIC, topic, "retention.ms").documentation
    assert configs["message.max.bytes"].documentation


def test_per_broker_segment_bytes_rolls_only_that_brokers_replica(cluster) -> None:
    """Each broker resolves a topic's config through its own layers: log.segment.bytes set
    on broker 3 alone makes its follower replica roll small, the leader's does not."""
    topic = new_topic(cluster, "perbrokerroll", replicas=[1, 2, 3])
    p1, p3 = port_of(cluster, 1), port_of(cluster, 3)
    try:
        alter_ok(p3, BROKER, "3", {"log.segment.bytes": (SET, "2048")})
        wait_described_everywhere(cluster, BROKER, "3", "log.segment.bytes", "2048")
        assert described(p3, TOPIC, topic, "segment.bytes").config_source == DYNAMIC_BROKER
        assert full_isr(cluster, topic)
        for _ in range(12):
            produce_ok(p1, topic, records(1, 400))
        rolled = segment_files(cluster, 3, topic)
        assert len(rolled) >= 3 and all(f.size <= 2048 for f in rolled), [(f.base_offset, f.size) for f in rolled]
        assert len(segment_files(cluster, 1, topic)) == 1
        assert len(segment_files(cluster, 2, topic)) == 1
    finally:
        alter_ok(p3, BROKER, "3", {"log.segment.bytes": (DELETE, None)})


def test_kafkas_whole_broker_catalogue_is_known(cluster) -> None:
    """Keys Ketch does not act on are still Kafka's: described with their defaults,
    alterable where Kafka allows it, passwords marked sensitive."""
    p1 = port_of(cluster, 1)
    configs = describe(p1, BROKER, "1")
    kerberos = configs.get("sasl.kerberos.min.time.before.relogin")
    assert kerberos is not None, "sasl.kerberos.min.time.before.relogin is not described"
    # Kafka lists it among DynamicListenerConfig's reconfigurable keys: settable per broker.
    assert (kerberos.value, kerberos.config_source, kerberos.read_only) == ("60000", DEFAULT, False)
    r = alter(p1, BROKER, "1", {"sasl.kerberos.min.time.before.relogin": (SET, "30000")}, validate_only=True)
    assert r.error_code == ErrorCode.NONE, (ErrorCode(r.error_code).name, r.error_message)
    password = configs.get("ssl.keystore.password")
    assert password is not None and password.is_sensitive and password.value is None


def test_read_only_broker_keys_are_refused_with_invalid_request(cluster) -> None:
    """Kafka's ConfigAdminManager turns DynamicBrokerConfig's "Cannot update these configs
    dynamically: ..." ConfigException into InvalidRequestException (KAFKA-13609 keeps it so
    for compatibility), for IncrementalAlterConfigs and AlterConfigs alike."""
    p1 = port_of(cluster, 1)
    for key, value in (("node.id", "7"), ("log.dirs", "/tmp/elsewhere")):
        r = alter(p1, BROKER, "1", {key: (SET, value), "message.max.bytes": (SET, "4000")})
        assert r.error_code == ErrorCode.INVALID_REQUEST, (key, ErrorCode(r.error_code).name, r.error_message)
        assert key in (r.error_message or ""), r.error_message
        r = legacy_alter(p1, BROKER, "1", {key: value, "message.max.bytes": "4000"})
        assert r.error_code == ErrorCode.INVALID_REQUEST, (key, ErrorCode(r.error_code).name, r.error_message)
    # A per-broker-only key at the cluster default: "Cannot update these configs at default
    # cluster level, broker id must be specified", the same InvalidRequestException.
    r = alter(p1, BROKER, "", {"listener.name.plaintext.ssl.keystore.location": (SET, "/x")})
    assert r.error_code == ErrorCode.INVALID_REQUEST, (ErrorCode(r.error_code).name, r.error_message)


def test_listener_prefixed_keys_are_per_broker_with_the_base_key_as_synonym(cluster) -> None:
    """DynamicBrokerConfig: a listener-prefixed key is the per-broker value of its base key
    for that listener, so describe lists the base key's layers after it; a security key
    (SslConfigs.RECONFIGURABLE_CONFIGS) may only be set with a listener prefix."""
    p1 = port_of(cluster, 1)
    prefixed = "listener.name.plaintext.max.connections"
    try:
        alter_ok(p1, BROKER, "", {"max.connections": (SET, "1000")})
        alter_ok(p1, BROKER, "1", {prefixed: (SET, "100")})
        wait_described_everywhere(cluster, BROKER, "1", prefixed, "100")
        wait_described_everywhere(cluster, BROKER, "", "max.connections", "1000")
        entry = described(p1, BROKER, "1", prefixed)
        assert entry.config_source == DYNAMIC_BROKER
        assert synonyms(entry) == [(prefixed, "100", DYNAMIC_BROKER),
                                   ("max.connections", "1000", DYNAMIC_DEFAULT_BROKER),
                                   ("max.connections", "2147483647", DEFAULT)]
        r = alter(p1, BROKER, "1", {"ssl.keystore.location": (SET, "/tmp/keystore.jks")})
        assert r.error_code == ErrorCode.INVALID_REQUEST and "ssl.keystore.location" in (r.error_message or ""), \
            (ErrorCode(r.error_code).name, r.error_message)
    finally:
        alter(p1, BROKER, "1", {prefixed: (DELETE, None), "ssl.keystore.location": (DELETE, None)})
        alter(p1, BROKER, "", {"max.connections": (DELETE, None)})


def test_bad_config_changes_are_refused_whole_with_kafkas_codes(cluster) -> None:
    topic = new_topic(cluster, "badinput")
    p1 = port_of(cluster, 1)
    # A read-only broker key (see the test above): refused, naming the key, and the valid
    # key beside it is not applied.
    for key, value in (("node.id", "7"), ("log.dirs", "/tmp/elsewhere")):
        r = alter(p1, BROKER, "1", {key: (SET, value), "message.max.bytes": (SET, "4000")})
        assert r.error_code == ErrorCode.INVALID_REQUEST, (key, ErrorCode(r.error_code).name, r.error_message)
        assert key in (r.error_message or ""), r.error_message
    # Unknown keys: INVALID_CONFIG naming the key, for brokers and topics.
    r = alter(p1, BROKER, "1", {"no.such.broker.key": (SET, "1"), "message.max.bytes": (SET, "4000")})
    assert r.error_code == ErrorCode.INVALID_CONFIG and "no.such.broker.key" in (r.error_message or ""), \
        (ErrorCode(r.error_code).name, r.error_message)
    r = alter(p1, TOPIC, topic, {"retention.msec": (SET, "1000"), "retention.ms": (SET, "5000")})
    assert r.error_code == ErrorCode.INVALID_CONFIG and "retention.msec" in (r.error_message or ""), \
        (ErrorCode(r.error_code).name, r.error_message)
    # A value of the wrong type or out of range: INVALID_CONFIG naming the key.
    for key, value in (("retention.ms", "soon"), ("min.insync.replicas", "0"),
                       ("cleanup.policy", "shred"), ("min.cleanable.dirty.ratio", "1.5")):
        r = alter(p1, TOPIC, topic, {key: (SET, value), "segment.jitter.ms": (SET, "5")})
        assert r.error_code == ErrorCode.INVALID_CONFIG and key in (r.error_message or ""), \
            (key, ErrorCode(r.error_code).name, r.error_message)
    # validate_only: answered as if applied, nothing applied.
    r = alter(p1, TOPIC, topic, {"retention.ms": (SET, "5000")}, validate_only=True)
    assert r.error_code == ErrorCode.NONE, r.error_message
    r = alter(p1, TOPIC, topic, {"min.insync.replicas": (SET, "0")}, validate_only=True)
    assert r.error_code == ErrorCode.INVALID_CONFIG
    r = legacy_alter(p1, TOPIC, topic, {"retention.ms": "5000"}, validate_only=True)
    assert r.error_code == ErrorCode.NONE, r.error_message
    r = legacy_alter(p1, TOPIC, topic, {"retention.msec": "5000"})
    assert r.error_code == ErrorCode.INVALID_CONFIG, (ErrorCode(r.error_code).name, r.error_message)
    # Metadata is ordered: once a later change is visible everywhere, anything applied by
    # the requests above would be visible too.
    set_topic(cluster, topic, flush_messages="1000")
    alter_ok(p1, BROKER, "1", {"log.cleaner.delete.retention.ms": (SET, "1000")})
    wait_described_everywhere(cluster, BROKER, "1", "log.cleaner.delete.retention.ms", "1000")
    for p in live_ports(cluster):
        configs = describe(p, TOPIC, topic)
        assert configs["retention.ms"].value == "604800000", configs["retention.ms"]
        assert configs["segment.jitter.ms"].config_source == DEFAULT
        assert configs["min.insync.replicas"].value == "1"
    broker = describe(p1, BROKER, "1")
    assert broker["message.max.bytes"].value == DEFAULT_MESSAGE_MAX_BYTES
    assert broker["node.id"].value == "1"
    alter_ok(p1, BROKER, "1", {"log.cleaner.delete.retention.ms": (DELETE, None)})


def test_legacy_alter_configs_replaces_all_and_takes_effect(cluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    topic = new_topic(cluster, "legacy", replicas=[3, 1, 2])
    p3 = port_of(cluster, 3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    try:
        # kafka-python with incremental=False sends AlterConfigs (API 33).
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                     configs={"max.message.bytes": "6000"})], incremental=False)
        assert result == {"topic": {topic: "OK"}}, result
        wait_described_everywhere(cluster, TOPIC, topic, "max.message.bytes", "6000")
        assert produce(p3, topic, records(1, 8000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        produce_ok(p3, topic, records(1, 1000))

        other = new_topic(cluster, "legacy", replicas=[3, 1, 2])
        result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3",
                                                     configs={"message.max.bytes": "7000"})], incremental=False)
        assert result == {"broker": {"3": "OK"}}, result
        wait_described_everywhere(cluster, BROKER, "3", "message.max.bytes", "7000")
        assert produce(p3, other, records(1, 9000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        produce_ok(p3, other, records(1, 1000))
    finally:
        admin.close()

    # Replace-all: keys left out of the request return to their defaults.
    set_topic(cluster, topic, retention_ms="123456", segment_jitter_ms="10")
    r = legacy_alter(p3, TOPIC, topic, {"retention.ms": "654321"})
    assert r.error_code == ErrorCode.NONE, r.error_message
    wait_described_everywhere(cluster, TOPIC, topic, "retention.ms", "654321")
    configs = describe(p3, TOPIC, topic)
    # The topic's 6000 is gone: broker 3's own 7000 shows through (and applies).
    assert (configs["max.message.bytes"].value, configs["max.message.bytes"].config_source) == \
        ("7000", DYNAMIC_BROKER), configs["max.message.bytes"]
    assert configs["segment.jitter.ms"].config_source == DEFAULT
    assert configs["retention.ms"].config_source == DYNAMIC_TOPIC
    produce_ok(p3, topic, records(1, 6500))
    r = legacy_alter(p3, BROKER, "3", {"log.cleaner.delete.retention.ms": "1000"})
    assert r.error_code == ErrorCode.NONE, r.error_message
    wait_described_everywhere(cluster, BROKER, "3", "message.max.bytes", DEFAULT_MESSAGE_MAX_BYTES)
    produce_ok(p3, other, records(1, 9000))          # the per-broker 7000 is gone
    produce_ok(p3, topic, records(1, 9000))
    assert legacy_alter(p3, BROKER, "3", {}).error_code == ErrorCode.NONE


# ---------------------------------------------------------------- unclean election (last: kills a broker)


def test_enabling_unclean_election_elects_the_stale_replica_at_once(cluster) -> None:
    leader, stale = 1, 2
    topic = new_topic(cluster, "unclean", replicas=[leader, stale])
    lp, sp = port_of(cluster, leader), port_of(cluster, stale)
    produce_ok(lp, topic, records(5))
    cluster.signal_node(stale, signal.SIGSTOP)
    try:
        wait_until(lambda: partition_states(cluster, topic, port=lp)[0].isr == (leader,), 30,
                   f"broker {stale} out of the ISR")
        produce_ok(lp, topic, records(5))
        cluster.kill_node(leader)
    finally:
        cluster.signal_node(stale, signal.SIGCONT)
    try:
        # The only ISR member is down (with KIP-966's eligible leader replicas the ISR
        # empties and the leader is its one eligible replica); the stale replica is up and
        # registered, unelected.
        def offline() -> bool:
            s = partition_states(cluster, topic, port=sp)[0]
            return s.leader == -1 and s.isr in ((leader,), ())
        wait_until(offline, 30, "the partition offline, its ISR [leader] or empty")
        assert partition_states(cluster, topic, port=sp)[0].leader == -1
        alter_ok(sp, TOPIC, topic, {"unclean.leader.election.enable": (SET, "true")})
        state = wait_until(lambda: (s := partition_states(cluster, topic, port=sp)[0]).leader == stale and s,
                           PROPAGATION_S, f"broker {stale} elected uncleanly")
        assert state.isr == (stale,), state
        assert produce(sp, topic, records(1)).error_code == ErrorCode.NONE
    finally:
        cluster.start_node(leader)
        cluster.wait_until_ready(60)
