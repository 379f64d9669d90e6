"""The sparse time index of one segment: timestamp -> offset to start searching from.

Theory of operation
-------------------
Kafka's `.timeindex` holds 12-byte entries, big-endian `int64 timestamp` and `int32
relative_offset`. Entries are added alongside offset index entries, but only when the
segment's running maximum timestamp has grown: an entry `(t, o)` says "the running
maximum first reached t in the batch at offset o". Every record before `o` therefore has
a timestamp < t, which is what makes the lookup correct: for a target timestamp T, the
entry with the largest t <= T names an offset before which nothing can have a timestamp
>= T, so a forward scan from there finds the first batch whose max timestamp is >= T
(Kafka: `TimeIndex.lookup`, `LogSegment.findOffsetByTimestamp`).

Unlike Kafka's, our entry stores the *base* offset of the batch that raised the maximum,
so the scan starts at a batch boundary found through the offset index.

Timestamps are the batches' max timestamps (LogAppendTime or CreateTime, whichever the
batch carries). No I/O here; `LogSegment` persists `unpersisted()` bytes.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from dataclasses import dataclass

from broker.log.offset_index import CorruptIndexError

__all__ = ["TimeIndex", "TimestampOffset", "TIME_INDEX_ENTRY_BYTES", "NO_TIMESTAMP"]

TIME_INDEX_ENTRY_BYTES = 12
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex:
    def __init__(self, base_offset: int, entries_max: int) -> None:
        assert base_offset >= 0 and entries_max >= 1
        self.base_offset = base_offset
        self.entries_max = entries_max
        # Invariant: timestamps strictly increasing; offsets non-decreasing.
        self._timestamps = array("q")
        self._offsets = array("i")  # relative
        self._persisted = 0

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.entries_max

    @property
    def last_entry(self) -> TimestampOffset:
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._offsets[-1])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append if `timestamp` is a new maximum; returns whether it did.

        `skip_full_check`: the final entry at roll or close may exceed `entries_max` by
        one, so the last entry is always the segment's maximum (Kafka does the same).
        """
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return False
        if timestamp < 0:
            return False  # NO_TIMESTAMP batches never enter the index
        relative = offset - self.base_offset
        assert skip_full_check or not self.is_full, "caller rolls before the index is full"
        assert 0 <= relative <= _INT32_MAX
        if self._offsets:
            assert relative >= self._offsets[-1]
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base_offset)."""
        i = bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[i], self.base_offset + self._offsets[i])

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= offset."""
        keep = len(self._offsets)
        while keep and self.base_offset + self._offsets[keep - 1] >= offset:
            keep -= 1
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self._persisted = min(self._persisted, keep)

    def clear(self) -> None:
        self.truncate_to(self.base_offset)

    def persisted_bytes(self) -> int:
        return self._persisted * TIME_INDEX_ENTRY_BYTES

    def unpersisted(self) -> tuple[int, bytes]:
        start = self._persisted
        data = b"".join(
            _ENTRY.pack(self._timestamps[i], self._offsets[i]) for i in range(start, len(self))
        )
        return start * TIME_INDEX_ENTRY_BYTES, data

    def forget_persisted(self) -> None:
        """The file was recreated empty: every entry must be written again."""
        self._persisted = 0

    def mark_persisted(self) -> None:
        self._persisted = len(self._timestamps)

    @classmethod
    def from_bytes(
        cls, base_offset: int, entries_max: int, data: bytes, next_offset: int
    ) -> TimeIndex:
        """Load a time index file; raise CorruptIndexError when it fails the sanity check.

        `next_offset` is the segment's end (exclusive): every entry must lie before it.
        """
        if len(data) % TIME_INDEX_ENTRY_BYTES:
            raise CorruptIndexError(f"time index of {len(data)} bytes is not whole entries")
        index = cls(base_offset, max(entries_max, len(data) // TIME_INDEX_ENTRY_BYTES))
        previous_ts, previous_rel = NO_TIMESTAMP, 0
        for timestamp, relative in _ENTRY.iter_unpack(data):
            if timestamp <= previous_ts or relative < previous_rel or relative < 0:
                raise CorruptIndexError("time index entries are not increasing")
            if base_offset + relative >= next_offset:
                raise CorruptIndexError("time index entry past the segment's end")
            index._timestamps.append(timestamp)
            index._offsets.append(relative)
            previous_ts, previous_rel = timestamp, relative
        index._persisted = len(index._timestamps)
        return index
