"""How a follower decides where its log diverges from the leader's (KIP-101, KIP-279).

Theory of operation
-------------------
A replica that becomes a follower (or whose leader changed) must not trust its own
high watermark to truncate: the HW it checkpointed may be stale, and truncating to it
loses records the new leader still has (KIP-101's first scenario), while keeping
everything may keep records the new leader never had (the second). Instead it asks the
leader: OffsetForLeaderEpoch(my latest epoch E) -> (the leader's largest epoch E' <= E,
the end offset of E' on the leader).

``truncation_decision`` turns that answer into either "truncate to X and start fetching"
or "truncate to X and ask again" (KIP-279: when the leader's answer names an epoch the
follower does not have, the follower cuts back to the end of its own largest epoch below
it and asks again, until both logs agree on an epoch):

    leader answers UNDEFINED epoch (it has nothing for E or older):
        truncate to min(leader end offset, my LEO) if the end offset is known, else keep
        only what the leader's log start proves (fall back to my HW, as Kafka does for
        leaders too old to answer).
    my largest epoch <= E' is E' itself:
        truncate to min(leader end offset, my end offset for E'): done.
    my largest epoch <= E' is E'' < E':
        truncate to my end offset for E'' and ask again with E''.
    I have no epoch <= E' at all:
        truncate to min(leader end offset, my LEO).

The follower's fetch offset then starts at the truncation point. All functions here are
pure: the shell performs the truncation and the requests.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

__all__ = ["FetchState", "FollowerPartition", "TruncationDecision", "truncation_decision"]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    truncate_to: int
    done: bool               # False: ask the leader again with ``next_epoch``
    next_epoch: int = UNDEFINED_EPOCH


def truncation_decision(leader_epoch: int, leader_end_offset: int, log_end_offset: int,
                        high_watermark: int,
                        local_end_offset_for: Callable[[int], tuple[int, int]]) -> TruncationDecision:
    """``local_end_offset_for(epoch)`` is the local leader-epoch cache lookup: (largest
    local epoch <= epoch, its end offset), or (UNDEFINED_EPOCH, UNDEFINED_OFFSET)."""
    if leader_end_offset == UNDEFINED_OFFSET:
        # The leader cannot answer for our epoch (it has no epoch that old or newer):
        # KIP-101's fallback is the high watermark, the only offset known to be committed.
        return TruncationDecision(min(high_watermark, log_end_offset), done=True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(leader_end_offset, log_end_offset), done=True)
    local_epoch, local_end = local_end_offset_for(leader_epoch)
    if local_epoch == UNDEFINED_EPOCH:
        # Nothing local at or below the leader's epoch: everything we have diverges.
        return TruncationDecision(min(leader_end_offset, log_end_offset), done=True)
    if local_epoch == leader_epoch:
        return TruncationDecision(min(leader_end_offset, local_end, log_end_offset), done=True)
    # We have no entry for the leader's epoch; our largest below it ends at local_end.
    # Cut there and ask about that epoch next (Kafka's AbstractFetcherThread does the same).
    return TruncationDecision(min(local_end, log_end_offset), done=False, next_epoch=local_epoch)


class FetchState(enum.Enum):
    TRUNCATING = "TRUNCATING"    # waiting for OffsetForLeaderEpoch
    FETCHING = "FETCHING"


@dataclass(slots=True)
class FollowerPartition:
    """A follower's fetch state for one partition it replicates.

    ``paused``: the leader answered FENCED_LEADER_EPOCH (our metadata is older than the
    leader's): wait for the metadata log to name the leader anew. ``retry_at_ms``: the
    leader's metadata is behind ours (it does not lead yet in its view): try again then.
    """
    leader_id: int
    leader_epoch: int
    fetch_offset: int
    state: FetchState = FetchState.TRUNCATING
    epoch_to_ask: int = UNDEFINED_EPOCH   # the local epoch to ask the leader about
    paused: bool = False
    retry_at_ms: int = 0

    def ready(self, now_ms: int) -> bool:
        return not self.paused and self.retry_at_ms <= now_ms
