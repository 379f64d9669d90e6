"""Leader elections: from the ISR, the last ISR member, unclean gating, preferred leaders."""
from __future__ import annotations

import uuid

from clients.protocol import messages as M
from metadata_log import LeaderRecoveryState, PartitionRegistration
from quorum.controller import ControllerConfig, Election
from quorum.controller.election import build_partition_change, elect_leader, remove_from_isr
from tests.quorum.controller.harness import Harness

TID = uuid.UUID(int=5)


def reg(replicas, isr, leader, lrs=LeaderRecoveryState.RECOVERED) -> PartitionRegistration:
    return PartitionRegistration(tuple(replicas), tuple(isr), (), (), leader, lrs, 3, 7)


# ---------------------------------------------------------------- the builder alone

def test_remove_from_isr_never_empties_it() -> None:
    assert remove_from_isr((1, 2, 3), [2]) == (1, 3)
    assert remove_from_isr((1, 2, 3), [1, 2, 3]) == (3,)
    assert remove_from_isr((2,), [2]) == (2,)
    assert remove_from_isr((1, 2), [5]) == (1, 2)


def test_online_election_keeps_a_valid_leader_else_takes_replica_order() -> None:
    p = reg([1, 2, 3], [1, 2, 3], 2)
    assert elect_leader(p, (1, 2, 3), lambda b: True, Election.ONLINE) == (2, False)
    assert elect_leader(p, (1, 3), lambda b: True, Election.ONLINE) == (1, False)
    assert elect_leader(p, (1, 3), lambda b: b != 1, Election.ONLINE) == (3, False)
    assert elect_leader(p, (1,), lambda b: b != 1, Election.ONLINE) == (-1, False)


def test_preferred_election_moves_to_replica_zero_only_when_it_can_lead() -> None:
    p = reg([1, 2, 3], [1, 2, 3], 2)
    assert elect_leader(p, (1, 2, 3), lambda b: True, Election.PREFERRED) == (1, False)
    assert elect_leader(p, (2, 3), lambda b: True, Election.PREFERRED) == (2, False)
    assert elect_leader(p, (1, 2, 3), lambda b: b != 1, Election.PREFERRED) == (2, False)


def test_unclean_election_takes_a_live_replica_outside_the_isr() -> None:
    p = reg([1, 2, 3], [1], 1)
    assert elect_leader(p, (1,), lambda b: b == 3, Election.ONLINE) == (-1, False)
    assert elect_leader(p, (1,), lambda b: b == 3, Election.UNCLEAN) == (3, True)
    record = build_partition_change(TID, 0, p, is_active=lambda b: b == 3,
                                    election=Election.UNCLEAN)
    assert (record.leader, record.isr, record.leader_recovery_state) == (3, [3], 1)


def test_the_builder_writes_nothing_when_nothing_changes() -> None:
    p = reg([1, 2], [1, 2], 1)
    assert build_partition_change(TID, 0, p, is_active=lambda b: True) is None
    q = reg([1, 2], [1], -1)
    assert build_partition_change(TID, 0, q, is_active=lambda b: b == 2) is None


def test_the_builder_sets_only_the_fields_that_change() -> None:
    p = reg([1, 2, 3], [1, 2, 3], 1)
    record = build_partition_change(TID, 4, p, is_active=lambda b: True, target_isr=(1, 2))
    assert (record.partition_id, record.topic_id, record.isr, record.leader) == \
        (4, TID, [1, 2], -2)
    assert record.leader_recovery_state == -1
    assert record.replicas is None


# ---------------------------------------------------------------- through the controller

def test_fenced_leader_is_replaced_from_the_isr_with_both_epochs_bumped() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2, 3]])
    h.heartbeat(1, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (2, 3), 1, 1)


def test_a_fenced_follower_leaves_the_isr_without_a_leader_epoch_bump() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2, 3]])
    h.heartbeat(3, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2), 0, 1)


def test_when_the_last_isr_member_is_fenced_it_stays_and_the_partition_has_no_leader() -> None:
    h = Harness(ControllerConfig(eligible_leader_replicas_version=0))     # Kafka 3.x rules
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]])
    h.heartbeat(2, want_fence=True)
    h.heartbeat(1, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch) == (-1, (1,), 1)
    # Broker 2 comes back, but it is not in the ISR: no clean leader, and unclean is off.
    h.heartbeat(2)
    assert h.partition("t").leader == -1
    # Broker 1 comes back: it was the last ISR member, so it leads again, cleanly.
    h.heartbeat(1)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.leader_recovery_state) == \
        (1, (1,), 2, LeaderRecoveryState.RECOVERED)


def unclean_scenario(config: ControllerConfig | None = None,
                     topic_configs: dict[str, str] | None = None,
                     cluster_configs: dict[str, str] | None = None) -> Harness:
    """Partition [1, 2] with ISR [1]; broker 1 is fenced, broker 2 is alive."""
    h = Harness(config)
    h.start_brokers({1: None, 2: None})
    if cluster_configs:
        R = M.IncrementalAlterConfigsRequest
        response = h.commit(h.controller.handle_incremental_alter_configs(R(resources=[
            R.AlterConfigsResource(resource_type=4, resource_name="", configs=[
                R.AlterableConfig(name=k, config_operation=0, value=v)
                for k, v in cluster_configs.items()])]), h.now_ms))
        assert response.responses[0].error_code == 0
    h.create_topic("t", assignments=[[1, 2]], configs=topic_configs)
    h.alter_partition("t", 0, [1])
    h.heartbeat(1, want_fence=True)
    return h


def test_unclean_election_is_off_by_default() -> None:
    h = unclean_scenario()
    p = h.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (-1, (), (1,))
    h.run_for(2 * h.config.leader_imbalance_check_interval_ms, heartbeating=[2])
    assert h.partition("t").leader == -1


def test_unclean_election_where_the_topic_allows_it_is_marked_recovering() -> None:
    h = unclean_scenario(topic_configs={"unclean.leader.election.enable": "true"})
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), LeaderRecoveryState.RECOVERING)
    # created (0, 0); ISR shrink (0, 1); fenced + unclean election (1, 2)
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    # KIP-704: the leader marks itself recovered, explicitly, with the ISR unchanged.
    answer = h.alter_partition("t", 0, [2], leader_recovery_state=int(LeaderRecoveryState.RECOVERED))
    assert answer.error_code == 0
    p = h.partition("t")
    assert (p.isr, p.leader_recovery_state, p.leader_epoch) == ((2,), LeaderRecoveryState.RECOVERED, 1)


def test_a_topic_config_overrides_the_cluster_default() -> None:
    h = unclean_scenario(cluster_configs={"unclean.leader.election.enable": "true"},
                         topic_configs={"unclean.leader.election.enable": "false"})
    assert h.partition("t").leader == -1
    h = unclean_scenario(cluster_configs={"unclean.leader.election.enable": "true"})
    assert h.partition("t").leader == 2


def test_the_static_default_applies_when_nothing_is_configured() -> None:
    h = unclean_scenario(ControllerConfig(unclean_leader_election_enable=True))
    assert h.partition("t").leader == 2


def test_enabling_unclean_later_elects_on_the_periodic_scan() -> None:
    h = unclean_scenario()
    R = M.IncrementalAlterConfigsRequest
    h.commit(h.controller.handle_incremental_alter_configs(R(resources=[
        R.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
            R.AlterableConfig(name="unclean.leader.election.enable", config_operation=0,
                              value="true")])]), h.now_ms))
    assert h.partition("t").leader == -1
    h.run_for(h.config.leader_imbalance_check_interval_ms, heartbeating=[2])
    p = h.partition("t")
    assert (p.leader, p.leader_recovery_state) == (2, LeaderRecoveryState.RECOVERING)


def test_a_preferred_replica_back_in_the_isr_leads_again_at_the_next_poll() -> None:
    # Issue 12: Kafka waits for its periodic scan (leader.imbalance.check.interval, five
    # minutes); Ketch elects the preferred replica as soon as it is back in the ISR.
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2], [2, 1]])
    h.heartbeat(1, want_fence=True)
    assert [p.leader for p in h.topic("t").partitions.values()] == [2, 2]
    h.heartbeat(1)                                         # back, but not in any ISR
    result, _ = h.poll()
    assert result.records == ()                            # not caught up: nothing moves
    assert not h.controller.wants_poll
    h.alter_partition("t", 0, [2, 1])                      # the leader lets it back in
    assert h.controller.wants_poll
    h.alter_partition("t", 1, [2, 1])
    result, _ = h.poll()
    assert len(result.records) == 1                        # partition 0 only: 1 is preferred
    assert [p.leader for p in h.topic("t").partitions.values()] == [1, 2]
    assert h.partition("t", 0).leader_epoch == 2
    assert not h.controller.wants_poll


def test_periodic_preferred_leader_election_still_runs() -> None:
    # The periodic scan remains for what no ISR change announces (a standby that became
    # active after the ISR change was replayed).
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2], [2, 1]])
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    h.controller.deactivate()                              # a standby replays these
    h.alter_partition("t", 0, [2, 1])
    h.controller.activate(h.now_ms)
    result, wait_ms = h.poll()
    assert result.records == () and wait_ms > 0
    h.run_for(h.config.leader_imbalance_check_interval_ms, heartbeating=[1, 2])
    assert [p.leader for p in h.topic("t").partitions.values()] == [1, 2]


def test_preferred_leader_election_can_be_disabled() -> None:
    h = Harness(ControllerConfig(auto_leader_rebalance_enable=False))
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]])
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    h.alter_partition("t", 0, [2, 1])
    h.run_for(2 * h.config.leader_imbalance_check_interval_ms, heartbeating=[1, 2])
    assert h.partition("t").leader == 2


def test_periodic_elections_are_bounded_per_poll() -> None:
    h = Harness(ControllerConfig(elections_per_poll_max=3))
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2]] * 7)
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    for i in range(7):
        h.alter_partition("t", i, [2, 1])
    # Back in the ISR: the follow-up elections, bounded per poll like the periodic ones.
    result, wait_ms = h.poll()
    assert len(result.records) == 3 and wait_ms == 0
    result, _ = h.poll()
    result, _ = h.poll()
    assert [p.leader for p in h.topic("t").partitions.values()] == [1] * 7
    result, wait_ms = h.poll()
    assert result.records == () and wait_ms > 0
