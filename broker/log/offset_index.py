"""The sparse offset index of one segment: offset -> position of a batch in the .log file.

Theory of operation
-------------------
Kafka's `.index` file holds 8-byte entries, big-endian `int32 relative_offset` (offset
minus the segment's base offset) and `int32 position` (bytes from the start of the .log
file). An entry is added after at least `index.interval.bytes` of log since the previous
one, so the index stays small (1 GiB of log at 4 KiB is 2 MiB of index) and a lookup is a
binary search followed by a short forward walk over batch headers.

As in Kafka (`LogSegment.append`), the entry for a batch records the batch's *last*
offset and its *start* position. A lookup for `target` returns the entry with the largest
offset <= target (or `(base_offset, 0)`): the batch at that position ends at or before
`target`, so the batch holding `target` is that one or a later one, and the walk never
has to go back. Truncating to `offset` drops entries whose offset is >= offset; the batch
that straddles the cut has its last offset >= offset, so its entry goes with it.

Entries live in two `array('i')` columns (4 bytes per value, bisect works on them) and
are written to the file incrementally: `unpersisted()` gives the bytes not yet in the
file and where they go, `mark_persisted()` records that the caller wrote them. The class
does no I/O (STYLE.md 1); `LogSegment` moves the bytes through the storage port.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["OffsetIndex", "OffsetPosition", "CorruptIndexError", "OFFSET_INDEX_ENTRY_BYTES"]

OFFSET_INDEX_ENTRY_BYTES = 8
_ENTRY = struct.Struct(">ii")
_INT32_MAX = 2**31 - 1


class CorruptIndexError(ValueError):
    """An index file that fails its sanity check; the caller rebuilds it from the log."""


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int  # absolute offset
    position: int  # byte position in the segment's .log file


class OffsetIndex:
    def __init__(self, base_offset: int, entries_max: int) -> None:
        assert base_offset >= 0
        assert entries_max >= 1
        self.base_offset = base_offset
        self.entries_max = entries_max
        # Invariant: both columns have the same length; each is strictly increasing.
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")
        # Invariant: 0 <= _persisted <= len(self); entries [0, _persisted) are in the file.
        self._persisted = 0

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.entries_max

    @property
    def last_entry(self) -> OffsetPosition:
        if not self._offsets:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[-1], self._positions[-1])

    def can_append_offset(self, offset: int) -> bool:
        """Whether `offset` fits a relative int32 (else the segment must roll first)."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        assert not self.is_full, "caller rolls the segment before the index is full"
        assert 0 <= relative <= _INT32_MAX, (offset, self.base_offset)
        assert 0 <= position <= _INT32_MAX, position
        if self._offsets:
            assert relative > self._offsets[-1], (offset, self.last_entry)
            assert position > self._positions[-1], (position, self.last_entry)
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target_offset, or (base_offset, 0)."""
        i = bisect_right(self._offsets, target_offset - self.base_offset) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[i], self._positions[i])

    def lookup_position(self, position: int) -> OffsetPosition:
        """The entry with the largest position <= position, or (base_offset, 0).

        Used to find where to start walking when a read is cut at a byte limit.
        """
        i = bisect_right(self._positions, position) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[i], self._positions[i])

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= offset."""
        i = bisect_right(self._offsets, offset - self.base_offset - 1)
        del self._offsets[i:]
        del self._positions[i:]
        self._persisted = min(self._persisted, i)

    def truncate_to_position(self, position: int) -> None:
        """Drop every entry whose position is >= position (recovery cut a torn tail)."""
        i = bisect_right(self._positions, position - 1)
        del self._offsets[i:]
        del self._positions[i:]
        self._persisted = min(self._persisted, i)

    def clear(self) -> None:
        self.truncate_to(self.base_offset)

    # --- persistence (the caller does the I/O) -------------------------------------

    def persisted_bytes(self) -> int:
        return self._persisted * OFFSET_INDEX_ENTRY_BYTES

    def unpersisted(self) -> tuple[int, bytes]:
        """(file position, bytes) of the entries not yet written to the file."""
        start = self._persisted
        data = b"".join(
            _ENTRY.pack(self._offsets[i], self._positions[i]) for i in range(start, len(self))
        )
        return start * OFFSET_INDEX_ENTRY_BYTES, data

    def forget_persisted(self) -> None:
        """The file was recreated empty: every entry must be written again."""
        self._persisted = 0

    def mark_persisted(self) -> None:
        self._persisted = len(self._offsets)

    def to_bytes(self) -> bytes:
        return b"".join(_ENTRY.pack(o, p) for o, p in zip(self._offsets, self._positions))

    @classmethod
    def from_bytes(
        cls, base_offset: int, entries_max: int, data: bytes, log_size_bytes: int
    ) -> OffsetIndex:
        """Load an index file, checking what Kafka's `sanityCheck` checks and a bit more.

        Raises CorruptIndexError if the length is not a whole number of entries, entries
        are not strictly increasing, or a position lies beyond the log's end.
        """
        if len(data) % OFFSET_INDEX_ENTRY_BYTES:
            raise CorruptIndexError(f"index of {len(data)} bytes is not whole entries")
        index = cls(base_offset, max(entries_max, len(data) // OFFSET_INDEX_ENTRY_BYTES))
        both = array("i")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        offsets, positions = both[0::2], both[1::2]
        for column in (offsets, positions):
            if any(b <= a for a, b in zip(column, column[1:])):
                raise CorruptIndexError("index entries are not strictly increasing")
        if offsets and (offsets[0] < 0 or positions[0] < 0):
            raise CorruptIndexError("negative index entry")
        if positions and positions[-1] >= log_size_bytes:
            raise CorruptIndexError(
                f"index entry at position {positions[-1]} past log end {log_size_bytes}"
            )
        index._offsets = offsets
        index._positions = positions
        index._persisted = len(offsets)
        return index
