"""API key -> handler: the broker's answers to Kafka requests.

Handlers call the replica manager (data), the metadata image (Metadata, DescribeConfigs,
DescribeCluster) and the controller channel (admin requests are forwarded to the active
controller, as KRaft brokers do; a broker answers Metadata with its own id as the
controller so that unmodified admin clients send their requests here).

Advertised versions are Kafka 4.1's where the reference schemas have them (see
SUPPORTED_VERSIONS for the exceptions and why): every real client finds a version it
speaks, aiokafka only non-flexible ones, and Produce is advertised from v0 so that
librdkafka 2.0.2 (kcat) turns compression on (KAFKA-18659); a Produce carrying magic 0/1
message sets is refused per partition (UNSUPPORTED_VERSION), never mis-parsed. Every
version advertised here is decoded and answered (tests/integration/test_protocol_features.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import time
import uuid
from typing import Any, Awaitable, Callable, Generator, Mapping

from broker.auth_helper import AuthHelper
from broker.auto_topic_creation import AutoTopicCreationManager
from broker.config import BrokerConfig
from broker.controller_channel import ControllerChannel, quorum_leader
from broker.delayed.divert import Diversion
from broker.delayed.driver import DelayedDeliveryDriver
from broker.tiered.manager import RemoteLogManager
from broker.client_quotas import ClientQuotas, describe_quotas
from broker.group_authz import guard_group_api
from broker.fetch_session import (
    CachedPartition, FetchContext, FetchSessionCache, IdlePartitions, PartitionAsked, SessionPartition,
    SessionView,
)
from broker.metrics import BrokerMetrics, ProduceTally, request_name
from broker.client_telemetry import ClientAttributes
from broker.producer_ids import ProducerIdManager
from broker.telemetry_driver import ClientTelemetryDriver
from broker.txn.driver import TransactionCoordinatorDriver
from broker.txn.markers import marker_entries, marker_response
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import ProduceResult, ReadResult
from clients.types import TopicIdPartition, TopicPartition
from metadata_log.features import SUPPORTED_FEATURES
from clients.protocol import ApiKey, RequestReceived, UnsupportedRequest, messages
from clients.protocol.acls import CLUSTER_NAME, AclOperation as Op, AclResourceType
from clients.protocol.error_responses import error_response
from clients.protocol.errors import ErrorCode
from clients.protocol.tag_filter import tag_filter_of
from clients.protocol.types import CorruptFrameError
from clients.records import RecordError, read_batch_header
from clients.records.tags import filter_batches
from metadata_log.client_metrics import CLIENT_METRICS_CONFIGS
from metadata_log.cluster_links import cluster_link, cluster_links, link_config_entries
from metadata_log.acls import AclBindingFilter
from metadata_log.config_layers import ConfigEntry, ConfigSource
from metadata_log.image import NO_LEADER, ConfigResourceType, MetadataImage
from broker.scram_describe import describe_user_scram_credentials
from quorum.network import SASL_VERSIONS, ClientInfo

Handler = Callable[[Any, int, ClientInfo], Awaitable[Any]]

log = logging.getLogger(__name__)

__all__ = ["KafkaApis", "KAFKA_4_1_MAX_EXCEPTIONS", "SUPPORTED_VERSIONS", "fetch_replica_id"]

# (min, max) per API key; the group coordinator's APIs are in broker/group/driver.py.
#
# Maxima: what Apache Kafka 4.1 serves, as far as the protocol schemas Ketch is generated
# from (../shared/kafka-protocol, apache/kafka 1eb7644, 4.0.0-SNAPSHOT) define the
# versions. Kafka 4.1 serves these newer versions, absent from those schemas, so neither
# decoded nor advertised here (KAFKA_4_1_MAX_EXCEPTIONS, checked by
# tests/broker/test_api_versions_served.py):
#   Produce v12 (the same as v11 for Ketch; KIP-890's epoch bump) and v13 (topic ids),
#   Fetch v18 (KIP-1166's HighWatermark), Metadata v13 (REBOOTSTRAP_REQUIRED, KIP-1102),
#   DescribeCluster v2 (IncludeFencedBrokers, KIP-1073),
#   AlterPartitionReassignments v1 (AllowReplicationFactorChange, KIP-860).
#
# Minima: Kafka 4.0's (KIP-896), which are also what every client the project tests
# needs, with one exception kept as Kafka keeps it: Produce is advertised from v0 so that
# librdkafka < 2.10 (kcat's 2.0.2 among them) turns compression on (KAFKA-18659); a
# Produce v0-v2 carrying magic 0/1 message sets is refused per partition
# (UNSUPPORTED_VERSION), never mis-parsed. kafka-python 3.0, aiokafka, librdkafka 2.16
# and Ketch's own clients need nothing older (tests/integration, tests/clients).
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),     # Kafka 4 serves 1-2 (v0 deprecated)
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),          # v0 removed in Kafka 4.0 (KIP-896)
    # Kafka 4's (KIP-896 dropped v0 of all three).
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    **SASL_VERSIONS,        # served by the network layer (quorum/network.py)
}

# Kafka 4.1's maximum where it is above ours, and why (see above).
KAFKA_4_1_MAX_EXCEPTIONS: dict[int, tuple[int, str]] = {
    ApiKey.PRODUCE: (13, "v12-v13 are not in the reference schemas"),
    ApiKey.FETCH: (18, "v18 is not in the reference schemas"),
    ApiKey.METADATA: (13, "v13 is not in the reference schemas"),
    ApiKey.DESCRIBE_CLUSTER: (2, "v2 is not in the reference schemas"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (1, "v1 is not in the reference schemas"),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: (1, "v1 (KIP-1142's ListConfigResources) is not in "
                                              "the reference schemas"),
    # Served by the transaction coordinator (broker/txn/driver.py's TXN_VERSIONS).
    ApiKey.LIST_TRANSACTIONS: (2, "v2 (KIP-1152's TransactionalIdPattern) is not in the "
                                  "reference schemas"),
}

# Served where a default Kafka 4.1 broker advertises nothing, and why.
KAFKA_4_1_ABSENT: dict[int, str] = {
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: "Kafka advertises KIP-714 only with a client telemetry "
                                        "receiver plugged in; Ketch's is built in (/metrics)",
    ApiKey.PUSH_TELEMETRY: "as GetTelemetrySubscriptions",
}

_ZERO_UUID = uuid.UUID(int=0)      # Kafka's Uuid.ZERO_UUID: no topic id
# How often a follower session looks at all its partitions again, idle ones included
# (IdlePartitions): a safety net for a change the leader does not number (appends, HW
# and role changes, DeleteRecords and retention's log start moves all are). Each look is
# a read of every partition of the session: at 5 s it had been the larger part of the
# brokers' CPU while 100k partitions were created (32-39 s a broker; 22-23 s without).
IDLE_RECHECK_MS = 60_000

_REQUEST_NAMES = {int(k): request_name(k) for k in ApiKey}

# Never throttled by request time (Kafka's exemptions: a client must always learn the
# versions; brokers' own requests are cluster actions, follower fetches among them).
_REQUEST_QUOTA_EXEMPT = {ApiKey.API_VERSIONS}


class BusyTime:
    """Awaits a coroutine and measures the time spent *running* it (each step between two
    suspensions), not the time it waits: the request-handler time Kafka's request quota
    counts."""

    __slots__ = ("_coro", "ms")

    def __init__(self, coro: Awaitable[Any]) -> None:
        self._coro = coro
        self.ms = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        it = self._coro.__await__()
        send: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                suspended = it.send(send) if error is None else it.throw(error)
            except StopIteration as done:
                self.ms += (time.perf_counter() - started) * 1000
                return done.value
            except BaseException:
                self.ms += (time.perf_counter() - started) * 1000
                raise
            self.ms += (time.perf_counter() - started) * 1000
            try:
                send, error = (yield suspended), None
            except BaseException as e:      # cancellation and the like reach the handler
                send, error = None, e


def fetch_replica_id(req: messages.FetchRequest, version: int) -> int:
    """The fetching follower's broker id, -1 for a consumer: v15+ carry it in ReplicaState
    (KIP-903), older versions in ReplicaId (Kafka's FetchRequest.replicaId())."""
    return req.replica_state.replica_id if version >= 15 else req.replica_id


def _id_resolver(image: MetadataImage) -> Callable[[uuid.UUID], str | None]:
    """Topic id -> its name in ``image``, None when unknown there."""
    def resolve(topic_id: uuid.UUID) -> str | None:
        topic = image.topics.get_by_id(topic_id)
        return None if topic is None else topic.name
    return resolve


def _session_key(topic: Any, partition: int, by_id: bool) -> SessionPartition:
    """A Fetch request's topic (FetchTopic or ForgottenTopic) and partition as the fetch
    session names it: by topic id from v13, by name before."""
    return TopicIdPartition(topic.topic_id, partition) if by_id else TopicPartition(topic.topic, partition)


# KIP-951: partition errors a Fetch v16+ answers with the current leader and its endpoint
# (a Produce v10+ only NOT_LEADER_OR_FOLLOWER, as Kafka's KafkaApis).
_LEADER_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH}
_NO_CURRENT_LEADER = messages.FetchResponse.LeaderIdAndEpoch()      # the tagged default: not sent
_NO_PRODUCE_LEADER = messages.ProduceResponse.LeaderIdAndEpoch()
_PARKING = (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1, None, ())    # replaced once parked


def _transactional_batches(req: messages.ProduceRequest) -> dict[TopicPartition, tuple[int, int]]:
    """(producer id, epoch) of each partition whose data opens with a transactional batch."""
    out = {}
    for topic in req.topic_data:
        for p in topic.partition_data:
            records = p.records
            try:
                header = read_batch_header(records) \
                    if isinstance(records, (bytes, bytearray, memoryview)) and records else None
            except (RecordError, ValueError, IndexError):
                header = None    # the append refuses it with the right error
            if header is not None and header.is_transactional and not header.is_control:
                out[TopicPartition(topic.name, p.index)] = (header.producer_id, header.producer_epoch)
    return out


# Forwarded to the active controller unchanged (KRaft's forwarding).
_FORWARDED = {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
              ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS,
              ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
              ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
              ApiKey.UPDATE_FEATURES, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
              ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
              # Admin clients ask a broker (KIP-836's kafka-metadata-quorum); the quorum's
              # leader answers, as it is the one tracking its voters' positions.
              ApiKey.DESCRIBE_QUORUM}



# Forwarded APIs about the cluster as a whole: the operation each needs on it (Kafka's
# ControllerApis); denied, the whole request gets CLUSTER_AUTHORIZATION_FAILED. The other
# forwarded APIs are authorized per topic or config resource (forward_authorized).
_FORWARDED_CLUSTER_OPS: dict[int, Op] = {
    ApiKey.ELECT_LEADERS: Op.ALTER, ApiKey.ALTER_PARTITION_REASSIGNMENTS: Op.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Op.DESCRIBE, ApiKey.ALTER_CLIENT_QUOTAS: Op.ALTER_CONFIGS,
    ApiKey.UPDATE_FEATURES: Op.ALTER, ApiKey.CREATE_ACLS: Op.ALTER, ApiKey.DELETE_ACLS: Op.ALTER,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Op.ALTER,
    ApiKey.DESCRIBE_QUORUM: Op.DESCRIBE,
}

# Config resource types (ConfigResource.Type ids) -> the ACL resource their configs belong
# to and the error a denial answers (Kafka's AuthHelper / ConfigAdminManager).
_CONFIG_ACL_RESOURCE = {
    int(ConfigResourceType.TOPIC): (AclResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    int(ConfigResourceType.BROKER): (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    8: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),         # BROKER_LOGGER
    int(ConfigResourceType.CLIENT_METRICS): (AclResourceType.CLUSTER,
                                             ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    32: (AclResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),            # GROUP
    # A cluster link (issue 21) is the cluster's: altering it is ALTER_CONFIGS on the cluster.
    int(ConfigResourceType.CLUSTER_LINK): (AclResourceType.CLUSTER,
                                           ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
}


class KafkaApis:
    def __init__(self, config: BrokerConfig, cluster_id: str, replicas: ReplicaDriver,
                 controller: ControllerChannel, topic_creation: AutoTopicCreationManager,
                 producer_ids: ProducerIdManager, broker_epoch: Callable[[], int],
                 metrics: BrokerMetrics, coordinator_apis: Mapping[int, tuple[Handler, tuple[int, int]]],
                 fetch_sessions: FetchSessionCache, quotas: ClientQuotas,
                 telemetry: ClientTelemetryDriver,
                 transactions: TransactionCoordinatorDriver, auth: AuthHelper,
                 delayed: DelayedDeliveryDriver | None = None,
                 tiered: RemoteLogManager | None = None) -> None:
        """``coordinator_apis``: the APIs other components serve (FindCoordinator, the group
        and transaction coordinators), each with its handler and (min, max) versions.
        ``transactions``: InitProducerId with a transactional id, and KIP-890's
        verification before a transactional Produce is appended. ``auth``: every decision
        of the authorizer (allow-all without one). ``delayed``: parks records whose delivery
        time is in the future before a Produce appends (issue 18). ``tiered``: reads below
        the local log of tiered topics, from remote storage (KIP-405)."""
        self.config = config
        self.cluster_id = cluster_id
        self.replicas = replicas
        self.controller = controller
        self.topic_creation = topic_creation
        self.producer_ids = producer_ids
        self.broker_epoch = broker_epoch
        self.metrics = metrics
        self.fetch_sessions = fetch_sessions
        self.quotas = quotas
        self.telemetry = telemetry
        self.transactions = transactions
        self.auth = auth
        self.delayed = delayed
        self.tiered = tiered
        self._versions = {**{k: v for k, (_, v) in coordinator_apis.items()}, **SUPPORTED_VERSIONS}
        self._handlers: dict[int, Handler] = {k: guard_group_api(auth, k, h)
                                              for k, (h, _) in coordinator_apis.items()}
        self._handlers.update({
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
            ApiKey.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: self.handle_alter_replica_log_dirs,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.handle_describe_topic_partitions,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas,
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: self.handle_get_telemetry_subscriptions,
            ApiKey.PUSH_TELEMETRY: self.handle_push_telemetry,
            ApiKey.LIST_CLIENT_METRICS_RESOURCES: self.handle_list_client_metrics_resources,
            ApiKey.WRITE_TXN_MARKERS: self.handle_write_txn_markers,
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials,
        })

    # ------------------------------------------------------------ dispatch

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return self._versions

    async def handle(self, request: RequestReceived, client: ClientInfo) -> tuple[int, Any] | None:
        header = request.header
        api_key, version = header.api_key, header.api_version
        supported = self.supported_versions().get(api_key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if api_key == ApiKey.API_VERSIONS:
                return self._api_versions_error()
            log.info("unsupported %s v%d from %s", ApiKey(api_key).name, version, client.host)
            return version, error_response(api_key, request.body, ErrorCode.UNSUPPORTED_VERSION,
                                           f"version {version} is not supported")
        started = time.perf_counter()
        handling: Awaitable[Any]
        if api_key in _FORWARDED:
            handling = self.forward_authorized(api_key, version, request.body, client)
        else:
            handling = self._handlers[api_key](request.body, version, client)
        busy = BusyTime(handling)
        answer = await busy
        if api_key == ApiKey.FETCH:
            follower = fetch_replica_id(request.body, version) >= 0
            name = "FetchFollower" if follower else "FetchConsumer"
        else:
            follower = False
            name = _REQUEST_NAMES[api_key]
        if answer is not None and api_key not in _REQUEST_QUOTA_EXEMPT and not follower:
            answer = self._request_quota(answer, client, busy.ms)
        self.metrics.observe_request(name, started)
        if answer is None:
            return None
        return version, answer

    def _request_quota(self, answer: Any, client: ClientInfo, busy_ms: float) -> Any:
        """Count the request's handling time against the client's request_percentage;
        a throttle rides on the response (the larger of it and a byte-rate throttle), and
        the network server mutes the connection for it (KIP-219)."""
        throttle_ms = self.quotas.request.record(
            self.replicas.image.client_quotas, client.principal.name, client.client_id or "", busy_ms,
            self.replicas.now_ms())
        if throttle_ms > getattr(answer, "throttle_time_ms", throttle_ms):
            answer = dataclasses.replace(answer, throttle_time_ms=throttle_ms)
        return answer

    def handle_unsupported(self, request: UnsupportedRequest) -> tuple[int, Any] | None:
        if request.api_key == ApiKey.API_VERSIONS:
            return self._api_versions_error()
        return None

    def _api_versions_error(self) -> tuple[int, Any]:
        # KIP-511: answer an unknown ApiVersions version with error 35 in a v0 body that
        # lists what we support; the client retries with a version from that list.
        return 0, self._api_versions_body(ErrorCode.UNSUPPORTED_VERSION)

    def _api_versions_body(self, error_code: int) -> messages.ApiVersionsResponse:
        cls = messages.ApiVersionsResponse
        image = self.replicas.image
        # KIP-584 (v3+): what this broker supports and what the cluster finalized, as of the
        # metadata offset this broker has applied (Kafka's finalized features epoch).
        return cls(error_code=error_code, api_keys=[
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.supported_versions().items())],
            supported_features=[cls.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())],
            finalized_features_epoch=image.provenance.offset,
            finalized_features=[cls.FinalizedFeatureKey(name=n, min_version_level=level,
                                                        max_version_level=level)
                                for n, level in sorted(image.features.levels.items())])

    # ------------------------------------------------------------ ApiVersions, Metadata

    async def handle_api_versions(self, req: messages.ApiVersionsRequest, version: int,
                                  client: ClientInfo) -> messages.ApiVersionsResponse:
        if version >= 3:
            # KIP-511: kept for the connection; client-metrics subscriptions match on it.
            client.client_software_name = req.client_software_name
            client.client_software_version = req.client_software_version
        return self._api_versions_body(ErrorCode.NONE)

    # ------------------------------------------------------------ client telemetry (KIP-714)

    @staticmethod
    def _client_attributes(client: ClientInfo) -> ClientAttributes:
        return ClientAttributes(client.client_id, client.client_software_name,
                                client.client_software_version, client.host, client.port)

    async def handle_get_telemetry_subscriptions(
            self, req: messages.GetTelemetrySubscriptionsRequest, version: int,
            client: ClientInfo) -> messages.GetTelemetrySubscriptionsResponse:
        return self.telemetry.get_subscriptions(req, self._client_attributes(client))

    async def handle_push_telemetry(self, req: messages.PushTelemetryRequest, version: int,
                                    client: ClientInfo) -> messages.PushTelemetryResponse:
        return self.telemetry.push(req, self._client_attributes(client))

    async def handle_metadata(self, req: messages.MetadataRequest, version: int,
                              client: ClientInfo) -> messages.MetadataResponse:
        image = self.replicas.image
        cls = messages.MetadataResponse
        unknown_ids: list[uuid.UUID] = []
        if req.topics is None or (version == 0 and not req.topics):
            names = sorted(image.topics.by_name)
            explicit = False
        else:
            ids = [t.topic_id for t in req.topics if t.topic_id != _ZERO_UUID]
            if version < 12 and (ids or any(t.name is None for t in req.topics)):
                # As Kafka: names only before v12 (v10-11 have the fields, not the feature).
                return cls(topics=[cls.MetadataResponseTopic(       # a name is not nullable here
                    error_code=ErrorCode.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id)
                    for t in req.topics])
            if ids:
                # v12: topics by id (names, if any, are then ignored, as Kafka's); an id
                # this broker does not know is UNKNOWN_TOPIC_ID, with no name.
                known = [image.topics.get_by_id(i) for i in ids]
                names = [t.name for t in known if t is not None]
                unknown_ids = [i for i, t in zip(ids, known) if t is None]
            else:
                names = [t.name for t in req.topics if t.name is not None]
            explicit = True
        allow_create = (req.allow_auto_topic_creation if version >= 4 else True) and \
            self.config.auto_create_topics_enable
        # Kafka's order: topics the principal may not describe are hidden from an
        # all-topics request and answered TOPIC_AUTHORIZATION_FAILED when named; creating
        # a missing topic needs CREATE on the cluster or on that topic.
        describable = self.auth.filter_authorized(client, Op.DESCRIBE, AclResourceType.TOPIC, names)
        refused: list[str] = []
        if len(describable) < len(set(names)):
            refused = [] if not explicit else [n for n in names if n not in describable]
            names = [n for n in names if n in describable]
        missing = [n for n in names if image.topics.get(n) is None]
        create_errors: dict[str, int] = {}
        if explicit and missing and allow_create:
            if not self.auth.authorize_cluster(client, Op.CREATE):
                creatable = self.auth.filter_authorized(client, Op.CREATE, AclResourceType.TOPIC,
                                                        missing)
                create_errors = {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                 for n in missing if n not in creatable}
                missing = [n for n in missing if n in creatable]
            if missing:
                create_errors.update(await self.topic_creation.auto_create(missing))
                image = self.replicas.image
        topics = [cls.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                            topic_id=i) for i in unknown_ids]
        by_id = req.topics is not None and any(t.topic_id != _ZERO_UUID for t in req.topics)
        for name in refused:
            topic = image.topics.get(name)
            # By id, Kafka answers the id and no name: the name is not the principal's to see.
            topics.append(cls.MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None if by_id else name,
                topic_id=topic.topic_id if topic is not None and by_id else _ZERO_UUID,
                is_internal=name.startswith("__")))
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                code = create_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append(cls.MetadataResponseTopic(error_code=code, name=name))
                continue
            partitions = []
            for index in sorted(topic.partitions):
                reg = topic.partitions[index]
                offline = [r for r in reg.replicas if not image.cluster.is_active(r)]
                partitions.append(cls.MetadataResponsePartition(
                    error_code=ErrorCode.LEADER_NOT_AVAILABLE if reg.leader == NO_LEADER else ErrorCode.NONE,
                    partition_index=index, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                    replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                    offline_replicas=offline))
            topics.append(cls.MetadataResponseTopic(
                error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                is_internal=name.startswith("__"), partitions=partitions,
                topic_authorized_operations=self.auth.authorized_operations(
                    client, AclResourceType.TOPIC, name,
                    version >= 8 and req.include_topic_authorized_operations)))
        return cls(brokers=self._live_brokers(cls.MetadataResponseBroker, client.listener_name),
                   cluster_id=self.cluster_id,
                   controller_id=self.config.node_id, topics=topics,
                   cluster_authorized_operations=self.auth.authorized_operations(
                       client, AclResourceType.CLUSTER, CLUSTER_NAME,
                       8 <= version <= 10 and req.include_cluster_authorized_operations))

    def _live_brokers(self, struct: type, name: str) -> list:
        """The unfenced brokers' endpoints on listener ``name``: the listener the request
        came in on, as Kafka answers (a broker without it is left out)."""
        out = []
        for b in sorted(self.replicas.image.cluster.brokers.values(), key=lambda b: b.broker_id):
            if b.fenced:
                continue
            endpoint = b.endpoint(name)
            if endpoint is None:
                continue
            if struct is messages.DescribeClusterResponse.DescribeClusterBroker:
                out.append(struct(broker_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack))
            else:
                out.append(struct(node_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack))
        return out

    # ------------------------------------------------------------ Produce

    async def handle_produce(self, req: messages.ProduceRequest, version: int,
                             client: ClientInfo) -> messages.ProduceResponse | None:
        cls = messages.ProduceResponse
        acks = req.acks
        results: dict[tuple[str, int], tuple] = {}
        waits = []
        writable = self.auth.filter_authorized(client, Op.WRITE, AclResourceType.TOPIC,
                                               (t.name for t in req.topic_data))
        denied_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if req.transactional_id is not None and not self.auth.authorize(
                client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID, req.transactional_id):
            # Kafka: a transactional produce needs WRITE on its transactional id first.
            writable, denied_code = set(), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        unverified: dict[TopicPartition, int] = {}
        if req.transactional_id is not None and writable and acks in (-1, 0, 1):
            # KIP-890: ask the coordinator before the first batch of a transaction lands
            # here. Nothing is awaited between its answer and the appends below, so no
            # marker can slip in between (VerificationState's guards cover the wait).
            unverified = await self.transactions.verify_produce(
                req.transactional_id, version, _transactional_batches(req))
        diverted: list[tuple[tuple[str, int], TopicPartition, Any, Diversion]] = []
        tally = ProduceTally()

        def appended(key: tuple[str, int], tp: TopicPartition, p: Any, result: ProduceResult) -> None:
            results[key] = (result.error_code, result.base_offset, result.log_append_time_ms,
                            result.log_start_offset, result.error_message, result.record_errors)
            tally.add(tp.topic, result.error_code, result.records_appended,
                      len(p.records) if p.records is not None else 0)
            if result.required_offset is not None:
                waits.append((key, tp, result.required_offset))

        for topic in req.topic_data:
            for p in topic.partition_data:
                key = (topic.name, p.index)
                if topic.name not in writable:
                    results[key] = (denied_code, -1, -1, -1, None, ())
                    continue
                if acks not in (-1, 0, 1):
                    results[key] = (ErrorCode.INVALID_REQUIRED_ACKS, -1, -1, -1, None, ())
                    continue
                tp = TopicPartition(topic.name, p.index)
                if tp in unverified:
                    results[key] = (unverified[tp], -1, -1, -1, None, ())
                    continue
                if self.delayed is not None:
                    # Delayed delivery: parked records leave the batch (and reserved gaps).
                    # The target's producer state is asked before parking: a duplicate (an
                    # idempotent retry, its first copy pending or delivered already) gets
                    # its original offsets and a refused batch its error, parking nothing.
                    diversion, refused = self.delayed.diversion(tp, p.records, req.transactional_id)
                    if refused is not None:
                        results[key] = (refused[0], -1, -1, -1, refused[1], ())
                        continue
                    if diversion is not None:
                        early = self.replicas.check_produce(tp, p.records, acks)
                        if early is not None:
                            appended(key, tp, p, early)
                        else:
                            results[key] = _PARKING      # keeps the response's order
                            diverted.append((key, tp, p, diversion))
                        continue
                appended(key, tp, p, self.replicas.append(tp, p.records, acks,
                                                          received_ns=client.received_ns,
                                                          carry_out=False))
        # The appends' effects at once (one wake-up of the partitions' fetches).
        self.replicas.carry_out()
        if diverted:
            # All of the request's delayed records parked at once (one round trip to the
            # store), then the rest of their batches appended. Only parking awaits here,
            # and a transactional batch never parks (it is refused), so KIP-890's no-await
            # window above still holds.
            assert self.delayed is not None
            refused = await self.delayed.park([d for _, _, _, d in diverted])
            for key, tp, p, diversion in diverted:
                if refused is not None:
                    results[key] = (refused[0], -1, -1, -1, refused[1], ())
                    continue
                appended(key, tp, p, self.replicas.append(
                    tp, bytearray(diversion.records), acks, reserved_gaps=True,
                    received_ns=client.received_ns))
        self.metrics.record_produce(tally)
        throttle_ms = self.quotas.produce.record(
            self.replicas.image.client_quotas, client.principal.name, client.client_id or "",
            sum(len(p.records) for t in req.topic_data for p in t.partition_data
                if p.records is not None), self.replicas.now_ms())
        if acks == 0:
            if throttle_ms:
                await asyncio.sleep(throttle_ms / 1000)     # no response to carry it: mute
            return None
        if waits:
            if not throttle_ms:
                # The appends are done: the connection's next Produce may start (its
                # response still follows this one's; quorum/network.py). A throttled
                # client's connection stays muted instead (KIP-219).
                client.allow_next_request()
            codes = await self.replicas.await_replications(
                [(tp, required) for _, tp, required in waits], req.timeout_ms)
            for (key, _, _), code in zip(waits, codes):
                if code != ErrorCode.NONE:
                    results[key] = (code,) + results[key][1:]
        by_topic: dict[str, list] = {}
        leaders: dict[int, Any] = {}
        for (name, index), (code, base, append_time, start, message, refused) in results.items():
            # KIP-951 (v10+): a NOT_LEADER_OR_FOLLOWER names the current leader and its endpoint.
            current_leader = (self._current_leader(cls, TopicPartition(name, index), leaders,
                                                    client.listener_name)
                              if version >= 10 and code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                              else _NO_PRODUCE_LEADER)
            by_topic.setdefault(name, []).append(cls.PartitionProduceResponse(
                index=index, error_code=code, base_offset=base if code == ErrorCode.NONE else -1,
                log_append_time_ms=append_time, log_start_offset=start, error_message=message,
                record_errors=[cls.PartitionProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=i, batch_index_error_message=m) for i, m in refused],
                current_leader=current_leader))
        return cls(throttle_time_ms=throttle_ms,
                   responses=[cls.TopicProduceResponse(name=n, partition_responses=ps)
                              for n, ps in by_topic.items()],
                   node_endpoints=list(leaders.values()))

    # ------------------------------------------------------------ Fetch

    async def handle_fetch(self, req: messages.FetchRequest, version: int,
                           client: ClientInfo) -> messages.FetchResponse:
        """Fetch v4-v17. v13+ name topics by id (KIP-516): an id this broker's metadata
        does not know is UNKNOWN_TOPIC_ID for its partitions, and the fetch session keys
        partitions by id. v15+ carry the follower's id (and broker epoch, KIP-903) in
        ReplicaState. v16+ answer NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with the
        current leader and its endpoint (KIP-951). v17's ReplicaDirectoryId (KIP-853) only
        matters to KRaft's own fetches; a broker reads it and needs nothing from it."""
        cls = messages.FetchResponse
        replica_id = fetch_replica_id(req, version)
        try:
            # Ketch's tag filter (issue 18): consumers only, flexible versions only.
            tag_filters = tag_filter_of(req.unknown_tagged_fields) if version >= 12 and replica_id < 0 else {}
        except CorruptFrameError as e:
            log.info("fetch from %s: %s", client.host, e)
            return cls(error_code=ErrorCode.INVALID_REQUEST, session_id=0)
        replica_epoch = req.replica_state.replica_epoch if version >= 15 else -1     # KIP-903
        by_id = version >= 13
        image = self.replicas.image
        loop = asyncio.get_running_loop()
        # KIP-227: which partitions this fetch reads (an incremental one: its session's),
        # and which of them the answer carries.
        session = self.fetch_sessions.context(
            req.session_id, req.session_epoch,
            (PartitionAsked(_session_key(t, p.partition, by_id), p.fetch_offset,
                            p.partition_max_bytes, p.current_leader_epoch)
             for t in req.topics for p in t.partitions),
            (_session_key(t, p, by_id) for t in req.forgotten_topics_data for p in t.partitions),
            privileged=replica_id >= 0, now_ms=self.replicas.now_ms(), uses_topic_ids=by_id)
        if session.error_code != ErrorCode.NONE:
            return cls(error_code=session.error_code, session_id=0)
        # The session's partitions by name; by id, resolved against this broker's metadata
        # (a session may hold an id the metadata learns later), kept between fetches.
        view = self._session_view(session, image)
        # A follower needs CLUSTER_ACTION; a consumer READ on each topic (Kafka's KafkaApis).
        if replica_id >= 0:
            allowed = (None if self.auth.authorize_cluster(client, Op.CLUSTER_ACTION)
                       else set[str]())
        elif self.auth.enabled:
            allowed = self.auth.filter_authorized(client, Op.READ, AclResourceType.TOPIC,
                                                  (tp.topic for _, tp, _ in view.entries if tp is not None))
        else:
            allowed = None
        readable = (view.readable if allowed is None
                    else [tp for _, tp, _ in view.entries if tp is not None and tp.topic in allowed])
        deadline = loop.time() + max(0, req.max_wait_ms) / 1000
        # A parked fetch woken by some of its partitions reads those again and keeps the
        # other reads: an append, HW, truncation or leadership change would have woken it
        # too (a log start moved by retention or DeleteRecords is answered by the next
        # fetch: Kafka's DelayedFetch would read it now). At max_wait_ms it reads all
        # again, as Kafka's does. Only a partition's first read is the follower's
        # fetch-state report (Kafka's readFromPurgatory reads do not update it).
        previous: dict[TopicPartition, ReadResult] = {}
        woken: set[TopicPartition] | None = None        # None: read every partition
        # A follower's incremental fetch: the session's partitions it did not name whose
        # log, HW and log start are as it was last told need no read and are not in the
        # answer; one core call reports the follower's fetch state for those that just
        # became so (it is in sync). They are read only if they change while the fetch is
        # parked (that read makes no second report). Of the idle ones, only those that
        # changed since the session's last fetch are looked at again (IdlePartitions).
        quiet: set[TopicPartition] = set()
        walk: list[tuple[SessionPartition, TopicPartition | None, CachedPartition]]
        woken_quiet: dict[TopicPartition, tuple[SessionPartition, TopicPartition, CachedPartition]] = {}
        if replica_id >= 0 and session.incremental and allowed is None:
            idle = self._idle_partitions(view, session.named, image)
            idle.settle(self.replicas.report_idle_follower_fetches(replica_id, replica_epoch, (
                (tp, p.fetch_offset, p.current_leader_epoch, p.high_watermark, p.log_start_offset)
                for key, tp, p in idle.active.values() if key not in session.named)))
            # What changed while reporting is looked at too (nothing awaits from here
            # until this fetch parks, where a later change wakes it).
            self._wake_changed(idle)
            quiet = idle.quiet
            walk = [*view.unresolved.values(), *idle.active.values()]
        else:
            # Every partition of the session (not built for an idle follower's fetch:
            # ~33,000 entries per fetch at 100k partitions, most of them quiet).
            walk = view.entries
        while True:
            total = 0
            any_error = redirected = False
            results: list[tuple[SessionPartition, TopicPartition | None, CachedPartition, ReadResult]] = []
            if woken and quiet:
                for woken_tp in woken:
                    if woken_tp in quiet and woken_tp not in woken_quiet:
                        woken_quiet[woken_tp] = idle.entries[woken_tp]
            for key, tp, p in (walk if not woken_quiet else [*walk, *woken_quiet.values()]):
                if (quiet and tp in quiet and tp not in previous
                        and (woken is None or tp not in woken)):
                    continue
                if tp is None:
                    # As Kafka's: answered, but no reason to answer before max_wait_ms
                    # unless nothing else is read.
                    results.append((key, tp, p, ReadResult(ErrorCode.UNKNOWN_TOPIC_ID)))
                    any_error |= not readable
                    continue
                if allowed is not None and tp.topic not in allowed:
                    results.append((key, tp, p, ReadResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
                    any_error = True
                    continue
                budget = max(0, req.max_bytes - total)
                last = previous.get(tp)
                if (woken is not None and tp not in woken and last is not None
                        and (last.records is None or last.size_in_bytes <= budget)):
                    result = last
                else:
                    result = self.replicas.read(tp, p.fetch_offset, min(p.partition_max_bytes, budget),
                                                p.current_leader_epoch, replica_id,
                                                min_one_batch=(total == 0),
                                                client_rack=req.rack_id if version >= 11 else None,
                                                replica_epoch=replica_epoch,
                                                isolation_level=req.isolation_level,
                                                update_fetch_state=last is None and tp not in quiet)
                    previous[tp] = result
                total += result.size_in_bytes
                any_error |= result.error_code != ErrorCode.NONE
                results.append((key, tp, p, result))
                redirected |= result.preferred_read_replica >= 0
            if total >= req.min_bytes or any_error or redirected or loop.time() >= deadline:
                break
            waited = await self.replicas.wait_for_data(readable, deadline - loop.time(),
                                                       follower=replica_id >= 0, replica_id=replica_id)
            if waited is None:
                break           # a follower to name a partition it lacks: answer it now
            woken = waited or None
        if replica_id < 0 and self.tiered is not None:
            results = await self._read_tiered(self.tiered, results, req.max_bytes,
                                              req.isolation_level == 1)
        # Issue 22's latency trace: told when this answer is written.
        if replica_id < 0:
            client.after_write = self.replicas.consumer_answered(
                (tp, p.fetch_offset, r) for _, tp, p, r in results if tp is not None)
        else:
            client.after_write = self.replicas.follower_answered(
                replica_id, (tp for _, tp, _, r in results if tp is not None and r.records is not None))
        by_topic: dict[Any, list] = {}
        leaders: dict[int, Any] = {}
        fetched = 0
        for key, tp, cached, r in results:
            if not session.include(cached, r.error_code,
                                   r.records is not None or r.remote_records is not None
                                   or r.preferred_read_replica >= 0,
                                   r.high_watermark, r.log_start_offset):
                continue
            current_leader = (self._current_leader(cls, tp, leaders, client.listener_name)
                              if version >= 16 and tp is not None and r.error_code in _LEADER_MOVED
                              else _NO_CURRENT_LEADER)
            data = cls.PartitionData(
                partition_index=key.partition, error_code=r.error_code, high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset if r.last_stable_offset >= 0 else r.high_watermark,
                log_start_offset=r.log_start_offset,
                aborted_transactions=None if r.aborted_transactions is None else [
                    cls.PartitionData.AbortedTransaction(producer_id=t.producer_id,
                                                         first_offset=t.first_offset)
                    for t in r.aborted_transactions],
                current_leader=current_leader, preferred_read_replica=r.preferred_read_replica,
                records=(self.replicas.records_of(r) if tp is None or tp.topic not in tag_filters
                         else filter_batches(self.replicas.records_bytes(r), tag_filters[tp.topic]).data))
            by_topic.setdefault(key.topic_id if isinstance(key, TopicIdPartition) else key.topic,
                                []).append(data)
            if tp is not None:
                self.metrics.record_fetch(tp.topic, r.error_code, r.size_in_bytes)
            fetched += r.size_in_bytes
        throttle_ms = 0 if replica_id >= 0 else self.quotas.fetch.record(
            self.replicas.image.client_quotas, client.principal.name, client.client_id or "", fetched,
            self.replicas.now_ms())
        return cls(error_code=ErrorCode.NONE, session_id=session.session_id,
                   throttle_time_ms=throttle_ms, responses=[
                       cls.FetchableTopicResponse(topic_id=t, partitions=ps) if by_id
                       else cls.FetchableTopicResponse(topic=t, partitions=ps)
                       for t, ps in by_topic.items()],
                   node_endpoints=list(leaders.values()))

    def _session_view(self, session: FetchContext, image: MetadataImage) -> SessionView:
        """The session's SessionView, made or brought up to date (a sessionless fetch's
        is made for this fetch alone)."""
        replicas = self.replicas
        ids_version, deletions_version = replicas.topic_ids_version, replicas.topic_deletions_version
        view = session.memo
        if view is None or view.deletions_version != deletions_version:
            view = SessionView.of(session.partitions, ids_version, deletions_version, _id_resolver(image),
                                  replicas.core.hosted_key)
            session.remember(view)
            return view
        if view.ids_version != ids_version:
            view.topics_created(ids_version, _id_resolver(image))
        removed, added = session.take_changes()
        view.remove(removed)
        if added:
            view.resolve = _id_resolver(image)
            view.add(added)
        return view

    def _idle_partitions(self, view: SessionView, named: set[SessionPartition],
                         image: MetadataImage) -> IdlePartitions:
        """A follower session's IdlePartitions (made by its first incremental fetch),
        brought up to date for this fetch: the partitions that changed on this leader
        since the last one, and those this one names, are active again; every
        IDLE_RECHECK_MS, all of them."""
        now_ms = self.replicas.now_ms()
        idle = view.idle
        if idle is None:
            idle = view.idle = IdlePartitions({e[1]: e for e in view.resolved.values()},
                                              self.replicas.change_seq, now_ms + IDLE_RECHECK_MS)
            return idle
        if now_ms >= idle.recheck_at_ms:
            idle.wake_all()
            idle.change_seq = self.replicas.change_seq
            idle.recheck_at_ms = now_ms + IDLE_RECHECK_MS
        else:
            self._wake_changed(idle)
        if named and idle.quiet:
            resolve = _id_resolver(image)
            tps: list[TopicPartition] = []
            for key in named:
                if not isinstance(key, TopicIdPartition):
                    tps.append(key)
                elif (name := resolve(key.topic_id)) is not None:
                    tps.append(TopicPartition(name, key.partition))
            idle.wake(tps)
        return idle

    def _wake_changed(self, idle: IdlePartitions) -> None:
        """Make the partitions changed on this leader since ``idle.change_seq`` active."""
        changes = self.replicas.changes_since(idle.change_seq)
        idle.change_seq = self.replicas.change_seq
        if changes is None:
            idle.wake_all()
            return
        for tps in changes:
            idle.wake(tps)

    @staticmethod
    async def _read_tiered(tiered: RemoteLogManager, results: list[Any], fetch_max_bytes: int,
                           read_committed: bool) -> list[Any]:
        """KIP-405, for consumers: an offset below a tiered partition's local log (which the
        local read answered OFFSET_OUT_OF_RANGE) is read from remote storage, and the log
        start offset a consumer is told is the log's, remote part included."""
        total = sum(r.size_in_bytes for *_, r in results)
        out = []
        for key, tp, p, r in results:
            if tp is not None and r.error_code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) \
                    and r.log_start_offset >= 0 and tiered.is_tiered(tp):
                local_start = r.log_start_offset
                if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.fetch_offset < local_start:
                    remote = await tiered.read(tp, p.fetch_offset,
                                               min(p.partition_max_bytes, max(0, fetch_max_bytes - total)),
                                               total == 0, local_start, read_committed)
                    r = dataclasses.replace(
                        r, error_code=remote.error_code, records=None,
                        aborted_transactions=remote.aborted_transactions,
                        remote_records=remote.records if remote.records else None,
                        log_start_offset=remote.log_start_offset if remote.log_start_offset >= 0
                        else local_start)
                    total += r.size_in_bytes
                else:
                    r = dataclasses.replace(r, log_start_offset=tiered.log_start_offset(tp, local_start))
            out.append((key, tp, p, r))
        return out

    def _current_leader(self, cls: Any, tp: TopicPartition, endpoints: dict[int, Any],
                        listener_name: str) -> Any:
        """KIP-951: the partition's leader and epoch as this broker's metadata has them,
        its endpoint on this listener added to ``endpoints`` (Kafka's getCurrentLeader),
        as ``cls``'s (ProduceResponse's or FetchResponse's) structs."""
        image = self.replicas.image
        topic = image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        if reg is None:
            return cls.LeaderIdAndEpoch(leader_id=NO_LEADER, leader_epoch=-1)
        broker = image.cluster.brokers.get(reg.leader)
        if broker is not None and not broker.fenced:
            endpoint = broker.endpoint(listener_name)
            if endpoint is not None:
                endpoints[reg.leader] = cls.NodeEndpoint(node_id=reg.leader, host=endpoint.host,
                                                         port=endpoint.port, rack=broker.rack)
        return cls.LeaderIdAndEpoch(leader_id=reg.leader, leader_epoch=reg.leader_epoch)

    # ------------------------------------------------------------ offsets

    async def handle_describe_topic_partitions(
            self, req: messages.DescribeTopicPartitionsRequest, version: int,
            client: ClientInfo) -> messages.DescribeTopicPartitionsResponse:
        """KIP-966's paged describe: topics by name (all of them when none is named) from
        the cursor on, at most ``response_partition_limit`` partitions (and the broker's
        max.request.partition.size.limit), with a cursor to the rest."""
        cls = messages.DescribeTopicPartitionsResponse
        image = self.replicas.image
        names = sorted({t.name for t in req.topics}) if req.topics else sorted(image.topics.by_name)
        # As Metadata: undescribable topics are left out of "all", refused when named.
        describable = self.auth.filter_authorized(client, Op.DESCRIBE, AclResourceType.TOPIC, names)
        refused = [n for n in names if n not in describable] if req.topics else []
        names = [n for n in names if n in describable]
        start_partition = 0
        if req.cursor is not None:
            if req.cursor.topic_name not in names or req.cursor.partition_index < 0:
                # As Kafka: the response has no request-level error, so every topic gets it.
                return cls(topics=[cls.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.INVALID_REQUEST, name=name) for name in names])
            names = names[names.index(req.cursor.topic_name):]
            start_partition = req.cursor.partition_index
        budget = max(1, min(req.response_partition_limit, self.config.partitions_per_describe_max))
        topics = [cls.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n) for n in refused]
        next_cursor = None
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                topics.append(cls.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
            if budget == 0:
                next_cursor = cls.Cursor(topic_name=name, partition_index=0)
                break
            indexes = [i for i in sorted(topic.partitions) if i >= start_partition]
            start_partition = 0
            if len(indexes) > budget:
                next_cursor = cls.Cursor(topic_name=name, partition_index=indexes[budget])
                indexes = indexes[:budget]
            budget -= len(indexes)
            partitions = []
            for i in indexes:
                reg = topic.partitions[i]
                partitions.append(cls.DescribeTopicPartitionsResponsePartition(
                    error_code=ErrorCode.LEADER_NOT_AVAILABLE if reg.leader == NO_LEADER else ErrorCode.NONE,
                    partition_index=i, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                    replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                    eligible_leader_replicas=(None if reg.eligible_leader_replicas is None
                                              else list(reg.eligible_leader_replicas)),
                    last_known_elr=None if reg.last_known_elr is None else list(reg.last_known_elr),
                    offline_replicas=[r for r in reg.replicas if not image.cluster.is_active(r)]))
            topics.append(cls.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                is_internal=name.startswith("__"), partitions=partitions,
                topic_authorized_operations=self.auth.authorized_operations(
                    client, AclResourceType.TOPIC, name, True)))
            if next_cursor is not None:
                break
        return cls(topics=topics, next_cursor=next_cursor)

    async def handle_list_client_metrics_resources(
            self, req: messages.ListClientMetricsResourcesRequest, version: int,
            client: ClientInfo) -> messages.ListClientMetricsResourcesResponse:
        """The client-metrics subscriptions (KIP-714) this broker's metadata holds."""
        cls = messages.ListClientMetricsResourcesResponse
        if not self.auth.authorize_cluster(client, Op.DESCRIBE_CONFIGS):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       client_metrics_resources=[])
        names = sorted(r.name for r in self.replicas.image.configs.resources
                       if r.type == ConfigResourceType.CLIENT_METRICS)
        return cls(error_code=ErrorCode.NONE, client_metrics_resources=[
            cls.ClientMetricsResource(name=n) for n in names])

    async def handle_describe_client_quotas(
            self, req: messages.DescribeClientQuotasRequest, version: int,
            client: ClientInfo) -> messages.DescribeClientQuotasResponse:
        cls = messages.DescribeClientQuotasResponse
        if not self.auth.authorize_cluster(client, Op.DESCRIBE_CONFIGS):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, entries=None)
        problem, found = describe_quotas(
            self.replicas.image.client_quotas,
            [(c.entity_type, c.match_type, c.match) for c in req.components], req.strict)
        if problem is not None:
            return cls(error_code=ErrorCode.INVALID_REQUEST, error_message=problem, entries=None)
        return cls(error_code=ErrorCode.NONE, entries=[
            cls.EntryData(entity=[cls.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                          values=[cls.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in found])

    async def handle_describe_producers(self, req: messages.DescribeProducersRequest, version: int,
                                        client: ClientInfo) -> messages.DescribeProducersResponse:
        """The idempotent and transactional producers a partition's leader remembers
        (kafka-transactions.sh describe-producers), with the coordinator epoch of the last
        marker and the first offset of an ongoing transaction (-1: none)."""
        cls = messages.DescribeProducersResponse
        topics = []
        readable = self.auth.filter_authorized(client, Op.READ, AclResourceType.TOPIC,
                                               (t.name for t in req.topics))
        for t in req.topics:
            partitions = []
            for index in t.partition_indexes:
                if t.name not in readable:
                    partitions.append(cls.PartitionResponse(
                        partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        active_producers=[]))
                    continue
                code, producers = self.replicas.core.describe_producers(TopicPartition(t.name, index))
                partitions.append(cls.PartitionResponse(
                    partition_index=index, error_code=code, active_producers=[
                        cls.ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                          last_sequence=p.last_sequence,
                                          last_timestamp=p.last_timestamp_ms,
                                          coordinator_epoch=p.coordinator_epoch,
                                          current_txn_start_offset=p.current_txn_start_offset)
                        for p in producers]))
            topics.append(cls.TopicResponse(name=t.name, partitions=partitions))
        return cls(topics=topics)

    async def handle_list_offsets(self, req: messages.ListOffsetsRequest, version: int,
                                  client: ClientInfo) -> messages.ListOffsetsResponse:
        cls = messages.ListOffsetsResponse
        topics = []
        describable = self.auth.filter_authorized(client, Op.DESCRIBE, AclResourceType.TOPIC,
                                                  (t.name for t in req.topics))
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.name not in describable:
                    parts.append(cls.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                tp = TopicPartition(t.name, p.partition_index)
                code, ts, offset, epoch = self.replicas.core.list_offset(
                    tp, p.timestamp, p.current_leader_epoch, req.replica_id, req.isolation_level)
                if (code == ErrorCode.NONE and self.tiered is not None and self.tiered.is_tiered(tp)):
                    code, ts, offset, epoch = await self.tiered.list_offset(
                        tp, p.timestamp, ts, offset, epoch)
                parts.append(cls.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=code, timestamp=ts, offset=offset,
                    leader_epoch=epoch))
            topics.append(cls.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return cls(topics=topics)

    async def handle_write_txn_markers(self, req: messages.WriteTxnMarkersRequest, version: int,
                                       client: ClientInfo) -> messages.WriteTxnMarkersResponse:
        """Transaction markers from a transaction coordinator (Kafka's
        handleWriteTxnMarkersRequest): ``TransactionCoordinatorDriver.write_markers``, which
        the coordinator also calls directly for the partitions its own broker leads."""
        entries = marker_entries(req)
        answers = await self.transactions.write_markers(entries, self.config.request_timeout_ms)
        return marker_response(entries, answers)

    async def handle_offset_for_leader_epoch(self, req: messages.OffsetForLeaderEpochRequest, version: int,
                                             client: ClientInfo) -> messages.OffsetForLeaderEpochResponse:
        cls = messages.OffsetForLeaderEpochResponse
        topics = []
        # Followers (CLUSTER_ACTION) may ask about every topic, consumers about those they
        # may describe.
        everything = self.auth.authorize_cluster(client, Op.CLUSTER_ACTION)
        describable = set() if everything else self.auth.filter_authorized(
            client, Op.DESCRIBE, AclResourceType.TOPIC, (t.topic for t in req.topics))
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if not everything and t.topic not in describable:
                    parts.append(cls.EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                    partition=p.partition))
                    continue
                code, epoch, end = self.replicas.core.end_offset_for_epoch(
                    TopicPartition(t.topic, p.partition), p.leader_epoch, p.current_leader_epoch)
                parts.append(cls.EpochEndOffset(error_code=code, partition=p.partition,
                                                leader_epoch=epoch, end_offset=end))
            topics.append(cls.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return cls(topics=topics)

    async def handle_delete_records(self, req: messages.DeleteRecordsRequest, version: int,
                                    client: ClientInfo) -> messages.DeleteRecordsResponse:
        cls = messages.DeleteRecordsResponse
        topics = []
        deletable = self.auth.filter_authorized(client, Op.DELETE, AclResourceType.TOPIC,
                                                (t.name for t in req.topics))
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.name not in deletable:
                    parts.append(cls.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                code, low = self.replicas.delete_records(TopicPartition(t.name, p.partition_index), p.offset)
                parts.append(cls.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                               low_watermark=low, error_code=code))
            topics.append(cls.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        return cls(topics=topics)

    # ------------------------------------------------------------ producer ids

    async def handle_init_producer_id(self, req: messages.InitProducerIdRequest, version: int,
                                      client: ClientInfo) -> messages.InitProducerIdResponse:
        cls = messages.InitProducerIdResponse
        # A transactional producer needs WRITE on its id (below); an idempotent one needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        # (KIP-679; Kafka checks here since 3.0, not on every Produce).
        if req.transactional_id is None and not (
                self.auth.authorize_cluster(client, Op.IDEMPOTENT_WRITE)
                or self.auth.authorize_by_resource_type(client, Op.WRITE, AclResourceType.TOPIC)):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                       producer_epoch=-1)
        if req.transactional_id is not None:
            if not self.auth.authorize(client, Op.WRITE, AclResourceType.TRANSACTIONAL_ID,
                                       req.transactional_id):
                return cls(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           producer_id=-1, producer_epoch=-1)
            return await self.transactions.handle_init_producer_id(req, version, client)
        if version >= 3 and req.producer_id >= 0:
            # KIP-360: an idempotent producer bumps its epoch after an error; the id stays.
            if req.producer_epoch >= 0x7FFE:
                return await self._new_producer_id(cls)
            return cls(error_code=ErrorCode.NONE, producer_id=req.producer_id,
                       producer_epoch=req.producer_epoch + 1)
        return await self._new_producer_id(cls)

    async def _new_producer_id(self, cls: type) -> Any:
        producer_id = await self.producer_ids.next_producer_id(self.broker_epoch())
        if producer_id is None:
            return cls(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return cls(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)

    # ------------------------------------------------------------ admin

    async def forward_authorized(self, api_key: int, version: int, body: Any,
                                 client: ClientInfo) -> Any:
        """Authorize a forwardable request here, before it leaves the broker (the principal
        is this connection's); forward what is allowed and answer the rest."""
        auth = self.auth
        if not auth.enabled:
            return await self.forward(api_key, version, body)
        cluster_op = _FORWARDED_CLUSTER_OPS.get(api_key)
        if cluster_op is not None:
            if not auth.authorize_cluster(client, cluster_op):
                return error_response(api_key, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      f"{cluster_op.name} on the cluster is not allowed")
            return await self.forward(api_key, version, body)
        denied: Callable[[Any], int]       # item -> the error it gets, NONE if allowed
        if api_key == ApiKey.CREATE_TOPICS:
            # CREATE on the cluster covers every topic (Kafka's KafkaApis/ControllerApis).
            everything = auth.authorize_cluster(client, Op.CREATE)
            denied = lambda t: ErrorCode.NONE if everything or auth.authorize_topic(  # noqa: E731
                client, Op.CREATE, t.name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            resp = await self._forward_allowed(api_key, version, body, "topics", "topics", denied)
            # v5+ answers each new topic's configs: only to who may describe them (Kafka's
            # KafkaApis: TOPIC_AUTHORIZATION_FAILED as the config error, no configs).
            hidden = {t.name for t in resp.topics if t.error_code == ErrorCode.NONE} - \
                auth.filter_authorized(client, Op.DESCRIBE_CONFIGS, AclResourceType.TOPIC,
                                       (t.name for t in resp.topics))
            if not hidden:
                return resp
            return dataclasses.replace(resp, topics=[
                dataclasses.replace(t, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    num_partitions=-1, replication_factor=-1, configs=[])
                if t.name in hidden else t for t in resp.topics])
        if api_key == ApiKey.CREATE_PARTITIONS:
            denied = lambda t: ErrorCode.NONE if auth.authorize_topic(  # noqa: E731
                client, Op.ALTER, t.name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            return await self._forward_allowed(api_key, version, body, "topics", "results", denied)
        if api_key == ApiKey.DELETE_TOPICS:
            topics = self.replicas.image.topics

            def delete_denied(t: Any) -> int:
                name = t if isinstance(t, str) else (t.name or getattr(
                    topics.get_by_id(t.topic_id), "name", None))
                if name is None:
                    return ErrorCode.NONE      # an unknown id: the controller says so
                return (ErrorCode.NONE if auth.authorize_topic(client, Op.DELETE, name)
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            field = "topics" if body.topics else "topic_names"
            return await self._forward_allowed(api_key, version, body, field, "responses",
                                               delete_denied)
        assert api_key in (ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS), api_key

        def config_denied(r: Any) -> int:
            rtype, code = _CONFIG_ACL_RESOURCE.get(r.resource_type, (None, ErrorCode.NONE))
            if rtype is None:
                return ErrorCode.NONE          # an unknown type: the controller refuses it
            name = r.resource_name if rtype != AclResourceType.CLUSTER else "kafka-cluster"
            return (ErrorCode.NONE if auth.authorize(client, Op.ALTER_CONFIGS, rtype, name)
                    else code)
        return await self._forward_allowed(api_key, version, body, "resources", "responses",
                                           config_denied)

    async def _forward_allowed(self, api_key: int, version: int, body: Any, field: str,
                               response_field: str, denied: Callable[[Any], int]) -> Any:
        """Forward the items of ``body.<field>`` that ``denied`` answers NONE for; the
        others get their error, merged into ``response.<response_field>``."""
        items = list(getattr(body, field))
        codes = [denied(i) for i in items]
        kept = [i for i, c in zip(items, codes) if c == ErrorCode.NONE]
        refused: list[Any] = []
        for code in sorted({c for c in codes if c != ErrorCode.NONE}):
            part = dataclasses.replace(body, **{field: [i for i, c in zip(items, codes) if c == code]})
            refused += getattr(error_response(api_key, part, code), response_field)
        if not refused:
            return await self.forward(api_key, version, body)
        if kept:
            resp = await self.forward(api_key, version, dataclasses.replace(body, **{field: kept}))
        else:
            resp = error_response(api_key, dataclasses.replace(body, **{field: []}), ErrorCode.NONE)
        return dataclasses.replace(resp, **{response_field: list(getattr(resp, response_field)) + refused})

    async def handle_describe_acls(self, req: messages.DescribeAclsRequest, version: int,
                                   client: ClientInfo) -> messages.DescribeAclsResponse:
        """The ACLs a filter matches, from this broker's image, grouped by resource pattern
        (Kafka's AclApis); needs DESCRIBE on the cluster."""
        cls = messages.DescribeAclsResponse
        if not self.auth.authorize_cluster(client, Op.DESCRIBE):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       error_message="DESCRIBE on the cluster is not allowed", resources=[])
        acl_filter = AclBindingFilter.from_wire(req)
        if acl_filter.unknown_element():
            return cls(error_code=ErrorCode.INVALID_REQUEST,
                       error_message="Filter contains UNKNOWN elements", resources=[])
        by_resource: dict[tuple[int, str, int], list] = {}
        acls = self.replicas.image.acls
        for acl_id in sorted(acls.by_id):
            acl = acls.by_id[acl_id]
            if acl_filter.matches(acl):
                by_resource.setdefault(
                    (int(acl.resource_type), acl.resource_name, int(acl.pattern_type)), []).append(
                    cls.AclDescription(principal=acl.principal, host=acl.host,
                                       operation=int(acl.operation),
                                       permission_type=int(acl.permission_type)))
        return cls(error_code=ErrorCode.NONE, resources=[
            cls.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=a)
            for (t, n, p), a in sorted(by_resource.items())])

    async def forward(self, api_key: int, version: int, body: Any) -> Any:
        """Forward an admin request to the active controller and relay its answer."""
        try:
            used, resp = await self.controller.request(
                api_key, (version, version), body, timeout_s=self.config.request_timeout_ms / 1000,
                # Every controller answers DescribeQuorum, only the leader knows its voters.
                leader_of=quorum_leader if api_key == ApiKey.DESCRIBE_QUORUM else None)
        except ConnectionError as e:
            log.warning("forwarding %s failed: %s", ApiKey(api_key).name, e)
            return error_response(api_key, body, ErrorCode.REQUEST_TIMED_OUT,
                                  "the controller quorum is unavailable")
        if api_key == ApiKey.CREATE_TOPICS and not body.validate_only:
            # Kafka's admin clients expect the topic to be usable once created: wait until
            # this broker's image has it (bounded by the request's timeout). A validate-only
            # request created nothing, so there is nothing to wait for.
            names = [t.name for t in resp.topics if t.error_code == ErrorCode.NONE]
            await self.topic_creation.wait_for_topics(names, getattr(body, "timeout_ms", 30_000) / 1000)
        return resp

    async def handle_describe_configs(self, req: messages.DescribeConfigsRequest, version: int,
                                      client: ClientInfo) -> messages.DescribeConfigsResponse:
        """Topic and broker configs with Kafka's sources and synonyms, resolved by the
        same ``ConfigLayers`` the partitions apply (metadata_log.config_layers)."""
        cls = messages.DescribeConfigsResponse
        layers = self.replicas.core.config_layers
        node = str(self.config.node_id)
        results = []
        for r in req.resources:
            def failed(code: ErrorCode, message: str) -> Any:
                return cls.DescribeConfigsResult(error_code=code, error_message=message,
                                                 resource_type=r.resource_type,
                                                 resource_name=r.resource_name, configs=[])
            acl_resource, denied = _CONFIG_ACL_RESOURCE.get(r.resource_type, (None, ErrorCode.NONE))
            if acl_resource is not None and not self.auth.authorize(
                    client, Op.DESCRIBE_CONFIGS, acl_resource,
                    CLUSTER_NAME if acl_resource == AclResourceType.CLUSTER else r.resource_name):
                results.append(failed(denied, "DESCRIBE_CONFIGS is not allowed"))
                continue
            if r.resource_type == ConfigResourceType.TOPIC:
                if self.replicas.image.topics.get(r.resource_name) is None:
                    results.append(failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"Topic {r.resource_name} does not exist."))
                    continue
                entries = layers.topic_entries(r.resource_name)
            elif r.resource_type == ConfigResourceType.BROKER:
                if r.resource_name == "":
                    # The cluster-wide default resource holds only what was set there.
                    entries = [e for e in layers.broker_entries()
                               if e.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
                elif r.resource_name == node:
                    entries = layers.broker_entries()
                else:
                    results.append(failed(ErrorCode.INVALID_REQUEST,
                                          f"Unexpected broker id, expected {node} or empty "
                                          f"string, but received {r.resource_name}"))
                    continue
            elif r.resource_type == ConfigResourceType.CLIENT_METRICS:
                # A subscription (KIP-714): the keys that were set, nothing defaulted, as
                # Kafka's ConfigHelper answers; an unknown name has no keys.
                if r.resource_name == "":
                    results.append(failed(ErrorCode.INVALID_REQUEST,
                                          "Client metrics subscription name must not be empty"))
                    continue
                values = self.replicas.image.configs.get(ConfigResourceType.CLIENT_METRICS,
                                                         r.resource_name)
                wanted = None if not r.configuration_keys else set(r.configuration_keys)
                results.append(cls.DescribeConfigsResult(
                    error_code=ErrorCode.NONE, resource_type=r.resource_type,
                    resource_name=r.resource_name, configs=[
                        cls.DescribeConfigsResourceResult(
                            name=k, value=v, read_only=False, is_default=False,
                            config_source=int(ConfigSource.CLIENT_METRICS_CONFIG),
                            is_sensitive=False, synonyms=[],
                            config_type=CLIENT_METRICS_CONFIGS[k].type.wire
                            if k in CLIENT_METRICS_CONFIGS else 0)
                        for k, v in sorted(values.items()) if wanted is None or k in wanted]))
                continue
            elif r.resource_type == ConfigResourceType.CLUSTER_LINK:
                # A cluster link (issue 21): what was set and the defaults; secrets hidden.
                if r.resource_name == "":
                    # The nameless link lists the links (Kafka 4.1's ListConfigResources
                    # is not in the reference schemas): one entry per link, its value the
                    # link's bootstrap servers.
                    results.append(cls.DescribeConfigsResult(
                        error_code=ErrorCode.NONE, resource_type=r.resource_type,
                        resource_name="", configs=[
                            cls.DescribeConfigsResourceResult(
                                name=name, value=configs.get("bootstrap.servers", ""),
                                read_only=True, is_default=False,
                                config_source=int(ConfigSource.UNKNOWN), is_sensitive=False,
                                synonyms=[], config_type=0)
                            for name, configs in cluster_links(self.replicas.image).items()]))
                    continue
                link = cluster_link(self.replicas.image, r.resource_name)
                if link is None:
                    results.append(failed(ErrorCode.RESOURCE_NOT_FOUND,
                                          f"Cluster link {r.resource_name} does not exist."))
                    continue
                wanted = None if not r.configuration_keys else set(r.configuration_keys)
                results.append(cls.DescribeConfigsResult(
                    error_code=ErrorCode.NONE, resource_type=r.resource_type,
                    resource_name=r.resource_name, configs=[
                        cls.DescribeConfigsResourceResult(
                            name=e.name, value=e.value, read_only=False, is_default=e.is_default,
                            config_source=int(ConfigSource.DEFAULT_CONFIG if e.is_default
                                              else ConfigSource.UNKNOWN),
                            is_sensitive=e.sensitive, synonyms=[],
                            config_type=e.definition.type.wire,
                            documentation=(e.definition.doc or None)
                            if req.include_documentation else None)
                        for e in link_config_entries(link) if wanted is None or e.name in wanted]))
                continue
            else:
                results.append(failed(ErrorCode.INVALID_REQUEST,
                                      f"Unsupported resource type {r.resource_type} for "
                                      "DescribeConfigs"))
                continue
            if r.configuration_keys is not None:
                keys = set(r.configuration_keys)
                entries = [e for e in entries if e.name in keys]
            results.append(cls.DescribeConfigsResult(
                error_code=ErrorCode.NONE, resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[self._config_entry(cls, e, req) for e in entries]))
        return cls(results=results)

    @staticmethod
    def _config_entry(cls: Any, e: ConfigEntry, req: Any) -> Any:
        synonyms = [cls.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                    for s in e.synonyms] if req.include_synonyms else []
        return cls.DescribeConfigsResourceResult(
            name=e.name, value=None if e.sensitive else e.value, read_only=e.read_only,
            is_default=e.is_default, config_source=int(e.source), is_sensitive=e.sensitive,
            synonyms=synonyms, config_type=e.definition.type.wire,
            documentation=(e.definition.doc or None) if req.include_documentation else None)

    async def handle_describe_user_scram_credentials(
            self, req: messages.DescribeUserScramCredentialsRequest, version: int,
            client: ClientInfo) -> messages.DescribeUserScramCredentialsResponse:
        # Answered from this broker's image, as Kafka's brokers answer it; DESCRIBE on the
        # cluster first.
        if not self.auth.authorize_cluster(client, Op.DESCRIBE):
            return messages.DescribeUserScramCredentialsResponse(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message="DESCRIBE on the cluster is needed to describe SCRAM credentials")
        return describe_user_scram_credentials(self.replicas.image, req)

    async def handle_describe_cluster(self, req: messages.DescribeClusterRequest, version: int,
                                      client: ClientInfo) -> messages.DescribeClusterResponse:
        cls = messages.DescribeClusterResponse
        return cls(error_code=ErrorCode.NONE, cluster_id=self.cluster_id,
                   controller_id=self.config.node_id, endpoint_type=1,
                   brokers=self._live_brokers(cls.DescribeClusterBroker, client.listener_name),
                   cluster_authorized_operations=self.auth.authorized_operations(
                       client, AclResourceType.CLUSTER, CLUSTER_NAME,
                       req.include_cluster_authorized_operations))

    async def handle_describe_log_dirs(self, req: messages.DescribeLogDirsRequest, version: int,
                                       client: ClientInfo) -> messages.DescribeLogDirsResponse:
        """Every log dir of this broker, with its current and future (moving) logs; an
        offline dir answers KAFKA_STORAGE_ERROR and no partitions, as Kafka's does."""
        cls = messages.DescribeLogDirsResponse
        if not self.auth.authorize_cluster(client, Op.DESCRIBE):
            return cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
        wanted = None if req.topics is None else {
            TopicPartition(t.topic, p) for t in req.topics for p in t.partitions}
        results = []
        for described in self.replicas.core.describe_log_dirs(wanted):
            if not described.online:
                results.append(cls.DescribeLogDirsResult(
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=described.log_dir, topics=[],
                    total_bytes=-1, usable_bytes=-1))
                continue
            by_topic: dict[str, list] = {}
            for r in described.replicas:
                by_topic.setdefault(r.partition.topic, []).append(cls.DescribeLogDirsPartition(
                    partition_index=r.partition.partition, partition_size=r.size_bytes,
                    offset_lag=r.offset_lag, is_future_key=r.is_future))
            try:
                usage = shutil.disk_usage(described.log_dir)
                total, usable = usage.total, usage.free
            except OSError:
                total = usable = -1     # the dir just failed; the next request says so
            results.append(cls.DescribeLogDirsResult(
                error_code=ErrorCode.NONE, log_dir=described.log_dir,
                topics=[cls.DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
                total_bytes=total, usable_bytes=usable))
        return cls(error_code=ErrorCode.NONE, results=results)

    async def handle_alter_replica_log_dirs(self, req: messages.AlterReplicaLogDirsRequest,
                                            version: int, client: ClientInfo
                                            ) -> messages.AlterReplicaLogDirsResponse:
        """Move replicas of this broker between its log dirs (KIP-113); each partition's
        answer is its own (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE)."""
        cls = messages.AlterReplicaLogDirsResponse
        by_topic: dict[str, list] = {}
        allowed = self.auth.authorize_cluster(client, Op.ALTER)
        for d in req.dirs:
            for t in d.topics:
                for index in t.partitions:
                    tp = TopicPartition(t.name, index)
                    code = (self.replicas.alter_replica_log_dir(tp, os.path.normpath(d.path))
                            if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    by_topic.setdefault(t.name, []).append(cls.AlterReplicaLogDirPartitionResult(
                        partition_index=index, error_code=code))
        return cls(throttle_time_ms=0, results=[
            cls.AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps) for n, ps in by_topic.items()])
