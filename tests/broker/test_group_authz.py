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
