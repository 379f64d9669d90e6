"""The partition log side of transactions against a real broker (issue 15, txnlog):
transactional batches produced by hand, WriteTxnMarkers v1 sent as a transaction
coordinator would (one ABORT, one COMMIT in one request), then read_committed on the wire
(last stable offset, aborted transactions) and through librdkafka (confluent-kafka's
``isolation.level``), and ListOffsets' latest offset for both isolation levels.

One broker, so that it leads the partition.

The transactional batches go in Produce requests without a transactional id, which this
branch's Produce handler accepts (it refuses only requests naming one). Kafka refuses
transactional records without a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
and KIP-890 verifies the partition with the coordinator first: once the coordinator's
branch (txncoord) is merged, this test's produce step must become a transactional
producer's (InitProducerId, AddPartitionsToTxn) and its markers may then come from EndTxn."""
from __future__ import annotations

import time

import pytest

from clients.admin import NewTopic
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from integration_helpers import STOP_TIMEOUT_S, admin_for, roundtrip, start_cluster, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

TOPIC = "txn-markers"
W = messages.WriteTxnMarkersRequest
F = messages.FetchRequest
L = messages.ListOffsetsRequest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-txnlog", controllers=1, brokers=1)
    try:
        admin_for(c).create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
        wait_until(lambda: _latest(c, 0) == 0, 60, "the partition led")
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def _port(cluster) -> int:
    return cluster.spec.brokers[0].port


def _produce(cluster, pid: int, value: bytes, transactional: bool = True) -> None:
    P = messages.ProduceRequest
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)], producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                        is_transactional=transactional)
    resp = roundtrip(_port(cluster), ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
    assert resp.responses[0].partition_responses[0].error_code == 0


def _latest(cluster, isolation_level: int) -> int:
    resp = roundtrip(_port(cluster), ApiKey.LIST_OFFSETS, 5, L(
        replica_id=-1, isolation_level=isolation_level, topics=[L.ListOffsetsTopic(
            name=TOPIC, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    p = resp.topics[0].partitions[0]
    return p.offset if p.error_code == 0 else -1


def _fetch(cluster, isolation_level: int) -> messages.FetchResponse.PartitionData:
    resp = roundtrip(_port(cluster), ApiKey.FETCH, 12, F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation_level,
        session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=TOPIC, partitions=[
            F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return resp.responses[0].partitions[0]


def _consume(cluster, isolation: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": isolation})
    out: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                if msg.error() is None:
                    out.append(msg.value())
        # Nothing more arrives (an aborted record would come late, if at all).
        out += [m.value() for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None]
    finally:
        consumer.close()
    return out


def test_markers_make_committed_data_visible_and_hide_aborted_data(cluster) -> None:
    _produce(cluster, -1, b"plain", transactional=False)              # 0
    _produce(cluster, 1000, b"aborted")                               # 1
    _produce(cluster, 2000, b"committed")                             # 2
    assert (_latest(cluster, 1), _latest(cluster, 0)) == (1, 3)        # LSO pinned by producer 1000
    committed_view = _fetch(cluster, 1)
    assert committed_view.last_stable_offset == 1 and committed_view.high_watermark == 3

    resp = roundtrip(_port(cluster), ApiKey.WRITE_TXN_MARKERS, 1, W(markers=[
        W.WritableTxnMarker(producer_id=1000, producer_epoch=0, transaction_result=False,
                            coordinator_epoch=0, topics=[W.WritableTxnMarkerTopic(
                                name=TOPIC, partition_indexes=[0, 7])]),
        W.WritableTxnMarker(producer_id=2000, producer_epoch=0, transaction_result=True,
                            coordinator_epoch=0, topics=[W.WritableTxnMarkerTopic(
                                name=TOPIC, partition_indexes=[0])])]))
    codes = [(m.producer_id, p.partition_index, p.error_code)
             for m in resp.markers for t in m.topics for p in t.partitions]
    assert codes == [(1000, 0, 0), (1000, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (2000, 0, 0)]

    assert _latest(cluster, 1) == _latest(cluster, 0) == 5
    committed_view = _fetch(cluster, 1)
    assert committed_view.last_stable_offset == 5
    assert [(t.producer_id, t.first_offset) for t in committed_view.aborted_transactions] == [(1000, 1)]
    assert _fetch(cluster, 0).aborted_transactions is None

    assert _consume(cluster, "read_committed", 2) == [b"plain", b"committed"]
    assert _consume(cluster, "read_uncommitted", 3) == [b"plain", b"aborted", b"committed"]

    D = messages.DescribeProducersRequest
    described = roundtrip(_port(cluster), ApiKey.DESCRIBE_PRODUCERS, 0, D(topics=[
        D.TopicRequest(name=TOPIC, partition_indexes=[0])]))
    states = {p.producer_id: p for p in described.topics[0].partitions[0].active_producers}
    assert states[1000].current_txn_start_offset == states[2000].current_txn_start_offset == -1
    assert states[2000].coordinator_epoch == 0
