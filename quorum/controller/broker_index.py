"""`BrokersToPartitions`: from a broker id to the partitions it hosts, is in the ISR of, leads.

Theory of operation
-------------------
Fencing, unfencing, controlled shutdown, a new incarnation registering and the periodic
elections each concern one broker, or the few partitions that need an election; scanning
every partition of the image for them costs time proportional to the cluster (0.1 s at
100,000 partitions, on every heartbeat of a broker in controlled shutdown). Kafka's
controller keeps ``BrokersToIsrs`` for this (and ``imbalancedPartitions`` for the
preferred-leader election); this is Ketch's version:

    replicas[b]   partitions whose replica set holds broker b
    isr[b]        partitions whose ISR holds b
    leaders[b]    partitions b leads                 (Invariant: a subset of isr[b])
    leaderless    partitions with leader NO_LEADER
    imbalanced    partitions led by a replica other than the preferred one (replicas[0])
    preferred[b]  how many partitions prefer b as leader (placement's BrokerLoad)

A partition is keyed ``(topic_id, partition_index)``; every set holds the same key
tuple, so the index costs a few references per replica.

The index is derived state of the committed image, like the image itself it changes only
on replay (STYLE.md §1: commands decide, replay mutates). ``apply(old, new, changes)``
takes the typed changes a ``MetadataDelta`` reports for one batch and, for each partition
they name (and each partition of a deleted topic), removes what the old image said about
it and adds what the new image says: time proportional to the batch, never to the
cluster. ``from_image`` is the full recomputation, used when a snapshot is loaded and by
the tests as the oracle that the incremental path must always equal.

Not here: deciding anything (replication_control, cluster_control use the index).
"""
from __future__ import annotations

import uuid
from collections import Counter
from typing import Iterable

from metadata_log.delta import (
    IsrChange, LeaderChange, LeaderRecoveryChange, MetadataChange, PartitionCreated,
    ReplicasChange, TopicDeleted,
)
from metadata_log.image import NO_LEADER, MetadataImage, PartitionRegistration
from quorum.controller.placement import BrokerLoad

__all__ = ["BrokersToPartitions", "PartitionKey"]

PartitionKey = tuple[uuid.UUID, int]

_PARTITION_CHANGES = (PartitionCreated, LeaderChange, IsrChange, ReplicasChange,
                      LeaderRecoveryChange)


class BrokersToPartitions:
    __slots__ = ("replicas", "isr", "leaders", "leaderless", "imbalanced", "preferred")

    def __init__(self) -> None:
        self.replicas: dict[int, set[PartitionKey]] = {}
        self.isr: dict[int, set[PartitionKey]] = {}
        self.leaders: dict[int, set[PartitionKey]] = {}
        self.leaderless: set[PartitionKey] = set()
        self.imbalanced: set[PartitionKey] = set()
        self.preferred: Counter = Counter()

    # ------------------------------------------------------------ building

    @classmethod
    def from_image(cls, image: MetadataImage) -> BrokersToPartitions:
        """The full recomputation: every partition of ``image`` (a scan; see above)."""
        index = cls()
        for t in image.topics.by_id.values():
            tid = t.topic_id
            for i, p in t.partitions.items():
                index._add((tid, i), p)
        return index

    def apply(self, old: MetadataImage, new: MetadataImage,
              changes: Iterable[MetadataChange]) -> None:
        """Move the index from ``old`` to ``new``, where ``changes`` are the typed changes
        of the delta that turned ``old`` into ``new`` (``BatchOutcome.changes``)."""
        touched: dict[PartitionKey, None] = {}      # ordered, no duplicates
        for c in changes:
            if isinstance(c, _PARTITION_CHANGES):
                touched[(c.topic_id, c.partition)] = None
            elif isinstance(c, TopicDeleted):
                t = old.topics.get_by_id(c.topic_id)
                if t is not None:
                    for i in t.partitions:
                        touched[(c.topic_id, i)] = None
        for key in touched:
            before = old.topics.partition(key[0], key[1])
            after = new.topics.partition(key[0], key[1])
            if before is after:
                continue        # e.g. created and deleted within the batch
            if before is not None:
                self._remove(key, before)
            if after is not None:
                self._add(key, after)

    def _add(self, key: PartitionKey, p: PartitionRegistration) -> None:
        for b in p.replicas:
            self.replicas.setdefault(b, set()).add(key)
        for b in p.isr:
            self.isr.setdefault(b, set()).add(key)
        if p.leader == NO_LEADER:
            self.leaderless.add(key)
        else:
            self.leaders.setdefault(p.leader, set()).add(key)
            if p.leader != p.replicas[0]:
                self.imbalanced.add(key)
        self.preferred[p.replicas[0]] += 1

    def _remove(self, key: PartitionKey, p: PartitionRegistration) -> None:
        # Removal mirrors _add exactly: the registration is the one _add was given.
        for b in p.replicas:
            _discard(self.replicas, b, key)
        for b in p.isr:
            _discard(self.isr, b, key)
        if p.leader == NO_LEADER:
            self.leaderless.remove(key)
        else:
            _discard(self.leaders, p.leader, key)
            self.imbalanced.discard(key)
        preferred = p.replicas[0]
        self.preferred[preferred] -= 1
        if not self.preferred[preferred]:
            del self.preferred[preferred]

    # ------------------------------------------------------------ queries

    def partitions_of(self, brokers: Iterable[int]) -> list[PartitionKey]:
        """Partitions that ``brokers`` lead or are in the ISR of, in a stable order: the
        led ones first (a bounded batch moves leaderships before ISR memberships)."""
        led: set[PartitionKey] = set()
        keys: set[PartitionKey] = set()
        for b in brokers:
            led.update(self.leaders.get(b, ()))
            keys.update(self.isr.get(b, ()))
        return sorted(led) + sorted(keys - led)

    def leads_any(self, broker_id: int) -> bool:
        return bool(self.leaders.get(broker_id))

    def broker_load(self) -> BrokerLoad:
        """Placement's counters, from the index (no scan)."""
        return BrokerLoad(Counter({b: len(s) for b, s in self.replicas.items()}),
                          Counter(self.preferred))

    def as_dict(self) -> dict[str, object]:
        """A plain, comparable form (empty entries dropped), for tests and debugging."""
        def sets(d: dict[int, set[PartitionKey]]) -> dict[int, frozenset[PartitionKey]]:
            return {b: frozenset(s) for b, s in d.items() if s}
        return {"replicas": sets(self.replicas), "isr": sets(self.isr),
                "leaders": sets(self.leaders), "leaderless": frozenset(self.leaderless),
                "imbalanced": frozenset(self.imbalanced),
                "preferred": {b: n for b, n in self.preferred.items() if n}}


def _discard(d: dict[int, set[PartitionKey]], broker_id: int, key: PartitionKey) -> None:
    s = d[broker_id]
    s.remove(key)          # KeyError here is a bug: the index drifted from the image
    if not s:
        del d[broker_id]
