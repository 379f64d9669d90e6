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

Without racks the greedy choice per partition keeps every broker within one replica and
one preferred leadership of the others. With racks of equal size, leaderships stay within
one, and a repair pass (swapping followers of the new partitions from the fullest to the
emptiest brokers when rack spread allows) brings replicas within one in all but a few
tenths of a percent of layouts, and within two always (measured over every layout of up
to 4 racks x 4 brokers, rf <= 4, 40 partitions). With unequal racks, rule 1 wins, as in
Kafka's rack-aware assignment.

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
    # Plain dicts with every key present: Counter's __missing__ is a Python call.
    replicas_load = {b: load.replicas[b] for b in ids}
    leaders_load = {b: load.leaders[b] for b in ids}
    rack_load: dict[str | None, int] = {}
    for b in ids:
        rack_load[rack[b]] = rack_load.get(rack[b], 0) + replicas_load[b]
    out: list[tuple[int, ...]] = []
    for _ in range(partition_count):
        # Ties on a broker's own counts go to the emptier rack, which keeps every rack able
        # to take a follower later (a greedy without it strands brokers of full racks).
        leader = min(ids, key=lambda b: (leaders_load[b], replicas_load[b],
                                         rack_load[rack[b]], rank[b]))
        chosen = [leader]
        racks_used = [rack[leader]]
        while len(chosen) < replication_factor:
            follower = min((b for b in ids if b not in chosen),
                           key=lambda b: (racks_used.count(rack[b]), replicas_load[b],
                                          rack_load[rack[b]], rank[b]))
            chosen.append(follower)
            racks_used.append(rack[follower])
        leaders_load[leader] += 1
        for b in chosen:
            replicas_load[b] += 1
            rack_load[rack[b]] += 1
        out.append(tuple(chosen))
    _rebalance_followers(out, ids, rack, replicas_load, rank, replication_factor)
    for replicas in out:
        load.add(replicas)
    return out


def _rebalance_followers(out: list[tuple[int, ...]], ids: list[int],
                         rack: dict[int, str | None], replicas_load: dict[int, int],
                         rank: dict[int, int], replication_factor: int) -> None:
    """Swap followers of the new partitions from the fullest brokers to the emptiest ones
    while that narrows the spread and keeps each partition's rack spread.

    The greedy pass alone leaves a spread of 2 in about one case in a hundred with racks
    (a rack's brokers can be stranded when their rack is already used by the leader).
    Each swap lowers the sum of squared loads, so this ends; the work is bounded anyway
    (a budget of partition checks) because with unequal racks most spreads cannot be
    narrowed and a fruitless search must not cost more than the placement itself."""
    rack_count = len(set(rack.values()))
    followers: dict[int, list[int]] = {b: [] for b in ids}
    for i, replicas in enumerate(out):
        for b in replicas[1:]:
            followers[b].append(i)
    budget = 4 * len(out) * replication_factor + 64
    while budget > 0:
        by_load = sorted(ids, key=lambda b: (replicas_load[b], rank[b]))
        swap = None
        for lo in by_load:
            for hi in reversed(by_load):
                if replicas_load[hi] - replicas_load[lo] < 2:
                    break
                if rack[hi] != rack[lo] and replication_factor >= rack_count:
                    continue        # every partition already uses every rack
                for i in followers[hi]:
                    budget -= 1
                    replicas = out[i]
                    if hi not in replicas or lo in replicas:
                        continue
                    if rack[lo] == rack[hi] or all(rack[b] != rack[lo] for b in replicas):
                        swap = (i, hi, lo)
                        break
                if swap is not None or budget <= 0:
                    break
            if swap is not None or budget <= 0:
                break
        if swap is None:
            return
        i, hi, lo = swap
        out[i] = tuple(lo if b == hi else b for b in out[i])
        followers[lo].append(i)        # (hi's stale entry is skipped by the check above)
        replicas_load[hi] -= 1
        replicas_load[lo] += 1
