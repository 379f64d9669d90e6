"""Broker lifecycle decisions: registration, heartbeats, fencing, controlled shutdown."""
from __future__ import annotations

import dataclasses
import random
import uuid

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log import BrokerFenced, BrokerUnfenced, LeaderChange, decode_record
from quorum.controller import ControllerConfig, QuorumController
from tests.quorum.controller.harness import Harness


def test_registration_writes_a_fenced_registration_with_the_next_offset_as_epoch() -> None:
    h = Harness()
    offset_before = h.image.provenance.offset
    result = h.controller.handle_broker_registration(h.registration_request(1, "r1"), h.now_ms)
    assert h.image.cluster.get(1) is None          # deciding changed nothing
    assert [type(r).__name__ for r in result.records] == ["RegisterBrokerRecord"]
    assert result.response.error_code == 0
    assert result.response.broker_epoch == offset_before + 1
    h.commit(result)
    b = h.image.cluster.get(1)
    assert b.fenced and not b.in_controlled_shutdown
    assert (b.broker_epoch, b.rack, b.endpoints[0].port) == (offset_before + 1, "r1", 9001)
    assert h.controller.registration_offset(1) == h.next_offset - 1


def test_a_retried_registration_returns_the_same_epoch_and_writes_nothing() -> None:
    h = Harness()
    first = h.register(1)
    retry = h.controller.handle_broker_registration(h.registration_request(1), h.now_ms)
    assert retry.records == ()
    assert retry.response.broker_epoch == first.broker_epoch


def test_a_new_incarnation_replaces_the_old_and_takes_its_partitions_away() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", partitions=2, replication_factor=2)
    old_epoch = h.image.cluster.get(1).broker_epoch
    led_by_1 = [i for i, p in h.topic("t").partitions.items() if p.leader == 1]
    response = h.register(1, incarnation=uuid.UUID(int=99))
    assert response.broker_epoch > old_epoch
    b = h.image.cluster.get(1)
    assert b.fenced and b.incarnation_id == uuid.UUID(int=99)
    for i, p in h.topic("t").partitions.items():
        assert p.isr == (2,) and p.leader == 2
    assert led_by_1
    # The old incarnation's heartbeats are now stale.
    stale = h.heartbeat(1, epoch=old_epoch)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_registration_refusals() -> None:
    h = Harness(ControllerConfig(cluster_id="abc"))
    request = h.registration_request(1)
    other = dataclasses.replace(request, cluster_id="other")
    assert h.commit(h.controller.handle_broker_registration(other, h.now_ms)).error_code \
        == ErrorCode.INCONSISTENT_CLUSTER_ID
    too_old = dataclasses.replace(request, cluster_id="abc", features=[
        dataclasses.replace(request.features[0], max_supported_version=3),  # 21 is finalized
        *request.features[1:]])
    assert h.commit(h.controller.handle_broker_registration(too_old, h.now_ms)).error_code \
        == ErrorCode.UNSUPPORTED_VERSION
    request = h.registration_request(2)
    request = dataclasses.replace(request, cluster_id="abc",
                                  listeners=[*request.listeners, request.listeners[0]])
    assert h.commit(h.controller.handle_broker_registration(request, h.now_ms)).error_code \
        == ErrorCode.INVALID_REQUEST
    assert h.image.cluster.brokers == {}


def test_unfence_waits_until_the_broker_has_caught_up_with_its_registration() -> None:
    h = Harness()
    h.register(1)
    registered_at = h.controller.registration_offset(1)
    behind = h.heartbeat(1, offset=registered_at - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert h.image.cluster.get(1).fenced
    caught_up = h.heartbeat(1, offset=registered_at)
    assert (caught_up.is_caught_up, caught_up.is_fenced, caught_up.should_shut_down) == \
        (True, False, False)
    assert not h.image.cluster.get(1).fenced


def test_a_broker_that_wants_to_stay_fenced_stays_fenced() -> None:
    h = Harness()
    h.register(1)
    response = h.heartbeat(1, want_fence=True)
    assert response.is_caught_up and response.is_fenced
    assert h.image.cluster.get(1).fenced


def test_heartbeats_with_a_wrong_epoch_or_from_strangers_are_stale() -> None:
    h = Harness()
    h.start_broker(1)
    assert h.heartbeat(1, epoch=12345).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert h.heartbeat(7, epoch=1).error_code == ErrorCode.STALE_BROKER_EPOCH


def test_session_expiry_fences_with_a_fake_clock() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", partitions=1, replication_factor=2)
    leader = h.partition("t").leader
    other = 3 - leader
    for _ in range(4):                            # 8 s of heartbeats from `other` only
        h.advance(2000)
        h.heartbeat(other)
        result, wait_ms = h.poll()
        assert result.records == ()
    assert not h.image.cluster.get(leader).fenced
    # The leader's session started at activation + its last heartbeat; 9 s run out soon.
    assert wait_ms <= 9000
    h.advance(wait_ms)
    h.heartbeat(other)
    result, _ = h.poll()
    assert h.image.cluster.get(leader).fenced
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (other, (other,), 1, 1)


def test_poll_reports_when_the_next_session_expires() -> None:
    h = Harness(ControllerConfig(broker_session_timeout_ms=5000))
    h.start_broker(1)
    h.advance(1000)
    _, wait_ms = h.poll()
    assert wait_ms == 4000
    h.advance(3999)
    result, wait_ms = h.poll()
    assert result.records == () and wait_ms == 1
    h.advance(1)
    result, _ = h.poll()
    assert [type(r).__name__ for r in result.records] == ["BrokerRegistrationChangeRecord"]
    assert result.records[0].fenced == 1


def test_a_new_active_controller_gives_every_broker_a_full_session() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    standby = QuorumController(h.config, random.Random(5))
    offset = -1
    for i, data in enumerate(h.log):        # the standby replays the same committed log
        standby.replay([decode_record(data)], i, epoch=1)
        offset = i
    assert standby.image == h.image and offset == h.next_offset - 1
    h.advance(60_000)                       # long after the old sessions
    standby.activate(h.now_ms)
    result, wait_ms = standby.poll(h.now_ms)
    assert result.records == () and wait_ms == 9000
    result, _ = standby.poll(h.now_ms + 9000)
    assert {r.broker_id for r in result.records} == {1, 2}


def test_a_standby_does_not_fence() -> None:
    h = Harness()
    h.start_broker(1)
    h.controller.deactivate()
    h.advance(100_000)
    result, _ = h.controller.poll(h.now_ms)
    assert result.records == ()


def test_unfencing_elects_leaders_for_partitions_that_had_none() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", partitions=2, replication_factor=2)
    h.heartbeat(1, want_fence=True)
    h.heartbeat(2, want_fence=True)
    for p in h.topic("t").partitions.values():
        # KIP-966: the ISR empties; its last member is the one eligible leader replica.
        assert p.leader == -1 and p.isr == () and len(p.eligible_leader_replicas) == 1
    last_isr = {i: p.eligible_leader_replicas[0] for i, p in h.topic("t").partitions.items()}
    returning = last_isr[0]
    result = h.controller.handle_broker_heartbeat(M.BrokerHeartbeatRequest(
        broker_id=returning, broker_epoch=h.image.cluster.get(returning).broker_epoch,
        current_metadata_offset=h.next_offset - 1), h.now_ms)
    h.commit(result)
    assert not h.image.cluster.get(returning).fenced
    for i, p in h.topic("t").partitions.items():
        assert p.leader == (returning if last_isr[i] == returning else -1)


def test_controlled_shutdown_moves_leadership_first_then_lets_the_broker_go() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", partitions=6, replication_factor=3)
    h.create_topic("solo", assignments=[[1]])
    led = [i for i, p in h.topic("t").partitions.items() if p.leader == 1]
    assert led
    first = h.heartbeat(1, want_shut_down=True)
    assert (first.should_shut_down, first.is_fenced) == (False, False)
    b = h.image.cluster.get(1)
    assert b.in_controlled_shutdown and not b.fenced
    for p in h.topic("t").partitions.values():
        assert p.leader != 1 and 1 not in p.isr
    solo = h.partition("solo")
    # Nobody else can take it; the broker stays its eligible leader replica (KIP-966).
    assert (solo.leader, solo.isr, solo.eligible_leader_replicas) == (-1, (), (1,))
    second = h.heartbeat(1, want_shut_down=True)
    assert (second.should_shut_down, second.is_fenced) == (True, True)
    assert h.image.cluster.get(1).fenced


def test_a_broker_leading_nothing_may_shut_down_at_once() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[2, 1]])
    response = h.heartbeat(1, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced
    assert h.partition("t").isr == (2,)


def test_a_fenced_broker_may_always_shut_down() -> None:
    h = Harness()
    h.register(1)
    response = h.heartbeat(1, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced


def test_a_broker_in_controlled_shutdown_is_not_unfenced_or_given_replicas() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]])
    h.heartbeat(1, want_shut_down=True)
    response = h.heartbeat(1)                          # changed its mind: Kafka ignores it
    assert not response.should_shut_down
    assert h.image.cluster.get(1).in_controlled_shutdown
    created = h.create_topic("u", partitions=4, replication_factor=1)
    assert created.error_code == 0
    assert all(p.replicas == (2,) for p in h.topic("u").partitions.values())


def test_fence_and_unfence_changes_reach_the_delta() -> None:
    h = Harness()
    h.register(1)
    outcome_changes = []
    result = h.controller.handle_broker_heartbeat(M.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=h.image.cluster.get(1).broker_epoch,
        current_metadata_offset=h.next_offset), h.now_ms)
    outcome = h.controller.replay(result.records, h.next_offset)
    outcome_changes += outcome.changes
    assert BrokerUnfenced(1, h.image.cluster.get(1).broker_epoch) in outcome_changes
    h.next_offset += 1
    result = h.controller.handle_broker_heartbeat(M.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=h.image.cluster.get(1).broker_epoch, want_fence=True,
        current_metadata_offset=h.next_offset), h.now_ms)
    outcome = h.controller.replay(result.records, h.next_offset)
    assert outcome.changes[0] == BrokerFenced(1, h.image.cluster.get(1).broker_epoch)
    assert not any(isinstance(c, LeaderChange) for c in outcome.changes)


def test_unregister_removes_the_broker_and_its_leaderships() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]])
    response = h.commit(h.controller.handle_unregister_broker(
        M.UnregisterBrokerRequest(broker_id=1), h.now_ms))
    assert response.error_code == 0
    assert h.image.cluster.get(1) is None
    assert (h.partition("t").leader, h.partition("t").isr) == (2, (2,))
    again = h.commit(h.controller.handle_unregister_broker(
        M.UnregisterBrokerRequest(broker_id=1), h.now_ms))
    assert again.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_fencing_moves_partitions_in_bounded_batches_over_the_next_polls() -> None:
    # A fencing batch holds at most controlled_shutdown_records_max partition changes;
    # the polls after it move the rest, leaderships first, until nothing is left.
    h = Harness(ControllerConfig(controlled_shutdown_records_max=4))
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", partitions=9, replication_factor=3)
    led_by_3 = sum(p.leader == 3 for p in h.topic("t").partitions.values())
    assert led_by_3 >= 1
    h.advance(h.config.broker_session_timeout_ms)
    h.heartbeat(1)
    h.heartbeat(2)
    sizes = []
    while True:
        result, wait_ms = h.poll()
        if not result.records:
            break
        changes = [r for r in result.records if type(r) is M.PartitionChangeRecord]
        sizes.append(len(changes))
        if len(sizes) == 1:
            assert h.image.cluster.get(3).fenced
            # Leaderships first: the first batch moved min(4, led_by_3) of them.
            assert sum(r.leader != -2 for r in changes) == min(4, led_by_3)
    assert sizes == [4, 4, 1]
    assert all(3 not in p.isr and p.leader in (1, 2) for p in h.topic("t").partitions.values())
    assert h.controller.index.as_dict() == type(h.controller.index).from_image(h.image).as_dict()


def test_unfencing_elects_leaderless_partitions_in_bounded_batches_over_the_next_polls() -> None:
    # Every replica fenced left all partitions leaderless; the broker's unfencing batch
    # elects at most controlled_shutdown_records_max of them, the next polls the rest
    # (one batch of 9 elections would have been one Raft entry every broker applies whole).
    h = Harness(ControllerConfig(controlled_shutdown_records_max=4))
    h.start_brokers({1: None})
    h.create_topic("t", partitions=9, replication_factor=1)
    h.heartbeat(1, want_fence=True)
    while h.poll()[0].records:
        pass
    assert all(p.leader == -1 for p in h.topic("t").partitions.values())
    unfenced = h.heartbeat(1)
    assert not unfenced.is_fenced
    assert sum(p.leader == 1 for p in h.topic("t").partitions.values()) == 4
    sizes, waits = [], []
    while True:
        result, wait_ms = h.poll()
        if not result.records:
            break
        sizes.append(len(result.records))
        waits.append(wait_ms)
    assert sizes == [4, 1]
    assert waits[0] == 0                    # the rest at once, not at the periodic scan
    assert all(p.leader == 1 for p in h.topic("t").partitions.values())


def test_a_new_active_controller_finishes_an_unfinished_fencing() -> None:
    h = Harness(ControllerConfig(controlled_shutdown_records_max=4))
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", partitions=9, replication_factor=3)
    h.advance(h.config.broker_session_timeout_ms)
    h.heartbeat(1)
    h.heartbeat(2)
    h.poll()                                    # fenced, 4 partitions moved
    assert sum(3 in p.isr for p in h.topic("t").partitions.values()) == 5
    h.controller.deactivate()                   # failover: the soft state is gone
    h.controller.activate(h.now_ms)
    while h.poll()[0].records:
        pass
    assert all(3 not in p.isr for p in h.topic("t").partitions.values())
