"""One log segment: a `.log` file of record batches and its two sparse indexes.

Theory of operation
-------------------
A segment covers offsets [base_offset, next_offset). Its files are named by the base
offset in 20 digits (`00000000000000001234.log`, `.index`, `.timeindex`), as Kafka's.
Only the last segment of a partition (the active one) is appended to; a rolled segment
never changes again except by truncation (follower divergence), deletion (retention)
or replacement by a cleaned copy (compaction).

State and invariants:

* `size_bytes` is the length of the valid prefix of the `.log` file; the file is never
  longer once the segment is loaded (recovery truncates it).
* Every batch in [0, size_bytes) has been validated: appended by us after a CRC check or
  walked by recovery. Reads trust headers in that range; a header that fails to parse
  there is disk corruption, raised as `SegmentCorruptError` (KAFKA_STORAGE_ERROR).
* The indexes cover a prefix of the batches; an entry is added after more than
  `index_interval_bytes` of log since the previous one (Kafka's `bytesSinceLastIndexEntry`).
* `max_timestamp` is the largest batch max_timestamp in the segment; the time index's
  last entry never exceeds it and equals the running maximum as of the last offset index
  entry, so after a truncation the maximum is the last time entry combined with a walk
  from the last offset index entry.

Lazy loading. A partition with many rolled segments opens only the active one; a
rolled segment loads its index files the first time a read, a truncation or retention
needs it (`_ensure_loaded`), checks them (Kafka's `sanityCheck`) and rebuilds them from
the log when they are missing or fail.

Index files are written only at flush, roll and close (`flush_indexes`); in between the
entries live in memory. After an unclean stop the segments recovery walks get fresh
indexes anyway, and older segments' index files were written and fsynced at their roll.

Reads. `read` returns a `FileSlice` of whole batches, found in three steps: the batch
holding the fetch offset (index lookup, then a walk over headers), the position where
the upper bound offset starts (same), and the last batch ending within the byte limit
(an index lookup by position, then a walk over at most two index intervals). A read
from the tail (the batches since the index's last entry or the one before it, kept in
memory: a follower's next fetch, a consumer at the HW) takes the three steps as
bisections over the tail and reads no header from the file.
"""

from __future__ import annotations

import logging
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable, Container, NamedTuple

from broker.log.config import LogConfig
from broker.log.offset_index import CorruptIndexError, OffsetIndex
from broker.log.recovery import SegmentRecovery, walk_segment
from broker.log.storage import FileSlice, Storage
from broker.log.time_index import NO_TIMESTAMP, TimeIndex
from broker.log.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex
from clients.frozen import fast_init
from clients.records import BATCH_HEADER_SIZE, BatchHeader, RecordError, read_batch_header

__all__ = [
    "LogSegment",
    "BatchPosition",
    "SegmentCorruptError",
    "segment_file_name",
    "parse_segment_file_name",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
]

log = logging.getLogger("ketch.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_INT32_MAX = 2**31 - 1
_ABSENT = -1  # an index file known not to exist (an empty index is not written)


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name, or None for other files."""
    digits, dot, _ = name.partition(".")
    if len(digits) != 20 or not digits.isdigit() or not dot:
        return None
    return int(digits), name[20:]


class SegmentCorruptError(Exception):
    """Bytes inside a segment's validated range no longer parse: the disk changed them."""


class AppendedBatch(NamedTuple):
    """What a segment needs of a batch it appends (cheaper than a re-read header)."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size_in_bytes: int
    partition_leader_epoch: int
    records_count: int


@fast_init
@dataclass(frozen=True, slots=True)
class BatchPosition:
    position: int
    header: BatchHeader


class LogSegment:
    # Slots and paths derived on demand: a broker keeps one of these per partition even
    # when the partition is idle, so its size is part of the memory per replica.
    __slots__ = (
        "storage", "dir_path", "base_offset", "config", "created_ms", "size_bytes",
        "_offset_index", "_time_index", "_next_offset", "_max_timestamp",
        "_offset_of_max_timestamp", "_first_batch_timestamp", "_bytes_since_index_entry",
        "_last_batch_position", "_index_file_bytes", "_time_index_file_bytes",
        "_index_files_unsynced", "_tail", "_txn_index", "_log_path",
    )

    def __init__(
        self,
        storage: Storage,
        dir_path: str,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        size_bytes: int,
    ) -> None:
        assert base_offset >= 0 and size_bytes >= 0
        self.storage = storage
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.size_bytes = size_bytes
        # Loaded state (None / -1 until _ensure_loaded or an append sets it).
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._next_offset = base_offset  # Invariant: base_offset <= _next_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._first_batch_timestamp: int | None = None  # rolling base of segment.ms
        self._bytes_since_index_entry = 0
        self._last_batch_position = -1  # start of the last batch the tail walk saw
        # Bytes of each index file on disk; None: the file is absent or of unknown shape
        # and must be rewritten whole at the next flush.
        self._index_file_bytes: int | None = None
        self._time_index_file_bytes: int | None = None
        self._index_files_unsynced = False  # written since their last fsync
        # The batches at the end of the segment, as (last offsets, positions, base
        # offsets), from the offset index's last entry's batch or the one before it (an
        # append that adds an entry keeps the previous interval) to the end (None: not
        # known, e.g. before the tail walk). Fetches at the tail (a follower's next fetch, a caught-up
        # consumer's) are answered from these alone, without reading a header from the
        # file; others find their batch here instead of reading every header since the
        # last index entry (up to index.interval.bytes of them).
        self._tail: tuple[array, array, array] | None = None
        self._txn_index: TransactionIndex | None = None     # loaded on first use
        # Kept once used (every append and read names it); an idle replica's is not.
        self._log_path: str | None = None

    @property
    def log_path(self) -> str:
        path = self._log_path
        if path is None:
            path = self._log_path = f"{self.dir_path}/{segment_file_name(self.base_offset, LOG_SUFFIX)}"
        return path

    @property
    def index_path(self) -> str:
        return f"{self.dir_path}/{segment_file_name(self.base_offset, INDEX_SUFFIX)}"

    @property
    def time_index_path(self) -> str:
        return f"{self.dir_path}/{segment_file_name(self.base_offset, TIME_INDEX_SUFFIX)}"

    @property
    def txn_index_path(self) -> str:
        return f"{self.dir_path}/{segment_file_name(self.base_offset, TXN_INDEX_SUFFIX)}"

    @property
    def txn_index(self) -> TransactionIndex:
        """The aborted transactions whose ABORT marker is in this segment."""
        if self._txn_index is None:
            self._txn_index = TransactionIndex.load(self.storage, self.txn_index_path)
        return self._txn_index

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls, storage: Storage, dir_path: str, base_offset: int, config: LogConfig, now_ms: int,
        new_dir: bool = False,
    ) -> LogSegment:
        """``new_dir``: the directory was made just now, so no stale file can be there."""
        segment = cls(storage, dir_path, base_offset, config, created_ms=now_ms, size_bytes=0)
        storage.create(f"{dir_path}/{segment_file_name(base_offset, LOG_SUFFIX)}")  # not kept
        for path in () if new_dir else (segment.index_path, segment.time_index_path, segment.txn_index_path):
            # Stale files of an earlier segment at this offset. Only if there: a delete
            # records the path's generation for good (FileStorage), ~500 B per replica
            # for three files a new partition never had.
            if storage.exists(path):
                storage.delete(path)
        # The indexes load on first use, as an existing segment's do: from absent files
        # and an empty log they are empty. An idle partition (most of them, at 100k) then
        # holds no index objects at all: about 1.2 KB less per replica.
        return segment

    @classmethod
    def open_existing(
        cls, storage: Storage, dir_path: str, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        """A segment found on disk; its indexes load on first use."""
        path = f"{dir_path}/{segment_file_name(base_offset, LOG_SUFFIX)}"
        return cls(storage, dir_path, base_offset, config, now_ms, storage.size(path))

    # --- loading --------------------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._offset_index is not None

    def _ensure_loaded(self) -> None:
        if self._offset_index is not None:
            return
        try:
            self._load_indexes()
        except (CorruptIndexError, FileNotFoundError, SegmentCorruptError) as e:
            log.warning("segment %s: rebuilding indexes (%s)", self.log_path, e)
            self.rebuild_indexes(truncate=False)

    def load_strict(self, present: Container[str] | None = None) -> None:
        """Load the index files and walk the tail; raise instead of rebuilding.

        For the active segment after a clean shutdown: any surprise there means the
        shutdown was not as clean as the marker says, and the caller recovers instead.
        ``present``: the names in the segment's directory (its listing at open); a file not
        among them is absent and not opened. An empty segment without index files has
        nothing to check and stays unloaded (a restart of 100,000 idle partitions opened
        two absent files for each, and kept two empty indexes each).
        """
        if self._offset_index is not None:
            return
        if present is not None and self.size_bytes == 0 and not any(
                segment_file_name(self.base_offset, suffix) in present
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            return
        try:
            self._load_indexes(present)
        except BaseException:
            self._offset_index = self._time_index = None
            raise

    def _load_indexes(self, present: Container[str] | None = None) -> None:
        # An index with no entries is never written (creating two files per partition
        # dominates the shutdown of 10,000 small partitions), so a missing file is an
        # empty index; for a big segment that is suspicious and rebuilds below.
        data = self._read_index_file(INDEX_SUFFIX, present)
        offset_index = OffsetIndex.from_bytes(
            self.base_offset, self.config.offset_index_entries_max, data or b"",
            max(self.size_bytes, 1)
        )
        if self.size_bytes and not offset_index.is_full and len(offset_index) == 0 and (
            self.size_bytes > 2 * self.config.index_interval_bytes + self.config.max_message_bytes
        ):
            # An empty index over a big segment: the file was never written (a crash
            # between roll and index flush). Walking 1 GiB per lookup would be the cost.
            raise CorruptIndexError("empty index over a large segment")
        tdata = self._read_index_file(TIME_INDEX_SUFFIX, present)
        if tdata is None and len(offset_index) and self.size_bytes:
            # Without time entries the segment's max timestamp is only known from a walk
            # of every batch, which an index with entries does not do: rebuild both.
            raise CorruptIndexError("time index missing beside a non-empty offset index")
        self._offset_index = offset_index
        self._index_file_bytes = _ABSENT if data is None else len(data)
        # The walk below fills next_offset; check the time index against it afterwards.
        self._time_index = TimeIndex(self.base_offset, self.config.time_index_entries_max)
        self._time_index_file_bytes = None
        self._recompute_tail_state()
        if len(offset_index) == 0 and self._last_batch_position > self.config.index_interval_bytes:
            # No entries, yet a batch starts past the first interval: the index had
            # entries once (its file missing or emptied by a crash).
            self._offset_index = None
            raise CorruptIndexError("empty index for a segment that had entries")
        time_index = TimeIndex.from_bytes(
            self.base_offset, self.config.time_index_entries_max, tdata or b"", self._next_offset
        )
        self._time_index = time_index
        self._time_index_file_bytes = _ABSENT if tdata is None else len(tdata)
        last = time_index.last_entry
        if last.timestamp > self._max_timestamp:
            self._max_timestamp = last.timestamp
            self._offset_of_max_timestamp = last.offset

    def _read_index_file(self, suffix: str, present: Container[str] | None) -> bytes | None:
        """The file's bytes; None when absent (``present`` names the files there)."""
        name = segment_file_name(self.base_offset, suffix)
        if present is not None and name not in present:
            return None
        return self.storage.read_file(f"{self.dir_path}/{name}")

    def rebuild_indexes(
        self,
        *,
        truncate: bool,
        next_offset_min: int | None = None,
        on_batch: Callable[[int, BatchHeader], None] | None = None,
    ) -> SegmentRecovery:
        """Walk every batch, rebuild both indexes; with `truncate`, cut an invalid tail.

        Without `truncate` (a rolled segment below the recovery point whose index was
        bad), an invalid tail is left on disk but no longer served.
        """
        self._offset_index = OffsetIndex(self.base_offset, self.config.offset_index_entries_max)
        self._time_index = TimeIndex(self.base_offset, self.config.time_index_entries_max)
        self._index_file_bytes = None
        self._time_index_file_bytes = None
        self._reset_tail_state()
        file_bytes = self.storage.size(self.log_path)
        index_batch = self._index_batch
        if on_batch is None:
            callback = index_batch
        else:
            def callback(position: int, header: BatchHeader) -> None:
                index_batch(position, header)
                on_batch(position, header)
        walk = walk_segment(
            self._read, file_bytes, self.base_offset, callback,
            next_offset_min=max(self.base_offset, next_offset_min or 0),
        )
        if walk.stop_reason is not None:
            log.warning("segment %s: %s; %d bytes after position %d %s", self.log_path,
                        walk.stop_reason, file_bytes - walk.valid_bytes, walk.valid_bytes,
                        "truncated" if truncate else "not served")
            if truncate:
                self.storage.truncate(self.log_path, walk.valid_bytes)
        self.size_bytes = walk.valid_bytes
        self._next_offset = walk.next_offset
        self._append_final_time_entry()
        return SegmentRecovery(self.base_offset, walk.valid_bytes,
                               file_bytes - walk.valid_bytes, walk.batches, walk.stop_reason)

    def _reset_tail_state(self) -> None:
        self._next_offset = self.base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._first_batch_timestamp = None
        self._bytes_since_index_entry = 0
        self._tail = (array("q"), array("q"), array("q"))

    def _recompute_tail_state(self) -> None:
        """next_offset and max_timestamp from the last index entries and a short walk."""
        assert self._offset_index is not None and self._time_index is not None
        entry = self._offset_index.last_entry
        last_time = self._time_index.last_entry
        self._max_timestamp = last_time.timestamp
        self._offset_of_max_timestamp = last_time.offset
        self._bytes_since_index_entry = 0
        self._next_offset = self.base_offset
        pos = entry.position
        self._last_batch_position = -1
        if self.size_bytes and self._first_batch_timestamp is None:
            self._first_batch_timestamp = self._header_at(0).max_timestamp
        tail_offsets, tail_positions, tail_bases = self._tail = (array("q"), array("q"), array("q"))
        while pos < self.size_bytes:
            self._last_batch_position = pos
            header = self._header_at(pos)
            tail_offsets.append(header.last_offset)
            tail_positions.append(pos)
            tail_bases.append(header.base_offset)
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.base_offset
            self._next_offset = header.last_offset + 1
            self._bytes_since_index_entry += header.size_in_bytes
            pos += header.size_in_bytes
        if pos != self.size_bytes:
            raise SegmentCorruptError(f"{self.log_path}: batches end at {pos}, not {self.size_bytes}")

    # --- facts ----------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """One past the last offset of the last batch (base_offset when empty)."""
        if self.size_bytes:         # an empty segment's needs no loading: an idle log's end
            self._ensure_loaded()
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        self._ensure_loaded()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._ensure_loaded()
        return self._offset_of_max_timestamp

    @property
    def offset_index(self) -> OffsetIndex:
        self._ensure_loaded()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        self._ensure_loaded()
        assert self._time_index is not None
        return self._time_index

    def largest_timestamp_ms(self) -> int:
        """For retention: the max batch timestamp, or the creation time if there is none."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.created_ms

    def time_waited_for_roll_ms(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """Kafka's `timeWaitedForRoll`: by record time once the segment holds a batch."""
        self._ensure_loaded()
        if self._first_batch_timestamp is not None and self._first_batch_timestamp >= 0:
            return incoming_max_timestamp - self._first_batch_timestamp
        return now_ms - self.created_ms

    def index_room_for(self, batches: int) -> bool:
        """Whether `batches` more batches can be indexed without passing either limit."""
        self._ensure_loaded()
        offsets, times = self._offset_index, self._time_index
        assert offsets is not None and times is not None
        return (len(offsets) + batches < offsets.entries_max
                and len(times) + batches < times.entries_max)

    # --- append ---------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[AppendedBatch]) -> int:
        """Write validated batches with assigned offsets at the end; returns the position."""
        self._ensure_loaded()
        assert batches and batches[0].base_offset >= self._next_offset, (batches[0], self._next_offset)
        assert batches[-1].last_offset - self.base_offset <= _INT32_MAX
        assert self.size_bytes + len(data) <= _INT32_MAX
        position = self.size_bytes
        self.storage.write(self.log_path, position, data)
        pos = position
        index_batch = self._index_batch
        for batch in batches:
            index_batch(pos, batch)
            pos += batch.size_in_bytes
        assert pos == position + len(data), (pos, position, len(data))
        self.size_bytes = pos
        self._next_offset = batches[-1].last_offset + 1
        return position

    def _index_batch(self, position: int, header: BatchHeader | AppendedBatch) -> None:
        assert self._offset_index is not None and self._time_index is not None
        if self._first_batch_timestamp is None:
            self._first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            tail = self._tail
            if tail is not None and tail[1]:
                # The tail keeps the batches from the index's last entry until this one
                # too: a consumer a batch or two behind the log end (at the HW) still
                # reads from memory when this batch starts an index interval.
                cut = bisect_left(tail[1], self._offset_index.last_entry.position)
                if cut:
                    for column in tail:
                        del column[:cut]
                tail[0].append(header.last_offset)
                tail[1].append(position)
                tail[2].append(header.base_offset)
            else:
                self._tail = (array("q", (header.last_offset,)), array("q", (position,)),
                              array("q", (header.base_offset,)))
            self._offset_index.append(header.last_offset, position)
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        elif self._tail is not None:
            self._tail[0].append(header.last_offset)
            self._tail[1].append(position)
            self._tail[2].append(header.base_offset)
        self._bytes_since_index_entry += header.size_in_bytes

    def _append_final_time_entry(self) -> None:
        """At roll and close, so the time index's last entry is the segment's maximum."""
        assert self._time_index is not None
        if self._max_timestamp >= 0:
            self._time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )

    def on_become_inactive(self) -> None:
        self._ensure_loaded()
        self._append_final_time_entry()

    # --- reads ----------------------------------------------------------------------------

    def _read(self, position: int, length: int) -> bytes:
        return self.storage.read(self.log_path, position, length)

    def _header_at(self, position: int) -> BatchHeader:
        data = self.storage.read(self.log_path, position, BATCH_HEADER_SIZE)
        try:
            header = read_batch_header(data)
        except RecordError as e:
            raise SegmentCorruptError(f"{self.log_path} at {position}: {e}") from None
        if position + header.size_in_bytes > self.size_bytes:
            raise SegmentCorruptError(f"{self.log_path} at {position}: batch overruns segment")
        return header

    def find_batch(self, offset: int, from_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= `offset`, or None if there is none.

        `from_position` must be a batch boundary at or before that batch.
        """
        entry = self.offset_index.lookup(offset)
        pos = max(entry.position, from_position)
        tail = self._tail
        if tail is not None and tail[1] and pos >= tail[1][0]:
            # Every batch from tail[1][0] on is in the tail: one header read, no scan.
            last_offsets, positions = tail[0], tail[1]
            i = max(bisect_left(last_offsets, offset), bisect_left(positions, pos))
            return BatchPosition(positions[i], self._header_at(positions[i])) \
                if i < len(positions) else None
        while pos < self.size_bytes:
            header = self._header_at(pos)
            if header.last_offset >= offset:
                return BatchPosition(pos, header)
            pos += header.size_in_bytes
        return None

    def _last_batch_ending_by(self, start: int, limit: int) -> BatchPosition | None:
        """The last batch starting at or after `start` whose end is <= `limit`."""
        tail = self._tail
        if tail is not None and tail[1] and start >= tail[1][0]:
            positions = tail[1]
            i = bisect_right(positions, limit) - 1      # the last batch starting by limit
            while i >= 0 and (positions[i + 1] if i + 1 < len(positions) else self.size_bytes) > limit:
                i -= 1
            if i < 0 or positions[i] < start:
                return None
            return BatchPosition(positions[i], self._header_at(positions[i]))
        index = self.offset_index
        upper = index.lookup_position(limit - 1)
        origin = start
        if upper.position > start:
            lower = index.lookup_position(upper.position - 1)
            origin = max(start, lower.position)
        last = None
        pos = origin
        while pos < limit:
            header = self._header_at(pos)
            if pos + header.size_in_bytes > limit:
                break
            last = BatchPosition(pos, header)
            pos += header.size_in_bytes
        return last

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Whole batches from the one holding `start_offset`, up to `max_bytes` and ending
        before the first batch whose last offset is >= `max_offset`.

        None when no batch here has an offset >= start_offset (try the next segment). An
        empty slice when there is one but nothing can be returned. With `min_one_batch`
        the first batch comes back whole even past `max_bytes` (KIP-74).
        """
        tail = self._tail
        if tail is not None and tail[2] and start_offset >= tail[2][0]:
            return self._read_tail(tail, start_offset, max_bytes, max_offset, min_one_batch)
        first = self.find_batch(start_offset)
        if first is None:
            return None
        generation = self.storage.generation(self.log_path)
        empty = FileSlice(self.log_path, generation, first.position, 0, start_offset, start_offset - 1)
        if first.header.base_offset >= max_offset:
            return empty
        if max_offset >= self.next_offset:
            bound = self.size_bytes
        else:
            stop = self.find_batch(max_offset, from_position=first.position)
            bound = stop.position if stop is not None else self.size_bytes
        limit = min(bound, first.position + max(max_bytes, 0))
        last = self._last_batch_ending_by(first.position, limit) if limit > first.position else None
        if last is None:
            end = first.position + first.header.size_in_bytes
            if not min_one_batch or end > bound:
                return empty
            last = first
        end = last.position + last.header.size_in_bytes
        return FileSlice(self.log_path, generation, first.position, end - first.position,
                         first.header.base_offset, last.header.last_offset)

    def _read_tail(self, tail: tuple[array, array, array], start_offset: int, max_bytes: int,
                   max_offset: int, min_one_batch: bool) -> FileSlice | None:
        """`read` from the tail's batches alone (`start_offset` is at or past the tail's
        first base offset, so every batch before the tail ends below it): the same three
        steps as the general read, each a bisection over the tail, no header read."""
        last_offsets, positions, bases = tail
        n = len(positions)
        i = bisect_left(last_offsets, start_offset)
        if i == n:
            return None
        position = positions[i]
        path = self.log_path
        generation = self.storage.generation(path)
        if bases[i] >= max_offset:
            return FileSlice(path, generation, position, 0, start_offset, start_offset - 1)
        size = self.size_bytes
        if max_offset >= self._next_offset:
            bound = size
        else:
            j = bisect_left(last_offsets, max_offset, i)
            bound = positions[j] if j < n else size
        limit = min(bound, position + max(max_bytes, 0))
        # The last batch from i on that ends by limit: the one starting at or before it,
        # or the one before that when it runs past.
        k = bisect_right(positions, limit, i) - 1
        while k >= i and (positions[k + 1] if k + 1 < n else size) > limit:
            k -= 1
        if k < i:
            end = positions[i + 1] if i + 1 < n else size
            if not min_one_batch or end > bound:
                return FileSlice(path, generation, position, 0, start_offset, start_offset - 1)
            k = i
        end = positions[k + 1] if k + 1 < n else size
        return FileSlice(path, generation, position, end - position, bases[i], last_offsets[k])

    def iter_headers(self, from_position: int = 0) -> list[BatchPosition]:
        """Every batch header from `from_position` (cleaner, timestamp search, tests)."""
        out = []
        pos = from_position
        while pos < self.size_bytes:
            header = self._header_at(pos)
            out.append(BatchPosition(pos, header))
            pos += header.size_in_bytes
        return out

    def read_bytes(self, position: int, length: int) -> bytes:
        """Bytes of whole batches found by a walk. The cleaner calls this from its own
        thread, where a truncation or deletion by the owner can shrink the segment
        under it: that is a SegmentCorruptError for the cleaner to give up on, not a bug."""
        if position < 0 or position + length > self.size_bytes:
            raise SegmentCorruptError(f"{self.log_path}: [{position}, +{length}) is past the end")
        data = self._read(position, length)
        if len(data) != length:
            raise SegmentCorruptError(f"{self.log_path}: short read at {position}")
        return data

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> BatchPosition | None:
        """The first batch at or after `start_offset` whose max timestamp is >= timestamp."""
        entry = self.time_index.lookup(timestamp)
        begin = self.find_batch(max(entry.offset, start_offset))
        if begin is None:
            return None
        pos = begin.position
        while pos < self.size_bytes:
            header = self._header_at(pos)
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                return BatchPosition(pos, header)
            pos += header.size_in_bytes
        return None

    # --- truncation -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> tuple[int, int | None]:
        """Remove every batch whose last offset is >= `offset`.

        Returns (bytes removed, base offset of the first removed batch or None). The
        batch holding `offset` goes whole, as in Kafka's `LogSegment.truncateTo`.
        """
        first = self.find_batch(offset)
        if first is None:
            return 0, None
        removed = self.size_bytes - first.position
        cut_offset = first.header.base_offset
        self.storage.truncate(self.log_path, first.position)
        self.size_bytes = first.position
        assert self._offset_index is not None and self._time_index is not None
        self._offset_index.truncate_to(cut_offset)
        self._time_index.truncate_to(cut_offset)
        self.txn_index.truncate_to(cut_offset)
        if self.size_bytes == 0:
            self._first_batch_timestamp = None
        self._recompute_tail_state()
        return removed, cut_offset

    # --- durability -----------------------------------------------------------------------

    def flush(self, *, indexes: bool) -> None:
        """fsync the log file; with `indexes`, then write and fsync the index files.

        The active segment skips its indexes: it always holds the recovery point, so an
        unclean start rebuilds them anyway; a rolled segment's index files must be durable.
        """
        self.storage.fsync(self.log_path)
        if self._txn_index is not None:
            self._txn_index.flush()
        if indexes:
            self.flush_indexes(fsync=True)

    def flush_indexes(self, *, fsync: bool) -> None:
        if self._offset_index is None or self._time_index is None:
            return  # never loaded: the files on disk are as they were
        for index, path, attr in (
            (self._offset_index, self.index_path, "_index_file_bytes"),
            (self._time_index, self.time_index_path, "_time_index_file_bytes"),
        ):
            file_bytes = getattr(self, attr)
            start, data = index.unpersisted()
            # Files are skipped only while the offset index is empty: once it has entries
            # both exist, so a missing time index means a lost file (see _load_indexes).
            if len(self._offset_index) == 0 and file_bytes in (None, _ABSENT):
                if file_bytes is None:
                    self.storage.delete(path)  # empty: no file (see _load_indexes)
                    setattr(self, attr, _ABSENT)
                continue
            if file_bytes is None or file_bytes == _ABSENT:
                self.storage.create(path)
                index.forget_persisted()
                start, data = index.unpersisted()
                file_bytes = 0
            if file_bytes != start:
                self.storage.truncate(path, start)
            if data:
                self.storage.write(path, start, data)
            if data or file_bytes != start:
                self._index_files_unsynced = True
            index.mark_persisted()
            setattr(self, attr, start + len(data))
        if fsync and self._index_files_unsynced:
            if self._index_file_bytes not in (None, _ABSENT):
                self.storage.fsync(self.index_path)
            if self._time_index_file_bytes not in (None, _ABSENT):
                self.storage.fsync(self.time_index_path)
            self._index_files_unsynced = False

    def close(self, *, fsync: bool = True) -> None:
        if self.is_loaded:
            self._append_final_time_entry()
        if fsync and self._txn_index is not None:
            self._txn_index.flush()
        self.flush_indexes(fsync=fsync)

    def delete_files(self, retire_suffix: str | None = None) -> list[str]:
        """Delete the segment's files, or with ``retire_suffix`` rename them to it (Kafka's
        file.delete.delay.ms: deleted later; start-up tidying removes leftovers).
        Returns the retired paths."""
        retired = []
        self._txn_index = None
        for path in (self.log_path, self.index_path, self.time_index_path, self.txn_index_path):
            if retire_suffix is not None and self.storage.exists(path):
                self.storage.rename(path, path + retire_suffix)
                retired.append(path + retire_suffix)
            else:
                self.storage.delete(path)
        self._offset_index = OffsetIndex(self.base_offset, self.config.offset_index_entries_max)
        self._time_index = TimeIndex(self.base_offset, self.config.time_index_entries_max)
        self.size_bytes = 0
        self._tail = None           # nothing to read from memory either
        return retired

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size_bytes={self.size_bytes})"
