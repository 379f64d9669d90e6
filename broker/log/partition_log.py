"""The log of one topic-partition: segments, offsets, epochs, durability, retention.

Theory of operation
-------------------
A partition log is a directory of segments (`segment.py`) ordered by base offset, plus
the leader epoch checkpoint. The last segment is the active one; appends go there.

Offsets, with the invariants kept by every operation:

    log_start_offset <= log_end_offset                (first readable / next to assign)
    segments[0].base_offset <= log_start_offset
    recovery_point <= log_end_offset                  (all offsets below it are fsynced)
    first_dirty_offset in [log_start_offset, log_end_offset]  (the cleaner's mark)
    epochs in the cache start at offsets in [log_start_offset, log_end_offset)

Operations and what they change:

* `append_as_leader` validates (CRC, magic, sizes, record counts; keys on compacted
  topics), assigns offsets from the LEO, stamps the leader epoch (and LogAppendTime when
  the topic asks for it) in place, maybe rolls, writes, and records a new epoch in the
  cache. A failure returns an error code and leaves the log untouched: nothing is written
  before everything is validated.
* `append_as_follower` keeps the leader's offsets and epochs, checking they go forward.
* `read` returns a `FileSlice` of whole batches, bounded by `max_offset` (the high
  watermark for consumers, the LEO for followers) and `max_bytes` (KIP-74: the first batch
  whole even if larger, when `min_one_batch`).
* `truncate_to` (follower divergence, KIP-101) and `truncate_fully_and_start_at`
  (a follower that fell below the leader's log start).
* `delete_old_segments` (retention.ms, retention.bytes, the log start offset) and
  `maybe_increment_log_start_offset` (DeleteRecords).
* Durability: `flush` fsyncs up to the LEO and moves the recovery point; appends run
  flush.messages and `poll` flush.ms; a roll fsyncs the segment it closes before the new
  one takes a byte (so a crash loses only the log's tail, never whole batches in the
  middle, which Kafka's deferred roll flush allows); `close` is the clean shutdown.
  Loading (`open`) trusts a clean shutdown and otherwise recovers every
  segment from the one holding the recovery point (`recovery.py`).

Files besides the segments, and the order that keeps them consistent after a crash:

* `leader-epoch-checkpoint` (Kafka's format). Written at once by truncations and log
  start moves; a new epoch from an append only marks it dirty, and it is written before
  the recovery point passes that epoch's start (recovery re-learns epochs at or above
  the recovery point from the batches, as KAFKA-15046 reasons).
* `log-start-offset`, only while DeleteRecords has put the log start inside the first
  segment; written before the epoch checkpoint forgets the epochs below it. (Kafka keeps
  this in a data-directory checkpoint written every minute; per partition it can be
  made durable at the moment it matters.)
* `<base>.txnindex` per segment: the aborted transactions whose ABORT marker is in it
  (`transaction_index.py`), appended by `append_aborted_txn`, queried across segments by
  `collect_aborted_transactions`, deleted, truncated and merged with their segments.
* `<offset>.snapshot`: producer state snapshots (bytes owned by `broker.producer_state`);
  written by the replica manager at rolls and shutdown, deleted here with the segments
  below them (retention), above a truncation point, and when unreachable at open.
* The recovery point lives in the data directory's checkpoint (`LogManager`);
  `on_recovery_point_lowered` asks for a rewrite when a truncation lowers it.

Everything is synchronous and single-threaded: one owner (the partition's driver) calls
these methods. The cleaner reads only rolled segments, which do not change except
through methods of this class, and commits through `replace_segments`, which checks the
segments it replaces are still the current ones.
"""

from __future__ import annotations

import logging
import zlib
from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Collection, Container

from broker.log.config import NO_LIMIT, LogConfig
from broker.log.leader_epoch_cache import (
    CorruptCheckpointError,
    EpochEndOffset,
    LeaderEpochCache,
)
from broker.log.offset_index import CorruptIndexError
from broker.log.recovery import RecoveryReport, SegmentRecovery, walk_segment
from broker.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentCorruptError,
    parse_segment_file_name,
    segment_file_name,
)
from broker.log.storage import FileSlice, Storage
from broker.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn
from clients.frozen import fast_init
from clients.protocol.errors import ErrorCode
from broker.log.segment import AppendedBatch
from clients.records import (
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    RecordError,
    TimestampType,
    assign_base_offset,
    build_batch,
    decode_batch,
    keyless_records,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)

__all__ = [
    "PartitionLog",
    "AppendResult",
    "AppendOrigin",
    "LogReadResult",
    "TimestampAndOffset",
    "RetentionResult",
    "LEADER_EPOCH_CHECKPOINT",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
]

log = logging.getLogger("ketch.log")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# The log start offset when it lies inside the first segment (DeleteRecords); absent when
# the first segment's base offset says it. Text: a version line "0", then the offset.
LOG_START_OFFSET_FILE = "log-start-offset"
# ListOffsets sentinels (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
# ListOffsets v8+ (KIP-405) and v9+ (KIP-1005); broker/tiered answers them for tiered
# topics, whose log starts in remote storage.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
_INT32_MAX = 2**31 - 1
_NO_DEADLINE_MS = 2**31 - 1
DELETED_SUFFIX = ".deleted"     # a retired segment file awaiting file.delete.delay.ms
# Producer state snapshots (Kafka's `<offset>.snapshot`): the state of every producer as
# of that offset; the bytes are broker.producer_state's, this log only keeps the files.
SNAPSHOT_SUFFIX = ".snapshot"


class AppendOrigin(Enum):
    CLIENT = "client"  # Produce: no control batches, keys required on compacted topics
    COORDINATOR = "coordinator"  # the broker's own writes (transaction markers)


@fast_init
@dataclass(frozen=True, slots=True)
class AppendResult:
    """Outcome of an append; on an error nothing was written."""

    error_code: ErrorCode
    base_offset: int = -1  # first offset assigned (or kept, for a follower)
    last_offset: int = -1
    position: int = -1  # byte position of the first batch in the active segment
    log_append_time_ms: int = NO_TIMESTAMP  # -1 unless the topic uses LogAppendTime
    log_start_offset: int = -1
    records_count: int = 0
    error_message: str | None = None
    # KIP-467: (index of the record among the request's records, why it was refused).
    record_errors: tuple[tuple[int, str], ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class LogReadResult:
    error_code: ErrorCode
    records: FileSlice  # empty (length_bytes 0) on error or when nothing is readable
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """ListOffsets answer: the first record at or after a timestamp."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class RetentionResult:
    deleted_base_offsets: tuple[int, ...] = ()
    deleted_bytes: int = 0
    log_start_offset: int = 0
    reasons: tuple[str, ...] = field(default=())


def _empty_slice(offset: int) -> FileSlice:
    return FileSlice("", 0, 0, 0, offset, offset - 1)


def writable(records: bytes | bytearray | memoryview) -> bool:
    """May `append_as_leader` stamp offsets into `records` in place (no copy)?"""
    return isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly)


class PartitionLog:
    # One per hosted replica, idle or not: slots keep the memory per replica down.
    __slots__ = (
        "storage", "dir_path", "config", "_segments", "_bases", "_log_end_offset",
        "_log_start_offset", "_recovery_point", "leader_epoch_cache", "_last_flush_ms",
        "_unflushed_messages", "_pending_deletes", "_epoch_checkpoint_dirty",
        "_epoch_start_unwritten", "closed",
        "first_dirty_offset", "layout_version", "on_recovery_point_lowered", "on_due",
        "_snapshot_offsets", "highest_offset_in_remote",
    )

    def __init__(
        self,
        storage: Storage,
        dir_path: str,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        now_ms: int,
    ) -> None:
        assert segments, "a log always has an active segment"
        self.storage = storage
        self.dir_path = dir_path
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_end_offset = segments[-1].next_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self.leader_epoch_cache = epoch_cache
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self.first_dirty_offset = log_start_offset  # the cleaner's checkpoint, in memory
        # Retired segment files (file.delete.delay.ms): (delete at ms, paths). This and
        # the snapshot offsets are tuples, replaced on change: empty (most logs) they are
        # the one shared empty tuple, not a list per replica (56 B each).
        self._pending_deletes: tuple[tuple[int, list[str]], ...] = ()
        # Bumped whenever rolled segments change (truncation, retention, a cleaner swap), so
        # a cleaning pass built on an older layout is not committed.
        self.layout_version = 0
        # Called when a truncation lowers the recovery point. The data directory's
        # checkpoint must follow at once (LogManager sets this): a stale, higher value
        # would let a crash skip recovering data appended below it after the truncation
        # (Kafka's LogManager.truncateTo checkpoints for the same reason).
        self.on_recovery_point_lowered: Callable[[], None] | None = None
        # Called when this log may need a `poll` sooner than its last one said: its first
        # unflushed message, a retired file to delete later, a config change. The
        # LogManager polls only logs that asked (an idle log is never visited).
        self.on_due: Callable[[PartitionLog], None] | None = None
        self._epoch_checkpoint_dirty = False  # the cache has entries the file lacks
        # The latest epoch starts at the LEO, unwritten: dirty once a batch follows it.
        self._epoch_start_unwritten = False
        self.closed = False
        # Offsets of the producer snapshot files, ascending (set by `open`).
        self._snapshot_offsets: tuple[int, ...] = ()
        # Tiered storage (KIP-405; Kafka's UnifiedLog.highestOffsetInRemoteStorage): the
        # last offset copied to remote storage (-1: none), set by broker/tiered from the
        # replicated remote log metadata. With remote.storage.enable, only segments wholly
        # at or below it may be deleted by retention: never a segment not yet copied.
        self.highest_offset_in_remote = -1
        self._check_invariants()

    def _check_invariants(self) -> None:
        assert self._segments[0].base_offset <= self._log_start_offset <= self._log_end_offset, (
            self._segments[0].base_offset, self._log_start_offset, self._log_end_offset)
        assert self._recovery_point <= self._log_end_offset, (self._recovery_point, self._log_end_offset)
        assert self._bases == [s.base_offset for s in self._segments]

    # --- facts ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch (KIP-279), for this log's LEO."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)

    def _check_timestamps(self, header: BatchHeader, now_ms: int) -> AppendResult | None:
        """CreateTime bounds (KIP-937), checked on the batch's first and largest timestamps:
        batch-level, so no record is decoded on the produce path. A record whose timestamp
        delta is negative could slip below the first timestamp; producers write deltas
        from the first record, so in practice the first timestamp is the smallest."""
        config = self.config
        before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
        if before != NO_LIMIT and header.base_timestamp >= 0 and now_ms - header.base_timestamp > before:
            return self._error(ErrorCode.INVALID_TIMESTAMP,
                               f"timestamp {header.base_timestamp} is more than {before} ms before "
                               f"the broker's time {now_ms} (message.timestamp.before.max.ms)")
        if after != NO_LIMIT and header.max_timestamp - now_ms > after:
            return self._error(ErrorCode.INVALID_TIMESTAMP,
                               f"timestamp {header.max_timestamp} is more than {after} ms after "
                               f"the broker's time {now_ms} (message.timestamp.after.max.ms)")
        return None

    def update_config(self, config: LogConfig) -> None:
        """A topic config change; takes effect for the next append, roll and retention."""
        self.config = config
        for segment in self._segments:
            segment.config = config
        self._due()                 # flush.ms may have changed

    # --- opening --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        storage: Storage,
        dir_path: str,
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        listed: bool = False,
        new_replica: bool = False,
    ) -> tuple[PartitionLog, RecoveryReport]:
        """Load (or create) the log in `dir_path`.

        `recovery_point` comes from the data directory's checkpoint and `clean_shutdown`
        from its marker (`LogManager`); `log_start_offset` is a lower bound, the partition's
        own `log-start-offset` file and first segment give the rest. After an unclean stop,
        every segment from the one holding the recovery point is walked and validated;
        the first bad batch and everything after it is dropped and reported.
        ``listed``: the caller found the directory in its log dir's listing (a restart),
        so it is not made. ``new_replica``: a replica just assigned to this broker (not a
        log directory move's future log, whose directory on disk says a move is under way).
        """
        start = max(log_start_offset, 0)
        # A new replica's log from offset 0 is deferred (storage.py): nothing is on disk
        # until its first write, so a crash before then loses only what the metadata log
        # makes again the same. One that starts later must keep its start across a restart.
        if not listed and storage.make_new_dir(dir_path, deferred=new_replica and start == 0):
            # Made just now (a new replica: the common case while partitions are created):
            # nothing in it to tidy, load or recover, and no file to look for.
            segment = LogSegment.create(storage, dir_path, start, config, now_ms, new_dir=True)
            return (cls(storage, dir_path, config, [segment], start, start, LeaderEpochCache(), now_ms),
                    RecoveryReport(clean_shutdown=clean_shutdown, log_end_offset=start))
        # One directory listing serves tidying and loading (a restart of 100,000 small
        # partitions pays per call: Kafka's LogLoader lists each directory once, too).
        completed_swaps, names = _tidy_directory(storage, dir_path)
        bases = sorted(
            parsed[0]
            for name in names
            if (parsed := parse_segment_file_name(name)) is not None and parsed[1] == LOG_SUFFIX
        )
        segments = [LogSegment.open_existing(storage, dir_path, b, config, now_ms) for b in bases]
        # Files the listing does not name are absent: not opened (at 100,000 idle
        # partitions most logs are one empty segment and nothing else).
        epoch_cache = _load_epoch_cache(storage, dir_path, names)
        epochs_on_disk = epoch_cache.entries()
        log_start_offset = max(log_start_offset, _load_log_start_offset(storage, dir_path, names))
        recovered: list[SegmentRecovery] = []
        deleted: list[int] = []
        if not segments:
            segments = [LogSegment.create(storage, dir_path, max(log_start_offset, 0), config, now_ms)]
        elif clean_shutdown:
            try:
                segments[-1].load_strict(names)
            except (SegmentCorruptError, CorruptIndexError, FileNotFoundError) as e:
                log.warning("%s: clean shutdown marker but a bad tail (%s); recovering", dir_path, e)
                clean_shutdown = False
                recovery_point = min(recovery_point, segments[-1].base_offset)
        if not clean_shutdown:
            first = max(0, min(bisect_right(bases, recovery_point) - 1, len(segments) - 1))
            next_offset_min = segments[first - 1].next_offset if first > 0 else 0

            def assign_epoch(_position: int, header: BatchHeader) -> None:
                # Only epochs newer than the cache knows (Kafka's LogSegment.recover): the
                # checkpoint may hold epochs appended before a crash whose batches this
                # walk revisits; re-assigning an older epoch would wipe later entries.
                if header.partition_leader_epoch > epoch_cache.latest_epoch:
                    epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

            for i in range(first, len(segments)):
                segment = segments[i]
                result = segment.rebuild_indexes(
                    truncate=True, next_offset_min=next_offset_min, on_batch=assign_epoch
                )
                recovered.append(result)
                next_offset_min = segment.next_offset
                if result.stop_reason is not None:
                    for later in segments[i + 1:]:
                        log.warning("%s: deleting segment %d after a corrupt one", dir_path,
                                    later.base_offset)
                        later.delete_files()
                        deleted.append(later.base_offset)
                    del segments[i + 1:]
                    break
            # No fsync here: the recovered bytes may still be only in the page cache, so
            # the recovery point stays where it was and a later crash walks them again.
        log_end_offset = segments[-1].next_offset
        start = max(log_start_offset, segments[0].base_offset)
        if start > log_end_offset:
            # A DeleteRecords advance beyond what survived a crash: nothing below it counts.
            for segment in segments:
                if segment.size_bytes:
                    deleted.append(segment.base_offset)
                segment.delete_files()
            segments = [LogSegment.create(storage, dir_path, start, config, now_ms)]
            epoch_cache.clear()
            log_end_offset = start
        changed = epoch_cache.truncate_from_end(log_end_offset)
        changed |= epoch_cache.truncate_from_start(start)
        if clean_shutdown:
            recovery_point = log_end_offset  # everything was fsynced by close()
        recovery_point = max(min(recovery_point, log_end_offset), 0)
        for result in recovered:
            # Aborted transactions whose marker the recovery cut are gone with it.
            for segment in segments:
                if segment.base_offset == result.base_offset:
                    segment.txn_index.truncate_to(segment.next_offset)
        partition_log = cls(storage, dir_path, config, segments, start, recovery_point,
                            epoch_cache, now_ms)
        partition_log._snapshot_offsets = tuple(sorted(
            parsed[0] for name in names
            if (parsed := parse_segment_file_name(name)) is not None and parsed[1] == SNAPSHOT_SUFFIX))
        # Snapshots beyond what survived, or below the first segment, describe no state
        # this log can reach (Kafka's removeStraySnapshots / truncateAndReload).
        partition_log._delete_snapshots(lambda offset: offset > log_end_offset
                                        or offset < segments[0].base_offset)
        partition_log._persist_log_start_offset(LOG_START_OFFSET_FILE in names)
        if changed or epoch_cache.entries() != epochs_on_disk:
            partition_log._write_epoch_checkpoint()
        truncated = sum(r.truncated_bytes for r in recovered)
        report = RecoveryReport(
            clean_shutdown=clean_shutdown,
            recovered_segments=tuple(recovered),
            deleted_segments=tuple(deleted),
            rebuilt_indexes=tuple(r.base_offset for r in recovered),
            completed_swaps=tuple(completed_swaps),
            truncated_bytes=truncated,
            log_end_offset=log_end_offset,
        )
        if report.dropped_anything:
            log.warning("%s: recovery dropped %d bytes and segments %s; log end offset %d",
                        dir_path, truncated, list(deleted), log_end_offset)
        return partition_log, report

    # --- appends --------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        reserved_gaps: bool = False,
        headers: list[BatchHeader] | None = None,
    ) -> AppendResult:
        """Validate, assign offsets from the LEO, stamp `leader_epoch`, write.

        `records` is rewritten in place when it is a bytearray or a writable memoryview (the
        zero-copy path); read-only bytes are copied first. `reserved_gaps`: the batches lack
        some of the records their offset range spans (delayed delivery parked them,
        ``broker.delayed.divert``), so fewer records than ``last_offset_delta + 1`` (even
        none) are accepted. `headers`: what `validate_batches(records)` returned to a caller
        that already needed them (each header is parsed and CRC-checked once per append).
        """
        assert not self.closed
        assert leader_epoch >= 0, leader_epoch
        if not records:
            return AppendResult(ErrorCode.NONE, log_start_offset=self._log_start_offset)
        buf = records if writable(records) else bytearray(records)
        error = self._check_size(len(buf))
        if error is not None:
            return error
        if headers is None:
            try:
                headers = validate_batches(buf)
            except RecordError as e:
                return self._error(e.error_code, str(e))
        config = self.config
        if config.compression_type != "producer" and origin is AppendOrigin.CLIENT:
            try:
                buf, headers = _recompress(buf, headers, config.compression_type,
                                           config.compression_level(config.compression_type))
            except RecordError as e:
                return self._error(e.error_code, str(e))
        # Only topics with a CreateTime bound pay for the check (the default is no bound).
        check_timestamps = (origin is AppendOrigin.CLIENT and not config.log_append_time and (
            config.timestamp_before_max_ms != NO_LIMIT or config.timestamp_after_max_ms != NO_LIMIT))
        for header in headers:
            if header.size_in_bytes > config.max_message_bytes:
                return self._error(ErrorCode.MESSAGE_TOO_LARGE,
                                   f"batch of {header.size_in_bytes} bytes; max.message.bytes "
                                   f"is {config.max_message_bytes}")
            if (header.last_offset_delta < 0 or header.records_count > header.last_offset_delta + 1
                    or (header.records_count != header.last_offset_delta + 1 and not reserved_gaps)):
                return self._error(ErrorCode.INVALID_RECORD,
                                   f"batch of {header.records_count} records has last offset "
                                   f"delta {header.last_offset_delta}")
            if header.is_control and origin is AppendOrigin.CLIENT:
                return self._error(ErrorCode.INVALID_RECORD, "clients may not write control batches")
            if check_timestamps:
                error = self._check_timestamps(header, now_ms)
                if error is not None:
                    return error
        if config.compact and origin is AppendOrigin.CLIENT:
            error = self._check_keys(buf, headers)
            if error is not None:
                return error
        # Everything is valid: from here on the log changes.
        log_append_time = now_ms if config.log_append_time else NO_TIMESTAMP
        next_offset = self._log_end_offset
        stamped: list[AppendedBatch] = []
        pos = 0
        for header in headers:
            assign_base_offset(buf, next_offset, pos)
            set_partition_leader_epoch(buf, leader_epoch, pos)
            max_timestamp = header.max_timestamp
            if config.log_append_time:
                set_log_append_time(buf, now_ms, pos)
                max_timestamp = now_ms
            last_offset = next_offset + header.last_offset_delta
            size = header.size_in_bytes
            stamped.append(AppendedBatch(next_offset, last_offset, max_timestamp, size,
                                         leader_epoch, header.records_count))
            next_offset = last_offset + 1
            pos += size
        return self._append(buf, stamped, now_ms, log_append_time)

    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int,
                           headers: list[BatchHeader] | None = None) -> AppendResult:
        """Append batches fetched from the leader with their offsets and epochs as they are.

        Offsets must go forward from the LEO (gaps are allowed: a compacted leader log has
        them). Oversized batches are accepted: the leader already took them. `headers`:
        the batches' headers, CRC-checked, when the caller already parsed them.
        """
        assert not self.closed
        if not records:
            return AppendResult(ErrorCode.NONE, log_start_offset=self._log_start_offset)
        error = self._check_size(len(records))
        if error is not None:
            return error
        if headers is None:
            try:
                headers = validate_batches(records)
            except RecordError as e:
                return self._error(e.error_code, str(e))
        expected = self._log_end_offset
        for header in headers:
            if header.base_offset < expected or header.last_offset_delta < 0:
                return self._error(ErrorCode.INVALID_RECORD,
                                   f"follower append at offset {header.base_offset}, expected "
                                   f">= {expected}")
            expected = header.last_offset + 1
        first_relative_limit = headers[-1].last_offset - headers[0].base_offset
        if first_relative_limit > _INT32_MAX:
            return self._error(ErrorCode.INVALID_RECORD, "offsets span more than a segment can hold")
        batches = [AppendedBatch(h.base_offset, h.last_offset, h.max_timestamp, h.size_in_bytes,
                                 h.partition_leader_epoch, h.records_count) for h in headers]
        return self._append(records, batches, now_ms, NO_TIMESTAMP)

    def _append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[AppendedBatch],
        now_ms: int,
        log_append_time_ms: int,
    ) -> AppendResult:
        first, last = batches[0], batches[-1]
        count = 0
        incoming_max_ts = NO_TIMESTAMP
        epochs_changed = False
        cache = self.leader_epoch_cache
        for batch in batches:
            count += batch.records_count
            if batch.max_timestamp > incoming_max_ts:
                incoming_max_ts = batch.max_timestamp
        self._maybe_roll(len(data), len(batches), first.base_offset, last.last_offset,
                         incoming_max_ts, now_ms)
        position = self._segments[-1].append(data, batches)
        self._log_end_offset = last.last_offset + 1
        for batch in batches:
            epoch = batch.partition_leader_epoch
            if epoch >= 0 and epoch != cache.latest_epoch:
                epochs_changed |= cache.assign(epoch, batch.base_offset)
        if epochs_changed or self._epoch_start_unwritten:
            self._epoch_start_unwritten = False
            # Not written (and fsynced) here, on the hot path: an unclean start re-learns
            # epochs from the batches it walks, which are all those at or above the
            # recovery point. The checkpoint is written before the recovery point moves
            # past them (`_advance_recovery_point`), as in KAFKA-15046.
            self._epoch_checkpoint_dirty = True
        first_unflushed = self._unflushed_messages == 0
        if first_unflushed:
            # flush.ms counts from here: an idle log is not polled, so its last flush time
            # is not moved forward while it waits (as each poll of it did).
            self._last_flush_ms = max(self._last_flush_ms, now_ms)
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush(now_ms)
        elif first_unflushed:
            self._due()
        return AppendResult(
            ErrorCode.NONE,
            base_offset=first.base_offset,
            last_offset=last.last_offset,
            position=position,
            log_append_time_ms=log_append_time_ms,
            log_start_offset=self._log_start_offset,
            records_count=count,
        )

    def _check_size(self, size: int) -> AppendResult | None:
        if size > self.config.segment_bytes:
            return self._error(ErrorCode.RECORD_LIST_TOO_LARGE,
                               f"{size} bytes do not fit a segment of {self.config.segment_bytes}")
        return None

    def _check_keys(self, buf: bytearray, headers: list[BatchHeader]) -> AppendResult | None:
        """A compacted topic refuses keyless records, naming each one (KIP-467)."""
        pos = index = 0
        refused: list[tuple[int, str]] = []
        where = self.dir_path.rstrip("/").rsplit("/", 1)[-1]     # the topic-partition
        for header in headers:
            if not header.is_control:
                try:
                    keyless = keyless_records(buf, pos)
                except RecordError as e:
                    return self._error(e.error_code, str(e))
                refused += [(index + i, "Compacted topic cannot accept message without key in "
                             f"topic partition {where}.") for i in keyless]
                index += header.records_count
            pos += header.size_in_bytes
        if not refused:
            return None
        return AppendResult(ErrorCode.INVALID_RECORD, log_start_offset=self._log_start_offset,
                            error_message=f"{len(refused)} record(s) without a key: {refused[0][1]}",
                            record_errors=tuple(refused))

    def _error(self, code: ErrorCode, message: str) -> AppendResult:
        return AppendResult(code, log_start_offset=self._log_start_offset, error_message=message)

    # --- rolling --------------------------------------------------------------------------

    def _maybe_roll(
        self, size: int, batches: int, first_offset: int, last_offset: int,
        incoming_max_ts: int, now_ms: int,
    ) -> None:
        active = self._segments[-1]
        if active.size_bytes == 0:
            if last_offset - active.base_offset > _INT32_MAX:
                self.roll(now_ms, first_offset)  # an empty segment too far behind: replace it
            return
        config = self.config
        if (
            active.size_bytes + size > config.segment_bytes
            or active.time_waited_for_roll_ms(now_ms, incoming_max_ts) > config.segment_ms - self._roll_jitter_ms(active)
            or not active.index_room_for(batches)
            or last_offset - active.base_offset > _INT32_MAX
        ):
            self.roll(now_ms, first_offset)

    def _roll_jitter_ms(self, segment: LogSegment) -> int:
        """segment.jitter.ms: spread time-based rolls of many partitions. Kafka draws a
        random jitter per segment; a hash of the directory and base offset is as spread
        and keeps this core deterministic."""
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        return zlib.crc32(f"{self.dir_path}/{segment.base_offset}".encode()) % min(jitter, self.config.segment_ms)

    def roll(self, now_ms: int, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at `base_offset` (default: the LEO).

        The old one gets its final time index entry and is fsynced with its index files;
        the recovery point moves to the new segment's base.
        """
        base = self._log_end_offset if base_offset is None else base_offset
        assert base >= self._log_end_offset, (base, self._log_end_offset)
        old = self.active_segment
        if old.size_bytes == 0:
            if old.base_offset == base:
                return old
            old.delete_files()
            self._segments.pop()
            self._bases.pop()
        else:
            # fsync the old segment before a byte goes into the new one. Deferring it
            # (as Kafka does) lets a crash drop whole batches at the end of the old
            # segment while the new one keeps its data: a hole in the middle of the log
            # that no check can tell from a legitimate gap. The cost is one fsync per
            # segment.bytes written, off the common path.
            old.on_become_inactive()
            old.flush(indexes=True)
        segment = LogSegment.create(self.storage, self.dir_path, base, self.config, now_ms)
        self.storage.fsync_dir(self.dir_path)
        self._segments.append(segment)
        self._bases.append(base)
        if base > self._log_end_offset:
            self._log_end_offset = base  # a follower's gap, or the empty segment was replaced
        if old.size_bytes:
            self._advance_recovery_point(max(self._recovery_point, base))
        return segment

    # --- reads ----------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> LogReadResult:
        """Whole batches from the one holding `fetch_offset`, below `max_offset`.

        `max_offset` is the high watermark for a consumer and the LEO for a follower.
        OFFSET_OUT_OF_RANGE when fetch_offset is below the log start or above the LEO.
        """
        start, end = self._log_start_offset, self._log_end_offset
        if fetch_offset < start or fetch_offset > end:
            return LogReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, _empty_slice(fetch_offset), start, end)
        upper = min(max_offset, end)
        if fetch_offset >= upper:
            return LogReadResult(ErrorCode.NONE, _empty_slice(fetch_offset), start, end)
        segments = self._segments
        try:
            if fetch_offset >= segments[-1].base_offset:
                # The active segment (most fetches: followers and caught-up consumers).
                found = segments[-1].read(fetch_offset, max_bytes, upper, min_one_batch)
                if found is not None:
                    return LogReadResult(ErrorCode.NONE, found, start, end)
                return LogReadResult(ErrorCode.NONE, _empty_slice(fetch_offset), start, end)
            i = max(0, bisect_right(self._bases, fetch_offset) - 1)
            for segment in segments[i:]:
                if segment.base_offset >= upper:
                    break
                found = segment.read(fetch_offset, max_bytes, upper, min_one_batch)
                if found is not None:
                    return LogReadResult(ErrorCode.NONE, found, start, end)
        except SegmentCorruptError as e:
            log.error("%s: %s", self.dir_path, e)
            return LogReadResult(ErrorCode.KAFKA_STORAGE_ERROR, _empty_slice(fetch_offset), start, end)
        return LogReadResult(ErrorCode.NONE, _empty_slice(fetch_offset), start, end)

    def read_records_bytes(self, file_slice: FileSlice) -> bytes:
        """The bytes of a slice from `read` (for callers without os.sendfile)."""
        if file_slice.is_empty:
            return b""
        return self.storage.read_slice(file_slice)

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time: the first record with a timestamp >= `timestamp`.

        EARLIEST_TIMESTAMP gives the log start offset, LATEST_TIMESTAMP the LEO (the API
        layer bounds it by the high watermark for consumers), MAX_TIMESTAMP the record
        with the largest timestamp (KIP-734). None when no record qualifies.
        """
        cache = self.leader_epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset,
                                      cache.epoch_for_offset(self._log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset, cache.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for segment in self._segments:
                if segment.size_bytes and (best is None or segment.max_timestamp > best.max_timestamp):
                    best = segment
            if best is None or best.max_timestamp < 0:
                return None
            target_offset = max(best.offset_of_max_timestamp, self._log_start_offset)
            found = best.find_offset_by_timestamp(best.max_timestamp, target_offset)
            return None if found is None else self._exact_record(best, found, best.max_timestamp)
        if timestamp < 0:
            return None
        for segment in self._segments:
            if segment.size_bytes == 0 or segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                return self._exact_record(segment, found, timestamp)
        return None

    def _exact_record(self, segment: LogSegment, found, timestamp: int) -> TimestampAndOffset:
        header = found.header
        epoch = header.partition_leader_epoch
        try:
            batch = decode_batch(segment.read_bytes(found.position, header.size_in_bytes))
        except RecordError:
            offset = max(header.base_offset, self._log_start_offset)
            return TimestampAndOffset(header.max_timestamp, offset, epoch)
        for record in batch.records:
            if record.timestamp >= timestamp and record.offset >= self._log_start_offset:
                return TimestampAndOffset(record.timestamp, record.offset, epoch)
        return TimestampAndOffset(header.max_timestamp, max(header.base_offset, self._log_start_offset), epoch)

    # --- truncation -----------------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int = 0) -> bool:
        """Drop every batch whose last offset is >= `offset` (KIP-101 divergence).

        The new LEO is `offset`, or the base of the batch holding `offset` if one
        straddled it. Returns whether anything changed.
        """
        assert offset >= 0
        if offset >= self._log_end_offset:
            return False
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms)
            return True
        while self.active_segment.base_offset >= offset:
            doomed = self._segments.pop()
            self._bases.pop()
            doomed.delete_files()
        active = self.active_segment
        _, cut = active.truncate_to(offset)
        new_end = min(offset, cut) if cut is not None else min(offset, self._log_end_offset)
        new_end = max(new_end, active.next_offset)
        self.storage.fsync(active.log_path)  # a truncation must not come back after a crash
        self.layout_version += 1
        self._log_end_offset = new_end
        if self._log_start_offset > new_end:
            self._log_start_offset = new_end
            self._persist_log_start_offset()
        lowered = new_end < self._recovery_point
        self._recovery_point = min(self._recovery_point, new_end)
        self.first_dirty_offset = min(self.first_dirty_offset, new_end)
        if self.leader_epoch_cache.truncate_from_end(new_end):
            self._write_epoch_checkpoint()
        self._delete_snapshots(lambda o: o > new_end)
        self._check_invariants()
        if lowered and self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered()
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Delete everything and restart empty at `offset` (a follower below the leader's
        log start, or a truncation to before the first segment)."""
        assert offset >= 0
        for segment in self._segments:
            segment.delete_files()
        segment = LogSegment.create(self.storage, self.dir_path, offset, self.config, now_ms)
        self._segments = [segment]
        self._bases = [offset]
        self._log_end_offset = self._log_start_offset = self._recovery_point = offset
        self.first_dirty_offset = offset
        self._unflushed_messages = 0
        self.leader_epoch_cache.clear()
        self._persist_log_start_offset()
        self._write_epoch_checkpoint()
        self._delete_snapshots(lambda o: True)
        self.storage.fsync_dir(self.dir_path)
        self.layout_version += 1
        self._check_invariants()
        if self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered()

    # --- retention ------------------------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_offset: int, high_watermark: int) -> ErrorCode:
        """DeleteRecords: advance the log start offset (never past the high watermark).

        Segments wholly below it go at the next `delete_old_segments`.
        """
        if new_offset > high_watermark or new_offset > self._log_end_offset or new_offset < 0:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        if new_offset > self._log_start_offset:
            self._log_start_offset = new_offset
            self.first_dirty_offset = max(self.first_dirty_offset, new_offset)
            # Durable before the epoch cache forgets epochs below it: after a crash the
            # two must agree, or offsets between would have no epoch.
            self._persist_log_start_offset()
            if self.leader_epoch_cache.truncate_from_start(new_offset):
                self._write_epoch_checkpoint()
        return ErrorCode.NONE

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> RetentionResult:
        """Delete whole segments from the oldest while one of these holds (Kafka's three):
        below the log start offset; older than retention.ms (by max timestamp); or the
        partition is over retention.bytes by at least the segment's size. The last two
        apply only with cleanup.policy delete. A segment with records at or above the high
        watermark is never deleted (followers may not have them yet).

        With remote.storage.enable (KIP-405) this is the local log's retention: the limits
        are local.retention.ms/bytes, and a segment is deleted only once copied to remote
        storage (its last offset at or below ``highest_offset_in_remote``); retention.*
        then bound the whole log and are broker/tiered's to apply to remote segments.
        """
        config = self.config
        tiered = config.remote_storage_enable
        retention_ms = config.local_retention_ms_effective if tiered else config.retention_ms
        retention_bytes = (config.local_retention_bytes_effective if tiered
                           else config.retention_bytes)
        size_over = self.size_bytes - retention_bytes
        doomed: list[LogSegment] = []
        reasons: list[str] = []
        for i, segment in enumerate(self._segments):
            is_last = i == len(self._segments) - 1
            upper = segment.next_offset if is_last else self._segments[i + 1].base_offset
            if segment.size_bytes == 0 and is_last:
                break
            if upper > high_watermark:
                break
            reason = None
            if upper <= self._log_start_offset:
                reason = "log start offset"
            elif tiered and upper - 1 > self.highest_offset_in_remote:
                break               # not copied yet: kept, whatever its age (KIP-405)
            elif config.delete and retention_ms >= 0 and (
                now_ms - segment.largest_timestamp_ms() > retention_ms
            ):
                reason = "local.retention.ms" if tiered else "retention.ms"
            elif config.delete and retention_bytes >= 0 and size_over - segment.size_bytes >= 0:
                reason = "local.retention.bytes" if tiered else "retention.bytes"
            if reason is None:
                break
            size_over -= segment.size_bytes
            doomed.append(segment)
            reasons.append(reason)
        if not doomed:
            return RetentionResult(log_start_offset=self._log_start_offset)
        if doomed[-1] is self.active_segment:
            self.roll(now_ms)
        self.layout_version += 1
        deleted_bytes = 0
        delay_ms = config.file_delete_delay_ms
        for segment in doomed:
            deleted_bytes += segment.size_bytes
            retired = segment.delete_files(DELETED_SUFFIX if delay_ms > 0 else None)
            if retired:
                self._pending_deletes += ((now_ms + delay_ms, retired),)
                self._due()
        del self._segments[: len(doomed)]
        del self._bases[: len(doomed)]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._recovery_point = max(self._recovery_point, min(self._segments[0].base_offset,
                                                              self._log_end_offset))
        self.first_dirty_offset = max(self.first_dirty_offset, self._log_start_offset)
        self._persist_log_start_offset()
        if self.leader_epoch_cache.truncate_from_start(self._log_start_offset):
            self._write_epoch_checkpoint()
        first_base = self._segments[0].base_offset
        self._delete_snapshots(lambda o: o < first_base)   # Kafka: deleted with their segments
        self._check_invariants()
        return RetentionResult(tuple(s.base_offset for s in doomed), deleted_bytes,
                               self._log_start_offset, tuple(reasons))

    # --- durability -----------------------------------------------------------------------

    def flush(self, now_ms: int) -> None:
        """fsync everything up to the LEO; the recovery point becomes the LEO."""
        self.active_segment.flush(indexes=False)
        self._advance_recovery_point(self._log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms

    def _due(self) -> None:
        if self.on_due is not None:
            self.on_due(self)

    @property
    def has_duties(self) -> bool:
        """Unflushed messages or retired files to delete: `poll` has work to come."""
        return self._unflushed_messages > 0 or bool(self._pending_deletes)

    def poll(self, now_ms: int) -> int:
        """Run the flush.ms policy and delayed file deletes; returns ms until this log
        next needs a poll (`_NO_DEADLINE_MS`: not before `on_due` is called, unless
        `has_duties`)."""
        if self._pending_deletes:
            due = [paths for at, paths in self._pending_deletes if at <= now_ms]
            self._pending_deletes = tuple((at, p) for at, p in self._pending_deletes if at > now_ms)
            for paths in due:
                for path in paths:
                    self.storage.delete(path)
            if self._pending_deletes:
                next_delete_ms = min(at for at, _ in self._pending_deletes) - now_ms
                return min(next_delete_ms, self._poll_flush(now_ms))
        return self._poll_flush(now_ms)

    def _poll_flush(self, now_ms: int) -> int:
        if self._unflushed_messages == 0:
            self._last_flush_ms = max(self._last_flush_ms, now_ms)
            return _NO_DEADLINE_MS
        waited = now_ms - self._last_flush_ms
        if waited >= self.config.flush_ms:
            self.flush(now_ms)
            return _NO_DEADLINE_MS
        return min(_NO_DEADLINE_MS, self.config.flush_ms - waited)

    def close(self, *, fsync: bool = True) -> None:
        """Clean shutdown: index files written, everything durable, files closed.

        With `fsync=False` nothing is fsynced and the epoch checkpoint is only staged:
        the caller (LogManager.shutdown) must call `storage.sync_all()` before it records
        the recovery point or the clean-shutdown marker.
        """
        if self.closed:
            return
        for _, paths in self._pending_deletes:     # nobody reads them any more
            for path in paths:
                self.storage.delete(path)
        self._pending_deletes = ()
        for segment in self._segments:
            if fsync and segment is self.active_segment:
                self.storage.fsync(segment.log_path)  # rolled ones were fsynced at roll
            segment.close(fsync=fsync)
        if fsync:
            self._advance_recovery_point(self._log_end_offset)
        else:
            if self._epoch_checkpoint_dirty:
                self.storage.stage_atomic_write(f"{self.dir_path}/{LEADER_EPOCH_CHECKPOINT}",
                                                self.leader_epoch_cache.to_checkpoint())
                self._epoch_checkpoint_dirty = False
            self._recovery_point = self._log_end_offset
        self.closed = True

    def abandon(self) -> None:
        """Stop using this log without writing anything more: its directory is about to
        be removed (a log dir move retired it). Unlike ``close(fsync=False)``, nothing is
        staged for a later ``sync_all`` in a directory that will be gone."""
        self._pending_deletes = ()
        self.layout_version += 1        # a cleaning pass built on it must not commit
        self.closed = True

    def assign_epoch_start(self, epoch: int, start_offset: int) -> None:
        """A new leader's epoch starts at ``start_offset`` (its LEO at election), before
        any batch of it exists. Kept for the checkpoint once a batch follows it, like an
        epoch an append brings (the leader's own batches in it bring none): a clean
        restart reads the epochs from the checkpoint alone, and a log whose epochs were
        lost would fetch from its LEO without truncating to its new leader first. Until
        then it is not written: loading drops an epoch that starts at the LEO anyway, and
        elections of idle partitions (a controlled shutdown at 100k) write no files."""
        if self.leader_epoch_cache.assign(epoch, start_offset):
            self._epoch_start_unwritten = True

    def adopt_leader_epochs(self, source: LeaderEpochCache) -> None:
        """A copy of another log (a log directory move) takes the epochs `source` knows
        beyond this log's last batch: a leader's epoch starts at its LEO at election,
        before any batch of it exists. Written at once, as the swap follows."""
        assert source.latest_epoch >= self.leader_epoch_cache.latest_epoch
        changed = False
        for entry in source.entries():
            if entry.epoch > self.leader_epoch_cache.latest_epoch:
                changed |= self.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        if changed:
            self._write_epoch_checkpoint()

    def delete(self) -> None:
        """Remove the partition's directory (the partition was deleted or reassigned)."""
        self.closed = True
        self.storage.remove_dir(self.dir_path)

    # --- compaction support ---------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], cleaned_path: str, base_offset: int,
                         now_ms: int, dropped_markers: Collection[int] = ()) -> bool:
        """Swap rolled segments `old` for the cleaned file at `cleaned_path` (crash-safe).

        Returns False, deleting the cleaned file, when `old` is no longer a run of this
        log's segments (retention or truncation got there first). `dropped_markers`: the
        offsets of the transaction markers the cleaned file no longer holds.
        """
        try:
            first = self._segments.index(old[0])
        except ValueError:
            first = -1
        if first < 0 or self._segments[first: first + len(old)] != old or (
            first + len(old) >= len(self._segments)
        ):
            self.storage.delete(cleaned_path)
            return False
        assert old[0].base_offset == base_offset
        # The aborted transactions whose markers the cleaned file keeps: merged into the
        # first segment's index before the commit point (a crash after it leaves entries
        # a later index also holds; readers deduplicate). Entries of dropped markers go.
        aborted = [e for segment in old for e in segment.txn_index.entries
                   if e.last_offset not in dropped_markers]
        if len(old) > 1 or len(aborted) != len(old[0].txn_index):
            old[0].txn_index.reset_to(aborted)
        if dropped_markers:
            # A snapshot from before a dropped marker may hold its transaction as
            # ongoing; replayed without the marker it would stay open for ever. Later
            # snapshots (the roll after the marker's segment wrote one) know it ended.
            last_dropped = max(dropped_markers)
            self._delete_snapshots(lambda o: o <= last_dropped)
        swap_path = f"{self.dir_path}/{segment_file_name(base_offset, LOG_SUFFIX + SWAP_SUFFIX)}"
        self.storage.fsync(cleaned_path)
        self.storage.rename(cleaned_path, swap_path)  # the commit point
        self.storage.fsync_dir(self.dir_path)
        for segment in old:
            if segment is old[0]:
                for path in (segment.log_path, segment.index_path, segment.time_index_path):
                    self.storage.delete(path)
            else:
                segment.delete_files()
        final_path = f"{self.dir_path}/{segment_file_name(base_offset, LOG_SUFFIX)}"
        self.storage.rename(swap_path, final_path)
        self.storage.fsync_dir(self.dir_path)
        segment = LogSegment.open_existing(self.storage, self.dir_path, base_offset, self.config,
                                           now_ms)
        segment.created_ms = min(s.created_ms for s in old)
        segment.rebuild_indexes(truncate=False)
        segment.flush_indexes(fsync=True)
        self.layout_version += 1
        self._segments[first: first + len(old)] = [segment]
        self._bases[first: first + len(old)] = [base_offset]
        self._check_invariants()
        return True

    # --- transactions ---------------------------------------------------------------------

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its ABORT marker (at once
        after the marker's append, or again by a replay: a duplicate is ignored)."""
        # A replay may start in the batch holding the log start (DeleteRecords put it
        # inside a segment), so a marker just below the log start is indexed too.
        assert self._segments[0].base_offset <= txn.last_offset < self._log_end_offset, (
            txn, self._segments[0].base_offset, self._log_end_offset)
        i = bisect_right(self._bases, txn.last_offset) - 1
        self._segments[i].txn_index.append(txn)

    def collect_aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper), by marker offset
        (Kafka's collectAbortedTransactions): a read_committed fetch's list. Their
        markers are at or above fetch_offset, so only segments from the one holding it
        can index them."""
        found: dict[AbortedTxn, None] = {}
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        for segment in self._segments[i:]:
            for txn in segment.txn_index.overlapping(fetch_offset, upper):
                found[txn] = None
        return sorted(found, key=lambda t: (t.last_offset, t.producer_id))

    def aborted_transactions_below(self, upper: int) -> list[AbortedTxn]:
        """Every indexed aborted transaction whose marker is below ``upper`` (the cleaner)."""
        return self.collect_aborted_transactions(self._log_start_offset, upper) if upper > 0 else []

    # --- producer snapshots ---------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> str:
        return f"{self.dir_path}/{segment_file_name(offset, SNAPSHOT_SUFFIX)}"

    @property
    def producer_snapshot_offsets(self) -> tuple[int, ...]:
        return self._snapshot_offsets

    def write_producer_snapshot(self, offset: int, data: bytes) -> None:
        """Keep ``data`` as the producer state as of ``offset`` (a batch boundary)."""
        assert self._segments[0].base_offset <= offset <= self._log_end_offset, offset
        self.storage.write_atomically(self._snapshot_path(offset), data)
        if offset not in self._snapshot_offsets:
            self._snapshot_offsets = tuple(sorted((*self._snapshot_offsets, offset)))

    def read_producer_snapshot(self, offset: int) -> bytes:
        path = self._snapshot_path(offset)
        return self.storage.read(path, 0, self.storage.size(path))

    def delete_producer_snapshot(self, offset: int) -> None:
        """A snapshot that failed to load: the next older one, or the log, is used."""
        self._delete_snapshots(lambda o: o == offset)

    def _delete_snapshots(self, doomed: Callable[[int], bool]) -> None:
        kept = []
        for offset in self._snapshot_offsets:
            if doomed(offset):
                self.storage.delete(self._snapshot_path(offset))
            else:
                kept.append(offset)
        self._snapshot_offsets = tuple(kept)

    # --- checkpoints ----------------------------------------------------------------------

    def _persist_log_start_offset(self, exists: bool | None = None) -> None:
        """Keep LOG_START_OFFSET_FILE in step: present only when it says something.
        ``exists``: whether the file is there, when the caller knows (None: look)."""
        path = f"{self.dir_path}/{LOG_START_OFFSET_FILE}"
        if exists is None:
            exists = self.storage.exists(path)
        if self._log_start_offset > self._segments[0].base_offset:
            data = f"0\n{self._log_start_offset}\n".encode("ascii")
            if not exists or self.storage.read(path, 0, 64) != data:
                self.storage.write_atomically(path, data)
        elif exists:
            self.storage.delete(path)
            self.storage.fsync_dir(self.dir_path)

    def _advance_recovery_point(self, offset: int) -> None:
        """Everything below `offset` is fsynced: first make the epoch checkpoint durable,
        since recovery will no longer walk (and re-learn epochs from) those batches."""
        if self._epoch_checkpoint_dirty:
            self._write_epoch_checkpoint()
        self._recovery_point = offset

    def _write_epoch_checkpoint(self) -> None:
        self.storage.write_atomically(f"{self.dir_path}/{LEADER_EPOCH_CHECKPOINT}",
                                      self.leader_epoch_cache.to_checkpoint())
        self._epoch_checkpoint_dirty = self._epoch_start_unwritten = False

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir_path!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self._log_end_offset}, segments={len(self._segments)})")


def _load_log_start_offset(storage: Storage, dir_path: str, names: Container[str]) -> int:
    path = f"{dir_path}/{LOG_START_OFFSET_FILE}"
    data = storage.read_file(path) if LOG_START_OFFSET_FILE in names else None
    if data is None:
        return 0
    try:
        version, offset = data.decode("ascii").split()
        if version != "0" or int(offset) < 0:
            raise ValueError(version)
        return int(offset)
    except (UnicodeDecodeError, ValueError):
        log.warning("%s: unreadable log start offset file; using the first segment", dir_path)
        return 0


def _load_epoch_cache(storage: Storage, dir_path: str, names: Container[str]) -> LeaderEpochCache:
    data = storage.read_file(f"{dir_path}/{LEADER_EPOCH_CHECKPOINT}") if LEADER_EPOCH_CHECKPOINT in names else None
    if data is None:
        return LeaderEpochCache()
    try:
        return LeaderEpochCache.from_checkpoint(data)
    except CorruptCheckpointError as e:
        # Recovery re-learns epochs from the batches it walks; older ones are lost, which
        # only makes OffsetForLeaderEpoch answers coarser (Kafka starts empty too).
        log.warning("%s: unreadable leader epoch checkpoint (%s); starting empty", dir_path, e)
        return LeaderEpochCache()


def _tidy_directory(storage: Storage, dir_path: str) -> tuple[list[int], set[str]]:
    """Delete temporary files and finish interrupted compaction swaps.

    Returns the base offsets of swap files made live, and the names left in the directory.
    """
    completed: list[int] = []
    changed = False
    names = storage.list_dir(dir_path)
    for name in names:
        if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
            storage.delete(f"{dir_path}/{name}")
            changed = True
    swaps = sorted(
        parsed[0] for name in names
        if (parsed := parse_segment_file_name(name)) is not None
        and parsed[1] == LOG_SUFFIX + SWAP_SUFFIX
    )
    for base in swaps:
        swap_path = f"{dir_path}/{segment_file_name(base, LOG_SUFFIX + SWAP_SUFFIX)}"
        size = storage.size(swap_path)
        walk = walk_segment(lambda p, n: storage.read(swap_path, p, n), size, base,
                            lambda _p, _h: None)
        # The swap file was fsynced before its rename, so it is whole; the segments it
        # replaces are those whose base offsets lie in its range.
        live = sorted(
            parsed[0] for name in storage.list_dir(dir_path)
            if (parsed := parse_segment_file_name(name)) is not None and parsed[1] == LOG_SUFFIX
        )
        for old in live:
            if base <= old < walk.next_offset:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    storage.delete(f"{dir_path}/{segment_file_name(old, suffix)}")
                if old != base:     # the first segment's holds the merged entries
                    storage.delete(f"{dir_path}/{segment_file_name(old, TXN_INDEX_SUFFIX)}")
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            storage.delete(f"{dir_path}/{segment_file_name(base, suffix)}")
        storage.rename(swap_path, f"{dir_path}/{segment_file_name(base, LOG_SUFFIX)}")
        completed.append(base)
        changed = True
    # List again only if something above changed the directory.
    names = set(storage.list_dir(dir_path)) if changed else set(names)
    for name in list(names):
        parsed = parse_segment_file_name(name)
        if parsed and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if segment_file_name(parsed[0], LOG_SUFFIX) not in names:
                storage.delete(f"{dir_path}/{name}")
                names.discard(name)
                changed = True
    if changed:
        storage.fsync_dir(dir_path)
    return completed, names


_CODECS = {"uncompressed": CompressionType.NONE, "gzip": CompressionType.GZIP,
           "snappy": CompressionType.SNAPPY, "lz4": CompressionType.LZ4,
           "zstd": CompressionType.ZSTD}


def _recompress(buf: bytearray, headers: list[BatchHeader], compression_type: str,
                level: int | None) -> tuple[bytearray, list[BatchHeader]]:
    """A topic's compression.type other than "producer": batches in another codec are
    re-encoded in the topic's (Kafka's LogValidator does the same). Only then are records
    decoded on the produce path; batches already in the right codec keep their bytes.
    Producer id, epoch, sequence and transactional flag carry over, so idempotence and
    transactions see the same batch."""
    target = _CODECS[compression_type]
    # A batch with reserved gaps (delayed delivery) keeps its codec: re-encoding would lose
    # its trailing gap (and an empty one cannot be built).
    if all(h.compression == target or h.is_control or h.records_count != h.last_offset_delta + 1
           for h in headers):
        return buf, headers
    out = bytearray()
    pos = 0
    for header in headers:
        end = pos + header.size_in_bytes
        if header.compression == target or header.is_control or \
                header.records_count != header.last_offset_delta + 1:
            out += buf[pos:end]
        else:
            batch = decode_batch(buf, pos)
            out += build_batch(
                batch.records, base_offset=header.base_offset, compression=target,
                compression_level=level,
                timestamp_type=TimestampType.CREATE_TIME, producer_id=header.producer_id,
                producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                is_transactional=header.is_transactional,
                partition_leader_epoch=header.partition_leader_epoch)
        pos = end
    return out, validate_batches(out)
