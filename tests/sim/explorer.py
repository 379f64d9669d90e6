"""The random explorer (TigerBeetle's VOPR): a random fault schedule per seed, then liveness.

Theory of operation
-------------------
``explore(seed)`` draws everything from the run's one ``random.Random``: the network's
delay, loss and duplication rates, the workload (one to three producers, acks=all or
acks=1, idempotent or not) and a schedule of ``faults_max`` faults spaced
``gap_ms_min..max`` apart, each undone after a random duration:

=================  ==============================================================
kill               SIGKILL a broker (page cache kept); restarted later
power_cut          (``FAULTS_WITH_POWER_CUTS`` only) a broker loses its unflushed
                   bytes; at most one per run
pause              SIGSTOP a broker or controller; SIGCONT later
cut                a one-way or two-way cut between two nodes; healed later
isolate            cut a node off from everyone (clients kept or not); healed later
lossy_controller   heavy loss on the links from the controllers to one broker
kill_controller    kill a controller; restarted later
cut_leader_follower     cut a partition's leader from one follower, both ways: the
                        ISR shrinks, and expands again when healed
mute_controllers_to_leader  every answer (AlterPartition, heartbeat, metadata) from the
                        controllers to a partition's leader is lost for a while
kill_leader        SIGKILL a partition's current leader; restarted later
reconnect          a live broker's heartbeat connection closes (a benign reconnect):
                   the controller may fence it before its next heartbeat (issue 17)
=================  ==============================================================

Swarm testing (as TigerBeetle's VOPR and FoundationDB do): each seed enables a random
subset of the fault kinds, so that rare combinations (the ones aimed at a partition's
leader, say) come up often enough in some seeds rather than diluted in all.

The continuous invariants run throughout; after the schedule, ``SimRun.settle`` heals
everything and requires convergence, and the final history must show no acknowledged
(acks=all, clean) record lost, no phantom and no divergent replica. ``explore`` returns a
``Verdict``; ``search(seeds)`` runs many and stops at the first failure.
"""
from __future__ import annotations

import functools
import logging
import multiprocessing
import random
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable

from broker.replica_manager import ReplicaManager
from tests.sim.invariants import InvariantViolation
from tests.sim.network import NetworkFaults
from tests.sim.scenarios import SimRun

__all__ = ["Verdict", "explore", "process_pool", "search"]

FAULTS = ("kill", "pause", "cut", "isolate", "lossy_controller", "kill_controller",
          "cut_leader_follower", "mute_controllers_to_leader", "kill_leader", "reconnect")
# With power cuts a run is judged on divergence and liveness only for records acknowledged
# before the cut (see SimCluster.durability_exempt_before_ms); --power-cuts turns them on.
FAULTS_WITH_POWER_CUTS = FAULTS + ("power_cut",)


@dataclass(frozen=True, slots=True)
class Verdict:
    seed: int
    ok: bool
    violation: InvariantViolation | None
    acked: int
    sim_ms: int
    events: int

    def __str__(self) -> str:
        if self.ok:
            return f"SIM_SEED={self.seed} ok: {self.acked} acked, {self.sim_ms} ms simulated"
        return str(self.violation)


def explore(seed: int, core_factory: Callable[..., ReplicaManager] = ReplicaManager, *,
            faults_max: int = 8, gap_ms_min: int = 50, gap_ms_max: int = 400,
            fault_kinds: tuple[str, ...] = FAULTS, records_max: int = 150) -> Verdict:
    """One seed: a random cluster, workload and fault schedule; ``records_max`` bounds
    each producer's records (CI uses small runs, the long search the default)."""
    run: SimRun | None = None
    try:
        # The network's rates come from the seed too (a Random of its own, so that the
        # cluster's stream stays one sequence per seed).
        knobs = random.Random(seed ^ 0x5EED)
        faults = NetworkFaults(delay_ms_min=1, delay_ms_max=knobs.choice((5, 10, 30)),
                               drop_rate=knobs.choice((0.0, 0.0, 0.01, 0.05)),
                               duplicate_rate=knobs.choice((0.0, 0.01, 0.05)))
        partitions = knobs.choice((1, 1, 2))
        run = SimRun(seed, core_factory, faults=faults, partitions=partitions)
        c = run.cluster
        rng = c.rng
        for i in range(rng.randint(1, 3)):
            tp = run.partitions[i % partitions]
            acks = rng.choice((-1, -1, 1))
            p = run.producer(acks=acks, idempotent=rng.random() < 0.7, tp=tp)
            p.produce(rng.randint(records_max // 3, records_max))
        brokers = list(c.brokers)
        power_cut_used = False
        enabled = rng.sample(fault_kinds, rng.randint(1, len(fault_kinds)))
        for _ in range(rng.randint(2, faults_max)):
            c.run_for(rng.randint(gap_ms_min, gap_ms_max))
            kind = rng.choice(enabled)
            undo_ms = rng.randint(100, 1_500)
            b = rng.choice(brokers)
            name = c.brokers[b].name
            leader = c.leader_of(rng.choice(run.partitions))
            if kind in ("cut_leader_follower", "mute_controllers_to_leader", "kill_leader"):
                if leader is None:
                    continue
                b, name = leader, c.brokers[leader].name
            if kind == "kill_leader":
                kind = "kill"
            if kind == "cut_leader_follower":
                f = rng.choice([x for x in brokers if x != leader])
                fname = c.brokers[f].name
                c.note(f"cut {name} <-> {fname}")
                c.network.cut_both(name, fname)

                def rejoin_pair(a=name, z=fname) -> None:
                    c.network.uncut(a, z)
                    c.network.uncut(z, a)
                c.loop.after(undo_ms, "sim", rejoin_pair)
                continue
            if kind == "mute_controllers_to_leader":
                c.note(f"controllers -> {name} cut")
                for ctl in c.controllers.names:
                    c.network.cut(ctl, name)

                def unmute(n=name) -> None:
                    for ctl in c.controllers.names:
                        c.network.uncut(ctl, n)
                c.loop.after(undo_ms, "sim", unmute)
                continue
            if kind == "power_cut" and power_cut_used:
                kind = "kill"
            if kind in ("kill", "power_cut"):
                power_cut_used |= kind == "power_cut"
                c.kill(b, power_cut=kind == "power_cut")
                c.loop.after(undo_ms, "sim", lambda b=b: c.restart(b))
            elif kind == "reconnect":
                # A live broker's heartbeat connection closes (a benign reconnect): the
                # controller may fence it early (fast crash detection); nothing acknowledged
                # may be lost for it.
                c.connection_closed(b, c.brokers[b].broker_epoch)
            elif kind == "pause":
                target = name if rng.random() < 0.8 else rng.choice(c.controllers.names)
                c.pause(target)
                c.loop.after(undo_ms, "sim", lambda t=target: c.resume(t))
            elif kind == "cut":
                nodes = c.node_names()
                a, z = rng.sample(nodes, 2)
                two_way = rng.random() < 0.5
                c.note(f"cut {a} -> {z}{' both ways' if two_way else ''}")
                (c.network.cut_both if two_way else c.network.cut)(a, z)

                def uncut(a=a, z=z) -> None:
                    c.network.uncut(a, z)
                    c.network.uncut(z, a)
                c.loop.after(undo_ms, "sim", uncut)
            elif kind == "isolate":
                keep = [p.name for p in run.producers] if rng.random() < 0.5 else []
                c.note(f"isolate {name} (clients kept: {bool(keep)})")
                others = c.node_names()
                c.network.isolate(name, others, keep)

                def rejoin(n=name, others=others) -> None:
                    for o in others:
                        c.network.uncut(n, o)
                        c.network.uncut(o, n)
                c.loop.after(undo_ms, "sim", rejoin)
            elif kind == "lossy_controller":
                rate = rng.choice((0.5, 0.9, 1.0))
                c.note(f"controllers -> {name} lose {rate:.0%}")
                for ctl in c.controllers.names:
                    c.network.link_drop_rate[(ctl, name)] = rate

                def clear(n=name) -> None:
                    for ctl in c.controllers.names:
                        c.network.link_drop_rate.pop((ctl, n), None)
                c.loop.after(undo_ms, "sim", clear)
            elif kind == "kill_controller":
                target = rng.choice(c.controllers.names)
                c.kill_controller(target)
                c.loop.after(undo_ms, "sim", lambda t=target: c.restart_controller(t))
        c.run_for(rng.randint(200, 1_000))
        out = run.outcome("explore")
        f = out.figures
        bad = []
        if f.lost != f.lost_exempt:
            bad.append(f"lost={f.lost - f.lost_exempt} acknowledged records {list(f.lost_values[:5])}")
        if out.divergent:
            bad.append(f"divergent={out.divergent}")
        if f.phantom:
            bad.append(f"phantom={f.phantom}")
        if bad:
            run.fail("no_acked_record_lost" if f.lost != f.lost_exempt else "history", "; ".join(bad))
        return Verdict(seed, True, None, f.acked, c.loop.now_ms, c.loop.events_run)
    except InvariantViolation as v:
        c = run.cluster if run is not None else None
        return Verdict(seed, False, v, len(run.history.acked) if run else 0,
                       c.loop.now_ms if c else 0, c.loop.events_run if c else 0)


def search(seeds: Iterable[int], core_factory: Callable[..., ReplicaManager] = ReplicaManager,
           progress: Callable[[int, int, float], None] | None = None,
           progress_every: int = 100, fault_kinds: tuple[str, ...] = FAULTS,
           executor: Executor | None = None) -> tuple[Verdict | None, int, float]:
    """Explore seeds in order; (first failing verdict or None, seeds run, seconds).

    With an ``executor`` (a process pool) the seeds run in parallel; each seed is its own
    deterministic run, so the verdicts, read back in seed order, are the serial ones."""
    start = time.perf_counter()
    one = functools.partial(explore, core_factory=core_factory, fault_kinds=fault_kinds)
    verdicts = map(one, seeds) if executor is None else executor.map(one, seeds, chunksize=5)
    n = 0
    for v in verdicts:
        n += 1
        if not v.ok:
            return v, n, time.perf_counter() - start
        if progress is not None and n % progress_every == 0:
            progress(n, v.seed, time.perf_counter() - start)
    return None, n, time.perf_counter() - start


def _quiet_worker() -> None:
    logging.disable(logging.CRITICAL)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool for ``search``'s seeds, its workers' logging off as the tests' is. Spawned,
    not forked: the calling process may hold threads by then."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_quiet_worker)
