"""Authorization of the coordinators' APIs (groups and transactions), in front of their
handlers (Kafka's KafkaApis / GroupCoordinator checks), so the coordinators themselves stay
unaware of ACLs.

Per API, after Kafka:

    FindCoordinator            DESCRIBE on the group (key type 0) or transactional id (1)
    JoinGroup, SyncGroup,      READ on the group; denied: GROUP_AUTHORIZATION_FAILED
      Heartbeat, LeaveGroup,
      ConsumerGroupHeartbeat
    OffsetCommit               READ on the group (denied: every partition
                               GROUP_AUTHORIZATION_FAILED), READ on each topic (denied:
                               that topic's partitions TOPIC_AUTHORIZATION_FAILED)
    OffsetFetch                DESCRIBE on each group, DESCRIBE on each topic named (denied:
                               TOPIC_AUTHORIZATION_FAILED); "all topics" leaves out those
                               the principal may not describe
    OffsetDelete               DELETE on the group, READ on each topic
    ListGroups                 DESCRIBE on the cluster lists all; otherwise only the groups
                               the principal may describe
    DescribeGroups,            DESCRIBE on each group; ``authorized_operations`` from the
      ConsumerGroupDescribe    authorizer
    DeleteGroups               DELETE on each group

And the transaction coordinator's (Kafka's KafkaApis):

    AddPartitionsToTxn v0-3    WRITE on the transactional id (denied: every partition
                               TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic
                               (denied: TOPIC_AUTHORIZATION_FAILED, the rest
                               OPERATION_NOT_ATTEMPTED)
    AddPartitionsToTxn v4+     CLUSTER_ACTION on the cluster (brokers verifying, KIP-890)
    AddOffsetsToTxn            WRITE on the transactional id, READ on the group
    EndTxn                     WRITE on the transactional id
    TxnOffsetCommit            WRITE on the transactional id, READ on the group (denied:
                               every partition), READ on each topic
    DescribeTransactions       DESCRIBE on each transactional id

Denied parts are answered here and never reach the coordinator; the rest is passed on as a
smaller request and the answers are merged. With no authorizer everything is passed on
unchanged.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable

from broker.auth_helper import AuthHelper
from clients.protocol import ApiKey, messages
from clients.protocol.acls import AclOperation as Op, AclResourceType
from clients.protocol.error_responses import error_response
from clients.protocol.errors import ErrorCode
from quorum.network import ClientInfo

__all__ = ["guard_group_api"]

Handler = Callable[[Any, int, ClientInfo], Awaitable[Any]]

_READ_GROUP = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
               ApiKey.CONSUMER_GROUP_HEARTBEAT}
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1


def guard_group_api(auth: AuthHelper, api_key: int, handler: Handler) -> Handler:
    """``handler`` with the API's authorization in front (see the module docstring)."""
    if not auth.enabled:
        return handler

    async def guarded(req: Any, version: int, client: ClientInfo) -> Any:
        return await _GUARDS[api_key](auth, handler, req, version, client)
    return guarded if api_key in _GUARDS else handler


async def _read_group(auth: AuthHelper, handler: Handler, req: Any, version: int,
                      client: ClientInfo) -> Any:
    if not auth.authorize_group(client, Op.READ, req.group_id):
        return error_response(_api_of(req), req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await handler(req, version, client)


def _api_of(req: Any) -> int:
    return type(req).SCHEMA.api_key


async def _find_coordinator(auth: AuthHelper, handler: Handler, req: Any, version: int,
                            client: ClientInfo) -> Any:
    cls = messages.FindCoordinatorResponse
    if req.key_type == KEY_TYPE_TRANSACTION:
        # DESCRIBE on the transactional id -> TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
        rtype, denied = AclResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        rtype, denied = AclResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED
    keys = req.coordinator_keys if version >= 4 else [req.key]
    allowed = auth.filter_authorized(client, Op.DESCRIBE, rtype, keys)
    if version < 4:
        if req.key not in allowed:
            return cls(error_code=denied, node_id=-1, host="", port=-1)
        return await handler(req, version, client)
    refused = [cls.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=denied)
               for k in keys if k not in allowed]
    kept = [k for k in keys if k in allowed]
    if not kept:
        return cls(coordinators=refused)
    resp = await handler(dataclasses.replace(req, coordinator_keys=kept), version, client)
    return dataclasses.replace(resp, coordinators=list(resp.coordinators) + refused)


async def _offset_commit(auth: AuthHelper, handler: Handler, req: Any, version: int,
                         client: ClientInfo) -> Any:
    cls = messages.OffsetCommitResponse

    def answer(topics: list, code: int) -> list:
        return [cls.OffsetCommitResponseTopic(name=t.name, partitions=[
            cls.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in topics]
    if not auth.authorize_group(client, Op.READ, req.group_id):
        return cls(topics=answer(req.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    allowed = auth.filter_authorized(client, Op.READ, AclResourceType.TOPIC,
                                     (t.name for t in req.topics))
    refused = [t for t in req.topics if t.name not in allowed]
    if not refused:
        return await handler(req, version, client)
    kept = [t for t in req.topics if t.name in allowed]
    denied = answer(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if not kept:
        return cls(topics=denied)
    resp = await handler(dataclasses.replace(req, topics=kept), version, client)
    return dataclasses.replace(resp, topics=list(resp.topics) + denied)


async def _offset_delete(auth: AuthHelper, handler: Handler, req: Any, version: int,
                         client: ClientInfo) -> Any:
    cls = messages.OffsetDeleteResponse
    if not auth.authorize_group(client, Op.DELETE, req.group_id):
        return cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    allowed = auth.filter_authorized(client, Op.READ, AclResourceType.TOPIC,
                                     (t.name for t in req.topics))
    denied = [cls.OffsetDeleteResponseTopic(name=t.name, partitions=[
        cls.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]) for t in req.topics if t.name not in allowed]
    if not denied:
        return await handler(req, version, client)
    kept = [t for t in req.topics if t.name in allowed]
    if not kept:
        return cls(error_code=ErrorCode.NONE, topics=denied)
    resp = await handler(dataclasses.replace(req, topics=kept), version, client)
    return dataclasses.replace(resp, topics=list(resp.topics) + denied)


async def _offset_fetch(auth: AuthHelper, handler: Handler, req: Any, version: int,
                        client: ClientInfo) -> Any:
    cls = messages.OffsetFetchResponse
    topic_allowed = lambda name: auth.authorize_topic(client, Op.DESCRIBE, name)  # noqa: E731
    if version < 8:
        if not auth.authorize_group(client, Op.DESCRIBE, req.group_id):
            return cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
        asked = req.topics
        kept = None if asked is None else [t for t in asked if topic_allowed(t.name)]
        resp = await handler(req if kept is None or len(kept) == len(asked)
                             else dataclasses.replace(req, topics=kept), version, client)
        topics = [t for t in resp.topics if asked is not None or topic_allowed(t.name)]
        topics += [cls.OffsetFetchResponseTopic(name=t.name, partitions=[
            cls.OffsetFetchResponsePartition(
                partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes])
            for t in asked or () if not topic_allowed(t.name)]
        return dataclasses.replace(resp, topics=topics)
    groups_denied, kept_groups = [], []
    for g in req.groups:
        if not auth.authorize_group(client, Op.DESCRIBE, g.group_id):
            groups_denied.append(cls.OffsetFetchResponseGroup(
                group_id=g.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            kept_groups.append(g)
    if not kept_groups:
        return cls(groups=groups_denied)
    asked_by_group = {g.group_id: g.topics for g in kept_groups}
    resp = await handler(dataclasses.replace(req, groups=[
        g if g.topics is None else dataclasses.replace(
            g, topics=[t for t in g.topics if topic_allowed(t.name)]) for g in kept_groups]),
        version, client)
    groups = []
    for g in resp.groups:
        asked = asked_by_group.get(g.group_id)
        topics = [t for t in g.topics if asked is not None or topic_allowed(t.name)]
        topics += [cls.OffsetFetchResponseTopics(name=t.name, partitions=[
            cls.OffsetFetchResponsePartitions(
                partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes])
            for t in asked or () if not topic_allowed(t.name)]
        groups.append(dataclasses.replace(g, topics=topics))
    return dataclasses.replace(resp, groups=groups + groups_denied)


async def _list_groups(auth: AuthHelper, handler: Handler, req: Any, version: int,
                       client: ClientInfo) -> Any:
    resp = await handler(req, version, client)
    if auth.authorize_cluster(client, Op.DESCRIBE):
        return resp
    return dataclasses.replace(resp, groups=[
        g for g in resp.groups if auth.authorize_group(client, Op.DESCRIBE, g.group_id)])


async def _describe_groups(auth: AuthHelper, handler: Handler, req: Any, version: int,
                           client: ClientInfo) -> Any:
    consumer = isinstance(req, messages.ConsumerGroupDescribeRequest)
    cls: Any = messages.ConsumerGroupDescribeResponse if consumer else messages.DescribeGroupsResponse
    ids = req.group_ids if consumer else req.groups
    allowed = auth.filter_authorized(client, Op.DESCRIBE, AclResourceType.GROUP, ids)
    denied = [cls.DescribedGroup(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in ids if g not in allowed]
    kept = [g for g in ids if g in allowed]
    if not kept:
        return cls(groups=denied)
    resp = await handler(dataclasses.replace(req, **{"group_ids" if consumer else "groups": kept}),
                         version, client)
    asked = req.include_authorized_operations and (consumer or version >= 3)
    groups = [dataclasses.replace(g, authorized_operations=auth.authorized_operations(
        client, AclResourceType.GROUP, g.group_id, asked)) for g in resp.groups]
    return dataclasses.replace(resp, groups=groups + denied)


async def _delete_groups(auth: AuthHelper, handler: Handler, req: Any, version: int,
                         client: ClientInfo) -> Any:
    cls = messages.DeleteGroupsResponse
    allowed = auth.filter_authorized(client, Op.DELETE, AclResourceType.GROUP, req.groups_names)
    denied = [cls.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in req.groups_names if g not in allowed]
    kept = [g for g in req.groups_names if g in allowed]
    if not kept:
        return cls(results=denied)
    resp = await handler(dataclasses.replace(req, groups_names=kept), version, client)
    return dataclasses.replace(resp, results=list(resp.results) + denied)



# ------------------------------------------------------------------ transactions

_TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def _add_partitions_to_txn(auth: AuthHelper, handler: Handler, req: Any, version: int,
                                 client: ClientInfo) -> Any:
    cls = messages.AddPartitionsToTxnResponse
    if version >= 4:
        if not auth.authorize_cluster(client, Op.CLUSTER_ACTION):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await handler(req, version, client)
    topics = req.v3_and_below_topics
    allowed_id = auth.authorize(client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID,
                                req.v3_and_below_transactional_id)
    writable = auth.filter_authorized(client, Op.WRITE, AclResourceType.TOPIC, (t.name for t in topics))
    if allowed_id and all(t.name in writable for t in topics):
        return await handler(req, version, client)

    def code(topic: str) -> int:
        if not allowed_id:
            return _TXN_DENIED
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic not in writable else ErrorCode.OPERATION_NOT_ATTEMPTED
    R = cls.AddPartitionsToTxnTopicResult
    return cls(results_by_topic_v3_and_below=[R(name=t.name, results_by_partition=[
        R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code(t.name))
        for p in t.partitions]) for t in topics])


async def _add_offsets_to_txn(auth: AuthHelper, handler: Handler, req: Any, version: int,
                              client: ClientInfo) -> Any:
    if not auth.authorize(client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return messages.AddOffsetsToTxnResponse(error_code=_TXN_DENIED)
    if not auth.authorize_group(client, Op.READ, req.group_id):
        return messages.AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await handler(req, version, client)


async def _end_txn(auth: AuthHelper, handler: Handler, req: Any, version: int, client: ClientInfo) -> Any:
    if not auth.authorize(client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return messages.EndTxnResponse(error_code=_TXN_DENIED, producer_id=-1, producer_epoch=-1)
    return await handler(req, version, client)


async def _txn_offset_commit(auth: AuthHelper, handler: Handler, req: Any, version: int,
                             client: ClientInfo) -> Any:
    cls = messages.TxnOffsetCommitResponse
    denied: int | None = None
    if not auth.authorize(client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID, req.transactional_id):
        denied = _TXN_DENIED
    elif not auth.authorize_group(client, Op.READ, req.group_id):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    readable = auth.filter_authorized(client, Op.READ, AclResourceType.TOPIC, (t.name for t in req.topics))
    if denied is None and all(t.name in readable for t in req.topics):
        return await handler(req, version, client)
    T = cls.TxnOffsetCommitResponseTopic
    if denied is not None:
        return cls(topics=[T(name=t.name, partitions=[
            T.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=denied)
            for p in t.partitions]) for t in req.topics])
    allowed = [t for t in req.topics if t.name in readable]
    answer = await handler(dataclasses.replace(req, topics=allowed), version, client) if allowed else cls()
    refused = [T(name=t.name, partitions=[
        T.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                           error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]) for t in req.topics if t.name not in readable]
    return dataclasses.replace(answer, topics=list(answer.topics) + refused)


async def _describe_transactions(auth: AuthHelper, handler: Handler, req: Any, version: int,
                                 client: ClientInfo) -> Any:
    cls = messages.DescribeTransactionsResponse
    ids = list(req.transactional_ids)
    allowed = auth.filter_authorized(client, Op.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, ids)
    if len(allowed) == len(set(ids)):
        return await handler(req, version, client)
    kept = [i for i in ids if i in allowed]
    answer = await handler(dataclasses.replace(req, transactional_ids=kept), version, client) if kept else cls()
    refused = [cls.TransactionState(error_code=_TXN_DENIED, transactional_id=i) for i in ids if i not in allowed]
    return dataclasses.replace(answer, transaction_states=list(answer.transaction_states) + refused)

_GUARDS: dict[int, Callable[..., Awaitable[Any]]] = {
    **{k: _read_group for k in _READ_GROUP},
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _describe_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
}
