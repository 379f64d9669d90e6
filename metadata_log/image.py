"""`MetadataImage`: everything the cluster knows, as of one offset of the metadata log.

Theory of operation
-------------------
An image is the result of replaying the metadata log up to some offset (its
``provenance``). It never changes: a ``MetadataDelta`` (delta.py) replays more records
on top of an image and ``apply`` returns a *new* image. Controllers decide on images,
brokers serve from them, and any number of threads or coroutines may hold one while the
next is being built, so images must be cheap to keep and cheap to derive.

Cheap to derive means structural sharing, as Kafka's ``TopicsImage`` does with persistent
maps: ``apply`` copies only what changed. Every level is a read-only mapping
(``MappingProxyType`` over a dict that nobody else holds):

    MetadataImage
      provenance   offset and epoch of the last record replayed
      features     FeaturesImage      finalized feature levels (metadata.version, ...)
      cluster      ClusterImage       broker id -> BrokerRegistration
      topics       TopicsImage        topic id -> TopicImage, name -> TopicImage
                     TopicImage       partition index -> PartitionRegistration
      configs      ConfigsImage       (resource type, name) -> {config name: value}
      producer_ids ProducerIdsImage   the first id of the next block to hand out
      client_quotas ClientQuotasImage quota entity -> {key: value}
      acls         AclsImage          acl id -> StandardAcl, grouped by resource (acls.py)

A change to one partition copies that topic's partition dict and the two top-level topic
dicts (one entry per *topic*), and shares every other ``TopicImage``,
``PartitionRegistration``, broker and config mapping with the previous image. With
100,000 partitions spread over topics, a one-partition change therefore copies a few
thousand references, not 100,000 registrations. (A single topic with 100,000 partitions
still copies its own dict, as Kafka's ``TopicImage`` does; a persistent map would fix
that if it ever matters.)

Not here: replaying records (delta.py), snapshots (snapshot.py), decisions (quorum).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType

from clients.frozen import fast_init
from clients.protocol.configs import ConfigResourceType
from clients.security.scram import ScramCredential
from metadata_log.acls import AclsImage

__all__ = [
    "AclsImage", "BrokerFeatureRange", "BrokerRegistration", "ClientQuotasImage", "ScramImage", "ClusterImage",
    "ConfigResource",
    "ConfigResourceType", "ConfigsImage", "EMPTY_IMAGE", "EMPTY_PROVENANCE", "Endpoint",
    "FeaturesImage", "LEADER_UNCHANGED", "LeaderRecoveryState", "MetadataImage", "NO_LEADER",
    "PartitionRegistration", "ProducerIdsImage", "Provenance", "QuotaEntity", "TopicImage",
    "TopicsImage", "frozen_mapping", "quota_entity",
]

# Sentinels of PartitionRecord/PartitionChangeRecord.Leader (PartitionChangeRecord.json).
NO_LEADER = -1
LEADER_UNCHANGED = -2


class LeaderRecoveryState(IntEnum):
    """PartitionRecord.LeaderRecoveryState (KIP-704)."""
    RECOVERED = 0
    RECOVERING = 1     # the leader was elected uncleanly and has not yet recovered


def frozen_mapping(d: dict) -> Mapping:
    """A read-only view of ``d``; the caller promises never to touch ``d`` again."""
    return MappingProxyType(d)


_EMPTY: Mapping = MappingProxyType({})


def _empty() -> Mapping:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an image comes from in the log (Kafka's MetadataProvenance)."""
    offset: int    # the offset of the last record replayed into the image; -1: none
    epoch: int     # the Raft epoch (term) of that record; -1: none


EMPTY_PROVENANCE = Provenance(offset=-1, epoch=-1)


# ---------------------------------------------------------------- cluster

@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str                 # listener name, e.g. "PLAINTEXT"
    host: str
    port: int
    security_protocol: int    # Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, ...


@dataclass(frozen=True, slots=True)
class BrokerFeatureRange:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID     # new for every broker process start
    # Assigned by the controller when the broker registers; grows with every registration
    # of this broker id, so requests carrying an older epoch come from a dead incarnation.
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    features: tuple[BrokerFeatureRange, ...]
    rack: str | None
    fenced: bool                  # fenced brokers lead nothing and are in no ISR (but see
                                  # the last-ISR-member rule in quorum.controller.election)
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()

    @property
    def is_active(self) -> bool:
        """May lead partitions, join ISRs and receive new replicas (Kafka's isActive)."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for e in self.endpoints:
            if e.name == listener_name:
                return e
        return None


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty)

    def get(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_active(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and b.is_active


# ---------------------------------------------------------------- topics

@fast_init        # built for every partition record replayed, on controllers and brokers
@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition as the controller last decided it (Kafka's PartitionRegistration)."""
    replicas: tuple[int, ...]           # preferred order: replicas[0] is the preferred leader
    # Invariant: isr is a subset of replicas, without duplicates; non-empty once created.
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int                         # Invariant: NO_LEADER or a member of isr
    leader_recovery_state: LeaderRecoveryState
    # Bumped on every leader change (including to NO_LEADER); followers and clients fence
    # requests of older epochs (KIP-101, KIP-320).
    leader_epoch: int
    # Bumped on every change at all: the compare-and-set version of AlterPartition.
    partition_epoch: int
    directories: tuple[uuid.UUID, ...] = ()
    # KIP-966 eligible leader replicas (quorum/controller/election.py); None means "not
    # set", as in the record.
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]   # Invariant: keys are 0..n-1

    def partition(self, index: int) -> PartitionRegistration | None:
        return self.partitions.get(index)


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=_empty)
    # Invariant: the same TopicImages as by_id, keyed by name.
    by_name: Mapping[str, TopicImage] = field(default_factory=_empty)

    def get(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def partition(self, topic_id: uuid.UUID, index: int) -> PartitionRegistration | None:
        t = self.by_id.get(topic_id)
        return None if t is None else t.partitions.get(index)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.by_id.values())

    def iter_partitions(self) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        for t in self.by_id.values():
            for index, p in t.partitions.items():
                yield t, index, p


# ---------------------------------------------------------------- configs, ids, features

@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ConfigResourceType
    name: str          # topic name; broker id as a string, or "" for the cluster default


@dataclass(frozen=True, slots=True)
class ConfigsImage:
    # Invariant: no resource maps to an empty mapping (the last key removed drops it).
    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_empty)

    def get(self, resource_type: ConfigResourceType, name: str) -> Mapping[str, str]:
        return self.resources.get(ConfigResource(resource_type, name), _EMPTY)

    def topic(self, name: str) -> Mapping[str, str]:
        return self.get(ConfigResourceType.TOPIC, name)

    def cluster_default(self) -> Mapping[str, str]:
        """Dynamic broker configs set for all brokers (resource name "")."""
        return self.get(ConfigResourceType.BROKER, "")


# A client quota entity (KIP-546): (entity type, name) pairs sorted by type; a name of
# None is that type's default ("user" -> <default>).
QuotaEntity = tuple[tuple[str, "str | None"], ...]


def quota_entity(pairs: Iterable[tuple[str, "str | None"]]) -> QuotaEntity:
    """The one spelling of an entity: its (type, name) pairs sorted by type."""
    return tuple(sorted(pairs, key=lambda p: p[0]))


@dataclass(frozen=True, slots=True)
class ClientQuotasImage:
    # Invariant: no entity maps to an empty mapping (the last key removed drops it).
    entities: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class ScramImage:
    """SCRAM verifiers by (user name, Kafka's ScramMechanism type: 1 SHA-256, 2 SHA-512),
    from UserScramCredentialRecord / RemoveUserScramCredentialRecord (KIP-554)."""
    credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=_empty)

    def get(self, user: str, mechanism_type: int) -> ScramCredential | None:
        return self.credentials.get((user, mechanism_type))


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    # The first producer id of the next block to allocate; -1 before any allocation.
    # Invariant: only grows (ProducerIdsRecord replay refuses to go back).
    next_producer_id: int = -1


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    # Finalized feature levels; a feature that is absent is at level 0.
    levels: Mapping[str, int] = field(default_factory=_empty)

    @property
    def metadata_version(self) -> int:
        return self.levels.get("metadata.version", 0)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    provenance: Provenance = EMPTY_PROVENANCE
    features: FeaturesImage = FeaturesImage()
    cluster: ClusterImage = ClusterImage()
    topics: TopicsImage = TopicsImage()
    configs: ConfigsImage = ConfigsImage()
    producer_ids: ProducerIdsImage = ProducerIdsImage()
    client_quotas: ClientQuotasImage = ClientQuotasImage()
    acls: AclsImage = AclsImage()
    scram: ScramImage = ScramImage()

    def is_empty(self) -> bool:
        return (not self.features.levels and not self.cluster.brokers
                and not self.topics.by_id and not self.configs.resources
                and self.producer_ids.next_producer_id == -1
                and not self.client_quotas.entities and not self.acls.by_id
                and not self.scram.credentials)


EMPTY_IMAGE = MetadataImage()
