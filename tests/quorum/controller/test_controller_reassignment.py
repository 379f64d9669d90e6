"""ElectLeaders and partition reassignment through the controller (quorum/controller/reassignment.py)."""
from __future__ import annotations

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from quorum.controller import ControllerConfig
from quorum.controller.reassignment import reassignment_replicas
from tests.quorum.controller.harness import Harness


def elect(h: Harness, election_type: int, partitions: dict[str, list[int]] | None):
    R = M.ElectLeadersRequest
    tps = None if partitions is None else [R.TopicPartitions(topic=t, partitions=ps)
                                             for t, ps in partitions.items()]
    response = h.commit(h.controller.handle_elect_leaders(
        R(election_type=election_type, topic_partitions=tps), h.now_ms))
    return {(r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results for p in r.partition_result}


def reassign(h: Harness, topic: str, targets: dict[int, list[int] | None]) -> dict[int, int]:
    R = M.AlterPartitionReassignmentsRequest
    T = R.ReassignableTopic
    response = h.commit(h.controller.handle_alter_partition_reassignments(R(topics=[T(
        name=topic, partitions=[T.ReassignablePartition(partition_index=i, replicas=r)
                                for i, r in targets.items()])]), h.now_ms))
    assert response.error_code == 0
    return {p.partition_index: p.error_code for p in response.responses[0].partitions}


def listed(h: Harness, topics=None):
    R = M.ListPartitionReassignmentsRequest
    result = h.controller.handle_list_partition_reassignments(R(topics=topics), h.now_ms)
    assert result.records == ()
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in result.response.topics for p in t.partitions}


def no_auto_rebalance() -> Harness:
    return Harness(ControllerConfig(auto_leader_rebalance_enable=False))


# ---------------------------------------------------------------- ElectLeaders

def test_preferred_election_moves_leadership_back_or_says_why_not() -> None:
    h = no_auto_rebalance()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2], [2, 3], [3, 1]])
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    h.alter_partition("t", 0, [2, 1])          # 1 back in partition 0's ISR only
    assert [p.leader for p in h.topic("t").partitions.values()] == [2, 2, 3]
    codes = elect(h, 0, {"t": [0, 1, 2], "nope": [0]})
    assert codes == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                     ("t", 2): ErrorCode.ELECTION_NOT_NEEDED,
                     ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.partition("t", 0).leader == 1
    h.heartbeat(2, want_fence=True)             # partition 1 moves to 3; 2 leaves its ISR
    h.heartbeat(2)                              # back, but not in the ISR
    assert h.partition("t", 1).leader == 3
    assert elect(h, 0, {"t": [1]}) == {("t", 1): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert h.partition("t", 1).leader == 3      # a refused election changes nothing


def test_electing_all_partitions_reports_only_those_that_needed_it() -> None:
    h = no_auto_rebalance()
    h.start_brokers({1: None, 2: None})
    h.create_topic("a", assignments=[[1, 2], [2, 1]])
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    h.alter_partition("a", 0, [2, 1])
    assert elect(h, 0, None) == {("a", 0): ErrorCode.NONE}
    assert elect(h, 0, None) == {}
    assert [p.leader for p in h.topic("a").partitions.values()] == [1, 2]


def test_unclean_election_only_for_leaderless_partitions() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1, 2], [2, 1]])
    h.alter_partition("t", 0, [1])
    h.heartbeat(1, want_fence=True)             # partition 0: ELR [1], no ISR, no leader
    assert h.partition("t", 0).leader == -1
    assert elect(h, 1, {"t": [0, 1]}) == {("t", 0): ErrorCode.NONE,
                                           ("t", 1): ErrorCode.ELECTION_NOT_NEEDED}
    p = h.partition("t", 0)
    assert (p.leader, p.isr, int(p.leader_recovery_state)) == (2, (2,), 1)   # RECOVERING


def test_unclean_election_without_any_live_replica() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[[1]])
    h.heartbeat(1, want_fence=True)
    assert elect(h, 1, {"t": [0]}) == {("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_an_unknown_election_type_is_refused() -> None:
    h = Harness()
    result = h.controller.handle_elect_leaders(
        M.ElectLeadersRequest(election_type=7, topic_partitions=None), h.now_ms)
    assert result.records == () and result.response.error_code == ErrorCode.INVALID_REQUEST


# ---------------------------------------------------------------- reassignment

def test_moving_replicas_lists_the_target_first_then_the_removed() -> None:
    assert reassignment_replicas((1, 2), (2, 3)) == ((2, 3, 1), (3,), (1,))
    assert reassignment_replicas((1, 2, 3), (4, 5, 6)) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))


def test_a_reassignment_completes_once_the_new_replicas_are_in_the_isr() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2]])
    assert reassign(h, "t", {0: [2, 3]}) == {0: ErrorCode.NONE}
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == \
        ((2, 3, 1), (3,), (1,), (1, 2), 1)
    assert listed(h) == {("t", 0): ([2, 3, 1], [3], [1])}
    assert h.controller.wants_poll
    result, _ = h.poll()
    assert result.records == ()                 # 3 is not in the ISR yet: nothing moves
    h.alter_partition("t", 0, [1, 2, 3])        # the leader lets 3 in
    assert h.controller.wants_poll
    result, _ = h.poll()
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((2, 3), (), (), (2, 3))
    assert p.leader == 2                        # the old leader was removed: a new one
    assert listed(h) == {}
    assert not h.controller.wants_poll


def test_a_target_already_in_the_isr_completes_at_once() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2, 3]])
    assert reassign(h, "t", {0: [3, 2]}) == {0: ErrorCode.NONE}
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == \
        ((3, 2), (), (), (2, 3), 3)   # the removed leader gives way to the preferred


def test_cancelling_reverts_to_the_original_replicas() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None, 4: None})
    h.create_topic("t", assignments=[[1, 2]])
    reassign(h, "t", {0: [3, 4]})
    h.alter_partition("t", 0, [1, 2, 3])        # 3 caught up, 4 not yet
    assert h.partition("t").replicas == (3, 4, 1, 2)
    assert reassign(h, "t", {0: None}) == {0: ErrorCode.NONE}
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == \
        ((1, 2), (), (), (1, 2), 1)
    assert reassign(h, "t", {0: None}) == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


def test_a_new_target_for_a_moving_partition_starts_from_its_original_replicas() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None, 4: None})
    h.create_topic("t", assignments=[[1, 2]])
    reassign(h, "t", {0: [3, 4]})
    assert reassign(h, "t", {0: [2, 4]}) == {0: ErrorCode.NONE}
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 4, 1), (4,), (1,))


def test_bad_targets_are_refused_and_change_nothing() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2]])
    before = h.partition("t")
    codes = reassign(h, "t", {0: [2, 2]})
    assert codes == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert reassign(h, "t", {0: []}) == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert reassign(h, "t", {0: [2, 9]}) == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert reassign(h, "t", {5: [1, 2]}) == {5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert reassign(h, "nope", {0: [1, 2]}) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.partition("t") == before


def test_listing_names_only_moving_partitions_of_existing_topics() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2], [1, 2]])
    reassign(h, "t", {1: [2, 3]})
    T = M.ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    assert listed(h, [T(name="t", partition_indexes=[0, 1]), T(name="nope", partition_indexes=[0])]) \
        == {("t", 1): ([2, 3, 1], [3], [1])}
    assert listed(h, [T(name="t", partition_indexes=[0])]) == {}


def test_a_moving_partition_survives_replay_from_the_log() -> None:
    # A standby (or a restarted controller) replays the same records into the same state.
    from metadata_log import decode_record
    from quorum.controller import QuorumController
    import random
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2]])
    reassign(h, "t", {0: [2, 3]})
    other = QuorumController(h.config, random.Random(9))
    other.replay([decode_record(b) for b in h.log], len(h.log) - 1)
    assert other.image.topics.get("t").partitions[0] == h.partition("t")


def test_a_new_active_controller_completes_a_reassignment_it_saw_as_a_standby() -> None:
    h = Harness()
    h.start_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[[1, 2]])
    reassign(h, "t", {0: [2, 3]})
    h.controller.deactivate()                   # a standby replays the ISR change
    h.alter_partition("t", 0, [1, 2, 3])
    assert h.partition("t").adding_replicas == (3,)
    h.controller.activate(h.now_ms)             # then wins an election
    assert h.controller.wants_poll
    h.poll()
    p = h.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3), (), ())
