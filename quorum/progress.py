"""Where each member of the metadata quorum is, as the leader sees it (pure: no I/O, no clock).

Theory of operation
-------------------
DescribeQuorum (KIP-595, KIP-836) reports, for every voter and observer, its log end
offset, when the leader last heard from it (``last_fetch_timestamp``) and the last time
it was known to be caught up with the leader (``last_caught_up_timestamp``). Kafka's
leader keeps a ``ReplicaState`` per replica and updates it on each Fetch; this module
does the same for Ketch, whose quorum is not driven by Fetch requests:

- **voters** replicate through pysyncobj. Its leader keeps, per follower, the *match
  index* (the last Raft index the follower acknowledged) and the time of its last
  acknowledgement. ``quorum/raft.py`` reads both on pysyncobj's thread and reports each
  new acknowledgement here as a fetch; ``RaftOffsetIndex`` turns the Raft index into a
  metadata offset.
- **observers** (brokers) fetch the committed log from any controller. The active
  controller sees the Fetch requests sent to it, and learns the position of the others
  from their BrokerHeartbeat (``current_metadata_offset``): both are reported here as
  fetches (``quorum/server.py``). An observer that says nothing for
  ``OBSERVER_SESSION_TIMEOUT_MS`` is forgotten, as in Kafka.

Caught-up rule (Kafka's ``LeaderState.ReplicaState``): a fetch at or beyond the leader's
current log end makes the replica caught up *now*; a fetch that reaches the leader's log
end as it was at the replica's previous fetch makes it caught up *as of that previous
fetch*. Timestamps never go backwards.

Offsets: a Raft entry holds one metadata batch or none (leader changes, pysyncobj's
no-ops), so the metadata log end after Raft index ``i`` is the ``next_offset`` recorded
for the greatest applied index ``<= i``. Entries a follower holds beyond what this
leader has applied are not mapped (they are at most the appends in flight, a millisecond
or two): such a follower is reported at the leader's applied end.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["OBSERVER_SESSION_TIMEOUT_MS", "RaftOffsetIndex", "ReplicaProgress",
           "ReplicaTracker", "UNKNOWN"]

UNKNOWN = -1                                # Kafka's -1 for an unknown offset or timestamp
OBSERVER_SESSION_TIMEOUT_MS = 300_000       # Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS
INDEX_ENTRIES_MAX = 200_000


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    replica_id: int
    log_end_offset: int                     # UNKNOWN until the first fetch
    last_fetch_timestamp: int               # wall-clock ms, UNKNOWN until the first fetch
    last_caught_up_timestamp: int           # wall-clock ms, UNKNOWN until caught up once


@dataclass(slots=True)
class _State:
    log_end_offset: int = UNKNOWN
    last_fetch_ms: int = UNKNOWN
    last_caught_up_ms: int = UNKNOWN
    # The leader's log end offset when this replica last fetched (Kafka's
    # lastFetchLeaderLogEndOffset).
    leader_end_at_last_fetch: int = UNKNOWN


class ReplicaTracker:
    """Kafka's per-replica fetch state for one leader epoch."""

    def __init__(self) -> None:
        self._states: dict[int, _State] = {}

    def observe_fetch(self, replica_id: int, log_end_offset: int, leader_end_offset: int,
                      now_ms: int) -> None:
        assert log_end_offset >= 0 and leader_end_offset >= 0, (log_end_offset, leader_end_offset)
        s = self._states.setdefault(replica_id, _State())
        if log_end_offset >= leader_end_offset:
            s.last_caught_up_ms = max(s.last_caught_up_ms, now_ms)
        elif (s.leader_end_at_last_fetch > 0 and log_end_offset >= s.leader_end_at_last_fetch
              and s.last_fetch_ms != UNKNOWN):
            s.last_caught_up_ms = max(s.last_caught_up_ms, s.last_fetch_ms)
        s.last_fetch_ms = max(s.last_fetch_ms, now_ms)
        s.leader_end_at_last_fetch = leader_end_offset
        # An observer may move between controllers and report an older position through
        # one of them for a moment: positions only go forward within an epoch.
        s.log_end_offset = max(s.log_end_offset, log_end_offset)

    def forget_idle(self, now_ms: int, idle_ms: int = OBSERVER_SESSION_TIMEOUT_MS) -> None:
        for rid in [r for r, s in self._states.items()
                    if s.last_fetch_ms != UNKNOWN and now_ms - s.last_fetch_ms > idle_ms]:
            del self._states[rid]

    def forget(self, replica_id: int) -> None:
        self._states.pop(replica_id, None)

    def reset(self) -> None:
        """A new leader epoch: what an earlier term's leader saw says nothing now."""
        self._states.clear()

    def get(self, replica_id: int) -> ReplicaProgress:
        s = self._states.get(replica_id, _State())
        return ReplicaProgress(replica_id, s.log_end_offset, s.last_fetch_ms, s.last_caught_up_ms)

    def replicas(self) -> list[ReplicaProgress]:
        return [self.get(r) for r in sorted(self._states)]


class RaftOffsetIndex:
    """Raft index -> metadata log end offset after that entry, for the last
    ``entries_max`` applied entries that carried records (module docstring)."""

    def __init__(self, entries_max: int = INDEX_ENTRIES_MAX) -> None:
        assert entries_max > 1
        self.entries_max = entries_max
        # Invariant: both strictly increasing, same length.
        self._indexes: list[int] = []
        self._offsets: list[int] = []

    def record(self, raft_index: int, next_offset: int) -> None:
        """``next_offset`` is the metadata log end once the entry at ``raft_index`` is
        applied. Entries come in index order; a state load (restart, install-snapshot)
        may start the sequence over at a lower index."""
        if self._indexes and raft_index <= self._indexes[-1]:
            self.clear()
        if self._offsets and next_offset == self._offsets[-1]:
            return          # no records in this entry: the earlier mapping covers it
        self._indexes.append(raft_index)
        self._offsets.append(next_offset)
        if len(self._indexes) > self.entries_max:
            half = self.entries_max // 2
            del self._indexes[:half]
            del self._offsets[:half]

    def clear(self) -> None:
        self._indexes.clear()
        self._offsets.clear()

    def offset_at(self, raft_index: int) -> int:
        """The metadata log end after ``raft_index`` (UNKNOWN when that entry is older
        than what the index still holds)."""
        i = bisect.bisect_right(self._indexes, raft_index)
        if i == 0:
            return UNKNOWN
        return self._offsets[i - 1]

    @property
    def last_index(self) -> int:
        return self._indexes[-1] if self._indexes else UNKNOWN
