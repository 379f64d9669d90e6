"""KIP-966 eligible leader replicas: the ELR rules as a table (Kafka's
PartitionChangeBuilderTest cases), election order, and the controller's whole story: two of
three replicas fail in sequence with min ISR 2, the partition stays without a leader rather
than electing a replica that may lack committed records, and an ELR member leads when it
returns; a broker back from an unclean stop is no longer eligible."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from metadata_log.image import LeaderRecoveryState, PartitionRegistration
from quorum.controller import ControllerConfig
from quorum.controller.election import Election, Elr, build_partition_change, target_elr
from harness import Harness, M

T = uuid.UUID(int=7)


def reg(replicas, isr, leader, elr=None, lkelr=None) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(replicas), isr=tuple(isr), removing_replicas=(), adding_replicas=(),
        leader=leader, leader_recovery_state=LeaderRecoveryState.RECOVERED, leader_epoch=5,
        partition_epoch=9, eligible_leader_replicas=None if elr is None else tuple(elr),
        last_known_elr=None if lkelr is None else tuple(lkelr))


@pytest.mark.parametrize("name,p,target_isr,min_isr,unclean,expected", [
    ("at min ISR: nothing eligible", reg([1, 2, 3], [1, 2, 3], 1), (1, 2), 2, (), ()),
    ("below min ISR: the ones leaving become eligible", reg([1, 2, 3], [1, 2, 3], 1), (1,), 2, (),
     (2, 3)),
    ("an existing ELR is kept and grows", reg([1, 2, 3], [1, 2], 1, elr=[3]), (1,), 3, (), (2, 3)),
    ("an unclean shutdown is not eligible", reg([1, 2, 3], [1, 2], 1, elr=[3]), (1,), 3, (3,),
     (2,)),
    ("back at min ISR: the ELR is cleared", reg([1, 2, 3], [1], 1, elr=[2]), (1, 3), 2, (), ()),
    ("the ISR empties: its last member joins", reg([1, 2, 3], [1], 1, elr=[2]), (), 2, (), (1, 2)),
    ("min ISR above the replica count is capped", reg([1, 2], [1, 2], 1), (1,), 3, (), (2,)),
])
def test_elr_table(name, p, target_isr, min_isr, unclean, expected) -> None:
    assert target_elr(p, target_isr, Elr(min_isr, frozenset(unclean))) == expected


def active(*brokers: int):
    return lambda b: b in brokers


def test_an_empty_isr_elects_an_active_elr_member_which_becomes_the_isr() -> None:
    p = reg([1, 2, 3], [], -1, elr=[1, 2])
    r = build_partition_change(T, 0, p, is_active=active(2, 3), elr=Elr(2))
    assert (r.leader, r.isr, r.eligible_leader_replicas) == (2, [2], [1])
    # Replica 3 is active but not eligible: without 1 or 2 there is no clean leader.
    p = reg([1, 2, 3], [], -1, elr=[1, 2])
    assert build_partition_change(T, 0, p, is_active=active(3), elr=Elr(2)) is None


def test_the_isr_comes_before_the_elr() -> None:
    p = reg([1, 2, 3], [3], -1, elr=[1])
    r = build_partition_change(T, 0, p, is_active=active(1, 3), elr=Elr(2))
    assert r.leader == 3 and r.isr is None


def test_an_unclean_election_clears_the_elr() -> None:
    p = reg([1, 2, 3], [], -1, elr=[1], lkelr=[2])
    r = build_partition_change(T, 0, p, is_active=active(3), election=Election.UNCLEAN, elr=Elr(2))
    assert (r.leader, r.isr, r.leader_recovery_state) == (3, [3], 1)
    assert (r.eligible_leader_replicas, r.last_known_elr) == ([], [])


def test_without_elr_the_last_isr_member_stays() -> None:
    p = reg([1, 2], [1], 1)
    r = build_partition_change(T, 0, p, is_active=active(2), target_isr=(1,))
    assert r is None or r.isr is None


# ------------------------------------------------------------------ the controller's story

def story(elr_version: int = 1) -> Harness:
    """RF 3, min ISR 2, leader 1; brokers 3 then 2 then 1 are fenced."""
    h = Harness(ControllerConfig(eligible_leader_replicas_version=elr_version))
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    h.heartbeat(3, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas or ()) == (1, (1, 2), ())
    h.heartbeat(2, want_fence=True)
    p = h.partition("t")
    # Below min ISR: the leader's high watermark stops here; 2 holds everything committed.
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (1, (1,), (2,) if elr_version else None)
    h.heartbeat(1, want_fence=True)
    return h


def test_two_failures_in_sequence_then_an_elr_member_leads() -> None:
    h = story()
    p = h.partition("t")
    # The last known leader is remembered for the worst case (see the next tests).
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (-1, (), (1, 2), (1,))
    # Broker 3 comes back first: it left the ISR while it still held min ISR, so it may lack
    # committed records; it is not eligible and unclean elections are off.
    h.heartbeat(3)
    assert h.partition("t").leader == -1
    # Broker 2 comes back: an eligible leader replica, it leads with itself as the ISR.
    h.heartbeat(2)
    p = h.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.leader_recovery_state) == \
        (2, (2,), (1,), LeaderRecoveryState.RECOVERED)
    # Its followers catch up: back at min ISR, the ELR is cleared.
    answer = h.alter_partition("t", 0, [2, 3])
    assert answer.error_code == 0
    p = h.partition("t")
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr or ()) == ((2, 3), (), ())


def test_an_unclean_restart_leaves_the_elr_a_clean_one_does_not() -> None:
    h = story()
    epoch_2 = h.image.cluster.get(2).broker_epoch
    epoch_1 = h.image.cluster.get(1).broker_epoch
    # Broker 1 restarts cleanly: it names the epoch it had.
    clean = dataclasses.replace(h.registration_request(1, incarnation=uuid.UUID(int=101)),
                                previous_broker_epoch=epoch_1)
    assert h.commit(h.controller.handle_broker_registration(clean, h.now_ms)).error_code == 0
    assert 1 in h.partition("t").eligible_leader_replicas
    # Broker 2 restarts after a crash: no previous epoch; it is eligible no longer.
    crashed = h.registration_request(2, incarnation=uuid.UUID(int=102))
    assert crashed.previous_broker_epoch == -1 != epoch_2
    assert h.commit(h.controller.handle_broker_registration(crashed, h.now_ms)).error_code == 0
    p = h.partition("t")
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((1,), (1,))
    # So broker 2 cannot lead, broker 1 can.
    h.heartbeat(2)
    assert h.partition("t").leader == -1
    h.heartbeat(1)
    assert h.partition("t").leader == 1


def test_with_the_feature_off_the_last_isr_member_stays() -> None:
    h = story(elr_version=0)
    p = h.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (-1, (1,), None)


def test_every_eligible_replica_back_uncleanly_the_last_known_leader_recovers() -> None:
    # A single replica: its broker crashes and restarts (no previous epoch). It is no
    # longer eligible, yet it had the longest log: it leads again, RECOVERING (KIP-704).
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("solo", assignments=[[1]])
    h.heartbeat(1, want_fence=True)
    p = h.partition("solo")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (-1, (), (1,), (1,))
    crashed = h.registration_request(1, incarnation=uuid.UUID(int=111))
    assert h.commit(h.controller.handle_broker_registration(crashed, h.now_ms)).error_code == 0
    assert h.partition("solo").eligible_leader_replicas == ()
    h.heartbeat(1)
    p = h.partition("solo")
    assert (p.leader, p.isr, p.leader_recovery_state, p.last_known_elr) == \
        (1, (1,), LeaderRecoveryState.RECOVERING, ())


def test_switching_elr_off_keeps_a_partition_without_isr_recoverable() -> None:
    from quorum.controller import ControllerResult
    h = story()
    h.commit(ControllerResult((M.FeatureLevelRecord(
        name="eligible.leader.replicas.version", feature_level=0),), None))
    h.heartbeat(2)
    p = h.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (2, (2,), (), ())
