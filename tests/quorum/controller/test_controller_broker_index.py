"""The broker -> partitions index (quorum/controller/broker_index.py).

Two properties: the index kept up to date on replay always equals a full recomputation
from the image, after any sequence of committed batches (random record sequences from a
seeded Random, and the hypothesis histories of tests/metadata_log/builders.py); and the
per-broker decisions read only the partitions of the broker concerned (the image they get
has every other partition poisoned).
"""
from __future__ import annotations

import random
import uuid
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings

from clients.protocol import messages as M
from metadata_log import EMPTY_IMAGE, MetadataImage, Provenance, decode_record, replay_batch
from metadata_log.image import TopicImage, TopicsImage
from quorum.controller import ControllerConfig
from quorum.controller.broker_index import BrokersToPartitions
from quorum.controller.cluster_control import broker_heartbeat, fence_brokers, register_broker
from quorum.controller.replication_control import (
    active_predicate, changes_for_leaderless_partitions, changes_for_preferred_leaders,
)
from tests.metadata_log.builders import histories
from tests.quorum.controller.harness import Harness


# ---------------------------------------------------------------- random histories

class _History:
    """Valid random batches over a model of the committed state, from one seeded Random."""

    def __init__(self, rng: random.Random, brokers: int = 6) -> None:
        self.rng = rng
        self.brokers = list(range(1, brokers + 1))
        self.epochs: dict[int, int] = {}
        self.topics: dict[uuid.UUID, dict[int, tuple[list[int], list[int], int]]] = {}
        self.next_topic = 0

    def _tid(self) -> uuid.UUID:
        self.next_topic += 1
        return uuid.UUID(int=(self.next_topic << 64) | 0x4000_0000_0000_0001)

    def _state(self, replicas: list[int]) -> tuple[list[int], int]:
        """A random ISR (non-empty subset of replicas) and leader (in it, or none)."""
        rng = self.rng
        isr = [r for r in replicas if rng.random() < 0.7] or [rng.choice(replicas)]
        leader = -1 if rng.random() < 0.15 else rng.choice(isr)
        return isr, leader

    def batch(self) -> list[Any]:
        rng = self.rng
        records: list[Any] = []
        for _ in range(rng.randint(1, 6)):
            roll = rng.random()
            if roll < 0.1 or not self.epochs:
                b = rng.choice(self.brokers)
                self.epochs[b] = self.epochs.get(b, 0) + rng.randint(1, 5)
                records.append(M.RegisterBrokerRecord(
                    broker_id=b, incarnation_id=uuid.UUID(int=rng.getrandbits(128)),
                    broker_epoch=self.epochs[b], fenced=rng.random() < 0.5, end_points=[]))
            elif roll < 0.25:
                tid = self._tid()
                records.append(M.TopicRecord(name=f"t{self.next_topic}", topic_id=tid))
                parts: dict[int, tuple[list[int], list[int], int]] = {}
                rf = rng.randint(1, 3)
                for i in range(rng.randint(1, 5)):
                    replicas = rng.sample(self.brokers, rf)
                    isr, leader = self._state(replicas)
                    parts[i] = (replicas, isr, leader)
                    records.append(M.PartitionRecord(
                        partition_id=i, topic_id=tid, replicas=replicas, isr=isr,
                        leader=leader, leader_epoch=0, partition_epoch=0))
                self.topics[tid] = parts
            elif roll < 0.32 and self.topics:
                tid = rng.choice(sorted(self.topics))
                del self.topics[tid]
                records.append(M.RemoveTopicRecord(topic_id=tid))
            elif self.topics:
                tid = rng.choice(sorted(self.topics))
                i = rng.choice(sorted(self.topics[tid]))
                replicas, isr, leader = self.topics[tid][i]
                changed: dict = {}
                if rng.random() < 0.3:           # a reassignment's new replica set
                    replicas = rng.sample(self.brokers, rng.randint(1, 4))
                    isr, leader = self._state(replicas)
                    changed = {"replicas": list(replicas), "isr": list(isr), "leader": leader}
                elif rng.random() < 0.5:
                    isr, leader = self._state(replicas)
                    changed = {"isr": list(isr), "leader": leader}
                else:                           # leader only, within the current ISR
                    leader = -1 if rng.random() < 0.2 else rng.choice(isr)
                    changed = {"leader": leader}
                record = M.PartitionChangeRecord(partition_id=i, topic_id=tid, **changed)
                self.topics[tid][i] = (replicas, isr, leader)
                records.append(record)
        return records


def _assert_index_equals_recomputation(index: BrokersToPartitions,
                                       image: MetadataImage) -> None:
    got = index.as_dict()
    assert got == BrokersToPartitions.from_image(image).as_dict()
    assert not got["unused_topic_ids"]
    for b, keys in got["leaders"].items():
        assert keys <= got["isr"][b]    # a leader is always in its ISR


@pytest.mark.parametrize("seed", range(12))
def test_index_equals_full_recomputation_after_random_batches(seed: int) -> None:
    rng = random.Random(seed)
    history = _History(rng)
    image, index = EMPTY_IMAGE, BrokersToPartitions()
    offset = -1
    for _ in range(120):
        records = history.batch()
        offset += len(records)
        outcome = replay_batch(image, records, Provenance(offset, 1))
        assert outcome.error is None, outcome.error
        index.apply(image, outcome.image, outcome.changes)
        image = outcome.image
        _assert_index_equals_recomputation(index, image)
    assert image.topics.partition_count() > 0     # the history did build something


@settings(max_examples=60, deadline=None)
@given(history=histories())
def test_index_follows_any_valid_history_replayed_in_batches(history: list[Any]) -> None:
    rng = random.Random(len(history))
    image, index = EMPTY_IMAGE, BrokersToPartitions()
    i = 0
    while i < len(history):
        n = rng.randint(1, 5)
        outcome = replay_batch(image, history[i:i + n], Provenance(i + n - 1, 1))
        assert outcome.error is None, outcome.error
        index.apply(image, outcome.image, outcome.changes)
        image = outcome.image
        i += n
        _assert_index_equals_recomputation(index, image)


def test_a_skipped_batch_leaves_the_controller_index_alone() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", partitions=3, replication_factor=2)
    before = h.controller.index.as_dict()
    tid = h.topic("t").topic_id
    # A duplicated partition makes the whole batch contradictory: nothing is applied.
    outcome = h.controller.replay([
        M.PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[h.partition("t").leader]),
        M.PartitionRecord(partition_id=1, topic_id=tid, replicas=[1], isr=[1], leader=1)],
        h.next_offset + 1, epoch=1)
    assert outcome.error is not None
    assert h.controller.index.as_dict() == before
    _assert_index_equals_recomputation(h.controller.index, h.image)


def test_the_controller_index_follows_its_own_decisions() -> None:
    h = Harness(ControllerConfig(default_replication_factor=3))
    h.start_brokers({1: None, 2: None, 3: None, 4: None})
    for n in range(4):
        h.create_topic(f"t{n}", partitions=6, replication_factor=3)
    h.heartbeat(2, want_shut_down=True)           # controlled shutdown: leaders move
    h.heartbeat(2, want_shut_down=True)
    h.register(3, incarnation=uuid.UUID(int=33))  # a new incarnation leaves every ISR
    h.heartbeat(3)
    h.run_for(h.config.leader_imbalance_check_interval_ms, heartbeating=[1, 3, 4])
    _assert_index_equals_recomputation(h.controller.index, h.image)
    assert not h.controller.index.leads_any(2)


# ---------------------------------------------------------------- touching only the broker's

class _Poisoned:
    """Stands in for every partition a decision about another broker must not read."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read .{name} of a partition the broker has nothing to do with")


def _poison_all_but(image: MetadataImage, keep: set[tuple[uuid.UUID, int]]) -> MetadataImage:
    by_id = {}
    for t in image.topics.by_id.values():
        parts = {i: (p if (t.topic_id, i) in keep else _Poisoned())
                 for i, p in t.partitions.items()}
        by_id[t.topic_id] = TopicImage(t.name, t.topic_id, MappingProxyType(parts))
    by_name = {t.name: t for t in by_id.values()}
    return MetadataImage(provenance=image.provenance, features=image.features,
                         cluster=image.cluster,
                         topics=TopicsImage(MappingProxyType(by_id), MappingProxyType(by_name)),
                         configs=image.configs, producer_ids=image.producer_ids)


def _cluster(brokers: int = 6, topics: int = 10, partitions: int = 12) -> Harness:
    h = Harness()
    h.start_brokers({b: None for b in range(1, brokers + 1)})
    for n in range(topics):
        h.create_topic(f"t{n}", partitions=partitions, replication_factor=2)
    return h


def test_a_fence_touches_only_that_brokers_partitions() -> None:
    h = _cluster()
    index = h.controller.index
    mine = set(index.isr_of(4)) | set(index.led_by(4))
    assert 0 < len(mine) < h.image.topics.partition_count() // 2
    poisoned = _poison_all_but(h.image, mine)
    records = fence_brokers(poisoned, [4], h.config, index)
    # Same decision as on the real image, through a full scan of it (no index given).
    assert records == fence_brokers(h.image, [4], h.config)
    changed = {(r.topic_id, r.partition_id) for r in records
               if isinstance(r, M.PartitionChangeRecord)}
    assert changed == mine          # every partition of broker 4 moves, no other


def test_controlled_shutdown_and_a_new_incarnation_touch_only_that_brokers_partitions() -> None:
    h = _cluster()
    index = h.controller.index
    mine = set(index.isr_of(2)) | set(index.led_by(2))
    poisoned = _poison_all_but(h.image, mine)
    b = h.image.cluster.get(2)
    request = M.BrokerHeartbeatRequest(broker_id=2, broker_epoch=b.broker_epoch,
                                       current_metadata_offset=h.next_offset - 1,
                                       want_shut_down=True)
    result = broker_heartbeat(poisoned, request, h.controller.registration_offset(2),
                              h.config, index)
    moved = {(r.topic_id, r.partition_id) for r in result.records
             if isinstance(r, M.PartitionChangeRecord)}
    assert moved == mine and not result.response.should_shut_down
    # All of its leaderships move in that one batch.
    leaders = {(r.topic_id, r.partition_id) for r in result.records
               if isinstance(r, M.PartitionChangeRecord) and r.leader >= 0}
    assert leaders == set(index.led_by(2))
    registration = register_broker(
        poisoned, h.registration_request(2, incarnation=uuid.UUID(int=77)), h.config, index)
    assert {(r.topic_id, r.partition_id) for r in registration.records
            if isinstance(r, M.PartitionChangeRecord)} == mine


def test_elections_read_only_leaderless_and_imbalanced_partitions() -> None:
    h = _cluster()
    h.heartbeat(5, want_fence=True)                # fenced: its partitions move
    h.heartbeat(5)                                 # back: leaders stay where they went
    index = h.controller.index
    assert index.imbalanced() and not index.leaderless()
    for topic_id, i in index.imbalanced():   # 5 catches up and rejoins the ISRs
        t = h.image.topics.get_by_id(topic_id)
        h.alter_partition(t.name, i, [*t.partitions[i].isr, 5])
    poisoned = _poison_all_but(h.image, set(index.imbalanced()) | set(index.leaderless()))
    is_active = active_predicate(h.image)
    preferred = changes_for_preferred_leaders(poisoned, is_active, 1000, index)
    assert {(r.topic_id, r.partition_id) for r in preferred} == set(index.imbalanced())
    assert all(r.leader == 5 for r in preferred)
    assert changes_for_leaderless_partitions(poisoned, is_active, h.config,
                                             index=index) == []


def test_controlled_shutdown_moves_everything_in_bounded_batches_leaderships_first() -> None:
    h = Harness(ControllerConfig(controlled_shutdown_records_max=5))
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", partitions=30, replication_factor=3)
    led = set(h.controller.index.led_by(1))
    assert len(h.controller.index.isr_of(1)) == 30 and 0 < len(led) < 30
    batches = []
    while True:
        before = h.next_offset
        response = h.heartbeat(1, want_shut_down=True)
        batches.append(h.next_offset - before)
        if response.should_shut_down:
            break
        assert len(batches) < 20, batches
    assert response.is_fenced and h.image.cluster.get(1).fenced
    # 30 partition changes in batches of at most 5 (+1 for the first batch's
    # BrokerRegistrationChangeRecord, +1 for the final fence).
    assert batches[0] == 6 and all(n == 5 for n in batches[1:-1]) and batches[-1] == 1
    assert sum(batches) == 30 + 2
    records = [decode_record(framed) for framed in h.log]
    moved_order = [(r.topic_id, r.partition_id) for r in records
                   if isinstance(r, M.PartitionChangeRecord)]
    assert set(moved_order[:len(led)]) == led     # leaderships moved first
    for p in h.topic("t").partitions.values():
        assert p.leader != 1 and 1 not in p.isr
    _assert_index_equals_recomputation(h.controller.index, h.image)
