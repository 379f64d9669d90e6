"""A stateful property test: random broker lives and admin requests against one controller.

After every step the committed image must satisfy the invariants Kafka's controller keeps,
a standby replaying the same log must hold the same image, and a snapshot of it must load
back to the same image. Decisions must never change the image by themselves.
"""
from __future__ import annotations

import random
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clients.protocol import messages as M
from metadata_log import decode_record, decode_snapshot, encode_snapshot
from quorum.controller import ControllerConfig, QuorumController
from tests.quorum.controller.harness import Harness

BROKERS = [1, 2, 3, 4]
RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(ControllerConfig(leader_imbalance_check_interval_ms=10_000))
        self.alive: set[int] = set()      # brokers that heartbeat when time passes
        self.epochs: dict[tuple, tuple[int, int]] = {}
        self.topic_n = 0

    def decide(self, call):
        before = self.h.image
        result = call()
        assert self.h.image is before, "a decision changed the image"
        return self.h.commit(result)

    # ------------------------------------------------------------ brokers

    @rule(broker=st.sampled_from(BROKERS), restart=st.booleans())
    def register(self, broker: int, restart: bool) -> None:
        incarnation = uuid.UUID(int=random.Random(self.h.now_ms + broker).getrandbits(128))
        request = self.h.registration_request(broker, RACKS[broker],
                                              incarnation if restart else None)
        response = self.decide(lambda: self.h.controller.handle_broker_registration(
            request, self.h.now_ms))
        assert response.error_code == 0
        assert self.h.image.cluster.get(broker).broker_epoch == response.broker_epoch
        self.alive.add(broker)

    @rule(broker=st.sampled_from(BROKERS),
          kind=st.sampled_from(["plain", "behind", "fence", "shut_down"]))
    def heartbeat(self, broker: int, kind: str) -> None:
        b = self.h.image.cluster.get(broker)
        if b is None:
            return
        response = self.h.heartbeat(
            broker, offset=-1 if kind == "behind" else None,
            want_fence=kind == "fence", want_shut_down=kind == "shut_down")
        assert response.error_code == 0
        after = self.h.image.cluster.get(broker)
        assert response.is_fenced == after.fenced
        if response.should_shut_down:
            assert after.fenced
            self.alive.discard(broker)
        if kind == "behind":
            assert not response.is_caught_up

    @rule(ms=st.integers(1, 12_000))
    def time_passes(self, ms: int) -> None:
        self.h.run_for(ms, heartbeating=sorted(b for b in self.alive
                                               if self.h.image.cluster.get(b) is not None))

    @rule(broker=st.sampled_from(BROKERS))
    def crash(self, broker: int) -> None:
        self.alive.discard(broker)

    # ------------------------------------------------------------ admin

    @rule(partitions=st.integers(1, 6), rf=st.integers(1, 4), unclean=st.booleans())
    def create_topic(self, partitions: int, rf: int, unclean: bool) -> None:
        name = f"t{self.topic_n}"
        self.topic_n += 1
        configs = {"unclean.leader.election.enable": "true"} if unclean else None
        active = sum(b.is_active for b in self.h.image.cluster.brokers.values())
        created = self.h.create_topic(name, partitions, rf, configs)
        assert (created.error_code == 0) == (rf <= active), created

    @precondition(lambda self: self.h.image.topics.by_name)
    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.h.image.topics.by_name)))
        response = self.decide(lambda: self.h.controller.handle_delete_topics(
            M.DeleteTopicsRequest(topic_names=[name]), self.h.now_ms))
        assert response.responses[0].error_code == 0
        assert self.h.image.topics.get(name) is None

    @precondition(lambda self: self.h.image.topics.by_name)
    @rule(data=st.data(), stale=st.booleans())
    def alter_partition(self, data: st.DataObject, stale: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.h.image.topics.by_name)))
        t = self.h.topic(name)
        index = data.draw(st.sampled_from(sorted(t.partitions)))
        p = t.partitions[index]
        if p.leader == -1:
            return
        others = [r for r in p.replicas if r != p.leader]
        isr = [p.leader] + data.draw(st.lists(st.sampled_from(others), unique=True)) \
            if others else [p.leader]
        R = M.AlterPartitionRequest
        leader = self.h.image.cluster.get(p.leader)
        request = R(broker_id=p.leader, broker_epoch=leader.broker_epoch, topics=[R.TopicData(
            topic_id=t.topic_id, partitions=[R.PartitionData(
                partition_index=index, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch - 1 if stale else p.partition_epoch,
                leader_recovery_state=0,
                new_isr_with_epochs=[R.BrokerState(broker_id=b, broker_epoch=-1)
                                     for b in isr])])])
        answer = self.decide(lambda: self.h.controller.handle_alter_partition(
            request, self.h.now_ms)).topics[0].partitions[0]
        now = self.h.topic(name).partitions[index]
        if answer.error_code == 0:
            assert list(now.isr) == answer.isr and now.partition_epoch == answer.partition_epoch
            assert all(self.h.image.cluster.is_active(b) for b in answer.isr)
        else:
            assert now == p

    @precondition(lambda self: self.h.image.topics.by_name)
    @rule(data=st.data(), extra=st.integers(1, 3))
    def create_partitions(self, data: st.DataObject, extra: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.h.image.topics.by_name)))
        count = len(self.h.topic(name).partitions) + extra
        CP = M.CreatePartitionsRequest
        self.decide(lambda: self.h.controller.handle_create_partitions(
            CP(topics=[CP.CreatePartitionsTopic(name=name, count=count)]), self.h.now_ms))

    @precondition(lambda self: self.h.image.cluster.brokers)
    @rule()
    def allocate_producer_ids(self) -> None:
        b = next(iter(self.h.image.cluster.brokers.values()))
        before = max(self.h.image.producer_ids.next_producer_id, 0)
        response = self.decide(lambda: self.h.controller.allocate_producer_ids(
            b.broker_id, b.broker_epoch))
        assert response.producer_id_start == before
        assert self.h.image.producer_ids.next_producer_id == before + 1000

    # ------------------------------------------------------------ invariants

    @invariant()
    def partitions_are_consistent(self) -> None:
        cluster = self.h.image.cluster
        for t, index, p in self.h.image.topics.iter_partitions():
            # KIP-966 (on in new clusters): the ISR may be empty, then with no leader, and
            # the eligible leader replicas hold the committed records.
            assert p.isr or p.leader == -1, p
            assert set(p.isr) <= set(p.replicas) and len(set(p.isr)) == len(p.isr)
            elr = set(p.eligible_leader_replicas or ())
            assert elr <= set(p.replicas) and not elr & set(p.isr), p
            assert not elr or len(p.isr) < len(p.replicas), p     # min ISR 1 here: only
            assert not elr or not p.isr, p                         # an empty ISR has an ELR
            assert p.leader == -1 or (p.leader in p.isr and cluster.is_active(p.leader)), p
            # An inactive broker leaves the ISR (with ELR even its last member does).
            assert all(cluster.is_active(b) for b in p.isr), p
            if p.leader == -1:
                assert not p.isr and not any(cluster.is_active(b) for b in elr), p
            key = (t.topic_id, index)
            last = self.epochs.get(key, (-1, -1))
            assert p.leader_epoch >= last[0] and p.partition_epoch >= last[1]
            self.epochs[key] = (p.leader_epoch, p.partition_epoch)

    @invariant()
    def a_standby_and_a_snapshot_agree(self) -> None:
        standby = QuorumController(self.h.config, random.Random(99))
        for offset, data in enumerate(self.h.log):
            standby.replay([decode_record(data)], offset, epoch=1)
        assert standby.image == self.h.image
        assert decode_snapshot(encode_snapshot(self.h.image)) == self.h.image


ControllerMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=25,
                                               deadline=None)
test_controller_machine = ControllerMachine.TestCase
