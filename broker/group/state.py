"""One classic consumer group: its state, members, generation and rebalance bookkeeping.

Theory of operation
-------------------
This is the data half of Kafka's classic group protocol (``GroupMetadata`` /
``ClassicGroup`` in apache/kafka); the rules that move it live in ``coordinator.py``. A
group is in one of five states::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
      ^                 ^   |                                                    |
      |                 |   +--nobody left------------------> Empty              | leader's
      |                 +--join/leave/timeout-- Stable <--assignment written------+ SyncGroup
      +--------------------------------------------------------------------------+
    any state --deleted, offsets expired or partition unloaded--> Dead

- **Empty**: no members. Offsets may still be committed (generation -1 "simple" commits),
  and the group's offsets expire ``offsets.retention.minutes`` after it became empty.
- **PreparingRebalance**: the coordinator waits for every member to (re)send JoinGroup,
  bounded by the largest rebalance timeout among members. A group leaving Empty waits
  ``group.initial.rebalance.delay.ms`` first (KIP-134) so that a fleet starting together
  forms one generation instead of many.
- **CompletingRebalance**: a new generation exists; JoinGroup responses went out (the
  leader got every member's subscription); the coordinator waits for the leader's
  SyncGroup carrying the assignment. Followers' SyncGroups are parked until then.
- **Stable**: the assignment is written to ``__consumer_offsets``; members heartbeat.
- **Dead**: the group is gone (deleted, expired, or its partition moved away). Terminal.

``VALID_PREVIOUS_STATES`` is Kafka's transition table, kept as data; ``transition_to``
asserts against it, so an illegal transition is a bug that stops the process.

Members. A member is *dynamic* (the coordinator names it ``<client.id>-<uuid>``) or
*static* (KIP-345: it brings a ``group.instance.id``; a restart with the same instance id
takes over the old member's place without a rebalance). KIP-394: a dynamic member joining
with JoinGroup v4+ first gets MEMBER_ID_REQUIRED and a new id, and is *pending* until it
joins again with that id; pending members are tracked apart from members.

A member may have one parked JoinGroup (``awaiting_join``) and one parked SyncGroup
(``awaiting_sync``): the request tokens the shell is waiting on, with the request version,
so the eventual response can be shaped for it.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Hashable

from clients.protocol import decode_message, messages
from clients.protocol.types import CorruptFrameError

__all__ = [
    "CONSUMER_PROTOCOL_TYPE", "ClassicGroup", "GroupState", "Member", "Parked",
    "UNKNOWN_GENERATION_ID", "UNKNOWN_MEMBER_ID", "VALID_PREVIOUS_STATES",
    "decode_subscribed_topics",
]

UNKNOWN_MEMBER_ID = ""
UNKNOWN_GENERATION_ID = -1
NO_TIMESTAMP = -1
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# For each state, the states it may be entered from (Kafka GroupState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True, slots=True)
class Parked:
    """A request the shell is holding open until the coordinator completes it."""
    token: Hashable
    version: int


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference. Invariant: non-empty.
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    # A member that has not finished its first join; it cannot heartbeat yet, so it
    # expires after new_member_join_timeout_ms instead of the session timeout.
    is_new: bool = False
    heartbeat_deadline_ms: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise AssertionError(f"member {self.member_id} does not support {protocol_name}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols, same metadata, same order (Kafka MemberMetadata.matches)."""
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def session_timer_running(self) -> bool:
        # Kafka MemberMetadata.hasSatisfiedHeartbeat: a member waiting in JoinGroup or
        # SyncGroup satisfies heartbeats (the rebalance timeout bounds it instead), unless it
        # is new (then its join may expire).
        return self.is_new or (self.awaiting_join is None and self.awaiting_sync is None)


def decode_subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics of a ``consumer`` protocol subscription, or None if it does not decode."""
    if len(metadata) < 2:
        return None
    version = int.from_bytes(metadata[:2], "big", signed=True)
    spec_max = messages.ConsumerProtocolSubscription.SCHEMA.max_version
    if version < 0:
        return None
    try:
        # Newer subscription versions only add fields (KIP-429, KIP-881), so read a newer
        # one with the newest layout known here, as Kafka's ConsumerProtocol does.
        sub = decode_message(messages.ConsumerProtocolSubscription, min(version, spec_max),
                             bytes(metadata[2:]))
    except (CorruptFrameError, ValueError):
        return None
    return frozenset(sub.topics)


class ClassicGroup:
    """One group's membership and rebalance state. Pure bookkeeping, no policy."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.current_state_timestamp_ms = now_ms   # NO_TIMESTAMP if loaded without one
        self.protocol_type: str | None = None      # set by the first member of an empty group
        # Invariant: None when Empty; the selected protocol from CompletingRebalance on.
        self.protocol_name: str | None = None
        self.generation_id = 0                     # Invariant: never decreases
        # Invariant: leader_id is None iff members is empty; otherwise leader_id in members.
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}       # in join order
        # Invariant: static_members[i] == m  iff  members[m].group_instance_id == i
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, int] = {}  # KIP-394 member id -> expiry time (ms)
        # Members of this generation that have not sent SyncGroup yet.
        # Invariant: pending_sync_members <= members.keys()
        self.pending_sync_members: set[str] = set()
        # How many members support each protocol name.
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False              # KIP-134: extend the initial delay
        self.subscribed_topics: frozenset[str] | None = None   # None: unknown
        # Timers. join_deadline_ms: set iff PreparingRebalance (the DelayedJoin). While
        # join_is_initial, joins do not complete it early (InitialDelayedJoin).
        self.join_deadline_ms: int | None = None
        self.join_is_initial = False
        self.initial_delay_remaining_ms = 0
        # sync_deadline_ms: set while pending_sync_members is waited on (DelayedSync).
        self.sync_deadline_ms: int | None = None

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
                f"leader={self.leader_id!r}, members={list(self.members)})")

    # ------------------------------------------------------------------ state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        assert self.state in VALID_PREVIOUS_STATES[target], \
            f"group {self.group_id}: invalid transition {self.state.value} -> {target.value}"
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def is_unused(self) -> bool:
        """Empty with nobody joining: nothing but (maybe) offsets keeps it alive."""
        return self.state is GroupState.EMPTY and not self.members and not self.pending_members

    # ------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """The instance id belongs to a different member id: ``member_id`` is a zombie."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def add_member(self, member: Member) -> None:
        assert member.member_id not in self.members
        assert member.protocols, "a member supports at least one protocol"
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id   # the first member to join leads
        self.supported_protocols.update(member.protocol_names())
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove_member(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()   # drop zero counts
        if member.group_instance_id is not None:
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member_protocols(self, member: Member,
                                protocols: tuple[tuple[str, bytes], ...],
                                rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> Member:
        """The static member ``old_member_id`` continues as ``new_member_id``.

        The caller completes the old id's parked requests (FENCED_INSTANCE_ID) first."""
        member = self.members.pop(old_member_id)
        assert member.group_instance_id == group_instance_id
        assert member.awaiting_join is None and member.awaiting_sync is None
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join is not None for m in self.members.values())
                and not self.pending_members)

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join is not None:
                self.leader_id = member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, names: tuple[str, ...],
                           member_id: str | None = None) -> bool:
        """Could a member with these protocols be in the group?

        ``member_id``: an existing member rejoining, whose own current protocols do not
        count (Kafka counts them, which refuses a lone member changing its assignors)."""
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and len(names) > 0
        if self.protocol_type != protocol_type:
            return False
        counts = Counter(self.supported_protocols)
        others = len(self.members)
        if member_id is not None and member_id in self.members:
            counts.subtract(self.members[member_id].protocol_names())
            others -= 1
        return any(counts[name] == others for name in names)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer.

        Ties go to the protocol first voted for in join order (Kafka leaves ties to hash
        order; Ketch makes them deterministic)."""
        assert self.members, "no protocol to select in an empty group"
        candidates = self.candidate_protocols()
        assert candidates, f"group {self.group_id}: members share no protocol"
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = decode_subscribed_topics(member.metadata(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def init_next_generation(self, now_ms: int) -> None:
        assert self.state is GroupState.PREPARING_REBALANCE
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def check_invariants(self) -> None:
        """For tests and simulations: the invariants written beside the fields."""
        assert (self.leader_id is None) == (not self.members), self
        assert self.leader_id is None or self.leader_id in self.members, self
        assert self.static_members == {m.group_instance_id: mid for mid, m in self.members.items()
                                       if m.group_instance_id is not None}, self
        assert self.pending_sync_members <= set(self.members), self
        assert not (set(self.pending_members) & set(self.members)), self
        expected: Counter[str] = Counter()
        for m in self.members.values():
            expected.update(m.protocol_names())
        assert +self.supported_protocols == expected, self
        assert (self.join_deadline_ms is not None) == (
            self.state is GroupState.PREPARING_REBALANCE), self
        if self.state is GroupState.EMPTY:
            assert not self.members and self.protocol_name is None, self
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert self.members and self.protocol_name is not None, self
            assert self.protocol_name in self.candidate_protocols(), self
        if self.state is not GroupState.PREPARING_REBALANCE:
            assert all(m.awaiting_join is None or self.state is GroupState.STABLE
                       for m in self.members.values()), self
        if self.state is not GroupState.COMPLETING_REBALANCE:
            assert all(m.awaiting_sync is None for m in self.members.values()), self
