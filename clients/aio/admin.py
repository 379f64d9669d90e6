"""Ketch's asyncio admin client: topics, configs, the cluster and its quorum, consumer
groups, offsets and record deletion.

    async with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        await admin.create_topics([NewTopic("orders", 6, 3, configs={"retention.ms": "3600000"})])
        (desc,) = (await admin.describe_topics(["orders"])).values()

How a call runs
---------------
Every call follows Kafka's AdminClient: it has a deadline (``timeout_ms``, by default
``default.api.timeout.ms``); it sends one request per destination node (the controller
for topic writes, the partition leader for offsets and record deletion, the group
coordinator for group calls, any broker otherwise), each bounded by
``request.timeout.ms``; items answered with a retriable error (NOT_CONTROLLER, a moved
coordinator or leader, a coordinator still loading, a broken connection) are routed again
and resent after ``retry.backoff.ms`` (doubling up to ``retry.backoff.max.ms``) until the
deadline. ``_fan_out`` is that loop, once for every call.

Results and errors
------------------
A call about several items returns a dict keyed like its input, holding typed frozen
values (``clients._core.admin``). If any item failed, the call raises the typed
``KafkaApiError`` of the first failed item (in input order), with a message naming the
item (``topic 'orders': ...``), and the exception's ``results`` attribute holds every
item's outcome: its value, or the exception that ended it. An item still failing with a
retriable error at the deadline raises that error (it says more than a bare timeout);
an item that never got an answer raises ``KafkaTimeoutError``.

Leader elections and partition reassignment (``elect_leaders``,
``alter_partition_reassignments``, ``list_partition_reassignments``) go to the active
controller; ``clients.aio.controller_admin.ControllerAdmin`` runs every call of this class
against the controllers directly (Kafka's ``bootstrap.controllers``, KIP-919).

Features (KIP-584): ``describe_features`` reads a broker's ApiVersions, ``update_features``
sends UpdateFeatures to the active controller. Client-metrics subscriptions (KIP-714) are
configs: ``ConfigResource.client_metrics(name)`` with the config calls.

Log directories: ``describe_log_dirs`` (each partition's log on its leader),
``describe_broker_log_dirs`` (every log dir of some brokers, Kafka's describeLogDirs),
``describe_replica_log_dirs`` and ``alter_replica_log_dirs`` (one replica on one broker:
where its log is, and moving it to another of that broker's log dirs, KIP-113).

Transactions (KIP-98, KIP-664): ``describe_transactions`` (each id's coordinator),
``list_transactions`` (every broker's coordinator), ``describe_producers`` (each
partition's leader) and ``abort_transaction``, which has the partition leader write an
ABORT marker for a hanging transaction (WriteTxnMarkers, as Kafka's Admin.abortTransaction).

ACLs: ``create_acls`` / ``delete_acls`` go to the active controller through a broker,
``describe_acls`` is answered by any broker from its metadata (``AclBinding``,
``AclBindingFilter`` from clients.protocol.acls).

Not here: delegation tokens and SCRAM users.
"""
from __future__ import annotations

import asyncio
import os
import re
import uuid
from typing import Any, Awaitable, Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from clients.protocol.acls import (
    AclBinding, AclBindingFilter, AclOperation, AclPatternType, AclPermissionType,
    AclResourceType, enum_or_unknown,
)
from clients._core.admin import (
    ANY_NAME, AlterConfigOp, AlterConfigOpType, BrokerNode, ClientQuotaEntity, ClusterDescription,
    ConfigEntry, FeatureMetadata, FeatureUpdate, UpgradeType, client_quota_entity,
    ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion,
    ConfigResource, ConfigResourceType, ConfigSource, ConfigSynonym, ConfigType,
    ConsumerGroupDescription, ConsumerGroupListing, CreateTopicResult, ListOffsetsResult,
    MemberDescription, NewPartitions, NewTopic, OffsetReset, OffsetResetKind, OffsetSpec,
    LogDirDescription, PartitionLag, QuorumInfo, ReplicaInfo, ReplicaLogDir, ReplicaLogDirInfo,
    TopicDescription, TopicListing, TopicPartitionInfo,
    ZERO_TOPIC_ID, decode_assignment, decode_subscription, group_lag, leader_log_end,
    plan_offset_reset, quorum_replicas,
    AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing,
)
from clients._core.config import ADMIN, ClientConfig, parse_config
from clients._core.reassignment import ElectionType, PartitionReassignment, plan_decommission
from clients.aio._cluster import Cluster
from clients.errors import (
    ErrorCode, GroupIdNotFoundError, KafkaApiError, KafkaTimeoutError, NonEmptyGroupError,
    for_code,
)
from clients.protocol import ApiKey, messages
from clients.security import scram
from clients.types import OffsetAndMetadata, TopicPartition, TopicPartitionReplica

__all__ = [
    "Admin", "AlterConfigOp", "AlterConfigOpType", "BrokerNode", "ClusterDescription",
    "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "ConfigSynonym",
    "ConfigType", "ConsumerGroupDescription", "FeatureMetadata", "FeatureUpdate", "UpgradeType", "ConsumerGroupListing", "CreateTopicResult",
    "ListOffsetsResult", "MemberDescription", "NewPartitions", "NewTopic", "OffsetReset",
    "OffsetSpec", "PartitionLag", "QuorumInfo", "TopicDescription", "TopicListing",
    "TopicPartitionInfo", "ElectionType", "PartitionReassignment", "ReplicaLogDir",
    "ReplicaLogDirInfo", "TopicPartitionReplica", "LogDirDescription", "ReplicaInfo",
    "AbortTransactionSpec", "ProducerState", "TransactionDescription", "TransactionListing",
    "ScramCredentialInfo", "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
]

K = TypeVar("K", bound=Hashable)
KEY_TYPE_TRANSACTION = 1      # FindCoordinator's key type for a transactional id

# The mirror topic configs (issue 21; defined with the topic configs on the brokers).
_MIRROR_LINK, _MIRROR_SOURCE_TOPIC, _MIRROR_STATE = (
    "ketch.mirror.link", "ketch.mirror.source.topic", "ketch.mirror.state")
METADATA_TOPIC = "__cluster_metadata"       # KRaft's metadata log, partition 0
CONSUMER_PROTOCOL_TYPE = "consumer"
# States in which a group has no live members, so its offsets may be rewritten
# (ConsumerGroupCommand: "can only be reset if the group is inactive").
INACTIVE_GROUP_STATES = ("Empty", "Dead")
_READ_UNCOMMITTED, _READ_COMMITTED = 0, 1

# Codes that send an item back to its route: the leader, coordinator or controller it
# was sent to is no longer the right one, or not ready yet. Connection failures too.
_COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_STALE_TOPIC = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}
# Answered by a group coordinator when the group has live members and an admin commit
# (generation -1, no member id) comes in (Kafka's GroupMetadataManager rules).
_ACTIVE_GROUP_CODES = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                       ErrorCode.REBALANCE_IN_PROGRESS}

Route = Callable[[K, int], Awaitable["int | None"]]     # (key, ms left) -> node id or None
# How long metadata may keep saying a topic does not exist before a call reports it: long
# enough for a topic created a moment ago to reach every broker's image, short enough that
# a misspelt name is answered in seconds (Kafka's AdminClient answers at the first
# metadata response; Ketch's brokers learn new topics a few ms apart).
UNKNOWN_TOPIC_GRACE_MS = 3000
Send = Callable[["int | None", list, int], Awaitable[Mapping[Any, Any]]]


def _error(code: int, what: str, message: str | None = None) -> KafkaApiError:
    """The typed error for ``code``, its message naming the item it is about."""
    cls = for_code(code)
    return cls(f"{what}: {message or cls.description}", error_code=code)


def _is_connection_failure(e: BaseException) -> bool:
    return isinstance(e, (ConnectionError, OSError, asyncio.TimeoutError))


def _raise_first(results: Mapping[K, Any]) -> dict[K, Any]:
    for value in results.values():
        if isinstance(value, BaseException):
            value.results = dict(results)           # every item's outcome, for callers
            raise value
    return dict(results)


class Admin:
    """The asyncio admin client (module docstring). ``start()`` or ``async with`` first."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None, /,
                 **overrides: Any) -> None:
        if isinstance(config, ClientConfig):
            if overrides:
                config = parse_config(ADMIN, {**config.given(), **{
                    k.replace("_", "."): v for k, v in overrides.items()}})
        else:
            config = parse_config(ADMIN, config, **overrides)
        self.config: ClientConfig = config
        self._cluster = Cluster(config)
        self._started = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> "Admin":
        if not self._started:
            await self._cluster.start()
            self._started = True
        return self

    async def close(self) -> None:
        await self._cluster.close()

    async def __aenter__(self) -> "Admin":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    # ------------------------------------------------------------ the call loop

    def _deadline(self, timeout_ms: int | None) -> tuple[float, int]:
        budget = self.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        if budget < 0:
            raise ValueError(f"timeout_ms must be >= 0, not {budget}")
        return asyncio.get_running_loop().time() + budget / 1000, budget

    def _remaining_ms(self, deadline: float) -> int:
        return max(0, int((deadline - asyncio.get_running_loop().time()) * 1000))

    def _request_ms(self, deadline: float) -> int:
        return max(1, min(self.config["request.timeout.ms"], self._remaining_ms(deadline)))

    async def _fan_out(self, what: str, keys: Iterable[K], timeout_ms: int | None,
                       route: Route, send: Send, describe: Callable[[K], str] = str,
                       retriable: Callable[[KafkaApiError], bool] | None = None,
                       on_retry: Callable[[K, BaseException], Awaitable[None] | None] | None = None,
                       ) -> dict[K, Any]:
        """Each key's outcome (a value, or the exception that ended it), in key order.

        ``route(key)`` names the node for a key (None: any broker); ``send(node, keys,
        request_timeout_ms)`` asks that node about those keys and maps each to a value or
        a KafkaApiError. Errors that ``retriable`` accepts (default: the error's own
        flag), and connection failures, put the key back for the next round."""
        keys = list(dict.fromkeys(keys))
        deadline, budget = self._deadline(timeout_ms)
        is_retriable = retriable or (lambda e: e.retriable)
        out: dict[K, Any] = {}
        last: dict[K, BaseException] = {}
        pending = list(keys)
        backoff_ms = self.config["retry.backoff.ms"]
        while pending:
            routes: dict[int | None, list[K]] = {}
            for key in pending:
                try:
                    remaining_ms = self._remaining_ms(deadline)
                    node = await asyncio.wait_for(route(key, remaining_ms), remaining_ms / 1000)
                except KafkaApiError as e:
                    # Routing already retried what metadata can fix (an unknown topic
                    # stays unknown); other retriable answers go round again.
                    if is_retriable(e) and e.error_code not in _STALE_TOPIC:
                        last[key] = e
                    else:
                        out[key] = e
                    continue
                except Exception as e:
                    if not _is_connection_failure(e):
                        raise
                    last[key] = e
                    continue
                routes.setdefault(node, []).append(key)
            if routes:
                request_ms = self._request_ms(deadline)
                # The deadline bounds connecting too (a stopped broker may accept a TCP
                # connection and then say nothing), not only the request itself.
                bound_s = max(request_ms, self._remaining_ms(deadline)) / 1000
                answers = await asyncio.gather(*(asyncio.wait_for(send(node, ks, request_ms), bound_s)
                                                 for node, ks in routes.items()),
                                               return_exceptions=True)
                for (node, ks), answer in zip(routes.items(), answers):
                    if isinstance(answer, BaseException):
                        if isinstance(answer, KafkaApiError) and not is_retriable(answer):
                            for key in ks:
                                out[key] = answer
                            continue
                        if not (_is_connection_failure(answer) or isinstance(answer, KafkaApiError)):
                            raise answer
                        answer = {key: answer for key in ks}
                    for key in ks:
                        value = answer[key]
                        if isinstance(value, BaseException) and (
                                _is_connection_failure(value)
                                or (isinstance(value, KafkaApiError) and is_retriable(value))):
                            last[key] = value
                            if on_retry is not None:
                                maybe = on_retry(key, value)
                                if maybe is not None:
                                    await maybe
                        else:
                            out[key] = value
                            last.pop(key, None)
            pending = [k for k in keys if k not in out]
            if not pending:
                break
            if self._remaining_ms(deadline) <= backoff_ms:
                for key in pending:
                    error = last.get(key)
                    if isinstance(error, KafkaApiError):
                        out[key] = type(error)(f"{error.message} (still so after {budget} ms)",
                                               error_code=error.error_code)
                    else:
                        out[key] = KafkaTimeoutError(
                            f"{what} {describe(key)}: no answer within {budget} ms"
                            + (f"; last error: {error!r}" if error is not None else ""))
                break
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, self.config["retry.backoff.max.ms"])
        return {k: out[k] for k in keys}

    async def _request(self, node: int | None, api_key: ApiKey, body: Any,
                       versions: tuple[int, int], request_ms: int) -> tuple[int, Any]:
        return await self._cluster.request(node, api_key, body, versions=versions,
                                           timeout_ms=request_ms)

    async def _any(self, _key: Any, _remaining_ms: int) -> None:
        return None

    async def _controller(self, _key: Any, _remaining_ms: int) -> int:
        return await self._cluster.controller()

    async def _coordinator(self, group_id: str, remaining_ms: int) -> int:
        return await self._cluster.coordinator(group_id, timeout_ms=remaining_ms)

    async def _leader(self, tp: TopicPartition, remaining_ms: int) -> int:
        # A leader still being elected is retried by the call loop (LeaderNotAvailable is
        # retriable); a topic that stays unknown ends the call with its name.
        return (await self._cluster.leader_for(
            tp, timeout_ms=min(remaining_ms, UNKNOWN_TOPIC_GRACE_MS)))[0]

    async def _txn_coordinator(self, transactional_id: str, remaining_ms: int) -> int:
        return await self._cluster.coordinator(transactional_id, KEY_TYPE_TRANSACTION,
                                               timeout_ms=remaining_ms)

    def _forget_txn_coordinator(self, transactional_id: str, error: BaseException) -> None:
        if not isinstance(error, KafkaApiError) or error.error_code in _COORDINATOR_MOVED:
            self._cluster.invalidate_coordinator(transactional_id, KEY_TYPE_TRANSACTION)

    def _forget_coordinator(self, group_id: str, error: BaseException) -> None:
        if not isinstance(error, KafkaApiError) or error.error_code in _COORDINATOR_MOVED:
            self._cluster.invalidate_coordinator(group_id)

    async def _refresh_topic(self, tp: TopicPartition, error: BaseException) -> None:
        if not isinstance(error, KafkaApiError) or error.invalid_metadata:
            await self._cluster.refresh_metadata([tp.topic])

    async def _refresh_controller(self, _key: Any, error: BaseException) -> None:
        if not isinstance(error, KafkaApiError) or error.error_code == ErrorCode.NOT_CONTROLLER:
            await self._cluster.refresh_metadata([])

    # ------------------------------------------------------------ topics

    async def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int | None = None) -> dict[str, CreateTopicResult]:
        """Create topics on the controller (through any broker); with ``validate_only``
        the controller checks everything and creates nothing."""
        wanted = {t.name: t for t in topics}
        C = messages.CreateTopicsRequest

        async def send(node: int | None, names: list[str], request_ms: int) -> dict:
            body = C(timeout_ms=request_ms, validate_only=validate_only, topics=[C.CreatableTopic(
                name=n, num_partitions=wanted[n].num_partitions,
                replication_factor=wanted[n].replication_factor,
                assignments=[C.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
                             for p, ids in sorted((wanted[n].replica_assignments or {}).items())],
                configs=[C.CreatableTopicConfig(name=k, value=v)
                         for k, v in wanted[n].configs.items()]) for n in names])
            _, resp = await self._request(node, ApiKey.CREATE_TOPICS, body, (2, 7), request_ms)
            out: dict[str, Any] = {}
            for t in resp.topics:
                if t.error_code != ErrorCode.NONE:
                    out[t.name] = _error(t.error_code, f"topic {t.name!r}", t.error_message)
                    continue
                out[t.name] = CreateTopicResult(
                    name=t.name, topic_id=t.topic_id, num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs={c.name: c.value for c in (t.configs or [])})
            return self._answered(out, names, "CreateTopics", "topic")

        return _raise_first(await self._fan_out(
            "create topic", wanted, timeout_ms, self._controller, send,
            describe=lambda n: repr(n), retriable=self._controller_retriable,
            on_retry=self._refresh_controller))

    @staticmethod
    def _controller_retriable(e: KafkaApiError) -> bool:
        # REQUEST_TIMED_OUT from a broker means it could not reach the controller quorum.
        return e.retriable and e.error_code not in _STALE_TOPIC

    @staticmethod
    def _answered(out: dict, asked: Iterable, api: str, kind: str) -> dict:
        """Every asked item has an answer; a broker leaving one out is an error for it."""
        for key in asked:
            if key not in out:
                out[key] = _error(ErrorCode.UNKNOWN_SERVER_ERROR, f"{kind} {key!r}",
                                  f"the {api} response did not mention it")
        return out

    async def list_topics(self, *, include_internal: bool = False,
                          timeout_ms: int | None = None) -> dict[str, TopicListing]:
        """Every topic the brokers know, by name (``__consumer_offsets`` and other
        internal topics only with ``include_internal``)."""
        resp = await self._metadata(None, timeout_ms)
        return {t.name: TopicListing(t.name, t.topic_id or ZERO_TOPIC_ID, t.is_internal)
                for t in sorted(resp.topics, key=lambda t: t.name)
                if t.error_code == ErrorCode.NONE and (include_internal or not t.is_internal)}

    async def _metadata(self, topics: list[str] | None, timeout_ms: int | None) -> Any:
        M = messages.MetadataRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = M(topics=None if topics is None else [M.MetadataRequestTopic(name=n) for n in topics],
                     allow_auto_topic_creation=False)
            _, resp = await self._request(node, ApiKey.METADATA, body, (4, 12), request_ms)
            return {keys[0]: resp}

        (resp,) = _raise_first(await self._fan_out("Metadata", ["metadata"], timeout_ms,
                                                    self._any, send)).values()
        return resp

    async def describe_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                              ) -> dict[str, TopicDescription]:
        """Partitions (leader, leader epoch, replicas, ISR, offline replicas) and topic id
        of each topic, from a fresh Metadata request. An unknown topic raises
        UnknownTopicOrPartitionError naming it."""
        return _raise_first(await self._describe_topics(list(topics), timeout_ms))

    async def _describe_topics(self, names: list[str], timeout_ms: int | None) -> dict[str, Any]:
        M = messages.MetadataRequest

        async def send(node: int | None, ks: list[str], request_ms: int) -> dict:
            body = M(topics=[M.MetadataRequestTopic(name=n) for n in ks],
                     allow_auto_topic_creation=False)
            _, resp = await self._request(node, ApiKey.METADATA, body, (4, 12), request_ms)
            out: dict[str, Any] = {}
            for t in resp.topics:
                if t.error_code != ErrorCode.NONE:
                    out[t.name] = _error(t.error_code, f"topic {t.name!r}",
                                         "does not exist" if t.error_code in _STALE_TOPIC else None)
                    continue
                out[t.name] = TopicDescription(
                    name=t.name, topic_id=t.topic_id or ZERO_TOPIC_ID, is_internal=t.is_internal,
                    partitions=tuple(TopicPartitionInfo(
                        partition=p.partition_index, leader=p.leader_id,
                        leader_epoch=p.leader_epoch, replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes), offline_replicas=tuple(p.offline_replicas or ()))
                        for p in sorted(t.partitions, key=lambda p: p.partition_index)))
            return self._answered(out, ks, "Metadata", "topic")

        # An unknown topic is an answer, not a reason to retry: there is no auto-creation.
        return await self._fan_out("describe topic", names, timeout_ms, self._any, send,
                                   retriable=lambda e: e.retriable and e.error_code not in _STALE_TOPIC)

    async def delete_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                            ) -> dict[str, None]:
        D = messages.DeleteTopicsRequest

        def body(version: int, names: list[str], request_ms: int) -> Any:
            if version >= 6:
                return D(timeout_ms=request_ms, topics=[D.DeleteTopicState(name=n) for n in names])
            return D(timeout_ms=request_ms, topic_names=list(names))

        async def send(node: int | None, names: list[str], request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DELETE_TOPICS,
                                          lambda v: body(v, names, request_ms), (1, 6), request_ms)
            out: dict[str, Any] = {}
            for r in resp.responses:
                out[r.name] = None if r.error_code == ErrorCode.NONE else _error(
                    r.error_code, f"topic {r.name!r}",
                    "does not exist" if r.error_code in _STALE_TOPIC else r.error_message)
            return self._answered(out, names, "DeleteTopics", "topic")

        return _raise_first(await self._fan_out(
            "delete topic", topics, timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    async def create_partitions(self, new_partitions: Mapping[str, NewPartitions], *,
                                validate_only: bool = False, timeout_ms: int | None = None
                                ) -> dict[str, None]:
        """Grow each topic to ``total_count`` partitions (a topic never shrinks)."""
        C = messages.CreatePartitionsRequest

        async def send(node: int | None, names: list[str], request_ms: int) -> dict:
            body = C(timeout_ms=request_ms, validate_only=validate_only, topics=[
                C.CreatePartitionsTopic(
                    name=n, count=new_partitions[n].total_count,
                    assignments=None if new_partitions[n].assignments is None else [
                        C.CreatePartitionsAssignment(broker_ids=list(ids))
                        for ids in new_partitions[n].assignments]) for n in names])
            _, resp = await self._request(node, ApiKey.CREATE_PARTITIONS, body, (0, 3), request_ms)
            out = {r.name: None if r.error_code == ErrorCode.NONE else _error(
                r.error_code, f"topic {r.name!r}",
                "does not exist" if r.error_code in _STALE_TOPIC else r.error_message)
                for r in resp.results}
            return self._answered(out, names, "CreatePartitions", "topic")

        return _raise_first(await self._fan_out(
            "create partitions for", new_partitions, timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    # ------------------------------------------------------------ configs

    async def _config_node(self, resource: ConfigResource, _remaining_ms: int) -> int | None:
        # A broker's own configs come from that broker; topics and the cluster-wide
        # default from any broker (Kafka's AdminClient routes them the same way).
        if resource.type == ConfigResourceType.BROKER and resource.name:
            if not resource.name.isdigit():
                raise _error(ErrorCode.INVALID_REQUEST, str(resource),
                             "a broker resource is named by a broker id, or \"\" for the default")
            return int(resource.name)
        return None

    async def describe_configs(self, resources: Iterable[ConfigResource], *,
                               include_synonyms: bool = False,
                               include_documentation: bool = False,
                               timeout_ms: int | None = None
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each resource, with its source, read-only and sensitive flags;
        synonyms (where the value comes from, in precedence order) and documentation on
        request."""
        D = messages.DescribeConfigsRequest

        async def send(node: int | None, rs: list[ConfigResource], request_ms: int) -> dict:
            body = D(include_synonyms=include_synonyms, include_documentation=include_documentation,
                     resources=[D.DescribeConfigsResource(resource_type=int(r.type),
                                                          resource_name=r.name,
                                                          configuration_keys=None) for r in rs])
            version, resp = await self._request(node, ApiKey.DESCRIBE_CONFIGS, body, (1, 4),
                                                request_ms)
            out: dict[ConfigResource, Any] = {}
            for res in resp.results:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                if res.error_code != ErrorCode.NONE:
                    out[key] = _error(res.error_code, str(key), res.error_message)
                    continue
                out[key] = {c.name: self._config_entry(c, version) for c in res.configs}
            return self._answered(out, rs, "DescribeConfigs", "resource")

        return _raise_first(await self._fan_out(
            "describe configs of", resources, timeout_ms, self._config_node, send,
            retriable=self._controller_retriable))

    @staticmethod
    def _config_entry(c: Any, version: int) -> ConfigEntry:
        source = ConfigSource.of(c.config_source) if version >= 1 else (
            ConfigSource.DEFAULT_CONFIG if c.is_default else ConfigSource.UNKNOWN)
        return ConfigEntry(
            name=c.name, value=c.value, source=source,
            is_default=source == ConfigSource.DEFAULT_CONFIG if version >= 1 else c.is_default,
            read_only=c.read_only, sensitive=c.is_sensitive,
            synonyms=tuple(ConfigSynonym(s.name, s.value, ConfigSource.of(s.source))
                           for s in (c.synonyms or ())),
            type=ConfigType.of(c.config_type) if version >= 3 else ConfigType.UNKNOWN,
            documentation=c.documentation if version >= 3 else None)

    async def incremental_alter_configs(
            self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *,
            validate_only: bool = False, timeout_ms: int | None = None
    ) -> dict[ConfigResource, None]:
        """KIP-339's IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND and
        SUBTRACT (list-typed configs) per key; other keys keep their values. Each resource
        changes atomically."""
        I = messages.IncrementalAlterConfigsRequest

        async def send(node: int | None, rs: list[ConfigResource], request_ms: int) -> dict:
            body = I(validate_only=validate_only, resources=[I.AlterConfigsResource(
                resource_type=int(r.type), resource_name=r.name,
                configs=[I.AlterableConfig(name=op.name, config_operation=int(op.op),
                                           value=None if op.op == AlterConfigOpType.DELETE else op.value)
                         for op in changes[r]]) for r in rs])
            _, resp = await self._request(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, body, (0, 1),
                                          request_ms)
            return self._alter_results(resp.responses, rs, "IncrementalAlterConfigs")

        return _raise_first(await self._fan_out(
            "alter configs of", changes, timeout_ms, self._config_node, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    def _alter_results(self, responses: Any, asked: list[ConfigResource], api: str) -> dict:
        out: dict[ConfigResource, Any] = {}
        for r in responses:
            key = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
            out[key] = None if r.error_code == ErrorCode.NONE else _error(
                r.error_code, str(key), r.error_message)
        return self._answered(out, asked, api, "resource")

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False, timeout_ms: int | None = None
                            ) -> dict[ConfigResource, None]:
        """The legacy AlterConfigs (API 33): each resource's dynamic configs become exactly
        ``configs[resource]``; keys not given go back to their defaults. Prefer
        ``incremental_alter_configs``. A cluster that does not serve API 33 raises
        UnsupportedVersionError."""
        A = messages.AlterConfigsRequest

        async def send(node: int | None, rs: list[ConfigResource], request_ms: int) -> dict:
            body = A(validate_only=validate_only, resources=[A.AlterConfigsResource(
                resource_type=int(r.type), resource_name=r.name,
                configs=[A.AlterableConfig(name=k, value=v) for k, v in configs[r].items()])
                for r in rs])
            _, resp = await self._request(node, ApiKey.ALTER_CONFIGS, body, (0, 2), request_ms)
            return self._alter_results(resp.responses, rs, "AlterConfigs")

        return _raise_first(await self._fan_out(
            "alter configs of", configs, timeout_ms, self._config_node, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    # ------------------------------------------------------------ cluster links (issue 21)

    async def create_cluster_link(self, name: str, configs: Mapping[str, str], *,
                                  validate_only: bool = False, timeout_ms: int | None = None) -> None:
        """A new cluster link (Ketch's CLUSTER_LINK config resource) with ``configs``
        (``bootstrap.servers`` at least); an existing link's name raises InvalidRequestError."""
        if name in await self.list_cluster_links(timeout_ms=timeout_ms):
            raise _error(ErrorCode.INVALID_REQUEST, f"cluster link {name!r}",
                         "exists already (alter it, or delete it first)")
        await self.incremental_alter_configs(
            {ConfigResource.cluster_link(name): [AlterConfigOp(k, v) for k, v in configs.items()]},
            validate_only=validate_only, timeout_ms=timeout_ms)

    async def alter_cluster_link(self, name: str, ops: Sequence[AlterConfigOp], *,
                                 timeout_ms: int | None = None) -> None:
        """IncrementalAlterConfigs on the link (APPEND to ``topics`` mirrors more topics)."""
        if name not in await self.list_cluster_links(timeout_ms=timeout_ms):
            raise _error(ErrorCode.RESOURCE_NOT_FOUND, f"cluster link {name!r}", "does not exist")
        await self.incremental_alter_configs({ConfigResource.cluster_link(name): list(ops)},
                                             timeout_ms=timeout_ms)

    async def list_cluster_links(self, *, timeout_ms: int | None = None) -> dict[str, str]:
        """Every cluster link: name -> its source's bootstrap servers."""
        listing = await self.describe_configs([ConfigResource.cluster_link("")], timeout_ms=timeout_ms)
        return {name: entry.value or "" for name, entry in
                sorted(listing[ConfigResource.cluster_link("")].items())}

    async def describe_cluster_link(self, name: str, *, timeout_ms: int | None = None
                                    ) -> dict[str, ConfigEntry]:
        """The link's configs, defaults included, secrets hidden (value None). A link that
        does not exist raises ResourceNotFoundError."""
        if not name:
            raise _error(ErrorCode.INVALID_REQUEST, "cluster link ''", "a link has a name")
        resource = ConfigResource.cluster_link(name)
        return (await self.describe_configs([resource], include_documentation=True,
                                            timeout_ms=timeout_ms))[resource]

    async def delete_cluster_link(self, name: str, *, timeout_ms: int | None = None) -> None:
        """Delete the link (all of its configs, in one AlterConfigs). The controller
        refuses it, INVALID_REQUEST naming them, while mirror topics use the link."""
        if name not in await self.list_cluster_links(timeout_ms=timeout_ms):
            raise _error(ErrorCode.RESOURCE_NOT_FOUND, f"cluster link {name!r}", "does not exist")
        await self.alter_configs({ConfigResource.cluster_link(name): {}}, timeout_ms=timeout_ms)

    async def list_mirror_topics(self, *, timeout_ms: int | None = None
                                 ) -> dict[str, dict[str, str]]:
        """Every mirror topic: name -> {"link", "source_topic", "state"} (its
        ``ketch.mirror.*`` configs; a promoted topic keeps its link's name)."""
        names = list(await self.list_topics(timeout_ms=timeout_ms))
        if not names:
            return {}
        configs = await self.describe_configs([ConfigResource.topic(n) for n in names],
                                              timeout_ms=timeout_ms)
        out: dict[str, dict[str, str]] = {}
        for resource, entries in sorted(configs.items(), key=lambda item: item[0].name):
            link = entries.get(_MIRROR_LINK)
            if link is None or not link.value:
                continue
            source = entries.get(_MIRROR_SOURCE_TOPIC)
            state = entries.get(_MIRROR_STATE)
            out[resource.name] = {"link": link.value,
                                  "source_topic": (source.value if source else None) or resource.name,
                                  "state": (state.value if state else None) or "active"}
        return out

    async def create_mirror_topic(self, topic: str, link: str, *, timeout_ms: int | None = None
                                  ) -> None:
        """Mirror the source topic ``topic`` through ``link``: its name is appended to the
        link's ``topics`` (as a regex matching only it); the link manager creates the
        mirror topic at its next look at the source (``metadata.max.age.ms``)."""
        await self.alter_cluster_link(link, [AlterConfigOp("topics", re.escape(topic),
                                                           AlterConfigOpType.APPEND)],
                                      timeout_ms=timeout_ms)

    async def promote_mirror_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                                    ) -> dict[str, None]:
        """Make mirror topics writable at their current end (``ketch.mirror.state=promoted``):
        their leaders stop mirroring first; the topics keep their history."""
        out = await self.incremental_alter_configs(
            {ConfigResource.topic(t): [AlterConfigOp(_MIRROR_STATE, "promoted")] for t in topics},
            timeout_ms=timeout_ms)
        return {r.name: v for r, v in out.items()}

    async def restore_mirror_topic(self, topic: str, link: str, source_topic: str | None = None,
                                   *, timeout_ms: int | None = None) -> None:
        """Truncate-and-restore: make ``topic`` (a promoted mirror, or a former source)
        follow ``source_topic`` (default: its own name) through ``link`` again; its
        leaders truncate to where it diverged from the source and follow from there."""
        await self.incremental_alter_configs({ConfigResource.topic(topic): [
            AlterConfigOp(_MIRROR_LINK, link), AlterConfigOp(_MIRROR_SOURCE_TOPIC, source_topic or topic),
            AlterConfigOp(_MIRROR_STATE, "active")]}, timeout_ms=timeout_ms)

    # ------------------------------------------------------------ cluster and quorum

    async def list_client_metrics_resources(self, *, timeout_ms: int | None = None) -> list[str]:
        """The names of the client-metrics subscriptions (ListClientMetricsResources,
        KIP-714), sorted."""
        L = messages.ListClientMetricsResourcesRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.LIST_CLIENT_METRICS_RESOURCES, L(),
                                          (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "ListClientMetricsResources")}
            return {keys[0]: sorted(r.name for r in resp.client_metrics_resources)}

        (result,) = _raise_first(await self._fan_out("list client-metrics subscriptions",
                                                     ["names"], timeout_ms, self._any,
                                                     send)).values()
        return result

    # ------------------------------------------------------------ client quotas

    async def describe_client_quotas(
            self, filter: Mapping[str, Any] | None = None, *, strict: bool = False,
            timeout_ms: int | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Quota values by entity (DescribeClientQuotas, KIP-546). ``filter`` maps an entity
        type to a name, None (the type's default) or ANY_NAME; with ``strict`` an entity
        has no other types. No filter: every entity."""
        D = messages.DescribeClientQuotasRequest
        components = [D.ComponentData(entity_type=t, match_type=2 if n is ANY_NAME else
                                      (1 if n is None else 0),
                                      match=None if n is None or n is ANY_NAME else n)
                      for t, n in sorted((filter or {}).items())]

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DESCRIBE_CLIENT_QUOTAS,
                                          D(components=components, strict=strict), (0, 1), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "DescribeClientQuotas", resp.error_message)}
            return {keys[0]: {client_quota_entity({e.entity_type: e.entity_name for e in entry.entity}):
                              {v.key: v.value for v in entry.values} for entry in resp.entries or ()}}

        (result,) = _raise_first(await self._fan_out("describe client quotas", ["quotas"],
                                                     timeout_ms, self._any, send)).values()
        return result

    async def alter_client_quotas(
            self, alterations: Mapping[ClientQuotaEntity, Mapping[str, float | None]], *,
            validate_only: bool = False, timeout_ms: int | None = None
    ) -> dict[ClientQuotaEntity, None]:
        """Set (a value) or remove (None) quota keys of each entity (AlterClientQuotas,
        decided by the active controller); each entity succeeds or fails on its own."""
        A = messages.AlterClientQuotasRequest

        async def send(node: int | None, entities: list, request_ms: int) -> dict:
            entries = [A.EntryData(
                entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[A.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                     for k, v in sorted(alterations[entity].items())]) for entity in entities]
            _, resp = await self._request(node, ApiKey.ALTER_CLIENT_QUOTAS,
                                          A(entries=entries, validate_only=validate_only),
                                          (0, 1), request_ms)
            out: dict = {}
            for entry in resp.entries:
                entity = client_quota_entity({e.entity_type: e.entity_name for e in entry.entity})
                out[entity] = (None if entry.error_code == ErrorCode.NONE else
                               _error(entry.error_code, f"AlterClientQuotas {dict(entity)}",
                                      entry.error_message))
            return {e: out.get(e, _error(ErrorCode.UNKNOWN_SERVER_ERROR, "AlterClientQuotas",
                                         "the answer left this entity out")) for e in entities}

        return _raise_first(await self._fan_out(
            "alter client quotas", [client_quota_entity(dict(e)) for e in alterations],
            timeout_ms, self._any, send))

    # ------------------------------------------------------------ ACLs

    async def create_acls(self, acls: Sequence[AclBinding], *,
                          timeout_ms: int | None = None) -> dict[AclBinding, None]:
        """Create ACLs (CreateAcls, decided by the active controller); each succeeds or
        fails on its own (INVALID_REQUEST names what Kafka refuses)."""
        C = messages.CreateAclsRequest

        async def send(node: int | None, bindings: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.CREATE_ACLS, C(creations=[
                C.AclCreation(resource_type=int(b.resource_type), resource_name=b.resource_name,
                              resource_pattern_type=int(b.pattern_type), principal=b.principal,
                              host=b.host, operation=int(b.operation),
                              permission_type=int(b.permission_type)) for b in bindings]),
                (1, 3), request_ms)
            if len(resp.results) != len(bindings):
                return {b: _error(ErrorCode.UNKNOWN_SERVER_ERROR, f"CreateAcls {b}",
                                  "the answer has another number of results") for b in bindings}
            return {b: None if r.error_code == ErrorCode.NONE else
                    _error(r.error_code, f"CreateAcls {b}", r.error_message)
                    for b, r in zip(bindings, resp.results)}

        return _raise_first(await self._fan_out("create ACLs", acls, timeout_ms, self._any, send))

    async def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter(), *,
                            timeout_ms: int | None = None) -> list[AclBinding]:
        """The ACLs a filter matches (DescribeAcls, answered from a broker's metadata)."""
        D = messages.DescribeAclsRequest
        f = acl_filter

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DESCRIBE_ACLS, D(
                resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
                pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
                host_filter=f.host, operation=int(f.operation),
                permission_type=int(f.permission_type)), (1, 3), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "DescribeAcls", resp.error_message)}
            return {keys[0]: [AclBinding(
                enum_or_unknown(AclResourceType, r.resource_type), r.resource_name,
                enum_or_unknown(AclPatternType, r.pattern_type), a.principal, a.host,
                enum_or_unknown(AclOperation, a.operation),
                enum_or_unknown(AclPermissionType, a.permission_type))
                for r in resp.resources for a in r.acls]}

        (result,) = _raise_first(await self._fan_out("describe ACLs", ["acls"], timeout_ms,
                                                     self._any, send)).values()
        return result

    async def delete_acls(self, filters: Sequence[AclBindingFilter], *,
                          timeout_ms: int | None = None) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs each filter matches (DeleteAcls, decided by the active
        controller); each filter's answer is the ACLs it deleted."""
        D = messages.DeleteAclsRequest

        async def send(node: int | None, fs: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DELETE_ACLS, D(filters=[
                D.DeleteAclsFilter(
                    resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
                    pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
                    host_filter=f.host, operation=int(f.operation),
                    permission_type=int(f.permission_type)) for f in fs]), (1, 3), request_ms)
            if len(resp.filter_results) != len(fs):
                return {f: _error(ErrorCode.UNKNOWN_SERVER_ERROR, f"DeleteAcls {f}",
                                  "the answer has another number of results") for f in fs}
            return {f: _error(r.error_code, f"DeleteAcls {f}", r.error_message)
                    if r.error_code != ErrorCode.NONE else [AclBinding(
                        enum_or_unknown(AclResourceType, m.resource_type), m.resource_name,
                        enum_or_unknown(AclPatternType, m.pattern_type), m.principal, m.host,
                        enum_or_unknown(AclOperation, m.operation),
                        enum_or_unknown(AclPermissionType, m.permission_type))
                        for m in r.matching_acls]
                    for f, r in zip(fs, resp.filter_results)}

        return _raise_first(await self._fan_out("delete ACLs", filters, timeout_ms, self._any, send))
    # ------------------------------------------------------------ SCRAM users (KIP-554)

    async def describe_user_scram_credentials(
            self, users: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's SCRAM mechanisms and iteration counts (never a key); None or empty:
        every user that has one. A named user without credentials raises
        ResourceNotFoundError, as Kafka's Admin does."""
        D = messages.DescribeUserScramCredentialsRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            request = D(users=[D.UserName(name=u) for u in users] if users else None)
            _, resp = await self._request(node, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request,
                                          (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "DescribeUserScramCredentials", resp.error_message)}
            out: dict[str, list[ScramCredentialInfo]] = {}
            for r in resp.results:
                if r.error_code != ErrorCode.NONE:
                    return {keys[0]: _error(r.error_code, f"DescribeUserScramCredentials {r.user}",
                                            r.error_message)}
                out[r.user] = [ScramCredentialInfo(scram.BY_WIRE_TYPE[c.mechanism].name, c.iterations)
                               for c in r.credential_infos if c.mechanism in scram.BY_WIRE_TYPE]
            return {keys[0]: out}

        (result,) = _raise_first(await self._fan_out("describe SCRAM users", ["users"], timeout_ms,
                                                     self._any, send)).values()
        return result

    async def alter_user_scram_credentials(
            self, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion],
            *, timeout_ms: int | None = None) -> dict[str, None]:
        """Create, replace or delete SCRAM credentials (AlterUserScramCredentials, decided by
        the active controller); each user succeeds or fails on its own. Passwords are salted
        and hashed here: the cluster only ever sees the salted password."""
        A = messages.AlterUserScramCredentialsRequest
        deletions, upsertions = [], []
        for alteration in alterations:
            mechanism = scram.MECHANISMS.get(alteration.mechanism.upper().replace("_", "-"))
            if mechanism is None:
                raise ValueError(f"{alteration.mechanism}: not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)")
            if isinstance(alteration, UserScramCredentialDeletion):
                deletions.append(A.ScramCredentialDeletion(name=alteration.user, mechanism=mechanism.wire_type))
                continue
            salt = alteration.salt or os.urandom(32)
            # PBKDF2 costs ~iterations hashes: run it off the event loop.
            salted = await asyncio.get_running_loop().run_in_executor(
                None, scram.salted_password, mechanism, alteration.password, salt, alteration.iterations)
            upsertions.append(A.ScramCredentialUpsertion(
                name=alteration.user, mechanism=mechanism.wire_type, iterations=alteration.iterations,
                salt=salt, salted_password=salted))
        users = list(dict.fromkeys(a.user for a in alterations))

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            request = A(deletions=[d for d in deletions if d.name in keys],
                        upsertions=[u for u in upsertions if u.name in keys])
            _, resp = await self._request(node, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request,
                                          (0, 0), request_ms)
            out: dict = {r.user: None if r.error_code == ErrorCode.NONE else
                         _error(r.error_code, f"AlterUserScramCredentials {r.user}", r.error_message)
                         for r in resp.results}
            return {u: out.get(u, _error(ErrorCode.UNKNOWN_SERVER_ERROR, "AlterUserScramCredentials",
                                         "the answer left this user out")) for u in keys}

        # Every user routes to any broker (which forwards to the controller), so the users
        # still pending go in one request, as Kafka's Admin sends them.
        return _raise_first(await self._fan_out("alter SCRAM users", users, timeout_ms,
                                                self._any, send))

    async def describe_features(self, *, timeout_ms: int | None = None) -> FeatureMetadata:
        """The finalized feature levels as a broker knows them, with their epoch (the
        metadata offset it has applied) and that broker's supported ranges (ApiVersions v3+)."""
        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.API_VERSIONS, messages.ApiVersionsRequest(
                client_software_name="ketch", client_software_version="0"), (3, 4), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "ApiVersions")}
            return {keys[0]: FeatureMetadata(
                finalized_features={f.name: f.max_version_level for f in resp.finalized_features},
                finalized_features_epoch=resp.finalized_features_epoch,
                supported_features={f.name: (f.min_version, f.max_version)
                                    for f in resp.supported_features})}

        (result,) = _raise_first(await self._fan_out("describe features", ["features"],
                                                     timeout_ms, self._any, send)).values()
        return result

    async def update_features(self, updates: Mapping[str, FeatureUpdate], *,
                              validate_only: bool = False, timeout_ms: int | None = None
                              ) -> dict[str, None]:
        """Upgrade or downgrade finalized features (UpdateFeatures, decided by the active
        controller): all or nothing. A refused update raises INVALID_UPDATE_VERSION with
        the controller's reason; ``validate_only`` checks and changes nothing."""
        U = messages.UpdateFeaturesRequest
        names = list(updates)

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = U(timeout_ms=request_ms, validate_only=validate_only, feature_updates=[
                U.FeatureUpdateKey(
                    feature=n, max_version_level=updates[n].max_version_level,
                    upgrade_type=int(updates[n].upgrade_type),
                    # Read at v0 only, where it is the whole choice.
                    allow_downgrade=updates[n].upgrade_type != UpgradeType.UPGRADE)
                for n in names])
            # v0 has no ValidateOnly: a broker that speaks only v0 must not apply the change.
            _, resp = await self._request(node, ApiKey.UPDATE_FEATURES, body,
                                          (1 if validate_only else 0, 2), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "UpdateFeatures", resp.error_message)}
            for r in resp.results or ():
                if r.error_code != ErrorCode.NONE:
                    return {keys[0]: _error(r.error_code, f"UpdateFeatures {r.feature!r}",
                                            r.error_message)}
            return {keys[0]: None}

        _raise_first(await self._fan_out(
            "update features", ["features"], timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))
        return {n: None for n in names}

    async def add_raft_voter(self, voter_id: int, directory_id: "uuid.UUID",
                             endpoints: Mapping[str, tuple[str, int]], *,
                             timeout_ms: int | None = None) -> None:
        """Make a controller a voter of the metadata quorum (AddRaftVoter, KIP-853):
        ``endpoints`` by listener name (its controller listener; Ketch also takes its
        ``RAFT`` address). The active controller refuses a controller that has not caught
        up with the log (retried until the deadline, then raised with its reason), an id
        already voting, and any change while another is in flight."""
        A = messages.AddRaftVoterRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = A(cluster_id=None, timeout_ms=request_ms, voter_id=voter_id,
                     voter_directory_id=directory_id,
                     listeners=[A.Listener(name=n, host=h, port=p) for n, (h, p) in endpoints.items()])
            _, resp = await self._request(node, ApiKey.ADD_RAFT_VOTER, body, (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, f"AddRaftVoter {voter_id}", resp.error_message)}
            return {keys[0]: None}

        _raise_first(await self._fan_out(
            "add raft voter", ["voter"], timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    async def remove_raft_voter(self, voter_id: int, directory_id: "uuid.UUID", *,
                                timeout_ms: int | None = None) -> None:
        """Remove a voter from the metadata quorum (RemoveRaftVoter, KIP-853). The last
        voter cannot be removed."""
        R = messages.RemoveRaftVoterRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = R(cluster_id=None, voter_id=voter_id, voter_directory_id=directory_id)
            _, resp = await self._request(node, ApiKey.REMOVE_RAFT_VOTER, body, (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, f"RemoveRaftVoter {voter_id}", resp.error_message)}
            return {keys[0]: None}

        _raise_first(await self._fan_out(
            "remove raft voter", ["voter"], timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """Live brokers (id, host, port, rack), the controller id brokers report and the
        cluster id (DescribeCluster, KIP-700)."""
        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DESCRIBE_CLUSTER,
                                          messages.DescribeClusterRequest(), (0, 1), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "DescribeCluster", resp.error_message)}
            return {keys[0]: ClusterDescription(
                cluster_id=resp.cluster_id, controller_id=resp.controller_id,
                brokers=tuple(sorted((BrokerNode(b.broker_id, b.host, b.port, b.rack)
                                      for b in resp.brokers), key=lambda b: b.node_id)))}

        (result,) = _raise_first(await self._fan_out("describe cluster", ["cluster"], timeout_ms,
                                                     self._any, send)).values()
        return result

    async def describe_quorum(self, *, timeout_ms: int | None = None) -> QuorumInfo:
        """The metadata quorum as its leader sees it (DescribeQuorum, KIP-595/KIP-836):
        leader id and epoch, high watermark, voters and observers with their log end
        offsets and lag behind the leader. Brokers forward the request to the active
        controller."""
        D = messages.DescribeQuorumRequest

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = D(topics=[D.TopicData(topic_name=METADATA_TOPIC,
                                         partitions=[D.PartitionData(partition_index=0)])])
            _, resp = await self._request(node, ApiKey.DESCRIBE_QUORUM, body, (0, 2), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "DescribeQuorum", resp.error_message)}
            parts = [p for t in resp.topics if t.topic_name == METADATA_TOPIC for p in t.partitions
                     if p.partition_index == 0]
            if not parts:
                return {keys[0]: _error(ErrorCode.UNKNOWN_SERVER_ERROR, "DescribeQuorum",
                                        f"the answer does not describe {METADATA_TOPIC}-0")}
            p = parts[0]
            if p.error_code != ErrorCode.NONE:
                return {keys[0]: _error(p.error_code, f"DescribeQuorum {METADATA_TOPIC}-0",
                                        p.error_message)}
            if node is not None and p.leader_id != node:
                # Asked a controller directly (ControllerAdmin), and it no longer leads:
                # only the leader knows where the others are. Ask the quorum again.
                return {keys[0]: _error(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                        f"DescribeQuorum {METADATA_TOPIC}-0",
                                        f"controller {node} no longer leads (leader: {p.leader_id})")}
            leader_end = leader_log_end(p.current_voters, p.leader_id)
            nodes = {n.node_id: (n.listeners[0].host, n.listeners[0].port)
                     for n in (resp.nodes or ()) if n.listeners}
            return {keys[0]: QuorumInfo(leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                        high_watermark=p.high_watermark,
                                        voters=quorum_replicas(p.current_voters, leader_end),
                                        observers=quorum_replicas(p.observers, leader_end),
                                        nodes=nodes)}

        (result,) = _raise_first(await self._fan_out("describe quorum", ["quorum"], timeout_ms,
                                                     self._any, send,
                                                     on_retry=self._refresh_controller)).values()
        return result

    # ------------------------------------------------------------ elections, reassignment

    async def elect_leaders(self, election_type: ElectionType,
                            partitions: Iterable[TopicPartition] | None = None, *,
                            timeout_ms: int | None = None
                            ) -> dict[TopicPartition, KafkaApiError | None]:
        """ElectLeaders on the controller: each partition's outcome, None for an election
        done, else its error (ElectionNotNeededError when the right leader leads already).
        Like Kafka's ``electLeaders``, outcomes per partition are returned, not raised;
        with ``partitions`` None every partition is tried and only those that needed an
        election are returned."""
        E = messages.ElectLeadersRequest
        wanted = None if partitions is None else list(dict.fromkeys(partitions))

        def body(version: int, request_ms: int) -> Any:
            tps = None
            if wanted is not None:
                by_topic: dict[str, list[int]] = {}
                for tp in wanted:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                tps = [E.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
            return E(election_type=election_type.value, topic_partitions=tps, timeout_ms=request_ms)

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.ELECT_LEADERS,
                                          lambda v: body(v, request_ms), (1, 2), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "ElectLeaders")}
            out: dict[TopicPartition, KafkaApiError | None] = {}
            for r in resp.replica_election_results:
                for p in r.partition_result:
                    tp = TopicPartition(r.topic, p.partition_id)
                    out[tp] = None if p.error_code == ErrorCode.NONE else _error(
                        p.error_code, f"partition {tp.topic}-{tp.partition}", p.error_message)
            return {keys[0]: out}

        (result,) = _raise_first(await self._fan_out(
            "elect leaders", ["election"], timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller)).values()
        if wanted is not None:
            for tp in wanted:
                result.setdefault(tp, _error(ErrorCode.UNKNOWN_SERVER_ERROR,
                                             f"partition {tp.topic}-{tp.partition}",
                                             "the ElectLeaders response did not mention it"))
        return result

    async def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
            timeout_ms: int | None = None) -> dict[TopicPartition, None]:
        """Start (target replicas) or cancel (None) partition reassignments (KIP-455). The
        call returns once the controller has recorded them; the data moves afterwards
        (``list_partition_reassignments`` shows what still moves)."""
        A = messages.AlterPartitionReassignmentsRequest
        T = A.ReassignableTopic

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            by_topic: dict[str, list[Any]] = {}
            for tp in tps:
                target = reassignments[tp]
                by_topic.setdefault(tp.topic, []).append(T.ReassignablePartition(
                    partition_index=tp.partition, replicas=None if target is None else list(target)))
            body = A(timeout_ms=request_ms, topics=[T(name=t, partitions=ps)
                                                    for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.ALTER_PARTITION_REASSIGNMENTS, body,
                                          (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                error = _error(resp.error_code, "AlterPartitionReassignments", resp.error_message)
                return {tp: error for tp in tps}
            out: dict[TopicPartition, Any] = {}
            for r in resp.responses:
                for p in r.partitions:
                    tp = TopicPartition(r.name, p.partition_index)
                    out[tp] = None if p.error_code == ErrorCode.NONE else _error(
                        p.error_code, f"partition {tp.topic}-{tp.partition}", p.error_message)
            return self._answered(out, tps, "AlterPartitionReassignments", "partition")

        return _raise_first(await self._fan_out(
            "reassign", reassignments, timeout_ms, self._controller, send,
            describe=lambda tp: f"{tp.topic}-{tp.partition}",
            retriable=self._controller_retriable, on_retry=self._refresh_controller))

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of ``partitions``, or all); a partition not
        moving, or of a topic that does not exist, is absent."""
        L = messages.ListPartitionReassignmentsRequest
        wanted = None if partitions is None else list(dict.fromkeys(partitions))

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            topics = None
            if wanted is not None:
                by_topic: dict[str, list[int]] = {}
                for tp in wanted:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                topics = [L.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                          for t, ps in by_topic.items()]
            _, resp = await self._request(node, ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                          L(timeout_ms=request_ms, topics=topics), (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, "ListPartitionReassignments",
                                        resp.error_message)}
            return {keys[0]: {
                TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in resp.topics for p in t.partitions}}

        (result,) = _raise_first(await self._fan_out(
            "list reassignments", ["reassignments"], timeout_ms, self._controller, send,
            retriable=self._controller_retriable, on_retry=self._refresh_controller)).values()
        return result

    async def decommission_broker(self, broker_id: int, *, dry_run: bool = False,
                                  timeout_ms: int | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        """Move every replica off ``broker_id`` to the other live brokers
        (``plan_decommission``) and start those reassignments; returns the plan. The
        broker keeps serving until its replicas have moved (``list_partition_reassignments``
        shows what still moves); stop it afterwards."""
        deadline, _ = self._deadline(timeout_ms)
        cluster = await self.describe_cluster(timeout_ms=self._remaining_ms(deadline))
        live = {b.node_id for b in cluster.brokers}
        if broker_id not in live:
            raise _error(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id}",
                         f"not a live broker (live: {sorted(live)})")
        described = await self.describe_topics(
            list(await self.list_topics(include_internal=True, timeout_ms=self._remaining_ms(deadline))),
            timeout_ms=self._remaining_ms(deadline))
        current = {TopicPartition(d.name, p.partition): p.replicas
                   for d in described.values() for p in d.partitions}
        plan = plan_decommission(current, broker_id, live)
        if plan and not dry_run:
            await self.alter_partition_reassignments(plan, timeout_ms=self._remaining_ms(deadline))
        return plan

    async def describe_log_dirs(self, partitions: Iterable[TopicPartition], *,
                                timeout_ms: int | None = None) -> dict[TopicPartition, ReplicaLogDir]:
        """Each partition's log on its leader (DescribeLogDirs): the log directory, the
        size in bytes, and the offset lag Kafka reports (0 on a leader)."""
        D = messages.DescribeLogDirsRequest

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body = D(topics=[D.DescribableLogDirTopic(topic=t, partitions=ps)
                             for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.DESCRIBE_LOG_DIRS, body, (1, 4), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {tp: _error(resp.error_code, "DescribeLogDirs") for tp in tps}
            out: dict[TopicPartition, Any] = {}
            for r in resp.results:
                for t in r.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        out[tp] = ReplicaLogDir(r.log_dir, p.partition_size, p.offset_lag) \
                            if r.error_code == ErrorCode.NONE else _error(r.error_code, f"log dir of {tp}")
            # A leader that moved away no longer has the log: ask again where it is now.
            return {tp: out.get(tp, _error(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"partition {tp}"))
                    for tp in tps}

        return _raise_first(await self._fan_out("describe log dir of", partitions, timeout_ms,
                                                self._leader, send, on_retry=self._refresh_topic))

    async def alter_replica_log_dirs(self, assignments: Mapping[TopicPartitionReplica, str], *,
                                     timeout_ms: int | None = None) -> dict[TopicPartitionReplica, None]:
        """Move each replica's log to the named log directory of its broker
        (AlterReplicaLogDirs to that broker). The broker copies the log in the background
        and swaps it in once caught up; ``describe_replica_log_dirs`` shows the progress.
        A partition's error (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE:
        the replica is not on that broker yet, which then creates it in that directory) is
        that replica's outcome, not retried, as Kafka's admin client does."""
        A = messages.AlterReplicaLogDirsRequest
        wanted = dict(assignments)

        async def route(replica: TopicPartitionReplica, _remaining_ms: int) -> int:
            return replica.broker_id

        async def send(node: int | None, replicas: list[TopicPartitionReplica], request_ms: int) -> dict:
            by_dir: dict[str, dict[str, list[int]]] = {}
            for r in replicas:
                by_dir.setdefault(wanted[r], {}).setdefault(r.topic, []).append(r.partition)
            body = A(dirs=[A.AlterReplicaLogDir(path=path, topics=[
                A.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
                for path, topics in by_dir.items()])
            _, resp = await self._request(node, ApiKey.ALTER_REPLICA_LOG_DIRS, body, (1, 2), request_ms)
            codes = {(t.topic_name, p.partition_index): p.error_code
                     for t in resp.results for p in t.partitions}
            out: dict[TopicPartitionReplica, Any] = {}
            for r in replicas:
                code = codes.get((r.topic, r.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
                out[r] = None if code == ErrorCode.NONE else _error(code, f"replica {r}")
            return out

        return _raise_first(await self._fan_out("alter log dir of", wanted, timeout_ms, route, send,
                                                retriable=lambda e: False))

    async def describe_broker_log_dirs(self, broker_ids: Iterable[int],
                                       partitions: Iterable[TopicPartition] | None = None, *,
                                       timeout_ms: int | None = None
                                       ) -> dict[int, tuple[LogDirDescription, ...]]:
        """Every log directory of each broker, with the logs it holds (DescribeLogDirs
        to that broker; Kafka's describeLogDirs(brokers)): current logs and the future
        logs of moves under way; ``partitions`` limits the logs listed (None: all)."""
        D = messages.DescribeLogDirsRequest
        wanted = None if partitions is None else list(partitions)

        async def route(broker_id: int, _remaining_ms: int) -> int:
            return broker_id

        async def send(node: int | None, brokers: list[int], request_ms: int) -> dict:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted or ():
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body = D(topics=None if wanted is None else [
                D.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.DESCRIBE_LOG_DIRS, body, (1, 4), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {b: _error(resp.error_code, f"log dirs of broker {b}") for b in brokers}
            dirs = tuple(LogDirDescription(
                log_dir=d.log_dir, error_code=d.error_code, total_bytes=d.total_bytes,
                usable_bytes=d.usable_bytes,
                replicas=tuple((TopicPartition(t.name, p.partition_index),
                                ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key))
                               for t in d.topics for p in t.partitions))
                for d in resp.results)
            return {b: dirs for b in brokers}

        return _raise_first(await self._fan_out("describe log dirs of broker", broker_ids,
                                                timeout_ms, route, send))

    async def describe_replica_log_dirs(self, replicas: Iterable[TopicPartitionReplica], *,
                                        timeout_ms: int | None = None
                                        ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """Where each replica's log is on its broker, and where it is moving to
        (Kafka's describeReplicaLogDirs). A replica the broker does not have has no
        directories (None, -1); an offline directory lists nothing."""
        asked = list(dict.fromkeys(replicas))
        described = await self.describe_broker_log_dirs(
            {r.broker_id for r in asked}, {TopicPartition(r.topic, r.partition) for r in asked},
            timeout_ms=timeout_ms)
        out: dict[TopicPartitionReplica, ReplicaLogDirInfo] = {}
        for r in asked:
            tp = TopicPartition(r.topic, r.partition)
            current: tuple[str | None, int] = (None, -1)
            future: tuple[str | None, int] = (None, -1)
            for d in described[r.broker_id]:
                for logged, info in d.replicas:
                    if logged == tp and d.error_code == ErrorCode.NONE:
                        if info.is_future:
                            future = (d.log_dir, info.offset_lag)
                        else:
                            current = (d.log_dir, info.offset_lag)
            out[r] = ReplicaLogDirInfo(current[0], current[1], future[0], future[1])
        return out

    # ------------------------------------------------------------ consumer groups

    async def list_consumer_groups(self, *, states: Iterable[str] | None = None,
                                   timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        """Groups of every broker's coordinator (ListGroups to each live broker), sorted by
        id; ``states`` filters by Kafka's state names (Stable, Empty, ...)."""
        wanted = None if states is None else {s.lower() for s in states}
        metadata = await self._cluster.refresh_metadata([])
        L = messages.ListGroupsRequest

        async def route(broker_id: int, _remaining_ms: int) -> int:
            return broker_id

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = L(states_filter=sorted(wanted) if wanted else [], types_filter=[])
            version, resp = await self._request(node, ApiKey.LIST_GROUPS, body, (0, 5), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, f"ListGroups on broker {node}")}
            return {keys[0]: [ConsumerGroupListing(g.group_id, g.protocol_type,
                                                   g.group_state if version >= 4 else "",
                                                   (g.group_type or "classic").lower()
                                                   if version >= 5 else "classic")
                              for g in resp.groups]}

        per_broker = _raise_first(await self._fan_out(
            "list groups on broker", sorted(metadata.brokers), timeout_ms, route, send))
        listed = {g.group_id: g for groups in per_broker.values() for g in groups}
        return [g for _, g in sorted(listed.items())
                if wanted is None or g.state.lower() in wanted]

    # ------------------------------------------------------------ transactions

    async def describe_transactions(self, transactional_ids: Iterable[str], *,
                                    timeout_ms: int | None = None
                                    ) -> dict[str, TransactionDescription]:
        """Each id's state on its transaction coordinator: producer id and epoch, timeout,
        when the open transaction started, the partitions it holds."""
        async def send(node: int | None, ids: list[str], request_ms: int) -> dict:
            _, resp = await self._request(
                node, ApiKey.DESCRIBE_TRANSACTIONS,
                messages.DescribeTransactionsRequest(transactional_ids=ids), (0, 0), request_ms)
            out: dict[str, Any] = {}
            for t in resp.transaction_states:
                if t.error_code != ErrorCode.NONE:
                    out[t.transactional_id] = _error(t.error_code,
                                                     f"transactional id {t.transactional_id!r}")
                    continue
                assert node is not None
                out[t.transactional_id] = TransactionDescription(
                    coordinator_id=node, state=t.transaction_state,
                    producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                    transaction_timeout_ms=t.transaction_timeout_ms,
                    transaction_start_time_ms=t.transaction_start_time_ms,
                    topic_partitions=frozenset(TopicPartition(d.topic, p)
                                               for d in t.topics for p in d.partitions))
            return self._answered(out, ids, "DescribeTransactions", "transactional id")

        return _raise_first(await self._fan_out(
            "describe transaction", transactional_ids, timeout_ms, self._txn_coordinator, send,
            describe=repr, on_retry=self._forget_txn_coordinator))

    async def list_transactions(self, *, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                duration_filter_ms: int = -1,
                                timeout_ms: int | None = None) -> list[TransactionListing]:
        """Transactional ids of every broker's coordinator (ListTransactions to each live
        broker), sorted; filtered by state (Kafka's names), producer id, and (v1,
        KIP-994) transactions open longer than ``duration_filter_ms``."""
        metadata = await self._cluster.refresh_metadata([])
        L = messages.ListTransactionsRequest
        wanted_states = sorted(states or [])
        wanted_pids = sorted(producer_ids or [])

        async def route(broker_id: int, _remaining_ms: int) -> int:
            return broker_id

        async def send(node: int | None, keys: list, request_ms: int) -> dict:
            body = L(state_filters=wanted_states, producer_id_filters=wanted_pids,
                     duration_filter=duration_filter_ms)
            version, resp = await self._request(node, ApiKey.LIST_TRANSACTIONS, body,
                                                (0, 0 if duration_filter_ms < 0 else 1),
                                                request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {keys[0]: _error(resp.error_code, f"ListTransactions on broker {node}")}
            return {keys[0]: [TransactionListing(t.transactional_id, t.producer_id,
                                                 t.transaction_state, keys[0])
                              for t in resp.transaction_states]}

        per_broker = _raise_first(await self._fan_out(
            "list transactions on broker", sorted(metadata.brokers), timeout_ms, route, send))
        listed = {t.transactional_id: t for ts in per_broker.values() for t in ts}
        return [t for _, t in sorted(listed.items())]

    async def describe_producers(self, partitions: Iterable[TopicPartition], *,
                                 timeout_ms: int | None = None
                                 ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers each partition's leader remembers (DescribeProducers), with the
        first offset of each one's open transaction (-1: none)."""
        D = messages.DescribeProducersRequest

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body = D(topics=[D.TopicRequest(name=t, partition_indexes=ps)
                             for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.DESCRIBE_PRODUCERS, body, (0, 0),
                                          request_ms)
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code != ErrorCode.NONE:
                        out[tp] = _error(p.error_code, f"partition {tp}", p.error_message)
                        continue
                    out[tp] = [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence,
                                             s.last_timestamp, s.coordinator_epoch,
                                             s.current_txn_start_offset)
                               for s in p.active_producers]
            return {tp: out.get(tp, _error(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"partition {tp}"))
                    for tp in tps}

        return _raise_first(await self._fan_out("describe producers of", partitions, timeout_ms,
                                                self._leader, send, on_retry=self._refresh_topic))

    async def abort_transaction(self, spec: AbortTransactionSpec, *,
                                timeout_ms: int | None = None) -> None:
        """Abort a hanging transaction on one partition: its leader writes an ABORT
        marker for the producer (WriteTxnMarkers v1), so the last stable offset can move
        on. For an open transaction its coordinator forgot (Kafka's
        Admin.abortTransaction, KIP-664); take the epochs from ``describe_producers``."""
        W = messages.WriteTxnMarkersRequest
        tp = spec.topic_partition

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            body = W(markers=[W.WritableTxnMarker(
                producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                topics=[W.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])])
            _, resp = await self._request(node, ApiKey.WRITE_TXN_MARKERS, body, (1, 1), request_ms)
            codes = [p.error_code for m in resp.markers if m.producer_id == spec.producer_id
                     for t in m.topics if t.name == tp.topic
                     for p in t.partitions if p.partition_index == tp.partition]
            if not codes:
                return {tp: _error(ErrorCode.UNKNOWN_SERVER_ERROR,
                                   f"WriteTxnMarkers answered nothing for {tp}")}
            code = codes[0]
            return {tp: None if code == ErrorCode.NONE else _error(code, f"partition {tp}")}

        _raise_first(await self._fan_out("abort transaction on", [tp], timeout_ms, self._leader,
                                         send, on_retry=self._refresh_topic))

    async def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                       timeout_ms: int | None = None
                                       ) -> dict[str, ConsumerGroupDescription]:
        """State, protocol and members of each group, each member's assignment decoded
        from the consumer protocol bytes. A group that does not exist raises
        GroupIdNotFoundError naming it."""
        async def send(node: int | None, groups: list[str], request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DESCRIBE_GROUPS,
                                          messages.DescribeGroupsRequest(groups=groups), (0, 5),
                                          request_ms)
            out: dict[str, Any] = {}
            for g in resp.groups:
                if g.error_code != ErrorCode.NONE:
                    out[g.group_id] = _error(g.error_code, f"group {g.group_id!r}")
                elif g.group_state == "Dead":
                    out[g.group_id] = GroupIdNotFoundError(f"group {g.group_id!r}: does not exist")
                else:
                    out[g.group_id] = self._group_description(g, node)
            return self._answered(out, groups, "DescribeGroups", "group")

        return _raise_first(await self._fan_out(
            "describe group", group_ids, timeout_ms, self._coordinator, send,
            on_retry=self._forget_coordinator))

    @staticmethod
    def _group_description(g: Any, coordinator: int | None) -> ConsumerGroupDescription:
        members = []
        for m in g.members:
            assignment: tuple[TopicPartition, ...] = ()
            subscription: tuple[str, ...] = ()
            if g.protocol_type == CONSUMER_PROTOCOL_TYPE:
                # A member's bytes are what its client wrote; one unreadable member must
                # not hide the group: its raw bytes stay in the description.
                try:
                    assignment = decode_assignment(m.member_assignment)
                except ValueError:
                    pass
                try:
                    subscription = decode_subscription(m.member_metadata)
                except ValueError:
                    pass
            members.append(MemberDescription(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, host=m.client_host, assignment=assignment,
                subscription=subscription, raw_assignment=bytes(m.member_assignment or b""),
                raw_metadata=bytes(m.member_metadata or b"")))
        return ConsumerGroupDescription(
            group_id=g.group_id, state=g.group_state, protocol_type=g.protocol_type,
            protocol=g.protocol_data, members=tuple(sorted(members, key=lambda m: m.member_id)),
            coordinator=-1 if coordinator is None else coordinator)

    async def list_consumer_group_offsets(self, group_id: str,
                                          partitions: Iterable[TopicPartition] | None = None, *,
                                          require_stable: bool = False,
                                          timeout_ms: int | None = None
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (OffsetFetch), all of them or those of
        ``partitions``; partitions without a committed offset are left out, and a group
        that does not exist has none (as in Kafka)."""
        asked = None if partitions is None else sorted(set(partitions))
        O = messages.OffsetFetchRequest

        def body(version: int) -> Any:
            by_topic: dict[str, list[int]] = {}
            for tp in asked or ():
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            if version >= 8:
                return O(require_stable=require_stable, groups=[O.OffsetFetchRequestGroup(
                    group_id=group_id, topics=None if asked is None else [
                        O.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()])])
            return O(group_id=group_id, require_stable=require_stable,
                     topics=None if asked is None else [
                         O.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                         for t, ps in by_topic.items()])

        async def send(node: int | None, groups: list[str], request_ms: int) -> dict:
            version, resp = await self._request(node, ApiKey.OFFSET_FETCH, body, (1, 9),
                                                request_ms)
            if version >= 8:
                (g,) = [g for g in resp.groups if g.group_id == group_id] or [None]
                if g is None:
                    return self._answered({}, groups, "OffsetFetch", "group")
                code, topics = g.error_code, g.topics
            else:
                code, topics = (resp.error_code if version >= 2 else ErrorCode.NONE), resp.topics
            if code != ErrorCode.NONE:
                return {group_id: _error(code, f"group {group_id!r}")}
            offsets: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code != ErrorCode.NONE:
                        return {group_id: _error(p.error_code, f"group {group_id!r} {tp}")}
                    if p.committed_offset >= 0:
                        offsets[tp] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "",
                            p.committed_leader_epoch if version >= 5 else -1)
            return {group_id: dict(sorted(offsets.items()))}

        (result,) = _raise_first(await self._fan_out(
            "fetch offsets of group", [group_id], timeout_ms, self._coordinator, send,
            on_retry=self._forget_coordinator)).values()
        return result

    async def alter_consumer_group_offsets(
            self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], *,
            timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit ``offsets`` for a group without members (OffsetCommit with generation -1,
        as Kafka's AdminClient does). A group with live members refuses it (the
        coordinator answers UNKNOWN_MEMBER_ID); the error names the group."""
        wanted = {tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
                  for tp, o in offsets.items()}
        for tp, o in wanted.items():
            if o.offset < 0:
                raise ValueError(f"group {group_id!r} {tp}: an offset to commit is >= 0, not {o.offset}")
        C = messages.OffsetCommitRequest

        async def send(node: int | None, groups: list[str], request_ms: int) -> dict:
            by_topic: dict[str, list] = {}
            for tp, o in sorted(wanted.items()):
                by_topic.setdefault(tp.topic, []).append(C.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch, committed_metadata=o.metadata))
            body = C(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                     group_instance_id=None, retention_time_ms=-1, topics=[
                         C.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.OFFSET_COMMIT, body, (2, 9), request_ms)
            codes = {TopicPartition(t.name, p.partition_index): p.error_code
                     for t in resp.topics for p in t.partitions}
            for tp in sorted(wanted):
                code = codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in _COORDINATOR_MOVED or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    return {group_id: _error(code, f"group {group_id!r}")}
                if code in _ACTIVE_GROUP_CODES:
                    return {group_id: _error(code, f"group {group_id!r}",
                                             "the group has active members; its offsets can only "
                                             "be altered while it is empty")}
                if code != ErrorCode.NONE:
                    return {group_id: _error(code, f"group {group_id!r} {tp}")}
            return {group_id: dict(sorted(wanted.items()))}

        (result,) = _raise_first(await self._fan_out(
            "commit offsets of group", [group_id], timeout_ms, self._coordinator, send,
            retriable=lambda e: e.retriable and e.error_code not in _ACTIVE_GROUP_CODES,
            on_retry=self._forget_coordinator)).values()
        return result

    async def delete_consumer_group_offsets(self, group_id: str,
                                            partitions: Iterable[TopicPartition], *,
                                            timeout_ms: int | None = None) -> None:
        """Forget the group's committed offsets of ``partitions`` (OffsetDelete, KIP-496).
        Refused per topic while a live member is subscribed to it
        (GROUP_SUBSCRIBED_TO_TOPIC)."""
        asked = sorted(set(partitions))
        D = messages.OffsetDeleteRequest

        async def send(node: int | None, groups: list[str], request_ms: int) -> dict:
            by_topic: dict[str, list] = {}
            for tp in asked:
                by_topic.setdefault(tp.topic, []).append(
                    D.OffsetDeleteRequestPartition(partition_index=tp.partition))
            _, resp = await self._request(node, ApiKey.OFFSET_DELETE, D(group_id=group_id, topics=[
                D.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()]),
                (0, 0), request_ms)
            if resp.error_code != ErrorCode.NONE:
                return {group_id: _error(resp.error_code, f"group {group_id!r}",
                                         "does not exist" if resp.error_code == ErrorCode.GROUP_ID_NOT_FOUND
                                         else None)}
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.NONE:
                        return {group_id: _error(p.error_code,
                                                 f"group {group_id!r} {t.name}-{p.partition_index}")}
            return {group_id: None}

        _raise_first(await self._fan_out("delete offsets of group", [group_id], timeout_ms,
                                         self._coordinator, send, on_retry=self._forget_coordinator))

    async def delete_consumer_groups(self, group_ids: Iterable[str], *,
                                     timeout_ms: int | None = None) -> dict[str, None]:
        """Delete empty groups and their committed offsets (DeleteGroups). A group with
        members raises NonEmptyGroupError, an unknown one GroupIdNotFoundError."""
        async def send(node: int | None, groups: list[str], request_ms: int) -> dict:
            _, resp = await self._request(node, ApiKey.DELETE_GROUPS,
                                          messages.DeleteGroupsRequest(groups_names=groups), (0, 2),
                                          request_ms)
            out = {r.group_id: None if r.error_code == ErrorCode.NONE else _error(
                r.error_code, f"group {r.group_id!r}",
                "does not exist" if r.error_code == ErrorCode.GROUP_ID_NOT_FOUND else None)
                for r in resp.results}
            return self._answered(out, groups, "DeleteGroups", "group")

        return _raise_first(await self._fan_out("delete group", group_ids, timeout_ms,
                                                self._coordinator, send,
                                                on_retry=self._forget_coordinator))

    async def consumer_group_lag(self, group_id: str, topics: Iterable[str] | None = None, *,
                                 timeout_ms: int | None = None) -> dict[TopicPartition, PartitionLag]:
        """Per partition: the committed offset, the log start and end, and the lag (log end
        minus committed). Partitions are those the group has offsets for, plus every
        partition of ``topics``; partitions of deleted topics are left out."""
        deadline, _ = self._deadline(timeout_ms)
        committed = await self.list_consumer_group_offsets(
            group_id, timeout_ms=self._remaining_ms(deadline))
        names = sorted({tp.topic for tp in committed} | set(topics or ()))
        described = await self._describe_topics(names, self._remaining_ms(deadline))
        for name in topics or ():
            if isinstance(described[name], BaseException):
                raise described[name]
        partitions = [TopicPartition(d.name, p.partition) for d in described.values()
                      if not isinstance(d, BaseException) for p in d.partitions]
        start, end = await self._log_bounds(partitions, self._remaining_ms(deadline))
        return group_lag({tp: committed[tp].offset if tp in committed else None for tp in partitions},
                         start, end)

    async def _log_bounds(self, partitions: Sequence[TopicPartition], timeout_ms: int
                          ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        if not partitions:
            return {}, {}
        deadline, _ = self._deadline(timeout_ms)
        earliest = await self.list_offsets({tp: OffsetSpec.earliest() for tp in partitions},
                                           timeout_ms=self._remaining_ms(deadline))
        latest = await self.list_offsets({tp: OffsetSpec.latest() for tp in partitions},
                                         timeout_ms=self._remaining_ms(deadline))
        return ({tp: r.offset for tp, r in earliest.items()},
                {tp: r.offset for tp, r in latest.items()})

    async def reset_consumer_group_offsets(
            self, group_id: str, spec: OffsetReset, *,
            partitions: Iterable[TopicPartition] | None = None,
            topics: Iterable[str] | None = None, dry_run: bool = False,
            timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Move a group's committed offsets (kafka-consumer-groups --reset-offsets): to the
        earliest or latest offset, to the first offset at or after a time, by a shift, or
        to an offset, clamped into each log (``plan_offset_reset``). Applies to
        ``partitions``, or every partition of ``topics``, or else every partition the group
        has offsets for. Refused with NonEmptyGroupError while the group has live members,
        as Kafka refuses it; ``dry_run`` computes and returns the offsets only."""
        deadline, _ = self._deadline(timeout_ms)
        state = await self._group_state(group_id, self._remaining_ms(deadline))
        if state[0] not in INACTIVE_GROUP_STATES:
            raise NonEmptyGroupError(
                f"group {group_id!r}: offsets can only be reset while the group is inactive, "
                f"but it is {state[0]} with {state[1]} member(s)")
        committed = await self.list_consumer_group_offsets(
            group_id, timeout_ms=self._remaining_ms(deadline))
        if partitions is not None:
            targets = sorted(set(partitions))
        elif topics is not None:
            described = await self.describe_topics(list(topics),
                                                   timeout_ms=self._remaining_ms(deadline))
            targets = [TopicPartition(d.name, p.partition) for d in described.values()
                       for p in d.partitions]
        else:
            targets = sorted(committed)
        if not targets:
            return {}
        start, end = await self._log_bounds(targets, self._remaining_ms(deadline))
        by_time = None
        if spec.kind is OffsetResetKind.TIMESTAMP:
            found = await self.list_offsets({tp: OffsetSpec.for_timestamp(spec.value) for tp in targets},
                                            timeout_ms=self._remaining_ms(deadline))
            by_time = {tp: r.offset for tp, r in found.items()}
        plan = plan_offset_reset(spec, targets, {tp: o.offset for tp, o in committed.items()},
                                 start, end, by_time)
        if not dry_run:
            await self.alter_consumer_group_offsets(
                group_id, {tp: OffsetAndMetadata(o, committed[tp].metadata if tp in committed else "")
                           for tp, o in plan.items()},
                timeout_ms=self._remaining_ms(deadline))
        return plan

    async def _group_state(self, group_id: str, timeout_ms: int) -> tuple[str, int]:
        """(state, member count); a group that does not exist is Dead with none."""
        try:
            d = (await self.describe_consumer_groups([group_id], timeout_ms=timeout_ms))[group_id]
        except GroupIdNotFoundError:
            return "Dead", 0
        return d.state, len(d.members)

    # ------------------------------------------------------------ offsets and records

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                           isolation_level: str = "read_uncommitted",
                           timeout_ms: int | None = None
                           ) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by ``OffsetSpec`` from each partition's leader: earliest, latest, the
        first at or after a time, or the record with the largest timestamp."""
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level is read_uncommitted or read_committed, "
                             f"not {isolation_level!r}")
        isolation = _READ_COMMITTED if isolation_level == "read_committed" else _READ_UNCOMMITTED
        L = messages.ListOffsetsRequest
        low = 1
        if any(s.timestamp == OffsetSpec.MAX_TIMESTAMP for s in specs.values()):
            low = 7
        if any(s.timestamp == OffsetSpec.EARLIEST_LOCAL_TIMESTAMP for s in specs.values()):
            low = 8

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            by_topic: dict[str, list] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(L.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=-1,
                    timestamp=specs[tp].timestamp))
            body = L(replica_id=-1, isolation_level=isolation, timeout_ms=request_ms, topics=[
                L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.LIST_OFFSETS, body, (low, 10), request_ms)
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch) \
                        if p.error_code == ErrorCode.NONE else _error(p.error_code, f"partition {tp}")
            return self._answered(out, tps, "ListOffsets", "partition")

        return _raise_first(await self._fan_out("list offsets of", specs, timeout_ms,
                                                self._leader, send, on_retry=self._refresh_topic))

    async def delete_records(self, before: Mapping[TopicPartition, int], *,
                             timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Move each partition's log start offset up to ``before[tp]`` (-1: the high
        watermark), deleting the records below it (DeleteRecords); returns the new log
        start offsets (low watermarks)."""
        D = messages.DeleteRecordsRequest

        async def send(node: int | None, tps: list[TopicPartition], request_ms: int) -> dict:
            by_topic: dict[str, list] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(
                    D.DeleteRecordsPartition(partition_index=tp.partition, offset=before[tp]))
            body = D(timeout_ms=request_ms, topics=[D.DeleteRecordsTopic(name=t, partitions=ps)
                                                    for t, ps in by_topic.items()])
            _, resp = await self._request(node, ApiKey.DELETE_RECORDS, body, (0, 2), request_ms)
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = p.low_watermark if p.error_code == ErrorCode.NONE else _error(
                        p.error_code, f"partition {tp}")
            return self._answered(out, tps, "DeleteRecords", "partition")

        return _raise_first(await self._fan_out("delete records of", before, timeout_ms,
                                                self._leader, send, on_retry=self._refresh_topic))

