"""What every scenario shares: its context (clusters, history, checks), and the closing
phase that heals, waits for the replicas, reads the log back and compares replicas.

A scenario is a function ``run(ctx)``: it starts its cluster with ``ctx.cluster(...)``,
drives producers that log into ``ctx.history``, injects faults with ``ctx.inject(...)``
(faults are data, ``chaos.faults``), records scenario-specific conditions with
``ctx.check(name, ok, detail)``, and ends with ``ctx.read_back(...)``. The runner turns
the context into figures (``chaos.checker.check``) and a verdict (``judge``).
"""
from __future__ import annotations

import os
import random
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from chaos.checker import Check, Divergence, Expect, compare_replicas
from chaos.cluster import ChaosCluster, ChaosTimeout, wait_until
from chaos.faults import DropResponses, Fault, FlipByte, TornTail, inject
from chaos.workload import History, log_end_on_disk, read_partition, replica_batches

__all__ = ["CI", "FULL", "Context", "Profile", "Scenario"]


@dataclass(frozen=True, slots=True)
class Profile:
    """Sizes: ``full`` for the standalone suite, ``ci`` for the pytest subset."""
    name: str
    repeats: int          # how often a scenario repeats its fault (N1: 5 kills)
    records: int          # records in a synchronous produce phase
    group_records: int    # records consumed by groups (N7, L5)


FULL = Profile("full", repeats=5, records=200, group_records=600)
CI = Profile("ci", repeats=2, records=50, group_records=200)


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    title: str
    expect: Expect
    run: Callable[["Context"], None]


@dataclass
class Context:
    scenario_id: str
    workdir: str
    seed: int
    profile: Profile
    say: Callable[[str], None]
    rng: random.Random = field(init=False)
    history: History = field(default_factory=History)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: dict[tuple[str, int], list[tuple[int, bytes | None]]] = field(default_factory=dict)
    divergences: list[Divergence] = field(default_factory=list)
    corrupt: int = 0
    window: tuple[float, float] | None = None
    # An L scenario that knows how many records its hazard window held expects exactly
    # that many lost (set at run time).
    expect_lost: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)      # figures a scenario adds
    # Every cluster a ``ketch up --secure`` one (SASL_SSL everywhere; python -m chaos --secure).
    secure: bool = False
    _clusters: list[ChaosCluster] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # ------------------------------------------------------------ resources

    def cluster(self, name: str = "cluster", **kwargs: Any) -> ChaosCluster:
        kwargs.setdefault("secure", self.secure)
        c = ChaosCluster(os.path.join(self.workdir, name), say=self.event, **kwargs)
        self._clusters.append(c)
        self.say(("starting a secured cluster" if c.secure else "starting a cluster")
                 + (" with fault proxies" if kwargs.get("proxied_links")
                    or kwargs.get("client_proxies") else ""))
        c.start()
        return c

    def closing(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` at the end, whatever happens (producers, consumer processes)."""
        self._closers.append(fn)

    def close(self, keep: bool = False) -> None:
        for fn in reversed(self._closers):
            try:
                fn()
            except Exception as e:   # cleanup goes on; the verdict already has the story
                self.say(f"cleanup: {type(e).__name__}: {e}")
        for c in self._clusters:
            c.stop()
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------ story

    def event(self, text: str) -> None:
        self.history.event(text)
        self.say(text)

    def inject(self, cluster: ChaosCluster, fault: Fault) -> str:
        done = inject(cluster, fault, self.rng)
        if isinstance(fault, (TornTail, FlipByte, DropResponses)):
            self.event(done)     # the others are told by the cluster as they happen
        return done

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        self.say(f"check {'ok' if ok else 'FAILED'}: {name}" + (f" ({detail})" if detail else ""))
        return bool(ok)

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.say(text)

    # ------------------------------------------------------------ the closing phase

    def read_back(self, cluster: ChaosCluster, topic: str, partitions: list[int],
                  full_isr: bool = True, timeout_s: float = 90.0) -> None:
        """Heal, wait until every replica is back in the ISR (``full_isr``) and holds the
        HW, then read every partition from the leader and every replica from disk."""
        cluster.heal()
        for node_id in list(cluster.paused):
            cluster.resume(node_id)
        for p in partitions:
            state = None
            if full_isr:
                try:
                    state = cluster.wait_partition(
                        topic, p, lambda s: s.leader >= 0 and set(s.isr) == set(s.replicas),
                        timeout_s, "every replica back in the ISR", everywhere=True)
                except ChaosTimeout as e:
                    self.check(f"{topic}-{p}: ISR complete after healing", False, str(e)[:300])
            if state is None:
                state = cluster.wait_partition(topic, p, lambda s: s.leader >= 0, timeout_s, "a leader")
            leader = state.leader
            # Quiescent: the HW reaches the leader's log end once followers fetched it.
            try:
                wait_until(lambda: cluster.high_watermark(topic, p, leader) >=
                           log_end_on_disk(cluster, leader, topic, p), 30,
                           f"{topic}-{p}: HW at the leader's log end")
            except ChaosTimeout as e:
                self.note(f"{topic}-{p}: {e}")
            read = read_partition(cluster, topic, p, timeout_s)
            self.logs[(topic, p)] = [(r.offset, r.value) for r in read.records]
            self.corrupt += read.corrupt_batches
            hw = read.high_watermark
            replicas = [r for r in state.replicas if cluster.is_running(r)]
            try:
                wait_until(lambda: all(log_end_on_disk(cluster, r, topic, p) >= hw for r in replicas),
                           30, f"{topic}-{p}: every replica holding the HW {hw}")
            except ChaosTimeout:
                pass   # reported as lagging by the comparison
            by_replica = {r: replica_batches(cluster.node(r).data_dir, topic, p) for r in replicas}
            self.divergences.append(compare_replicas(by_replica, hw, reference=read.leader))
            self.say(f"read {topic}-{p}: {len(read.records)} records below HW {hw} from leader "
                     f"{read.leader}; compared replicas {replicas}")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 2)
