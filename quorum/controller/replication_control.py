"""Topics and partitions: creation, deletion, new partitions, ISR changes, elections.

Theory of operation
-------------------
Every function here is a decision on one committed ``MetadataImage``: it returns a
``ControllerResult`` (records + response) or a list of records, and changes nothing
(Kafka's ``ReplicationControlManager``, minus its mutable state). Requests that name
several topics or partitions are decided item by item; each item gets its own error code
and the records of the good ones form one batch, as in Kafka (CreateTopics is not atomic
across topics).

Idempotence comes from comparing against the image, never from remembering requests:

- CreateTopics for a name that exists answers TOPIC_ALREADY_EXISTS, so a retried create
  after a lost response is answered, not applied twice;
- AlterPartition is a compare-and-set on the partition epoch (KIP-497): a stale epoch is
  INVALID_UPDATE_VERSION, except when the partition is already exactly in the requested
  state (same leader epoch, ISR and recovery state), which is a retry of a change that
  was applied: it gets the current state back with no error, as Kafka's controller does;
- elections and ISR removals build no record when nothing would change (election.py).

No scans on the per-change paths: fencing, unfencing, controlled shutdown, a new
incarnation and the periodic elections find their partitions through a
``BrokersToPartitions`` index (broker_index.py, Kafka's ``BrokersToIsrs``) that the
controller keeps up to date on replay, so they cost time proportional to the partitions of
the broker concerned (or to the leaderless / imbalanced partitions), not to the cluster.
Callers without an index (tests deciding on a bare image) get one built from the image.
"""
from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.protocol.types import ZERO_UUID
from metadata_log.image import (
    NO_LEADER, ConfigResourceType, LeaderRecoveryState, MetadataImage, PartitionRegistration,
    TopicImage,
)
from quorum.controller.broker_index import BrokersToPartitions
from quorum.controller.config import ControllerConfig
from metadata_log.config_defs import (
    TOPIC_CONFIGS, parse_bool, tiered_storage_problem, validate_value,
)
from metadata_log.cluster_links import cluster_link
from metadata_log.mirror_topics import mirror_config_problem
from metadata_log.config_layers import ConfigLayers, ConfigSource
from metadata_log.features import elr_enabled
from quorum.controller.election import Election, Elr, build_partition_change, remove_from_isr
from quorum.controller.placement import BrokerLoad, PlacementBroker, place_partitions
from quorum.controller.result import ControllerResult

__all__ = [
    "IsActive", "active_predicate", "alter_partition", "broker_leads_any", "broker_load",
    "changes_for_leaderless_partitions", "changes_for_leaving_brokers",
    "changes_for_preferred_leaders", "create_partitions", "create_topics", "delete_topics",
    "election_for_topic", "new_topic_id", "validate_topic_name",
]

IsActive = Callable[[int], bool]

TOPIC_NAME_LENGTH_MAX = 249          # Kafka's Topic.MAX_NAME_LENGTH
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
RESERVED_TOPIC_IDS = (uuid.UUID(int=0), uuid.UUID(int=1))   # Kafka's ZERO_UUID, ONE_UUID


# ---------------------------------------------------------------- shared helpers

def active_predicate(image: MetadataImage, *, inactive: Iterable[int] = (),
                     active: Iterable[int] = ()) -> IsActive:
    """Who may lead/join ISRs once the batch being built is applied: the image, with
    ``inactive`` brokers being fenced/shut down and ``active`` ones unfenced in it."""
    brokers = image.cluster.brokers
    inactive_set, active_set = frozenset(inactive), frozenset(active)

    def is_active(broker_id: int) -> bool:
        if broker_id in inactive_set:
            return False
        if broker_id in active_set:
            return True
        b = brokers.get(broker_id)
        return b is not None and b.is_active
    return is_active


def unclean_election_enabled(image: MetadataImage, topic: str,
                             config: ControllerConfig) -> bool:
    """unclean.leader.election.enable: topic config, then cluster-wide broker config,
    then the static default (Kafka's order, minus per-node overrides on controllers)."""
    for source in (image.configs.topic(topic), image.configs.cluster_default()):
        value = source.get("unclean.leader.election.enable")
        if value is not None:
            parsed = parse_bool(value)
            if parsed is not None:
                return parsed
    return config.unclean_leader_election_enable


def elr_for_topic(image: MetadataImage, topic: str,
                  unclean_shutdown: Iterable[int] = ()) -> Elr | None:
    """Eligible leader replicas for ``topic``'s changes, if the cluster has them on; the
    topic's min.insync.replicas (topic config, then cluster default, then Kafka's 1)."""
    if not elr_enabled(image):
        return None
    min_isr = 1
    for source in (image.configs.topic(topic), image.configs.cluster_default()):
        value = source.get("min.insync.replicas")
        if value is not None:
            try:
                min_isr = max(1, int(value))
            except ValueError:
                continue
            break
    return Elr(min_isr, frozenset(unclean_shutdown))


def election_for_topic(image: MetadataImage, topic: str, config: ControllerConfig) -> Election:
    return Election.UNCLEAN if unclean_election_enabled(image, topic, config) \
        else Election.ONLINE


def _index(image: MetadataImage, index: BrokersToPartitions | None) -> BrokersToPartitions:
    """The caller's index of ``image``, or one built from it (a full scan)."""
    return BrokersToPartitions.from_image(image) if index is None else index


def broker_load(image: MetadataImage, index: BrokersToPartitions | None = None) -> BrokerLoad:
    return _index(image, index).broker_load()


def broker_leads_any(image: MetadataImage, broker_id: int,
                     index: BrokersToPartitions | None = None) -> bool:
    return _index(image, index).leads_any(broker_id)


def validate_topic_name(name: str) -> str | None:
    """Kafka's Topic.validate wording, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        return (f"Topic name is illegal, it can't be longer than {TOPIC_NAME_LENGTH_MAX} "
                f"characters, topic name: {name}")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                f"ASCII alphanumerics, '.', '_' and '-'")
    return None


def _collision_key(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
    return name.replace(".", "_")


# A name with up to this many '.' or '_' is checked by looking up each spelling that
# collides with it (2**n lookups); one with more has the request key every topic once.
_COLLISION_LOOKUPS_MAX_SEPARATORS = 6


class _TopicNameCollisions:
    """Finds another topic, existing or created earlier in the request, whose name differs
    from a new one only by '.' against '_'; in time that grows with the request, not with
    the cluster's topics (keying 100k names took every CreateTopics request ~23 ms). At
    worst, a name with many separators, the existing topics are keyed once per request,
    as they always were before."""

    def __init__(self, existing: Mapping[str, Any]) -> None:
        self.existing = existing
        self.created: dict[str, str] = {}           # collision key -> a topic created here
        self._keyed: dict[str, str] | None = None   # every existing topic's key, if needed

    def find(self, name: str) -> str | None:
        """The colliding topic's name; ``name`` itself is not in ``existing``."""
        key = _collision_key(name)
        other = self.created.get(key)
        if other is not None:
            return other
        separators = [i for i, c in enumerate(name) if c in "._"]
        if not separators:
            return None             # only ``name`` itself would collide with it
        if len(separators) > _COLLISION_LOOKUPS_MAX_SEPARATORS:
            if self._keyed is None:
                self._keyed = {_collision_key(n): n for n in self.existing}
            return self._keyed.get(key)
        spelling = list(name)
        for choice in range(1 << len(separators)):
            for bit, i in enumerate(separators):
                spelling[i] = "." if choice >> bit & 1 else "_"
            candidate = "".join(spelling)
            if candidate in self.existing:
                return candidate
        return None

    def add(self, name: str) -> None:
        self.created[_collision_key(name)] = name


def new_topic_id(rng: random.Random, taken: Callable[[uuid.UUID], bool]) -> uuid.UUID:
    while True:
        tid = uuid.UUID(int=rng.getrandbits(128), version=4)
        # Kafka's Uuid.randomUuid also re-rolls ids whose base64 form starts with '-'.
        if tid not in RESERVED_TOPIC_IDS and tid.bytes[0] >> 2 != 62 and not taken(tid):
            return tid


def _active_brokers(image: MetadataImage) -> list[PlacementBroker]:
    return [PlacementBroker(b.broker_id, b.rack)
            for _, b in sorted(image.cluster.brokers.items()) if b.is_active]


def _partition_record(topic_id: uuid.UUID, index: int, replicas: Sequence[int],
                      is_active: IsActive) -> messages.PartitionRecord:
    isr = [r for r in replicas if is_active(r)]
    assert isr, "placement and manual assignment checks guarantee an active replica"
    return messages.PartitionRecord(
        partition_id=index, topic_id=topic_id, replicas=list(replicas), isr=isr,
        leader=isr[0], leader_recovery_state=int(LeaderRecoveryState.RECOVERED),
        leader_epoch=0, partition_epoch=0)


def _check_manual_replicas(image: MetadataImage, index: int,
                           replicas: Sequence[int], is_active: IsActive) -> str | None:
    if not replicas:
        return f"The manual partition assignment for partition {index} is empty."
    seen = set()
    for b in replicas:
        if b in seen:
            return (f"The manual partition assignment for partition {index} includes "
                    f"broker {b} more than once.")
        seen.add(b)
        if image.cluster.get(b) is None:
            return (f"The manual partition assignment for partition {index} includes "
                    f"broker {b}, but no such broker is registered.")
    if not any(is_active(b) for b in replicas):
        return (f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown.")
    return None


def _rf_unreachable(rf: int, active: int) -> str:
    return (f"Unable to replicate the partition {rf} time(s): The target replication factor "
            f"of {rf} cannot be reached because only {active} broker(s) are active "
            f"(registered, unfenced and not shutting down).")


# ---------------------------------------------------------------- CreateTopics

def _check_topic_configs(image: MetadataImage, configs: Sequence[Any],
                         remote_storage_system_enable: bool) -> tuple[ErrorCode, str] | None:
    seen = set()
    for c in configs:
        if c.name in seen:
            return ErrorCode.INVALID_REQUEST, f"Duplicate config name: {c.name}"
        seen.add(c.name)
        if c.value is None:
            return (ErrorCode.INVALID_REQUEST,
                    f"Null value not supported for topic configs: {c.name}")
        defn = TOPIC_CONFIGS.get(c.name)
        if defn is None:
            return ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}"
        error = validate_value(defn, c.value)
        if error is not None:
            return ErrorCode.INVALID_CONFIG, error
    # Issue 21: the ketch.mirror.* configs are judged together.
    mirror_problem = mirror_config_problem({c.name: c.value for c in configs},
                                           lambda link: cluster_link(image, link) is not None)
    if mirror_problem is not None:
        return ErrorCode.INVALID_CONFIG, mirror_problem
    tiered_problem = tiered_storage_problem({c.name: c.value for c in configs}, None,
                                            remote_storage_system_enable)
    if tiered_problem is not None:
        return ErrorCode.INVALID_CONFIG, tiered_problem
    return None


def create_topics(image: MetadataImage, request: messages.CreateTopicsRequest, config: ControllerConfig,
                  rng: random.Random, load: Callable[[], BrokerLoad],
                  partitions_per_request_max: int
                  ) -> ControllerResult[messages.CreateTopicsResponse]:
    """``load`` gives the image's BrokerLoad (the caller may cache it per image)."""
    Result = messages.CreateTopicsResponse.CreatableTopicResult
    results: list[Any] = []
    records: list[Any] = []
    counts = Counter(t.name for t in request.topics)
    collisions = _TopicNameCollisions(image.topics.by_name)
    active = _active_brokers(image)
    is_active = active_predicate(image)
    layers = ConfigLayers(image.configs)
    new_ids: set[uuid.UUID] = set()
    scratch: BrokerLoad | None = None
    partitions_left = partitions_per_request_max

    def fail(name: str, code: ErrorCode, message: str) -> None:
        results.append(Result(name=name, error_code=int(code), error_message=message))

    for t in request.topics:
        name = t.name
        if counts[name] > 1:
            fail(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            continue
        bad_name = validate_topic_name(name)
        if bad_name is not None:
            fail(name, ErrorCode.INVALID_TOPIC_EXCEPTION, bad_name)
            continue
        if name in image.topics.by_name:
            fail(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            continue
        other = collisions.find(name)
        if other is not None:
            fail(name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                 f"Topic '{name}' collides with existing topic: {other}")
            continue
        bad_config = _check_topic_configs(image, t.configs, config.remote_log_storage_system_enable)
        if bad_config is not None:
            fail(name, *bad_config)
            continue

        assignments: list[tuple[int, ...]]
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                fail(name, ErrorCode.INVALID_REQUEST,
                     "A manual partition assignment was specified, but numPartitions or "
                     "replicationFactor was not set to -1.")
                continue
            by_index = {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
            if sorted(by_index) != list(range(len(t.assignments))):
                fail(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                     "The manual partition assignment must use the partition indexes "
                     "0, 1, ... without gaps or duplicates.")
                continue
            assignments = [by_index[i] for i in range(len(by_index))]
            error = None
            for i, replicas in enumerate(assignments):
                error = _check_manual_replicas(image, i, replicas, is_active)
                if error is not None:
                    break
            if error is None and len({len(r) for r in assignments}) > 1:
                error = ("All partitions in the manual partition assignment must have the "
                         "same number of replicas.")
            if error is not None:
                fail(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            if len(assignments) > partitions_left:
                fail(name, ErrorCode.INVALID_PARTITIONS,
                     f"Creating {len(assignments)} partitions would exceed the limit of "
                     f"{partitions_per_request_max} new partitions per request.")
                continue
            rf = len(assignments[0])
        else:
            n = config.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = config.default_replication_factor if t.replication_factor == -1 \
                else t.replication_factor
            if n <= 0:
                fail(name, ErrorCode.INVALID_PARTITIONS,
                     "Number of partitions was set to an invalid non-positive value.")
                continue
            if n > partitions_left:
                fail(name, ErrorCode.INVALID_PARTITIONS,
                     f"Creating {n} partitions would exceed the limit of "
                     f"{partitions_per_request_max} new partitions per request.")
                continue
            if rf <= 0:
                fail(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                     "Replication factor must be larger than 0, or -1 to use the default "
                     "value.")
                continue
            if rf > len(active):
                fail(name, ErrorCode.INVALID_REPLICATION_FACTOR, _rf_unreachable(rf, len(active)))
                continue
            if scratch is None:
                scratch = load().copy()
            assignments = place_partitions(active, n, rf, scratch, rng)
        partitions_left -= len(assignments)

        # _check_topic_configs refused null values above
        topic_configs = {c.name: c.value for c in t.configs if c.value is not None}
        topic_id = ZERO_UUID
        if not request.validate_only:
            topic_id = new_topic_id(rng, lambda u: u in image.topics.by_id or u in new_ids)
            new_ids.add(topic_id)
            records.append(messages.TopicRecord(name=name, topic_id=topic_id))
            for key in sorted(topic_configs):
                records.append(messages.ConfigRecord(
                    resource_type=int(ConfigResourceType.TOPIC), resource_name=name,
                    name=key, value=topic_configs[key]))
            for i, replicas in enumerate(assignments):
                records.append(_partition_record(topic_id, i, replicas, is_active))
        collisions.add(name)
        results.append(Result(
            name=name, topic_id=topic_id, error_code=0, error_message=None,
            num_partitions=len(assignments), replication_factor=rf,
            configs=_created_topic_configs(layers, name, topic_configs)))
    return ControllerResult(tuple(records), messages.CreateTopicsResponse(topics=results))


def _created_topic_configs(layers: ConfigLayers, name: str, own: dict[str, str]) -> list[Any]:
    """CreateTopics' configs (v5+): the topic's own, else what the cluster-wide layers give
    (the controller has no broker's server.properties; brokers' DescribeConfigs does)."""
    out = []
    for key in sorted(TOPIC_CONFIGS):
        entry = layers.topic_entry(name, key)
        assert entry is not None
        value, source = (own[key], ConfigSource.DYNAMIC_TOPIC_CONFIG) if key in own else \
            (entry.value, entry.source)
        out.append(messages.CreateTopicsResponse.CreatableTopicConfigs(
            name=key, value=value, read_only=False, config_source=int(source),
            is_sensitive=entry.sensitive))
    return out


# ---------------------------------------------------------------- DeleteTopics

def delete_topics(image: MetadataImage,
                  request: Any) -> ControllerResult[messages.DeleteTopicsResponse]:
    Result = messages.DeleteTopicsResponse.DeletableTopicResult
    # v6+ names topics by name or id in `topics`; v0-5 by name in `topic_names`.
    if request.topics:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in request.topic_names]
    resolved: list[tuple[Any, TopicImage | None, ErrorCode, str | None]] = []
    for name, topic_id in wanted:
        if name is not None and topic_id != ZERO_UUID:
            resolved.append((name, None, ErrorCode.INVALID_REQUEST,
                             "A topic must be named by its name or its id, not both."))
        elif name is not None:
            t = image.topics.get(name)
            if t is None:
                resolved.append((name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition."))
            else:
                resolved.append((name, t, ErrorCode.NONE, None))
        else:
            t = image.topics.get_by_id(topic_id)
            if t is None:
                resolved.append((topic_id, None, ErrorCode.UNKNOWN_TOPIC_ID,
                                 "This server does not host this topic ID."))
            else:
                resolved.append((topic_id, t, ErrorCode.NONE, None))
    counts = Counter(t.topic_id for _, t, _, _ in resolved if t is not None)
    records = []
    results = []
    for key, t, code, message in resolved:
        if t is not None and counts[t.topic_id] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in the request."
        if t is not None and code == ErrorCode.NONE:
            records.append(messages.RemoveTopicRecord(topic_id=t.topic_id))
        if t is not None:
            results.append(Result(name=t.name, topic_id=t.topic_id, error_code=int(code),
                                  error_message=message))
        elif isinstance(key, uuid.UUID):
            results.append(Result(name=None, topic_id=key, error_code=int(code),
                                  error_message=message))
        else:
            results.append(Result(name=key, error_code=int(code), error_message=message))
    return ControllerResult(tuple(records), messages.DeleteTopicsResponse(responses=results))


# ---------------------------------------------------------------- CreatePartitions

def create_partitions(image: MetadataImage, request: messages.CreatePartitionsRequest, config: ControllerConfig,
                      rng: random.Random, load: Callable[[], BrokerLoad],
                      partitions_per_request_max: int
                      ) -> ControllerResult[messages.CreatePartitionsResponse]:
    Result = messages.CreatePartitionsResponse.CreatePartitionsTopicResult
    counts = Counter(t.name for t in request.topics)
    active = _active_brokers(image)
    is_active = active_predicate(image)
    records: list[Any] = []
    results = []
    scratch: BrokerLoad | None = None
    partitions_left = partitions_per_request_max

    for t in request.topics:
        def fail(code: ErrorCode, message: str) -> None:
            results.append(Result(name=t.name, error_code=int(code), error_message=message))

        if counts[t.name] > 1:
            fail(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            continue
        topic = image.topics.get(t.name)
        if topic is None:
            fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 "This server does not host this topic-partition.")
            continue
        current = len(topic.partitions)
        if t.count < current:
            fail(ErrorCode.INVALID_PARTITIONS,
                 f"Topic currently has {current} partitions, which is higher than the "
                 f"requested {t.count}.")
            continue
        if t.count == current:
            fail(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            continue
        added = t.count - current
        if added > partitions_left:
            fail(ErrorCode.INVALID_PARTITIONS,
                 f"Creating {added} partitions would exceed the limit of "
                 f"{partitions_per_request_max} new partitions per request.")
            continue
        rf = len(topic.partitions[0].replicas)
        if t.assignments:
            if len(t.assignments) != added:
                fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                     f"Attempted to add {added} additional partition(s), but only "
                     f"{len(t.assignments)} assignment(s) were specified.")
                continue
            assignments = [tuple(a.broker_ids) for a in t.assignments]
            error = None
            for i, replicas in enumerate(assignments):
                error = _check_manual_replicas(image, current + i, replicas, is_active)
                if error is None and len(replicas) != rf:
                    error = (f"The manual partition assignment includes a partition with "
                             f"{len(replicas)} replica(s), but this is not consistent with "
                             f"previous partitions, which have {rf} replica(s).")
                if error is not None:
                    break
            if error is not None:
                fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
        else:
            if rf > len(active):
                fail(ErrorCode.INVALID_REPLICATION_FACTOR, _rf_unreachable(rf, len(active)))
                continue
            if scratch is None:
                scratch = load().copy()
            assignments = place_partitions(active, added, rf, scratch, rng)
        partitions_left -= added
        if not request.validate_only:
            for i, replicas in enumerate(assignments):
                records.append(_partition_record(topic.topic_id, current + i, replicas,
                                                 is_active))
        results.append(Result(name=t.name, error_code=0, error_message=None))
    return ControllerResult(tuple(records), messages.CreatePartitionsResponse(results=results))


# ---------------------------------------------------------------- AlterPartition

def _alter_partition_one(image: MetadataImage, request: Any, topic: TopicImage,
                         data: Any) -> tuple[Any, Any | None]:
    """(response PartitionData, record or None) for one partition of AlterPartition."""
    Data = messages.AlterPartitionResponse.PartitionData
    index = data.partition_index
    p = topic.partitions.get(index)

    def error(code: ErrorCode) -> tuple[Any, None]:
        return Data(partition_index=index, error_code=int(code)), None

    def state(q: PartitionRegistration, partition_epoch: int) -> Any:
        return Data(partition_index=index, error_code=0, leader_id=q.leader,
                    leader_epoch=q.leader_epoch, isr=list(q.isr),
                    leader_recovery_state=int(q.leader_recovery_state),
                    partition_epoch=partition_epoch)

    if p is None:
        return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if request.broker_id != p.leader:
        return error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if data.leader_epoch != p.leader_epoch:
        return error(ErrorCode.FENCED_LEADER_EPOCH)
    # v3+ sends brokers with their epochs; v0-2 bare ids (epoch -1: not checked).
    if data.new_isr_with_epochs:
        new_isr = tuple(s.broker_id for s in data.new_isr_with_epochs)
        epochs = {s.broker_id: s.broker_epoch for s in data.new_isr_with_epochs}
    else:
        new_isr = tuple(data.new_isr)
        epochs = {}
    try:
        lrs = LeaderRecoveryState(data.leader_recovery_state)
    except ValueError:
        return error(ErrorCode.INVALID_REQUEST)
    if data.partition_epoch != p.partition_epoch:
        # A retry of a change that was applied: answer with the state it produced.
        if (data.partition_epoch < p.partition_epoch and new_isr == p.isr
                and lrs == p.leader_recovery_state):
            return state(p, p.partition_epoch), None
        return error(ErrorCode.INVALID_UPDATE_VERSION)
    if lrs == LeaderRecoveryState.RECOVERING and (
            p.leader_recovery_state == LeaderRecoveryState.RECOVERED or len(new_isr) > 1):
        # A leader cannot go back to recovering, nor grow the ISR before it has recovered.
        return error(ErrorCode.INVALID_REQUEST)
    if (not new_isr or len(set(new_isr)) != len(new_isr) or p.leader not in new_isr
            or not set(new_isr).issubset(p.replicas)):
        return error(ErrorCode.INVALID_REQUEST)
    for b in new_isr:
        reg = image.cluster.get(b)
        epoch = epochs.get(b, -1)
        if reg is None or not reg.is_active or (epoch != -1 and epoch != reg.broker_epoch):
            return error(ErrorCode.INELIGIBLE_REPLICA)
    record = build_partition_change(
        topic.topic_id, index, p, is_active=active_predicate(image), target_isr=new_isr,
        target_leader_recovery_state=lrs, elr=elr_for_topic(image, topic.name))
    if record is None:
        return state(p, p.partition_epoch), None
    # The leader is in new_isr and active, so the builder kept it: only ISR/LRS changed.
    assert record.leader < 0, record
    new = PartitionRegistration(
        replicas=p.replicas, isr=new_isr, removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas, leader=p.leader, leader_recovery_state=lrs,
        leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch + 1)
    return state(new, new.partition_epoch), record


def alter_partition(image: MetadataImage,
                    request: Any) -> ControllerResult[messages.AlterPartitionResponse]:
    Response = messages.AlterPartitionResponse
    reg = image.cluster.get(request.broker_id)
    if reg is None or (request.broker_epoch != -1 and request.broker_epoch != reg.broker_epoch):
        return ControllerResult((), Response(error_code=int(ErrorCode.STALE_BROKER_EPOCH)))
    records = []
    topics = []
    seen: set[tuple[uuid.UUID, int]] = set()
    for td in request.topics:
        # v2+ names the topic by id, v0-1 by name; the response carries both.
        if td.topic_id != ZERO_UUID:
            topic = image.topics.get_by_id(td.topic_id)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = image.topics.get(td.topic_name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partitions = []
        for data in td.partitions:
            if topic is None:
                partitions.append(Response.PartitionData(partition_index=data.partition_index,
                                                         error_code=int(missing)))
                continue
            key = (topic.topic_id, data.partition_index)
            if key in seen:
                partitions.append(Response.PartitionData(
                    partition_index=data.partition_index,
                    error_code=int(ErrorCode.INVALID_REQUEST)))
                continue
            seen.add(key)
            result, record = _alter_partition_one(image, request, topic, data)
            partitions.append(result)
            if record is not None:
                records.append(record)
        topics.append(Response.TopicData(
            topic_name=topic.name if topic is not None else td.topic_name,
            topic_id=topic.topic_id if topic is not None else td.topic_id,
            partitions=partitions))
    return ControllerResult(tuple(records), Response(error_code=0, topics=topics))


# ---------------------------------------------------------------- elections

def changes_for_leaving_brokers(image: MetadataImage, leaving: Sequence[int],
                                is_active: IsActive, config: ControllerConfig,
                                index: BrokersToPartitions | None = None,
                                limit: int | None = None,
                                unclean_shutdown: Sequence[int] = ()) -> list[Any]:
    """Remove ``leaving`` brokers (being fenced, shutting down or re-registering) from
    every ISR and move their leaderships, electing uncleanly only where allowed. Looks
    only at the partitions the leaving brokers lead or are in the ISR of (``index``),
    the led ones first; at most ``limit`` records (the rest: call again after commit).
    ``unclean_shutdown``: brokers back from an unclean stop, which also leave every
    eligible leader replica set (KIP-966)."""
    records: list[Any] = []
    elections: dict[uuid.UUID, Election] = {}
    elrs: dict[uuid.UUID, Elr | None] = {}
    topic_id_seen: uuid.UUID | None = None
    partitions = _index(image, index)
    keys = partitions.partitions_of(leaving)
    if unclean_shutdown and elr_enabled(image):
        seen = set(keys)
        keys += [k for k in partitions.eligible_in(unclean_shutdown) if k not in seen]
    for topic_id, index_ in keys:
        if topic_id is not topic_id_seen:
            # Keys come grouped by topic (sharing one UUID object): look the topic up
            # once per run of its partitions, not once per partition.
            topic_id_seen = topic_id
            t = image.topics.by_id[topic_id]
            if topic_id not in elections:
                elections[topic_id] = election_for_topic(image, t.name, config)
                elrs[topic_id] = elr_for_topic(image, t.name, unclean_shutdown)
            election = elections[topic_id]
            elr = elrs[topic_id]
        p = t.partitions[index_]
        record = build_partition_change(
            topic_id, index_, p, is_active=is_active,
            target_isr=remove_from_isr(p.isr, leaving, allow_empty=elr is not None),
            election=election, elr=elr)
        if record is not None:
            records.append(record)
            if limit is not None and len(records) >= limit:
                break
    return records


def changes_for_leaderless_partitions(image: MetadataImage, is_active: IsActive,
                                      config: ControllerConfig,
                                      limit: int | None = None,
                                      index: BrokersToPartitions | None = None) -> list[Any]:
    """Elect leaders for partitions that have none (after a broker comes back)."""
    records: list[Any] = []
    elections: dict[uuid.UUID, Election] = {}
    for topic_id, i in _index(image, index).leaderless():
        t = image.topics.by_id[topic_id]
        p = t.partitions[i]
        assert p.leader == NO_LEADER, (topic_id, i, p)
        election = elections.get(topic_id)
        if election is None:
            election = elections[topic_id] = election_for_topic(image, t.name, config)
        record = build_partition_change(topic_id, i, p, is_active=is_active,
                                        election=election, elr=elr_for_topic(image, t.name))
        if record is not None:
            records.append(record)
            if limit is not None and len(records) >= limit:
                return records
    return records


def changes_for_preferred_leaders(image: MetadataImage, is_active: IsActive, limit: int,
                                  index: BrokersToPartitions | None = None) -> list[Any]:
    """Move leadership back to preferred replicas that are in the ISR and active
    (Kafka's periodic preferred-leader election, auto.leader.rebalance.enable). Looks
    only at partitions not led by their preferred replica (Kafka's imbalancedPartitions)."""
    records: list[Any] = []
    for topic_id, i in _index(image, index).imbalanced():
        p = image.topics.by_id[topic_id].partitions[i]
        preferred = p.replicas[0]
        assert p.leader not in (NO_LEADER, preferred), (topic_id, i, p)
        if preferred not in p.isr or not is_active(preferred):
            continue
        record = build_partition_change(topic_id, i, p, is_active=is_active,
                                        election=Election.PREFERRED,
                                        elr=elr_for_topic(image, image.topics.by_id[topic_id].name))
        if record is not None:
            records.append(record)
            if len(records) >= limit:
                return records
    return records
