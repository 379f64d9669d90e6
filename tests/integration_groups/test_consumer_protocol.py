"""KIP-848's consumer group protocol with librdkafka (confluent-kafka, group.protocol=consumer).

- Three consumer-protocol members share a topic: the coordinator's assignment partitions it
  (disjoint, covering every partition, as DescribeGroups and ConsumerGroupDescribe show),
  every produced record is processed, commits (OffsetCommit v9 with member epochs) land;
  one member leaves and the two others take its partitions from its committed offsets.
- Online upgrade: a classic group (librdkafka and kafka-python members, eager range) is
  joined by a consumer-protocol member; the group becomes a consumer group without
  stopping, the classic members keep their JoinGroup/SyncGroup/Heartbeat, all three end up
  with disjoint partitions covering the topic, and every record is processed; when the
  consumer-protocol member leaves, the group turns classic again (downgrade) and its
  members rebalance over the whole topic.
"""
from __future__ import annotations

import time

import pytest

from groups_helpers import (
    committed_offsets, create_topic, describe_group, produce, wait_for_assignment, wait_until,
)
from integration_helpers import admin_for

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 6


def consumed(cs, produced) -> bool:
    return {(p, o) for c in cs for p, o, _ in c.records()} >= produced.keys()


def group_type(cluster, group: str) -> str | None:
    listed = admin_for(cluster).list_consumer_groups()
    return next((g.type for g in listed if g.group_id == group), None)


def test_consumer_protocol_members_share_a_topic_and_commit(cluster, consumers) -> None:
    topic, group = "kip848-shared", "kip848-shared"
    create_topic(cluster, topic, PARTITIONS)
    produced = produce(cluster.spec.bootstrap_servers, topic, 30, PARTITIONS, "a")
    # Auto-commit (every 200 ms): a commit refused while a member's epoch moves is simply
    # made again, so the committed offsets reach the end.
    cs = [consumers(cluster, "confluent", group, topic, f"m{i}", assignor="uniform",
                    group_protocol="consumer", commit="auto") for i in range(3)]
    view = wait_for_assignment(cluster, group, topic, {"m0", "m1", "m2"}, PARTITIONS)
    assert all(len(ps) == 2 for ps in view.assignment().values()), view   # uniform: balanced
    assert group_type(cluster, group) == "consumer"
    wait_until(lambda: consumed(cs, produced), 60, "every record processed")
    wait_until(lambda: committed_offsets(cluster, group, topic, PARTITIONS)
               == {p: 30 for p in range(PARTITIONS)}, 30, "offsets committed to the end")

    # One leaves cleanly; the two others take its partitions, from its commits on: every
    # partition was committed to 30 above, so nothing below 30 is read after the leave.
    t_leave = time.time()
    assert cs[2].close() == 0
    wait_for_assignment(cluster, group, topic, {"m0", "m1"}, PARTITIONS)
    more = produce(cluster.spec.bootstrap_servers, topic, 10, PARTITIONS, "b")
    wait_until(lambda: consumed(cs[:2], more), 60, "records after the leave processed")
    again = [(e["p"], e["o"]) for c in cs[:2] for e in c.events()
             if e["ev"] == "record" and e["t"] > t_leave and e["o"] < 30]
    assert not again, f"read again below the committed offsets after the leave: {again[:5]}"
    for c in cs[:2]:
        assert c.close() == 0


def test_a_classic_group_is_upgraded_online(cluster, consumers) -> None:
    topic, group = "kip848-upgrade", "kip848-upgrade"
    create_topic(cluster, topic, PARTITIONS)
    produced = produce(cluster.spec.bootstrap_servers, topic, 20, PARTITIONS, "a")
    classic = [consumers(cluster, "confluent", group, topic, "classic-rd", assignor="range"),
               consumers(cluster, "kafka-python", group, topic, "classic-py", assignor="range")]
    wait_for_assignment(cluster, group, topic, {"classic-rd", "classic-py"}, PARTITIONS)
    assert group_type(cluster, group) == "classic"

    modern = consumers(cluster, "confluent", group, topic, "modern", assignor="uniform",
                       group_protocol="consumer")
    view = wait_for_assignment(cluster, group, topic, {"classic-rd", "classic-py", "modern"},
                               PARTITIONS, timeout_s=60)
    assert view.assignment()["modern"], view
    assert group_type(cluster, group) == "consumer"
    more = produce(cluster.spec.bootstrap_servers, topic, 20, PARTITIONS, "b")
    everyone = [*classic, modern]
    wait_until(lambda: consumed(everyone, {**produced, **more}), 60, "every record processed")
    d = describe_group(cluster, group, topic)
    assert d is not None and d.state == "Stable"
    for c in everyone:
        assert c.alive(), c.stderr_tail()

    # The consumer-protocol member leaves: the group turns classic again (downgrade) and
    # the classic members rebalance over the whole topic.
    assert modern.close() == 0
    wait_for_assignment(cluster, group, topic, {"classic-rd", "classic-py"}, PARTITIONS,
                        timeout_s=60)
    assert group_type(cluster, group) == "classic"
    last = produce(cluster.spec.bootstrap_servers, topic, 10, PARTITIONS, "c")
    wait_until(lambda: consumed(classic, last), 60, "records after the downgrade processed")
    for c in classic:
        assert c.alive(), c.stderr_tail()
        assert c.close() == 0
