"""The group membership state machine, driven by hand: each test is a short story of
requests the member sends and the coordinator's answers (Kafka's ConsumerCoordinatorTest
scenarios), with time as an argument. A small in-test coordinator runs several members
through real rebalances with the real assignors."""
from __future__ import annotations

import pytest

from clients._core.assignors import ASSIGNORS, decode_subscription, encode_assignment, Assignment
from clients._core.membership import (
    Fatal, FindCoordinator, Membership, MembershipConfig, MemberState, NeedAssignment, PartitionsAssigned,
    PartitionsLost, PartitionsRevoked, SendHeartbeat, SendJoinGroup, SendLeaveGroup, SendSyncGroup,
)
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition as TP

JR, SR, HR = messages.JoinGroupResponse, messages.SyncGroupResponse, messages.HeartbeatResponse


def member(strategy: str = "range", instance: str | None = None, now: int = 0, **kw) -> Membership:
    cfg = MembershipConfig(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                           heartbeat_interval_ms=1_000, retry_backoff_ms=100, group_instance_id=instance, **kw)
    m = Membership(cfg, [ASSIGNORS[s] for s in strategy.split(",")], now)
    m.subscribe(["t"])
    return m


def kinds(effects) -> list[str]:
    return [type(e).__name__ for e in effects]


LISTENER_CALLS = (PartitionsAssigned, PartitionsRevoked, PartitionsLost)


def ran(m: Membership, effects) -> list:
    """The shell's part: run (here: acknowledge) every listener call among the effects."""
    for e in effects:
        if isinstance(e, LISTENER_CALLS):
            m.listener_done(0)
    return effects


def join_ok(m: Membership, member_id: str, generation: int, leader: str, members=()) -> list:
    return m.handle_join_group_response(JR(error_code=0, generation_id=generation, protocol_type="consumer",
                                           protocol_name=m.assignors[0].name, leader=leader,
                                           member_id=member_id, members=list(members)), 0)


def assignment(*tps: TP) -> bytes:
    return encode_assignment(Assignment(tuple(tps)))


def to_stable(m: Membership, owned: tuple[TP, ...], now: int = 0, member_id: str = "m1") -> None:
    assert kinds(m.poll(now)) == ["FindCoordinator"]
    m.handle_coordinator_found(7, now)
    assert kinds(m.poll(now)) == ["SendJoinGroup"]
    join_ok(m, member_id, 1, "someone-else")
    assert m.state is MemberState.SYNCING
    m.in_flight = "sync"
    effects = ran(m, m.handle_sync_group_response(SR(error_code=0, assignment=assignment(*owned)), now))
    assert effects[-1] == PartitionsAssigned(frozenset(owned), frozenset(owned))
    assert m.state is MemberState.STABLE


def test_new_member_finds_coordinator_gets_a_member_id_and_leads() -> None:
    m = member()
    assert m.poll(0) == [FindCoordinator("g")]
    assert m.poll(0) == []                                   # one request at a time
    m.handle_coordinator_found(3, 0)
    (join,) = m.poll(0)
    assert isinstance(join, SendJoinGroup) and join.request.member_id == ""
    assert decode_subscription(join.request.protocols[0].metadata).topics == ("t",)
    # KIP-394: the first join is answered with a member id to use
    m.handle_join_group_response(JR(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m-1"), 0)
    (join,) = m.poll(0)
    assert join.request.member_id == "m-1"
    other = messages.JoinGroupResponse.JoinGroupResponseMember
    members = [other(member_id="m-1", metadata=join.request.protocols[0].metadata),
               other(member_id="m-2", metadata=join.request.protocols[0].metadata)]
    assert join_ok(m, "m-1", 5, "m-1", members) == [NeedAssignment(frozenset({"t"}))]
    (sync,) = m.perform_assignment({"t": 4}, 0)
    assert isinstance(sync, SendSyncGroup) and sync.request.generation_id == 5
    mine = {a.member_id: a.assignment for a in sync.request.assignments}
    assert mine == {"m-1": assignment(TP("t", 0), TP("t", 1)), "m-2": assignment(TP("t", 2), TP("t", 3))}
    effects = ran(m, m.handle_sync_group_response(SR(error_code=0, assignment=mine["m-1"]), 0))
    assert effects == [PartitionsAssigned(frozenset({TP("t", 0), TP("t", 1)}), frozenset({TP("t", 0), TP("t", 1)}))]
    assert m.stable and m.commit_generation() == (5, "m-1")


def test_heartbeats_follow_the_interval_and_the_session_timer() -> None:
    m = member()
    to_stable(m, (TP("t", 0),))
    assert m.poll(999) == [] and m.poll_timeout_ms(999) == 1
    (hb,) = m.poll(1000)
    assert isinstance(hb, SendHeartbeat) and hb.request.generation_id == 1 and hb.request.member_id == "m1"
    m.handle_heartbeat_response(HR(error_code=0), 1010)
    assert m.poll(1500) == [] and kinds(m.poll(2000)) == ["SendHeartbeat"]
    # the heartbeat is lost (connection broke): the coordinator is looked up again
    m.handle_request_failed(2100)
    assert m.poll(2150) == []                                 # retry.backoff.ms
    assert kinds(m.poll(2200)) == ["FindCoordinator"]
    m.handle_coordinator_found(4, 2200)
    assert kinds(m.poll(3000)) == ["SendHeartbeat"]


def test_session_timeout_without_successful_heartbeat_marks_coordinator_dead() -> None:
    m = member()
    to_stable(m, (TP("t", 0),))
    for now in range(1000, 10_001, 1000):
        effects = m.poll(now)
        assert kinds(effects) == ["SendHeartbeat"]
        m.handle_heartbeat_response(HR(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), now)
    assert m.poll(11_001) == [] and m.coordinator is None
    assert kinds(m.poll(11_200)) == ["FindCoordinator"]


def test_eager_rebalance_revokes_everything_before_joining() -> None:
    m = member("range")
    owned = (TP("t", 0), TP("t", 1))
    to_stable(m, owned)
    m.poll(1000)
    m.handle_heartbeat_response(HR(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 1000)
    (revoke,) = m.poll(1001)
    assert revoke == PartitionsRevoked(frozenset(owned)) and m.state is MemberState.PREPARING
    # while the listener runs (it may commit for long), the member keeps its session
    assert m.poll(1500) == []
    (hb,) = m.poll(2001)
    assert isinstance(hb, SendHeartbeat) and hb.request.generation_id == 1
    m.handle_heartbeat_response(HR(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 2002)
    m.listener_done(2003)
    (join,) = m.poll(2003)
    assert isinstance(join, SendJoinGroup)
    assert decode_subscription(join.request.protocols[0].metadata).owned_partitions == ()
    join_ok(m, "m1", 2, "x")
    m.in_flight = "sync"
    effects = m.handle_sync_group_response(SR(error_code=0, assignment=assignment(TP("t", 1))), 1002)
    assert effects == [PartitionsAssigned(frozenset({TP("t", 1)}), frozenset({TP("t", 1)}))]


def test_cooperative_rebalance_revokes_only_what_moves_then_rejoins() -> None:
    m = member("cooperative-sticky")
    owned = (TP("t", 0), TP("t", 1), TP("t", 2))
    to_stable(m, owned)
    m.poll(1000)
    m.handle_heartbeat_response(HR(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 1000)
    effects = m.poll(1001)
    assert kinds(effects) == ["SendJoinGroup"]                # nothing revoked up front
    sub = decode_subscription(effects[0].request.protocols[0].metadata)
    assert set(sub.owned_partitions) == set(owned) and sub.generation_id == 1
    join_ok(m, "m1", 2, "x")
    m.in_flight = "sync"
    effects = m.handle_sync_group_response(SR(error_code=0, assignment=assignment(TP("t", 0), TP("t", 1))), 1002)
    assert effects == [PartitionsRevoked(frozenset({TP("t", 2)})),
                       PartitionsAssigned(frozenset(), frozenset({TP("t", 0), TP("t", 1)}))]
    # the second rebalance comes once the listener gave t-2 back, still owning the two it kept
    assert m.poll(1003) == []
    ran(m, effects)
    effects = m.poll(1003)
    assert kinds(effects) == ["SendJoinGroup"]
    assert set(decode_subscription(effects[0].request.protocols[0].metadata).owned_partitions) == {
        TP("t", 0), TP("t", 1)}


def test_unknown_member_loses_partitions_and_rejoins_as_new() -> None:
    m = member()
    to_stable(m, (TP("t", 0),))
    m.poll(1000)
    m.handle_heartbeat_response(HR(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 1000)
    effects = ran(m, m.poll(1001))
    assert effects == [PartitionsLost(frozenset({TP("t", 0)}))]
    (join,) = m.poll(1002)                       # no heartbeat: no generation to keep
    assert join.request.member_id == ""


def test_illegal_generation_keeps_member_id_but_loses_partitions() -> None:
    m = member("cooperative-sticky")
    to_stable(m, (TP("t", 0),))
    m.poll(1000)
    m.handle_heartbeat_response(HR(error_code=ErrorCode.ILLEGAL_GENERATION), 1000)
    effects = ran(m, m.poll(1001)) + m.poll(1001)
    assert kinds(effects) == ["PartitionsLost", "SendJoinGroup"] and effects[1].request.member_id == "m1"


@pytest.mark.parametrize("code", [ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                  ErrorCode.GROUP_AUTHORIZATION_FAILED])
def test_fatal_errors_stop_the_member(code) -> None:
    m = member(instance="i-1")
    m.poll(0)
    m.handle_coordinator_found(1, 0)
    m.poll(0)
    (fatal,) = m.handle_join_group_response(JR(error_code=code), 0)
    assert isinstance(fatal, Fatal) and fatal.error_code == code and "'g'" in fatal.message
    assert m.state is MemberState.FATAL and m.poll(10_000) == []


def test_not_coordinator_on_join_rediscovers() -> None:
    m = member()
    m.poll(0)
    m.handle_coordinator_found(1, 0)
    m.poll(0)
    m.handle_join_group_response(JR(error_code=ErrorCode.NOT_COORDINATOR), 0)
    assert m.coordinator is None and kinds(m.poll(100)) == ["FindCoordinator"]


def keep_alive(m: Membership, start: int, until: int) -> None:
    """The coordinator answers every heartbeat from start to until."""
    for now in range(start, until + 1, 1000):
        for e in m.poll(now):
            assert isinstance(e, SendHeartbeat)
            m.handle_heartbeat_response(HR(error_code=0), now)


def test_poll_timeout_leaves_the_group_dynamic_member() -> None:
    m = member()
    to_stable(m, (TP("t", 0),))
    m.note_poll(500)
    keep_alive(m, 1000, 60_000)
    effects = m.poll(60_501)
    assert kinds(effects) == ["SendLeaveGroup"] and "max.poll.interval.ms" in effects[0].request.members[0].reason
    m.handle_leave_group_response(messages.LeaveGroupResponse(), 60_502)
    assert m.poll(70_000) == []                                # stays out until poll() again
    m.note_poll(70_000)
    effects = ran(m, m.poll(70_000)) + m.poll(70_000)
    assert kinds(effects) == ["PartitionsLost", "SendJoinGroup"] and effects[1].request.member_id == ""


def test_static_member_never_leaves_on_poll_timeout_or_close() -> None:
    m = member(instance="i-1")
    to_stable(m, (TP("t", 0),))
    keep_alive(m, 1000, 60_000)
    assert m.poll(60_001) == []                                # no LeaveGroup: session timeout decides
    m.note_poll(60_002)
    effects = ran(m, m.poll(60_002)) + m.poll(60_002)
    assert effects[-1].request.group_instance_id == "i-1" and effects[-1].request.member_id == "m1"
    s = member(instance="i-2")
    to_stable(s, (TP("t", 1),))
    assert s.leave(5) == [PartitionsRevoked(frozenset({TP("t", 1)}))]
    d = member()
    to_stable(d, (TP("t", 2),))
    effects = d.leave(5)
    assert kinds(effects) == ["PartitionsRevoked", "SendLeaveGroup"] and effects[1].request.members[0].member_id == "m1"


def test_leader_rejoins_when_partition_count_changes() -> None:
    m = member()
    m.poll(0)
    m.handle_coordinator_found(1, 0)
    (join,) = m.poll(0)
    M = messages.JoinGroupResponse.JoinGroupResponseMember
    join_ok(m, "m1", 1, "m1", [M(member_id="m1", metadata=join.request.protocols[0].metadata)])
    m.perform_assignment({"t": 2}, 0)
    ran(m, m.handle_sync_group_response(SR(error_code=0, assignment=assignment(TP("t", 0), TP("t", 1))), 0))
    m.handle_metadata({"t": 2})
    assert m.stable
    m.handle_metadata({"t": 3})
    assert not m.stable and kinds(ran(m, m.poll(1)) + m.poll(1)) == ["PartitionsRevoked", "SendJoinGroup"]


# ----------------------------------------------------------------------- a small coordinator

class TinyCoordinator:
    """Just enough of a classic-group coordinator to run members through rebalances: it
    collects a JoinGroup from every live member, answers them (first joiner leads), then
    hands out the leader's SyncGroup assignments. It checks one invariant throughout:
    no partition is owned by two members at once (what cooperative rebalancing promises)."""

    def __init__(self, members: dict[str, Membership]) -> None:
        self.members = members
        self.generation = 0
        self.now = 0

    def run_until_stable(self, max_rounds: int = 20) -> int:
        rebalances = 0
        for _ in range(max_rounds):
            joins = {}
            for mid, m in self.members.items():
                effects = m.poll(self.now)
                if any(isinstance(e, FindCoordinator) for e in effects):
                    m.handle_coordinator_found(1, self.now)
                    effects += m.poll(self.now)
                if any(isinstance(e, LISTENER_CALLS) for e in effects):
                    ran(m, effects)                     # the application's listener ran
                    effects += m.poll(self.now)
                for e in effects:
                    if isinstance(e, SendJoinGroup):
                        joins[mid] = e.request
                    elif isinstance(e, SendHeartbeat):
                        m.handle_heartbeat_response(HR(error_code=ErrorCode.REBALANCE_IN_PROGRESS if self._rejoining()
                                                       else 0), self.now)
                self._check_no_double_ownership()
            if not joins and all(m.stable for m in self.members.values()):
                return rebalances
            if not joins:
                self.now += 1000
                continue
            # everyone must rejoin: tell the rest via heartbeat
            for mid, m in self.members.items():
                if mid not in joins and m.state is MemberState.STABLE:
                    m.in_flight = "heartbeat"
                    m.handle_heartbeat_response(HR(error_code=ErrorCode.REBALANCE_IN_PROGRESS), self.now)
                    for e in ran(m, m.poll(self.now)) + m.poll(self.now):
                        if isinstance(e, SendJoinGroup):
                            joins[mid] = e.request
            self._check_no_double_ownership()
            self.generation += 1
            rebalances += 1
            leader = sorted(joins)[0]
            M = messages.JoinGroupResponse.JoinGroupResponseMember
            members = [M(member_id=mid, metadata=r.protocols[0].metadata) for mid, r in sorted(joins.items())]
            syncs = {}
            for mid in joins:
                effects = join_ok(self.members[mid], mid, self.generation, leader, members if mid == leader else [])
                for e in effects:
                    if isinstance(e, NeedAssignment):
                        effects = self.members[mid].perform_assignment({"t": 6}, self.now)
                syncs[mid] = effects[0].request
            table = {a.member_id: a.assignment for a in syncs[leader].assignments}
            for mid in joins:
                ran(self.members[mid], self.members[mid].handle_sync_group_response(
                    SR(error_code=0, assignment=table[mid]), self.now))
                self._check_no_double_ownership()
            self.now += 10
        raise AssertionError("no stable group")

    def _rejoining(self) -> bool:
        return any(m.need_rejoin for m in self.members.values())

    def _check_no_double_ownership(self) -> None:
        seen: dict[TP, str] = {}
        for mid, m in self.members.items():
            for tp in m.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {mid}"
                seen[tp] = mid


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_three_members_split_six_partitions_and_a_fourth_joins(strategy) -> None:
    members = {f"m{i}": member(strategy) for i in range(1, 4)}
    coord = TinyCoordinator(members)
    coord.run_until_stable()
    assert sorted(len(m.owned) for m in members.values()) == [2, 2, 2]
    before = {mid: set(m.owned) for mid, m in members.items()}
    members["m4"] = member(strategy)
    rebalances = coord.run_until_stable()
    assert sorted(len(m.owned) for m in members.values()) == [1, 1, 2, 2]
    # cooperative-sticky needs the second rebalance for what moved
    assert rebalances == (2 if strategy == "cooperative-sticky" else 1)
    if "sticky" in strategy:
        assert all(set(members[mid].owned) <= before[mid] for mid in before)
