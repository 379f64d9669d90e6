"""Consumer partition assignors as pure functions: range, roundrobin, sticky, cooperative-sticky.

Theory of operation
-------------------
In Kafka's classic group protocol the broker does not assign partitions. Every member
sends, in its JoinGroup request, one ``metadata`` blob per assignor it supports (Kafka's
``ConsumerProtocolSubscription``: subscribed topics, user data, the partitions it owns,
its generation, its rack). The coordinator picks the first assignor all members share and
hands every member's blob to one member, the leader. The leader runs the assignor over
(members' subscriptions, partitions per topic) and returns, in SyncGroup, one
``ConsumerProtocolAssignment`` blob per member. So the assignors and both byte layouts
must match Kafka's exactly for a Ketch consumer to share a group with the Java client,
librdkafka or kafka-python, whoever ends up leader.

Each blob is ``int16 version`` + the body of that version of the schema (no flexible
fields). A newer version than we know is parsed with our newest layout and its trailing
fields ignored (the schemas promise fields are only ever appended).

The assignors (KIP-54 sticky, KIP-429 cooperative, KIP-341 sticky user data):

- ``range``: per topic, members subscribed to it in order (static members by
  ``group.instance.id`` first, then by member id); each gets a contiguous range, the first
  ``partitions % members`` one extra.
- ``roundrobin``: all subscribed partitions sorted by (topic, partition) dealt to members
  in order, skipping members not subscribed to that topic.
- ``sticky``: balanced (no partition could move to a member with 2+ fewer partitions that
  may take it) and, within that, keeps as many previously owned partitions as it can. When
  all members subscribe to the same topics it runs Kafka's quota algorithm (every member
  gets ``floor`` or ``ceil`` of partitions/members; owned ones are kept up to the quota;
  the rest dealt round-robin to members under quota); otherwise a general one (owned ones
  kept, the rest given to the least-loaded member that may take them, partitions with the
  fewest candidates first, then single moves from the most to the least loaded until
  balanced). Ownership comes from the highest generation: a partition two members of that
  generation both claim, and anything claimed by an older generation, counts as unowned.
- ``cooperative-sticky``: the sticky assignment, minus every partition that moves from a
  member still in the group to another: that member first revokes it, rejoins, and the
  next rebalance hands it over (KIP-429's two rebalances, revoking only what moves).

Everything is deterministic: ties are broken by member order, never by a hash map's.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping

from clients.protocol import messages
from clients.protocol._codec import decode_body, encode_message
from clients.protocol.types import CorruptFrameError
from clients.types import TopicPartition

__all__ = [
    "Subscription", "Assignment", "RebalanceProtocol", "Assignor", "ASSIGNORS",
    "DEFAULT_GENERATION", "assignor_for", "encode_subscription", "decode_subscription",
    "encode_assignment", "decode_assignment", "range_assign", "roundrobin_assign",
    "sticky_assign", "cooperative_sticky_assign", "member_order",
    "encode_sticky_user_data", "decode_sticky_user_data", "partitions_transferring",
]

DEFAULT_GENERATION = -1           # Kafka's "no generation known" (ConsumerProtocolSubscription v2)
SUBSCRIPTION_VERSION = 3          # the newest we write and know how to read
ASSIGNMENT_VERSION = 0            # v0..v3 of ConsumerProtocolAssignment share one layout;
                                  # v0 is what every client (kafka-python too) can read


class RebalanceProtocol(Enum):
    EAGER = "eager"               # revoke everything before every rebalance
    COOPERATIVE = "cooperative"   # revoke only what moves (KIP-429)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's ConsumerProtocolSubscription, as the leader sees it."""
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None    # from JoinGroup's member list, not the blob


@dataclass(frozen=True, slots=True)
class Assignment:
    """One member's ConsumerProtocolAssignment."""
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


# ------------------------------------------------------------------------- byte layouts

def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    M = messages.ConsumerProtocolSubscription
    body = M(topics=list(sub.topics), user_data=sub.user_data,
             owned_partitions=[M.TopicPartition(topic=t, partitions=ps)
                               for t, ps in _group_by_topic(sub.owned_partitions).items()],
             generation_id=sub.generation_id, rack_id=sub.rack_id)
    return struct.pack(">h", version) + encode_message(body, version)


def _read_versioned(cls: Any, data: bytes, newest: int) -> tuple[int, Any]:
    if data is None or len(data) < 2:
        raise CorruptFrameError(f"{cls.__name__} shorter than its version field")
    version = struct.unpack_from(">h", data, 0)[0]
    if version < 0:
        raise CorruptFrameError(f"{cls.__name__} has negative version {version}")
    # A newer version is read with our newest layout; fields are only ever appended.
    body, _ = decode_body(cls.SCHEMA, min(version, newest), bytes(data), 2, exact=False)
    return version, body


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    version, body = _read_versioned(messages.ConsumerProtocolSubscription, data, SUBSCRIPTION_VERSION)
    owned = tuple(TopicPartition(t.topic, p) for t in (body.owned_partitions or ()) for p in t.partitions)
    return Subscription(topics=tuple(body.topics), user_data=body.user_data, owned_partitions=owned,
                        generation_id=body.generation_id if version >= 2 else DEFAULT_GENERATION,
                        rack_id=body.rack_id if version >= 3 else None,
                        group_instance_id=group_instance_id)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    M = messages.ConsumerProtocolAssignment
    body = M(assigned_partitions=[M.TopicPartition(topic=t, partitions=ps)
                                  for t, ps in _group_by_topic(assignment.partitions).items()],
             user_data=assignment.user_data)
    return struct.pack(">h", version) + encode_message(body, version)


def decode_assignment(data: bytes) -> Assignment:
    # An empty assignment blob means "nothing" (the coordinator's answer to a member the
    # leader left out, and librdkafka's for an empty assignment).
    if not data:
        return Assignment(partitions=())
    _, body = _read_versioned(messages.ConsumerProtocolAssignment, data, 3)
    return Assignment(partitions=tuple(TopicPartition(t.topic, p) for t in body.assigned_partitions
                                       for p in t.partitions),
                      user_data=body.user_data)


# StickyAssignor's user data (KIP-341): the member's previous assignment and generation,
# for members whose subscription carries no owned partitions (the eager protocol clears
# them before joining). Layout: [topic string, [int32 partition]] then int32 generation.

def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    out = bytearray()
    by_topic = _group_by_topic(partitions)
    out += struct.pack(">i", len(by_topic))
    for topic, parts in by_topic.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    out += struct.pack(">i", generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[tuple[TopicPartition, ...], int]:
    """(previous assignment, generation); a v0 blob (no generation) gives DEFAULT_GENERATION."""
    try:
        pos = 0
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n_topics < 0 or n_topics > len(data):
            raise CorruptFrameError("bad topic count in sticky user data")
        parts: list[TopicPartition] = []
        for _ in range(n_topics):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = bytes(data[pos + 2: pos + 2 + n]).decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if count < 0 or pos + 4 * count > len(data):
                raise CorruptFrameError("bad partition count in sticky user data")
            parts.extend(TopicPartition(topic, p) for p in struct.unpack_from(f">{count}i", data, pos))
            pos += 4 * count
        generation = struct.unpack_from(">i", data, pos)[0] if pos + 4 <= len(data) else DEFAULT_GENERATION
        return tuple(parts), generation
    except (struct.error, UnicodeDecodeError) as e:
        raise CorruptFrameError(f"malformed sticky user data: {e}") from None


# ------------------------------------------------------------------------- member order

def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Kafka's MemberInfo order: static members by group.instance.id first, then dynamic
    ones by member id (so a restarted static member keeps its place, KIP-345)."""
    def key(member_id: str) -> tuple:
        gid = subscriptions[member_id].group_instance_id
        return (0, gid, member_id) if gid is not None else (1, member_id, "")
    return sorted(subscriptions, key=key)


Assignments = dict[str, list[TopicPartition]]


def range_assign(subscriptions: Mapping[str, Subscription],
                 partitions_per_topic: Mapping[str, int]) -> Assignments:
    result: Assignments = {m: [] for m in subscriptions}
    order = member_order(subscriptions)
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    for topic in topics:
        n = partitions_per_topic.get(topic)
        if not n:
            continue                      # not in metadata (yet): nobody gets it
        members = [m for m in order if topic in subscriptions[m].topics]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            length = per + (1 if i < extra else 0)
            result[m].extend(TopicPartition(topic, p) for p in range(start, start + length))
            start += length
    return result


def roundrobin_assign(subscriptions: Mapping[str, Subscription],
                      partitions_per_topic: Mapping[str, int]) -> Assignments:
    result: Assignments = {m: [] for m in subscriptions}
    order = member_order(subscriptions)
    if not order:
        return result
    topics = sorted({t for s in subscriptions.values() for t in s.topics if partitions_per_topic.get(t)})
    i = 0
    for topic in topics:
        for p in range(partitions_per_topic[topic]):
            # deal to the next member in the circle that subscribes to this topic
            while topic not in subscriptions[order[i % len(order)]].topics:
                i += 1
            result[order[i % len(order)]].append(TopicPartition(topic, p))
            i += 1
    return result


# ------------------------------------------------------------------------- sticky

def _member_ownership(sub: Subscription, use_user_data: bool) -> tuple[tuple[TopicPartition, ...], int]:
    """What a member says it owned, and in which generation (Kafka's MemberData).

    The eager ``sticky`` assignor reads its own user data when present (its members clear
    owned partitions before joining); ``cooperative-sticky`` trusts the owned partitions,
    with the generation from the v2+ field or, for older subscriptions, from a 4-byte
    user data."""
    if use_user_data and sub.user_data:
        parts, generation = decode_sticky_user_data(sub.user_data)
        return parts, generation
    generation = sub.generation_id
    if generation == DEFAULT_GENERATION and not use_user_data and sub.user_data and len(sub.user_data) == 4:
        generation = struct.unpack(">i", sub.user_data)[0]
    return sub.owned_partitions, generation


def _valid_ownership(subscriptions: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int],
                     use_user_data: bool) -> dict[str, list[TopicPartition]]:
    """Owned partitions each member may keep: only the highest generation's claims count,
    a partition claimed twice in that generation counts as nobody's, and a partition must
    still exist and be of a topic the member subscribes to."""
    claims = {m: _member_ownership(s, use_user_data) for m, s in subscriptions.items()}
    max_generation = max((g for _, g in claims.values()), default=DEFAULT_GENERATION)
    claimed_by: dict[TopicPartition, list[str]] = {}
    for m in member_order(subscriptions):
        parts, generation = claims[m]
        if generation != max_generation:
            continue                      # stale generation: its claims are invalidated
        for tp in dict.fromkeys(parts):
            claimed_by.setdefault(tp, []).append(m)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    for m in member_order(subscriptions):
        parts, generation = claims[m]
        if generation != max_generation:
            continue
        topics = set(subscriptions[m].topics)
        for tp in dict.fromkeys(parts):
            if (len(claimed_by[tp]) == 1 and tp.topic in topics
                    and 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)):
                owned[m].append(tp)
    return owned


def _all_partitions(topics: Iterable[str], partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in sorted(set(topics)) for p in range(partitions_per_topic.get(t, 0))]


def _constrained_assign(order: list[str], owned: dict[str, list[TopicPartition]],
                        all_partitions: list[TopicPartition]) -> Assignments:
    """Kafka's quota algorithm for members that all subscribe to the same topics."""
    n_members, n_partitions = len(order), len(all_partitions)
    min_quota, extra = divmod(n_partitions, n_members)
    max_quota = min_quota + (1 if extra else 0)
    expected_over_min = extra             # members that end with max_quota partitions
    over_min = 0
    result: Assignments = {m: [] for m in order}
    assigned: set[TopicPartition] = set()
    under_min: list[str] = []             # members below min_quota, in member order
    exactly_min: list[str] = []           # members at min_quota that may still take one more
    for m in order:
        mine = owned[m]
        if len(mine) < min_quota:
            result[m].extend(mine)
            under_min.append(m)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            result[m].extend(mine[:max_quota])
            if over_min == expected_over_min:
                exactly_min.clear()
        else:
            result[m].extend(mine[:min_quota])
            if over_min < expected_over_min:
                exactly_min.append(m)
        assigned.update(result[m])
    unassigned = [tp for tp in all_partitions if tp not in assigned]
    i = 0
    for tp in unassigned:
        if under_min:
            # deal round-robin over the members still under min_quota
            if i >= len(under_min):
                i = 0
            m = under_min[i]
            result[m].append(tp)
            if len(result[m]) == min_quota:
                under_min.pop(i)          # the next member slides into slot i
                if over_min < expected_over_min:
                    exactly_min.append(m)
            else:
                i += 1
        else:
            assert exactly_min, "more partitions than quotas allow"
            m = exactly_min.pop(0)
            result[m].append(tp)
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
    return result


def _general_assign(order: list[str], subscriptions: Mapping[str, Subscription],
                    owned: dict[str, list[TopicPartition]], partitions_per_topic: Mapping[str, int]) -> Assignments:
    """Members with different subscriptions: keep owned, place the rest on the least
    loaded eligible member (fewest candidates first), then move single partitions from
    a member to an eligible one with 2+ fewer until none can move."""
    topic_members: dict[str, list[str]] = {}
    for m in order:
        for t in subscriptions[m].topics:
            if partitions_per_topic.get(t):
                topic_members.setdefault(t, []).append(m)
    rank = {m: i for i, m in enumerate(order)}
    result: Assignments = {m: list(owned[m]) for m in order}
    assigned = {tp for parts in result.values() for tp in parts}
    pending = [tp for tp in _all_partitions(topic_members, partitions_per_topic) if tp not in assigned]
    pending.sort(key=lambda tp: (len(topic_members[tp.topic]), tp.topic, tp.partition))
    for tp in pending:
        m = min(topic_members[tp.topic], key=lambda c: (len(result[c]), rank[c]))
        result[m].append(tp)
    # Balance. Every move lowers the sum of squared loads, so this ends.
    moved = True
    while moved:
        moved = False
        for a in sorted(order, key=lambda c: (-len(result[c]), rank[c])):
            # newest first: keep what the member owned before if anything can move instead
            for tp in reversed(result[a]):
                candidates = [b for b in topic_members[tp.topic] if len(result[b]) < len(result[a]) - 1]
                if candidates:
                    b = min(candidates, key=lambda c: (len(result[c]), rank[c]))
                    result[a].remove(tp)
                    result[b].append(tp)
                    moved = True
                    break
            if moved:
                break
    return result


def _sticky(subscriptions: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int],
            use_user_data: bool) -> tuple[Assignments, dict[str, list[TopicPartition]]]:
    order = member_order(subscriptions)
    if not order:
        return {}, {}
    owned = _valid_ownership(subscriptions, partitions_per_topic, use_user_data)
    topic_sets = {frozenset(s.topics) for s in subscriptions.values()}
    if len(topic_sets) == 1:
        result = _constrained_assign(order, owned, _all_partitions(next(iter(topic_sets)), partitions_per_topic))
    else:
        result = _general_assign(order, subscriptions, owned, partitions_per_topic)
    return result, owned


def sticky_assign(subscriptions: Mapping[str, Subscription],
                  partitions_per_topic: Mapping[str, int]) -> Assignments:
    return _sticky(subscriptions, partitions_per_topic, use_user_data=True)[0]


def cooperative_sticky_assign(subscriptions: Mapping[str, Subscription],
                              partitions_per_topic: Mapping[str, int]) -> Assignments:
    result, owned = _sticky(subscriptions, partitions_per_topic, use_user_data=False)
    # Claims from every member still here (any generation): a partition moving away from
    # one of them is withheld this round, so that it is never owned twice at once.
    owner: dict[TopicPartition, str] = {}
    for m, s in subscriptions.items():
        for tp in _member_ownership(s, False)[0]:
            owner.setdefault(tp, m)
    for m, parts in owned.items():
        for tp in parts:
            owner[tp] = m
    return {m: [tp for tp in parts if owner.get(tp, m) == m] for m, parts in result.items()}


def partitions_transferring(subscriptions: Mapping[str, Subscription],
                            assignment: Mapping[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    """Partitions that move from a member still in the group to another (Kafka's
    ``partitionsTransferringOwnership``): the moves a cooperative rebalance defers."""
    previous: dict[TopicPartition, str] = {}
    for m, s in subscriptions.items():
        for tp in _member_ownership(s, False)[0]:
            previous.setdefault(tp, m)
    return {tp: m for m, parts in assignment.items() for tp in parts if previous.get(tp, m) != m}


# ------------------------------------------------------------------------- the registry

@dataclass(frozen=True, slots=True)
class Assignor:
    """An assignor as JoinGroup names it, with the protocols it supports (the first is
    preferred) and how a member describes itself to it."""
    name: str
    protocols: tuple[RebalanceProtocol, ...]
    assign_fn: object = field(repr=False)

    def assign(self, subscriptions: Mapping[str, Subscription],
               partitions_per_topic: Mapping[str, int]) -> Assignments:
        return self.assign_fn(subscriptions, partitions_per_topic)  # type: ignore[operator]

    def subscription(self, topics: Iterable[str], owned: Iterable[TopicPartition], generation_id: int,
                     rack_id: str | None = None) -> Subscription:
        owned = tuple(sorted(owned))
        user_data: bytes | None = None
        if self.name == "sticky":
            user_data = encode_sticky_user_data(owned, generation_id)
            owned = ()                    # eager: nothing is owned while joining
        elif self.name == "cooperative-sticky":
            user_data = struct.pack(">i", generation_id)   # for leaders reading v0/v1 only
        elif RebalanceProtocol.COOPERATIVE not in self.protocols:
            owned = ()
        return Subscription(topics=tuple(sorted(set(topics))), user_data=user_data,
                            owned_partitions=owned, generation_id=generation_id, rack_id=rack_id)


ASSIGNORS: dict[str, Assignor] = {
    "range": Assignor("range", (RebalanceProtocol.EAGER,), range_assign),
    "roundrobin": Assignor("roundrobin", (RebalanceProtocol.EAGER,), roundrobin_assign),
    "sticky": Assignor("sticky", (RebalanceProtocol.EAGER,), sticky_assign),
    "cooperative-sticky": Assignor("cooperative-sticky",
                                   (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
                                   cooperative_sticky_assign),
}

# The Java client's class names, accepted in partition.assignment.strategy too.
_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def assignor_for(name: str) -> Assignor:
    """The assignor for a ``partition.assignment.strategy`` entry; KeyError names it."""
    key = _JAVA_NAMES.get(name.strip(), name.strip())
    try:
        return ASSIGNORS[key]
    except KeyError:
        raise KeyError(f"unknown partition assignor {name!r} (known: {', '.join(ASSIGNORS)})") from None
