"""The simulator's clock, event queue and network: every choice comes from one seeded Random.

Theory of operation
-------------------
``SimLoop`` is a discrete-event scheduler over a simulated ``now_ms``: ``at(time, node,
action)`` queues a callable for a node; ``run_until(t)`` pops events in (time, sequence)
order. There is no wall clock: a run is a pure function of its seed.

Nodes are names ("b1", "controller", "p0"). A node can be:

- **down** (crashed): its queued events are dropped. Each node has an *incarnation*,
  bumped on crash, and every event carries the incarnation it was queued for, so a timer
  or answer meant for a previous process never reaches the restarted one;
- **paused** (SIGSTOP): its events wait, in order, and run when it is resumed, like a
  stopped process whose sockets keep buffering. Time goes on for everyone else.

``SimNetwork.send(src, dst, deliver)`` models one message of a TCP-like connection under
FoundationDB-style faults: a seeded per-message delay (``delay_ms_min..max``), loss with
``drop_rate``, a second copy with ``duplicate_rate`` (a resent request the first of which
also arrived), and cuts: ``cut(a, b)`` drops everything from a to b (one-way),
``cut_both`` both ways, ``isolate(node, keep=...)`` all links but some. A message sent
across a cut, or to a node that is down when it arrives, is lost: the sender learns of it
only by its own timeout, as on a real network. ``heal()`` removes every cut and resets the
rates (the liveness phase of a VOPR run).
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable

__all__ = ["NetworkFaults", "SimLoop", "SimNetwork"]


@dataclass(slots=True)
class _Node:
    name: str
    incarnation: int = 0
    up: bool = True
    paused: bool = False
    deferred: list[tuple[int, Callable[[], None]]] = field(default_factory=list)


class SimLoop:
    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._queue: list[tuple[int, int, str, int, Callable[[], None]]] = []
        self._seq = 0
        self.nodes: dict[str, _Node] = {}
        self.events_run = 0
        # Called after each event with the node it ran on (the invariant checks hook in).
        self.after_event: Callable[[str], None] | None = None

    def node(self, name: str) -> _Node:
        n = self.nodes.get(name)
        if n is None:
            n = self.nodes[name] = _Node(name)
        return n

    def at(self, time_ms: int, node: str, action: Callable[[], None]) -> None:
        assert time_ms >= self.now_ms, (time_ms, self.now_ms)
        n = self.node(node)
        self._seq += 1
        heapq.heappush(self._queue, (time_ms, self._seq, node, n.incarnation, action))

    def after(self, delay_ms: int, node: str, action: Callable[[], None]) -> None:
        self.at(self.now_ms + max(0, delay_ms), node, action)

    def crash(self, node: str) -> None:
        n = self.node(node)
        n.up, n.paused = False, False
        n.incarnation += 1
        n.deferred.clear()

    def start(self, node: str) -> None:
        n = self.node(node)
        assert not n.up, node
        n.up = True

    def pause(self, node: str) -> None:
        self.node(node).paused = True

    def resume(self, node: str) -> None:
        n = self.node(node)
        if not n.paused:
            return
        n.paused = False
        deferred, n.deferred = n.deferred, []
        for _, action in deferred:             # in their original order
            self.at(self.now_ms, node, action)

    def is_up(self, node: str) -> bool:
        n = self.node(node)
        return n.up

    def is_running(self, node: str) -> bool:
        n = self.node(node)
        return n.up and not n.paused

    def run_until(self, end_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events due up to ``end_ms``; True if ``stop()`` became true first."""
        queue = self._queue
        while queue and queue[0][0] <= end_ms:
            time_ms, _, name, incarnation, action = heapq.heappop(queue)
            n = self.nodes[name]
            if incarnation != n.incarnation or not n.up:
                continue                        # meant for a process that crashed
            self.now_ms = time_ms
            if n.paused:
                n.deferred.append((time_ms, action))
                continue
            action()
            self.events_run += 1
            if self.after_event is not None:
                self.after_event(name)
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, end_ms)
        return stop is not None and stop()


@dataclass(slots=True)
class NetworkFaults:
    delay_ms_min: int = 1
    delay_ms_max: int = 10
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0


class SimNetwork:
    def __init__(self, loop: SimLoop, rng: random.Random, faults: NetworkFaults | None = None) -> None:
        self.loop = loop
        self.rng = rng
        self.faults = faults or NetworkFaults()
        self._cut: set[tuple[str, str]] = set()
        # Per-link override of the drop rate (a lossy path to one node, say).
        self.link_drop_rate: dict[tuple[str, str], float] = {}
        self.sent = 0
        self.dropped = 0

    # ---------------------------------------------------------- faults

    def cut(self, src: str, dst: str) -> None:
        self._cut.add((src, dst))

    def cut_both(self, a: str, b: str) -> None:
        self._cut.add((a, b))
        self._cut.add((b, a))

    def isolate(self, node: str, others: Iterable[str], keep: Iterable[str] = ()) -> None:
        kept = set(keep)
        for other in others:
            if other != node and other not in kept:
                self.cut_both(node, other)

    def uncut(self, src: str, dst: str) -> None:
        self._cut.discard((src, dst))

    def heal(self) -> None:
        self._cut.clear()
        self.link_drop_rate.clear()
        self.faults = NetworkFaults(self.faults.delay_ms_min, self.faults.delay_ms_max)

    def connected(self, src: str, dst: str) -> bool:
        return (src, dst) not in self._cut

    # ---------------------------------------------------------- messages

    def send(self, src: str, dst: str, deliver: Callable[[], None]) -> None:
        """``deliver`` runs on ``dst`` after the link's delay, unless the message is lost."""
        self.sent += 1
        copies = 2 if self.rng.random() < self.faults.duplicate_rate else 1
        drop_rate = self.link_drop_rate.get((src, dst), self.faults.drop_rate)
        for _ in range(copies):
            if (src, dst) in self._cut or self.rng.random() < drop_rate:
                self.dropped += 1
                continue
            delay = self.rng.randint(self.faults.delay_ms_min, self.faults.delay_ms_max)
            # Checked on arrival too: a cut made while the message was on its way loses it.
            self.loop.after(delay, dst, lambda: self._arrive(src, dst, deliver))

    def _arrive(self, src: str, dst: str, deliver: Callable[[], None]) -> None:
        if (src, dst) in self._cut:
            self.dropped += 1
            return
        deliver()
