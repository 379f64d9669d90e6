"""The group APIs' authorization in front of the coordinator (broker/group_authz.py), for
principals other than ANONYMOUS: which parts of a request reach the coordinator and what
the denied parts are answered. The coordinator here answers NONE for whatever reaches it,
so the test sees exactly what the guard let through."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from broker.auth_helper import AuthHelper
from broker.group_authz import guard_group_api
from clients.protocol import ApiKey, messages
from clients.protocol.acls import (
    AclBinding, AclOperation as Op, AclPatternType as P, AclPermissionType as Perm,
    AclResourceType as R, KafkaPrincipal,
)
from clients.protocol.errors import ErrorCode
from metadata_log.acls import AclsImage
from metadata_log.authorizer import AuthorizerConfig, StandardAuthorizer
from quorum.network import ClientInfo

ACLS = AclsImage().with_changes({uuid.UUID(int=i + 1): a for i, a in enumerate([
    AclBinding(R.GROUP, "billing", P.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW),
    AclBinding(R.TOPIC, "orders-", P.PREFIXED, "User:alice", "*", Op.READ, Perm.ALLOW),
    AclBinding(R.TOPIC, "payments", P.LITERAL, "User:alice", "*", Op.WRITE, Perm.ALLOW),
    AclBinding(R.GROUP, "*", P.LITERAL, "User:bob", "*", Op.ALL, Perm.ALLOW),
])})
C = messages.OffsetCommitRequest
R_ = messages.OffsetCommitResponse


def client(user: str) -> ClientInfo:
    info = ClientInfo("10.1.2.3", 5000, 1)
    info.principal = KafkaPrincipal("User", user)
    return info


async def coordinator(req: Any, version: int, client: Any) -> Any:
    return R_(topics=[R_.OffsetCommitResponseTopic(name=t.name, partitions=[
        R_.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=0)
        for p in t.partitions]) for t in req.topics])


def commit(user: str, group: str, topics: list[str]) -> dict[str, int]:
    auth = AuthHelper(StandardAuthorizer(AuthorizerConfig(frozenset({"User:root"}))), lambda: ACLS)
    handler = guard_group_api(auth, ApiKey.OFFSET_COMMIT, coordinator)
    req = C(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name=t, partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5)]) for t in topics])
    resp = asyncio.run(handler(req, 8, client(user)))
    return {t.name: t.partitions[0].error_code for t in resp.topics}


def test_committing_needs_read_on_the_group_and_on_each_topic() -> None:
    assert commit("alice", "billing", ["orders-eu", "payments"]) == {
        "orders-eu": ErrorCode.NONE, "payments": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    # No READ on the group: nothing reaches the coordinator.
    assert commit("alice", "other", ["orders-eu"]) == {
        "orders-eu": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert commit("bob", "any-group", ["orders-eu"]) == {
        "orders-eu": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert commit("root", "any-group", ["anything"]) == {"anything": ErrorCode.NONE}


def test_without_an_authorizer_the_coordinator_gets_the_request_unchanged() -> None:
    auth = AuthHelper(None, lambda: ACLS)
    assert guard_group_api(auth, ApiKey.OFFSET_COMMIT, coordinator) is coordinator


TXN_ACLS = AclsImage().with_changes({uuid.UUID(int=i + 100): a for i, a in enumerate([
    AclBinding(R.TRANSACTIONAL_ID, "copier-", P.PREFIXED, "User:alice", "*", Op.WRITE, Perm.ALLOW),
    AclBinding(R.GROUP, "billing", P.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW),
    AclBinding(R.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.ALL, Perm.ALLOW),
])})


def _txn_guard(api: int, seen: list) -> Any:
    auth = AuthHelper(StandardAuthorizer(AuthorizerConfig(frozenset())), lambda: TXN_ACLS)

    async def handler(req: Any, version: int, client: Any) -> Any:
        seen.append(req)
        return {ApiKey.END_TXN: messages.EndTxnResponse(),
                ApiKey.ADD_OFFSETS_TO_TXN: messages.AddOffsetsToTxnResponse(),
                ApiKey.TXN_OFFSET_COMMIT: messages.TxnOffsetCommitResponse(),
                ApiKey.ADD_PARTITIONS_TO_TXN: messages.AddPartitionsToTxnResponse()}[api]
    return guard_group_api(auth, api, handler)


def test_transaction_apis_need_write_on_the_transactional_id() -> None:
    seen: list = []
    end = _txn_guard(ApiKey.END_TXN, seen)
    assert asyncio.run(end(messages.EndTxnRequest(transactional_id="copier-1"), 3, client("alice"))).error_code == 0
    denied = asyncio.run(end(messages.EndTxnRequest(transactional_id="other"), 3, client("alice")))
    assert denied.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and len(seen) == 1

    offsets = _txn_guard(ApiKey.ADD_OFFSETS_TO_TXN, seen)
    A = messages.AddOffsetsToTxnRequest
    assert asyncio.run(offsets(A(transactional_id="copier-1", group_id="other"), 3, client("alice"))
                       ).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

    add = _txn_guard(ApiKey.ADD_PARTITIONS_TO_TXN, seen)
    P_ = messages.AddPartitionsToTxnRequest
    req = P_(v3_and_below_transactional_id="copier-1", v3_and_below_topics=[
        P_.AddPartitionsToTxnTopic(name="orders", partitions=[0]),
        P_.AddPartitionsToTxnTopic(name="secret", partitions=[0, 1])])
    resp = asyncio.run(add(req, 3, client("alice")))
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                     ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     ("secret", 1): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    # Brokers verifying (v4+) need CLUSTER_ACTION, which alice lacks.
    assert asyncio.run(add(P_(), 4, client("alice"))).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    commit = _txn_guard(ApiKey.TXN_OFFSET_COMMIT, seen)
    T = messages.TxnOffsetCommitRequest
    part = T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)
    resp = asyncio.run(commit(T(transactional_id="copier-9", group_id="billing", topics=[
        T.TxnOffsetCommitRequestTopic(name="orders", partitions=[part]),
        T.TxnOffsetCommitRequestTopic(name="secret", partitions=[part])]), 3, client("alice")))
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {
        "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}        # orders reached the coordinator
    assert [t.name for t in seen[-1].topics] == ["orders"]
