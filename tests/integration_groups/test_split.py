"""Unmodified consumers in groups on a 6-partition, replication-factor-3 topic.

Three consumers of one library (and assignor) join one group. Once the coordinator reports
the group Stable with all three members, their assignments (DescribeGroups, decoded from
the bytes the group leader's assignor wrote) must partition the topic two by two; then
600 records are produced and the consumers' reports must show every record processed
exactly once, each consumer reading only the partitions it was assigned, and each
library's own rebalance callbacks agreeing with the coordinator.

Two groups on one topic (two confluent-kafka consumers in one; aiokafka and kcat together
in the other, on their common ``roundrobin`` protocol) must each process every record, and
each group's committed offsets must reach the end of every partition independently.
"""
from __future__ import annotations

import pytest

from groups_helpers import (
    committed_offsets, create_topic, produce, wait_for_assignment, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 6
PER_PARTITION = 100

VARIANTS = [
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("aiokafka", "roundrobin"),
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kcat", "range"),
]


def callback_assignment(events: list[dict]) -> frozenset[int]:
    """The assignment a consumer's own rebalance callbacks imply: eager protocols revoke
    everything and assign the whole set; cooperative ones add and remove increments."""
    owned: set[int] = set()
    for e in events:
        if e["ev"] == "assigned":
            owned |= set(e["partitions"])
        elif e["ev"] == "revoked":
            owned -= set(e["partitions"])
    return frozenset(owned)


def consumed_all(cs, produced) -> bool:
    seen = {(p, o) for c in cs for p, o, _ in c.records()}
    return seen >= produced.keys()


@pytest.mark.parametrize("client,assignor", VARIANTS, ids=[f"{c}-{a}" for c, a in VARIANTS])
def test_three_consumers_split_the_partitions(cluster, consumers, client: str, assignor: str) -> None:
    topic = f"split-{client}-{assignor}"
    group = f"group-{topic}"
    create_topic(cluster, topic, PARTITIONS)
    cs = [consumers(cluster, client, group, topic, f"{client}-{assignor}-{i}", assignor=assignor)
          for i in range(3)]
    view = wait_for_assignment(cluster, group, topic, {c.client_id for c in cs}, PARTITIONS)
    assignment = view.assignment()
    assert sorted(len(s) for s in assignment.values()) == [2, 2, 2], assignment
    assert view.protocol == assignor

    produced = produce(cluster.spec.bootstrap_servers, topic, PER_PARTITION, PARTITIONS, tag=topic)
    wait_until(lambda: consumed_all(cs, produced), 60, f"{group} to consume all {len(produced)} records")
    before_close = {c.client_id: c.events() for c in cs}
    for c in cs:
        assert c.close() == 0, c.stderr_tail()

    processed: dict[tuple[int, int], list[str]] = {}
    for c in cs:
        records = c.records()
        for p, o, v in records:
            assert produced[(p, o)] == v, f"{c.client_id}: {topic}-{p}@{o} is {v!r}"
            processed.setdefault((p, o), []).append(c.client_id)
        # A consumer reads exactly the partitions the coordinator says it was assigned.
        assert {p for p, _, _ in records} == assignment[c.client_id], c.client_id
        if client != "kcat":        # kcat reports no callbacks in its output
            assert callback_assignment(before_close[c.client_id]) == assignment[c.client_id]
    twice = {k: v for k, v in processed.items() if len(v) > 1}
    assert not twice, f"records processed more than once: {sorted(twice.items())[:5]}"
    assert processed.keys() == produced.keys()


def test_two_groups_each_receive_every_record(cluster, consumers) -> None:
    topic = "two-groups"
    create_topic(cluster, topic, PARTITIONS)
    group_a, group_b = "two-groups-a", "two-groups-b"
    a = [consumers(cluster, "confluent", group_a, topic, f"a-confluent-{i}") for i in range(2)]
    b = [consumers(cluster, "aiokafka", group_b, topic, "b-aiokafka", assignor="roundrobin"),
         consumers(cluster, "kcat", group_b, topic, "b-kcat", assignor="roundrobin")]
    wait_for_assignment(cluster, group_a, topic, {c.client_id for c in a}, PARTITIONS)
    view_b = wait_for_assignment(cluster, group_b, topic, {c.client_id for c in b}, PARTITIONS)
    assert view_b.protocol == "roundrobin"

    produced = produce(cluster.spec.bootstrap_servers, topic, PER_PARTITION, PARTITIONS, tag=topic)
    for group, cs in ((group_a, a), (group_b, b)):
        wait_until(lambda: consumed_all(cs, produced), 60, f"{group} to consume all records")
    for c in a + b:
        assert c.close() == 0, c.stderr_tail()

    for group, cs in ((group_a, a), (group_b, b)):
        seen = [(p, o) for c in cs for p, o, _ in c.records()]
        assert sorted(seen) == sorted(produced), f"{group} did not process each record once"
        # Each group commits its own position: both reach the end of every partition.
        committed = committed_offsets(cluster, group, topic, PARTITIONS)
        assert committed == {p: PER_PARTITION for p in range(PARTITIONS)}, (group, committed)
