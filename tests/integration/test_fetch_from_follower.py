"""Fetch from follower (KIP-392): with replica.selector.class = RackAwareReplicaSelector the
leader sends a consumer that names its rack to an in-sync replica in that rack, and the
follower serves it below the high watermark it knows. Brokers 1, 2, 3 in racks r1, r2, r3;
the partition's replicas are [1, 2, 3], so broker 1 leads.

These brokers run asyncio's own event loop (``ketch.event.loop=asyncio``; every other
process test runs the default, uvloop), and a large read checks its sendfile path."""
from __future__ import annotations

import json

import pytest

from broker.config import RACK_AWARE_SELECTOR
from clients.admin import NewTopic
from clients.protocol import ApiKey, messages
from clients.records import Record, build_batch, decode_batches
from integration_helpers import STOP_TIMEOUT_S, admin_for, large_read, roundtrip, runs_uvloop, start_cluster, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

TOPIC = "racked"
RECORDS = 100
F = messages.FetchRequest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-racks", controllers=1,
                      broker_props={"replica.selector.class": RACK_AWARE_SELECTOR,
                                    "ketch.event.loop": "asyncio"},
                      broker_racks={1: "r1", 2: "r2", 3: "r3"})
    try:
        admin_for(c).create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2, 3]})])
        wait_until(lambda: _fetch(c, 1, "r1").error_code == 0, 60, "broker 1 leading")
        P = messages.ProduceRequest
        batch = build_batch([Record(i, 0, None, b"v%d" % i) for i in range(RECORDS)])
        resp = roundtrip(c.spec.node(1).port, ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
            P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def _fetch(cluster, broker_id: int, rack: str) -> messages.FetchResponse.PartitionData:
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, rack_id=rack,
            topics=[F.FetchTopic(topic=TOPIC, partitions=[
                F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    resp = roundtrip(cluster.spec.node(broker_id).port, ApiKey.FETCH, 11, req)
    return resp.responses[0].partitions[0]


def _values(part) -> list[bytes]:
    return [r.value for b in decode_batches(bytes(part.records)) for r in b.records]


def test_the_leader_points_a_consumer_to_its_rack_and_the_follower_serves_it(cluster) -> None:
    own = _fetch(cluster, 1, "r1")            # in the leader's rack: the leader serves it
    assert own.preferred_read_replica == -1 and len(_values(own)) == RECORDS
    sent = _fetch(cluster, 1, "r3")
    assert (sent.error_code, sent.preferred_read_replica, bytes(sent.records)) == (0, 3, b"")
    assert _fetch(cluster, 1, "elsewhere").preferred_read_replica == -1   # no replica there
    served = wait_until(lambda: (p := _fetch(cluster, 3, "r3")) and p.high_watermark == RECORDS
                        and p, 30, "broker 3 knowing the HW")
    assert _values(served) == [b"v%d" % i for i in range(RECORDS)]


def test_librdkafka_with_client_rack_reads_from_the_follower_in_its_rack(cluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    stats: list[dict] = []
    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "racked",
                         "client.rack": "r2", "enable.auto.commit": False,
                         "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s))})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value() for m in consumer.consume(100, 0.2) if m.error() is None)
                   or len(got) >= RECORDS, 60, "every record")
        assert got == [b"v%d" % i for i in range(RECORDS)]
        # librdkafka's statistics name the broker it fetches the partition from.
        fetched_from = wait_until(
            lambda: (consumer.poll(0.1), stats and stats[-1]["topics"][TOPIC]["partitions"]["0"]["broker"])[1],
            30, "librdkafka's statistics")
        assert fetched_from == 2, stats[-1]["topics"][TOPIC]["partitions"]["0"]
    finally:
        consumer.close()


def test_kip_951_a_follower_names_the_leader_and_its_endpoint(cluster) -> None:
    """Produce v10+ and Fetch v16+ answer NOT_LEADER_OR_FOLLOWER with the current leader
    and its endpoint, so a client need not refresh its metadata to find it."""
    from clients.protocol.errors import ErrorCode

    P = messages.ProduceRequest
    leader = cluster.spec.node(1)
    follower_port = cluster.spec.node(2).port
    batch = build_batch([Record(0, 0, None, b"to-a-follower")])
    produce = P(acks=1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])])
    for version, named in ((9, False), (10, True), (11, True)):
        resp = roundtrip(follower_port, ApiKey.PRODUCE, version, produce)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id == 1) is named
        assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == \
            ([(1, "127.0.0.1", leader.port, "r1")] if named else [])
    # A follower fetch (broker 3's, by topic id) sent to follower 2.
    M = messages.MetadataRequest
    (topic,) = roundtrip(follower_port, ApiKey.METADATA, 12,
                         M(topics=[M.MetadataRequestTopic(name=TOPIC)])).topics
    fetch = F(replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1), max_wait_ms=0,
              min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=-1,
              topics=[F.FetchTopic(topic_id=topic.topic_id, partitions=[
                  F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    for version, named in ((15, False), (16, True), (17, True)):
        resp = roundtrip(follower_port, ApiKey.FETCH, version, fetch)
        (part,) = resp.responses[0].partitions
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch >= 0) == \
            ((1, True) if named else (-1, False))
        assert [n.node_id for n in resp.node_endpoints] == ([1] if named else [])


def test_under_asyncio_a_large_read_reaches_the_consumer_and_the_followers_whole(cluster) -> None:
    values, fetched, followers = large_read(cluster, "large-asyncio", seed=1)
    assert fetched == values
    assert followers == {2: values, 3: values}
    assert [runs_uvloop(cluster, b) for b in (1, 2, 3)] == [False] * 3
