"""The classic group protocol, deterministically: joins, syncs, heartbeats, leaves, timers."""
from __future__ import annotations

import pytest

from broker.group import GroupConfig, GroupState, VALID_PREVIOUS_STATES
from broker.group.records import GroupMetadataKey, OffsetCommitKey
from broker.group.state import ClassicGroup
from clients.protocol.errors import ErrorCode
from group_harness import RANGE, ROUNDROBIN, Harness, assignment, subscription

E = ErrorCode
S = GroupState


# ------------------------------------------------------------------ transition table

def test_transition_table_is_kafkas() -> None:
    allowed = {(src, dst) for dst, srcs in VALID_PREVIOUS_STATES.items() for src in srcs}
    assert (S.EMPTY, S.PREPARING_REBALANCE) in allowed
    assert (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) in allowed
    assert (S.PREPARING_REBALANCE, S.EMPTY) in allowed
    assert (S.COMPLETING_REBALANCE, S.STABLE) in allowed
    assert (S.STABLE, S.PREPARING_REBALANCE) in allowed
    assert (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE) in allowed
    assert all((s, S.DEAD) in allowed for s in S)
    assert (S.EMPTY, S.STABLE) not in allowed
    assert (S.STABLE, S.COMPLETING_REBALANCE) not in allowed
    assert (S.DEAD, S.EMPTY) not in allowed
    assert len(allowed) == 6 + 5


def test_illegal_transition_is_a_bug() -> None:
    g = ClassicGroup("g", 0)
    with pytest.raises(AssertionError, match="invalid transition Empty -> Stable"):
        g.transition_to(S.STABLE, 1)


# ------------------------------------------------------------------ one member

def test_single_member_kip394_join_sync_heartbeat() -> None:
    h = Harness()
    first = h.join("g", version=5)
    r = h.response(first)
    assert r.error_code == E.MEMBER_ID_REQUIRED
    assert r.member_id.startswith("client-") and r.generation_id == -1
    assert h.group("g").is_pending(r.member_id) and not h.group("g").members
    second = h.join("g", member_id=r.member_id, version=5)
    assert h.response(second) is None                 # parked: the initial delay runs
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.settle()
    r2 = h.response(second)
    assert (r2.error_code, r2.generation_id, r2.leader, r2.member_id, r2.protocol_name) == \
        (0, 1, r.member_id, r.member_id, RANGE)
    assert [m.member_id for m in r2.members] == [r.member_id]
    assert r2.members[0].metadata == subscription(["t"])
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE and g.subscribed_topics == {"t"}

    a = assignment({"t": [0, 1]})
    s = h.sync("g", r.member_id, 1, {r.member_id: a}, version=5, protocol_type="consumer",
               protocol_name=RANGE)
    # Acked automatically by the harness: the group snapshot went to the log first.
    assert h.response(s).error_code == 0 and h.response(s).assignment == a
    assert h.response(s).protocol_name == RANGE
    assert g.state is S.STABLE
    [batch] = h.log.batches[h.coordinator.partition_for("g")]
    value = h.coordinator.image(h.coordinator.partition_for("g")).groups["g"]
    assert value.generation_id == 1 and value.leader_id == r.member_id
    assert value.members[0].assignment == a and value.members[0].subscription == subscription(["t"])
    assert h.heartbeat("g", r.member_id, 1) == E.NONE


def test_join_before_v4_gets_its_member_id_directly() -> None:
    h = Harness()
    t = h.join("g", version=3)
    h.settle()
    r = h.response(t)
    assert r.error_code == 0 and r.member_id.startswith("client-") and r.generation_id == 1
    assert r.protocol_name == RANGE


def test_static_member_skips_kip394_even_on_v5() -> None:
    h = Harness()
    t = h.join("g", version=5, instance_id="i-1")
    h.settle()
    r = h.response(t)
    assert r.error_code == 0 and r.member_id.startswith("i-1-")


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    r = h.response(h.join("g", version=4, session_timeout_ms=10_000))
    member_id = r.member_id
    h.advance(9_999)
    assert h.group("g").is_pending(member_id)
    h.advance(1)
    assert not h.group("g").is_pending(member_id)
    late = h.join("g", member_id=member_id, version=4)
    assert h.response(late).error_code == E.UNKNOWN_MEMBER_ID


def test_member_id_unknown_to_a_missing_group() -> None:
    h = Harness()
    assert h.response(h.join("nope", member_id="ghost")).error_code == E.UNKNOWN_MEMBER_ID
    assert h.group("nope") is None


# ------------------------------------------------------------------ three members

def test_three_members_form_one_generation_and_leader_assigns() -> None:
    h = Harness()
    ids = h.form_group("g", 3)
    g = h.group("g")
    assert g.generation_id == 1 and g.leader_id == ids[0] and len(ids) == 3
    for m in ids:
        assert h.heartbeat("g", m, 1) == E.NONE


def test_followers_sync_waits_for_leader_and_leader_members_list() -> None:
    h = Harness(auto_ack=False)
    tokens = [h.join_new("g", client_id=f"c{i}") for i in range(3)]
    h.settle()
    rs = [h.response(t) for t in tokens]
    leader = rs[0].leader
    assert all(r.leader == leader and r.generation_id == 1 for r in rs)
    for r in rs:
        # Only the leader learns the members and their subscriptions.
        assert (len(r.members) == 3) == (r.member_id == leader)
    followers = [r.member_id for r in rs if r.member_id != leader]
    fs = [h.sync("g", m, 1) for m in followers]
    assert all(h.response(t) is None for t in fs)        # parked until the leader's sync
    assign = {m: assignment({"t": [i]}) for i, m in enumerate([leader] + followers)}
    ls = h.sync("g", leader, 1, assign)
    assert h.response(ls) is None                        # parked until the snapshot is written
    assert h.group("g").state is S.COMPLETING_REBALANCE
    assert len(h.pending_appends) == 1
    h.ack_all()
    assert h.group("g").state is S.STABLE
    for m, t in zip(followers + [leader], fs + [ls]):
        assert h.response(t).error_code == 0 and h.response(t).assignment == assign[m]


def test_initial_rebalance_delay_collects_late_joiners() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    a = h.join("g", version=3, client_id="a", rebalance_timeout_ms=60_000)
    assert h.advance(2_000) == 1_000
    b = h.join("g", version=3, client_id="b", rebalance_timeout_ms=60_000)
    h.advance(1_000)              # the first delay ends, but b arrived: wait another delay
    assert h.response(a) is None and h.response(b) is None
    h.advance(2_999)
    assert h.response(a) is None
    h.advance(1)
    assert h.response(a).generation_id == h.response(b).generation_id == 1
    assert len(h.group("g").members) == 2


def test_initial_delay_is_bounded_by_rebalance_timeout() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    first = h.join("g", version=3, client_id="a", rebalance_timeout_ms=5_000)
    for i in range(5):
        h.join("g", version=3, client_id=f"late{i}", rebalance_timeout_ms=5_000)
        h.advance(1_000)
    # 3 s initial delay + at most the 2 s left of the 5 s rebalance timeout.
    assert h.response(first) is not None and h.response(first).error_code == 0
    assert h.now_ms - 1_000_000 <= 5_000


# ------------------------------------------------------------------ heartbeats

def test_heartbeat_errors() -> None:
    h = Harness()
    ids = h.form_group("g", 2)
    assert h.heartbeat("g", ids[0], 2) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "ghost", 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("other", ids[0], 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", ids[0], 1) == E.INVALID_GROUP_ID
    # A third member joining starts a rebalance: heartbeats tell the others to rejoin.
    h.join_new("g", client_id="c3")
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", ids[0], 1) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", ids[1], 1) == E.REBALANCE_IN_PROGRESS


def test_heartbeats_keep_a_member_alive_and_silence_removes_it() -> None:
    h = Harness()
    ids = h.form_group("g", 3)                    # session timeout 10 s
    h.advance(6_000)
    for m in ids[:2]:
        assert h.heartbeat("g", m, 1) == E.NONE
    h.advance(3_999)
    assert ids[2] in h.group("g").members
    assert h.advance(1) == 6_000                  # next: the others' sessions, at 16 s
    g = h.group("g")
    assert ids[2] not in g.members                # silent for 10 s: removed
    assert g.state is S.PREPARING_REBALANCE
    for m in ids[:2]:
        assert h.heartbeat("g", m, 1) == E.REBALANCE_IN_PROGRESS
    rejoins = [h.join("g", member_id=m) for m in ids[:2]]
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE and g.generation_id == 2
    assert set(g.members) == set(ids[:2])
    assert all(h.response(t).generation_id == 2 for t in rejoins)


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    h = Harness()
    ids = h.form_group("g", 3, rebalance_timeout_ms=20_000)
    t0 = h.join("g", member_id=ids[1], rebalance_timeout_ms=20_000)
    assert h.response(t0).generation_id == 1    # a follower changing nothing: current gen back
    # The leader rejoining forces a rebalance.
    leader_rejoin = h.join("g", member_id=ids[0], rebalance_timeout_ms=20_000)
    assert h.group("g").state is S.PREPARING_REBALANCE and h.response(leader_rejoin) is None
    f = h.join("g", member_id=ids[1], rebalance_timeout_ms=20_000)
    for _ in range(3):                           # ids[2] heartbeats but never rejoins
        h.advance(5_000)
        assert h.heartbeat("g", ids[2], 1) == E.REBALANCE_IN_PROGRESS
    assert h.response(f) is None
    h.advance(5_000)                             # 20 s rebalance timeout
    assert h.response(f).generation_id == 2 and h.response(leader_rejoin).generation_id == 2
    assert set(h.group("g").members) == set(ids[:2])
    assert h.heartbeat("g", ids[2], 1) == E.UNKNOWN_MEMBER_ID


def test_leader_that_never_syncs_is_dropped_at_sync_timeout() -> None:
    h = Harness()
    tokens = [h.join_new("g", client_id=f"c{i}", rebalance_timeout_ms=20_000) for i in range(2)]
    h.settle()
    leader = h.response(tokens[0]).leader
    follower = next(h.response(t).member_id for t in tokens if h.response(t).member_id != leader)
    fs = h.sync("g", follower, 1)
    for _ in range(3):               # the leader heartbeats (NONE meanwhile) but never syncs
        h.advance(6_000)
        assert h.heartbeat("g", leader, 1) == E.NONE
    h.advance(1_999)
    assert h.response(fs) is None
    h.advance(1)                     # 20 s after the join completed
    assert h.response(fs).error_code == E.REBALANCE_IN_PROGRESS
    assert leader not in h.group("g").members
    assert h.group("g").state is S.PREPARING_REBALANCE
    again = h.join("g", member_id=follower)
    r = h.response(again)
    assert r.generation_id == 2 and r.leader == follower


def test_new_member_join_expires_after_five_minutes() -> None:
    h = Harness()
    ids = h.form_group("g", 1, rebalance_timeout_ms=600_000)
    newcomer = h.join_new("g", client_id="new", rebalance_timeout_ms=600_000)
    assert h.response(newcomer) is None              # waits for ids[0] to rejoin
    for _ in range(33):                              # ids[0] heartbeats but never rejoins
        h.advance(9_000)
        assert h.heartbeat("g", ids[0], 1) == E.REBALANCE_IN_PROGRESS
    assert h.response(newcomer) is None              # 297 s
    h.advance(3_000)                                 # 300 s: the newcomer's join expires
    r = h.response(newcomer)
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.member_id == ""
    assert list(h.group("g").members) == [ids[0]]
    assert h.group("g").state is S.PREPARING_REBALANCE


# ------------------------------------------------------------------ leaving

def test_leader_leaves_and_a_rejoined_member_leads() -> None:
    h = Harness()
    ids = h.form_group("g", 3)
    r = h.leave("g", [(ids[0], None)], version=3)
    assert r.error_code == 0 and [(m.member_id, m.error_code) for m in r.members] == [(ids[0], 0)]
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE and ids[0] not in g.members
    t1 = h.join("g", member_id=ids[1])
    t2 = h.join("g", member_id=ids[2])
    r1, r2 = h.response(t1), h.response(t2)
    assert r1.generation_id == r2.generation_id == 2
    assert r1.leader == r2.leader and r1.leader in ids[1:]


def test_last_member_leaving_empties_the_group_and_writes_it() -> None:
    h = Harness()
    ids = h.form_group("g", 1)
    assert h.leave("g", [(ids[0], None)], version=1).error_code == 0
    g = h.group("g")
    assert g.state is S.EMPTY and g.generation_id == 2 and g.protocol_name is None
    value = h.coordinator.image(h.coordinator.partition_for("g")).groups["g"]
    assert value.generation_id == 2 and value.members == () and value.protocol_type == "consumer"


def test_leave_v3_batch_with_instance_ids_and_unknowns() -> None:
    h = Harness()
    h.join("g", version=5, instance_id="ia", client_id="a")
    h.join("g", version=5, instance_id="ib", client_id="b")
    h.settle()
    ids = list(h.group("g").members)
    r = h.leave("g", [("", "ia"), ("ghost", None), ("wrong-id", "ib"), ("", "nobody")], version=4)
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("", "ia", 0), ("ghost", None, E.UNKNOWN_MEMBER_ID),
        ("wrong-id", "ib", E.FENCED_INSTANCE_ID), ("", "nobody", E.UNKNOWN_MEMBER_ID)]
    assert list(h.group("g").members) == ids[1:]


def test_leave_v0_reports_member_error_at_top_level() -> None:
    h = Harness()
    h.form_group("g", 1)
    assert h.leave("g", [("ghost", None)], version=0).error_code == E.UNKNOWN_MEMBER_ID
    assert h.leave("missing", [("ghost", None)], version=2).error_code == E.UNKNOWN_MEMBER_ID


def test_pending_member_leaving_lets_the_rebalance_complete() -> None:
    h = Harness()
    ids = h.form_group("g", 1)
    pending = h.response(h.join("g", client_id="p")).member_id
    t = h.join("g", member_id=ids[0])             # leader rejoins: rebalance
    assert h.response(t) is None                  # waits for the pending member
    assert h.leave("g", [(pending, None)]).members[0].error_code == 0
    assert h.response(t).generation_id == 2


# ------------------------------------------------------------------ protocols

def test_protocol_selection_by_votes_among_common_protocols() -> None:
    h = Harness()
    sub = subscription(["t"])
    ts = [h.join("g", version=3, client_id="a", protocols=[(RANGE, sub), (ROUNDROBIN, sub)]),
          h.join("g", version=3, client_id="b", protocols=[(ROUNDROBIN, sub), (RANGE, sub)]),
          h.join("g", version=3, client_id="c", protocols=[(ROUNDROBIN, sub), ("sticky", sub),
                                                            (RANGE, sub)])]
    h.settle()
    assert {h.response(t).protocol_name for t in ts} == {ROUNDROBIN}


def test_protocol_votes_exclude_protocols_not_everyone_supports() -> None:
    h = Harness()
    sub = subscription(["t"])
    ts = [h.join("g", version=3, client_id="a", protocols=[("sticky", sub), (RANGE, sub)]),
          h.join("g", version=3, client_id="b", protocols=[("sticky", sub), (RANGE, sub)]),
          h.join("g", version=3, client_id="c", protocols=[(RANGE, sub)])]
    h.settle()
    assert {h.response(t).protocol_name for t in ts} == {RANGE}


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    h.form_group("g", 1)
    r = h.response(h.join("g", version=3, protocols=[("other", b"x")]))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.response(h.join("g", version=3, protocol_type="connect"))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.response(h.join("fresh", version=3, protocols=[]))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.group("fresh") is None           # nothing joined: no group was left behind


def test_lone_member_may_change_its_protocols() -> None:
    h = Harness()
    [m] = h.form_group("g", 1)
    t = h.join("g", member_id=m, protocols=[("cooperative-sticky", subscription(["t"]))])
    assert h.response(t).error_code == 0 and h.response(t).protocol_name == "cooperative-sticky"


def test_sync_protocol_checks_v5() -> None:
    h = Harness(auto_ack=False)
    t = h.join("g", version=3)
    h.settle()
    m = h.response(t).member_id
    r = h.response(h.sync("g", m, 1, version=5, protocol_type="consumer", protocol_name="other"))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.response(h.sync("g", m, 1, version=5, protocol_type="connect"))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.response(h.sync("g", m, 2)).error_code == E.ILLEGAL_GENERATION
    assert h.response(h.sync("g", "ghost", 1)).error_code == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------ validation errors

def test_session_timeout_bounds_are_configurable() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000,
                            group_max_session_timeout_ms=5000))
    assert h.response(h.join("g", session_timeout_ms=999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.response(h.join("g", session_timeout_ms=5001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.response(h.join("g", session_timeout_ms=5000)).error_code == E.MEMBER_ID_REQUIRED
    h2 = Harness()
    assert h2.response(h2.join("g", session_timeout_ms=5999)).error_code == \
        E.INVALID_SESSION_TIMEOUT


def test_group_max_size() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2))
    ids = h.form_group("g", 2)
    r = h.response(h.join("g", client_id="third"))
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED and r.member_id == ""
    assert set(h.group("g").members) == set(ids) and h.group("g").state is S.STABLE


def test_not_coordinator_and_loading() -> None:
    h = Harness(partitions=())
    p = h.coordinator.partition_for("g")
    assert h.response(h.join("g")).error_code == E.NOT_COORDINATOR
    h.coordinator.begin_load(p)
    assert h.response(h.join("g")).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1) == E.NONE      # answered blindly while loading
    assert h.list_groups().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    h.run(h.coordinator.complete_load(p, h.log.load(p).image, h.now_ms))
    assert h.response(h.join("g")).error_code == E.MEMBER_ID_REQUIRED
    h.run(h.coordinator.shutdown(h.now_ms))
    assert h.response(h.join("g")).error_code == E.COORDINATOR_NOT_AVAILABLE


# ------------------------------------------------------------------ static membership

def _static_group(h: Harness, n: int = 3, version: int = 5) -> list[str]:
    ts = [h.join("g", version=version, instance_id=f"i{k}", client_id=f"c{k}") for k in range(n)]
    h.settle()
    rs = [h.response(t) for t in ts]
    leader = rs[0].leader
    ids = [r.member_id for r in rs]
    assign = {m: assignment({"t": [k]}) for k, m in enumerate(ids)}
    for m in ids:
        h.sync("g", m, 1, assign if m == leader else None, instance_id=f"i{ids.index(m)}")
    assert h.group("g").state is S.STABLE
    return ids


def test_static_member_restart_takes_its_place_without_rebalance() -> None:
    h = Harness()
    ids = _static_group(h)
    g = h.group("g")
    leader = g.leader_id
    follower_k = next(k for k, m in enumerate(ids) if m != leader)
    old = ids[follower_k]
    old_assignment = g.members[old].assignment
    t = h.join("g", version=5, instance_id=f"i{follower_k}", client_id="restarted")
    r = h.response(t)
    assert r.error_code == 0 and r.member_id != old and r.member_id.startswith(f"i{follower_k}-")
    assert r.generation_id == 1 and r.leader == leader and r.members == []
    assert g.state is S.STABLE and g.generation_id == 1
    assert g.members[r.member_id].assignment == old_assignment
    # The restarted member syncs and gets its old assignment; the zombie is fenced.
    s = h.sync("g", r.member_id, 1, instance_id=f"i{follower_k}")
    assert h.response(s).assignment == old_assignment
    assert h.heartbeat("g", old, 1, instance_id=f"i{follower_k}") == E.FENCED_INSTANCE_ID
    assert h.response(h.sync("g", old, 1, instance_id=f"i{follower_k}")).error_code == \
        E.FENCED_INSTANCE_ID
    fenced = h.commit("g", {("t", 0): 5}, member_id=old, generation_id=1,
                      instance_id=f"i{follower_k}")
    assert h.commit_errors(fenced) == {("t", 0): E.FENCED_INSTANCE_ID}
    # The snapshot with the new member id is in the log.
    value = h.coordinator.image(h.coordinator.partition_for("g")).groups["g"]
    assert r.member_id in {m.member_id for m in value.members}
    assert old not in {m.member_id for m in value.members}


def test_static_leader_restart_kip814_skips_assignment_on_v9() -> None:
    h = Harness()
    ids = _static_group(h)
    leader_k = ids.index(h.group("g").leader_id)
    r = h.response(h.join("g", version=9, instance_id=f"i{leader_k}"))
    assert r.error_code == 0 and r.skip_assignment and r.leader == r.member_id
    assert len(r.members) == 3 and h.group("g").state is S.STABLE
    r5 = h.response(h.join("g", version=5, instance_id=f"i{leader_k}"))
    # Before v9: the previous leader id, so the client acts as a follower.
    assert r5.leader == r.member_id != r5.member_id and r5.members == []


def test_static_member_restart_with_new_protocol_rebalances() -> None:
    h = Harness()
    ids = _static_group(h, n=1)
    sub = subscription(["t"])
    t = h.join("g", version=5, instance_id="i0", protocols=[(ROUNDROBIN, sub), (RANGE, sub)])
    h.settle()
    r = h.response(t)
    assert r.error_code == 0 and r.generation_id == 2 and r.protocol_name == ROUNDROBIN
    assert ids[0] not in h.group("g").members


def test_static_rejoin_write_failure_reverts_to_old_member_id() -> None:
    h = Harness()
    ids = _static_group(h)
    k = next(k for k, m in enumerate(ids) if m != h.group("g").leader_id)
    h.auto_ack = False
    t = h.join("g", version=5, instance_id=f"i{k}")
    assert h.response(t) is None
    h.ack_next(E.NOT_ENOUGH_REPLICAS)
    assert h.response(t).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert h.group("g").static_members[f"i{k}"] == ids[k]
    assert h.heartbeat("g", ids[k], 1, instance_id=f"i{k}") == E.NONE


def test_static_member_not_rejoining_keeps_its_place_until_session_expires() -> None:
    h = Harness()
    ids = _static_group(h, n=2)
    leader = h.group("g").leader_id
    other = next(m for m in ids if m != leader)
    t = h.join("g", member_id=leader, instance_id=f"i{ids.index(leader)}")  # forces a rebalance
    h.advance(10_000)      # the other static member stays silent past its session timeout
    assert other not in h.group("g").members
    assert h.response(t).generation_id == 2


def test_static_member_join_with_unknown_instance_is_unknown_member() -> None:
    h = Harness()
    ids = _static_group(h, n=1)
    r = h.response(h.join("g", member_id=ids[0], version=5, instance_id="someone-else"))
    assert r.error_code == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------ append failures, unload

@pytest.mark.parametrize("append_error,member_error", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
])
def test_failed_assignment_write_fails_syncs_and_rebalances(append_error, member_error) -> None:
    h = Harness(auto_ack=False)
    tokens = [h.join_new("g", client_id=f"c{i}") for i in range(2)]
    h.settle()
    leader = h.response(tokens[0]).leader
    follower = next(h.response(t).member_id for t in tokens if h.response(t).member_id != leader)
    fs = h.sync("g", follower, 1)
    ls = h.sync("g", leader, 1, {leader: b"a", follower: b"b"})
    h.ack_next(append_error)
    assert h.response(fs).error_code == member_error == h.response(ls).error_code
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert "g" not in h.coordinator.image(h.coordinator.partition_for("g")).groups


def test_unload_answers_parked_requests_not_coordinator() -> None:
    h = Harness(auto_ack=False)
    p = h.coordinator.partition_for("g")
    # A standalone group coordinated by the same partition, and one by another.
    same = next(f"s{i}" for i in range(1000) if h.coordinator.partition_for(f"s{i}") == p)
    other = next(f"s{i}" for i in range(1000) if h.coordinator.partition_for(f"s{i}") != p)
    tokens = [h.join_new("g", client_id=f"c{i}") for i in range(2)]
    h.settle()
    leader = h.response(tokens[0]).leader
    follower = next(h.response(t).member_id for t in tokens if h.response(t).member_id != leader)
    fs = h.sync("g", follower, 1)
    c_same = h.commit(same, {("t", 0): 1})
    c_other = h.commit(other, {("t", 0): 1})
    h.run(h.coordinator.unload_partition(p, h.now_ms))
    assert h.response(fs).error_code == E.NOT_COORDINATOR
    assert h.commit_errors(c_same) == {("t", 0): E.NOT_COORDINATOR}
    assert h.response(c_other) is None
    assert h.group("g") is None and h.group(same) is None
    assert h.response(h.join("g")).error_code == E.NOT_COORDINATOR
    # The abandoned append's late result is ignored; the other partition's still counts.
    stale = next(a for a in h.pending_appends if a.partition == p)
    h.pending_appends.remove(stale)
    assert h.coordinator.on_append_result(stale.append_id, 0, h.now_ms) == []
    h.ack_all()
    assert h.commit_errors(c_other) == {("t", 0): 0}
    assert h.fetched(other, {"t": [0]}) == {("t", 0): 1}


def test_partition_count_change_rebalances_subscribed_groups() -> None:
    h = Harness()
    h.form_group("a", 1, topics=["t"])
    h.form_group("b", 1, topics=["u"])
    h.run(h.coordinator.on_partition_count_change(["t"], h.now_ms))
    assert h.group("a").state is S.PREPARING_REBALANCE
    assert h.group("b").state is S.STABLE


# ------------------------------------------------------------------ admin APIs

def test_list_and_describe_groups() -> None:
    h = Harness()
    ids = h.form_group("g", 2)
    h.commit("solo", {("t", 0): 3})
    lst = h.list_groups(version=4)
    assert [(g.group_id, g.protocol_type, g.group_state) for g in lst.groups] == [
        ("g", "consumer", "Stable"), ("solo", "", "Empty")]
    assert [g.group_id for g in h.list_groups(version=4, states=["empty"]).groups] == ["solo"]
    d = h.describe(["g", "solo", "nope"], version=4)
    g, solo, nope = d.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", RANGE)
    assert [m.member_id for m in g.members] == list(h.group("g").members)
    assert all(m.member_metadata == subscription(["t"]) and m.member_assignment for m in g.members)
    assert (solo.group_state, solo.members) == ("Empty", [])
    assert (nope.error_code, nope.group_state) == (0, "Dead")
    h.join("g", member_id=ids[0])         # leader rejoins: metadata hidden while rebalancing
    d = h.describe(["g"], version=0)
    assert d.groups[0].group_state == "PreparingRebalance" and d.groups[0].protocol_data == ""
    assert all(m.member_metadata == b"" for m in d.groups[0].members)


def test_delete_groups() -> None:
    h = Harness()
    h.form_group("live", 1)
    h.commit("solo", {("t", 0): 3, ("t", 1): 4})
    t = h.delete_groups(["live", "solo", "nope", ""])
    r = h.response(t)
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("live", E.NON_EMPTY_GROUP), ("solo", 0), ("nope", E.GROUP_ID_NOT_FOUND),
        ("", E.GROUP_ID_NOT_FOUND)]
    assert h.group("solo") is None
    assert h.fetched("solo", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    p = h.coordinator.partition_for("solo")
    loaded = h.log.load(p).image
    assert "solo" not in loaded.offsets and "solo" not in loaded.groups


def test_delete_group_write_failure_keeps_the_group() -> None:
    h = Harness()
    h.commit("solo", {("t", 0): 3})
    h.auto_ack = False
    t = h.delete_groups(["solo"])
    assert h.group("solo").state is S.DEAD
    assert h.response(h.join("solo", version=3)).error_code == E.COORDINATOR_NOT_AVAILABLE
    h.ack_next(E.NOT_ENOUGH_REPLICAS)
    assert h.response(t).results[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert h.group("solo").state is S.EMPTY
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 3}


def test_deleting_a_group_writes_tombstones_for_it_and_its_offsets() -> None:
    h = Harness(auto_ack=False)
    h.commit("solo", {("t", 0): 3, ("u", 1): 4})
    h.ack_all()
    h.delete_groups(["solo"])
    [append] = h.pending_appends
    assert [(r.key, r.value) for r in append.records] == [
        (OffsetCommitKey("solo", "t", 0), None), (OffsetCommitKey("solo", "u", 1), None),
        (GroupMetadataKey("solo"), None)]
    h.ack_all()
    loader = h.log.load(h.coordinator.partition_for("solo"))
    assert loader.records_replayed == 5
    assert loader.image.group_ids() == set()


# ------------------------------------------------------------------ shell contract

def test_failures_may_be_reported_early_successes_only_in_order() -> None:
    h = Harness(auto_ack=False)
    first = h.commit("solo", {("t", 0): 1})
    second = h.commit("solo", {("t", 0): 2})
    a, b = h.pending_appends
    h.pending_appends.clear()
    # The second append was refused at once while the first still awaits replication.
    h.run(h.coordinator.on_append_result(b.append_id, int(E.NOT_LEADER_OR_FOLLOWER), h.now_ms))
    assert h.commit_errors(second) == {("t", 0): E.NOT_COORDINATOR}
    h.log.append(a)
    h.run(h.coordinator.on_append_result(a.append_id, 0, h.now_ms))
    assert h.commit_errors(first) == {("t", 0): 0}
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 1}
    c = h.commit("solo", {("t", 0): 3})
    d = h.commit("solo", {("t", 0): 4})
    later = h.pending_appends[1]
    with pytest.raises(AssertionError, match="append order"):
        h.coordinator.on_append_result(later.append_id, 0, h.now_ms)
    assert c and d


def test_a_retried_join_supersedes_the_parked_one() -> None:
    h = Harness()
    ids = h.form_group("g", 2)
    first = h.join("g", member_id=ids[0])          # leader rejoin: parked, waiting for ids[1]
    retry = h.join("g", member_id=ids[0])
    assert h.response(first).error_code == E.REBALANCE_IN_PROGRESS
    assert h.response(retry) is None
    h.join("g", member_id=ids[1])
    assert h.response(retry).generation_id == 2


def test_join_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    t = h.join("g", version=0, session_timeout_ms=7_000, rebalance_timeout_ms=99_999)
    h.settle()
    m = h.group("g").members[h.response(t).member_id]
    assert m.rebalance_timeout_ms == 7_000 and m.session_timeout_ms == 7_000


def test_partition_count_change_during_sync_restarts_the_rebalance() -> None:
    h = Harness(auto_ack=False)
    tokens = [h.join_new("g", client_id=f"c{i}") for i in range(2)]
    h.settle()
    follower = next(h.response(t).member_id for t in tokens
                    if h.response(t).member_id != h.response(t).leader)
    fs = h.sync("g", follower, 1)
    h.run(h.coordinator.on_partition_count_change(["t"], h.now_ms))
    assert h.response(fs).error_code == E.REBALANCE_IN_PROGRESS
    assert h.group("g").state is S.PREPARING_REBALANCE
