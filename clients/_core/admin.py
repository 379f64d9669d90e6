"""The admin client's values and decisions, without I/O.

Theory of operation
-------------------
Kafka's AdminClient is mostly plumbing: each call builds one request per destination
(the controller for topic and config writes, any broker for metadata, each partition's
leader for offsets and record deletion, each group's coordinator for group calls), sends
them, and turns the per-item error codes of the answers into per-item results. The shell,
``clients.aio.admin``, does the sending; this module holds what the shell hands out and
the few real decisions, so that they can be tested deterministically:

- the result types: frozen dataclasses named after Kafka's Java admin API
  (``TopicDescription``, ``ConfigEntry``, ``ConsumerGroupDescription``, ``QuorumInfo``, ...);
- ``OffsetSpec`` (ListOffsets' timestamp sentinels) and ``OffsetReset`` (the five ways
  ``kafka-consumer-groups --reset-offsets`` moves a group), with ``plan_offset_reset``
  computing the new committed offsets from the group's committed offsets and the logs'
  bounds, by the rules of Kafka's ``ConsumerGroupCommand`` (below);
- decoding the consumer protocol bytes a group carries (``ConsumerProtocolAssignment``
  and ``ConsumerProtocolSubscription``, each an int16 version followed by the body);
- ``group_lag``: committed offset against the log end, per partition.

Offset reset rules (Kafka's ``ConsumerGroupCommand.prepareOffsetsToReset``): a target
below the log start offset becomes the log start, one above the log end becomes the log
end (a committed offset must be a position a consumer can fetch from). ``to_timestamp``
takes the first offset whose timestamp is at or after the time, or the log end when no
record is that recent. ``shift_by`` moves the committed offset and needs one: a partition
without a committed offset is refused (Kafka refuses it too) with a message naming it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Sequence

from clients.protocol import CorruptFrameError, messages
from clients.protocol._codec import decode_body
from clients.protocol.configs import AlterConfigOpType, ConfigResourceType, ConfigSource, ConfigType
from clients.protocol.features import UpgradeType
from clients.types import TopicPartition

__all__ = [
    "ANY_NAME", "AlterConfigOp", "AlterConfigOpType", "BrokerNode", "ClientQuotaEntity",
    "ClusterDescription", "ConfigEntry", "FeatureMetadata", "FeatureUpdate", "UpgradeType",
    "ConfigResource", "ConfigResourceType", "ConfigSource", "ConfigSynonym", "ConfigType",
    "ConsumerGroupDescription", "ConsumerGroupListing", "CreateTopicResult", "ListOffsetsResult",
    "MemberDescription", "NewPartitions", "NewTopic", "OffsetReset", "OffsetResetKind",
    "OffsetSpec", "PartitionLag", "QuorumInfo", "QuorumReplica", "ReplicaLogDir", "ReplicaLogDirInfo", "LogDirDescription", "ReplicaInfo",
    "TopicDescription",
    "TopicListing", "TopicPartitionInfo", "ZERO_TOPIC_ID", "decode_assignment",
    "AbortTransactionSpec", "ProducerState", "TransactionDescription", "TransactionListing",
    "client_quota_entity", "decode_subscription", "group_lag", "leader_log_end",
    "plan_offset_reset", "quorum_replicas", "ScramCredentialInfo", "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

ZERO_TOPIC_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A user's credential as DescribeUserScramCredentials shows it (KIP-554)."""
    mechanism: str          # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    """Create or replace a user's credential for one mechanism. The Admin salts and hashes
    the password; only the salted password goes to the cluster (Kafka's Admin does the same)."""
    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = 4096
    salt: bytes | None = None          # None: 32 random bytes


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str

# A client quota entity (Kafka's ClientQuotaEntity): (entity type, name) pairs sorted by type,
# the types "user", "client-id" or "ip"; a name of None is that type's default.
ClientQuotaEntity = tuple[tuple[str, "str | None"], ...]


def client_quota_entity(entity: Mapping[str, "str | None"]) -> ClientQuotaEntity:
    """``{"user": "alice", "client-id": None}`` -> the one spelling of that entity."""
    return tuple(sorted(entity.items()))


class _AnyName:
    """In a describe filter: any name of that entity type (Kafka's ofEntityType)."""
    def __repr__(self) -> str:
        return "ANY_NAME"


ANY_NAME = _AnyName()


# ------------------------------------------------------------------ topics


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create (Kafka's NewTopic). Either ``num_partitions`` and
    ``replication_factor`` (-1: the broker's ``num.partitions`` /
    ``default.replication.factor``), or explicit ``replica_assignments`` (partition ->
    broker ids, the first being the preferred leader), never both."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"NewTopic: a topic name is a non-empty string, not {self.name!r}")
        if self.replica_assignments is not None and (self.num_partitions != -1
                                                     or self.replication_factor != -1):
            raise ValueError(f"NewTopic {self.name}: give replica_assignments or "
                             f"num_partitions/replication_factor, not both")


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    """What the controller created (CreateTopics v5+ reports the values it chose)."""
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: uuid.UUID
    is_internal: bool


@dataclass(frozen=True, slots=True)
class TopicPartitionInfo:
    """One partition as the metadata shows it. ``leader`` is -1 while it has none."""
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[TopicPartitionInfo, ...]       # by partition index


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions (Kafka's NewPartitions.increaseTo);
    ``assignments`` optionally places each new partition (broker ids per new partition)."""
    total_count: int
    assignments: Sequence[Sequence[int]] | None = None


# ------------------------------------------------------------------ configs


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A topic (its name), a broker (its id as a string), the cluster-wide broker
    default (``ConfigResource(ConfigResourceType.BROKER, "")``) or a client-metrics
    subscription (its name)."""
    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> "ConfigResource":
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str = "") -> "ConfigResource":
        return cls(ConfigResourceType.BROKER, str(broker_id))

    @classmethod
    def client_metrics(cls, subscription: str) -> "ConfigResource":
        """A client-metrics subscription (KIP-714): keys ``metrics``, ``interval.ms``, ``match``."""
        return cls(ConfigResourceType.CLIENT_METRICS, subscription)

    @classmethod
    def cluster_link(cls, name: str) -> "ConfigResource":
        """A cluster link (Ketch's, issue 21): ``bootstrap.servers``, ``topics``, ...;
        the nameless one lists the links."""
        return cls(ConfigResourceType.CLUSTER_LINK, name)

    def __str__(self) -> str:
        if self.type == ConfigResourceType.BROKER and self.name == "":
            return "the cluster-wide broker default"
        return f"{self.type.name.lower()} {self.name!r}"


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """A finalized feature's new level (Kafka's FeatureUpdate); 0 with a downgrade type
    removes the feature."""
    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """What a broker's ApiVersions (v3+) says about features (Kafka's FeatureMetadata):
    the finalized levels, the metadata offset they are as of, and the broker's ranges."""
    finalized_features: Mapping[str, int]
    finalized_features_epoch: int
    supported_features: Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None                 # None for a sensitive value
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None


# ------------------------------------------------------------------ cluster


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int        # as brokers report it (KRaft brokers name themselves)
    brokers: tuple[BrokerNode, ...]


@dataclass(frozen=True, slots=True)
class ReplicaLogDir:
    """A partition's log on a broker (DescribeLogDirs)."""
    log_dir: str
    size_bytes: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One log in a broker's log directory (DescribeLogDirs): Kafka's ReplicaInfo."""
    size_bytes: int
    offset_lag: int
    is_future: bool             # a log being moved into this directory (AlterReplicaLogDirs)


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker: Kafka's LogDirDescription. An offline directory has
    ``error_code`` KAFKA_STORAGE_ERROR, no replicas and sizes of -1."""
    log_dir: str
    error_code: int
    total_bytes: int
    usable_bytes: int
    replicas: tuple[tuple[TopicPartition, ReplicaInfo], ...]


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """Where one replica's log lives on its broker, and where it is moving
    (AlterReplicaLogDirs): Kafka's DescribeReplicaLogDirsResult.ReplicaLogDirInfo. The
    current log's lag is how far its end is below the high watermark; the future log's,
    how far it is below the current log's end. None and -1 when there is no such log."""
    current_replica_log_dir: str | None
    current_replica_offset_lag: int
    future_replica_log_dir: str | None
    future_replica_offset_lag: int


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    """One voter or observer of the metadata quorum, as the quorum leader sees it.
    ``log_end_offset`` is -1 when the leader does not know it; ``lag`` (the leader's log
    end minus this replica's) is None then."""
    replica_id: int
    log_end_offset: int
    lag: int | None
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    directory_id: uuid.UUID = uuid.UUID(int=0)      # v2+ (KIP-853); zero: not reported


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]
    nodes: Mapping[int, tuple[str, int]] = field(default_factory=dict)   # v2+: controller endpoints


def leader_log_end(voters: Sequence, leader_id: int) -> int:
    """The quorum leader's own log end offset among the voters' ReplicaStates (-1: not
    reported)."""
    return next((v.log_end_offset for v in voters if v.replica_id == leader_id), -1)


def quorum_replicas(states: Sequence, leader_log_end_offset: int) -> tuple[QuorumReplica, ...]:
    """QuorumReplica per ReplicaState; lag against the leader's log end offset, as
    ``kafka-metadata-quorum describe --replication`` computes it."""
    out = []
    for s in states:
        known = s.log_end_offset >= 0 and leader_log_end_offset >= 0
        out.append(QuorumReplica(
            replica_id=s.replica_id, log_end_offset=s.log_end_offset,
            lag=max(0, leader_log_end_offset - s.log_end_offset) if known else None,
            last_fetch_timestamp=s.last_fetch_timestamp,
            last_caught_up_timestamp=s.last_caught_up_timestamp,
            directory_id=getattr(s, "replica_directory_id", uuid.UUID(int=0))))
    return tuple(out)


# ------------------------------------------------------------------ consumer groups


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id a transaction coordinator holds (ListTransactions)."""
    transactional_id: str
    producer_id: int
    state: str                # Kafka's names: Ongoing, PrepareCommit, CompleteAbort, ...
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id's state on its coordinator (DescribeTransactions)."""
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int   # -1 when no transaction is open
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer a partition leader remembers (DescribeProducers)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int            # -1 when unknown
    current_transaction_start_offset: int   # -1 when no transaction is open


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """A hanging transaction to abort on one partition (Kafka's AbortTransactionSpec):
    the producer and coordinator epochs come from ``describe_producers``."""
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    group_id: str
    protocol_type: str        # "consumer" for Kafka consumers, "" for offsets-only groups
    state: str                # Kafka's names: Empty, Stable, PreparingRebalance, ...
    type: str = "classic"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]     # decoded; () unless the group is Stable
    subscription: tuple[str, ...]              # topics the member subscribed to, if known
    # The bytes as the coordinator holds them: the only content for groups of another
    # protocol type than "consumer" (Connect workers, for one), which are not decoded.
    raw_assignment: bytes = b""
    raw_metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str             # the assignor chosen (range, roundrobin, ...), "" unless Stable
    members: tuple[MemberDescription, ...]
    coordinator: int


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """``committed`` is None when the group has no offset for the partition; its lag is
    then the whole log (log end minus log start), as Kafka's tools show '-' and a consumer
    with auto.offset.reset=earliest would have all of it left to read."""
    committed: int | None
    log_start_offset: int
    log_end_offset: int
    lag: int


def group_lag(committed: Mapping[TopicPartition, int | None],
              log_start: Mapping[TopicPartition, int],
              log_end: Mapping[TopicPartition, int]) -> dict[TopicPartition, PartitionLag]:
    out = {}
    for tp in sorted(log_end):
        c = committed.get(tp)
        start, end = log_start.get(tp, 0), log_end[tp]
        lag = max(0, end - max(c, start)) if c is not None else max(0, end - start)
        out[tp] = PartitionLag(committed=c, log_start_offset=start, log_end_offset=end, lag=lag)
    return out


def _decode_versioned(cls: Any, data: bytes) -> Any:
    if len(data) < 2:
        raise ValueError(f"{cls.__name__}: {len(data)} bytes is too short for a version")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"{cls.__name__}: negative version {version}")
    # A newer version only adds fields at the end: Kafka's ConsumerProtocol reads it with
    # the newest schema it knows and ignores the rest.
    known = min(version, cls.SCHEMA.max_version)
    try:
        return decode_body(cls.SCHEMA, known, bytes(data[2:]), exact=version == known)[0]
    except CorruptFrameError as e:
        raise ValueError(f"{cls.__name__} v{version}: {e}") from None


def decode_assignment(data: bytes | None) -> tuple[TopicPartition, ...]:
    """The partitions a ConsumerProtocolAssignment gives, sorted; () for no bytes."""
    if not data:
        return ()
    a = _decode_versioned(messages.ConsumerProtocolAssignment, data)
    return tuple(sorted(TopicPartition(t.topic, p) for t in a.assigned_partitions
                        for p in t.partitions))


def decode_subscription(data: bytes | None) -> tuple[str, ...]:
    if not data:
        return ()
    s = _decode_versioned(messages.ConsumerProtocolSubscription, data)
    return tuple(s.topics)


# ------------------------------------------------------------------ offsets


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """What ListOffsets asks for: a time in ms, or one of Kafka's sentinels."""
    timestamp: int

    LATEST_TIMESTAMP = -1
    EARLIEST_TIMESTAMP = -2
    MAX_TIMESTAMP = -3          # the record with the largest timestamp (KIP-734, v7+)
    EARLIEST_LOCAL_TIMESTAMP = -4   # the local log's start on a tiered topic (KIP-405, v8+)

    @classmethod
    def earliest(cls) -> "OffsetSpec":
        return cls(cls.EARLIEST_TIMESTAMP)

    @classmethod
    def latest(cls) -> "OffsetSpec":
        return cls(cls.LATEST_TIMESTAMP)

    @classmethod
    def earliest_local(cls) -> "OffsetSpec":
        return cls(cls.EARLIEST_LOCAL_TIMESTAMP)

    @classmethod
    def max_timestamp(cls) -> "OffsetSpec":
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> "OffsetSpec":
        if timestamp_ms < 0:
            raise ValueError(f"OffsetSpec.for_timestamp: a time in ms is >= 0, not {timestamp_ms}")
        return cls(timestamp_ms)


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    """``offset`` -1 (and ``timestamp`` -1) when no record matches a time query."""
    offset: int
    timestamp: int
    leader_epoch: int


class OffsetResetKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    SHIFT = "shift"
    OFFSET = "offset"


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """Where ``reset_consumer_group_offsets`` moves a group (kafka-consumer-groups'
    --to-earliest, --to-latest, --to-datetime, --shift-by, --to-offset)."""
    kind: OffsetResetKind
    value: int = 0

    @classmethod
    def to_earliest(cls) -> "OffsetReset":
        return cls(OffsetResetKind.EARLIEST)

    @classmethod
    def to_latest(cls) -> "OffsetReset":
        return cls(OffsetResetKind.LATEST)

    @classmethod
    def to_timestamp(cls, timestamp_ms: int) -> "OffsetReset":
        if timestamp_ms < 0:
            raise ValueError(f"OffsetReset.to_timestamp: a time in ms is >= 0, not {timestamp_ms}")
        return cls(OffsetResetKind.TIMESTAMP, timestamp_ms)

    @classmethod
    def shift_by(cls, delta: int) -> "OffsetReset":
        return cls(OffsetResetKind.SHIFT, delta)

    @classmethod
    def to_offset(cls, offset: int) -> "OffsetReset":
        if offset < 0:
            raise ValueError(f"OffsetReset.to_offset: an offset is >= 0, not {offset}")
        return cls(OffsetResetKind.OFFSET, offset)


def plan_offset_reset(spec: OffsetReset, partitions: Sequence[TopicPartition],
                      committed: Mapping[TopicPartition, int],
                      log_start: Mapping[TopicPartition, int],
                      log_end: Mapping[TopicPartition, int],
                      by_time: Mapping[TopicPartition, int] | None = None,
                      ) -> dict[TopicPartition, int]:
    """The new committed offset of each partition (module docstring for the rules).

    ``by_time`` holds ListOffsets' answers for ``spec.value`` (-1: no record that recent);
    it is only read for TIMESTAMP. Raises ValueError naming the partition when SHIFT finds
    no committed offset to move."""
    out = {}
    for tp in partitions:
        start, end = log_start[tp], log_end[tp]
        assert start <= end, f"{tp}: log start {start} > log end {end}"
        if spec.kind is OffsetResetKind.EARLIEST:
            target = start
        elif spec.kind is OffsetResetKind.LATEST:
            target = end
        elif spec.kind is OffsetResetKind.TIMESTAMP:
            assert by_time is not None, "TIMESTAMP needs ListOffsets answers"
            found = by_time.get(tp, -1)
            target = end if found < 0 else found
        elif spec.kind is OffsetResetKind.SHIFT:
            if tp not in committed:
                raise ValueError(f"cannot shift the offset of {tp}: the group has no "
                                 f"committed offset for it")
            target = committed[tp] + spec.value
        else:
            target = spec.value
        out[tp] = min(max(target, start), end)
    return out
