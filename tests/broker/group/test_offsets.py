"""Committed offsets: commit validation, durability, fetch shapes, deletes and retention."""
from __future__ import annotations

import pytest

from broker.group import GroupConfig, GroupState, OffsetCommitValue
from broker.group.offsets import commit_append_error
from clients.protocol.errors import ErrorCode
from group_harness import Harness

E = ErrorCode
S = GroupState
DAY_MS = 24 * 3600 * 1000


def test_standalone_commit_creates_an_empty_group_and_is_fetched() -> None:
    h = Harness()
    t = h.commit("solo", {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, metadata="m")
    assert h.commit_errors(t) == {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    g = h.group("solo")
    assert g.state is S.EMPTY and g.protocol_type is None
    assert h.fetched("solo", {"t": [0, 1, 2]}) == {("t", 0): 10, ("t", 1): 20, ("t", 2): -1}
    assert h.fetched("solo", None) == {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}
    r = h.fetch("solo", {"t": [0]}, version=5)
    p = r.topics[0].partitions[0]
    assert (p.metadata, p.committed_leader_epoch, p.error_code) == ("m", -1, 0)


def test_commit_is_visible_only_once_acknowledged() -> None:
    h = Harness(auto_ack=False)
    t = h.commit("solo", {("t", 0): 10})
    assert h.response(t) is None
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): -1}
    h.ack_all()
    assert h.commit_errors(t) == {("t", 0): 0}
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 10}


@pytest.mark.parametrize("append_error,client_error", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.RECORD_LIST_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
])
def test_failed_commit_append_changes_nothing(append_error, client_error) -> None:
    h = Harness(auto_ack=False)
    h.commit("solo", {("t", 0): 1})
    h.ack_all()
    t = h.commit("solo", {("t", 0): 2})
    h.ack_next(append_error)
    assert h.commit_errors(t) == {("t", 0): client_error}
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 1}
    assert commit_append_error(9999) == E.UNKNOWN_SERVER_ERROR


def test_commit_validation_against_the_group() -> None:
    h = Harness()
    ids = h.form_group("g", 2)
    ok = h.commit("g", {("t", 0): 1}, member_id=ids[0], generation_id=1)
    assert h.commit_errors(ok) == {("t", 0): 0}
    cases = [
        (dict(member_id="ghost", generation_id=1), E.UNKNOWN_MEMBER_ID),
        (dict(member_id=ids[0], generation_id=7), E.ILLEGAL_GENERATION),
        (dict(member_id="", generation_id=-1), E.UNKNOWN_MEMBER_ID),   # not Empty: no simple commits
    ]
    for kw, error in cases:
        assert h.commit_errors(h.commit("g", {("t", 0): 9}, **kw)) == {("t", 0): error}, kw
    assert h.commit_errors(h.commit("gone", {("t", 0): 9}, member_id="x", generation_id=3)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert h.group("gone") is None
    # A rebalance in progress still accepts the old generation's commits (PreparingRebalance)...
    h.join("g", member_id=ids[0])
    assert h.group("g").state is S.PREPARING_REBALANCE
    t = h.commit("g", {("t", 0): 2}, member_id=ids[1], generation_id=1)
    assert h.commit_errors(t) == {("t", 0): 0}
    # ...but not once the new generation exists and awaits its assignment.
    h.join("g", member_id=ids[1])
    assert h.group("g").state is S.COMPLETING_REBALANCE
    t = h.commit("g", {("t", 0): 3}, member_id=ids[1], generation_id=2)
    assert h.commit_errors(t) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 2}


def test_commit_to_a_group_being_deleted() -> None:
    h = Harness()
    h.commit("solo", {("t", 0): 1})
    h.auto_ack = False
    h.delete_groups(["solo"])
    t = h.commit("solo", {("t", 0): 2})
    assert h.commit_errors(t) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}


def test_metadata_too_large_is_refused_per_partition() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4))
    t = h.commit("solo", {("t", 0): 1}, metadata="12345")
    assert h.commit_errors(t) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.group("solo") is None               # nothing written, no group left behind
    t = h.commit("solo", {("t", 0): 1}, metadata="1234")
    assert h.commit_errors(t) == {("t", 0): 0}


def test_commit_versions_shape_the_record() -> None:
    h = Harness()
    h.commit("a", {("t", 0): 1}, version=6, leader_epoch=4, metadata=None)
    h.commit("b", {("t", 0): 1}, version=2, retention_time_ms=60_000)
    h.commit("c", {("t", 0): 1}, version=5, leader_epoch=4)     # no epoch before v6
    image = lambda g: h.coordinator.image(h.coordinator.partition_for(g)).offsets[g][("t", 0)]
    assert image("a") == OffsetCommitValue(1, 4, "", h.now_ms)
    assert image("b") == OffsetCommitValue(1, -1, "", h.now_ms, h.now_ms + 60_000)
    assert image("c") == OffsetCommitValue(1, -1, "", h.now_ms)


# ------------------------------------------------------------------ OffsetFetch shapes

def test_offset_fetch_versions() -> None:
    h = Harness(partitions=())
    p = h.coordinator.partition_for("g")
    r1 = h.fetch("g", {"t": [0, 1]}, version=1)
    assert [(x.partition_index, x.committed_offset, x.error_code)
            for x in r1.topics[0].partitions] == [(0, -1, E.NOT_COORDINATOR),
                                                  (1, -1, E.NOT_COORDINATOR)]
    r5 = h.fetch("g", {"t": [0]}, version=5)
    assert r5.error_code == E.NOT_COORDINATOR and r5.topics == []
    r8 = h.fetch("g", {"t": [0]}, version=8)
    assert [(g.group_id, g.error_code, g.topics) for g in r8.groups] == [
        ("g", E.NOT_COORDINATOR, [])]
    h.coordinator.begin_load(p)
    h.run(h.coordinator.complete_load(p, h.log.load(p).image, h.now_ms))
    h.commit("g", {("t", 0): 7}, leader_epoch=3)
    r8 = h.fetch("g", None, version=8)
    [group] = r8.groups
    assert group.error_code == 0
    assert [(t.name, [(x.partition_index, x.committed_offset, x.committed_leader_epoch)
                      for x in t.partitions]) for t in group.topics] == [("t", [(0, 7, 3)])]
    r0 = h.fetch("g", {"t": [0]}, version=0)
    assert r0.topics[0].partitions[0].committed_offset == 7


def test_offset_fetch_for_many_groups_v8_mixes_errors() -> None:
    h = Harness(partitions=())
    p = h.coordinator.partition_for("mine")
    other = next(f"x{i}" for i in range(1000) if h.coordinator.partition_for(f"x{i}") != p)
    h.coordinator.begin_load(p)
    h.run(h.coordinator.complete_load(p, h.log.load(p).image, h.now_ms))
    h.commit("mine", {("t", 0): 1})
    from clients.protocol import messages
    R = messages.OffsetFetchRequest
    req = R(groups=[R.OffsetFetchRequestGroup(group_id="mine", topics=None),
                    R.OffsetFetchRequestGroup(group_id=other, topics=None)])
    t = h.token("fetch", 8)
    h.run(h.coordinator.handle_offset_fetch(t, req, 8, h.now_ms))
    r = h.response(t)
    assert [(g.group_id, g.error_code, len(g.topics)) for g in r.groups] == [
        ("mine", 0, 1), (other, E.NOT_COORDINATOR, 0)]


# ------------------------------------------------------------------ OffsetDelete

def _delete_errors(h: Harness, t: int) -> tuple[int, dict]:
    r = h.response(t)
    return r.error_code, {(x.name, p.partition_index): p.error_code
                          for x in r.topics for p in x.partitions}


def test_offset_delete_rules() -> None:
    h = Harness()
    assert _delete_errors(h, h.offset_delete("nope", {"t": [0]}))[0] == E.GROUP_ID_NOT_FOUND
    h.commit("solo", {("t", 0): 1, ("t", 1): 2})
    assert _delete_errors(h, h.offset_delete("solo", {"t": [0, 5]})) == \
        (0, {("t", 0): 0, ("t", 5): 0})
    assert h.fetched("solo", None) == {("t", 1): 2}
    ids = h.form_group("g", 1, topics=["t"])
    h.commit("g", {("t", 0): 1, ("u", 0): 1}, member_id=ids[0], generation_id=1)
    assert _delete_errors(h, h.offset_delete("g", {"t": [0], "u": [0]})) == \
        (0, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0})
    assert h.fetched("g", None) == {("t", 0): 1}
    # A live group of another protocol type: its subscriptions are opaque.
    t = h.join("conn", version=3, protocol_type="connect", protocols=[("v1", b"x")])
    h.settle()
    assert h.response(t).error_code == 0
    assert _delete_errors(h, h.offset_delete("conn", {"t": [0]}))[0] == E.NON_EMPTY_GROUP


# ------------------------------------------------------------------ retention

def test_offsets_of_an_empty_group_expire_after_retention_since_it_emptied() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=60,
                            offsets_retention_check_interval_ms=60_000))
    ids = h.form_group("g", 1)
    h.commit("g", {("t", 0): 5}, member_id=ids[0], generation_id=1)
    h.advance(5_000)
    assert h.heartbeat("g", ids[0], 1) == E.NONE
    assert h.leave("g", [(ids[0], None)]).members[0].error_code == 0
    emptied_ms = h.now_ms
    g = h.group("g")
    assert g.state is S.EMPTY and g.current_state_timestamp_ms == emptied_ms
    while h.now_ms + 60_000 < emptied_ms + 60 * 60_000:
        h.advance(60_000)                    # the check runs every minute
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 5}
    h.advance(60_000)                        # past 60 min since it became empty
    # The same pass deletes the group, now Empty and without offsets (Kafka does too).
    assert h.fetched("g", {"t": [0]}) == {("t", 0): -1}
    assert h.group("g") is None
    p = h.coordinator.partition_for("g")
    assert "g" not in h.log.load(p).image.group_ids()


def test_standalone_offsets_expire_per_commit_time() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=10,
                            offsets_retention_check_interval_ms=60_000))
    h.commit("solo", {("t", 0): 1})
    h.advance(5 * 60_000)
    h.commit("solo", {("t", 1): 2})
    h.advance(5 * 60_000)                    # t-0 is 10 min old, t-1 5 min
    assert h.fetched("solo", None) == {("t", 1): 2}
    h.advance(5 * 60_000)
    assert h.group("solo") is None


def test_stable_group_keeps_subscribed_offsets_and_expires_others() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=10,
                            offsets_retention_check_interval_ms=60_000))
    ids = h.form_group("g", 1, topics=["t"], session_timeout_ms=600_000)
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, member_id=ids[0], generation_id=1)
    for _ in range(11):
        h.advance(60_000)
        assert h.heartbeat("g", ids[0], 1) == E.NONE
    assert h.fetched("g", None) == {("t", 0): 1}


def test_explicit_expire_timestamp_wins() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=60,
                            offsets_retention_check_interval_ms=60_000))
    h.commit("solo", {("t", 0): 1}, version=2, retention_time_ms=120_000)
    h.advance(60_000)
    assert h.fetched("solo", None) == {("t", 0): 1}
    h.advance(60_000)
    assert h.fetched("solo", None) == {}


def test_offsets_with_a_commit_in_flight_do_not_expire() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1,
                            offsets_retention_check_interval_ms=60_000))
    h.commit("solo", {("t", 0): 1})
    h.auto_ack = False
    h.now_ms += 59_999
    h.commit("solo", {("t", 0): 2})          # in flight when the check runs
    h.advance(1)
    assert [a.records[0].value for a in h.pending_appends] == [
        OffsetCommitValue(2, -1, "", h.now_ms - 1)]
    h.ack_all()
    assert h.fetched("solo", None) == {("t", 0): 2}


def test_retention_check_runs_on_its_interval() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1,
                            offsets_retention_check_interval_ms=600_000))
    h.commit("solo", {("t", 0): 1})
    assert h.poll() == 600_000
    h.advance(599_999)
    assert h.fetched("solo", None) == {("t", 0): 1}
    h.advance(1)
    assert h.fetched("solo", None) == {}
