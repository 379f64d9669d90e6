"""MetadataQuorum: the port through which controllers append to and follow the metadata log.

The port hides Raft. What callers see, on the asyncio thread:

- ``append(records) -> Future[int]``: only on the *active* controller. The records form one
  batch, appended atomically as one Raft entry; the future resolves with the offset of the
  last record once the batch is committed (on a majority, durably) and every listener has
  seen it. Offsets are assigned when ``append`` is called, in call order, as Kafka's
  ``RaftClient.scheduleAppend`` does, so a caller knows where its records will land.
  Several appends waiting behind the in-flight ones are merged into one Raft entry (group
  commit: throughput comes from many records per entry; each caller still gets its own
  offsets, and each append stays atomic).
  The future fails with ``NotControllerError`` when this node is not, or stops being, the
  active controller. A failed append has an *unknown outcome*: its records may still be
  committed by the next leader (Raft keeps entries a majority holds). Callers that derived
  the records from in-memory state must rebuild that state from the committed log.
- listeners (``register``): ``handle_commit(batch)`` for every committed batch, in offset
  order; ``handle_load_snapshot(snapshot)`` when the log is replaced by a snapshot (at start
  from disk, or when a lagging node installs the leader's state): forget everything, load
  the snapshot's records, then commits follow; ``handle_leader_change(leader)`` when the
  leader or epoch changes and whenever ``is_active`` flips (read it in the callback).
- ``log``: the committed log in memory (``CommittedLog``), read by the metadata fetch;
  ``wait_for_commit`` for its long polling.
- ``leader``, ``epoch``, ``leader_id``, ``is_active``, ``last_committed_offset``.
- ``install_snapshot(snapshot)``: local log compaction once the caller has the image's
  records at a committed offset.

``QuorumBase`` holds the asyncio side shared by ``InMemoryQuorum`` (here, for tests of other
modules) and ``RaftQuorum`` (``quorum/raft.py``); both feed it the outcomes of the same pure
``ReplicatedLogState.apply`` (``quorum/replicated_log.py``), so they behave alike.
"""
from __future__ import annotations

import asyncio
import itertools
import os
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from clients.clock import now_ms
from quorum.replicated_log import (
    NO_LEADER, AppendCommand, Appended, ApplyOutcome, CommittedBatch, CommittedLog, Duplicate,
    LeaderChangeCommand, LeaderChangeIgnored, LeaderEstablished, MetadataSnapshot, Rejected,
    ReplicatedLogState, VotersChanged, VotersCommand, VotersFenced, encode_command,
)

NOT_CONTROLLER = 41         # Kafka error code, clients/protocol/errors.py has the full table
ENTRY_BYTES_MAX_DEFAULT = 1 << 20
IN_FLIGHT_MAX_DEFAULT = 2


class NotControllerError(Exception):
    """This node cannot append: it is not the active controller (or stopped being it while
    the append was in flight: the outcome of that append is unknown)."""

    error_code = NOT_CONTROLLER

    def __init__(self, leader_id: int, message: str = "not the active controller") -> None:
        super().__init__(f"{message} (active controller: {leader_id})")
        self.leader_id = leader_id


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int          # NO_LEADER while unknown
    epoch: int              # the Raft term; 0 before any election


class QuorumListener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...
    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None: ...
    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...


EMPTY_SNAPSHOT = MetadataSnapshot(end_offset=0, epoch=0, records=())


class MetadataQuorum(ABC):
    node_id: int
    log: CommittedLog

    @property
    @abstractmethod
    def leader(self) -> LeaderAndEpoch: ...

    @property
    def leader_id(self) -> int:
        return self.leader.leader_id

    @property
    def epoch(self) -> int:
        return self.leader.epoch

    @property
    @abstractmethod
    def is_active(self) -> bool: ...

    @property
    def last_committed_offset(self) -> int:
        return self.log.last_committed_offset

    @abstractmethod
    def register(self, listener: QuorumListener) -> None: ...

    @abstractmethod
    def append(self, records: Sequence[bytes]) -> "asyncio.Future[int]": ...

    @abstractmethod
    async def wait_for_commit(self, offset: int, timeout_s: float) -> bool:
        """True once `offset` is committed; False if timeout_s passed first."""

    @abstractmethod
    def install_snapshot(self, snapshot: MetadataSnapshot) -> None: ...

    @property
    def journal_syncs(self) -> tuple[int, float]:
        """The fdatasyncs of this node's Raft journal entries so far, and the seconds they
        took: what every commit waits for on a majority. A quorum that keeps no journal
        (in memory), none."""
        return 0, 0.0

    @abstractmethod
    async def close(self) -> None: ...


@dataclass(slots=True)
class _Waiting:
    """An append not yet proposed: merged with its neighbours into the next entry."""

    records: tuple[bytes, ...]
    future: "asyncio.Future[int]"


@dataclass(slots=True)
class _InFlight:
    """One proposed Raft entry: the appends merged into it, with their last offsets."""

    command: AppendCommand
    futures: list[tuple["asyncio.Future[int]", int]] = field(default_factory=list)


class QuorumBase(MetadataQuorum):
    """The asyncio side of a quorum: offsets, group commit, futures, listeners, long polls.

    Subclasses propose encoded commands (`_propose`) and report back, on the loop thread:
    `_on_outcome` for every applied command, `_on_state_loaded` when the whole state was
    replaced, `_on_role` when this node's Raft role/term/leader changed, `_on_proposal_failed`
    when a proposal is known to have failed."""

    def __init__(self, node_id: int, *, in_flight_max: int = IN_FLIGHT_MAX_DEFAULT,
                 entry_bytes_max: int = ENTRY_BYTES_MAX_DEFAULT) -> None:
        assert in_flight_max >= 1 and entry_bytes_max > 0
        self.node_id = node_id
        self.log = CommittedLog()
        self.in_flight_max = in_flight_max
        self.entry_bytes_max = entry_bytes_max
        self._listeners: list[QuorumListener] = []
        self._leader = LeaderAndEpoch(NO_LEADER, 0)
        # Raft's view: am I the Raft leader, and in which term.
        self._raft_leader_term = 0          # 0: not the Raft leader
        # The log's view: the last LeaderChange applied.
        self._established_epoch = 0
        self._established_leader = NO_LEADER
        # Writer state, meaningful while active. Invariant: _next_offset is the offset the
        # next append gets; it equals log.high_watermark plus the records in flight/waiting.
        self._active = False
        self._next_offset = 0
        self._waiting: deque[_Waiting] = deque()
        self._in_flight: dict[bytes, _InFlight] = {}
        self._writer_id = os.urandom(8)     # request ids: writer incarnation + sequence
        self._sequence = itertools.count()
        self._commit_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._closed = False
        # The voter set (KIP-853): the encoded VotersRecord last applied, None while the
        # static configuration holds (quorum/voters.py reads it). At most one proposal of
        # it in flight (the one-change-at-a-time rule is the caller's, quorum/voters.py).
        self.voters_record: bytes | None = None
        self._voters_in_flight: tuple[bytes, asyncio.Future[None]] | None = None

    # -- public --

    @property
    def leader(self) -> LeaderAndEpoch:
        return self._leader

    @property
    def is_active(self) -> bool:
        return self._active

    def register(self, listener: QuorumListener) -> None:
        self._listeners.append(listener)
        if self.log.snapshot is not None or self.log.high_watermark:
            # Late registration: hand over what is already committed.
            listener.handle_load_snapshot(self.log.snapshot or EMPTY_SNAPSHOT)
            for batch in self.log.batches():
                listener.handle_commit(batch)
        listener.handle_leader_change(self._leader)

    def append(self, records: Sequence[bytes]) -> "asyncio.Future[int]":
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        records = tuple(records)
        if not records:
            raise ValueError("append needs at least one record")
        if not self._active:
            future.set_exception(NotControllerError(self._leader.leader_id))
            return future
        self._waiting.append(_Waiting(records, future))
        self._maybe_propose()
        return future

    def propose_voters(self, voters: bytes) -> "asyncio.Future[None]":
        """Propose a new voter set (an encoded VotersRecord); resolves once it is applied
        here, fails with NotControllerError when this node is not or stops being active."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._active or self._voters_in_flight is not None:
            future.set_exception(NotControllerError(
                self._leader.leader_id, "not the active controller" if not self._active
                else "a voter set proposal is in flight"))
            return future
        self._voters_in_flight = (voters, future)
        self._propose(b"", encode_command(VotersCommand(self._established_epoch, voters)))
        return future

    async def wait_for_commit(self, offset: int, timeout_s: float) -> bool:
        if self.log.last_committed_offset >= offset:
            return True
        if timeout_s <= 0:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        self._commit_waiters.append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except asyncio.TimeoutError:
            return self.log.last_committed_offset >= offset
        finally:
            if entry in self._commit_waiters:
                self._commit_waiters.remove(entry)

    def install_snapshot(self, snapshot: MetadataSnapshot) -> None:
        assert snapshot.end_offset <= self.log.high_watermark, "snapshot of uncommitted records"
        self.log.compact(snapshot)
        self._compact_replicated_state(snapshot)

    # -- for subclasses --

    @abstractmethod
    def _propose(self, request_id: bytes, payload: bytes) -> None: ...

    @abstractmethod
    def _compact_replicated_state(self, snapshot: MetadataSnapshot) -> None: ...

    def _on_outcome(self, outcome: ApplyOutcome) -> None:
        if isinstance(outcome, Appended):
            self.log.append(outcome.batch)
            for listener in self._listeners:
                listener.handle_commit(outcome.batch)
            self._resolve(outcome.request_id, outcome.batch.base_offset)
            self._wake_commit_waiters()
        elif isinstance(outcome, Duplicate):
            self._resolve(outcome.request_id, outcome.base_offset)
        elif isinstance(outcome, Rejected):
            self._fail_in_flight(outcome.request_id, f"append rejected: {outcome.reason.value}")
        elif isinstance(outcome, LeaderEstablished):
            self._established_epoch = outcome.epoch
            self._established_leader = outcome.leader_id
            self._update_activity(resync_offset=outcome.next_offset)
        elif isinstance(outcome, VotersChanged):
            self.voters_record = outcome.voters
            self._settle_voters(outcome.voters, None)
        elif isinstance(outcome, VotersFenced):
            self._settle_voters(None, "voter set proposal fenced: the leader changed")
        else:
            assert isinstance(outcome, LeaderChangeIgnored)

    def _on_state_loaded(self, state: ReplicatedLogState) -> None:
        """The replicated state was replaced (restart from a dump, snapshot install)."""
        assert state.next_offset >= 0
        snapshot = state.snapshot or MetadataSnapshot(
            state.batches[0].base_offset if state.batches else state.next_offset, 0, ())
        self.log.load_snapshot(snapshot, state.batches)
        for listener in self._listeners:
            listener.handle_load_snapshot(snapshot)
            for batch in state.batches:
                listener.handle_commit(batch)
        self._established_epoch = state.leader_epoch
        self._established_leader = state.leader_id
        self.voters_record = state.voters
        self._fail_all("the metadata log was replaced by a snapshot")
        self._update_activity(resync_offset=state.next_offset)
        self._wake_commit_waiters()

    def _on_role(self, raft_leader_term: int, leader: LeaderAndEpoch) -> None:
        """Raft reports: raft_leader_term is the term this node leads (0: not leader)."""
        self._raft_leader_term = raft_leader_term
        self._set_leader(leader)
        self._update_activity(resync_offset=None)

    def _settle_voters(self, applied: bytes | None, failure: str | None) -> None:
        if self._voters_in_flight is None:
            return
        proposed, future = self._voters_in_flight
        if applied is not None and applied != proposed:
            return      # another leader's (this one's was fenced or is still to come)
        self._voters_in_flight = None
        if future.done():
            return
        if failure is None:
            future.set_result(None)
        else:
            future.set_exception(NotControllerError(self._leader.leader_id, failure))

    def _on_proposal_failed(self, request_id: bytes, reason: str) -> None:
        if request_id == b"":
            self._settle_voters(None, f"voter set proposal failed: {reason}")
            return
        if request_id in self._in_flight:
            # Later entries were proposed with offsets after this one: they will be
            # rejected too. Stop writing until they have all resolved, then resync.
            self._fail_in_flight(request_id, f"append failed: {reason}")

    # -- internals --

    def _set_leader(self, leader: LeaderAndEpoch, force: bool = False) -> None:
        if leader != self._leader or force:
            self._leader = leader
            for listener in self._listeners:
                listener.handle_leader_change(leader)

    def _update_activity(self, resync_offset: int | None) -> None:
        active = (self._raft_leader_term > 0
                  and self._established_epoch == self._raft_leader_term
                  and self._established_leader == self.node_id
                  and not self._closed)
        if active and not self._active:
            if resync_offset is None:
                return      # wait for the LeaderChange to be applied (it carries the offset)
            self._active = True
            self._next_offset = resync_offset
            # Listeners learn that this node became active (is_active is now True) even
            # when Raft had already reported it as the leader of this epoch.
            self._set_leader(LeaderAndEpoch(self.node_id, self._established_epoch), force=True)
        elif not active and self._active:
            self._active = False
            self._fail_all("lost leadership")
            self._set_leader(self._leader, force=True)

    def _maybe_propose(self) -> None:
        while self._active and self._waiting and len(self._in_flight) < self.in_flight_max:
            merged: list[bytes] = []
            futures: list[tuple[asyncio.Future[int], int]] = []
            size = 0
            while self._waiting:
                item = self._waiting[0]
                item_size = sum(len(r) for r in item.records)
                if merged and size + item_size > self.entry_bytes_max:
                    break
                self._waiting.popleft()
                if item.future.done():
                    continue    # cancelled by its caller before we proposed it
                merged.extend(item.records)
                size += item_size
                futures.append((item.future, len(merged) - 1))
            if not merged:
                continue
            request_id = self._writer_id + next(self._sequence).to_bytes(8, "big")
            command = AppendCommand(request_id, self._established_epoch, self._next_offset,
                                    now_ms(), tuple(merged))
            self._next_offset += len(merged)
            self._in_flight[request_id] = _InFlight(command, futures)
            self._propose(request_id, encode_command(command))

    def _resolve(self, request_id: bytes, base_offset: int) -> None:
        in_flight = self._in_flight.pop(request_id, None)
        if in_flight is None:
            return
        for future, index in in_flight.futures:
            if not future.done():
                future.set_result(base_offset + index)
        self._maybe_propose()

    def _fail_in_flight(self, request_id: bytes, reason: str) -> None:
        """An entry will never be applied. Entries proposed after it expect offsets behind
        it, so they are doomed too: fail them now and propose again from its base offset.
        Raft may still hold some of the doomed entries; it will apply them as rejected
        (their expected offset no longer matches), so nothing lands twice or out of place.
        Entries proposed before it stay in flight."""
        if request_id not in self._in_flight:
            return
        request_ids = list(self._in_flight)
        doomed = request_ids[request_ids.index(request_id):]
        self._next_offset = self._in_flight[request_id].command.expected_base_offset
        error = NotControllerError(self.node_id, reason)
        futures = [f for rid in doomed for f, _ in self._in_flight.pop(rid).futures]
        for future in futures:
            if not future.done():
                future.set_exception(error)
        self._maybe_propose()

    def _fail_all(self, reason: str) -> None:
        error_leader = self._leader.leader_id if not self._active else self.node_id
        items = [f for entry in self._in_flight.values() for f, _ in entry.futures]
        items += [w.future for w in self._waiting]
        if self._voters_in_flight is not None:
            items.append(self._voters_in_flight[1])
            self._voters_in_flight = None
        self._in_flight.clear()
        self._waiting.clear()
        for future in items:
            if not future.done():
                future.set_exception(NotControllerError(error_leader, reason))

    def _wake_commit_waiters(self) -> None:
        last = self.log.last_committed_offset
        if not self._commit_waiters:
            return
        still = []
        for offset, future in self._commit_waiters:
            if offset <= last:
                if not future.done():
                    future.set_result(True)
            else:
                still.append((offset, future))
        self._commit_waiters = still

    def _mark_closed(self) -> None:
        self._closed = True
        self._active = False
        self._fail_all("the quorum is closing")


class InMemoryQuorum(QuorumBase):
    """A one-node quorum in memory, for tests of the modules above the port. It applies
    commands with the real ReplicatedLogState on the next loop iteration, so appends are
    asynchronous and fenced exactly as with Raft. `elect` and `depose` stand in for
    elections; `fail_next_proposals` makes Raft lose entries; `hold_commits` stands for a
    quorum that cannot commit (proposals wait until `release_commits`)."""

    def __init__(self, node_id: int = 0, *, active: bool = True, **kwargs: object) -> None:
        super().__init__(node_id, **kwargs)  # type: ignore[arg-type]
        self.state = ReplicatedLogState()
        self._term = 0
        self._lose = 0
        self._held: list[bytes] | None = None
        if active:
            self.elect(node_id)

    def elect(self, leader_id: int) -> None:
        """A new term led by leader_id; if that is this node, it proposes its LeaderChange."""
        self._term += 1
        self._on_role(self._term if leader_id == self.node_id else 0,
                      LeaderAndEpoch(leader_id, self._term))
        self._apply_now(encode_command(LeaderChangeCommand(self._term, leader_id)))

    def depose(self) -> None:
        """This node loses an election it does not take part in: no leader for now."""
        self._term += 1
        self._on_role(0, LeaderAndEpoch(NO_LEADER, self._term))

    def fail_next_proposals(self, count: int) -> None:
        self._lose = count

    def hold_commits(self) -> None:
        self._held = []

    def release_commits(self) -> None:
        held, self._held = self._held or [], None
        for payload in held:
            self._apply_now(payload)

    def _apply_now(self, payload: bytes) -> None:
        self._on_outcome(self.state.apply_encoded(payload))

    def _propose(self, request_id: bytes, payload: bytes) -> None:
        loop = asyncio.get_running_loop()
        if self._lose > 0:
            self._lose -= 1
            loop.call_soon(self._on_proposal_failed, request_id, "lost (test)")
            return
        if self._held is not None:
            self._held.append(payload)
            return
        loop.call_soon(self._apply_now, payload)

    def _compact_replicated_state(self, snapshot: MetadataSnapshot) -> None:
        self.state.compact(snapshot)

    def restart(self) -> None:
        """Drop the asyncio side and reload it from the replicated state, as after a crash."""
        self._on_state_loaded(ReplicatedLogState.decode(self.state.encode()))

    async def close(self) -> None:
        self._mark_closed()
