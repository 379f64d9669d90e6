"""TxnOffsetCommit on a real cluster: the offsets are written to ``__consumer_offsets`` as a
transactional batch, stay pending (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT, without it the last committed offset), and a new coordinator
after a SIGKILL loads them as pending again from the log. (Markers that complete them
come from txncoord/txnlog; the pure tests cover that side, the lead's end-to-end tests
the whole.)"""
from __future__ import annotations

import pytest

from groups_helpers import (
    create_topic, find_coordinator, live_brokers, roundtrip, wait_until,
)

from clients.admin import Admin
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.types import OffsetAndMetadata, TopicPartition

pytestmark = [pytest.mark.process]
E = ErrorCode


def _port(cluster, node: int) -> int:
    return cluster.spec.node(node).port


def _fetch(cluster, node: int, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v7 require_stable on ``node``: (offset, error) of partition 0."""
    R = messages.OffsetFetchRequest
    resp = roundtrip(_port(cluster, node), ApiKey.OFFSET_FETCH, 7, R(
        group_id=group, require_stable=True,
        topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    assert resp.error_code == E.NONE, resp
    (p,) = resp.topics[0].partitions
    return p.committed_offset, p.error_code


def _begin_offsets_transaction(cluster, tid: str, group: str) -> messages.InitProducerIdResponse:
    """InitProducerId for ``tid`` and AddOffsetsToTxn for ``group``, raw, at the
    transactional id's coordinator."""
    def txn_coordinator() -> int | None:
        resp = roundtrip(live_brokers(cluster)[0].port, ApiKey.FIND_COORDINATOR, 4,
                         messages.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]))
        (c,) = resp.coordinators
        return c.node_id if c.error_code == E.NONE else None
    node = wait_until(txn_coordinator, 30, "a transaction coordinator")

    def init() -> messages.InitProducerIdResponse | None:
        resp = roundtrip(_port(cluster, node), ApiKey.INIT_PRODUCER_ID, 4,
                         messages.InitProducerIdRequest(transactional_id=tid,
                                                        transaction_timeout_ms=60_000,
                                                        producer_id=-1, producer_epoch=-1))
        return resp if resp.error_code == E.NONE else None
    pid = wait_until(init, 30, "InitProducerId")
    added = roundtrip(_port(cluster, node), ApiKey.ADD_OFFSETS_TO_TXN, 3,
                      messages.AddOffsetsToTxnRequest(transactional_id=tid,
                                                      producer_id=pid.producer_id,
                                                      producer_epoch=pid.producer_epoch,
                                                      group_id=group))
    assert added.error_code == E.NONE
    return pid


def test_pending_txn_offsets_are_unstable_and_survive_a_coordinator_failover(cluster) -> None:
    topic, group = "txn-offsets", "txn-offsets-group"
    create_topic(cluster, topic, 1)
    admin = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers})
    try:
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(5)})
    finally:
        admin.close()
    coordinator = wait_until(lambda: find_coordinator(cluster, group), 30, "a coordinator")
    # A real transaction holding the group's offsets partition: TxnOffsetCommit is verified
    # with the transaction coordinator first (KIP-890, Kafka 3.8+).
    pid = _begin_offsets_transaction(cluster, "tx", group)
    T = messages.TxnOffsetCommitRequest
    resp = roundtrip(_port(cluster, coordinator), ApiKey.TXN_OFFSET_COMMIT, 3, T(
        transactional_id="tx", group_id=group, producer_id=pid.producer_id,
        producer_epoch=pid.producer_epoch, generation_id=-1, member_id="",
        group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                              committed_leader_epoch=-1,
                                              committed_metadata="m")])]))
    assert [p.error_code for t in resp.topics for p in t.partitions] == [E.NONE]
    assert _fetch(cluster, coordinator, group, topic) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    R = messages.OffsetFetchRequest
    plain = roundtrip(_port(cluster, coordinator), ApiKey.OFFSET_FETCH, 7, R(
        group_id=group, require_stable=False,
        topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    assert plain.topics[0].partitions[0].committed_offset == 5

    cluster.kill_node(coordinator)
    new = wait_until(lambda: (lambda n: n if n not in (None, coordinator) else None)(
        find_coordinator(cluster, group)), 60, "a new coordinator")
    assert new in {b.id for b in live_brokers(cluster)}
    # The loader replays the transactional batch as pending: neither lost nor committed.
    assert wait_until(lambda: (lambda r: r if r[1] != E.COORDINATOR_LOAD_IN_PROGRESS else None)(
        _fetch(cluster, new, group, topic)), 30, "the new coordinator loaded") == \
        (-1, E.UNSTABLE_OFFSET_COMMIT)
