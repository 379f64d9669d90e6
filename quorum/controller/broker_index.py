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
    elr[b]        partitions whose eligible or last known eligible leader replicas hold b
                  (KIP-966: a broker back from an unclean stop leaves them)
    preferred[b]  how many partitions prefer b as leader (placement's BrokerLoad)

Callers see a partition as ``(topic_id, partition_index)``; inside, the topic id is
its 128-bit int, so that set operations never call UUID's Python-level ``__hash__``.

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
from collections.abc import Mapping
from types import MappingProxyType
from typing import Iterable

from metadata_log.delta import (
    ElrChange, IsrChange, LeaderChange, LeaderRecoveryChange, MetadataChange, PartitionCreated,
    ReplicasChange, TopicDeleted,
)
from metadata_log.image import NO_LEADER, MetadataImage, PartitionRegistration
from quorum.controller.placement import BrokerLoad

__all__ = ["BrokersToPartitions", "PartitionKey"]

PartitionKey = tuple[uuid.UUID, int]
# Inside the index a partition is (topic id as an int, partition index): tuples of ints
# hash and compare in C, where a uuid.UUID's __hash__ and __lt__ are Python code (about
# 1 us a call, several calls per partition per change).
_Key = tuple[int, int]

# Exact types (a set lookup, not isinstance over six classes, per change).
_PARTITION_CHANGES = frozenset((PartitionCreated, LeaderChange, IsrChange, ReplicasChange,
                                LeaderRecoveryChange, ElrChange))
_NONE: Mapping[int, PartitionRegistration] = MappingProxyType({})


class BrokersToPartitions:
    __slots__ = ("_replicas", "_isr", "_leaders", "_leaderless", "_imbalanced", "_preferred",
                 "_topic_ids", "_elr")

    def __init__(self) -> None:
        self._replicas: dict[int, set[_Key]] = {}
        self._isr: dict[int, set[_Key]] = {}
        self._leaders: dict[int, set[_Key]] = {}     # Invariant: _leaders[b] <= _isr[b]
        self._leaderless: set[_Key] = set()
        self._elr: dict[int, set[_Key]] = {}
        self._imbalanced: set[_Key] = set()
        self._preferred: Counter = Counter()
        # Topic id by its int, for the topics with partitions in the index.
        self._topic_ids: dict[int, uuid.UUID] = {}

    # ------------------------------------------------------------ building

    @classmethod
    def from_image(cls, image: MetadataImage) -> BrokersToPartitions:
        """The full recomputation: every partition of ``image`` (a scan; see above)."""
        index = cls()
        for t in image.topics.by_id.values():
            tid = t.topic_id
            tint = tid.int
            if t.partitions:
                index._topic_ids[tint] = tid
            for i, p in t.partitions.items():
                index._add((tint, i), p)
        return index

    def apply(self, old: MetadataImage, new: MetadataImage,
              changes: Iterable[MetadataChange]) -> None:
        """Move the index from ``old`` to ``new``, where ``changes`` are the typed changes
        of the delta that turned ``old`` into ``new`` (``BatchOutcome.changes``)."""
        # (topic id as an int, index) -> topic id: ordered, no duplicates. Changes come
        # grouped by topic, often sharing one UUID object: its int and its TopicImages are
        # looked up once per run of the topic's partitions, not once per partition.
        touched: dict[_Key, uuid.UUID] = {}
        deleted: list[uuid.UUID] = []
        last_tid: uuid.UUID | None = None
        last_int = 0
        for c in changes:
            kind = type(c)
            if kind in _PARTITION_CHANGES:
                tid = c.topic_id        # type: ignore[union-attr]
                if tid is not last_tid:
                    last_tid, last_int = tid, tid.int
                touched[(last_int, c.partition)] = tid      # type: ignore[union-attr]
            elif kind is TopicDeleted:
                deleted.append(c.topic_id)      # type: ignore[union-attr]
                t = old.topics.get_by_id(c.topic_id)        # type: ignore[union-attr]
                if t is not None:
                    tint = t.topic_id.int
                    for i in t.partitions:
                        touched[(tint, i)] = t.topic_id
        old_by_id, new_by_id = old.topics.by_id, new.topics.by_id
        last_tid = None
        old_parts: Mapping[int, PartitionRegistration] = _NONE
        new_parts: Mapping[int, PartitionRegistration] = _NONE
        for key, tid in touched.items():
            if tid is not last_tid:
                last_tid = tid
                t = old_by_id.get(tid)
                old_parts = _NONE if t is None else t.partitions
                t = new_by_id.get(tid)
                new_parts = _NONE if t is None else t.partitions
                if t is not None:
                    self._topic_ids[key[0]] = tid
            i = key[1]
            before = old_parts.get(i)
            after = new_parts.get(i)
            if before is after:
                continue        # e.g. created and deleted within the batch
            if before is not None:
                self._remove(key, before)
            if after is not None:
                self._add(key, after)
        for tid in deleted:
            if new_by_id.get(tid) is None:
                self._topic_ids.pop(tid.int, None)

    def _add(self, key: _Key, p: PartitionRegistration) -> None:
        for b in p.replicas:
            self._replicas.setdefault(b, set()).add(key)
        for b in p.isr:
            self._isr.setdefault(b, set()).add(key)
        for b in _elr_members(p):
            self._elr.setdefault(b, set()).add(key)
        if p.leader == NO_LEADER:
            self._leaderless.add(key)
        else:
            self._leaders.setdefault(p.leader, set()).add(key)
            if p.leader != p.replicas[0]:
                self._imbalanced.add(key)
        self._preferred[p.replicas[0]] += 1

    def _remove(self, key: _Key, p: PartitionRegistration) -> None:
        # Removal mirrors _add exactly: the registration is the one _add was given.
        for b in p.replicas:
            _discard(self._replicas, b, key)
        for b in p.isr:
            _discard(self._isr, b, key)
        for b in _elr_members(p):
            _discard(self._elr, b, key)
        if p.leader == NO_LEADER:
            self._leaderless.remove(key)
        else:
            _discard(self._leaders, p.leader, key)
            self._imbalanced.discard(key)
        preferred = p.replicas[0]
        self._preferred[preferred] -= 1
        if not self._preferred[preferred]:
            del self._preferred[preferred]

    # ------------------------------------------------------------ queries

    def _keys(self, keys: Iterable[_Key]) -> list[PartitionKey]:
        """Sorted (by topic id, then index), with the topic ids as UUIDs."""
        ids = self._topic_ids
        return [(ids[t], i) for t, i in sorted(keys)]

    def partitions_of(self, brokers: Iterable[int]) -> list[PartitionKey]:
        """Partitions that ``brokers`` lead or are in the ISR of, in a stable order: the
        led ones first (a bounded batch moves leaderships before ISR memberships)."""
        led: set[_Key] = set()
        keys: set[_Key] = set()
        for b in brokers:
            led.update(self._leaders.get(b, ()))
            keys.update(self._isr.get(b, ()))
        return self._keys(led) + self._keys(keys - led)

    def eligible_in(self, brokers: Iterable[int]) -> list[PartitionKey]:
        """Partitions whose eligible or last known eligible leader replicas hold one of
        ``brokers``."""
        keys: set[_Key] = set()
        for b in brokers:
            keys.update(self._elr.get(b, ()))
        return self._keys(keys)

    def hosted_by(self, broker_id: int) -> list[PartitionKey]:
        return self._keys(self._replicas.get(broker_id, ()))

    def isr_of(self, broker_id: int) -> list[PartitionKey]:
        return self._keys(self._isr.get(broker_id, ()))

    def led_by(self, broker_id: int) -> list[PartitionKey]:
        return self._keys(self._leaders.get(broker_id, ()))

    def leaderless(self) -> list[PartitionKey]:
        return self._keys(self._leaderless)

    def imbalanced(self) -> list[PartitionKey]:
        """Led by a replica other than the preferred one (Kafka's imbalancedPartitions)."""
        return self._keys(self._imbalanced)

    def leads_any(self, broker_id: int) -> bool:
        return bool(self._leaders.get(broker_id))

    def broker_load(self) -> BrokerLoad:
        """Placement's counters, from the index (no scan)."""
        return BrokerLoad(Counter({b: len(s) for b, s in self._replicas.items()}),
                          Counter(self._preferred))

    def as_dict(self) -> dict[str, object]:
        """A plain, comparable form (empty entries dropped), for tests and debugging."""
        def sets(d: dict[int, set[_Key]]) -> dict[int, frozenset[PartitionKey]]:
            return {b: frozenset(self._keys(s)) for b, s in d.items() if s}
        used = {t for t, _ in self._leaderless} | {t for t, _ in self._imbalanced}
        for d in (self._replicas, self._isr, self._leaders):
            for keys in d.values():
                used |= {t for t, _ in keys}
        return {"replicas": sets(self._replicas), "isr": sets(self._isr),
                "leaders": sets(self._leaders),
                "leaderless": frozenset(self._keys(self._leaderless)),
                "imbalanced": frozenset(self._keys(self._imbalanced)),
                "preferred": {b: n for b, n in self._preferred.items() if n},
                "topic_ids": {self._topic_ids[t] for t in used},
                "unused_topic_ids": set(self._topic_ids) - used}


def _discard(d: dict[int, set[_Key]], broker_id: int, key: _Key) -> None:
    s = d[broker_id]
    s.remove(key)          # KeyError here is a bug: the index drifted from the image
    if not s:
        del d[broker_id]


def _elr_members(p: PartitionRegistration) -> set[int]:
    return set(p.eligible_leader_replicas or ()) | set(p.last_known_elr or ())
