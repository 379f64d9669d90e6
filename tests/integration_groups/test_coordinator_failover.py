"""SIGKILL of the broker that coordinates a group (its own cluster: a broker dies here).

The coordinator is the leader of ``__consumer_offsets`` partition
``partition_for_group(group)``: FindCoordinator must agree with Metadata. Two consumers of
different libraries (confluent-kafka and kafka-python, both on ``range``) consume and commit;
once every offset is committed the coordinator is SIGKILLed. Another broker must become
the coordinator (FindCoordinator from the live brokers, and the new leader of that
partition), OffsetFetch there must return exactly the offsets committed before the kill
(they were written to ``__consumer_offsets`` with acks=all, so the new leader holds them),
and the consumers must go on: every record produced after the kill is processed, and no
record below the committed offsets is processed again.
"""
from __future__ import annotations

import time

import pytest

from broker.group.records import CONSUMER_OFFSETS_TOPIC, partition_for_group
from groups_helpers import (
    committed_offsets, create_topic, find_coordinator, live_brokers, metadata_leaders, produce,
    wait_for_assignment, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 6


def test_killing_the_coordinator_moves_it_and_keeps_committed_offsets(cluster, consumers) -> None:
    topic, group = "failover", "failover-group"
    create_topic(cluster, topic, PARTITIONS)
    a = consumers(cluster, "confluent", group, topic, "failover-confluent")
    b = consumers(cluster, "kafka-python", group, topic, "failover-kafka-python")
    wait_for_assignment(cluster, group, topic, {a.client_id, b.client_id}, PARTITIONS)

    offsets_partition = partition_for_group(group, len(metadata_leaders(cluster, CONSUMER_OFFSETS_TOPIC)))
    coordinator = find_coordinator(cluster, group)
    assert coordinator == metadata_leaders(cluster, CONSUMER_OFFSETS_TOPIC)[offsets_partition]

    phase1 = produce(cluster.spec.bootstrap_servers, topic, 50, PARTITIONS, tag="before")
    everything_committed = {p: 50 for p in range(PARTITIONS)}
    wait_until(lambda: committed_offsets(cluster, group, topic, PARTITIONS) == everything_committed,
               60, "phase 1 consumed and committed")
    phase1_reads = {k: n for k, n in _read_counts([a, b]).items() if k in phase1}
    assert set(phase1_reads) == set(phase1)

    killed_at = time.monotonic()
    cluster.kill_node(coordinator)
    new = wait_until(lambda: (lambda n: n if n not in (None, coordinator) else None)(
        find_coordinator(cluster, group)), 60, "a new coordinator")
    print(f"\ncoordinator moved {coordinator} -> {new} in {time.monotonic() - killed_at:.2f}s")
    assert new in {b.id for b in live_brokers(cluster)}
    # Every live broker agrees, and it is the new leader of the group's offsets partition.
    for broker in live_brokers(cluster):
        assert wait_until(lambda: find_coordinator(cluster, group, via=broker.id), 30,
                          f"broker {broker.id}'s answer") == new
    assert metadata_leaders(cluster, CONSUMER_OFFSETS_TOPIC)[offsets_partition] == new
    # The committed offsets survived: the new coordinator replayed them from the log.
    assert wait_until(lambda: committed_offsets(cluster, group, topic, PARTITIONS), 30,
                      "OffsetFetch on the new coordinator") == everything_committed

    # The consumers go on, through the new coordinator and the partitions' new leaders.
    phase2 = produce(cluster.spec.bootstrap_servers, topic, 50, PARTITIONS, tag="after")
    wait_until(lambda: set(phase2) <= set(_read_counts([a, b])), 90, "phase 2 consumed")
    wait_until(lambda: committed_offsets(cluster, group, topic, PARTITIONS) == {p: 100 for p in range(PARTITIONS)},
               60, "phase 2 committed on the new coordinator")
    wait_for_assignment(cluster, group, topic, {a.client_id, b.client_id}, PARTITIONS)
    for c in (a, b):
        assert c.close() == 0, c.stderr_tail()

    reads = _read_counts([a, b])
    produced = {**phase1, **phase2}
    for c in (a, b):
        for p, o, v in c.records():
            assert produced[(p, o)] == v
    assert reads.keys() == produced.keys()
    reread = {k: n for k, n in reads.items() if k in phase1 and n > phase1_reads[k]}
    assert not reread, f"records below the committed offsets read again: {sorted(reread)[:5]}"


def _read_counts(cs) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for c in cs:
        for p, o, _ in c.records():
            out[(p, o)] = out.get((p, o), 0) + 1
    return out
