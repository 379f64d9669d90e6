"""KIP-848 consumer groups, deterministically: reconciliation, heartbeats, timers, replay,
offsets with member epochs, and the online upgrade of a classic group."""
from __future__ import annotations

import uuid

import pytest

from broker.group import GroupConfig
from broker.group.consumer_group import (
    ConsumerGroup, ConsumerGroupMember, MemberState, next_assignment,
)
from clients._core.assignors import decode_assignment
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from group_harness import RANGE, Harness, assignment, subscription

E = ErrorCode
M = MemberState
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


# ------------------------------------------------------------------ the reconciliation table

FREE = lambda t, p: -1          # noqa: E731  nobody else holds anything


def member(epoch: int, assigned: dict, state: M = M.STABLE, revoking: dict | None = None
           ) -> ConsumerGroupMember:
    return ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1,
                               state=state, assigned=assigned, pending_revocation=revoking or {})


@pytest.mark.parametrize("case", [
    # (name, member, target epoch, target, owned, held by others, expected (epoch, state, assigned, revoking))
    ("stable and current: unchanged", member(10, {T1: fs(0, 1)}), 10, {T1: fs(0, 1)}, None, {},
     (10, M.STABLE, {T1: fs(0, 1)}, {})),
    ("new partitions, all free: straight to the target", member(10, {T1: fs(0)}), 11,
     {T1: fs(0, 1, 2)}, {T1: fs(0)}, {}, (11, M.STABLE, {T1: fs(0, 1, 2)}, {})),
    ("a partition to give up, still owned: stay and revoke", member(10, {T1: fs(0, 1)}), 11,
     {T1: fs(0)}, {T1: fs(0, 1)}, {}, (10, M.UNREVOKED_PARTITIONS, {T1: fs(0)}, {T1: fs(1)})),
    ("a partition to give up, owned unknown: assume owned", member(10, {T1: fs(0, 1)}), 11,
     {T1: fs(0)}, None, {}, (10, M.UNREVOKED_PARTITIONS, {T1: fs(0)}, {T1: fs(1)})),
    ("a partition to give up, already not owned: no revocation round",
     member(10, {T1: fs(0, 1)}), 11, {T1: fs(0)}, {T1: fs(0)}, {}, (11, M.STABLE, {T1: fs(0)}, {})),
    ("revoking, still reports it: wait", member(10, {T1: fs(0)}, M.UNREVOKED_PARTITIONS, {T1: fs(1)}),
     11, {T1: fs(0)}, {T1: fs(0, 1)}, {}, (10, M.UNREVOKED_PARTITIONS, {T1: fs(0)}, {T1: fs(1)})),
    ("revoked: move to the target epoch", member(10, {T1: fs(0)}, M.UNREVOKED_PARTITIONS, {T1: fs(1)}),
     11, {T1: fs(0)}, {T1: fs(0)}, {}, (11, M.STABLE, {T1: fs(0)}, {})),
    ("a target partition held by another: unreleased, the free ones given",
     member(10, {}), 11, {T1: fs(0, 1), T2: fs(0)}, {}, {(T1, 1): 10},
     (11, M.UNRELEASED_PARTITIONS, {T1: fs(0), T2: fs(0)}, {})),
    ("unreleased, now released", member(11, {T1: fs(0)}, M.UNRELEASED_PARTITIONS), 11,
     {T1: fs(0, 1)}, {T1: fs(0)}, {}, (11, M.STABLE, {T1: fs(0, 1)}, {})),
    ("a whole topic removed from the target", member(10, {T1: fs(0), T2: fs(3)}), 12,
     {T1: fs(0)}, {T1: fs(0), T2: fs(3)}, {}, (10, M.UNREVOKED_PARTITIONS, {T1: fs(0)}, {T2: fs(3)})),
], ids=lambda c: c[0] if isinstance(c, tuple) else "")
def test_next_assignment_table(case) -> None:
    _, m, target_epoch, target, owned, held, (epoch, state, assigned, revoking) = case
    out = next_assignment(m, target_epoch, target, owned, lambda t, p: held.get((t, p), -1))
    assert (out.member_epoch, out.state, dict(out.assigned), dict(out.pending_revocation)) == \
        (epoch, state, assigned, revoking)


# ------------------------------------------------------------------ the coordinator

def harness(**cfg) -> Harness:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, **cfg))
    h.coordinator.set_topics({"t": (T1, 4), "u": (T2, 2)})
    return h


def parts(response) -> dict[uuid.UUID, frozenset[int]]:
    assert response.assignment is not None
    return {tp.topic_id: frozenset(tp.partitions) for tp in response.assignment.topic_partitions}


def owners(h: Harness, group_id: str = "g") -> dict[tuple[uuid.UUID, int], str]:
    out: dict[tuple[uuid.UUID, int], str] = {}
    for m in h.coordinator.consumer_group(group_id).members.values():
        for t, ps in [*m.assigned.items(), *m.pending_revocation.items()]:
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} owned twice"
                out[(t, p)] = m.member_id
    return out


def test_a_member_joins_and_gets_every_partition() -> None:
    h = harness()
    r = h.cg_heartbeat(topics=["t"])
    assert r.error_code == 0 and r.member_id and r.member_epoch == 1
    assert parts(r) == {T1: fs(0, 1, 2, 3)}
    assert r.heartbeat_interval_ms == 5000
    g = h.coordinator.consumer_group("g")
    assert g.state == "Stable" and g.group_epoch == g.assignment_epoch == 1
    # A heartbeat with nothing changed gets no assignment back and writes nothing.
    appended = len(h.log.batches[h.coordinator.partition_for("g")])
    r2 = h.cg_heartbeat(member_id=r.member_id, epoch=1, owned=None)
    assert r2.error_code == 0 and r2.member_epoch == 1 and r2.assignment is None
    assert len(h.log.batches[h.coordinator.partition_for("g")]) == appended


def test_a_second_member_gets_half_once_the_first_revokes() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"])
    b = h.cg_heartbeat(member_id="b-member", topics=["t"])
    assert b.error_code == 0 and b.member_epoch == 2
    assert parts(b) == {}                         # everything is still a's: unreleased
    g = h.coordinator.consumer_group("g")
    assert g.members["b-member"].state is M.UNRELEASED_PARTITIONS and g.state == "Reconciling"
    owners(h)
    # a hears it must give two partitions up, keeps its epoch meanwhile.
    a2 = h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: [0, 1, 2, 3]})
    assert a2.member_epoch == 1 and len(parts(a2)[T1]) == 2
    kept = parts(a2)[T1]
    assert g.members[a.member_id].state is M.UNREVOKED_PARTITIONS
    # b asks again: nothing released yet.
    assert h.cg_heartbeat(member_id="b-member", epoch=2, owned={}).assignment is None
    # a revokes: it moves to epoch 2, and b then gets the other half.
    a3 = h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: sorted(kept)})
    assert a3.member_epoch == 2
    b3 = h.cg_heartbeat(member_id="b-member", epoch=2, owned={})
    assert parts(b3) == {T1: fs(0, 1, 2, 3) - kept}
    assert g.state == "Stable" and len(owners(h)) == 4


def test_leaving_and_session_timeout_hand_partitions_over() -> None:
    h = harness(consumer_group_session_timeout_ms=10_000, consumer_group_heartbeat_interval_ms=1_000)
    a = h.cg_heartbeat(topics=["t"])
    b = h.cg_heartbeat(topics=["t"])
    h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: [0, 1, 2, 3]})
    g = h.coordinator.consumer_group("g")
    keep = g.members[a.member_id].assigned[T1]
    h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: sorted(keep)})
    h.cg_heartbeat(member_id=b.member_id, epoch=2, owned={})
    # b leaves: a gets everything at the next epoch.
    left = h.cg_heartbeat(member_id=b.member_id, epoch=-1)
    assert left.error_code == 0 and left.member_epoch == -1
    assert b.member_id not in g.members and g.group_epoch == 3
    a4 = h.cg_heartbeat(member_id=a.member_id, epoch=2, owned={T1: sorted(keep)})
    assert a4.member_epoch == 3 and parts(a4) == {T1: fs(0, 1, 2, 3)}
    # a goes silent: its session times out and the group is empty.
    assert h.advance(9_000) <= 1_000
    assert a.member_id in g.members
    h.advance(1_000)
    assert not g.members and g.state == "Empty"
    r = h.cg_heartbeat(member_id=a.member_id, epoch=3, owned={})
    assert r.error_code == E.UNKNOWN_MEMBER_ID


def test_epochs_are_checked() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"])
    assert h.cg_heartbeat(member_id=a.member_id, epoch=5).error_code == E.FENCED_MEMBER_EPOCH
    h.cg_heartbeat(topics=["t"])                        # epoch 2 now; a is told at 1
    a2 = h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: [0, 1, 2, 3]})
    assert a2.error_code == 0
    keep = parts(a2)[T1]
    a3 = h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: sorted(keep)})
    assert a3.member_epoch == 2
    # The answer moving a to epoch 2 was lost: epoch 1 again, owning only what it has, is fine.
    assert h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: sorted(keep)}).error_code == 0
    # ... but not while claiming partitions it no longer has.
    assert h.cg_heartbeat(member_id=a.member_id, epoch=1,
                          owned={T1: [0, 1, 2, 3]}).error_code == E.FENCED_MEMBER_EPOCH
    assert h.cg_heartbeat(member_id="nobody", epoch=3).error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("kwargs,error", [
    ({"epoch": 0, "topics": []}, E.INVALID_REQUEST),
    ({"epoch": 0, "rebalance_timeout_ms": -1, "topics": ["t"]}, None),     # harness fills it
    ({"epoch": 3, "member_id": ""}, E.INVALID_REQUEST),
    ({"epoch": -3, "member_id": "m"}, E.INVALID_REQUEST),
    ({"epoch": -2, "member_id": "m"}, E.INVALID_REQUEST),               # static leave needs an id
    ({"epoch": 0, "assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR),
    ({"epoch": 0, "topics": None, "regex": "t("}, E.INVALID_REGULAR_EXPRESSION),
    ({"epoch": 0, "instance_id": " "}, E.INVALID_REQUEST),
])
def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(kwargs, error) -> None:
    h = harness()
    r = h.cg_heartbeat(**kwargs)
    if error is None:
        assert r.error_code == 0
        return
    assert r.error_code == error and r.error_message
    assert h.coordinator.consumer_group("g") is None or not h.coordinator.consumer_group("g").members
    assert not h.pending_appends


def test_range_assignor_and_regex_subscriptions() -> None:
    h = harness()
    a = h.cg_heartbeat(member_id="a", topics=None, regex="[tu]", assignor="range")
    assert parts(a) == {T1: fs(0, 1, 2, 3), T2: fs(0, 1)}
    b = h.cg_heartbeat(member_id="b", topics=["t", "u"], assignor="range")
    h.cg_heartbeat(member_id="a", epoch=1, owned={T1: [0, 1, 2, 3], T2: [0, 1]})
    h.cg_heartbeat(member_id="a", epoch=1, owned={T1: [0, 1], T2: [0]})
    b2 = h.cg_heartbeat(member_id="b", epoch=b.member_epoch, owned={})
    assert parts(b2) == {T1: fs(2, 3), T2: fs(1)}     # range: contiguous per topic


def test_a_failed_append_leaves_the_group_as_the_log_has_it() -> None:
    h = harness()
    h.auto_ack = True
    a = h.cg_heartbeat(topics=["t"])
    g = h.coordinator.consumer_group("g")
    h.auto_ack = False
    h.cg_heartbeat(member_id="b", topics=["t"])
    assert "b" in g.members                      # replayed at once, for the next request
    h.ack_all(E.NOT_ENOUGH_REPLICAS)
    g = h.coordinator.consumer_group("g")
    assert "b" not in g.members and g.group_epoch == 1
    assert h.coordinator.consumer_group("g").members[a.member_id].member_epoch == 1


def test_a_new_coordinator_loads_the_same_group() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"])
    b = h.cg_heartbeat(topics=["t", "u"], instance_id="i-b")
    h.cg_heartbeat(member_id=a.member_id, epoch=1, owned={T1: [0, 1, 2, 3]})
    before = h.coordinator.consumer_group("g")
    p = h.coordinator.partition_for("g")
    other = Harness(h.config, partitions=())
    other.coordinator.set_topics({"t": (T1, 4), "u": (T2, 2)})
    other.coordinator.begin_load(p)
    other.run(other.coordinator.complete_load(p, h.log.load(p).image, other.now_ms))
    after = other.coordinator.consumer_group("g")
    assert (after.group_epoch, after.assignment_epoch, after.members, after.target,
            after.subscription_metadata) == (before.group_epoch, before.assignment_epoch,
                                             before.members, before.target,
                                             before.subscription_metadata)
    assert after.members[b.member_id].instance_id == "i-b"


def test_static_member_restart_keeps_its_partitions() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"], instance_id="i-1")
    left = h.cg_heartbeat(member_id=a.member_id, epoch=-2, instance_id="i-1")
    assert left.error_code == 0 and left.member_epoch == -2
    # Another join with the same instance id while the first has not left: refused.
    h2 = h.cg_heartbeat(topics=["t"], instance_id="i-2")
    assert h2.error_code == 0
    back = h.cg_heartbeat(member_id="new-id", topics=["t"], instance_id="i-1")
    assert back.error_code == 0 and back.member_id == "new-id"
    g = h.coordinator.consumer_group("g")
    assert a.member_id not in g.members and "new-id" in g.members
    assert h.cg_heartbeat(member_id="newer", topics=["t"],
                          instance_id="i-1").error_code == E.UNRELEASED_INSTANCE_ID


def test_offsets_are_committed_with_member_epochs() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"])
    ok = h.commit("g", {("t", 0): 5}, member_id=a.member_id, generation_id=1, version=9)
    assert h.commit_errors(ok) == {("t", 0): 0}
    stale = h.commit("g", {("t", 0): 6}, member_id=a.member_id, generation_id=0, version=9)
    assert h.commit_errors(stale) == {("t", 0): E.STALE_MEMBER_EPOCH}
    fenced = h.commit("g", {("t", 0): 6}, member_id=a.member_id, generation_id=2, version=9)
    assert h.commit_errors(fenced) == {("t", 0): E.FENCED_MEMBER_EPOCH}
    old = h.commit("g", {("t", 0): 6}, member_id=a.member_id, generation_id=1, version=8)
    assert h.commit_errors(old) == {("t", 0): E.UNSUPPORTED_VERSION}
    unknown = h.commit("g", {("t", 0): 6}, member_id="x", generation_id=1, version=9)
    assert h.commit_errors(unknown) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 5}
    listed = h.list_groups(version=5)
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == \
        [("g", "consumer", "Stable")]


def test_delete_needs_an_empty_group() -> None:
    h = harness()
    a = h.cg_heartbeat(topics=["t"])
    h.commit("g", {("t", 0): 5}, member_id=a.member_id, generation_id=1, version=9)
    assert deleted(h, "g") == E.NON_EMPTY_GROUP
    h.cg_heartbeat(member_id=a.member_id, epoch=-1)
    assert deleted(h, "g") == 0
    assert h.coordinator.consumer_group("g") is None
    p = h.coordinator.partition_for("g")
    image = h.log.load(p).image
    assert "g" not in image.consumer_groups and "g" not in image.offsets


# ------------------------------------------------------------------ online upgrade

def stable_classic_group(h: Harness) -> tuple[str, str]:
    """Two classic members sharing t's 4 partitions at generation 1."""
    j1 = h.join_new("g", topics=["t"])
    j2 = h.join_new("g", topics=["t"])
    h.settle()
    r1, r2 = h.response(j1), h.response(j2)
    leader = r1 if r1.leader == r1.member_id else r2
    follower = r2 if leader is r1 else r1
    plan = {leader.member_id: assignment({"t": [0, 1]}), follower.member_id: assignment({"t": [2, 3]})}
    h.sync("g", follower.member_id, 1)
    h.sync("g", leader.member_id, 1, plan)
    assert h.group("g").state.value == "Stable"
    return leader.member_id, follower.member_id


def test_a_consumer_protocol_member_upgrades_a_classic_group_online() -> None:
    h = harness()
    c1, c2 = stable_classic_group(h)
    n = h.cg_heartbeat(member_id="new", topics=["t"])
    assert n.error_code == 0 and n.member_epoch == 2
    assert h.group("g") is None
    g = h.coordinator.consumer_group("g")
    assert set(g.members) == {c1, c2, "new"} and g.group_epoch == 2
    assert g.members[c1].assigned == {T1: fs(0, 1)} and g.members[c1].classic is not None
    assert parts(n) == {}                  # everything still held by the classic members
    # The classic members hear they must rejoin; eager ones rejoin owning nothing.
    assert h.heartbeat("g", c1, 1) == E.REBALANCE_IN_PROGRESS
    got = {}
    for c in (c1, c2):
        j = h.join("g", member_id=c, topics=["t"])
        r = h.response(j)
        assert r.error_code == 0 and r.generation_id == 2 and r.protocol_name == RANGE, r
        s = h.sync("g", c, 2, version=5, protocol_type="consumer", protocol_name=RANGE)
        assert h.response(s).error_code == 0
        got[c] = decode_assignment(h.response(s).assignment).partitions
        assert h.heartbeat("g", c, 2) == E.NONE
    n2 = h.cg_heartbeat(member_id="new", epoch=2, owned={})
    mine = {TopicPartition("t", p) for p in parts(n2).get(T1, ())}
    theirs = {tp for ps in got.values() for tp in ps}
    assert mine and not mine & theirs and len(mine | theirs) == 4
    # A classic member leaving is a consumer group member leaving.
    out = h.leave("g", [(c1, None)])
    assert [m.error_code for m in out.members] == [0]
    assert c1 not in g.members and g.group_epoch == 3
    # Describe shows the group either way.
    d = h.describe(["g"]).groups[0]
    assert d.group_state in ("Assigning", "Reconciling", "Stable") and d.protocol_type == "consumer"
    assert {m.member_id for m in d.members} == {c2, "new"}
    # The last consumer-protocol member leaves: back to a classic group, rebalancing.
    h.cg_heartbeat(member_id="new", epoch=n2.member_epoch, owned=None)
    assert h.cg_heartbeat(member_id="new", epoch=-1).error_code == 0
    assert h.coordinator.consumer_group("g") is None
    classic = h.group("g")
    assert classic.state.value == "PreparingRebalance" and set(classic.members) == {c2}
    assert h.heartbeat("g", c2, classic.generation_id) == E.REBALANCE_IN_PROGRESS
    j = h.join("g", member_id=c2, topics=["t"])
    h.settle()
    r = h.response(j)
    assert r.error_code == 0 and r.leader == c2 and r.generation_id == classic.generation_id
    s = h.sync("g", c2, r.generation_id, {c2: assignment({"t": [0, 1, 2, 3]})})
    assert h.response(s).error_code == 0 and classic.state.value == "Stable"
    p = h.coordinator.partition_for("g")
    image = h.log.load(p).image
    assert "g" not in image.consumer_groups and image.groups["g"].members


def test_a_classic_group_of_another_protocol_type_is_not_upgraded() -> None:
    h = harness()
    j = h.join_new("g", protocol_type="connect", protocols=[("v1", b"x")])
    h.settle()
    r = h.response(j)
    h.sync("g", r.member_id, 1, {r.member_id: b""})
    assert h.cg_heartbeat(topics=["t"]).error_code == E.GROUP_ID_NOT_FOUND
    assert h.group("g") is not None and h.coordinator.consumer_group("g") is None


def test_an_empty_classic_group_simply_changes_type() -> None:
    h = harness()
    h.commit("g", {("t", 1): 7})               # a standalone consumer's offsets
    r = h.cg_heartbeat(topics=["t"])
    assert r.error_code == 0 and h.group("g") is None
    assert h.fetched("g", {"t": [1]}) == {("t", 1): 7}


def deleted(h: Harness, group_id: str) -> int:
    [result] = h.response(h.delete_groups([group_id])).results
    return result.error_code
