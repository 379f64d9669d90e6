"""SCENARIOS.md, simulated: each id as a schedule of faults plus a workload, run by seed.

Theory of operation
-------------------
A scenario is a function ``(seed, core_factory) -> Outcome``: it builds a ``SimRun`` (a
``SimCluster`` with one topic, a ``History``, the continuous ``Invariants``), plays its
fault schedule against the workload, heals, waits for convergence and judges the history
like the chaos checker does (``Figures``: acked, lost, duplicated, reordered, phantom,
divergent). ``SCENARIOS`` maps each id to its function and ``EXPECT`` to its promise or
hazard; ``check(outcome)`` raises an ``InvariantViolation`` naming the seed when the
outcome breaks it. The same seed always gives the same outcome: the seed picks the network
delays, which broker the controller makes leader, how much a power cut loses.

N promises must show lost=0 and divergent=0; L hazards must *show* their loss (a hazard
that never shows does not test what it claims). N7/L5 (consumer groups) and N12-N17
(transactions, ELR, voter changes, mirrors, delayed delivery) are not here: see
``NOT_SIMULATED``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from broker.replica_manager import ReplicaManager
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from tests.sim.cluster import SimCluster, SimConfig
from tests.sim.invariants import InvariantViolation, Invariants
from tests.sim.network import NetworkFaults
from tests.sim.workload import Figures, History, SimProducer, read_partition

__all__ = ["EXPECT", "NOT_SIMULATED", "Outcome", "SCENARIOS", "SimRun", "check", "run_scenario"]

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)

NOT_SIMULATED = {
    "N7": "consumer groups: the group coordinator is not a pure core yet (broker/group/driver.py "
          "drives it with asyncio), so the sim has no group member to kill",
    "L5": "auto-commit consumers: same reason as N7",
}


@dataclass(slots=True)
class Outcome:
    scenario: str
    seed: int
    figures: Figures
    divergent: int
    notes: dict[str, object] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)


class SimRun:
    """One cluster, one topic ``t`` (partition 0 unless more are asked for), a history."""

    def __init__(self, seed: int, core_factory: Callable[..., ReplicaManager] = ReplicaManager, *,
                 brokers: int = 3, controllers: int = 3, replication_factor: int = 3,
                 topic_configs: dict[str, str] | None = None, partitions: int = 1,
                 faults: NetworkFaults | None = None, assignments: list[list[int]] | None = None,
                 config: SimConfig | None = None) -> None:
        self.seed = seed
        cfg = config or SimConfig(brokers=brokers, controllers=controllers,
                                  faults=faults or NetworkFaults())
        self.cluster = c = SimCluster(seed, cfg, core_factory)
        self.history = History()
        c.run_until(lambda: all(not b.fenced for b in c.brokers.values()), 5_000)
        configs = {"min.insync.replicas": "2"}
        configs.update(topic_configs or {})
        c.create_topic(TOPIC, partitions, replication_factor, configs, assignments)
        self.partitions = [TopicPartition(TOPIC, i) for i in range(partitions)]
        self.invariants = Invariants(c, self.history, self.partitions)
        self.producers: list[SimProducer] = []
        self.await_leader()

    # ---------------------------------------------------------- verbs

    def producer(self, acks: int = -1, idempotent: bool = True, tp: TopicPartition = TP,
                 **kwargs) -> SimProducer:
        name = f"p{len(self.producers)}"
        p = SimProducer(self.cluster, name, tp, self.history, acks=acks, idempotent=idempotent,
                        producer_id=1000 + len(self.producers), **kwargs)
        self.producers.append(p)
        return p

    def leader(self, tp: TopicPartition = TP) -> int | None:
        return self.cluster.leader_of(tp)

    def await_leader(self, tp: TopicPartition = TP, other_than: int | None = None,
                     timeout_ms: int = 5_000) -> int:
        c = self.cluster
        ok = c.run_until(lambda: c.leader_of(tp) is not None and c.leader_of(tp) != other_than,
                         timeout_ms)
        if not ok:
            self.fail("leader_elected", f"no leader for {tp} (other than {other_than}) "
                                        f"within {timeout_ms} ms: {c.registration(tp)}")
        return c.leader_of(tp)

    def followers(self, tp: TopicPartition = TP) -> list[int]:
        reg = self.cluster.registration(tp)
        return [r for r in reg.replicas if r != reg.leader]

    def isr(self, tp: TopicPartition = TP) -> tuple[int, ...]:
        return self.cluster.registration(tp).isr

    def run_for(self, ms: int) -> None:
        self.cluster.run_for(ms)

    def run_until(self, condition: Callable[[], bool], timeout_ms: int, what: str) -> None:
        if not self.cluster.run_until(condition, timeout_ms):
            self.fail(what, f"not reached within {timeout_ms} ms")

    def produce_acked(self, producer: SimProducer, records: int, timeout_ms: int = 5_000) -> int:
        """Produce and wait until the producer is idle; how many of them were acked."""
        before = len(self.history.acked)
        producer.produce(records)
        self.run_until(lambda: producer.idle, timeout_ms, "producer_idle")
        return len(self.history.acked) - before

    def fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(self.seed, invariant, detail, list(self.cluster.trace))

    # ---------------------------------------------------------- the end

    def settle(self, settle_ms: int = 6_000) -> None:
        """Heal every fault, let producers finish, require convergence (liveness)."""
        c = self.cluster
        c.heal()
        for p in self.producers:
            p.stop()
        c.run_until(lambda: all(p.idle for p in self.producers), 6_000)
        # Liveness: every partition takes new acks=all writes once healed (a follower
        # paused for good is only seen once there is something to replicate).
        probes = [self.producer(tp=tp) for tp in self.partitions]
        for p in probes:
            p.produce(3)
        acked = self.history.acked
        if not c.run_until(lambda: all(f"{p.name}-{i}" in acked for p in probes for i in range(3)),
                           settle_ms):
            self.fail("writable_after_heal", f"3 acks=all records per partition not acknowledged "
                                             f"within {settle_ms} ms of healing")
        if not c.run_until(self.invariants.converged, settle_ms):
            regs = {str(tp): c.registration(tp) for tp in self.partitions}
            leos = {b.name: {str(tp): (h.log.log_end_offset, h.replica.high_watermark,
                                       h.following and h.following.paused)
                             for tp, h in b.core.partitions.items()}
                    for b in c.live_brokers()}
            self.fail("converged_after_heal", f"partitions {regs}; (LEO, HW, paused) {leos}")

    def outcome(self, scenario: str, **notes: object) -> Outcome:
        self.settle()
        c = self.cluster
        final: list[tuple[int, str]] = []
        divergent = 0
        for tp in self.partitions:
            records = read_partition(c, tp)
            assert records is not None
            final.extend(records)
            divergent += self.invariants.divergent_after_heal(tp)
        self.invariants.deep_check()
        figures = self.history.judge(final, c.durability_exempt_before_ms())
        return Outcome(scenario, self.seed, figures, divergent, dict(notes), list(c.trace))


# ---------------------------------------------------------------- the promises

def n1_leader_killed_repeatedly(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N1: SIGKILL the leader, restart it; 5 times while producing."""
    run = SimRun(seed, core_factory)
    p = run.producer()
    p.produce(400)
    for _ in range(5):
        run.run_for(run.cluster.rng.randint(100, 300))
        old = run.await_leader()
        run.cluster.kill(old)
        run.await_leader(other_than=old)
        run.run_for(run.cluster.rng.randint(50, 200))
        run.cluster.restart(old)
    return run.outcome("N1", errors=dict(run.history.errors))


def n2_controller_killed_repeatedly(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N2: kill the active controller repeatedly while topics are created and records produced."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    p.produce(300)
    created = []
    for i in range(4):
        run.run_for(c.rng.randint(50, 200))
        active = c.controllers.active
        c.kill_controller(active)
        acked_before = len(run.history.acked)
        run.run_until(lambda: c.controllers.active is not None, 2_000, "controller_elected")
        # Produces to the existing leader keep succeeding during the controller failover.
        if len(run.history.acked) == acked_before and not p.idle:
            run.run_until(lambda: len(run.history.acked) > acked_before, 2_000, "produce_during_failover")
        c.create_topic(f"n2-{i}", 2, 3)
        created.append(f"n2-{i}")
        c.restart_controller(active)
    out = run.outcome("N2")
    missing = [t for t in created if c.image.topics.get(t) is None
               or len(c.image.topics.get(t).partitions) != 2]
    out.notes["missing_topics"] = missing
    return out


def n3_controllers_lost(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N3: with 2 of 3 controllers the cluster works; with 1 of 3 metadata is frozen but
    existing partitions are served; after restart everything resumes."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    names = c.controllers.names
    c.kill_controller(names[0])
    run.run_until(lambda: c.controllers.active is not None, 2_000, "controller_elected")
    c.create_topic("n3-two-of-three", 1, 3)
    run.produce_acked(p, 30)
    survivor = c.controllers.active
    other = next(n for n in names[1:] if n != survivor)
    c.kill_controller(other)
    run.run_for(500)
    frozen = c.controllers.active is None
    # Metadata is frozen: a create gets no answer (NOT_CONTROLLER / timeout to the caller).
    refused = c.create_topic("n3-frozen", 1, 3, timeout_ms=500) is None
    acked_frozen = run.produce_acked(p, 30)          # existing partitions keep serving
    c.restart_controller(other)
    c.restart_controller(names[0])
    run.run_until(lambda: c.controllers.active is not None, 2_000, "controller_elected")
    c.create_topic("n3-after", 1, 3)
    run.produce_acked(p, 30)
    return run.outcome("N3", frozen=frozen, create_refused=refused, acked_while_frozen=acked_frozen)


def n4_restarted_follower_asks_leader(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N4: RF=2, min.insync=1; the follower has the newest records but not the new HW; it
    restarts; the leader dies before the follower re-fetches. With leader epochs the
    follower asks the leader instead of truncating to its stale HW."""
    run = SimRun(seed, core_factory, replication_factor=2, topic_configs={"min.insync.replicas": "1"})
    c = run.cluster
    p = run.producer()
    run.produce_acked(p, 20)
    leader = run.await_leader()
    follower = run.followers()[0]
    # The follower's next fetch (which would carry the new HW) is lost: cut leader -> follower.
    run.produce_acked(p, 1)
    c.network.cut(c.brokers[leader].name, c.brokers[follower].name)
    run.produce_acked(p, 5)
    c.kill(follower)
    c.restart(follower)
    c.kill(leader)
    c.network.heal()
    run.run_for(1_000)
    c.restart(leader)
    return run.outcome("N4")


def n5_all_replicas_power_cut(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N5: every replica loses power with unflushed writes; they restart in the other
    order. Replicas never diverge (acknowledged records may be lost: nothing was fsynced)."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    p.produce(200)
    run.run_for(c.rng.randint(300, 800))
    order = list(c.brokers)
    c.rng.shuffle(order)
    for b in order:
        c.kill(b, power_cut=True)
        run.run_for(c.rng.randint(0, 20))
    for b in reversed(order):
        c.restart(b)
        run.run_for(c.rng.randint(0, 50))
    return run.outcome("N5")


def n6_produce_answers_dropped(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N6: an idempotent producer whose answers are often lost after the append."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer(idempotent=True)
    for b in c.brokers.values():
        c.network.link_drop_rate[(b.name, p.name)] = 0.3
    run.produce_acked(p, 60, timeout_ms=40_000)
    return run.outcome("N6", retried=c.network.dropped)


def n8_stale_replica_returns_first(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N8: unclean election off; all replicas down; a stale follower (out of the ISR)
    returns first: the partition stays offline until an ISR member returns."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    run.produce_acked(p, 20)
    stale = run.followers()[0]
    c.kill(stale)
    run.run_until(lambda: stale not in run.isr(), 3_000, "isr_shrunk")
    run.produce_acked(p, 30)
    for b in c.brokers:
        c.kill(b)
    c.restart(stale)
    run.run_for(2_000)
    offline = run.leader() is None and c.registration(TP).leader < 0
    for b in c.brokers:
        c.restart(b)
    run.await_leader()
    return run.outcome("N8", offline_while_stale_alone=offline)


def n9_follower_paused_past_lag(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N9: SIGSTOP a follower longer than replica.lag.time.max.ms, then SIGCONT."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    run.produce_acked(p, 20)
    f = run.followers()[c.rng.randrange(2)]
    c.pause(c.brokers[f].name)
    run.run_until(lambda: f not in run.isr(), 3_000, "isr_shrunk")
    shrunk = True
    run.produce_acked(p, 50)                       # writes continue with the remaining ISR
    c.resume(c.brokers[f].name)
    run.run_until(lambda: f in run.isr(), 3_000, "isr_expanded")
    return run.outcome("N9", left_isr=shrunk, rejoined=True)


def n10_isolated_leader_fenced(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N10: cut the leader off from the controllers and the followers, not the producer."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer()
    run.produce_acked(p, 20)
    old = run.await_leader()
    c.network.isolate(c.brokers[old].name, c.node_names(), keep=[p.name])
    p.produce(100)
    new = run.await_leader(other_than=old)
    epoch_raised = c.registration(TP).leader_epoch > 0
    run.run_for(1_000)
    return run.outcome("N10", new_leader=new, epoch_raised=epoch_raised)


def n11_min_isr_raised_live(seed: int, core_factory=ReplicaManager) -> Outcome:
    """N11: topic with min.insync.replicas=1; raise it to 3 while a follower is paused out
    of the ISR: nothing after the change is acknowledged by fewer than 3 replicas."""
    run = SimRun(seed, core_factory, topic_configs={"min.insync.replicas": "1"})
    c = run.cluster
    p = run.producer(delivery_timeout_ms=1_000)
    run.produce_acked(p, 20)
    f = run.followers()[0]
    c.pause(c.brokers[f].name)
    run.run_until(lambda: f not in run.isr(), 3_000, "isr_shrunk")
    assert c.alter_topic_config(TOPIC, "min.insync.replicas", "3") == 0
    # Every leader must have applied the new config before we judge acks.
    run.run_until(lambda: all(b.core.min_insync_replicas(TOPIC) == 3 for b in c.live_brokers()
                              if c.loop.is_running(b.name)), 2_000, "config_applied")
    changed_at = c.loop.now_ms
    before = set(run.history.acked)
    run.produce_acked(p, 8, timeout_ms=30_000)
    acked_short = [v for v in set(run.history.acked) - before]
    refused = run.history.errors.get(ErrorCode.NOT_ENOUGH_REPLICAS, 0)
    c.resume(c.brokers[f].name)
    return run.outcome("N11", acked_with_isr_below_3=len(acked_short), not_enough_replicas=refused,
                       changed_at=changed_at)


# ---------------------------------------------------------------- the hazards

def l1_acks0_leader_killed(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L1: acks=0; kill the leader while producing: sent records are lost, unseen."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer(acks=0, idempotent=False)
    p.produce(200)
    run.run_for(c.rng.randint(200, 400))
    old = run.await_leader()
    c.kill(old)
    run.run_for(1_000)
    c.restart(old)
    return run.outcome("L1")


def l2_acks1_followers_paused(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L2: acks=1; pause the followers, produce N acked by the leader alone, kill the leader,
    resume the followers: one of them is elected and the N are lost."""
    run = SimRun(seed, core_factory, config=SimConfig(replica_lag_time_max_ms=3_000))
    c = run.cluster
    p = run.producer(acks=1, idempotent=False)
    run.produce_acked(p, 20)
    run.run_for(300)                     # the followers have the HW of all 20
    leader = run.await_leader()
    followers = run.followers()
    for f in followers:
        c.pause(c.brokers[f].name)
    # Fetches already parked at the leader are answered into the paused followers'
    # buffers; only what is produced after that is the leader's alone.
    run.run_for(2 * c.config.fetch_wait_max_ms)
    n = run.produce_acked(p, 10)
    c.kill(leader)
    for f in followers:
        c.resume(c.brokers[f].name)
    run.await_leader(other_than=leader)
    run.run_for(200)
    c.restart(leader)
    out = run.outcome("L2", acked_by_leader_alone=n)
    return out


def l3_unclean_after_isr_shrank(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L3: acks=all, min.insync=1, unclean election on: pause the followers until the ISR is
    the leader alone, keep producing (acknowledged), kill the leader, resume a follower: the
    stale follower is elected unclean and those records are lost (Jepsen 2013)."""
    run = SimRun(seed, core_factory, topic_configs={"min.insync.replicas": "1",
                                                    "unclean.leader.election.enable": "true"})
    c = run.cluster
    p = run.producer(idempotent=False)
    run.produce_acked(p, 20)
    leader = run.await_leader()
    followers = run.followers()
    for f in followers:
        c.pause(c.brokers[f].name)
    run.run_until(lambda: run.isr() == (leader,), 3_000, "isr_is_leader_alone")
    n = run.produce_acked(p, 15)
    c.kill(leader)
    c.resume(c.brokers[followers[0]].name)
    run.await_leader(other_than=leader)
    run.run_for(300)
    c.resume(c.brokers[followers[1]].name)
    c.restart(leader)
    return run.outcome("L3", acked_with_leader_alone=n)


def l4_unclean_stale_returns_first(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L4: unclean election on; all replicas down; the stale follower returns first and
    is elected; records written after it left the ISR are lost; the old leader truncates."""
    run = SimRun(seed, core_factory, topic_configs={"unclean.leader.election.enable": "true"})
    c = run.cluster
    p = run.producer(idempotent=False)
    run.produce_acked(p, 20)
    stale = run.followers()[0]
    c.kill(stale)
    run.run_until(lambda: stale not in run.isr(), 3_000, "isr_shrunk")
    n = run.produce_acked(p, 30)
    for b in c.brokers:
        c.kill(b)
    c.restart(stale)
    run.await_leader()
    run.run_for(300)
    for b in c.brokers:
        c.restart(b)
    return run.outcome("L4", acked_after_stale_left=n)


def l6_two_of_three_killed(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L6: acks=all, min.insync=2; kill 2 of 3 brokers: writes are refused with
    NOT_ENOUGH_REPLICAS, reads up to the HW still work; after restart writes resume."""
    run = SimRun(seed, core_factory)
    c = run.cluster
    p = run.producer(delivery_timeout_ms=1_500)
    run.produce_acked(p, 20)
    leader = run.await_leader()
    for f in run.followers():
        c.kill(f)
    run.run_until(lambda: run.isr() == (leader,), 3_000, "isr_is_leader_alone")
    acked = run.produce_acked(p, 4, timeout_ms=20_000)
    refused = run.history.errors.get(ErrorCode.NOT_ENOUGH_REPLICAS, 0)
    readable = read_partition(c, TP)
    for b in c.brokers:
        c.restart(b)
    resumed = run.produce_acked(p, 10)
    return run.outcome("L6", acked_while_two_down=acked, not_enough_replicas=refused,
                       readable=len(readable or []), resumed=resumed)


SCENARIOS: dict[str, Callable[..., Outcome]] = {
    "N1": n1_leader_killed_repeatedly, "N2": n2_controller_killed_repeatedly,
    "N3": n3_controllers_lost, "N4": n4_restarted_follower_asks_leader,
    "N5": n5_all_replicas_power_cut, "N6": n6_produce_answers_dropped,
    "N8": n8_stale_replica_returns_first, "N9": n9_follower_paused_past_lag,
    "N10": n10_isolated_leader_fenced, "N11": n11_min_isr_raised_live,
    "L1": l1_acks0_leader_killed, "L2": l2_acks1_followers_paused,
    "L3": l3_unclean_after_isr_shrank, "L4": l4_unclean_stale_returns_first,
    "L6": l6_two_of_three_killed,
}


def _expect_no_loss(o: Outcome) -> list[str]:
    f = o.figures
    bad = []
    if f.lost:
        bad.append(f"lost={f.lost} {list(f.lost_values[:5])}")
    if o.divergent:
        bad.append(f"divergent={o.divergent}")
    if f.phantom:
        bad.append(f"phantom={f.phantom}")
    return bad


def _expect(o: Outcome) -> list[str]:
    f, n = o.figures, o.notes
    sid = o.scenario
    if sid == "N5":                       # divergent=0; acked loss allowed: nothing was fsynced
        bad = [f"divergent={o.divergent}"] if o.divergent else []
        if f.lost != f.lost_exempt:
            bad.append(f"lost={f.lost} of which only {f.lost_exempt} before the power cuts")
        return bad
    if sid.startswith("N"):
        bad = _expect_no_loss(o)
        if sid == "N2" and n["missing_topics"]:
            bad.append(f"created topics missing: {n['missing_topics']}")
        if sid == "N3" and not (n["frozen"] and n["create_refused"] and n["acked_while_frozen"] > 0):
            bad.append(f"with 1 of 3 controllers: {n}")
        if sid == "N6" and (f.duplicated or f.reordered):
            bad.append(f"duplicated={f.duplicated} reordered={f.reordered}")
        if sid == "N8" and not n["offline_while_stale_alone"]:
            bad.append("the stale replica was elected with unclean election off")
        if sid == "N11" and n["acked_with_isr_below_3"]:
            bad.append(f"{n['acked_with_isr_below_3']} records acked with fewer than 3 replicas")
        return bad
    if sid == "L1":
        return [] if f.lost_sent > 0 and not o.divergent else [f"no acks=0 loss shown ({f})"]
    if sid == "L2":
        want = n["acked_by_leader_alone"]
        return ([] if want > 0 and f.lost_acks1 == want and not o.divergent
                else [f"expected lost={want} (acks=1), got {f.lost_acks1}; divergent={o.divergent}"])
    if sid in ("L3", "L4"):
        return ([] if f.lost > 0 and not o.divergent
                else [f"the unclean election lost nothing (lost={f.lost}) or divergent={o.divergent}"])
    if sid == "L6":
        bad = _expect_no_loss(o)
        if n["acked_while_two_down"] or not n["not_enough_replicas"] or not n["resumed"]:
            bad.append(f"while 2 of 3 were down: {n}")
        if not n["readable"]:
            bad.append("reads below the HW failed while 2 of 3 were down")
        return bad
    raise AssertionError(sid)


EXPECT = {sid: _expect for sid in SCENARIOS}


def check(o: Outcome) -> Outcome:
    bad = _expect(o)
    if bad:
        raise InvariantViolation(o.seed, f"scenario_{o.scenario}", "; ".join(bad), o.trace[-30:])
    return o


def run_scenario(sid: str, seed: int, core_factory=ReplicaManager) -> Outcome:
    return check(SCENARIOS[sid](seed, core_factory))



def l4_empty_stale_replica_elected(seed: int, core_factory=ReplicaManager) -> Outcome:
    """L4, the edge case: the stale follower that returns first has an *empty* log (it was
    down since the topic was created). It is elected unclean; the old leader and the other
    follower must truncate everything and follow it (Kafka truncates a follower ahead of
    its leader to the leader's log end offset)."""
    run = SimRun(seed, core_factory, topic_configs={"unclean.leader.election.enable": "true"})
    c = run.cluster
    stale = run.followers()[0]
    c.kill(stale)
    run.run_until(lambda: stale not in run.isr(), 3_000, "isr_shrunk")
    p = run.producer(idempotent=False)
    n = run.produce_acked(p, 30)
    for b in c.brokers:
        c.kill(b)
    c.restart(stale)
    run.await_leader()
    run.run_for(300)
    for b in c.brokers:
        c.restart(b)
    return run.outcome("L4", acked_after_stale_left=n)


SCENARIOS["L4-empty"] = l4_empty_stale_replica_elected
EXPECT["L4-empty"] = _expect
