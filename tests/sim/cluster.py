"""`SimCluster`: real broker cores, the real controller and a seeded network, in one process.

Theory of operation
-------------------
The simulator plays every shell of a Ketch cluster over the pure cores, in the style of
Kafka's ``RaftEventSimulationTest`` and TigerBeetle's VOPR (STYLE.md 1 and 6):

- **Controllers** ``c1..cN``: each a real ``QuorumController``. The metadata quorum is the
  real pure ``ReplicatedLogState`` (the state pysyncobj replicates); a commit needs a
  majority of controllers up, the active controller is the Raft leader, and after it dies
  a live controller takes over once ``election_timeout_ms`` has passed
  (``LeaderChangeCommand``, then ``activate(now_ms)``, which restarts every broker
  session as Kafka does). Commits are synchronous with the decision, so a write's
  outcome is never unknown here; answers still travel the network and may be lost.
  Every controller replays every committed batch (a replicated state machine), so a
  restarted controller is caught up.
- **Brokers** ``b1..bN``: a ``ReplicaManager`` over a ``LogManager`` over ``SimStorage``.
  The sim is the broker's shells: registration and heartbeats (the lifecycle manager),
  the metadata observer (fetches committed batches from a live controller, long-polled;
  ``replay_batch`` then ``apply_metadata(image, changes)``), the replica fetcher (the
  ``follower_work`` / ``read`` / ``end_offset_for_epoch`` / ``handle_fetched`` loop, with
  the leader parking an empty fetch until data or ``fetch_wait_max_ms``), the
  AlterPartition channel, the produce path (``append`` + ``await_replication``), and
  the poll loop with HW checkpoints. ``kill`` throws the core away and opens a new one
  from the same storage (SIGKILL keeps the page cache); ``power_cut`` first applies
  ``SimStorage.crash`` (unflushed bytes lost). Either way the broker re-registers with a
  new incarnation and gets a new broker epoch.
- **Clients** (``tests/sim/workload.py``) send produce and metadata requests through
  the same network.

After every event the cluster calls ``on_step`` (the continuous invariant checks); the
``trace`` keeps the last notable events for a failure report.
"""
from __future__ import annotations

import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from broker.log import LogConfig, LogManager, SimStorage
from broker.replica.partition import Role
from broker.replica_manager import (
    AlterPartitionAnswer, EpochAnswer, FetchedPartition, FetchFromLeader, FollowerWork,
    LeadershipChanged, PartitionsChanged, ProduceCompletion, ReplicaManager, SendAlterPartition,
)
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log import decode_record, encode_record
from metadata_log.delta import replay_batch
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from quorum.controller import ControllerConfig, QuorumController
from quorum.replicated_log import (
    REQUEST_ID_BYTES, AppendCommand, Appended, LeaderChangeCommand, ReplicatedLogState,
)
from tests.sim.network import NetworkFaults, SimLoop, SimNetwork

__all__ = ["SimBroker", "SimCluster", "SimConfig"]

IAC = M.IncrementalAlterConfigsRequest
POLL_COALESCE_MS = 10


@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    controllers: int = 3
    heartbeat_interval_ms: int = 100
    session_timeout_ms: int = 600
    replica_lag_time_max_ms: int = 400
    replica_fetch_backoff_ms: int = 50
    fetch_wait_max_ms: int = 100
    request_timeout_ms: int = 250
    metadata_wait_max_ms: int = 300
    election_timeout_ms: int = 300
    hw_checkpoint_interval_ms: int = 500
    # Kafka's broker publishes metadata to its ReplicaManager only after its initial
    # catch-up: once the log it replayed holds its own (new) registration. Applying the
    # image at once (False; broker/broker.py does so today) lets a restarted broker act
    # as leader at its old leader epoch with a log a power cut shortened
    # (tests/sim/bugs.py: story_restarted_leader_before_registration).
    wait_for_own_registration: bool = True
    unclean_leader_election_enable: bool = False
    faults: NetworkFaults = field(default_factory=NetworkFaults)


# ---------------------------------------------------------------- the controllers

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


# ---------------------------------------------------------------- one broker

@dataclass(slots=True)
class _FetchSession:
    """The replica fetcher's state for one leader: at most one request in flight."""
    in_flight: int | None = None
    scheduled: bool = False


class SimBroker:
    def __init__(self, cluster: "SimCluster", broker_id: int,
                 core_factory: Callable[..., ReplicaManager]) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.name = f"b{broker_id}"
        self.storage = SimStorage()
        self.core_factory = core_factory
        self.core: ReplicaManager | None = None
        self.image: MetadataImage = EMPTY_IMAGE
        self.applied_offset = -1
        self.broker_epoch = -1
        self.fenced = True
        self.incarnation_id = uuid.UUID(int=0)
        self.metadata_interval_ms = 0
        self._fetch_sessions: dict[int, _FetchSession] = {}
        self._alter_in_flight: dict[int, Any] = {}
        self._produce_waiters: dict[int, Callable[[int], None]] = {}
        self._parked: list[tuple[int, set[TopicPartition], Callable[[], None]]] = []
        self._poll_at: int | None = None
        self._metadata_token: int | None = None
        self.caught_up = False
        self._ids = 0

    @property
    def loop(self) -> SimLoop:
        return self.cluster.loop

    @property
    def now(self) -> int:
        return self.cluster.loop.now_ms

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    # ---------------------------------------------------------- process life

    def start(self) -> None:
        c = self.cluster
        logs, _ = LogManager.open(self.storage, "/data", now_ms=self.now, default_config=LogConfig())
        self.core = self.core_factory(self.broker_id, logs, {},
                                      replica_lag_time_max_ms=c.config.replica_lag_time_max_ms,
                                      replica_fetch_backoff_ms=c.config.replica_fetch_backoff_ms)
        self.image, self.applied_offset = EMPTY_IMAGE, -1
        self.caught_up = False
        self.broker_epoch, self.fenced = -1, True
        self.incarnation_id = uuid.UUID(int=c.rng.getrandbits(128), version=4)
        self._fetch_sessions.clear()
        self._alter_in_flight.clear()
        self._produce_waiters.clear()
        self._parked.clear()
        self._poll_at = None
        self._metadata_token = None
        self.loop.after(0, self.name, self._lifecycle)
        self.loop.after(0, self.name, self._fetch_metadata)
        self.loop.after(c.config.hw_checkpoint_interval_ms, self.name, self._checkpoint)
        self._schedule_poll(self.now)

    def stop(self, power_cut: bool) -> None:
        """SIGKILL (page cache kept) or a power cut (unflushed bytes lost)."""
        self.loop.crash(self.name)
        self.core = None
        if power_cut:
            lost = self.storage.crash(self.cluster.rng)
            self.cluster.note(f"{self.name} power cut: {sum(lost.values())} unflushed bytes lost")

    # ---------------------------------------------------------- controller channel

    def _to_controller(self, handler: Callable[[QuorumController, int], Any],
                       on_answer: Callable[[Any], None]) -> None:
        ctl = self.cluster.controllers
        target = ctl.active
        if target is None:
            return
        net = self.cluster.network

        def at_controller() -> None:
            response = ctl.handle(target, handler)
            if response is not None:
                net.send(target, self.name, lambda: on_answer(response))
        net.send(self.name, target, at_controller)

    def _lifecycle(self) -> None:
        """The lifecycle manager's timer: register until registered, then heartbeat."""
        if self.broker_epoch < 0:
            self._register()
        else:
            self._heartbeat()
        self.loop.after(self.cluster.config.heartbeat_interval_ms, self.name, self._lifecycle)

    def _register(self) -> None:
        R = M.BrokerRegistrationRequest
        request = R(broker_id=self.broker_id, cluster_id="", incarnation_id=self.incarnation_id,
                    listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + self.broker_id,
                                          security_protocol=0)],
                    features=[R.Feature(name="metadata.version", min_supported_version=1,
                                        max_supported_version=self.cluster.controller_config.metadata_version)],
                    rack=None)

        def answered(response: Any) -> None:
            if response.error_code == 0 and self.broker_epoch < 0:
                self.broker_epoch = response.broker_epoch
                self.cluster.note(f"{self.name} registered, broker epoch {self.broker_epoch}")
        self._to_controller(lambda c, now: c.handle_broker_registration(request, now), answered)

    def _heartbeat(self) -> None:
        request = M.BrokerHeartbeatRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch,
                                           current_metadata_offset=self.applied_offset,
                                           want_fence=False, want_shut_down=False)

        def answered(response: Any) -> None:
            if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                self.broker_epoch = -1          # our registration was replaced: register again
            elif response.error_code == 0:
                self.fenced = response.is_fenced
        self._to_controller(lambda c, now: c.handle_broker_heartbeat(request, now), answered)

    # ---------------------------------------------------------- metadata observer

    def _fetch_metadata(self) -> None:
        """Fetch committed batches from a live controller (long-polled: parked until the
        next commit when there is nothing new); retried after a timeout."""
        ctl, net = self.cluster.controllers, self.cluster.network
        live = [n for n in ctl.names if self.loop.is_up(n)]
        cfg = self.cluster.config
        if not live:
            self.loop.after(cfg.request_timeout_ms, self.name, self._fetch_metadata)
            return
        target = self.cluster.rng.choice(live)
        token = self._next_id()
        self._metadata_token = token

        def answered(batches: list) -> None:
            if self._metadata_token != token:
                return
            self._metadata_token = None
            self._apply_batches(batches)
            self.loop.after(self.metadata_interval_ms, self.name, self._fetch_metadata)

        def at_controller() -> None:
            batches = [b for b in ctl.state.batches if b.last_offset > self.applied_offset]
            reply = lambda: answered(batches)  # noqa: E731
            if batches:
                net.send(target, self.name, reply)
            else:
                ctl.waiting_fetches.append((target, self.name,
                                            lambda: answered([b for b in ctl.state.batches
                                                              if b.last_offset > self.applied_offset])))

        def timed_out() -> None:
            if self._metadata_token == token:
                self._metadata_token = None
                self._fetch_metadata()
        net.send(self.name, target, at_controller)
        self.loop.after(cfg.metadata_wait_max_ms + cfg.request_timeout_ms, self.name, timed_out)

    def _apply_batches(self, batches: list) -> None:
        core = self.core
        assert core is not None
        first_load = self.applied_offset < 0
        changes: list = []
        image = self.image
        for batch in batches:
            if batch.last_offset <= self.applied_offset:
                continue
            assert batch.base_offset == self.applied_offset + 1, (batch.base_offset, self.applied_offset)
            outcome = replay_batch(image, [decode_record(b) for b in batch.records],
                                   Provenance(batch.last_offset, batch.epoch))
            image = outcome.image
            changes.extend(outcome.changes)
            self.applied_offset = batch.last_offset
        if image is self.image:
            return
        self.image = image
        if self.cluster.config.wait_for_own_registration and not self.caught_up:
            reg = image.cluster.get(self.broker_id)
            if reg is None or reg.incarnation_id != self.incarnation_id:
                return                      # keep replaying; apply once caught up
            self.caught_up = True
            first_load = True               # the core has seen nothing yet: load it whole
        core.apply_metadata(image, None if first_load else changes, self.now)
        self._after_input()

    # ---------------------------------------------------------- the one effect loop

    def _after_input(self, repoll: bool = True) -> None:
        core = self.core
        assert core is not None
        for effect in core.take_effects():
            if isinstance(effect, ProduceCompletion):
                waiter = self._produce_waiters.pop(effect.token, None)
                if waiter is not None:
                    waiter(effect.error_code)
            elif isinstance(effect, PartitionsChanged):
                self._wake_parked(effect.partitions)
            elif isinstance(effect, SendAlterPartition):
                self._send_alter_partition(effect)
            elif isinstance(effect, FetchFromLeader):
                self._kick_fetcher(effect.leader_id)
            elif isinstance(effect, LeadershipChanged):
                if effect.leader:
                    self.cluster.note(f"{self.name} leads {effect.partition} at epoch "
                                      f"{core.partitions[effect.partition].replica.leader_epoch}")
            else:
                raise AssertionError(f"unknown effect {effect!r}")
        if repoll:
            # Inputs may bring deadlines forward (a new leader's lag timers, an acks=all
            # wait); they are hundreds of ms away, so one poll soon after a burst of
            # inputs serves them all.
            self._schedule_poll(self.now + POLL_COALESCE_MS)

    def _schedule_poll(self, at_ms: int) -> None:
        if self._poll_at is not None and self._poll_at <= at_ms:
            return
        self._poll_at = at_ms
        self.loop.at(at_ms, self.name, self._poll)

    def _poll(self) -> None:
        if self._poll_at is None or self._poll_at > self.now:
            return
        self._poll_at = None
        wait_ms = self.core.poll(self.now)
        self._after_input(repoll=False)
        self._schedule_poll(self.now + wait_ms)

    def _checkpoint(self) -> None:
        self.core.checkpoint_high_watermarks()
        self.loop.after(self.cluster.config.hw_checkpoint_interval_ms, self.name, self._checkpoint)

    # ---------------------------------------------------------- AlterPartition

    def _send_alter_partition(self, effect: SendAlterPartition) -> None:
        proposal = effect.proposal
        R = M.AlterPartitionRequest
        request = R(broker_id=self.broker_id, broker_epoch=self.broker_epoch, topics=[R.TopicData(
            topic_name=proposal.partition.topic, topic_id=effect.topic_id, partitions=[R.PartitionData(
                partition_index=proposal.partition.partition, leader_epoch=proposal.leader_epoch,
                new_isr=list(proposal.new_isr),
                new_isr_with_epochs=[R.BrokerState(broker_id=b, broker_epoch=e)
                                     for b, e in effect.new_isr_with_epochs],
                leader_recovery_state=0, partition_epoch=proposal.partition_epoch)])])
        rid = self._next_id()
        self._alter_in_flight[rid] = proposal

        def answered(response: Any) -> None:
            if self._alter_in_flight.pop(rid, None) is None:
                return                              # timed out already
            part = (response.topics[0].partitions[0]
                    if response.topics and response.topics[0].partitions else None)
            code = response.error_code
            if code == 0 and part is not None:
                code = part.error_code
            if code == 0 and part is not None:
                answer = AlterPartitionAnswer(code, part.leader_epoch, part.partition_epoch, tuple(part.isr))
            else:
                answer = AlterPartitionAnswer(code if code else ErrorCode.UNKNOWN_SERVER_ERROR)
            self.cluster.note(f"{self.name} AlterPartition {proposal.partition} {list(proposal.new_isr)}"
                              f" answered {ErrorCode(answer.error_code).name}")
            self.core.handle_alter_partition_response(proposal, answer, self.now)
            self._after_input()

        def timed_out() -> None:
            if self._alter_in_flight.pop(rid, None) is None:
                return
            self.cluster.note(f"{self.name} AlterPartition {proposal.partition} "
                              f"{list(proposal.new_isr)} answer lost")
            self.core.handle_alter_partition_response(proposal, None, self.now)
            self._after_input()
        self._to_controller(lambda c, now: c.handle_alter_partition(request, now), answered)
        self.loop.after(self.cluster.config.request_timeout_ms, self.name, timed_out)

    # ---------------------------------------------------------- replica fetcher (follower side)

    def _kick_fetcher(self, leader_id: int) -> None:
        session = self._fetch_sessions.setdefault(leader_id, _FetchSession())
        if session.in_flight is None and not session.scheduled:
            session.scheduled = True
            self.loop.after(0, self.name, lambda: self._fetch_round(leader_id))

    def _fetch_round(self, leader_id: int) -> None:
        session = self._fetch_sessions.setdefault(leader_id, _FetchSession())
        session.scheduled = False
        if session.in_flight is not None:
            return
        work = self.core.follower_work(leader_id, self.now)
        if work is None:
            self._fetch_sessions.pop(leader_id, None)
            return
        if not work.epoch_queries and not work.fetches:
            session.scheduled = True
            self.loop.after(work.wait_ms, self.name, lambda: self._fetch_round(leader_id))
            return
        rid = self._next_id()
        session.in_flight = rid
        leader = self.cluster.brokers.get(leader_id)
        net = self.cluster.network
        cfg = self.cluster.config

        def answered(epoch_answers: list[EpochAnswer], fetched: list[FetchedPartition]) -> None:
            if session.in_flight != rid:
                return
            session.in_flight = None
            if work.epoch_queries:
                self.core.handle_epoch_answers(work, epoch_answers, self.now)
            if work.fetches:
                self.core.handle_fetched(work, fetched, self.now)
            self._after_input()
            self._fetch_round(leader_id)

        def timed_out() -> None:
            if session.in_flight != rid:
                return
            session.in_flight = None
            self.core.handle_leader_unreachable(leader_id, self.now)
            self._after_input()
            self._fetch_round(leader_id)

        if leader is not None:
            net.send(self.name, leader.name,
                     lambda: leader.serve_follower(self, work, answered))
        self.loop.after(cfg.fetch_wait_max_ms + cfg.request_timeout_ms, self.name, timed_out)

    # ---------------------------------------------------------- leader side of Fetch

    def serve_follower(self, follower: "SimBroker", work: FollowerWork,
                       reply: Callable[[list, list], None]) -> None:
        core = self.core
        epoch_answers = []
        for q in work.epoch_queries:
            code, epoch, end = core.end_offset_for_epoch(q.partition, q.leader_epoch, q.current_leader_epoch)
            epoch_answers.append(EpochAnswer(q.partition, code, epoch, end))
        fetched = self._read_for(follower.broker_id, work)
        self._after_input()
        net = self.cluster.network
        has_data = any(p.records or p.error_code for p in fetched)
        if work.epoch_queries or has_data or not work.fetches:
            net.send(self.name, follower.name, lambda: reply(epoch_answers, fetched))
            return
        # Nothing new: park the fetch until data arrives or fetch_wait_max_ms passes.
        tps = {p.partition for p in work.fetches}
        pid = self._next_id()

        def answer_now() -> None:
            if not any(entry[0] == pid for entry in self._parked):
                return
            self._parked = [e for e in self._parked if e[0] != pid]
            again = self._read_for(follower.broker_id, work)
            self._after_input()
            net.send(self.name, follower.name, lambda: reply([], again))
        self._parked.append((pid, tps, answer_now))
        self.loop.after(self.cluster.config.fetch_wait_max_ms, self.name, answer_now)

    def _read_for(self, follower_id: int, work: FollowerWork) -> list[FetchedPartition]:
        core = self.core
        out = []
        for pos in work.fetches:
            r = core.read(pos.partition, pos.fetch_offset, 1 << 20, pos.current_leader_epoch,
                          follower_id, self.now, True)
            data = None
            if r.records is not None and not r.records.is_empty:
                data = r.log.read_records_bytes(r.records)
            out.append(FetchedPartition(pos.partition, r.error_code, r.high_watermark,
                                        r.log_start_offset, data))
        return out

    def _wake_parked(self, partitions: frozenset[TopicPartition]) -> None:
        for pid, tps, answer_now in list(self._parked):
            if tps & partitions:
                self.loop.after(0, self.name, answer_now)

    # ---------------------------------------------------------- produce (server side)

    def handle_produce(self, tp: TopicPartition, records: bytes, acks: int,
                       reply: Callable[[int, int], None]) -> None:
        """``reply(error_code, base_offset)``; nothing for acks=0."""
        core = self.core
        result = core.append(tp, records, acks, self.now)
        if result.error_code != ErrorCode.NONE or result.required_offset is None:
            self._after_input()
            if acks != 0:
                reply(result.error_code, result.base_offset)
            return
        token = self._next_id()
        epoch = core.partitions[tp].replica.leader_epoch

        def completed(code: int) -> None:
            if code == ErrorCode.NONE:
                self.cluster.on_acks_all(self.broker_id, tp, epoch, result.required_offset)
            reply(code, result.base_offset)
        self._produce_waiters[token] = completed
        if not core.await_replication(tp, token, result.required_offset,
                                      self.now + self.cluster.config.request_timeout_ms):
            self._produce_waiters.pop(token, None)
            reply(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        self._after_input()


# ---------------------------------------------------------------- the cluster

class SimCluster:
    def __init__(self, seed: int, config: SimConfig | None = None,
                 core_factory: Callable[..., ReplicaManager] = ReplicaManager,
                 trace_length: int = 60) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.loop = SimLoop(now_ms=0)
        self.network = SimNetwork(self.loop, self.rng, self.config.faults)
        self.trace: deque[str] = deque(maxlen=trace_length)
        self.controller_config = ControllerConfig(
            broker_session_timeout_ms=self.config.session_timeout_ms,
            broker_heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            unclean_leader_election_enable=self.config.unclean_leader_election_enable,
            leader_imbalance_check_interval_ms=2_000)
        self.controllers = SimControllers(self, self.config.controllers, self.controller_config, self.rng)
        self.brokers: dict[int, SimBroker] = {}
        for i in range(1, self.config.brokers + 1):
            b = self.brokers[i] = SimBroker(self, i, core_factory)
            b.metadata_interval_ms = self.rng.randint(0, 30)
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.power_cuts: list[tuple[int, int]] = []     # (time, broker id)
        self.ack_listeners: list[Callable[[int, TopicPartition, int, int], None]] = []
        self.commit_listeners: list[Callable[[Any, tuple], None]] = []
        self.step_listeners: list[Callable[[str], None]] = []
        self.loop.after_event = self._after_event
        self.controllers.elect(self.controllers.names[0])
        for b in self.brokers.values():
            b.start()

    # ---------------------------------------------------------- plumbing

    def note(self, what: str) -> None:
        self.trace.append(f"t={self.loop.now_ms} {what}")

    def on_acks_all(self, broker_id: int, tp: TopicPartition, leader_epoch: int,
                    required_offset: int) -> None:
        """A leader completed an acks=all produce: its HW passed ``required_offset``."""
        for listener in self.ack_listeners:
            listener(broker_id, tp, leader_epoch, required_offset)

    def on_commit(self, batch: Any, records: tuple) -> None:
        for listener in self.commit_listeners:
            listener(batch, records)

    def _after_event(self, node: str) -> None:
        for listener in self.step_listeners:
            listener(node)

    def run_for(self, ms: int) -> None:
        self.loop.run_until(self.loop.now_ms + ms)

    def run_until(self, condition: Callable[[], bool], timeout_ms: int) -> bool:
        """Run until ``condition()`` holds (checked after every event) or the time is up."""
        if condition():
            return True
        return self.loop.run_until(self.loop.now_ms + timeout_ms, condition)

    # ---------------------------------------------------------- faults

    def kill(self, broker_id: int, power_cut: bool = False) -> None:
        b = self.brokers[broker_id]
        if not self.loop.is_up(b.name):
            return
        self.note(f"{b.name} {'power cut' if power_cut else 'killed'}")
        if power_cut:
            self.power_cuts.append((self.loop.now_ms, broker_id))
        b.stop(power_cut)

    def restart(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if self.loop.is_up(b.name):
            return
        self.loop.start(b.name)
        self.note(f"{b.name} restarted")
        b.start()

    def pause(self, node: str) -> None:
        self.note(f"{node} paused")
        self.loop.pause(node)
        if node in self.controllers.names:
            self.controllers.maybe_elect()

    def resume(self, node: str) -> None:
        self.note(f"{node} resumed")
        self.loop.resume(node)
        if node in self.controllers.names:
            self.controllers.maybe_elect()

    def kill_controller(self, name: str) -> None:
        if not self.loop.is_up(name):
            return
        self.note(f"controller {name} killed")
        self.loop.crash(name)
        if self.controllers.active == name:
            self.controllers.controllers[name].deactivate()
            self.controllers.active = None
        self.controllers.maybe_elect()

    def restart_controller(self, name: str) -> None:
        if self.loop.is_up(name):
            return
        self.loop.start(name)
        self.note(f"controller {name} restarted")
        self.controllers.maybe_elect()

    def heal(self) -> None:
        """Remove every network fault, resume and restart everything."""
        self.note("heal")
        self.network.heal()
        for name in self.controllers.names:
            if not self.loop.is_up(name):
                self.restart_controller(name)
            self.loop.resume(name)
        self.controllers.maybe_elect()
        for b in self.brokers.values():
            self.loop.resume(b.name)
            if not self.loop.is_up(b.name):
                self.restart(b.broker_id)

    # ---------------------------------------------------------- admin operations

    def admin(self, handler: Callable[[QuorumController, int], Any], timeout_ms: int = 3_000) -> Any:
        """An admin request on the active controller, retried (NOT_CONTROLLER) until
        answered; the response, or None if no controller answered in time."""
        answer: list[Any] = []
        deadline = self.loop.now_ms + timeout_ms
        while not answer and self.loop.now_ms < deadline:
            ctl = self.controllers
            if ctl.active is not None and self.loop.is_running(ctl.active):
                response = ctl.handle(ctl.active, handler)
                if response is not None:
                    return response
            self.run_for(50)
        return None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: dict[str, str] | None = None,
                     assignments: list[list[int]] | None = None, timeout_ms: int = 3_000) -> Any:
        """The topic's CreateTopics result; None if no active controller answered in time."""
        R = M.CreateTopicsRequest
        topic = R.CreatableTopic(
            name=name,
            num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[R.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in enumerate(assignments or [])],
            configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        response = self.admin(lambda c, now: c.handle_create_topics(R(topics=[topic]), now), timeout_ms)
        if response is None:
            self.note(f"create topic {name}: no controller answered")
            return None
        result = response.topics[0]
        assert result.error_code == 0, result
        self.topic_configs[name] = dict(configs or {})
        self.note(f"created topic {name}")
        return result

    def alter_topic_config(self, topic: str, key: str, value: str) -> int:
        request = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
            resource_type=2, resource_name=topic,
            configs=[IAC.AlterableConfig(name=key, config_operation=0, value=value)])])
        response = self.admin(lambda c, now: c.handle_incremental_alter_configs(request, now))
        assert response is not None
        self.topic_configs.setdefault(topic, {})[key] = value
        self.note(f"set {topic} {key}={value}")
        return response.responses[0].error_code

    # ---------------------------------------------------------- views

    def unclean_allowed(self, tp: TopicPartition) -> bool:
        """Whether the controller may elect a replica outside the ISR for ``tp`` now."""
        if self.config.unclean_leader_election_enable:
            return True
        for resource, configs in self._topic_configs_seen():
            if resource == tp.topic and configs.get("unclean.leader.election.enable") == "true":
                return True
        return False

    def durability_exempt_before_ms(self) -> int:
        """Records acknowledged before this time may be lost without breaking a promise:
        a power cut took a replica's unflushed tail, and Kafka (like Ketch) does not fsync
        on ack but relies on replicas failing independently. A power cut followed by
        kills, pauses or fencing of the other replicas can leave it the last ISR member,
        elected with a shorter log (SCENARIOS N5 is the correlated case). Deciding exactly
        which records a power cut endangered needs the page-cache state of every replica
        over time; the sim takes the coarse, safe bound: everything acknowledged before
        the last power cut. -1: no power cut."""
        return self.power_cuts[-1][0] if self.power_cuts else -1

    def _topic_configs_seen(self):
        return self.topic_configs.items()

    @property
    def image(self) -> MetadataImage:
        return self.controllers.image

    def registration(self, tp: TopicPartition):
        topic = self.image.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The committed leader, once it acts as leader at that epoch (None otherwise)."""
        reg = self.registration(tp)
        if reg is None or reg.leader < 0:
            return None
        b = self.brokers[reg.leader]
        if not self.loop.is_running(b.name) or b.core is None:
            return None
        hosted = b.core.partitions.get(tp)
        if hosted is None or hosted.replica.role is not Role.LEADER:
            return None
        return reg.leader if hosted.replica.leader_epoch == reg.leader_epoch else None

    def live_brokers(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.core is not None and self.loop.is_up(b.name)]

    def node_names(self) -> list[str]:
        return list(self.controllers.names) + [b.name for b in self.brokers.values()]
