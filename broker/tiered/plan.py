"""What a tiered partition's leader does next (KIP-405), decided from plain facts: which local
segments to copy to remote storage, which remote segments total retention expires, how long
to back off after a failure, and where a search by time starts. Pure: the shell
(``manager``) gathers the facts, carries out the decisions and records them in
``__remote_log_metadata``.

Copy: a segment is copied once closed (not the active one) and wholly below the high
watermark (Kafka's RemoteLogManager copies up to the last stable offset, so nothing a
truncation may remove ever reaches the archive), in offset order, each only if it holds
offsets above the highest already copied.

Total retention (retention.ms / retention.bytes, cleanup.policy delete) applies to the whole
log: the remote segments from the oldest while the oldest's newest record is older than
retention.ms, or while the log (remote segments plus the local segments above the remote
part) is larger than retention.bytes by at least that segment's size; and every remote
segment wholly below the log start offset (DeleteRecords). Kafka's
RLMExpirationTask.cleanupExpiredRemoteLogSegments.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from clients.tiered.metadata import RemoteLogSegmentMetadata
from clients.records import decode_batch, iter_batches

__all__ = ["LocalSegment", "backoff_ms", "first_record_at_or_after",
           "remote_segments_to_delete", "segment_leader_epochs",
           "segments_to_copy", "time_index_floor_offset"]


@dataclass(frozen=True, slots=True)
class LocalSegment:
    """A local segment as the copy decision needs it."""
    base_offset: int
    next_offset: int          # one past its last offset
    size_bytes: int
    is_active: bool


def segments_to_copy(segments: Sequence[LocalSegment], high_watermark: int,
                     highest_copied_offset: int) -> list[LocalSegment]:
    """The closed segments below the high watermark holding offsets not yet copied, in
    order. A segment that only partly lies above ``highest_copied_offset`` (a new leader's
    boundaries differ from the old one's) is copied whole: the overlap is harmless, a read
    finds the batch it asks for in either copy."""
    chosen = []
    for s in segments:
        if s.is_active or s.next_offset > high_watermark:
            break
        if s.next_offset - 1 > highest_copied_offset and s.size_bytes > 0:
            chosen.append(s)
    return chosen


def remote_segments_to_delete(copied: Sequence[RemoteLogSegmentMetadata], now_ms: int,
                              retention_ms: int, retention_bytes: int, local_bytes_above: int,
                              log_start_offset: int) -> list[tuple[RemoteLogSegmentMetadata, str]]:
    """The remote segments total retention removes, oldest first, each with why.
    ``copied``: the readable remote segments by start offset; ``local_bytes_above``: the
    size of the local segments above the highest copied offset."""
    doomed: list[tuple[RemoteLogSegmentMetadata, str]] = []
    size_over = (sum(s.segment_size_bytes for s in copied) + local_bytes_above - retention_bytes
                 if retention_bytes >= 0 else -1)
    for s in copied:
        if s.end_offset < log_start_offset:
            reason = "log start offset"
        elif retention_ms >= 0 and now_ms - s.max_timestamp_ms > retention_ms:
            reason = "retention.ms"
        elif retention_bytes >= 0 and size_over - s.segment_size_bytes >= 0:
            reason = "retention.bytes"
        else:
            break
        size_over -= s.segment_size_bytes
        doomed.append((s, reason))
    return doomed


def backoff_ms(attempt: int, initial_ms: int, max_ms: int, rng: random.Random,
               jitter: float = 0.2) -> int:
    """Kafka's exponential backoff with jitter: initial * 2^(attempt-1), capped, +-jitter."""
    assert attempt >= 1
    base = min(max_ms, initial_ms * (2 ** min(attempt - 1, 30)))
    return max(1, int(base * (1 + rng.uniform(-jitter, jitter))))


def segment_leader_epochs(entries: Sequence[tuple[int, int]], base_offset: int,
                          end_offset: int) -> tuple[tuple[int, int], ...]:
    """The (epoch, first offset) entries covering [base_offset, end_offset] from a log's
    leader epoch entries (ascending by start offset): the epoch in force at the base
    offset, starting there, then every epoch starting inside the range."""
    covering: list[tuple[int, int]] = []
    for epoch, start in entries:
        if start > end_offset:
            break
        if start <= base_offset:
            covering = [(epoch, base_offset)]
        else:
            covering.append((epoch, start))
    return tuple(covering)


_TIME_INDEX_ENTRY_BYTES = 12


def time_index_floor_offset(time_index: bytes, base_offset: int, timestamp: int) -> int:
    """Where a search for the first record at or after ``timestamp`` starts in a segment:
    the offset of the last time index entry whose timestamp is below it (Kafka's format:
    int64 timestamp, int32 relative offset), the base offset when none is. The entries'
    timestamps never decrease along the index."""
    found = base_offset
    for at in range(0, len(time_index) - _TIME_INDEX_ENTRY_BYTES + 1, _TIME_INDEX_ENTRY_BYTES):
        ts = int.from_bytes(time_index[at:at + 8], "big", signed=True)
        if ts >= timestamp:
            break
        found = base_offset + int.from_bytes(time_index[at + 8:at + 12], "big", signed=True)
    return found


def first_record_at_or_after(chunk: bytes, timestamp: int) -> tuple[tuple[int, int] | None, int]:
    """((record timestamp, offset) of the first record of ``chunk``'s whole batches whose
    timestamp is at or after ``timestamp``, or None; bytes of whole batches looked at), so
    the shell reads on from there. Control batches hold no user record."""
    consumed = 0
    for pos, header in iter_batches(chunk, partial_tail_ok=True):
        consumed = pos + header.size_in_bytes
        if header.max_timestamp < timestamp or header.is_control:
            continue
        for record in decode_batch(chunk, pos).records:
            if record.timestamp >= timestamp:
                return (record.timestamp, record.offset), consumed
    return None, consumed
