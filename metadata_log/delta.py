"""`MetadataDelta`: replay metadata records on top of an image, then apply them.

Theory of operation
-------------------
``MetadataDelta(image)`` starts empty. ``replay(record)`` takes one record, checks it
against the image *as changed by the records replayed so far*, and remembers its effect
in small overlays (changed brokers, changed topics with only their changed partitions,
changed config resources...). ``apply(provenance)`` builds the next ``MetadataImage``
from the base image and the overlays, copying only what changed (see image.py), and may be
called any number of times. Every accepted record also appends typed *changes* to
``changes`` ("partition t-3: broker 2 is now leader at epoch 7"), in log order, for
brokers to act on without diffing images.

A record that contradicts the state (a partition of an unknown topic, a second topic of
the same name, a broker epoch that is not the registered one, producer ids going
backwards, an ISR that is not a subset of the replicas, a record type Ketch does not
model) raises ``MetadataReplayError`` and leaves the delta exactly as it was before that
record. Such records never come from a correct controller deciding on committed state;
they come from a duplicated append (a Raft retry that applied twice) or a damaged log.
``replay_batch`` uses this to apply a committed batch all-or-nothing: every replica of
the log makes the same decision, so controllers and observers stay identical.

Record semantics follow Kafka's ``MetadataDelta``/``PartitionRegistration.merge``:
PartitionChangeRecord's Leader is LEADER_UNCHANGED (-2) for no change, and any other
value (even the current leader) bumps the leader epoch; every PartitionChangeRecord bumps
the partition epoch; RemoveTopicRecord also drops the topic's configs; ConfigRecord with a
null value deletes the key; FeatureLevelRecord with level 0 removes the feature.

Not here: deciding which records to write (quorum.controller).
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, Union

from clients.frozen import fast_init
from clients.protocol import messages
from clients.protocol.types import ZERO_UUID
from metadata_log.acls import StandardAcl, acl_from_record
from clients.security.scram import BY_WIRE_TYPE, ScramCredential
from metadata_log.image import (
    NO_LEADER, LEADER_UNCHANGED, BrokerFeatureRange, BrokerRegistration, ClusterImage,
    ClientQuotasImage, ScramImage, ConfigResource, ConfigResourceType, ConfigsImage, Endpoint, FeaturesImage,
    LeaderRecoveryState, MetadataImage, PartitionRegistration, ProducerIdsImage, Provenance,
    QuotaEntity, TopicImage, TopicsImage, frozen_mapping, quota_entity,
)

__all__ = [
    "BatchOutcome", "BrokerControlledShutdown", "BrokerFenced", "BrokerRegistered",
    "BrokerUnfenced", "BrokerUnregistered", "ConfigChange", "ElrChange", "FeatureLevelChange",
    "IsrChange",
    "LeaderChange", "LeaderRecoveryChange", "MetadataChange", "MetadataDelta",
    "MetadataReplayError", "PartitionCreated", "ProducerIdsAllocated", "ReplicasChange",
    "TopicCreated", "TopicDeleted", "replay_batch",
]


class MetadataReplayError(ValueError):
    """A record that cannot be applied to the state it meets (see the module docstring)."""


# ---------------------------------------------------------------- typed changes
# The per-partition ones are built for every partition record replayed: fast_init
# (clients/frozen.py) stores their fields through the slots, not object.__setattr__.

@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    fenced: bool


@dataclass(frozen=True, slots=True)
class BrokerUnregistered:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerFenced:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerUnfenced:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerControlledShutdown:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    topic: str
    topic_id: uuid.UUID


@fast_init
@dataclass(frozen=True, slots=True)
class PartitionCreated:
    topic: str
    topic_id: uuid.UUID
    partition: int
    registration: PartitionRegistration


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderChange:
    topic: str
    topic_id: uuid.UUID
    partition: int
    leader: int              # NO_LEADER when the partition went offline
    leader_epoch: int


@fast_init
@dataclass(frozen=True, slots=True)
class IsrChange:
    topic: str
    topic_id: uuid.UUID
    partition: int
    isr: tuple[int, ...]
    partition_epoch: int


@fast_init
@dataclass(frozen=True, slots=True)
class ReplicasChange:
    topic: str
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderRecoveryChange:
    topic: str
    topic_id: uuid.UUID
    partition: int
    leader_recovery_state: LeaderRecoveryState


@dataclass(frozen=True, slots=True)
class ConfigChange:
    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str | None        # None: the key was deleted


@dataclass(frozen=True, slots=True)
class ProducerIdsAllocated:
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@fast_init
@dataclass(frozen=True, slots=True)
class ElrChange:
    """KIP-966: the eligible leader replicas or the last known ones changed."""
    topic: str
    topic_id: uuid.UUID
    partition: int
    eligible_leader_replicas: tuple[int, ...]
    last_known_elr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FeatureLevelChange:
    name: str
    level: int               # 0: the feature was removed


MetadataChange = Union[
    BrokerRegistered, BrokerUnregistered, BrokerFenced, BrokerUnfenced,
    BrokerControlledShutdown, TopicCreated, TopicDeleted, PartitionCreated, LeaderChange,
    IsrChange, ReplicasChange, LeaderRecoveryChange, ElrChange, ConfigChange,
    ProducerIdsAllocated, FeatureLevelChange,
]


# ---------------------------------------------------------------- the delta

@dataclass(slots=True)
class _TopicDelta:
    name: str
    topic_id: uuid.UUID
    base: TopicImage | None                  # None: created in this delta
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)

    def get(self, index: int) -> PartitionRegistration | None:
        p = self.partitions.get(index)
        if p is None and self.base is not None:
            p = self.base.partitions.get(index)
        return p


_MISSING = object()


def _check_partition(p: PartitionRegistration, what: Callable[[], str]) -> None:
    """Structural invariants of a partition; a violation means a bad record."""
    replicas, isr = p.replicas, p.isr
    replica_set = set(replicas)
    isr_set = set(isr)
    # An empty ISR only with no leader: KIP-966's ISR after its last member left, the
    # eligible leader replicas then holding the committed records.
    if (not replicas or len(replica_set) != len(replicas) or (not isr and p.leader != NO_LEADER)
            or len(isr_set) != len(isr) or not isr_set <= replica_set
            or (p.leader != NO_LEADER and p.leader not in isr_set)
            or p.leader_epoch < 0 or p.partition_epoch < 0):
        raise MetadataReplayError(
            f"{what()}: replicas {replicas}, isr {isr}, leader {p.leader}, epochs "
            f"{p.leader_epoch}/{p.partition_epoch} break the partition invariants")


def _recovery_state(value: int, what: Callable[[], str]) -> LeaderRecoveryState:
    if value == 0:
        return LeaderRecoveryState.RECOVERED
    if value == 1:
        return LeaderRecoveryState.RECOVERING
    raise MetadataReplayError(f"{what()}: leader_recovery_state {value}")


class MetadataDelta:
    """Records replayed on top of ``image``, not yet applied (see the module docstring)."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.changes: list[MetadataChange] = []
        # Overlays over `image`; each holds only what this delta touched.
        self._brokers: dict[int, BrokerRegistration | None] = {}     # None: unregistered
        self._topics: dict[uuid.UUID, _TopicDelta] = {}              # created or changed
        self._removed_topics: dict[uuid.UUID, TopicImage] = {}       # removed from `image`
        self._names: dict[str, uuid.UUID | None] = {}                # None: name freed
        self._configs: dict[ConfigResource, dict[str, str]] = {}     # full new mapping
        self._features: dict[str, int] = {}                          # 0: removed
        self._next_producer_id: int | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}        # full new mapping
        self._acls: dict[uuid.UUID, StandardAcl | None] = {}         # None: removed
        self._scram: dict[tuple[str, int], ScramCredential | None] = {}  # None: removed
        # The topic the last record touched: partition records come grouped by topic, and
        # share one UUID object (records.py), so most lookups are an identity test instead
        # of UUID's Python-level __hash__.
        self._last_topic: _TopicDelta | None = None
        self._replayers = {
            messages.RegisterBrokerRecord: self._replay_register_broker,
            messages.UnregisterBrokerRecord: self._replay_unregister_broker,
            messages.TopicRecord: self._replay_topic,
            messages.PartitionRecord: self._replay_partition,
            messages.ConfigRecord: self._replay_config,
            messages.PartitionChangeRecord: self._replay_partition_change,
            messages.FenceBrokerRecord: self._replay_fence_broker,
            messages.UnfenceBrokerRecord: self._replay_unfence_broker,
            messages.RemoveTopicRecord: self._replay_remove_topic,
            messages.FeatureLevelRecord: self._replay_feature_level,
            messages.ProducerIdsRecord: self._replay_producer_ids,
            messages.BrokerRegistrationChangeRecord: self._replay_broker_registration_change,
            messages.NoOpRecord: self._replay_no_op,
            messages.ClientQuotaRecord: self._replay_client_quota,
            messages.AccessControlEntryRecord: self._replay_access_control_entry,
            messages.RemoveAccessControlEntryRecord: self._replay_remove_access_control_entry,
            messages.UserScramCredentialRecord: self._replay_user_scram_credential,
            messages.RemoveUserScramCredentialRecord: self._replay_remove_user_scram_credential,
        }

    # ------------------------------------------------------------ lookups through overlays

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        b = self._brokers.get(broker_id, _MISSING)
        if b is _MISSING:
            return self.image.cluster.brokers.get(broker_id)
        return b  # type: ignore[return-value]

    def topic_id(self, name: str) -> uuid.UUID | None:
        tid = self._names.get(name, _MISSING)
        if tid is _MISSING:
            t = self.image.topics.by_name.get(name)
            return None if t is None else t.topic_id
        return tid  # type: ignore[return-value]

    def _topic(self, topic_id: uuid.UUID) -> _TopicDelta | None:
        last = self._last_topic
        if last is not None and last.topic_id is topic_id:
            return last
        td = self._topics.get(topic_id)
        if td is None:
            if topic_id in self._removed_topics:
                return None
            base = self.image.topics.by_id.get(topic_id)
            if base is None:
                return None
            td = self._topics[topic_id] = _TopicDelta(base.name, topic_id, base)
        self._last_topic = td
        return td

    def partition(self, topic_id: uuid.UUID, index: int) -> PartitionRegistration | None:
        td = self._topics.get(topic_id)
        if td is not None:
            return td.get(index)
        if topic_id in self._removed_topics:
            return None
        return self.image.topics.partition(topic_id, index)

    def _config_mapping(self, resource: ConfigResource) -> dict[str, str]:
        m = self._configs.get(resource)
        if m is None:
            m = self._configs[resource] = dict(self.image.configs.resources.get(resource, {}))
        return m

    # ------------------------------------------------------------ replay

    def replay(self, record: Any) -> None:
        """Replay one record; MetadataReplayError leaves the delta unchanged."""
        replayer = self._replayers.get(type(record))
        if replayer is None:
            raise MetadataReplayError(
                f"{type(record).__name__} is not a record type Ketch's metadata image models")
        replayer(record)

    def _replay_no_op(self, record: Any) -> None:
        pass

    def _replay_register_broker(self, r: Any) -> None:
        existing = self.broker(r.broker_id)
        if existing is not None:
            if r.broker_epoch < existing.broker_epoch:
                raise MetadataReplayError(
                    f"broker {r.broker_id}: registration epoch {r.broker_epoch} is older than "
                    f"the registered {existing.broker_epoch}")
            if (r.broker_epoch == existing.broker_epoch
                    and r.incarnation_id != existing.incarnation_id):
                raise MetadataReplayError(
                    f"broker {r.broker_id}: two incarnations with epoch {r.broker_epoch}")
        reg = BrokerRegistration(
            broker_id=r.broker_id,
            incarnation_id=r.incarnation_id,
            broker_epoch=r.broker_epoch,
            endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol)
                            for e in r.end_points),
            features=tuple(BrokerFeatureRange(f.name, f.min_supported_version,
                                              f.max_supported_version) for f in r.features),
            rack=r.rack,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            is_migrating_zk_broker=r.is_migrating_zk_broker,
            log_dirs=tuple(r.log_dirs),
        )
        self._brokers[r.broker_id] = reg
        self.changes.append(BrokerRegistered(r.broker_id, r.broker_epoch, r.incarnation_id,
                                             r.fenced))

    def _registered(self, broker_id: int, broker_epoch: int, what: str) -> BrokerRegistration:
        b = self.broker(broker_id)
        if b is None:
            raise MetadataReplayError(f"{what}: broker {broker_id} is not registered")
        if b.broker_epoch != broker_epoch:
            raise MetadataReplayError(
                f"{what}: broker {broker_id} has epoch {b.broker_epoch}, not {broker_epoch}")
        return b

    def _replay_unregister_broker(self, r: Any) -> None:
        self._registered(r.broker_id, r.broker_epoch, "UnregisterBrokerRecord")
        self._brokers[r.broker_id] = None
        self.changes.append(BrokerUnregistered(r.broker_id, r.broker_epoch))

    def _set_fenced(self, b: BrokerRegistration, fenced: bool) -> None:
        if b.fenced == fenced:
            return
        self._brokers[b.broker_id] = _replace_broker(b, fenced=fenced)
        cls = BrokerFenced if fenced else BrokerUnfenced
        self.changes.append(cls(b.broker_id, b.broker_epoch))

    def _replay_fence_broker(self, r: Any) -> None:
        self._set_fenced(self._registered(r.id, r.epoch, "FenceBrokerRecord"), True)

    def _replay_unfence_broker(self, r: Any) -> None:
        self._set_fenced(self._registered(r.id, r.epoch, "UnfenceBrokerRecord"), False)

    def _replay_broker_registration_change(self, r: Any) -> None:
        what = "BrokerRegistrationChangeRecord"
        b = self._registered(r.broker_id, r.broker_epoch, what)
        # Fenced: -1 unfence, 0 no change, 1 fence. InControlledShutdown: 0 none, 1 enter.
        if r.fenced not in (-1, 0, 1) or r.in_controlled_shutdown not in (0, 1):
            raise MetadataReplayError(f"{what}: bad fenced={r.fenced} or "
                                      f"in_controlled_shutdown={r.in_controlled_shutdown}")
        if r.log_dirs:
            b = _replace_broker(b, log_dirs=tuple(r.log_dirs))
            self._brokers[b.broker_id] = b
        if r.fenced != 0:
            self._set_fenced(b, r.fenced == 1)
            b = self.broker(r.broker_id)  # type: ignore[assignment]
        if r.in_controlled_shutdown == 1 and not b.in_controlled_shutdown:
            self._brokers[b.broker_id] = _replace_broker(b, in_controlled_shutdown=True)
            self.changes.append(BrokerControlledShutdown(b.broker_id, b.broker_epoch))

    def _replay_topic(self, r: Any) -> None:
        if r.topic_id == ZERO_UUID:
            raise MetadataReplayError(f"TopicRecord {r.name!r}: zero topic id")
        if self.topic_id(r.name) is not None:
            raise MetadataReplayError(f"TopicRecord: topic {r.name!r} already exists")
        if self._topic(r.topic_id) is not None:
            raise MetadataReplayError(f"TopicRecord: topic id {r.topic_id} already exists")
        self._topics[r.topic_id] = _TopicDelta(r.name, r.topic_id, None)
        self._names[r.name] = r.topic_id
        self.changes.append(TopicCreated(r.name, r.topic_id))

    def _replay_partition(self, r: Any) -> None:
        td = self._topic(r.topic_id)

        def what() -> str:
            return f"PartitionRecord {r.topic_id}-{r.partition_id}"
        if td is None:
            raise MetadataReplayError(f"{what()}: unknown topic")
        if r.partition_id < 0:
            raise MetadataReplayError(f"{what()}: negative partition id")
        if td.get(r.partition_id) is not None:
            # Stricter than Kafka, which overwrites: Ketch's controller never writes a
            # partition twice, so a second one is a duplicated append.
            raise MetadataReplayError(f"{what()}: partition already exists")
        lrs = _recovery_state(r.leader_recovery_state, what)
        p = PartitionRegistration(
            replicas=_broker_ids(r.replicas), isr=_broker_ids(r.isr),
            removing_replicas=tuple(r.removing_replicas),
            adding_replicas=tuple(r.adding_replicas),
            leader=r.leader, leader_recovery_state=lrs, leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch, directories=tuple(r.directories),
            eligible_leader_replicas=_opt_tuple(r.eligible_leader_replicas),
            last_known_elr=_opt_tuple(r.last_known_elr),
        )
        _check_partition(p, what)
        td.partitions[r.partition_id] = p
        self.changes.append(PartitionCreated(td.name, td.topic_id, r.partition_id, p))

    def _replay_partition_change(self, r: Any) -> None:
        td = self._topic(r.topic_id)

        def what() -> str:
            return f"PartitionChangeRecord {r.topic_id}-{r.partition_id}"
        if td is None:
            raise MetadataReplayError(f"{what()}: unknown topic")
        old = td.get(r.partition_id)
        if old is None:
            raise MetadataReplayError(f"{what()}: unknown partition")
        replicas = old.replicas if r.replicas is None else _broker_ids(r.replicas)
        directories = old.directories
        if r.directories is not None:
            directories = tuple(r.directories)
        elif replicas != old.replicas:
            directories = ()       # the new replicas' directories are not known yet
        if r.leader == LEADER_UNCHANGED:
            leader, leader_epoch = old.leader, old.leader_epoch
        elif r.leader < NO_LEADER:
            raise MetadataReplayError(f"{what()}: leader {r.leader}")
        else:
            leader, leader_epoch = r.leader, old.leader_epoch + 1
        lrs = old.leader_recovery_state
        if r.leader_recovery_state != -1:
            lrs = _recovery_state(r.leader_recovery_state, what)
        new = PartitionRegistration(
            replicas=replicas,
            isr=old.isr if r.isr is None else _broker_ids(r.isr),
            removing_replicas=(old.removing_replicas if r.removing_replicas is None
                               else tuple(r.removing_replicas)),
            adding_replicas=(old.adding_replicas if r.adding_replicas is None
                             else tuple(r.adding_replicas)),
            leader=leader, leader_recovery_state=lrs, leader_epoch=leader_epoch,
            partition_epoch=old.partition_epoch + 1, directories=directories,
            eligible_leader_replicas=(old.eligible_leader_replicas
                                      if r.eligible_leader_replicas is None
                                      else tuple(r.eligible_leader_replicas)),
            last_known_elr=(old.last_known_elr if r.last_known_elr is None
                            else tuple(r.last_known_elr)),
        )
        _check_partition(new, what)
        td.partitions[r.partition_id] = new
        name, tid, index = td.name, td.topic_id, r.partition_id
        if (new.replicas, new.adding_replicas, new.removing_replicas) != (
                old.replicas, old.adding_replicas, old.removing_replicas):
            self.changes.append(ReplicasChange(name, tid, index, new.replicas,
                                               new.adding_replicas, new.removing_replicas))
        if new.isr != old.isr:
            self.changes.append(IsrChange(name, tid, index, new.isr, new.partition_epoch))
        if new.leader_epoch != old.leader_epoch:
            self.changes.append(LeaderChange(name, tid, index, new.leader, new.leader_epoch))
        if new.leader_recovery_state != old.leader_recovery_state:
            self.changes.append(LeaderRecoveryChange(name, tid, index,
                                                     new.leader_recovery_state))
        if (new.eligible_leader_replicas or (), new.last_known_elr or ()) != (
                old.eligible_leader_replicas or (), old.last_known_elr or ()):
            self.changes.append(ElrChange(name, tid, index, new.eligible_leader_replicas or (),
                                          new.last_known_elr or ()))

    def _replay_remove_topic(self, r: Any) -> None:
        td = self._topic(r.topic_id)
        if td is None:
            raise MetadataReplayError(f"RemoveTopicRecord: unknown topic id {r.topic_id}")
        del self._topics[r.topic_id]
        self._last_topic = None
        if td.base is not None:
            self._removed_topics[r.topic_id] = td.base
        self._names[td.name] = None
        # Kafka drops a deleted topic's configs with it (MetadataDelta.replay).
        resource = ConfigResource(ConfigResourceType.TOPIC, td.name)
        if self._config_mapping(resource):
            self._configs[resource] = {}
        self.changes.append(TopicDeleted(td.name, td.topic_id))

    def _replay_config(self, r: Any) -> None:
        try:
            rtype = ConfigResourceType(r.resource_type)
        except ValueError:
            raise MetadataReplayError(f"ConfigRecord: resource type {r.resource_type}") from None
        m = self._config_mapping(ConfigResource(rtype, r.resource_name))
        if r.value is None:
            m.pop(r.name, None)
        else:
            m[r.name] = r.value
        self.changes.append(ConfigChange(rtype, r.resource_name, r.name, r.value))

    def _replay_client_quota(self, r: Any) -> None:
        entity = quota_entity((e.entity_type, e.entity_name) for e in r.entity)
        if not entity or len({t for t, _ in entity}) != len(entity):
            raise MetadataReplayError(f"ClientQuotaRecord: entity {entity}")
        m = self._quotas.get(entity)
        if m is None:
            m = self._quotas[entity] = dict(self.image.client_quotas.entities.get(entity, {}))
        if r.remove:
            m.pop(r.key, None)
        else:
            m[r.key] = r.value

    def _acl(self, acl_id: uuid.UUID) -> StandardAcl | None:
        acl = self._acls.get(acl_id, _MISSING)
        if acl is _MISSING:
            return self.image.acls.by_id.get(acl_id)
        return acl  # type: ignore[return-value]

    def _replay_access_control_entry(self, r: Any) -> None:
        # As Kafka's AclControlManager.replay: a second ACL with one id is refused.
        if r.id == ZERO_UUID or self._acl(r.id) is not None:
            raise MetadataReplayError(f"AccessControlEntryRecord: id {r.id} is zero or taken")
        try:
            acl = acl_from_record(r)
        except ValueError as e:
            raise MetadataReplayError(f"AccessControlEntryRecord {r.id}: {e}") from None
        self._acls[r.id] = acl

    def _replay_remove_access_control_entry(self, r: Any) -> None:
        if self._acl(r.id) is None:
            raise MetadataReplayError(f"RemoveAccessControlEntryRecord: no ACL has id {r.id}")
        self._acls[r.id] = None

    def _replay_user_scram_credential(self, r: Any) -> None:
        if r.mechanism not in BY_WIRE_TYPE or not r.name:
            raise MetadataReplayError(f"UserScramCredentialRecord: mechanism {r.mechanism} for {r.name!r}")
        self._scram[(r.name, r.mechanism)] = ScramCredential(bytes(r.salt), bytes(r.stored_key),
                                                             bytes(r.server_key), r.iterations)

    def _replay_remove_user_scram_credential(self, r: Any) -> None:
        key = (r.name, r.mechanism)
        current = self._scram[key] if key in self._scram else self.image.scram.get(*key)
        if current is None:
            raise MetadataReplayError(f"RemoveUserScramCredentialRecord: {r.name!r} has no "
                                      f"credential for mechanism {r.mechanism}")
        self._scram[key] = None

    def _replay_producer_ids(self, r: Any) -> None:
        current = (self.image.producer_ids.next_producer_id if self._next_producer_id is None
                   else self._next_producer_id)
        if r.next_producer_id <= current or r.next_producer_id < 0:
            # A block must never be handed out twice (Kafka: "not monotonically increasing").
            raise MetadataReplayError(f"ProducerIdsRecord: next producer id "
                                      f"{r.next_producer_id} after {current}")
        self._next_producer_id = r.next_producer_id
        self.changes.append(ProducerIdsAllocated(r.broker_id, r.broker_epoch,
                                                 r.next_producer_id))

    def _replay_feature_level(self, r: Any) -> None:
        if r.feature_level < 0:
            raise MetadataReplayError(f"FeatureLevelRecord {r.name}: level {r.feature_level}")
        self._features[r.name] = r.feature_level
        self.changes.append(FeatureLevelChange(r.name, r.feature_level))

    # ------------------------------------------------------------ apply

    def apply(self, provenance: Provenance) -> MetadataImage:
        """The next image; shares everything this delta did not touch with ``image``."""
        base = self.image
        assert provenance.offset >= base.provenance.offset, (provenance, base.provenance)
        return MetadataImage(
            provenance=provenance,
            features=self._apply_features(base.features),
            cluster=self._apply_cluster(base.cluster),
            topics=self._apply_topics(base.topics),
            configs=self._apply_configs(base.configs),
            producer_ids=(base.producer_ids if self._next_producer_id is None
                          else ProducerIdsImage(self._next_producer_id)),
            client_quotas=self._apply_client_quotas(base.client_quotas),
            acls=base.acls.with_changes(self._acls),
            scram=self._apply_scram(base.scram),
        )

    def _apply_scram(self, base: ScramImage) -> ScramImage:
        if not self._scram:
            return base
        credentials = dict(base.credentials)
        for key, credential in self._scram.items():
            if credential is None:
                credentials.pop(key, None)
            else:
                credentials[key] = credential
        return ScramImage(frozen_mapping(credentials))

    def _apply_client_quotas(self, base: ClientQuotasImage) -> ClientQuotasImage:
        if not self._quotas:
            return base
        entities = dict(base.entities)
        for entity, m in self._quotas.items():
            if m:
                entities[entity] = frozen_mapping(dict(m))
            else:
                entities.pop(entity, None)
        return ClientQuotasImage(frozen_mapping(entities))

    def _apply_features(self, base: FeaturesImage) -> FeaturesImage:
        if not self._features:
            return base
        levels = dict(base.levels)
        for name, level in self._features.items():
            if level == 0:
                levels.pop(name, None)
            else:
                levels[name] = level
        return FeaturesImage(frozen_mapping(levels))

    def _apply_cluster(self, base: ClusterImage) -> ClusterImage:
        if not self._brokers:
            return base
        brokers = dict(base.brokers)
        for broker_id, b in self._brokers.items():
            if b is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = b
        return ClusterImage(frozen_mapping(brokers))

    def _apply_topics(self, base: TopicsImage) -> TopicsImage:
        if not self._topics and not self._removed_topics:
            return base
        by_id = dict(base.by_id)
        by_name = dict(base.by_name)
        for tid, t in self._removed_topics.items():
            del by_id[tid]
            if by_name.get(t.name) is t:
                del by_name[t.name]
        for tid, td in self._topics.items():
            if td.base is not None and not td.partitions:
                continue       # looked at, not changed: keep sharing the old TopicImage
            if td.base is None:
                partitions = dict(td.partitions)
            else:
                partitions = dict(td.base.partitions)
                partitions.update(td.partitions)
            t = TopicImage(td.name, tid, frozen_mapping(partitions))
            by_id[tid] = t
            by_name[td.name] = t
        return TopicsImage(frozen_mapping(by_id), frozen_mapping(by_name))

    def _apply_configs(self, base: ConfigsImage) -> ConfigsImage:
        if not self._configs:
            return base
        resources = dict(base.resources)
        for resource, m in self._configs.items():
            if m:
                resources[resource] = frozen_mapping(dict(m))
            else:
                resources.pop(resource, None)
        return ConfigsImage(frozen_mapping(resources))


# Replica sets and ISRs repeat across partitions (3 brokers make 6 orders of 3): one
# shared tuple per distinct value, not two per partition (128 B per partition in every
# broker's and controller's image, and in each hosted replica's state, at 100k
# partitions). Bounded: emptied when full, which only costs the sharing.
_BROKER_ID_TUPLES: dict[tuple[int, ...], tuple[int, ...]] = {}
_BROKER_ID_TUPLES_MAX = 100_000


def _broker_ids(ids: Sequence[int]) -> tuple[int, ...]:
    t = tuple(ids)
    shared = _BROKER_ID_TUPLES.get(t)
    if shared is None:
        if len(_BROKER_ID_TUPLES) >= _BROKER_ID_TUPLES_MAX:
            _BROKER_ID_TUPLES.clear()
        shared = _BROKER_ID_TUPLES[t] = t
    return shared


def _opt_tuple(v: list | None) -> tuple | None:
    return None if v is None else tuple(v)


def _replace_broker(b: BrokerRegistration, **kw: Any) -> BrokerRegistration:
    return dataclasses.replace(b, **kw)


# ---------------------------------------------------------------- whole batches

@dataclass(frozen=True, slots=True)
class BatchOutcome:
    image: MetadataImage
    changes: tuple[MetadataChange, ...]
    # None when the whole batch was applied; otherwise the reason it was skipped entirely
    # (the image then differs from the input only in its provenance).
    error: MetadataReplayError | None


def replay_batch(image: MetadataImage, records: Iterable[Any],
                 provenance: Provenance) -> BatchOutcome:
    """Apply one committed batch all-or-nothing (see the module docstring)."""
    delta = MetadataDelta(image)
    try:
        for record in records:
            delta.replay(record)
    except MetadataReplayError as e:
        skipped = MetadataDelta(image).apply(provenance)
        return BatchOutcome(skipped, (), e)
    return BatchOutcome(delta.apply(provenance), tuple(delta.changes), None)
