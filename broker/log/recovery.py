"""Recovery: walk a segment's batches, keep the valid prefix, say what was cut and why.

Theory of operation
-------------------
After an unclean stop (no clean-shutdown marker) the tail of the log may hold anything
the disk kept of writes that were never fsynced: a batch cut short (a torn tail), zeros
where the file size reached the disk before the data, or a flipped byte. Recovery walks
every segment from the one holding the recovery point (everything before it was
fsynced, Kafka's `recoveryPoint`) to the end, and for each batch checks, in order:

1. the 61 header bytes are present, magic is 2, and batch_length is at least 49;
2. the whole batch is present (else the tail is torn);
3. the CRC-32C over attributes..end matches (bits flipped in the covered part);
4. offsets go forward: base_offset >= the previous batch's last offset + 1 (and >= the
   segment's base offset), and the last offset fits a relative int32 index entry.
   This catches damage to base_offset and batch_length, which the CRC does not cover.

The first batch that fails ends the segment's valid prefix: the caller truncates the
file there and deletes every later segment (a later segment cannot be trusted to follow
a gap; Kafka does the same in `LogLoader.recoverLog`). Nothing past the first bad batch
is ever served. A `SegmentWalk` reports how far the walk got and why it stopped.

Not detectable by any check (as in Kafka): a flipped bit in `partition_leader_epoch`,
or in `base_offset` that still leaves offsets increasing; v2 leaves both outside the CRC
so the broker can stamp them without recomputing it.

`walk_segment` is pure: it reads through a `read_at(position, length)` callable and
reports each valid batch to `on_batch(position, header)`, so indexes and the leader
epoch cache are rebuilt in the same pass.

Swap files. The compaction cleaner commits a cleaned segment by renaming
`<base>.log.cleaned` to `<base>.log.swap`, deleting the segments it replaces, and then
renaming the swap file to `<base>.log` (Kafka's `replaceSegments`). A crash between
those steps leaves a `.swap` file; loading (`partition_log._tidy_directory`) walks it with
`walk_segment` to learn its offset range, deletes the segments inside that range and
makes the swap file live, instead of keeping both copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from clients.records import BATCH_HEADER_SIZE, BatchHeader, RecordError, read_batch_header, validate_batches

__all__ = [
    "SegmentWalk",
    "RecoveryReport",
    "SegmentRecovery",
    "walk_segment",
    "WALK_CHUNK_BYTES",
]

WALK_CHUNK_BYTES = 8 * 1024 * 1024
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SegmentWalk:
    """How far a walk over one segment got."""

    valid_bytes: int  # Invariant: 0 <= valid_bytes <= size_bytes walked
    next_offset: int  # last valid batch's last offset + 1, or the offset the walk began at
    batches: int
    max_timestamp: int
    stop_reason: str | None  # None: every byte was a valid batch


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovery did to one segment."""

    base_offset: int
    valid_bytes: int
    truncated_bytes: int
    batches: int
    stop_reason: str | None


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What loading a partition log found and did (logged by the caller, asserted by tests)."""

    clean_shutdown: bool
    recovered_segments: tuple[SegmentRecovery, ...] = ()
    deleted_segments: tuple[int, ...] = ()  # base offsets of segments after a corrupt one
    rebuilt_indexes: tuple[int, ...] = ()  # base offsets whose index files were rebuilt
    completed_swaps: tuple[int, ...] = ()  # base offsets of .swap files made live
    truncated_bytes: int = 0  # total bytes cut from the tail
    log_end_offset: int = 0

    @property
    def dropped_anything(self) -> bool:
        return self.truncated_bytes > 0 or bool(self.deleted_segments)


def walk_segment(
    read_at: Callable[[int, int], bytes],
    size_bytes: int,
    base_offset: int,
    on_batch: Callable[[int, BatchHeader], None],
    *,
    start_position: int = 0,
    next_offset_min: int | None = None,
    chunk_bytes: int = WALK_CHUNK_BYTES,
) -> SegmentWalk:
    """Validate batches from `start_position` to `size_bytes`; stop at the first bad one.

    `read_at(position, length)` returns up to `length` bytes (fewer only at the end).
    `next_offset_min` is the smallest base offset the first batch may have (the segment's
    base offset unless the walk resumes after a known batch).
    """
    assert 0 <= start_position <= size_bytes
    assert chunk_bytes >= BATCH_HEADER_SIZE
    next_offset = base_offset if next_offset_min is None else next_offset_min
    max_timestamp = -1
    batches = 0
    pos = start_position
    chunk = b""
    chunk_start = pos  # file position of chunk[0]
    while pos < size_bytes:
        remaining = size_bytes - pos
        if remaining < BATCH_HEADER_SIZE:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"torn batch header: {remaining} bytes at position {pos}")
        if pos + BATCH_HEADER_SIZE > chunk_start + len(chunk):
            chunk = read_at(pos, min(chunk_bytes, remaining))
            chunk_start = pos
        at = pos - chunk_start
        try:
            header = read_batch_header(chunk, at)
        except RecordError as e:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"bad batch header at position {pos}: {e}")
        size = header.size_in_bytes
        if size > remaining:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"torn batch at position {pos}: {size} bytes declared, "
                               f"{remaining} present")
        if at + size > len(chunk):
            # The batch runs past the chunk: read from its start, at least all of it.
            chunk = read_at(pos, min(max(chunk_bytes, size), remaining))
            chunk_start, at = pos, 0
            if len(chunk) < size:
                return SegmentWalk(pos, next_offset, batches, max_timestamp,
                                   f"short read at position {pos}")
        try:
            validate_batches(memoryview(chunk)[at : at + size])
        except RecordError as e:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"corrupt batch at position {pos} (offset "
                               f"{header.base_offset}): {e}")
        if header.base_offset < next_offset or header.last_offset_delta < 0:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"offsets out of order at position {pos}: base offset "
                               f"{header.base_offset} after next offset {next_offset}")
        if header.last_offset - base_offset > _INT32_MAX:
            return SegmentWalk(pos, next_offset, batches, max_timestamp,
                               f"offset {header.last_offset} at position {pos} does not fit "
                               f"segment {base_offset}")
        on_batch(pos, header)
        batches += 1
        next_offset = header.last_offset + 1
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
        pos += size
    return SegmentWalk(pos, next_offset, batches, max_timestamp, None)
