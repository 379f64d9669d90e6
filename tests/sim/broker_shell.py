"""One simulated broker process: the shells of broker/ around a real ``ReplicaManager``.

Theory of operation
-------------------
``SimBroker`` plays, over a ``ReplicaManager`` on a ``LogManager`` on ``SimStorage``,
every shell a Ketch broker has: the lifecycle manager (register until registered, then
heartbeat), the metadata observer (fetch committed batches from a live controller,
long-polled; ``replay_batch``, then ``apply_metadata(image, changes)`` once the log holds
this process's own registration, as Kafka's broker waits for its initial catch-up), the
replica fetcher (``follower_work`` -> the leader's ``read`` / ``end_offset_for_epoch`` ->
``handle_fetched`` / ``handle_epoch_answers``; a lost answer -> ``handle_leader_unreachable``;
the leader parks an empty fetch until data or ``fetch_wait_max_ms``), the AlterPartition
channel (``SendAlterPartition`` -> the active controller -> the answer, or ``None`` after
``request_timeout_ms``), the produce path (``append`` + ``await_replication``) and the
poll loop with HW checkpoints. Every input is followed by ``_after_input``: the one place
the core's effects are carried out.

``stop`` throws the core away (SIGKILL keeps the page cache; a power cut first applies
``SimStorage.crash``); ``start`` opens a new one from the same storage, with a new
incarnation, so the broker re-registers and gets a new broker epoch.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from broker.log import LogConfig, LogManager, SimStorage
from broker.replica_manager import (
    AlterPartitionAnswer, EpochAnswer, FetchedPartition, FetchFromLeader, FollowerWork,
    LeadershipChanged, PartitionsChanged, ProduceCompletion, ReplicaManager, SendAlterPartition,
)
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log import decode_record
from metadata_log.delta import replay_batch
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from quorum.controller import QuorumController
from tests.sim.network import SimLoop

if TYPE_CHECKING:
    from tests.sim.cluster import SimCluster

__all__ = ["SimBroker"]

POLL_COALESCE_MS = 10


@dataclass(slots=True)
class _FetchSession:
    """The replica fetcher's state for one leader: at most one request in flight.
    ``epoch``: KIP-227's session epoch of the next request (0: full, after a lost answer)."""
    in_flight: int | None = None
    scheduled: bool = False
    epoch: int = 0


@dataclass(slots=True)
class _ServedSession:
    """The leader's side of a follower's fetch session: the epoch it expects next, and per
    partition what the follower was last told: (fetch offset, leader epoch, HW, log start)."""
    next_epoch: int = 0
    told: dict[TopicPartition, tuple[int, int, int, int]] = field(default_factory=dict)


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
        self._served_sessions: dict[int, _ServedSession] = {}
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
        self._served_sessions.clear()
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
                answer = AlterPartitionAnswer(code, part.leader_epoch, part.partition_epoch,
                                              tuple(part.isr), part.leader_recovery_state == 1)
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
            session.epoch += 1
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
            session.epoch = 0
            self.core.handle_leader_unreachable(leader_id, self.now)
            self._after_input()
            self._fetch_round(leader_id)

        if leader is not None:
            epoch = session.epoch
            net.send(self.name, leader.name,
                     lambda: leader.serve_follower(self, work, epoch, answered))
        self.loop.after(cfg.fetch_wait_max_ms + cfg.request_timeout_ms, self.name, timed_out)

    # ---------------------------------------------------------- leader side of Fetch

    def serve_follower(self, follower: "SimBroker", work: FollowerWork, session_epoch: int,
                       reply: Callable[[list, list], None]) -> None:
        """As broker/apis.py's handle_fetch for a follower's incremental fetch session: a
        partition whose position did not move and that has nothing new for the follower
        gets only its fetch-state report (``report_idle_follower_fetches``) and no place in
        the answer. An unexpected epoch (a lost answer, a restart) makes it a full fetch."""
        core = self.core
        served = self._served_sessions.get(follower.broker_id)
        if served is None or session_epoch == 0 or session_epoch != served.next_epoch:
            served = self._served_sessions[follower.broker_id] = _ServedSession()
        served.next_epoch = session_epoch + 1
        epoch_answers = []
        for q in work.epoch_queries:
            code, epoch, end = core.end_offset_for_epoch(q.partition, q.leader_epoch, q.current_leader_epoch)
            epoch_answers.append(EpochAnswer(q.partition, code, epoch, end))
        fetched, told = self._read_for(follower.broker_id, work, served)
        self._after_input()
        net = self.cluster.network
        has_data = any(p.records or p.error_code for p in fetched)
        if work.epoch_queries or has_data or not work.fetches:
            served.told = told          # what this answer tells (a parked one's reads are not sent)
            net.send(self.name, follower.name, lambda: reply(epoch_answers, fetched))
            return
        # Nothing new: park the fetch until data arrives or fetch_wait_max_ms passes.
        tps = {p.partition for p in work.fetches}
        pid = self._next_id()

        def answer_now() -> None:
            if not any(entry[0] == pid for entry in self._parked):
                return
            self._parked = [e for e in self._parked if e[0] != pid]
            again, served.told = self._read_for(follower.broker_id, work, served)
            self._after_input()
            net.send(self.name, follower.name, lambda: reply([], again))
        self._parked.append((pid, tps, answer_now))
        self.loop.after(self.cluster.config.fetch_wait_max_ms, self.name, answer_now)

    def _read_for(self, follower_id: int, work: FollowerWork, served: _ServedSession
                  ) -> tuple[list[FetchedPartition], dict[TopicPartition, tuple[int, int, int, int]]]:
        """The answer, and what it tells the follower per partition (for ``served.told``
        once it is sent)."""
        core = self.core
        told, now_told = served.told, {}
        idle = core.report_idle_follower_fetches(follower_id, -1, (
            (pos.partition, pos.fetch_offset, pos.current_leader_epoch, t[2], t[3])
            for pos in work.fetches
            if (t := told.get(pos.partition)) is not None
            and t[:2] == (pos.fetch_offset, pos.current_leader_epoch)), self.now)
        out = []
        for pos in work.fetches:
            if pos.partition in idle:
                now_told[pos.partition] = told[pos.partition]
                continue
            r = core.read(pos.partition, pos.fetch_offset, 1 << 20, pos.current_leader_epoch,
                          follower_id, self.now, True)
            data = None
            if r.records is not None and not r.records.is_empty:
                data = r.log.read_records_bytes(r.records)
            out.append(FetchedPartition(pos.partition, r.error_code, r.high_watermark,
                                        r.log_start_offset, data))
            if r.error_code == ErrorCode.NONE:
                now_told[pos.partition] = (pos.fetch_offset, pos.current_leader_epoch,
                                           r.high_watermark, r.log_start_offset)
        return out, now_told

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
