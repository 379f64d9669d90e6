"""The chaos suite's two past bugs, re-introduced in test-only subclasses, and their stories.

Theory of operation
-------------------
Each bug exists twice here: as a ``ReplicaManager`` subclass that puts the old behaviour
back (never used outside tests), and as a scripted story (a fault schedule, like
TigerBeetle's ``replica_test.zig``) that reproduces the chaos suite's finding in
milliseconds. The random explorer must also find each bug by itself within the CI seed
budget (tests/sim/test_sim_bugs.py), and the real core must pass the same seeds.

1. ``LostAnswerFallsBack``: on a lost AlterPartition answer the leader fell back to its
   committed ISR. When the lost answer was for an expansion the controller had committed,
   the leader acknowledged acks=all writes with the smaller ISR; the new member, in the
   committed ISR without those records, could then be elected cleanly.
2. ``PausesOnLeaderBehind``: a follower that learned of a new topic before its leader got
   UNKNOWN_TOPIC_OR_PARTITION (or NOT_LEADER_OR_FOLLOWER) and paused for good, as it does
   on FENCED_LEADER_EPOCH; no metadata change comes to wake it, so replication stopped.
"""
from __future__ import annotations

from broker.replica_manager import ReplicaManager
from clients.types import TopicPartition
from tests.sim.cluster import SimConfig
from tests.sim.scenarios import Outcome, SimRun

__all__ = ["LostAnswerFallsBack", "PausesOnLeaderBehind", "story_follower_before_leader",
           "story_lost_alter_partition_answer", "story_restarted_leader_before_registration"]


class LostAnswerFallsBack(ReplicaManager):
    """Bug 1, re-introduced: a lost answer abandons the pending (maybe committed) ISR."""

    def handle_alter_partition_response(self, proposal, answer, now_ms):
        if answer is not None:
            return super().handle_alter_partition_response(proposal, answer, now_ms)
        state = self._isr_proposals.get(proposal.partition)
        if state is None or state.in_flight != proposal:
            return None
        state.in_flight = None
        hosted = self.partitions.get(proposal.partition)
        if hosted is not None and self._proposal_current(proposal, state.topic_id):
            self._complete(hosted.replica.abandon_pending_isr())     # the bug
        if hosted is not None:
            self._poll_soon(proposal.partition)     # as the real core does after any answer
        self._maybe_send_alter_partition(proposal.partition, now_ms)
        return None


class PausesOnLeaderBehind(ReplicaManager):
    """Bug 2, re-introduced: every follower fetch error pauses the partition for good."""

    def _on_follower_error(self, f, error_code, now_ms):
        f.paused = True                                 # the bug


def story_lost_alter_partition_answer(seed: int, core_factory=ReplicaManager,
                                      check_at_ack: bool = True) -> Outcome:
    """Bug 1 as a story. Leader L, followers F1, F2; min.insync.replicas=2.

    F2 is cut off from L until it leaves the ISR; every answer from the controllers to L
    is lost (L's requests still arrive); F2 reconnects and catches up, L proposes {L, F1, F2}, the
    controller commits it, the answer is lost. L and F2 are then cut apart, and the
    producer writes with acks=all. The fixed core keeps counting F2 (the proposal may be
    committed), so nothing is acknowledged; the buggy one acknowledges with {L, F1}. L
    and F1 die, the controller elects F2 cleanly (it is in the committed ISR).

    ``check_at_ack=False`` turns off the invariant that catches the bad ack when it
    happens (``acks_all_on_committed_isr``), to let the story reach the loss itself."""
    run = SimRun(seed, core_factory, assignments=[[1, 2, 3]])
    c = run.cluster
    if not check_at_ack:
        c.ack_listeners.remove(run.invariants.check_acks_all_on_committed_isr)
    p = run.producer()
    run.produce_acked(p, 10)
    leader = run.await_leader()
    f1, f2 = run.followers()
    lname, f2name = c.brokers[leader].name, c.brokers[f2].name
    c.network.cut_both(lname, f2name)         # F2 falls behind (but keeps heartbeating):
    p.produce(1)                                # at the LEO it would stay in sync (Kafka's isCaughtUp)
    run.run_until(lambda: f2 not in run.isr(), 3_000, "isr_shrunk")
    run.run_for(100)                            # L learns the shrink
    for ctl in c.controllers.names:
        c.network.cut(ctl, lname)
    c.network.uncut(lname, f2name)
    c.network.uncut(f2name, lname)
    run.run_until(lambda: f2 in run.isr(), 3_000, "expansion_committed")
    c.network.cut_both(lname, f2name)
    before = len(run.history.acked)
    p.produce(10)
    run.run_for(400)
    acked_with_two = len(run.history.acked) - before
    c.kill(leader)
    c.kill(f1)
    run.await_leader(other_than=leader)
    return run.outcome("bug1", new_leader=run.leader(), acked_after_expansion=acked_with_two)


def story_follower_before_leader(seed: int, core_factory=ReplicaManager) -> Outcome:
    """Bug 2 as a story: the leader of a new topic learns of it late (the controllers'
    answers to it are lost for a while); a follower fetches first and hears
    UNKNOWN_TOPIC_OR_PARTITION. The fixed core retries after a backoff; the buggy one
    pauses for good and the partition stays under-replicated (``converged`` fails)."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    tp = TopicPartition("late", 0)
    for ctl in c.controllers.names:
        c.network.cut(ctl, "b1")
    c.create_topic("late", 1, 3, {"min.insync.replicas": "2"}, assignments=[[1, 2, 3]])
    run.partitions.append(tp)
    run.invariants.partitions.append(tp)
    run.run_for(500)                     # b2 and b3 follow b1, which does not lead yet
    p = run.producer(tp=tp)
    p.produce(20)
    return run.outcome("bug2")



def story_restarted_leader_before_registration(seed: int, wait_for_own_registration: bool) -> Outcome:
    """A finding of the simulator in the broker shell (not a core bug): the leader loses
    power (its unflushed tail is gone) and restarts before its session times out. If it
    applies the metadata image as soon as it has replayed the log (broker/broker.py does),
    the image still names it leader at its old epoch: it leads with its shortened log, the
    followers' fetches are out of range, they truncate to its end by leader epoch, and
    records both healthy followers held are lost. Kafka's broker publishes metadata to its
    replica manager only after catching up past its own new registration, whose commit
    moves leadership away first (``SimConfig.wait_for_own_registration``). The window is
    as long as the new registration takes to commit; here one lossy link stretches it.

    Only one replica lost power and the other two ISR members were never touched, so no
    acknowledged record may be lost: ``figures.lost`` counts every one (no power-cut
    exemption)."""
    run = SimRun(seed, config=SimConfig(wait_for_own_registration=wait_for_own_registration))
    c = run.cluster
    p = run.producer()
    run.produce_acked(p, 40)
    leader = run.await_leader()
    # Its registration is slow to reach the active controller (one lossy link), while it
    # reads the metadata log from the other controllers.
    active = c.controllers.active
    c.network.cut(c.brokers[leader].name, active)
    c.kill(leader, power_cut=True)
    c.restart(leader)                        # well within broker.session.timeout.ms
    run.run_for(1_000)
    c.network.uncut(c.brokers[leader].name, active)
    return run.outcome("restart", leader=leader)
