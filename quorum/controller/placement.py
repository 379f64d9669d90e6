"""Rack-aware replica placement for new partitions.

Theory of operation
-------------------
Placement chooses, for each new partition, an ordered replica list whose first member is
the preferred leader. It runs over the *active* brokers only (unfenced, not shutting
down): a new partition placed on a dead broker would start under-replicated. Goals, in
priority order:

1. Rack awareness: the replicas of one partition span as many racks as possible, so a rack
   failure costs at most ceil(rf / racks) replicas of any partition. A broker without a
   rack counts as a rack of its own kind (None).
2. Balance across the cluster, counting what brokers already hold (``BrokerLoad``, from
   the image) and what this request has placed so far: the preferred leader goes to the
   broker leading the fewest partitions, followers to the brokers holding the fewest
   replicas.
3. Determinism: remaining ties are broken by one shuffle of the broker ids drawn from the
   caller's ``random.Random``, so a seeded test gets the same layout every run while
   successive requests do not all start on the lowest broker id.

The greedy choice per partition keeps every broker within one replica (and one preferred
leadership) of the others when the racks are of equal size; with unequal racks, rule 1
wins, as in Kafka's rack-aware assignment.

Not here: manual assignments (validated in replication_control.py).
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["BrokerLoad", "PlacementBroker", "place_partitions"]


@dataclass(frozen=True, slots=True)
class PlacementBroker:
    broker_id: int
    rack: str | None


@dataclass(slots=True)
class BrokerLoad:
    """Replicas and preferred leaderships per broker id (mutable scratch counters)."""
    replicas: Counter = field(default_factory=Counter)
    leaders: Counter = field(default_factory=Counter)

    def copy(self) -> "BrokerLoad":
        return BrokerLoad(Counter(self.replicas), Counter(self.leaders))

    def add(self, replicas: tuple[int, ...]) -> None:
        self.leaders[replicas[0]] += 1
        for r in replicas:
            self.replicas[r] += 1


def place_partitions(brokers: list[PlacementBroker], partition_count: int,
                     replication_factor: int, load: BrokerLoad,
                     rng: random.Random) -> list[tuple[int, ...]]:
    """``partition_count`` replica lists; ``load`` is updated with them.

    The caller has checked 1 <= replication_factor <= len(brokers)."""
    assert 1 <= replication_factor <= len(brokers), (replication_factor, len(brokers))
    ids = sorted(b.broker_id for b in brokers)
    rng.shuffle(ids)
    rank = {b: i for i, b in enumerate(ids)}
    rack = {b.broker_id: b.rack for b in brokers}
    replicas_load, leaders_load = load.replicas, load.leaders
    out: list[tuple[int, ...]] = []
    for _ in range(partition_count):
        leader = min(ids, key=lambda b: (leaders_load[b], replicas_load[b], rank[b]))
        chosen = [leader]
        racks_used = Counter({rack[leader]: 1})
        while len(chosen) < replication_factor:
            follower = min((b for b in ids if b not in chosen),
                           key=lambda b: (racks_used[rack[b]], replicas_load[b], rank[b]))
            chosen.append(follower)
            racks_used[rack[follower]] += 1
        replicas = tuple(chosen)
        load.add(replicas)
        out.append(replicas)
    return out
