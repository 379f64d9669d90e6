"""The metadata quorum of a simulated cluster: real ``QuorumController``s, one active.

Theory of operation
-------------------
Each controller ``c1..cN`` is a real ``QuorumController``. The quorum is the real pure
``ReplicatedLogState`` (the state pysyncobj replicates): a commit needs a majority of
controllers up, the active controller is the Raft leader, and after it dies or pauses a
running controller takes over once ``election_timeout_ms`` has passed
(``LeaderChangeCommand``, then ``activate(now_ms)``, which restarts every broker session
as Kafka does). Commits are synchronous with the decision (``handle``), so a write's
outcome is never unknown here (a limit of the sim: Raft's in-flight appends are not
modelled); answers still travel the network and may be lost. Every controller replays
every committed batch, so a restarted one is caught up. Brokers' metadata fetches with
nothing new are parked in ``waiting_fetches`` until the next commit (long polling).
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable

from metadata_log import decode_record, encode_record
from metadata_log.image import MetadataImage
from quorum.controller import ControllerConfig, QuorumController
from quorum.replicated_log import (
    REQUEST_ID_BYTES, AppendCommand, Appended, LeaderChangeCommand, ReplicatedLogState,
)
from tests.sim.network import SimLoop

if TYPE_CHECKING:
    from tests.sim.cluster import SimCluster

__all__ = ["SimControllers"]


class SimControllers:
    def __init__(self, cluster: "SimCluster", count: int, config: ControllerConfig,
                 rng: random.Random) -> None:
        self.cluster = cluster
        self.names = [f"c{i}" for i in range(1, count + 1)]
        self.config = config
        self.rng = rng
        self.controllers = {n: QuorumController(config, random.Random(rng.getrandbits(32)))
                            for n in self.names}
        self.state = ReplicatedLogState()
        self.active: str | None = None
        self.term = 0
        self._poll_at: int | None = None
        self._election_due: int | None = None
        # Metadata fetches parked until the next commit: (broker name, deliver).
        self.waiting_fetches: list[tuple[str, str, Callable[[], None]]] = []

    @property
    def loop(self) -> SimLoop:
        return self.cluster.loop

    def quorum_ok(self) -> bool:
        return sum(1 for n in self.names if self.loop.is_up(n)) * 2 > len(self.names)

    def elect(self, name: str) -> None:
        assert self.loop.is_up(name) and self.quorum_ok()
        if self.active is not None:
            self.controllers[self.active].deactivate()
        self.term += 1
        self.state.apply(LeaderChangeCommand(self.term, self.names.index(name)))
        self.active = name
        self._election_due = None
        c = self.controllers[name]
        c.activate(self.loop.now_ms)
        self.cluster.note(f"controller {name} active (term {self.term})")
        self._schedule_poll(self.loop.now_ms)

    def maybe_elect(self) -> None:
        """After the active controller died or lost its majority: a new one once the
        election timeout has passed and a majority is up."""
        if self.active is not None and self.loop.is_running(self.active) and self.quorum_ok():
            return
        if self.active is not None and not self.loop.is_up(self.active):
            self.controllers[self.active].deactivate()
            self.active = None
        if self._election_due is None:
            self._election_due = self.loop.now_ms + self.cluster.config.election_timeout_ms
            self.loop.at(self._election_due, "sim", self._election)

    def _election(self) -> None:
        self._election_due = None
        if self.active is not None and self.loop.is_running(self.active) and self.quorum_ok():
            return
        live = [n for n in self.names if self.loop.is_running(n)]
        if not self.quorum_ok() or not live:
            if self.active is not None:
                self.controllers[self.active].deactivate()
                self.active = None
            self._election_due = self.loop.now_ms + self.cluster.config.election_timeout_ms
            self.loop.at(self._election_due, "sim", self._election)
            return
        self.elect(self.cluster.rng.choice(live))

    def commit(self, records: tuple[Any, ...]) -> None:
        if not records:
            return
        framed = tuple(encode_record(r) for r in records)
        command = AppendCommand(self.rng.randbytes(REQUEST_ID_BYTES), self.term,
                                self.state.next_offset, self.loop.now_ms, framed)
        outcome = self.state.apply(command)
        assert isinstance(outcome, Appended), outcome
        batch = outcome.batch
        for c in self.controllers.values():
            replayed = c.replay([decode_record(b) for b in batch.records], batch.last_offset, batch.epoch)
            assert replayed.error is None, replayed.error
        self.cluster.on_commit(batch, records)
        waiting, self.waiting_fetches = self.waiting_fetches, []
        for src, dst, deliver in waiting:
            if self.loop.is_up(src):
                self.cluster.network.send(src, dst, deliver)

    def handle(self, name: str, handler: Callable[[QuorumController, int], Any]) -> Any:
        """Run a request on controller ``name``: None unless it is the active one with a
        majority (the request is then lost: the broker times out and retries, as with
        NOT_CONTROLLER)."""
        if name != self.active or not self.quorum_ok():
            return None
        result = handler(self.controllers[name], self.loop.now_ms)
        self.commit(result.records)
        self._schedule_poll(self.loop.now_ms)      # the commit may make periodic work due
        return result.response

    def _schedule_poll(self, at_ms: int) -> None:
        if self.active is None:
            return
        if self._poll_at is not None and self._poll_at <= at_ms:
            return
        self._poll_at = at_ms
        active = self.active
        self.loop.at(at_ms, active, lambda: self._poll(active))

    def _poll(self, name: str) -> None:
        if self._poll_at is not None and self._poll_at > self.loop.now_ms:
            return
        self._poll_at = None
        if name != self.active or not self.quorum_ok():
            return
        result, wait_ms = self.controllers[name].poll(self.loop.now_ms)
        self.commit(result.records)
        self._schedule_poll(self.loop.now_ms + (1 if result.records else max(1, wait_ms)))

    @property
    def image(self) -> MetadataImage:
        return self.controllers[self.names[0]].image
