"""VoterMembership: the active controller's side of KIP-853 (asyncio shell).

The rules are ``quorum/voters.py``'s; this carries a decided change out, one at a time:

1. the new voter set is appended as a ``VotersCommand`` (``MetadataQuorum.propose_voters``)
   and applied: from then on it is the set DescribeQuorum reports and the transport's
   directory check uses;
2. pysyncobj's own membership entry follows (``RaftQuorum.change_raft_membership``: 'add' or
   'rem' of the voter's Raft address), and the request is answered once it is committed.

If the leader fails between the two, the next active controller finds the voter set and
pysyncobj's members apart and finishes the change (``reconcile``, run on every activation
and before every change); a change is refused while they are apart ("in flight").

Also on activation: a quorum started from static configuration gets its first
``VotersRecord`` (the configured voters, this controller's directory id filled in), and a
voter whose directory id is not known yet gets it from the first Raft message it sends
(``directory_seen``, Kafka's ``UpdateRaftVoter`` done by the leader on the voter's behalf).

Removing the active controller itself: pysyncobj cannot remove its own leader, so the
leader hands leadership to another voter and answers NOT_CONTROLLER; the caller retries
on the new leader.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable, Protocol

from clients.clock import now_ms
from clients.protocol.errors import ErrorCode
from clients.protocol.types import ZERO_UUID
from quorum.port import NotControllerError
from quorum.voters import (
    Refusal, Voter, VoterChange, VoterSet, decide_add, decide_remove, decide_update,
    with_directory,
)

log = logging.getLogger(__name__)

CAUGHT_UP_WINDOW_MS_DEFAULT = 5000
_DENIED_RETRY_S = 0.05


class VoterQuorum(Protocol):
    """What VoterMembership needs of the quorum (RaftQuorum; quorum/port.py's base)."""
    node_id: int
    voters_record: bytes | None

    @property
    def is_active(self) -> bool: ...
    @property
    def leader_id(self) -> int: ...
    def propose_voters(self, voters: bytes) -> "asyncio.Future[None]": ...
    def raft_members(self) -> set[str]: ...
    def change_raft_membership(self, kind: str, address: str) -> "asyncio.Future[None]": ...
    def transfer_leadership(self) -> None: ...


class VoterMembership:
    def __init__(self, quorum: VoterQuorum, static: VoterSet, directory_id: uuid.UUID, *,
                 last_caught_up_ms: Callable[[int], int],
                 caught_up_voters: Callable[[], frozenset[int]] | None = None,
                 caught_up_window_ms: int = CAUGHT_UP_WINDOW_MS_DEFAULT,
                 change_timeout_s: float = 10.0,
                 clock_ms: Callable[[], int] = now_ms) -> None:
        self.quorum = quorum
        self.static = static
        self.directory_id = directory_id
        self.last_caught_up_ms = last_caught_up_ms
        # The voters at the leader's log end lately, the leader included (RaftQuorum).
        self.caught_up_voters = caught_up_voters
        self.caught_up_window_ms = caught_up_window_ms
        self.change_timeout_s = change_timeout_s
        self.clock_ms = clock_ms
        self._lock = asyncio.Lock()
        self._pending_directories: dict[int, uuid.UUID] = {}
        self._task: asyncio.Task[None] | None = None
        self.changes_made = 0

    # -- reads --

    def current(self) -> VoterSet:
        record = self.quorum.voters_record
        return VoterSet.decode(record) if record is not None else self.static

    def in_flight(self) -> bool:
        return self._lock.locked() or self._apart()

    def _apart(self) -> bool:
        wanted = {v.raft_address for v in self.current().voters}
        return wanted != self.quorum.raft_members()

    # -- requests (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) --

    async def add(self, candidate: Voter) -> Refusal | None:
        decision = decide_add(self.current(), candidate, change_in_flight=self.in_flight(),
                              last_caught_up_ms=self.last_caught_up_ms(candidate.voter_id),
                              now_ms=self.clock_ms(), caught_up_window_ms=self.caught_up_window_ms)
        return await self._carry_out(decision)

    async def remove(self, voter_id: int, directory_id: uuid.UUID) -> Refusal | None:
        decision = decide_remove(self.current(), voter_id, directory_id,
                                 change_in_flight=self.in_flight(),
                                 caught_up=None if self.caught_up_voters is None else self.caught_up_voters())
        if isinstance(decision, VoterChange) and voter_id == self.quorum.node_id:
            self.quorum.transfer_leadership()
            raise NotControllerError(self.quorum.leader_id, "the active controller is the voter to "
                                     "remove: leadership moves to another voter, retry there")
        return await self._carry_out(decision)

    async def update(self, voter: Voter) -> Refusal | None:
        decision = decide_update(self.current(), voter, change_in_flight=self.in_flight())
        return None if decision is None else await self._carry_out(decision)

    async def _carry_out(self, decision: VoterChange | Refusal) -> Refusal | None:
        if isinstance(decision, Refusal):
            return decision
        if not self.quorum.is_active:
            raise NotControllerError(self.quorum.leader_id)
        async with self._lock:
            async with asyncio.timeout(self.change_timeout_s):
                await self.quorum.propose_voters(decision.after.encode())
                if decision.raft_address is not None:
                    await self._raft_change(decision.kind, decision.raft_address)
        self.changes_made += 1
        log.info("voter set is now %s (%s of voter %d, directory %s)",
                 list(decision.after.ids), decision.kind, decision.voter.voter_id,
                 decision.voter.directory_id)
        return None

    async def _raft_change(self, kind: str, address: str) -> None:
        """pysyncobj refuses a change while its previous one is not applied (and until its
        leader's first entry is): retry until it takes it."""
        while True:
            if not self.quorum.is_active:
                raise NotControllerError(self.quorum.leader_id)
            members = self.quorum.raft_members()
            if (kind == "add") == (address in members):
                return      # already so (a retry after an unknown outcome)
            try:
                await self.quorum.change_raft_membership(kind, address)
                return
            except Exception as e:      # MembershipChangeError: REQUEST_DENIED and the like
                log.debug("raft membership %s %s not taken yet: %s", kind, address, e)
                await asyncio.sleep(_DENIED_RETRY_S)

    # -- QuorumListener: only leader changes matter here --

    def handle_commit(self, batch: object) -> None:
        pass

    def handle_load_snapshot(self, snapshot: object) -> None:
        pass

    def handle_leader_change(self, leader: object) -> None:
        if self.quorum.is_active:
            self.activated()

    # -- on activation, and as Raft messages reveal directory ids --

    def activated(self) -> None:
        """The driver's leader-change hook: this node just became the active controller."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._settle())

    def directory_seen(self, voter_id: int, directory_id: uuid.UUID) -> None:
        """RaftQuorum saw a voter's first message naming its directory (tick thread, posted)."""
        self._pending_directories[voter_id] = directory_id
        if self.quorum.is_active:
            self.activated()

    async def _settle(self) -> None:
        try:
            await self._reconcile()
            if self.quorum.voters_record is None:
                first = self.static
                own = first.get(self.quorum.node_id)
                if own is not None and own.directory_id == ZERO_UUID:
                    first = VoterSet.of(with_directory(v, self.directory_id)
                                        if v.voter_id == self.quorum.node_id else v for v in first.voters)
                async with self._lock:
                    await self.quorum.propose_voters(first.encode())
            while self._pending_directories and self.quorum.is_active:
                voter_id, directory = self._pending_directories.popitem()
                existing = self.current().get(voter_id)
                if existing is not None and existing.directory_id == ZERO_UUID:
                    refusal = await self.update(with_directory(existing, directory))
                    if refusal is not None and refusal.error_code == ErrorCode.REQUEST_TIMED_OUT:
                        # Another change is in flight: record this one after it.
                        self._pending_directories.setdefault(voter_id, directory)
                        await asyncio.sleep(_DENIED_RETRY_S)
                    elif refusal is not None:
                        log.warning("directory id of voter %d not recorded: %s", voter_id, refusal.message)
        except NotControllerError:
            pass
        except Exception:
            log.exception("settling the voter set failed (retried on the next activation)")

    async def _reconcile(self) -> None:
        """Finish a change the previous leader left between its two steps."""
        async with self._lock, asyncio.timeout(self.change_timeout_s):
            while self.quorum.is_active and self._apart():
                wanted = {v.raft_address for v in self.current().voters}
                members = self.quorum.raft_members()
                extra, missing = sorted(members - wanted), sorted(wanted - members)
                own = self.static.get(self.quorum.node_id)
                if own is not None and own.raft_address in extra:
                    # This leader was removed from the voter set: pysyncobj cannot remove
                    # its own leader, so another voter leads and finishes the change.
                    self.quorum.transfer_leadership()
                    return
                kind, address = ("remove", extra[0]) if extra else ("add", missing[0])
                log.info("finishing an interrupted voter change: %s %s", kind, address)
                await self._raft_change(kind, address)


def refusal_code(refusal: Refusal | None) -> tuple[int, str | None]:
    if refusal is None:
        return ErrorCode.NONE, None
    return refusal.error_code, refusal.message
