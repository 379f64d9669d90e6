"""The consumer side of Kafka's classic group protocol, as a pure state machine.

Theory of operation
-------------------
A member finds its coordinator (FindCoordinator), joins (JoinGroup), learns its partitions
(SyncGroup), keeps its session alive (Heartbeat) and leaves (LeaveGroup). The coordinator
decides when a rebalance happens; the member decides what to send next and what its
application must be told (Kafka's AbstractCoordinator + ConsumerCoordinator, here without
threads or sockets). The shell calls ``poll(now_ms)`` and carries out the effects it gets
back, in order; every response comes back through ``handle_<api>_response``, every broken
or timed-out request through ``handle_request_failed``. ``poll_timeout_ms(now_ms)`` says
when the machine next needs to run.

States and transitions (one request in flight at most)::

    UNJOINED --poll: coordinator known--> PREPARING (revoke; heartbeats go on until every
        listener call has run) --> JOINING --JoinGroup ok--> SYNCING
        (leader: ASSIGNING until the shell hands back partitions per topic)
    SYNCING --SyncGroup ok--> STABLE --heartbeat REBALANCE_IN_PROGRESS--> UNJOINED (rejoin)
    any --UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION--> UNJOINED with generation reset (lost)
    any --NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / broken connection--> coordinator
        unknown (rediscovered on the next poll)
    any --FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, ...--> FATAL (raised to the user)
    STABLE --max.poll.interval.ms without poll()--> UNJOINED after LeaveGroup (a dynamic
        member; a static one stays silent and lets session.timeout.ms decide, KIP-345)
    any --leave()--> LEFT

Rebalance protocols (KIP-429). EAGER: before each JoinGroup the member revokes everything
it owns (``PartitionsRevoked`` effect), and SyncGroup's answer is its whole assignment.
COOPERATIVE: the member keeps what it owns while rejoining and tells the assignor about it;
after SyncGroup it revokes only what it lost, and if it lost anything it rejoins at once,
so the partitions it released can be given out in a second rebalance. The protocol is the
one every configured assignor supports (cooperative only if all of them do, as Kafka).

Listener calls are effects: ``PartitionsRevoked`` (the member still owns them and may
commit), ``PartitionsAssigned``, ``PartitionsLost`` (the generation is gone: someone else
may own them now, so nothing may be committed for them). They come in the order they must
run, and the shell reports each one done (``listener_done``). A JoinGroup is sent only
when none is outstanding, because a revoking member commits before others get the
partitions; meanwhile (PREPARING) the member keeps heartbeating with its generation, as
the Java client's heartbeat thread does while ``onPartitionsRevoked`` runs, so a slow
listener costs no session.

MEMBER_ID_REQUIRED (KIP-394): a new dynamic member's first JoinGroup is refused with a
member id to use; the member rejoins with it at once. Static members (group.instance.id,
KIP-345) skip that step and survive a restart within session.timeout.ms without a
rebalance; they never send LeaveGroup on a poll timeout, only on close if asked.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping, Union

from clients._core.assignors import (
    DEFAULT_GENERATION, Assignment, Assignor, RebalanceProtocol, Subscription, decode_assignment,
    decode_subscription, encode_assignment, encode_subscription,
)
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.protocol.types import CorruptFrameError
from clients.types import TopicPartition

__all__ = [
    "MemberState", "Membership", "MembershipConfig", "FindCoordinator", "SendJoinGroup",
    "SendSyncGroup", "SendHeartbeat", "SendLeaveGroup", "NeedAssignment", "PartitionsRevoked",
    "PartitionsAssigned", "PartitionsLost", "Fatal", "Effect", "UNKNOWN_MEMBER_ID",
    "common_protocol",
]

UNKNOWN_MEMBER_ID = ""            # Kafka's JoinGroupRequest.UNKNOWN_MEMBER_ID
PROTOCOL_TYPE = "consumer"


class MemberState(Enum):
    UNJOINED = "unjoined"         # not in a generation (or must rejoin)
    PREPARING = "preparing"       # rejoining: waiting for listener calls to run; heartbeats go on
    JOINING = "joining"           # JoinGroup in flight
    ASSIGNING = "assigning"       # leader: waiting for partitions per topic to run the assignor
    SYNCING = "syncing"           # SyncGroup in flight
    STABLE = "stable"             # in a generation, heartbeating
    LEFT = "left"                 # left on purpose (close/unsubscribe); nothing more is sent
    FATAL = "fatal"               # an error the application must see; nothing more is sent


# -- effects ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FindCoordinator:
    group_id: str


@dataclass(frozen=True, slots=True)
class SendJoinGroup:
    """Emitted only once every listener call handed out before it has run (the shell
    reports each with ``listener_done``)."""
    request: object


@dataclass(frozen=True, slots=True)
class SendSyncGroup:
    request: object


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    request: object


@dataclass(frozen=True, slots=True)
class SendLeaveGroup:
    request: object


@dataclass(frozen=True, slots=True)
class NeedAssignment:
    """Leader only: fetch partitions per topic for these topics, then call
    ``perform_assignment``."""
    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class PartitionsRevoked:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class PartitionsAssigned:
    partitions: frozenset[TopicPartition]       # added by this rebalance (all of them, eager)
    assignment: frozenset[TopicPartition]       # everything now owned


@dataclass(frozen=True, slots=True)
class PartitionsLost:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Fatal:
    error_code: int
    message: str


Effect = Union[FindCoordinator, SendJoinGroup, SendSyncGroup, SendHeartbeat, SendLeaveGroup,
               NeedAssignment, PartitionsRevoked, PartitionsAssigned, PartitionsLost, Fatal]


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    group_id: str
    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000          # max.poll.interval.ms, as the Java client
    heartbeat_interval_ms: int = 3000
    retry_backoff_ms: int = 100
    group_instance_id: str | None = None
    rack_id: str | None = None
    leave_group_on_close: bool = False          # static members leave on close only if asked

    def __post_init__(self) -> None:
        assert self.group_id, "a group member needs a group id"
        assert 0 < self.heartbeat_interval_ms < self.session_timeout_ms, \
            "heartbeat.interval.ms must be below session.timeout.ms"


def common_protocol(assignors: Iterable[Assignor]) -> RebalanceProtocol:
    """COOPERATIVE if every assignor supports it, else EAGER (ConsumerCoordinator)."""
    assignors = list(assignors)
    if assignors and all(RebalanceProtocol.COOPERATIVE in a.protocols for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER


# Errors after which the member starts over without its generation (partitions lost).
_RESET_MEMBER = {ErrorCode.UNKNOWN_MEMBER_ID}
_RESET_GENERATION = {ErrorCode.ILLEGAL_GENERATION}
_COORDINATOR_GONE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_FATAL = {ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
          ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.INVALID_SESSION_TIMEOUT,
          ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.INVALID_GROUP_ID,
          ErrorCode.UNSUPPORTED_VERSION, ErrorCode.INCONSISTENT_GROUP_PROTOCOL}


class Membership:
    """One consumer's membership in one group. All times are ``now_ms`` arguments."""

    def __init__(self, config: MembershipConfig, assignors: list[Assignor], now_ms: int) -> None:
        assert assignors, "at least one assignor"
        self.config = config
        self.assignors = list(assignors)
        self.protocol = common_protocol(self.assignors)
        self.state = MemberState.UNJOINED
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation_id = DEFAULT_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.coordinator: int | None = None
        self.subscription: frozenset[str] = frozenset()
        # Invariant: owned is what the application was last told it has (assigned minus
        # revoked/lost); it is what a cooperative member reports as owned when rejoining.
        self.owned: frozenset[TopicPartition] = frozenset()
        # The last assignment, kept through an eager revocation: the sticky assignor's
        # user data reports it (KIP-341); cleared when the generation is lost.
        self.previous_assignment: frozenset[TopicPartition] = frozenset()
        self.need_rejoin = True
        self.rejoin_reason = "initial join"
        self.in_flight: str | None = None       # "find" | "join" | "sync" | "heartbeat" | "leave"
        self.backoff_until_ms = 0
        self.last_heartbeat_sent_ms = now_ms
        self.last_heartbeat_ok_ms = now_ms
        self.last_poll_ms = now_ms
        self.poll_timed_out = False
        self.fatal: Fatal | None = None
        # Invariant: listener effects handed out and not yet reported done by the shell.
        self.listener_calls_pending = 0
        self._join_members: list = []           # leader: JoinGroup's member list
        self._assigned_snapshot: dict[str, int] = {}   # leader: partitions per topic it used
        self._joined_subscription: frozenset[str] = frozenset()

    # -- what the application does ------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = frozenset(topics)
        if topics != self.subscription:
            self.subscription = topics
            if self.state is not MemberState.LEFT:
                self.request_rejoin("subscription changed")

    def request_rejoin(self, reason: str) -> None:
        self.need_rejoin = True
        self.rejoin_reason = reason

    def note_poll(self, now_ms: int) -> None:
        """The application called poll(): the max.poll.interval.ms clock restarts."""
        self.last_poll_ms = now_ms
        if self.poll_timed_out:
            self.poll_timed_out = False
            self.request_rejoin("poll() called again after max.poll.interval.ms")

    def leave(self, now_ms: int) -> list[Effect]:
        """Leave for good (close / unsubscribe). Revokes what is owned; sends LeaveGroup
        unless a static member is configured to keep its place across restarts."""
        effects: list[Effect] = []
        if self.owned:
            lost = self.generation_id == DEFAULT_GENERATION
            effects.append(self._listener(PartitionsLost(self.owned) if lost else PartitionsRevoked(self.owned)))
            self.owned = frozenset()
        send = (self.member_id != UNKNOWN_MEMBER_ID and self.coordinator is not None
                and (self.config.group_instance_id is None or self.config.leave_group_on_close))
        if send:
            effects.append(SendLeaveGroup(self._leave_request("the consumer is closing")))
        # The generation stays ours until the LeaveGroup is answered: the revocation
        # before it may still commit with it.
        self.state = MemberState.LEFT
        self.in_flight = "leave" if send else None
        return effects

    @property
    def stable(self) -> bool:
        return self.state is MemberState.STABLE and not self.need_rejoin

    def commit_generation(self) -> tuple[int, str]:
        """(generation id, member id) for OffsetCommit: -1 / "" outside a generation, which
        the coordinator refuses for a group that has members (as it should)."""
        return self.generation_id, self.member_id

    # -- the clock ---------------------------------------------------------

    def poll(self, now_ms: int) -> list[Effect]:
        if self.state in (MemberState.LEFT, MemberState.FATAL) or not self.subscription:
            return []
        if self.state is MemberState.STABLE and now_ms - self.last_poll_ms > self.config.rebalance_timeout_ms:
            return self._poll_timeout(now_ms)
        if self.in_flight is not None:
            return []
        if now_ms < self.backoff_until_ms or self.poll_timed_out:
            return []
        if self.coordinator is None:
            self.in_flight = "find"
            return [FindCoordinator(self.config.group_id)]
        if self.state is MemberState.STABLE and self.need_rejoin:
            self.state = MemberState.UNJOINED
        effects: list[Effect] = []
        if self.state is MemberState.UNJOINED:
            effects = self._prepare_join()
        if self.state is MemberState.PREPARING and self.listener_calls_pending == 0:
            return effects + self._join(now_ms)
        if self.state is MemberState.STABLE or (
                self.state is MemberState.PREPARING and self.generation_id != DEFAULT_GENERATION):
            if now_ms - self.last_heartbeat_ok_ms > self.config.session_timeout_ms:
                # Kafka's "session timed out without a successful heartbeat": the
                # coordinator is presumed dead; find it again (it may have fenced us).
                self._coordinator_dead(now_ms)
                return effects
            if now_ms >= self.last_heartbeat_sent_ms + self.config.heartbeat_interval_ms:
                self.in_flight = "heartbeat"
                self.last_heartbeat_sent_ms = now_ms
                return effects + [SendHeartbeat(messages.HeartbeatRequest(
                    group_id=self.config.group_id, generation_id=self.generation_id,
                    member_id=self.member_id, group_instance_id=self.config.group_instance_id))]
        return effects

    def listener_done(self, now_ms: int) -> None:
        """The shell ran one listener call handed out by this machine."""
        assert self.listener_calls_pending > 0, "listener_done without a listener call"
        self.listener_calls_pending -= 1

    def poll_timeout_ms(self, now_ms: int) -> int:
        """Milliseconds until ``poll`` has something to do (0: now)."""
        if self.state in (MemberState.LEFT, MemberState.FATAL) or not self.subscription:
            return 60_000
        deadlines = []
        if self.state is MemberState.STABLE:
            deadlines.append(self.last_poll_ms + self.config.rebalance_timeout_ms + 1)
        if self.in_flight is None:
            if now_ms < self.backoff_until_ms:
                deadlines.append(self.backoff_until_ms)
            elif self.coordinator is None or self.state is MemberState.UNJOINED or self.need_rejoin or (
                    self.state is MemberState.PREPARING and self.listener_calls_pending == 0):
                deadlines.append(now_ms)
            elif self.state in (MemberState.STABLE, MemberState.PREPARING):
                deadlines.append(self.last_heartbeat_sent_ms + self.config.heartbeat_interval_ms)
        if not deadlines:
            return 60_000
        return max(0, min(deadlines) - now_ms)

    # -- coordinator ---------------------------------------------------------

    def handle_coordinator_found(self, node_id: int, now_ms: int) -> list[Effect]:
        if self.in_flight != "find":
            return []                           # we left meanwhile
        self.in_flight = None
        self.coordinator = node_id
        self.last_heartbeat_ok_ms = now_ms
        return []

    def handle_request_failed(self, now_ms: int) -> list[Effect]:
        """The request in flight broke (connection lost, timed out, no coordinator found)."""
        kind, self.in_flight = self.in_flight, None
        if kind in ("leave", None):
            return []
        if kind in ("join", "sync"):
            self.state = MemberState.UNJOINED
        self._coordinator_dead(now_ms)
        return []

    def _coordinator_dead(self, now_ms: int) -> None:
        self.coordinator = None
        self.backoff_until_ms = now_ms + self.config.retry_backoff_ms

    # -- join ------------------------------------------------------------

    def _listener(self, effect: Effect) -> Effect:
        self.listener_calls_pending += 1
        return effect

    def _prepare_join(self) -> list[Effect]:
        """What must be given up before joining: everything (eager), what left the
        subscription (cooperative), or everything as lost (the generation is gone)."""
        effects: list[Effect] = []
        if self.owned:
            if self.generation_id == DEFAULT_GENERATION:
                effects.append(self._listener(PartitionsLost(self.owned)))
                self.owned = self.previous_assignment = frozenset()
            elif self.protocol is RebalanceProtocol.EAGER:
                effects.append(self._listener(PartitionsRevoked(self.owned)))
                self.owned = frozenset()
            else:
                gone = frozenset(tp for tp in self.owned if tp.topic not in self.subscription)
                if gone:
                    effects.append(self._listener(PartitionsRevoked(gone)))
                    self.owned -= gone
        self.state = MemberState.PREPARING
        return effects

    def _join(self, now_ms: int) -> list[Effect]:
        assert self.state is MemberState.PREPARING and self.listener_calls_pending == 0
        effects: list[Effect] = []
        protocols = []
        for a in self.assignors:
            owned = self.previous_assignment if a.name == "sticky" else self.owned
            sub = a.subscription(self.subscription, owned, self.generation_id, self.config.rack_id)
            protocols.append(messages.JoinGroupRequest.JoinGroupRequestProtocol(
                name=a.name, metadata=encode_subscription(sub)))
        request = messages.JoinGroupRequest(
            group_id=self.config.group_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocols=protocols, reason=self.rejoin_reason)
        self._joined_subscription = self.subscription
        self.need_rejoin = False
        self.state = MemberState.JOINING
        self.in_flight = "join"
        effects.append(SendJoinGroup(request))
        return effects

    def handle_join_group_response(self, response, now_ms: int) -> list[Effect]:
        if self.in_flight != "join" or self.state is not MemberState.JOINING:
            return []                           # we left or timed out meanwhile
        self.in_flight = None
        code = response.error_code
        if code == ErrorCode.NONE:
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            if response.leader == response.member_id and not response.skip_assignment:
                self._join_members = list(response.members)
                self.state = MemberState.ASSIGNING
                try:
                    topics = frozenset(t for m in self._join_members for t in decode_subscription(m.metadata).topics)
                except CorruptFrameError as e:
                    return self._fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"a member's subscription: {e}")
                return [NeedAssignment(topics | self.subscription)]
            # A follower (or a static leader that KIP-814 says must not reassign).
            return self._sync([])
        self.state = MemberState.UNJOINED
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id          # KIP-394: rejoin with it at once
            self.need_rejoin = True
            return []
        if code in _RESET_MEMBER or code in _RESET_GENERATION:
            self._reset_generation(reset_member_id=code in _RESET_MEMBER)
            return []
        if code in _COORDINATOR_GONE:
            self._coordinator_dead(now_ms)
            return []
        if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS,
                    ErrorCode.UNKNOWN_SERVER_ERROR):
            self.need_rejoin = True
            self.backoff_until_ms = now_ms + self.config.retry_backoff_ms
            return []
        return self._fail(code, f"JoinGroup for group {self.config.group_id!r}")

    def perform_assignment(self, partitions_per_topic: Mapping[str, int], now_ms: int) -> list[Effect]:
        """Leader: run the chosen assignor over the members' subscriptions."""
        if self.state is not MemberState.ASSIGNING:
            return []
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is None:
            return self._fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                              f"the group chose assignor {self.protocol_name!r}, which this consumer lacks")
        subs = {m.member_id: decode_subscription(m.metadata, m.group_instance_id) for m in self._join_members}
        topics = {t for s in subs.values() for t in s.topics}
        self._assigned_snapshot = {t: partitions_per_topic.get(t, 0) for t in topics}
        result = assignor.assign(subs, {t: n for t, n in partitions_per_topic.items() if n})
        assignments = [messages.SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=m, assignment=encode_assignment(Assignment(tuple(result.get(m, ())))))
            for m in subs]
        return self._sync(assignments)

    def handle_metadata(self, partitions_per_topic: Mapping[str, int]) -> None:
        """Leader: a topic's partition count changed since it assigned: rebalance (Kafka's
        ConsumerCoordinator watches the metadata snapshot the same way)."""
        if self.leader_id is None or self.leader_id != self.member_id or self.state is not MemberState.STABLE:
            return
        now = {t: partitions_per_topic.get(t, 0) for t in self._assigned_snapshot}
        if now != self._assigned_snapshot:
            self.request_rejoin("partition count changed")

    # -- sync --------------------------------------------------------------

    def _sync(self, assignments: list) -> list[Effect]:
        self.state = MemberState.SYNCING
        self.in_flight = "sync"
        return [SendSyncGroup(messages.SyncGroupRequest(
            group_id=self.config.group_id, generation_id=self.generation_id, member_id=self.member_id,
            group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name, assignments=assignments))]

    def handle_sync_group_response(self, response, now_ms: int) -> list[Effect]:
        if self.in_flight != "sync" or self.state is not MemberState.SYNCING:
            return []
        self.in_flight = None
        code = response.error_code
        if code != ErrorCode.NONE:
            self.state = MemberState.UNJOINED
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.need_rejoin = True
                return []
            if code in _RESET_MEMBER or code in _RESET_GENERATION:
                self._reset_generation(reset_member_id=code in _RESET_MEMBER)
                return []
            if code in _COORDINATOR_GONE:
                self._coordinator_dead(now_ms)
                return []
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self.need_rejoin = True
                self.backoff_until_ms = now_ms + self.config.retry_backoff_ms
                return []
            return self._fail(code, f"SyncGroup for group {self.config.group_id!r}")
        try:
            new = frozenset(decode_assignment(response.assignment).partitions)
        except CorruptFrameError as e:
            return self._fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"the leader's assignment: {e}")
        self.state = MemberState.STABLE
        self.last_heartbeat_ok_ms = self.last_heartbeat_sent_ms = now_ms
        effects: list[Effect] = []
        revoked = self.owned - new
        added = new - self.owned
        if revoked:
            # cooperative: give back only what moved, then rejoin so it can be handed over
            effects.append(self._listener(PartitionsRevoked(revoked)))
            if self.protocol is RebalanceProtocol.COOPERATIVE:
                self.request_rejoin("revoked partitions that move to another member")
        self.owned = self.previous_assignment = new
        effects.append(self._listener(PartitionsAssigned(added, new)))
        if self.subscription != self._joined_subscription:
            self.request_rejoin("subscription changed during the rebalance")
        return effects

    # -- heartbeat ---------------------------------------------------------

    def handle_heartbeat_response(self, response, now_ms: int) -> list[Effect]:
        if self.in_flight != "heartbeat":
            return []
        self.in_flight = None
        code = response.error_code
        if code == ErrorCode.NONE:
            self.last_heartbeat_ok_ms = now_ms
            return []
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.last_heartbeat_ok_ms = now_ms
            if self.state is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing")
            return []
        if code in _RESET_MEMBER or code in _RESET_GENERATION:
            self.state = MemberState.UNJOINED
            self._reset_generation(reset_member_id=code in _RESET_MEMBER)
            return []
        if code in _COORDINATOR_GONE:
            self._coordinator_dead(now_ms)
            return []
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self.backoff_until_ms = now_ms + self.config.retry_backoff_ms
            return []
        return self._fail(code, f"Heartbeat for group {self.config.group_id!r}")

    def handle_leave_group_response(self, response, now_ms: int) -> list[Effect]:
        if self.in_flight == "leave":
            self.in_flight = None
        if self.state is MemberState.LEFT:
            self.generation_id, self.member_id = DEFAULT_GENERATION, UNKNOWN_MEMBER_ID
        return []

    # -- the poll timeout --------------------------------------------------

    def _poll_timeout(self, now_ms: int) -> list[Effect]:
        """max.poll.interval.ms passed without poll(): the application is stuck, so give
        the partitions to someone who is not (Kafka's maybeLeaveGroup)."""
        effects: list[Effect] = []
        if self.config.group_instance_id is None and self.coordinator is not None \
                and self.member_id != UNKNOWN_MEMBER_ID:
            effects.append(SendLeaveGroup(self._leave_request(
                "consumer poll timeout has expired (max.poll.interval.ms)")))
            self.in_flight = "leave"
        self.state = MemberState.UNJOINED
        self._reset_generation(reset_member_id=self.config.group_instance_id is None)
        self.poll_timed_out = True
        return effects

    # -- helpers -----------------------------------------------------------

    def _leave_request(self, reason: str):
        M = messages.LeaveGroupRequest
        return M(group_id=self.config.group_id, member_id=self.member_id,
                 members=[M.MemberIdentity(member_id=self.member_id,
                                           group_instance_id=self.config.group_instance_id, reason=reason)])

    def _reset_generation(self, reset_member_id: bool) -> None:
        """The generation is gone: what we own is lost (told at the next join)."""
        self.generation_id = DEFAULT_GENERATION
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.leader_id = None
        self.need_rejoin = True
        self.rejoin_reason = "the member's generation was reset"

    def _fail(self, code: int, what: str) -> list[Effect]:
        self.state = MemberState.FATAL
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        self.fatal = Fatal(code, f"{what}: {name}")
        return [self.fatal]
