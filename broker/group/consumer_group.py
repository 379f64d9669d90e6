"""KIP-848 consumer groups: the group, its members and the reconciliation, sans I/O.

Theory of operation
-------------------
In the consumer group protocol the coordinator, not a leader member, assigns partitions.
Each member heartbeats (ConsumerGroupHeartbeat) with its subscription and the partitions
it owns; the coordinator answers with the member's epoch and, when it changed, its
assignment. Three epochs drive it (Kafka's GroupMetadataManager.consumerGroupHeartbeat):

1. the **group epoch** is bumped whenever a member joins, leaves or changes what it
   subscribes to, or a subscribed topic's partition count changes;
2. when the group epoch is ahead of the **target assignment epoch**, the server-side
   assignor (``uniform`` or ``range``) computes a new target assignment for every member
   and the target epoch catches up;
3. each member then **reconciles** towards its target (``next_assignment``, Kafka's
   CurrentAssignmentBuilder): it keeps what it owns and is still its target; partitions
   it must give up are *pending revocation* and it stays at its epoch
   (UNREVOKED_PARTITIONS) until a heartbeat no longer reports them; then it moves to the
   target epoch and receives the new partitions that are free — a partition still held by
   another member (at any epoch) is *unreleased* and waits (UNRELEASED_PARTITIONS). So no
   partition is ever owned by two members at once, and nobody stops the world.

Everything here is durable state, written as the records of ``ConsumerGroupRecordType``
(Kafka's ConsumerGroup* schemas) and changed only by ``ConsumerGroup.replay``: the
coordinator replays the records a command returns at once, appends them, and answers when
the append is acknowledged (rebuilding the group from its acknowledged records if the
append fails), so a new coordinator loads exactly the group the old one acknowledged.
Deadlines (session, revocation, classic members' rejoin) are volatile and restart on load.

Members of the classic protocol (JoinGroup/SyncGroup/Heartbeat) may live in a consumer
group: that is how a group migrates online (KIP-848's upgrade path). Their subscription
and owned partitions come from the embedded ConsumerProtocolSubscription; they are told to
rejoin (REBALANCE_IN_PROGRESS) whenever they must give up or may receive partitions.
"""
from __future__ import annotations

import dataclasses
import enum
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from clients._core.assignors import Subscription, range_assign, sticky_assign
from clients.protocol import messages as schemas
from clients.types import TopicPartition

from broker.group.records import ConsumerGroupKey, ConsumerGroupRecordType, CoordinatorRecord

__all__ = [
    "ASSIGNORS", "ClassicProtocolMember", "ConsumerGroup", "ConsumerGroupMember",
    "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "MemberState",
    "Partitions", "TopicsView", "next_assignment", "target_assignment",
]

T = ConsumerGroupRecordType
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_PREVIOUS_EPOCH = -1

Partitions = Mapping[uuid.UUID, frozenset[int]]
# Topic name -> (topic id, partition count): what the coordinator knows of the metadata.
TopicsView = Mapping[str, tuple[uuid.UUID, int]]


class MemberState(enum.IntEnum):
    """Kafka's MemberState, by the byte it is stored as."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ClassicProtocolMember:
    """What a member speaking the classic protocol adds (ClassicMemberMetadata)."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]     # (assignor name, subscription) in order

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicProtocolMember | None = None
    member_epoch: int = 0
    previous_member_epoch: int = NO_PREVIOUS_EPOCH
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    def subscribed_topics(self, topics: Iterable[str]) -> set[str]:
        """Topic names it subscribes to, the regex (matched whole, as Kafka's RE2J)
        resolved against ``topics``; internal topics never match a regex."""
        names = set(self.subscribed_topic_names)
        if self.subscribed_topic_regex:
            pattern = re.compile(self.subscribed_topic_regex)
            names |= {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
        return names

    def same_subscription(self, other: "ConsumerGroupMember") -> bool:
        return (set(self.subscribed_topic_names) == set(other.subscribed_topic_names)
                and self.subscribed_topic_regex == other.subscribed_topic_regex
                and self.server_assignor == other.server_assignor
                and self.rack_id == other.rack_id)

    def owns_any(self, owned: Partitions | None, partitions: Partitions) -> bool:
        """Whether ``owned`` (what the member reports; None = unknown) holds any of
        ``partitions``."""
        if owned is None:
            return True
        return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def _freeze(partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


# ------------------------------------------------------------------ reconciliation

def next_assignment(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
                    owned: Partitions | None,
                    partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder: one step of ``member`` towards ``target``.

    ``owned``: the partitions the member reports owning (None: not reported this time);
    ``partition_epoch(topic_id, p)``: the epoch of the member currently holding ``p``,
    -1 if none (the member itself included: it only asks about partitions it lacks)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _compute(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if member.owns_any(owned, member.pending_revocation):
            return member
        return _compute(member, member.member_epoch + 1, target_epoch, target, owned,
                        partition_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    # UNKNOWN (a newer coordinator's state): start again from the target, as Kafka does.
    return _compute(member, target_epoch, target_epoch, target, owned, partition_epoch)


def _compute(member: ConsumerGroupMember, member_epoch: int, target_epoch: int,
             target: Partitions, owned: Partitions | None,
             partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    adding: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        assigned[topic_id] = set(keep)
        revoking[topic_id] = set(have - keep)
        free = set()
        for p in want - keep:
            if partition_epoch(topic_id, p) != -1:
                unreleased = True
            else:
                free.add(p)
        adding[topic_id] = free
    revoking_f = _freeze(revoking)
    if revoking_f and member.owns_any(owned, revoking_f):
        return _advance(member, member_epoch, MemberState.UNREVOKED_PARTITIONS,
                        _freeze(assigned), revoking_f)
    for topic_id, ps in adding.items():
        assigned[topic_id] |= ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _advance(member, target_epoch, state, _freeze(assigned), {})


def _advance(member: ConsumerGroupMember, epoch: int, state: MemberState,
             assigned: Partitions, revoking: Partitions) -> ConsumerGroupMember:
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return dataclasses.replace(member, member_epoch=epoch, previous_member_epoch=previous,
                               state=state, assigned=assigned, pending_revocation=revoking)


# ------------------------------------------------------------------ assignors

def _assign_with(assign: Callable[[Mapping[str, Subscription], Mapping[str, int]],
                                  Mapping[str, list[TopicPartition]]]):
    def run(members: Mapping[str, ConsumerGroupMember], subscriptions: Mapping[str, set[str]],
            current: Mapping[str, Partitions], topics: TopicsView,
            epoch: int) -> dict[str, Partitions]:
        names = {topic_id: name for name, (topic_id, _) in topics.items()}
        subs = {m: Subscription(
            topics=tuple(sorted(subscriptions[m])),
            owned_partitions=tuple(TopicPartition(names[t], p)
                                   for t, ps in sorted(current.get(m, {}).items())
                                   if t in names for p in sorted(ps)),
            generation_id=epoch, rack_id=members[m].rack_id,
            group_instance_id=members[m].instance_id) for m in members}
        counts = {name: n for name, (_, n) in topics.items()}
        out: dict[str, Partitions] = {}
        for m, tps in assign(subs, counts).items():
            by_topic: dict[uuid.UUID, set[int]] = {}
            for tp in tps:
                by_topic.setdefault(topics[tp.topic][0], set()).add(tp.partition)
            out[m] = _freeze(by_topic)
        return out
    return run


# The server-side assignors (group.consumer.assignors): ``uniform`` is the balanced, sticky
# assignment (the client-side sticky assignor's algorithm, keeping each member's previous
# target where balance allows); ``range`` the classic range assignor (co-partitioned
# topics land together). The first is the default, as in Kafka.
ASSIGNORS = {"uniform": _assign_with(sticky_assign), "range": _assign_with(range_assign)}


def target_assignment(members: Mapping[str, ConsumerGroupMember],
                      current: Mapping[str, Partitions], topics: TopicsView,
                      assignor: str, epoch: int) -> dict[str, Partitions]:
    """The target assignment of every member over the subscribed ``topics``."""
    known = set(topics)
    subscriptions = {m: member.subscribed_topics(known) & known for m, member in members.items()}
    return ASSIGNORS[assignor](members, subscriptions, current, topics, epoch)


# ------------------------------------------------------------------ the group

class ConsumerGroup:
    """One KIP-848 group: what its records say, plus volatile deadlines."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Partitions] = {}
        # name -> (topic id, partitions) of the topics members subscribe to, as last written
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.exists = False      # a ConsumerGroupMetadata record is live
        # volatile: member id -> deadline (ms)
        self.session_deadline: dict[str, int] = {}
        self.rebalance_deadline: dict[str, int] = {}   # revocation / classic rejoin

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, epoch={self.group_epoch}, "
                f"target={self.assignment_epoch}, members={sorted(self.members)})")

    # ---------------------------------------------------------------- replay

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        value: Any = record.value      # the generated class of the key's record type
        assert isinstance(key, ConsumerGroupKey) and key.group_id == self.group_id
        t, m = key.record_type, key.member_id
        if t is T.GROUP_METADATA:
            self.exists = value is not None
            if value is not None:
                self.group_epoch = value.epoch
        elif t is T.PARTITION_METADATA:
            self.subscription_metadata = {} if value is None else {
                tm.topic_name: (tm.topic_id, tm.num_partitions) for tm in value.topics}
        elif t is T.TARGET_ASSIGNMENT_METADATA:
            if value is not None:
                self.assignment_epoch = value.assignment_epoch
        elif t is T.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(m, None)
            else:
                self.target[m] = _freeze({tp.topic_id: tp.partitions
                                          for tp in value.topic_partitions})
        elif t is T.MEMBER_METADATA:
            if value is None:
                self.members.pop(m, None)
                self.session_deadline.pop(m, None)
                self.rebalance_deadline.pop(m, None)
                return
            classic = None
            if value.classic_member_metadata is not None:
                c = value.classic_member_metadata
                classic = ClassicProtocolMember(c.session_timeout_ms, tuple(
                    (p.name, bytes(p.metadata)) for p in c.supported_protocols))
            old = self.members.get(m) or ConsumerGroupMember(m)
            self.members[m] = dataclasses.replace(
                old, instance_id=value.instance_id, rack_id=value.rack_id,
                client_id=value.client_id, client_host=value.client_host,
                subscribed_topic_names=tuple(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor, classic=classic)
        elif t is T.CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                if m in self.members:
                    self.members[m] = dataclasses.replace(
                        self.members[m], member_epoch=0, previous_member_epoch=NO_PREVIOUS_EPOCH,
                        state=MemberState.STABLE, assigned={}, pending_revocation={})
                return
            old = self.members.get(m) or ConsumerGroupMember(m)
            state = value.state if value.state in MemberState._value2member_map_ \
                else MemberState.UNKNOWN
            self.members[m] = dataclasses.replace(
                old, member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch, state=MemberState(state),
                assigned=_freeze({tp.topic_id: tp.partitions for tp in value.assigned_partitions}),
                pending_revocation=_freeze({tp.topic_id: tp.partitions
                                            for tp in value.partitions_pending_revocation}))

    # ---------------------------------------------------------------- views

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup state names (ListGroups, describe)."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def partition_epochs(self, excluding: str | None = None) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> epoch of the member holding it (assigned or still
        being revoked)."""
        out = {}
        for member in self.members.values():
            if member.member_id == excluding:
                continue
            for parts in (member.assigned, member.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        out[(t, p)] = member.member_epoch
        return out

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return next((m.member_id for m in self.members.values()
                     if m.instance_id == instance_id), None)

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (Kafka's ConsumerGroup.preferredServerAssignor)."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else default

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Whether some partition of its target is still held by another member."""
        epochs = self.partition_epochs(excluding=member.member_id)
        target = self.target.get(member.member_id, {})
        return any((t, p) in epochs for t, ps in target.items() for p in ps
                   if p not in member.assigned.get(t, frozenset()))

    def uses_only_classic(self) -> bool:
        return all(m.classic is not None for m in self.members.values())


# ------------------------------------------------------------------ records

def _key(group_id: str, t: ConsumerGroupRecordType, member_id: str = "") -> ConsumerGroupKey:
    return ConsumerGroupKey(group_id, t, member_id)


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(_key(group_id, T.GROUP_METADATA),
                             schemas.ConsumerGroupMetadataValue(epoch=epoch))


def partition_metadata_record(group_id: str, metadata: TopicsView) -> CoordinatorRecord:
    V = schemas.ConsumerGroupPartitionMetadataValue
    return CoordinatorRecord(_key(group_id, T.PARTITION_METADATA), V(topics=[
        V.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
        for name, (tid, n) in sorted(metadata.items())]))


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    V = schemas.ConsumerGroupMemberMetadataValue
    classic = None
    if m.classic is not None:
        classic = V.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[V.ClassicProtocol(name=n, metadata=md)
                                 for n, md in m.classic.protocols])
    return CoordinatorRecord(_key(group_id, T.MEMBER_METADATA, m.member_id), V(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=classic))


def _topic_partitions(cls: Any, parts: Partitions) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(parts.items())]


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    V = schemas.ConsumerGroupCurrentMemberAssignmentValue
    return CoordinatorRecord(_key(group_id, T.CURRENT_MEMBER_ASSIGNMENT, m.member_id), V(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=int(m.state), assigned_partitions=_topic_partitions(V.TopicPartitions, m.assigned),
        partitions_pending_revocation=_topic_partitions(V.TopicPartitions, m.pending_revocation)))


def target_member_record(group_id: str, member_id: str, parts: Partitions) -> CoordinatorRecord:
    V = schemas.ConsumerGroupTargetAssignmentMemberValue
    return CoordinatorRecord(_key(group_id, T.TARGET_ASSIGNMENT_MEMBER, member_id),
                             V(topic_partitions=_topic_partitions(V.TopicPartition, parts)))


def target_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(_key(group_id, T.TARGET_ASSIGNMENT_METADATA),
                             schemas.ConsumerGroupTargetAssignmentMetadataValue(
                                 assignment_epoch=epoch))


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Removing a member: its current assignment, then its target, then its metadata
    (Kafka's order, so a replay never sees an assignment without a member)."""
    return [CoordinatorRecord(_key(group_id, t, member_id), None)
            for t in (T.CURRENT_MEMBER_ASSIGNMENT, T.TARGET_ASSIGNMENT_MEMBER, T.MEMBER_METADATA)]


def group_tombstones(group_id: str) -> list[CoordinatorRecord]:
    return [CoordinatorRecord(_key(group_id, t), None)
            for t in (T.TARGET_ASSIGNMENT_METADATA, T.PARTITION_METADATA, T.GROUP_METADATA)]
