"""ClusterMetadata: the client's frozen view of the cluster, built from Metadata responses.

Theory of operation
-------------------
A client learns the cluster only through MetadataResponse: the live brokers (id, host,
port, rack), the active controller, the cluster id, and per topic its id, an error code
and per partition the leader, the leader epoch, the replicas, the ISR and the offline
replicas. `ClusterMetadata.from_response` turns one response into an immutable view;
the asyncio `Cluster` swaps the whole view on every refresh, so readers never see a
half-updated one and may keep a reference as long as they like.

Refreshes that name topics return only those topics, so `merge` combines a new view
with the previous one: brokers, controller and cluster id come from the newer response
(it is the broker's current image), topics the new response names replace the old ones,
topics it does not name are kept, unless the refresh asked for all topics (then a topic
that is gone is gone).

One rule from KIP-320 (the Java client's `Metadata.updateLatestMetadata`): a partition's
entry is never replaced by one with a *smaller* leader epoch. A lagging broker may still
answer with an old leader; going back to it would send produce requests to a deposed
leader and fetches to a replica that is behind.

Pure: no I/O; time is the `now_ms` the shell passes in.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

__all__ = ["NO_LEADER", "BrokerMetadata", "PartitionMetadata", "TopicMetadata", "ClusterMetadata"]

NO_LEADER = -1  # Kafka's leader_id while a partition has no leader
_ZERO_UUID = uuid.UUID(int=0)
_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int                      # NO_LEADER while there is none
    leader_epoch: int                # -1 when the broker did not say (Metadata < v7)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = ErrorCode.NONE  # LEADER_NOT_AVAILABLE while an election is on

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    error_code: int                  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE...
    is_internal: bool
    partitions: Mapping[int, PartitionMetadata]

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, BrokerMetadata]
    topics: Mapping[str, TopicMetadata]
    updated_ms: int                  # when the shell received the newest response; -1: never
    _by_id: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY, repr=False,
                                            compare=False)
    # available_partitions per topic, computed once: the view is immutable, and the
    # sticky partitioner asks on every keyless send.
    _available: dict[str, tuple[int, ...]] = field(default_factory=dict, init=False, repr=False,
                                                   compare=False)

    @classmethod
    def empty(cls) -> ClusterMetadata:
        return cls(None, NO_LEADER, _EMPTY, _EMPTY, -1)

    @classmethod
    def from_response(cls, response: Any, now_ms: int) -> ClusterMetadata:
        """One MetadataResponse (any version) as a view."""
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack)
                   for b in response.brokers}
        topics: dict[str, TopicMetadata] = {}
        for t in response.topics:
            if t.name is None:
                continue  # a topic-id lookup that failed: nothing to key it by
            parts = {
                p.partition_index: PartitionMetadata(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas or ()),
                    p.error_code)
                for p in t.partitions
            }
            topics[t.name] = TopicMetadata(t.name, t.topic_id or _ZERO_UUID, t.error_code,
                                           bool(t.is_internal), MappingProxyType(parts))
        controller = response.controller_id if response.controller_id is not None else NO_LEADER
        return cls._make(response.cluster_id, controller, brokers, topics, now_ms)

    @classmethod
    def _make(cls, cluster_id: str | None, controller_id: int, brokers: dict, topics: dict,
              now_ms: int) -> ClusterMetadata:
        by_id = {t.topic_id: t.name for t in topics.values() if t.topic_id != _ZERO_UUID}
        return cls(cluster_id, controller_id, MappingProxyType(brokers), MappingProxyType(topics),
                   now_ms, MappingProxyType(by_id))

    def merge(self, newer: ClusterMetadata, *, all_topics: bool) -> ClusterMetadata:
        """`newer` (a response just received) on top of this view; see the module doc."""
        topics: dict[str, TopicMetadata] = {} if all_topics else dict(self.topics)
        for name, t in newer.topics.items():
            old = self.topics.get(name)
            if old is None or old.topic_id != t.topic_id or t.error_code != ErrorCode.NONE:
                topics[name] = t  # new, recreated (new id), or now in error
                continue
            parts = dict(t.partitions)
            for index, p in t.partitions.items():
                q = old.partitions.get(index)
                if q is not None and p.leader_epoch != -1 and p.leader_epoch < q.leader_epoch:
                    parts[index] = q  # KIP-320: never go back to an older leader epoch
            topics[name] = TopicMetadata(t.name, t.topic_id, t.error_code, t.is_internal,
                                         MappingProxyType(parts))
        return self._make(newer.cluster_id, newer.controller_id, dict(newer.brokers), topics,
                          newer.updated_ms)

    def with_current_leaders(self, leaders: Mapping[TopicPartition, tuple[int, int]],
                             endpoints: Iterable[BrokerMetadata]) -> ClusterMetadata:
        """KIP-951: a Fetch v16+ (or Produce v10+) answer named each partition's current
        (leader, leader epoch) and the leaders' endpoints; this view with them, so the
        client goes to the new leader without a Metadata round trip. As the Java client's
        ``Metadata.updatePartitionLeadership``: only a newer leader epoch replaces a
        partition's, and only for a known partition whose new leader has an endpoint."""
        brokers = dict(self.brokers)
        for b in endpoints:
            brokers.setdefault(b.node_id, b)
        topics = dict(self.topics)
        changed = False
        for tp, (leader, epoch) in leaders.items():
            t = topics.get(tp.topic)
            p = None if t is None else t.partitions.get(tp.partition)
            if t is None or p is None or leader not in brokers or epoch <= p.leader_epoch:
                continue
            parts = dict(t.partitions)
            parts[tp.partition] = PartitionMetadata(p.topic, p.partition, leader, epoch, p.replicas,
                                                    p.isr, p.offline_replicas, p.error_code)
            topics[tp.topic] = TopicMetadata(t.name, t.topic_id, t.error_code, t.is_internal,
                                             MappingProxyType(parts))
            changed = True
        if not changed:
            return self
        return self._make(self.cluster_id, self.controller_id, brokers, topics, self.updated_ms)

    # --- queries ---

    def broker(self, node_id: int) -> BrokerMetadata | None:
        return self.brokers.get(node_id)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        t = self.topics.get(tp.topic)
        return None if t is None else t.partitions.get(tp.partition)

    def partition_count(self, topic: str) -> int | None:
        """None when the topic is unknown or in error."""
        t = self.topics.get(topic)
        if t is None or t.error_code != ErrorCode.NONE or not t.partitions:
            return None
        return len(t.partitions)

    def leader_for(self, tp: TopicPartition) -> tuple[int, int] | None:
        """(leader id, leader epoch) when the leader is known and among the live brokers."""
        p = self.partition(tp)
        if p is None or p.leader == NO_LEADER or p.leader not in self.brokers:
            return None
        return p.leader, p.leader_epoch

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        """Partitions that have a live leader now (the sticky partitioner picks among them)."""
        found = self._available.get(topic)
        if found is None:
            t = self.topics.get(topic)
            if t is None:
                return ()
            found = self._available[topic] = tuple(
                i for i, p in sorted(t.partitions.items())
                if p.leader != NO_LEADER and p.leader in self.brokers)
        return found

    def partitions_led_by(self, node_id: int) -> list[TopicPartition]:
        return [TopicPartition(t.name, i) for t in self.topics.values()
                for i, p in t.partitions.items() if p.leader == node_id]

    def covers(self, topics: Iterable[str]) -> bool:
        return all(name in self.topics for name in topics)
