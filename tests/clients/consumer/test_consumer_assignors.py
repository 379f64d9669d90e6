"""Assignors: Kafka's assignor test cases as data, kafka-python as an oracle for range and
roundrobin, and the sticky assignors' balance and stickiness as hypothesis properties.

The cases re-express apache/kafka's RangeAssignorTest, RoundRobinAssignorTest and
AbstractStickyAssignorTest (consumer names, topics, owned partitions, expected lists).
Where Kafka's expected answer depends on a Java HashMap's iteration order (which of two
equally placed members keeps an extra partition), the case checks the property the test is
about instead, and says so.
"""
from __future__ import annotations

import collections
import struct

import pytest
from hypothesis import given, strategies as st

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from clients._core.assignors import (
    ASSIGNORS, DEFAULT_GENERATION, Assignment, Subscription, assignor_for, cooperative_sticky_assign,
    decode_assignment, decode_sticky_user_data, decode_subscription, encode_assignment,
    encode_sticky_user_data, encode_subscription, member_order, partitions_transferring, range_assign,
    roundrobin_assign, sticky_assign,
)
from clients.protocol.types import CorruptFrameError
from clients.types import TopicPartition as TP


def tps(*names: str) -> list[TP]:
    """tps("t1-0", "t2-1") -> [TP("t1", 0), TP("t2", 1)]."""
    out = []
    for n in names:
        topic, _, p = n.rpartition("-")
        out.append(TP(topic, int(p)))
    return out


def subs(spec: dict[str, object], generation: int = 1) -> dict[str, Subscription]:
    """{member: [topics]} or {member: ([topics], [owned])}."""
    out = {}
    for m, v in spec.items():
        if isinstance(v, tuple):
            topics, owned = v
            out[m] = Subscription(tuple(topics), owned_partitions=tuple(tps(*owned)), generation_id=generation)
        else:
            out[m] = Subscription(tuple(v))
    return out


def expand(expected: dict[str, list[str]]) -> dict[str, list[TP]]:
    return {m: tps(*v) for m, v in expected.items()}


# ----------------------------------------------------------------------- range

RANGE_CASES = {
    "one_consumer_no_topic": ({}, {"c": []}, {"c": []}),
    "one_consumer_nonexistent_topic": ({}, {"c": ["t"]}, {"c": []}),
    "one_consumer_one_topic": ({"t": 3}, {"c": ["t"]}, {"c": ["t-0", "t-1", "t-2"]}),
    "only_assigns_subscribed_topics": ({"t": 3, "other": 3}, {"c": ["t"]}, {"c": ["t-0", "t-1", "t-2"]}),
    "one_consumer_multiple_topics": ({"t1": 1, "t2": 2}, {"c": ["t1", "t2"]}, {"c": ["t1-0", "t2-0", "t2-1"]}),
    "two_consumers_one_topic_one_partition": ({"t": 1}, {"c1": ["t"], "c2": ["t"]}, {"c1": ["t-0"], "c2": []}),
    "two_consumers_one_topic_two_partitions": ({"t": 2}, {"c1": ["t"], "c2": ["t"]},
                                               {"c1": ["t-0"], "c2": ["t-1"]}),
    "multiple_consumers_mixed_topics": ({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]},
                                        {"c1": ["t1-0"], "c2": ["t1-1", "t2-0", "t2-1"], "c3": ["t1-2"]}),
    "two_consumers_two_topics_six_partitions": ({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]},
                                                {"c1": ["t1-0", "t1-1", "t2-0", "t2-1"], "c2": ["t1-2", "t2-2"]}),
}


@pytest.mark.parametrize("case", RANGE_CASES)
def test_range_assignor_kafka_cases(case: str) -> None:
    partitions, spec, expected = RANGE_CASES[case]
    assert range_assign(subs(spec), partitions) == expand(expected)


def test_range_static_members_keep_their_place_across_member_ids() -> None:
    """RangeAssignorTest's static-membership case: the order comes from group.instance.id,
    so a restarted static member (new member id) gets the same partitions."""
    def run(ids: dict[str, str]) -> dict[str, list[TP]]:
        s = {ids[i]: Subscription(("t1", "t2"), group_instance_id=i) for i in ("i1", "i2", "i3")}
        out = range_assign(s, {"t1": 3, "t2": 4})
        return {i: out[ids[i]] for i in ids}
    first = run({"i1": "m-c", "i2": "m-b", "i3": "m-a"})
    assert first == run({"i1": "m-z", "i2": "m-b", "i3": "m-a"})
    assert first["i1"] == tps("t1-0", "t2-0", "t2-1")


# ----------------------------------------------------------------------- roundrobin

ROUNDROBIN_CASES = {
    "one_consumer_one_topic": ({"t": 3}, {"c": ["t"]}, {"c": ["t-0", "t-1", "t-2"]}),
    "one_consumer_multiple_topics": ({"t1": 1, "t2": 2}, {"c": ["t1", "t2"]}, {"c": ["t1-0", "t2-0", "t2-1"]}),
    "two_consumers_one_topic_one_partition": ({"t": 1}, {"c1": ["t"], "c2": ["t"]}, {"c1": ["t-0"], "c2": []}),
    "multiple_consumers_mixed_topics": ({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]},
                                        {"c1": ["t1-0"], "c2": ["t1-1", "t2-0", "t2-1"], "c3": ["t1-2"]}),
    "two_consumers_two_topics_six_partitions": ({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]},
                                                {"c1": ["t1-0", "t1-2", "t2-1"], "c2": ["t1-1", "t2-0", "t2-2"]}),
}


@pytest.mark.parametrize("case", ROUNDROBIN_CASES)
def test_roundrobin_assignor_kafka_cases(case: str) -> None:
    partitions, spec, expected = ROUNDROBIN_CASES[case]
    assert roundrobin_assign(subs(spec), partitions) == expand(expected)


# ----------------------------------------------------------------------- kafka-python as an oracle

class _Cluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self._p = partitions

    def partitions_for_topic(self, topic: str):
        n = self._p.get(topic)
        return set(range(n)) if n else None


_Member = collections.namedtuple("_Member", "member_id group_instance_id metadata")
_Meta = collections.namedtuple("_Meta", "topics")

topic_names = st.sampled_from(["a", "b", "c", "d"])
# (partitions per topic, {member id: topics}, all members static?). Static members get
# instance ids that sort differently from their member ids. kafka-python mishandles a mix
# of static and dynamic members (an unsorted itertools.groupby drops some), so the oracle
# runs on all-static or all-dynamic groups; the mixed order is a Kafka case above.
groups = st.tuples(
    st.dictionaries(topic_names, st.integers(1, 7), min_size=1),
    st.dictionaries(st.text("mnxyz", min_size=1, max_size=4), st.sets(topic_names, min_size=1),
                    min_size=1, max_size=6),
    st.booleans())


def _instance(member: str, static: bool) -> str | None:
    return "inst-" + member[::-1] if static else None


def _oracle(assignor, partitions, members, static) -> dict[str, list[TP]]:
    ms = [_Member(m, _instance(m, static), _Meta(sorted(topics))) for m, topics in sorted(members.items())]
    out = assignor.assign(_Cluster(partitions), ms)
    return {m: sorted(TP(t, p) for t, ps in a.assigned_partitions for p in ps) for m, a in out.items()}


def _ours(fn, partitions, members, static) -> dict[str, list[TP]]:
    s = {m: Subscription(tuple(sorted(topics)), group_instance_id=_instance(m, static))
         for m, topics in members.items()}
    return {m: sorted(v) for m, v in fn(s, partitions).items()}


@given(groups)
def test_range_agrees_with_kafka_python(group) -> None:
    assert _ours(range_assign, *group) == _oracle(RangePartitionAssignor, *group)


@given(groups)
def test_roundrobin_deals_every_partition_once_in_member_order(group) -> None:
    """(kafka-python's roundrobin raises KeyError on members with disjoint topics, so it is
    no oracle here.) Every partition goes once to a subscriber; with equal subscriptions the
    counts differ by at most one, the first members in order getting the extra ones."""
    partitions, members, static = group
    s = {m: Subscription(tuple(sorted(t)), group_instance_id=_instance(m, static)) for m, t in members.items()}
    out = roundrobin_assign(s, partitions)
    given_out = [tp for v in out.values() for tp in v]
    assert sorted(given_out) == sorted({TP(t, p) for sub in s.values() for t in sub.topics
                                        for p in range(partitions.get(t, 0))})
    assert all(tp.topic in s[m].topics for m, v in out.items() for tp in v)
    equal = {m: Subscription(("a",), group_instance_id=s[m].group_instance_id) for m in s}
    counts = [len(roundrobin_assign(equal, {"a": 7})[m]) for m in member_order(equal)]
    assert counts == sorted(counts, reverse=True) and counts[0] - counts[-1] <= 1


# ----------------------------------------------------------------------- sticky: Kafka's cases

STICKY = (sticky_assign, cooperative_sticky_assign)


def v2(topics, owned, generation=1) -> Subscription:
    return Subscription(tuple(topics), owned_partitions=tuple(tps(*owned)), generation_id=generation)


@pytest.mark.parametrize("assign", STICKY)
def test_sticky_fresh_group_cases(assign) -> None:
    # testOneConsumerOneTopic / testOneConsumerMultipleTopics / testTwoConsumersTwoTopicsSixPartitions
    assert assign({"c": v2(["t"], [])}, {"t": 3}) == expand({"c": ["t-0", "t-1", "t-2"]})
    assert assign({"c": v2(["t1", "t2"], [])}, {"t1": 1, "t2": 2}) == expand({"c": ["t1-0", "t2-0", "t2-1"]})
    assert assign({"c1": v2(["t1", "t2"], []), "c2": v2(["t1", "t2"], [])}, {"t1": 3, "t2": 3}) == expand(
        {"c1": ["t1-0", "t1-2", "t2-1"], "c2": ["t1-1", "t2-0", "t2-2"]})
    # testMultipleConsumersMixedTopicSubscriptions (the general path)
    assert assign({"c1": v2(["t1"], []), "c2": v2(["t1", "t2"], []), "c3": v2(["t1"], [])},
                  {"t1": 3, "t2": 2}) == expand({"c1": ["t1-0", "t1-2"], "c2": ["t2-0", "t2-1"], "c3": ["t1-1"]})
    # testOnlyAssignsPartitionsFromSubscribedTopics: owned partitions of another topic are dropped
    assert assign({"c": v2(["t"], ["t-0", "t-1", "other-0", "other-1"])}, {"t": 2}) == expand({"c": ["t-0", "t-1"]})


def test_sticky_quota_cases() -> None:
    # testConsumerOwningMinQuotaExpectedMaxQuota
    s = {"c1": v2(["t1", "t2"], ["t1-0", "t2-1"]), "c2": v2(["t1", "t2"], ["t1-1", "t2-2"])}
    assert sticky_assign(s, {"t1": 2, "t2": 3}) == expand({"c1": ["t1-0", "t2-1", "t2-0"], "c2": ["t1-1", "t2-2"]})
    # testAllConsumersAreUnderMinQuota
    s = {"c1": v2(["t1", "t2"], ["t1-0"]), "c2": v2(["t1", "t2"], ["t1-1"]), "c3": v2(["t1", "t2"], [])}
    assert sticky_assign(s, {"t1": 2, "t2": 3}) == expand(
        {"c1": ["t1-0", "t2-1"], "c2": ["t1-1", "t2-2"], "c3": ["t2-0"]})
    # testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers: two members own max_quota
    # but only one may keep it; which one is Java HashMap order, so check the shape: one
    # partition moves, to c3, and each of c1/c2 keeps only what it owned.
    s = {"c1": v2(["t1", "t2"], ["t1-0", "t2-0"]), "c2": v2(["t1", "t2"], ["t1-1", "t2-1"]),
         "c3": v2(["t1", "t2"], [])}
    out = sticky_assign(s, {"t1": 2, "t2": 2})
    assert sorted(len(out[m]) for m in ("c1", "c2")) == [1, 2] and len(out["c3"]) == 1
    assert set(out["c1"]) <= set(tps("t1-0", "t2-0")) and set(out["c2"]) <= set(tps("t1-1", "t2-1"))
    assert len(partitions_transferring(s, out)) == 1


def test_sticky_add_remove_two_consumers_two_topics() -> None:
    """testAddRemoveTwoConsumersTwoTopics, all three steps, exact lists."""
    parts = {"t1": 3, "t2": 4}
    both = ["t1", "t2"]
    out = sticky_assign({"c1": v2(both, []), "c2": v2(both, [])}, parts)
    assert out == expand({"c1": ["t1-0", "t1-2", "t2-1", "t2-3"], "c2": ["t1-1", "t2-0", "t2-2"]})
    s = {"c1": v2(both, [str(tp) for tp in out["c1"]]), "c2": v2(both, [str(tp) for tp in out["c2"]]),
         "c3": v2(both, []), "c4": v2(both, [])}
    out = sticky_assign(s, parts)
    assert partitions_transferring(s, out) == {TP("t2", 1): "c3", TP("t2", 3): "c3", TP("t2", 2): "c4"}
    assert out == expand({"c1": ["t1-0", "t1-2"], "c2": ["t1-1", "t2-0"], "c3": ["t2-1", "t2-3"], "c4": ["t2-2"]})
    s = {"c3": v2(both, [str(tp) for tp in out["c3"]]), "c4": v2(both, [str(tp) for tp in out["c4"]])}
    out = sticky_assign(s, parts)
    assert out == expand({"c3": ["t2-1", "t2-3", "t1-0", "t2-0"], "c4": ["t2-2", "t1-1", "t1-2"]})
    assert partitions_transferring(s, out) == {}


def test_cooperative_add_consumer_withholds_moving_partitions_for_a_second_rebalance() -> None:
    """testAddRemoveConsumerOneTopic under cooperative-sticky: t-2 moves from c1 to c2,
    so the first rebalance gives c2 nothing; once c1 has revoked it, the second gives it."""
    first = cooperative_sticky_assign({"c1": v2(["t"], ["t-0", "t-1", "t-2"]), "c2": v2(["t"], [])}, {"t": 3})
    assert first == expand({"c1": ["t-0", "t-1"], "c2": []})
    second = cooperative_sticky_assign({"c1": v2(["t"], ["t-0", "t-1"], 2), "c2": v2(["t"], [], 2)}, {"t": 3})
    assert second == expand({"c1": ["t-0", "t-1"], "c2": ["t-2"]})
    # and eager sticky hands it over at once
    assert sticky_assign({"c1": v2(["t"], ["t-0", "t-1", "t-2"]), "c2": v2(["t"], [])}, {"t": 3}) == expand(
        {"c1": ["t-0", "t-1"], "c2": ["t-2"]})


def test_sticky_conflicting_and_stale_claims() -> None:
    # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration: c2's claims are from
    # an older generation, so only c1's count.
    s = {"c1": v2(["t"], ["t-0", "t-1", "t-2"], generation=3), "c2": v2(["t"], ["t-0", "t-1", "t-2"], generation=2)}
    out = sticky_assign(s, {"t": 3})
    assert set(out["c1"]) < set(tps("t-0", "t-1", "t-2")) and len(out["c1"]) == 2 and len(out["c2"]) == 1
    # testConflictingPreviousAssignments: same generation, same claim: nobody owns it.
    s = {"c1": v2(["t"], ["t-0", "t-1"]), "c2": v2(["t"], ["t-0", "t-1"])}
    out = sticky_assign(s, {"t": 2})
    assert sorted(out["c1"] + out["c2"]) == tps("t-0", "t-1") and len(out["c1"]) == 1
    # a deleted topic's owned partitions disappear (testAssignmentUpdatedForDeletedTopic)
    out = sticky_assign({"c": v2(["t1", "t2", "t3"], ["t1-0", "t3-0"])}, {"t1": 1, "t3": 100})
    assert len(out["c"]) == 101 and TP("t2", 0) not in out["c"]


def test_sticky_poor_roundrobin_scenario_is_balanced() -> None:
    """testPoorRoundRobinAssignmentScenario: mixed subscriptions, every member gets 2."""
    parts = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    every, odd = [f"topic{i}" for i in range(1, 6)], ["topic1", "topic3", "topic5"]
    s = {"consumer1": v2(every, []), "consumer2": v2(odd, []), "consumer3": v2(odd, []), "consumer4": v2(every, [])}
    out = sticky_assign(s, parts)
    check_valid_and_balanced(s, out, parts)
    assert sorted(len(v) for v in out.values()) == [2, 2, 2, 2]


# ----------------------------------------------------------------------- sticky: properties

def check_valid_and_balanced(s: dict[str, Subscription], out: dict[str, list[TP]], parts: dict[str, int],
                             complete: bool = True) -> None:
    """Kafka's verifyValidityAndBalance: every partition of a subscribed topic is assigned
    exactly once, only to a member subscribed to its topic, and no partition of a member
    could go to an eligible member with 2+ fewer."""
    every = [tp for tp_list in out.values() for tp in tp_list]
    assert len(every) == len(set(every)), "a partition assigned twice"
    for m, tp_list in out.items():
        assert all(tp.topic in s[m].topics for tp in tp_list), f"{m} got an unsubscribed topic"
    wanted = {TP(t, p) for sub in s.values() for t in sub.topics for p in range(parts.get(t, 0))}
    if complete:
        assert set(every) == wanted
    for a, pa in out.items():
        for b, pb in out.items():
            if len(pa) - len(pb) > 1:
                assert not any(tp.topic in s[b].topics for tp in pa), f"{a}->{b} could move"


members = st.lists(st.sampled_from(["m1", "m2", "m3", "m4", "m5", "m6"]), min_size=1, max_size=6, unique=True)


@given(st.dictionaries(topic_names, st.integers(1, 8), min_size=1), members, st.data())
def test_sticky_fresh_mixed_subscriptions_are_valid_and_balanced(parts, names, data) -> None:
    s = {m: Subscription(tuple(sorted(data.draw(st.sets(st.sampled_from(sorted(parts)), min_size=1)))))
         for m in names}
    for assign in (sticky_assign, cooperative_sticky_assign):
        check_valid_and_balanced(s, assign(s, parts), parts)


@given(st.integers(1, 30), members, members, st.data())
def test_sticky_membership_change_keeps_quota_of_owned_partitions(n, before, after, data) -> None:
    """Same subscriptions, members come and go: the result is balanced (sizes differ by at
    most one) and each member that stays keeps min(owned, floor(n/members)) of its own."""
    parts = {"t": n}
    first = sticky_assign({m: v2(["t"], []) for m in before}, parts)
    s = {m: v2(["t"], [str(tp) for tp in first.get(m, [])], generation=2) for m in after}
    out = sticky_assign(s, parts)
    check_valid_and_balanced(s, out, parts)
    sizes = [len(v) for v in out.values()]
    assert max(sizes) - min(sizes) <= 1
    quota = n // len(after)
    for m in after:
        kept = set(out[m]) & set(first.get(m, []))
        assert len(kept) >= min(len(first.get(m, [])), quota)
    # cooperative: the same, minus what moves between members still present; after those
    # members revoke and rejoin, the second rebalance completes it
    coop = cooperative_sticky_assign(s, parts)
    moving = partitions_transferring(s, out)
    assert {m: [tp for tp in v if tp not in moving] for m, v in out.items()} == coop
    s2 = {m: v2(["t"], [str(tp) for tp in coop[m]], generation=3) for m in after}
    check_valid_and_balanced(s2, cooperative_sticky_assign(s2, parts), parts)


@given(st.dictionaries(topic_names, st.integers(1, 6), min_size=2), members, st.data())
def test_sticky_general_reassignment_is_valid_balanced_and_sticky(parts, names, data) -> None:
    topics = sorted(parts)
    s = {m: Subscription(tuple(sorted(data.draw(st.sets(st.sampled_from(topics), min_size=1))))) for m in names}
    first = sticky_assign(s, parts)
    leaving = data.draw(st.sampled_from(names))
    s2 = {m: v2(s[m].topics, [str(tp) for tp in first[m]]) for m in names if m != leaving or len(names) == 1}
    out = sticky_assign(s2, parts)
    check_valid_and_balanced(s2, out, parts)
    # what a remaining member had is moved only if it has more than its fair share
    for m in s2:
        lost = set(first[m]) - set(out[m])
        if lost:
            assert len(first[m]) > len(out[m]) - 1 or len(out[m]) >= len(first[m]) - len(lost)


# ----------------------------------------------------------------------- byte layouts

def test_subscription_bytes_read_by_aiokafka_and_back() -> None:
    s = ASSIGNORS["range"].subscription(["b", "a"], [TP("a", 1)], 7)
    raw = encode_subscription(s)
    # aiokafka's v0 reader takes the version, topics and user data and ignores what follows
    theirs = ConsumerProtocolMemberMetadata.decode(raw)
    assert theirs.version == 3 and list(theirs.subscription) == ["a", "b"]
    assert decode_subscription(raw) == s
    # what aiokafka writes (v0), we read
    mine = decode_subscription(ConsumerProtocolMemberMetadata(0, ["x", "y"], b"ud").encode())
    assert mine == Subscription(("x", "y"), user_data=b"ud")


def test_assignment_bytes_read_by_aiokafka_and_back() -> None:
    a = Assignment(tuple(tps("t-0", "t-2", "u-1")))
    raw = encode_assignment(a)
    theirs = ConsumerProtocolMemberAssignment.decode(raw)
    assert [(t, list(ps)) for t, ps in theirs.assignment] == [("t", [0, 2]), ("u", [1])]
    assert decode_assignment(raw) == a
    assert decode_assignment(ConsumerProtocolMemberAssignment(0, [("z", [3, 4])], b"").encode()) == Assignment(
        tuple(tps("z-3", "z-4")), b"")
    assert decode_assignment(b"") == Assignment(())


def test_newer_versions_are_read_with_trailing_fields_ignored() -> None:
    raw = bytearray(encode_subscription(Subscription(("t",), generation_id=4, rack_id="r1")))
    raw[0:2] = struct.pack(">h", 9)
    assert decode_subscription(bytes(raw) + b"\x00\x00\x00\x07").rack_id == "r1"


def test_garbage_subscription_is_a_protocol_error() -> None:
    for bad in (b"", b"\x00", b"\x00\x00\xff\xff\xff\x7f", b"\xff\xff\x00\x00"):
        with pytest.raises(CorruptFrameError):
            decode_subscription(bad)


def test_sticky_user_data_round_trip_and_generation() -> None:
    raw = encode_sticky_user_data(tps("t-0", "t-1", "u-3"), 12)
    assert decode_sticky_user_data(raw) == (tuple(tps("t-0", "t-1", "u-3")), 12)
    assert decode_sticky_user_data(raw[:-4]) == (tuple(tps("t-0", "t-1", "u-3")), DEFAULT_GENERATION)
    # the eager sticky assignor reads its previous assignment from user data
    s = {"c1": ASSIGNORS["sticky"].subscription(["t"], tps("t-0", "t-1", "t-2"), 4),
         "c2": ASSIGNORS["sticky"].subscription(["t"], [], 4)}
    assert s["c1"].owned_partitions == ()
    assert sticky_assign(s, {"t": 3}) == expand({"c1": ["t-0", "t-1"], "c2": ["t-2"]})


def test_assignor_names_and_java_class_names() -> None:
    assert assignor_for("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name == "cooperative-sticky"
    assert assignor_for(" range ").name == "range"
    with pytest.raises(KeyError, match="nope"):
        assignor_for("nope")
