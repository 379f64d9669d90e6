"""The leader's view of one partition's replicas: LEO, high watermark, ISR, acks=all waits.

Theory of operation
-------------------
A ``PartitionReplica`` is pure: the shell tells it what happened (the local log grew, a
follower fetched, the controller committed a new partition state, time passed) and it
answers with what to do (the high watermark moved, ask the controller to change the ISR,
these acks=all produce requests are now complete). It never touches the log or a socket.

Roles: ``NONE`` (not a replica, or not yet told), ``FOLLOWER`` and ``LEADER``. Only the
metadata log moves a replica between roles (``become_leader`` / ``become_follower`` with
the committed ``PartitionRegistration``); the leader epoch only grows.

High watermark (HW). The leader advances the HW to the smallest log end offset (LEO) among
itself and the replicas in the *maximal* ISR (the committed ISR plus any member a pending
AlterPartition adds: KIP-841, so an expansion in flight cannot let the HW pass a replica
that may become leader). The HW never goes back on a
leader. A new leader does not know its followers' LEOs in the new epoch, so it treats them
as unknown and keeps its HW until every ISR member has fetched (KIP-101: this is what
keeps a new leader from exposing or truncating data on a stale HW).

ISR. A follower is caught up at time T if at T it had fetched up to the leader's LEO, or up
to the LEO the leader had at its previous fetch (Kafka's ``Replica.updateFetchState``). A
follower whose last caught-up time is older than ``replica.lag.time.max.ms`` is dropped
from the ISR; a follower outside the ISR whose LEO reaches both the HW and the start of
the current leader epoch is added back. With eligible leader replicas (KIP-966,
``elr_enabled``) the HW moves only while the committed ISR holds at least the effective
``min.insync.replicas`` (min of it and the replica count): a replica dropped while the ISR
is below that then holds every committed record and may lead (the controller's ELR).
Either change is only *proposed* (an
``AlterIsr`` effect for the controller); the leader acts on the committed result
(``apply_committed``), and proposes nothing while one change is in flight.

acks=all. ``await_replication`` parks a produce until the HW passes its last offset; when
the HW gets there, the request completes with NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if
the ISR shrank below ``min.insync.replicas`` in the meantime. Losing leadership fails every
parked request with NOT_LEADER_OR_FOLLOWER; ``poll`` times them out (REQUEST_TIMED_OUT).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import Hashable, Mapping, cast

from clients.frozen import fast_init
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

__all__ = [
    "AlterIsr", "AppendCheck", "PartitionReplica", "ProduceCompletion", "ReplicaProgress",
    "Role", "UNKNOWN_OFFSET",
]

UNKNOWN_OFFSET = -1


class Role(enum.Enum):
    NONE = "NONE"
    FOLLOWER = "FOLLOWER"
    LEADER = "LEADER"


@dataclass(frozen=True, slots=True)
class AlterIsr:
    """Effect: ask the active controller to commit this ISR (AlterPartition)."""
    partition: TopicPartition
    leader_epoch: int
    partition_epoch: int   # compare-and-set version
    new_isr: tuple[int, ...]


@fast_init
@dataclass(frozen=True, slots=True)
class ProduceCompletion:
    """Effect: a parked acks=all produce for this partition is done."""
    token: Hashable
    error_code: int


@fast_init
@dataclass(frozen=True, slots=True)
class AppendCheck:
    error_code: int        # NONE, NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS


# The three answers of check_append (frozen: shared, not made per append).
_MAY_APPEND = AppendCheck(ErrorCode.NONE)
_NOT_LEADER = AppendCheck(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_NOT_ENOUGH_REPLICAS = AppendCheck(ErrorCode.NOT_ENOUGH_REPLICAS)


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one follower, in the current leader epoch."""
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    leader_end_offset_at_last_fetch: int = UNKNOWN_OFFSET


@dataclass(slots=True)
class _Parked:
    required_offset: int   # HW must reach this (last offset of the batch + 1)
    deadline_ms: int


# Shared, read-only stand-ins for a replica's empty dicts: a replica that parks nothing
# and follows (most of them, at 100k) holds no dicts of its own (64 B each). Written to,
# they raise instead of reaching every replica; a first write puts a dict in place.
_NO_FOLLOWERS = cast("dict[int, ReplicaProgress]", MappingProxyType({}))
_NO_PARKED = cast("dict[Hashable, _Parked]", MappingProxyType({}))


class PartitionReplica:
    # One per hosted replica, idle or not: slots keep the memory per replica down.
    __slots__ = (
        "partition", "local_broker_id", "replica_lag_time_max_ms", "min_insync_replicas",
        "elr_enabled", "role", "leader_id", "leader_epoch", "partition_epoch", "replicas",
        "isr", "pending_isr", "recovering", "log_start_offset", "log_end_offset",
        "high_watermark", "leader_epoch_start_offset", "followers", "_parked", "hw_changed",
    )

    def __init__(self, partition: TopicPartition, local_broker_id: int,
                 replica_lag_time_max_ms: int = 30_000, min_insync_replicas: int = 1,
                 hw_changed: set[TopicPartition] | None = None) -> None:
        assert replica_lag_time_max_ms > 0 and min_insync_replicas >= 1
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        self.elr_enabled = False               # the cluster's eligible.leader.replicas.version
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = -1                 # Invariant: never decreases
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()         # as committed in the metadata log
        self.pending_isr: tuple[int, ...] | None = None  # proposed, not yet committed
        # KIP-704: elected uncleanly and not yet marked RECOVERED in the metadata log.
        self.recovering = False
        # Invariant (leader): log_start_offset <= high_watermark <= log_end_offset
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.leader_epoch_start_offset = 0     # first offset written in this leader epoch
        self.followers: dict[int, ReplicaProgress] = _NO_FOLLOWERS    # a leader's only
        self._parked: dict[Hashable, _Parked] = _NO_PARKED
        # Shared by the broker's replicas: each adds its partition when its HW moves, so
        # the HW checkpoint visits what moved, not every replica (ReplicaManager).
        self.hw_changed = hw_changed

    # ------------------------------------------------------------ role changes

    def become_leader(self, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], log_start_offset: int, log_end_offset: int,
                      high_watermark: int, now_ms: int, recovering: bool = False
                      ) -> list[ProduceCompletion]:
        """The metadata log made this broker leader at ``leader_epoch``; ``recovering``:
        by an unclean election (LeaderRecoveryState RECOVERING)."""
        assert self.local_broker_id in replicas, (self.local_broker_id, replicas)
        assert leader_epoch >= self.leader_epoch, (leader_epoch, self.leader_epoch)
        assert log_start_offset <= log_end_offset
        new_epoch = leader_epoch > self.leader_epoch or self.role is not Role.LEADER
        completions = self._fail_parked(ErrorCode.NOT_LEADER_OR_FOLLOWER) if new_epoch else []
        self.role = Role.LEADER
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.pending_isr = None
        self.recovering = recovering
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self._set_high_watermark(min(max(high_watermark, log_start_offset), log_end_offset))
        if new_epoch:
            self.leader_epoch_start_offset = log_end_offset
            # Followers' LEOs in the new epoch are unknown until they fetch; ISR members
            # count as caught up now so they are not dropped before they had a chance.
            self.followers = {
                r: ReplicaProgress(last_caught_up_time_ms=now_ms if r in isr else 0,
                                   last_fetch_time_ms=now_ms)
                for r in replicas if r != self.local_broker_id
            }
        else:
            self._track_replicas(replicas, now_ms)
        return completions + self._maybe_advance_hw()

    def _track_replicas(self, replicas: tuple[int, ...], now_ms: int) -> None:
        """A replica set changed within the leader epoch (a reassignment adds followers
        before it removes others): track the new ones, forget the removed."""
        self.replicas = tuple(replicas)
        if self.followers is _NO_FOLLOWERS:
            self.followers = {}
        for r in replicas:
            if r != self.local_broker_id and r not in self.followers:
                self.followers[r] = ReplicaProgress(last_fetch_time_ms=now_ms)
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]

    def become_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int,
                        replicas: tuple[int, ...], isr: tuple[int, ...]) -> list[ProduceCompletion]:
        assert leader_epoch >= self.leader_epoch, (leader_epoch, self.leader_epoch)
        completions = self._fail_parked(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.pending_isr = None
        self.followers = _NO_FOLLOWERS
        return completions

    def on_follower_fetched(self, log_start_offset: int, log_end_offset: int,
                            leader_high_watermark: int) -> None:
        """Follower: the fetcher appended what the leader sent; the follower's HW is the
        leader's, capped by what it holds (a follower never exposes more than it has)."""
        assert self.role is Role.FOLLOWER
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self._set_high_watermark(max(min(leader_high_watermark, log_end_offset), log_start_offset))

    def stop(self) -> list[ProduceCompletion]:
        """No longer a replica (partition deleted or reassigned away)."""
        completions = self._fail_parked(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.role = Role.NONE
        self.followers = _NO_FOLLOWERS
        return completions

    def apply_committed(self, leader_epoch: int, partition_epoch: int, isr: tuple[int, ...],
                        replicas: tuple[int, ...], now_ms: int,
                        recovering: bool | None = None) -> list[ProduceCompletion]:
        """A committed partition change in the same leader epoch (an ISR change)."""
        assert self.role is Role.LEADER
        # Only a *newer* partition epoch is news. The same epoch is the state this leader
        # already has (it may have learned it from an AlterPartition answer before the
        # metadata log brought it); taking it again would drop a proposal sent since,
        # which the controller may already have committed (found by tests/sim: the
        # leader then acknowledged with a smaller ISR than the committed one).
        if leader_epoch != self.leader_epoch or partition_epoch <= self.partition_epoch:
            return []
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self._track_replicas(replicas, now_ms)
        self.pending_isr = None
        if recovering is not None:
            self.recovering = recovering
        return self._maybe_advance_hw()

    def abandon_pending_isr(self) -> list[ProduceCompletion]:
        """The controller answered that it did not apply the proposal (or it was never
        sent): back to the committed ISR, propose again later. Not after a lost answer:
        the change may have been committed, so the maximal ISR must keep counting.
        The maximal ISR may shrink here (a proposed member no longer counts), so the HW
        is recomputed at once: the acks=all produces it lets through do not wait for the
        next follower fetch."""
        self.pending_isr = None
        return self._maybe_advance_hw()

    # ------------------------------------------------------------ leader: appends and fetches

    def check_append(self, acks: int) -> AppendCheck:
        """May the leader append now? acks=all needs at least min.insync.replicas in the ISR
        (Kafka checks this before appending, so nothing is written that cannot be acked)."""
        if self.role is not Role.LEADER:
            return _NOT_LEADER
        if acks == -1 and len(self.isr) < self.min_insync_replicas:
            return _NOT_ENOUGH_REPLICAS
        return _MAY_APPEND

    def on_local_append(self, log_end_offset: int,
                        last_fetch_ms: Mapping[int, int] | None = None) -> list[ProduceCompletion]:
        """The leader's log grew to ``log_end_offset``. ``last_fetch_ms``: when each
        follower broker last fetched from this leader (any partition). A follower at the
        old LEO was caught up until now without reporting it per fetch (Kafka's
        isCaughtUp: an equal LEO is in sync), so its last fetch is when it was last
        caught up: the ISR lag from here on counts from then."""
        assert self.role is Role.LEADER
        old = self.log_end_offset
        assert log_end_offset >= old, (log_end_offset, old)
        if last_fetch_ms and log_end_offset > old:
            for r, progress in self.followers.items():
                if progress.log_end_offset == old:
                    fetched_ms = last_fetch_ms.get(r, 0)
                    if fetched_ms > progress.last_caught_up_time_ms:
                        progress.last_caught_up_time_ms = fetched_ms
        self.log_end_offset = log_end_offset
        return self._maybe_advance_hw()

    def on_leader_truncated(self, log_start_offset: int, log_end_offset: int) -> None:
        """A mirror leader cut its own log to follow its source (issue 21: the source
        failed over uncleanly, or truncate-and-restore). The one case where a leader's
        HW goes back: the source, not this cluster, decides what is committed."""
        assert self.role is Role.LEADER
        assert log_start_offset <= log_end_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self._set_high_watermark(min(max(self.high_watermark, log_start_offset), log_end_offset))
        self.leader_epoch_start_offset = min(self.leader_epoch_start_offset, log_end_offset)

    def on_log_start_offset(self, log_start_offset: int) -> None:
        assert log_start_offset <= self.log_end_offset
        self.log_start_offset = log_start_offset
        self._set_high_watermark(max(self.high_watermark, log_start_offset))

    def on_follower_fetch(self, replica_id: int, fetch_offset: int,
                          now_ms: int) -> tuple[list[ProduceCompletion], list[AlterIsr]]:
        """A follower fetched from ``fetch_offset``: that is its LEO (Kafka's rule)."""
        assert self.role is Role.LEADER
        progress = self.followers.get(replica_id)
        if progress is None:
            return [], []
        if fetch_offset >= self.log_end_offset:
            progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= progress.leader_end_offset_at_last_fetch >= 0:
            progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms,
                                                  progress.last_fetch_time_ms)
        progress.log_end_offset = fetch_offset
        progress.leader_end_offset_at_last_fetch = self.log_end_offset
        progress.last_fetch_time_ms = now_ms
        completions = self._maybe_advance_hw()
        return completions, self._maybe_expand_isr(replica_id)

    def on_idle_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """``on_follower_fetch`` for an in-sync follower that fetches again from the LEO
        it already reported, which is this leader's LEO and HW (an idle partition of its
        fetch session): it is caught up now, and nothing else can change (the HW is at the
        LEO already, and an ISR member is never proposed for the ISR). False, with nothing
        changed, when that is not the case: then ``on_follower_fetch`` decides. (An HW
        below the LEO may be due to move although no LEO moved, e.g. after the ISR shrank;
        found by tests/sim.)"""
        progress = self.followers.get(replica_id)
        if (progress is None or self.role is not Role.LEADER
                or fetch_offset != self.log_end_offset or progress.log_end_offset != fetch_offset
                or self.high_watermark != fetch_offset or replica_id not in self.isr):
            return False
        if now_ms > progress.last_caught_up_time_ms:
            progress.last_caught_up_time_ms = now_ms
        progress.leader_end_offset_at_last_fetch = fetch_offset
        progress.last_fetch_time_ms = now_ms
        return True

    def await_replication(self, token: Hashable, required_offset: int,
                          deadline_ms: int) -> list[ProduceCompletion]:
        """Park an acks=all produce until the HW reaches ``required_offset``."""
        assert self.role is Role.LEADER
        if self.high_watermark >= required_offset:
            return [ProduceCompletion(token, self._after_append_error())]
        if self._parked is _NO_PARKED:
            self._parked = {}
        self._parked[token] = _Parked(required_offset, deadline_ms)
        return []

    # ------------------------------------------------------------ time

    def poll(self, now_ms: int) -> tuple[list[ProduceCompletion], list[AlterIsr], int | None]:
        """Time out parked produces and propose an ISR shrink for laggards.
        Returns (completions, effects, ms until the next deadline: ``ms_until_due``)."""
        completions: list[ProduceCompletion] = []
        for token, parked in list(self._parked.items()):
            if parked.deadline_ms <= now_ms:
                del self._parked[token]
                completions.append(ProduceCompletion(token, ErrorCode.REQUEST_TIMED_OUT))
        effects: list[AlterIsr] = []
        if self.role is Role.LEADER and self.pending_isr is None and self.recovering:
            # KIP-704: recovery is immediate here (no tiered state to rebuild); say so
            # with the ISR unchanged before proposing anything else.
            effects.append(self._propose(self.isr))
        elif self.role is Role.LEADER and self.pending_isr is None:
            lagging = self.out_of_sync_replicas(now_ms)
            if lagging:
                new_isr = tuple(r for r in self.isr if r not in lagging)
                effects.append(self._propose(new_isr))
        return completions, effects, self.ms_until_due(now_ms)

    def out_of_sync_replicas(self, now_ms: int) -> set[int]:
        out = set()
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            progress = self.followers.get(r)
            if progress is None or progress.log_end_offset == self.log_end_offset:
                continue        # Kafka's isCaughtUp: at the leader's LEO is in sync, however long ago
            if now_ms - progress.last_caught_up_time_ms > self.replica_lag_time_max_ms:
                out.add(r)
        return out

    def ms_until_due(self, now_ms: int) -> int | None:
        """Milliseconds until ``poll`` has something to do: a parked produce's deadline,
        an in-sync follower's lag deadline (none while it is at the LEO, or while an ISR
        change is in flight). None: nothing
        is due until this replica's state changes (an append, a parked produce, a role
        or ISR change), and whoever changes it asks for a poll then. An idle replica
        then holds no poll entry (100 B per replica at 100k, each re-polled every lag
        time for nothing)."""
        if self.role is Role.LEADER and self.recovering and self.pending_isr is None:
            return 0                    # the recovery proposal is due now
        deadlines = [p.deadline_ms for p in self._parked.values()]
        # A lag deadline only while no ISR change is in flight: until its answer (which
        # asks for a poll) no shrink can be proposed, and a passed deadline had the
        # replica polled every millisecond until then.
        if self.role is Role.LEADER and self.pending_isr is None:
            for r in self.isr:
                progress = self.followers.get(r)
                if progress is not None and progress.log_end_offset != self.log_end_offset:
                    deadlines.append(progress.last_caught_up_time_ms + self.replica_lag_time_max_ms + 1)
        if not deadlines:
            return None
        return max(0, min(deadlines) - now_ms)

    # ------------------------------------------------------------ internals

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def _propose(self, new_isr: tuple[int, ...]) -> AlterIsr:
        self.pending_isr = new_isr
        return AlterIsr(self.partition, self.leader_epoch, self.partition_epoch, new_isr)

    def _maybe_expand_isr(self, replica_id: int) -> list[AlterIsr]:
        if self.pending_isr is not None or replica_id in self.isr or self.recovering:
            return []
        progress = self.followers[replica_id]
        if (progress.log_end_offset >= self.high_watermark
                and progress.log_end_offset >= self.leader_epoch_start_offset):
            return [self._propose(tuple(self.isr) + (replica_id,))]
        return []

    def _maybe_advance_hw(self) -> list[ProduceCompletion]:
        if self.role is not Role.LEADER:
            return []
        if self.elr_enabled and len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
            return []     # KIP-966: nothing is committed while the ISR is under min ISR
        new_hw = self.log_end_offset
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            progress = self.followers.get(r)
            if progress is None:
                continue  # an ISR member that is no longer a replica: the controller drops it
            if progress.log_end_offset == UNKNOWN_OFFSET:
                return []  # an ISR member has not fetched in this epoch yet
            new_hw = min(new_hw, progress.log_end_offset)
        if new_hw <= self.high_watermark:
            return []
        self._set_high_watermark(new_hw)
        return self._complete_parked()

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark != self.high_watermark:
            self.high_watermark = high_watermark
            if self.hw_changed is not None:
                self.hw_changed.add(self.partition)

    def _after_append_error(self) -> int:
        if len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _complete_parked(self) -> list[ProduceCompletion]:
        done = []
        for token, parked in list(self._parked.items()):
            if parked.required_offset <= self.high_watermark:
                del self._parked[token]
                done.append(ProduceCompletion(token, self._after_append_error()))
        return done

    def _fail_parked(self, error_code: int) -> list[ProduceCompletion]:
        done = [ProduceCompletion(token, error_code) for token in self._parked]
        self._parked = _NO_PARKED
        return done
