"""The transaction coordinator on a real 1-broker cluster, with librdkafka's transactional
producer and raw requests (one cluster for the module).

What this shows of txncoord's part alone: FindCoordinator(key_type=1) creates
``__transaction_state`` and names the broker, InitProducerId / AddPartitionsToTxn / EndTxn
answer a real client so that ``init_transactions``, ``begin_transaction``, ``produce`` and
``commit_transaction`` succeed, Describe/ListTransactions show the transaction, a zombie
is fenced by a second InitProducerId, and KIP-890 verification refuses a transactional
batch for a partition outside the transaction (nothing appended). The markers' effect on
the partitions (control batches, read_committed) is txnlog's and the lead's to show.
"""
from __future__ import annotations

import pytest

from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from tests.integration.integration_helpers import high_watermarks, roundtrip, start_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.process

E = ErrorCode
TOPIC = "txn-topic"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "txn", controllers=1, brokers=1, broker_props={
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
        "num.partitions": "2"})
    try:
        yield c
    finally:
        c.stop(timeout_s=10)


def _port(cluster) -> int:
    return cluster.spec.brokers[0].port


def _find_transaction_coordinator(port: int, tid: str) -> messages.FindCoordinatorResponse:
    def found() -> messages.FindCoordinatorResponse | None:
        resp = roundtrip(port, ApiKey.FIND_COORDINATOR, 4, messages.FindCoordinatorRequest(
            key_type=1, coordinator_keys=[tid]))
        return resp if resp.coordinators[0].error_code == E.NONE else None
    return wait_until(found, timeout_s=30, what="a transaction coordinator")


def _describe(port: int, tid: str) -> messages.DescribeTransactionsResponse.TransactionState:
    resp = roundtrip(port, ApiKey.DESCRIBE_TRANSACTIONS, 0, messages.DescribeTransactionsRequest(
        transactional_ids=[tid]))
    return resp.transaction_states[0]


def test_librdkafka_transaction_commits_and_a_zombie_is_fenced(cluster) -> None:
    port = _port(cluster)
    coordinator = _find_transaction_coordinator(port, "app-1").coordinators[0]
    assert coordinator.node_id == cluster.spec.brokers[0].id
    conf = {"bootstrap.servers": cluster.spec.bootstrap_servers, "transactional.id": "app-1",
            "transaction.timeout.ms": 30_000, "message.timeout.ms": 30_000}
    producer = confluent_kafka.Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    ongoing = _describe(port, "app-1")
    assert (ongoing.error_code, ongoing.transaction_state) == (E.NONE, "Ongoing")
    assert {(t.topic, p) for t in ongoing.topics for p in t.partitions} == {(TOPIC, 0), (TOPIC, 1)}
    producer.commit_transaction(30)
    # EndTxn is answered once PrepareCommit is durable; CompleteCommit follows the markers.
    done = _describe(port, "app-1")
    assert done.transaction_state in ("PrepareCommit", "CompleteCommit")
    assert sum(high_watermarks(cluster, TOPIC, [0, 1]).values()) >= 10
    listed = roundtrip(port, ApiKey.LIST_TRANSACTIONS, 1, messages.ListTransactionsRequest(
        state_filters=[], producer_id_filters=[done.producer_id], duration_filter=-1))
    assert [t.transactional_id for t in listed.transaction_states] == ["app-1"]

    # A second producer with the same id (after the first's transaction is complete)
    # bumps the epoch: the first one is fenced. Completing needs the leader to serve
    # WriteTxnMarkers (txnlog's half of issue 15).
    versions = roundtrip(port, ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
        client_software_name="ketch-it", client_software_version="0"))
    if ApiKey.WRITE_TXN_MARKERS not in {k.api_key for k in versions.api_keys}:
        pytest.skip("WriteTxnMarkers is not served by this branch's leaders (txnlog's part)")
    wait_until(lambda: _describe(port, "app-1").transaction_state == "CompleteCommit" or None,
               timeout_s=30, what="the markers written (needs WriteTxnMarkers on the leader)")
    successor = confluent_kafka.Producer(conf)
    successor.init_transactions(30)
    assert _describe(port, "app-1").producer_epoch == done.producer_epoch + 1
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"zombie", partition=0)
        producer.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(TOPIC, value=b"successor", partition=0)
    successor.commit_transaction(30)


def test_produce_outside_the_transaction_is_refused_and_not_appended(cluster) -> None:
    """KIP-890: a transactional batch for a partition the coordinator has not added is
    refused (INVALID_TXN_STATE for Produce v9) and never reaches the log."""
    port = _port(cluster)
    _find_transaction_coordinator(port, "raw-1")
    def init_producer_id() -> messages.InitProducerIdResponse | None:
        resp = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
            transactional_id="raw-1", transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1))
        return resp if resp.error_code == E.NONE else None
    init = wait_until(init_producer_id, timeout_s=30, what="InitProducerId")
    before = high_watermarks(cluster, TOPIC, [0])[0]
    batch = build_batch([Record(offset=0, timestamp=0, key=None, value=b"hanging?")],
                        producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                        base_sequence=0, is_transactional=True)
    P = messages.ProduceRequest
    resp = roundtrip(port, ApiKey.PRODUCE, 9, P(
        transactional_id="raw-1", acks=-1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
            name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
    assert resp.responses[0].partition_responses[0].error_code == E.INVALID_TXN_STATE
    assert high_watermarks(cluster, TOPIC, [0])[0] == before


def test_txn_offset_commit_is_verified_with_the_transaction_coordinator(cluster) -> None:
    """KIP-890 for offsets (Kafka 3.8+): TxnOffsetCommit before AddOffsetsToTxn put the
    group's offsets partition in the transaction is refused (INVALID_TXN_STATE for v3,
    TRANSACTION_ABORTABLE for v4) and nothing is stored; after it, the offsets commit with
    the transaction."""
    port = _port(cluster)
    tid, group = "offsets-1", "g-verify"
    _find_transaction_coordinator(port, tid)

    def group_coordinator() -> messages.FindCoordinatorResponse | None:
        resp = roundtrip(port, ApiKey.FIND_COORDINATOR, 4, messages.FindCoordinatorRequest(
            key_type=0, coordinator_keys=[group]))
        return resp if resp.coordinators[0].error_code == E.NONE else None
    wait_until(group_coordinator, timeout_s=30, what="a group coordinator")

    def init_producer_id() -> messages.InitProducerIdResponse | None:
        resp = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1))
        return resp if resp.error_code == E.NONE else None
    init = wait_until(init_producer_id, timeout_s=30, what="InitProducerId")
    pid, epoch = init.producer_id, init.producer_epoch
    C = messages.TxnOffsetCommitRequest

    def commit(offset: int, version: int) -> int:
        resp = roundtrip(port, ApiKey.TXN_OFFSET_COMMIT, version, C(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None, topics=[
                C.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                    C.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                      committed_leader_epoch=-1,
                                                      committed_metadata="")])]))
        return resp.topics[0].partitions[0].error_code

    def fetched() -> int:
        resp = roundtrip(port, ApiKey.OFFSET_FETCH, 5, messages.OffsetFetchRequest(
            group_id=group, topics=[messages.OffsetFetchRequest.OffsetFetchRequestTopic(
                name=TOPIC, partition_indexes=[0])]))
        return resp.topics[0].partitions[0].committed_offset

    assert commit(5, 3) == E.INVALID_TXN_STATE
    assert commit(5, 4) == E.TRANSACTION_ABORTABLE
    add = roundtrip(port, ApiKey.ADD_OFFSETS_TO_TXN, 3, messages.AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group))
    assert add.error_code == E.NONE
    assert commit(7, 3) == E.NONE
    end = roundtrip(port, ApiKey.END_TXN, 3, messages.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True))
    assert end.error_code == E.NONE
    # The refused offset 5 was never stored: the committed one is 7, once the marker lands.
    wait_until(lambda: fetched() == 7 or None, timeout_s=30, what="the committed offset")
