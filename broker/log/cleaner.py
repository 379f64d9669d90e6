"""Log compaction (cleanup.policy=compact): keep the latest record per key.

Theory of operation
-------------------
A compacted log is split at two marks (Kafka's `LogCleanerManager` / `Cleaner`):

    log start ... [clean part] first_dirty_offset [dirty part] first_uncleanable_offset ... LEO

The *uncleanable* part begins at the first of: the active segment, the high watermark
(followers may not have those records yet), and the first segment holding a record
younger than `min.compaction.lag.ms`. A pass works in three steps:

1. `prepare` (the log's owner thread; cheap): choose the rolled segments below the
   first uncleanable offset and load their indexes, so the next step only reads files.
2. `build` (any thread; the heavy part): read the dirty segments and build the *key map*
   (a 16-byte BLAKE2b digest of each key -> its latest offset), at most
   `cleaner_key_map_entries_max` keys, whole segments at a time (a single segment may
   pass the limit); the map's end is the new first dirty offset. Then copy every
   segment from the log start to the map's end into `.cleaned` files, group by group
   (adjacent segments merged while they fit `segment.bytes`), keeping a record when
     - it has a key (a compacted topic's keyless record is invalid and dropped, as Kafka's
       cleaner does), and
     - no later offset for its key is in the map, and
     - it is not a tombstone (null value) whose delete horizon has passed.
   Offsets never change: a batch keeps its base offset and last offset delta and the
   surviving records keep their offset deltas, so the log has gaps, never renumbering.
   A batch that loses nothing is copied byte for byte.
3. `commit` (the owner thread): `PartitionLog.replace_segments` swaps each group in
   crash-safely (see recovery.py), if the log's layout did not change meanwhile
   (a truncation or retention pass during `build` aborts the commit; nothing is lost,
   the next pass starts over).

Tombstones follow KIP-534: the first pass that keeps a tombstone writes its batch with
the *delete horizon* (attribute bit 6; base_timestamp holds `now_ms +
delete.retention.ms`, record timestamps stay absolute through their deltas). A later
pass drops tombstones whose horizon is <= now_ms. So a consumer that reads from the log
start to the end within delete.retention.ms of a tombstone being compacted sees it.

Transactions (Kafka's cleaner). The caller bounds the pass by the last stable
offset instead of the high watermark (the broker passes
``ReplicaManager.last_stable_offset_of``), so nothing at or beyond the first unstable
offset is cleaned: an ongoing transaction's records are never judged. The data batches
of aborted transactions (found in the segments' aborted transaction indexes, collected
by `prepare`) are dropped whole and their keys kept out of the key map, so an aborted
value never shadows a committed one.

Markers go as Kafka's cleaner removes them (``CleanedTransactionMetadata``): a pass reads
from the log start, so it sees every batch that precedes a marker in the cleaned range;
a marker is *removable* once no batch of its transaction is left before it (an ABORT
marker at once, as the pass drops its transaction's data; a COMMIT marker when the pass
read no transactional batch of its producer since that producer's previous marker: the
data was compacted away by earlier passes). The first pass that finds a marker removable
gives its batch a delete horizon of now + delete.retention.ms (the KIP-534 bit, as for
tombstones); a pass after the horizon drops it, an ABORT marker with its aborted
transaction index entry (the entries of the markers kept are merged into the cleaned
segment's index by `replace_segments`, which also deletes the producer snapshots taken
before a dropped marker: such a snapshot holds the transaction open and no marker would
close it). So a read_committed consumer that reads the log within delete.retention.ms of
the cleaning still meets the aborted range and its marker, and a COMMIT marker never goes
while a record of its transaction stays (a rebuilt producer state would hold that
transaction open for ever).

Producer state (Kafka's ``RETAIN_EMPTY``): the batch holding an active producer's last
data offset is kept even when none of its records survive (written empty: same base
offset, last offset delta, producer id, epoch and base sequence), and so is a marker that
is its producer's last entry in its current epoch. A producer state rebuilt from the log
(a restart without snapshots, a new replica) still has the producer's last sequence, so
its retry is a duplicate, not an OUT_OF_ORDER_SEQUENCE_NUMBER; delayed delivery's empty
batches (``broker.delayed``) on a compacted topic are such batches. The caller passes
the producer state (``LastRecord`` by producer id) to ``prepare``. Two departures: where
Kafka keeps an empty control batch this keeps the marker whole, and an aborted
transaction's batch goes even when it is its producer's last (see ``_clean_group``).

Not done (yet): persisting the first dirty offset (Kafka's cleaner-offset-checkpoint) —
after a restart the whole log counts as dirty, which costs one extra pass and loses
nothing.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Hashable, Iterable, Mapping

import crc32c

from broker.log.config import NO_LIMIT
from broker.log.partition_log import PartitionLog
from broker.log.transaction_index import AbortedTxn
from broker.log.segment import (
    CLEANED_SUFFIX,
    LOG_SUFFIX,
    LogSegment,
    SegmentCorruptError,
    segment_file_name,
)
from broker.log.storage import Storage
from clients.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CompressionType,
    ControlRecordType,
    Record,
    RecordError,
    compress,
    decode_batch,
    filtered_batch,
)
from clients.records.varint import write_varint, write_varlong

__all__ = [
    "LogCleaner",
    "CleaningPlan",
    "CleanResult",
    "LastRecord",
    "cleanable_range",
    "dirty_ratio",
    "logs_to_clean",
]

log = logging.getLogger("ketch.log.cleaner")

_DELETE_HORIZON_BIT = 0x40
_TIMESTAMP_TYPE_BIT = 0x08
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


def cleanable_range(partition_log: PartitionLog, high_watermark: int, now_ms: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) of a log right now."""
    segments = partition_log.segments
    first_uncleanable = min(segments[-1].base_offset, high_watermark)
    lag = partition_log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments[:-1]:
            if segment.size_bytes and segment.max_timestamp > now_ms - lag:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_dirty = max(partition_log.first_dirty_offset, partition_log.log_start_offset)
    return min(first_dirty, first_uncleanable), first_uncleanable


def dirty_ratio(partition_log: PartitionLog, high_watermark: int, now_ms: int) -> float:
    """Dirty bytes / cleanable bytes (Kafka's `cleanableRatio`); 0 when nothing is cleanable."""
    first_dirty, first_uncleanable = cleanable_range(partition_log, high_watermark, now_ms)
    clean = dirty = 0
    segments = partition_log.segments
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if upper > first_uncleanable:
            break
        if upper <= first_dirty:
            clean += segment.size_bytes
        else:
            dirty += segment.size_bytes
    total = clean + dirty
    return dirty / total if total else 0.0


def _past_max_compaction_lag(partition_log: PartitionLog, high_watermark: int, now_ms: int) -> bool:
    """max.compaction.lag.ms (KIP-354): a log whose oldest dirty segment holds records
    older than the lag is cleaned whatever its dirty ratio. A segment's age is its largest
    timestamp, so a segment qualifies once all its records are that old (Kafka looks at
    the first batch; this is later, never earlier)."""
    lag = partition_log.config.max_compaction_lag_ms
    if lag >= NO_LIMIT:
        return False
    first_dirty, first_uncleanable = cleanable_range(partition_log, high_watermark, now_ms)
    segments = partition_log.segments
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if upper > first_uncleanable:
            return False
        if upper > first_dirty and segment.size_bytes:
            return 0 <= segment.max_timestamp <= now_ms - lag
    return False


def logs_to_clean(
    logs: Iterable[tuple[Hashable, PartitionLog]],
    now_ms: int,
    high_watermark_of: Callable[[Hashable], int],
) -> list[tuple[Hashable, PartitionLog, float]]:
    """Compacted logs whose dirty ratio reached min.cleanable.dirty.ratio, dirtiest first
    (Kafka's `grabFilthiestCompactedLog`). The caller cleans one per pass."""
    chosen = []
    for key, partition_log in logs:
        if not partition_log.config.compact or partition_log.closed:
            continue
        ratio = dirty_ratio(partition_log, high_watermark_of(key), now_ms)
        if ratio > 0 and (ratio >= partition_log.config.min_cleanable_dirty_ratio
                          or _past_max_compaction_lag(partition_log, high_watermark_of(key),
                                                      now_ms)):
            chosen.append((key, partition_log, ratio))
    chosen.sort(key=lambda item: -item[2])
    return chosen


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last entry in the log, from its producer state (Kafka's
    ``LastRecord``): the last offset of its last data batch, or None when it has none
    since its epoch began (its last entry is a marker of ``producer_epoch``)."""
    last_data_offset: int | None
    producer_epoch: int


_NO_PRODUCERS: Mapping[int, LastRecord] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    layout_version: int
    segments: tuple[LogSegment, ...]  # rolled segments from the log start, in order
    uppers: tuple[int, ...]  # each segment's upper bound offset (next segment's base)
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    # The aborted transactions whose markers are below the first uncleanable offset.
    aborted: tuple[AbortedTxn, ...] = ()
    # The active producers' last entries: their batches are kept, emptied if need be.
    last_records: Mapping[int, LastRecord] = field(default_factory=lambda: _NO_PRODUCERS)


class _AbortedData:
    """Which transactional data batches belong to an aborted transaction."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted:
            self._by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if header.is_control or not header.is_transactional:
            return False
        ranges = self._by_producer.get(header.producer_id)
        return ranges is not None and any(first <= header.base_offset <= last
                                          for first, last in ranges)


class _CommittedTxns:
    """The producers with a transactional batch read since their last marker, in log
    order over one pass (Kafka's ``ongoingCommittedTxns``): a COMMIT marker whose producer
    is not here has no record of its transaction left before it."""

    def __init__(self) -> None:
        self._producers: set[int] = set()

    def on_data(self, header: BatchHeader) -> None:
        if header.is_transactional:
            self._producers.add(header.producer_id)

    def commit_removable(self, producer_id: int) -> bool:
        """A COMMIT marker of ``producer_id`` is read: whether its transaction is gone."""
        if producer_id in self._producers:
            self._producers.discard(producer_id)
            return False
        return True

    def on_abort(self, producer_id: int) -> None:
        # An ABORT marker ends the producer's transaction too (its data was dropped whole).
        self._producers.discard(producer_id)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    segments: tuple[LogSegment, ...]
    cleaned_path: str
    base_offset: int
    size_bytes: int
    # Offsets of the markers this group dropped (an ABORT's index entry goes too).
    dropped_markers: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class CleanResult:
    committed: bool
    first_dirty_offset: int  # after the pass
    segments_replaced: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    groups: tuple[CleanedGroup, ...] = field(default=(), repr=False)


@dataclass(slots=True)
class _Stats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0


class LogCleaner:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    # --- the three steps ------------------------------------------------------------------

    def prepare(self, partition_log: PartitionLog, high_watermark: int, now_ms: int,
                last_records: Mapping[int, LastRecord] = _NO_PRODUCERS) -> CleaningPlan | None:
        """Owner thread: what a pass would clean, or None if nothing is dirty.
        ``last_records``: the log's producer state (its active producers' last entries),
        taken now; without it no batch is kept for a producer's sake."""
        if not partition_log.config.compact:
            return None
        first_dirty, first_uncleanable = cleanable_range(partition_log, high_watermark, now_ms)
        segments = partition_log.segments
        chosen: list[LogSegment] = []
        uppers: list[int] = []
        for i, segment in enumerate(segments[:-1]):
            upper = segments[i + 1].base_offset
            if upper > first_uncleanable:
                break
            segment.next_offset  # load indexes here, not on the cleaning thread
            chosen.append(segment)
            uppers.append(upper)
        if not chosen:
            return None
        return CleaningPlan(partition_log.layout_version, tuple(chosen), tuple(uppers),
                            first_dirty, first_uncleanable, now_ms,
                            tuple(partition_log.aborted_transactions_below(uppers[-1])),
                            MappingProxyType(dict(last_records)))

    def build(self, plan: CleaningPlan, delete_retention_ms: int,
              key_map_entries_max: int, segment_bytes: int) -> tuple[list[CleanedGroup], int, _Stats] | None:
        """Any thread: write the cleaned files; None if the segments vanished meanwhile.

        Returns (groups, new first dirty offset, stats).
        """
        stats = _Stats()
        try:
            key_map, map_end = self._build_key_map(plan, key_map_entries_max, stats)
            groups = self._clean_segments(plan, key_map, map_end, delete_retention_ms,
                                          segment_bytes, stats)
        except (OSError, RecordError, SegmentCorruptError) as e:
            # A segment deleted or truncated under us: give up this pass, lose nothing.
            log.info("cleaning pass abandoned: %s", e)
            return None
        return groups, map_end, stats

    def commit(self, partition_log: PartitionLog, plan: CleaningPlan, groups: list[CleanedGroup],
               map_end: int, stats: _Stats, now_ms: int) -> CleanResult:
        """Owner thread: swap the cleaned groups in, unless the log changed shape."""
        if partition_log.layout_version != plan.layout_version or partition_log.closed:
            for group in groups:
                self.storage.delete(group.cleaned_path)
            return CleanResult(False, partition_log.first_dirty_offset)
        replaced = 0
        for group in groups:
            if partition_log.replace_segments(list(group.segments), group.cleaned_path,
                                              group.base_offset, now_ms, group.dropped_markers):
                replaced += len(group.segments)
        partition_log.first_dirty_offset = max(partition_log.first_dirty_offset, map_end)
        return CleanResult(True, partition_log.first_dirty_offset, replaced, stats.bytes_read,
                           stats.bytes_written, stats.records_kept, stats.records_removed,
                           stats.tombstones_removed, tuple(groups))

    def clean(self, partition_log: PartitionLog, high_watermark: int, now_ms: int,
              last_records: Mapping[int, LastRecord] = _NO_PRODUCERS) -> CleanResult:
        """All three steps in the caller's thread (tests, and a broker without threads)."""
        plan = self.prepare(partition_log, high_watermark, now_ms, last_records)
        if plan is None:
            return CleanResult(False, partition_log.first_dirty_offset)
        config = partition_log.config
        built = self.build(plan, config.delete_retention_ms, config.cleaner_key_map_entries_max,
                           config.segment_bytes)
        if built is None:
            return CleanResult(False, partition_log.first_dirty_offset)
        groups, map_end, stats = built
        return self.commit(partition_log, plan, groups, map_end, stats, now_ms)

    # --- key map --------------------------------------------------------------------------

    def _build_key_map(self, plan: CleaningPlan, entries_max: int, stats: _Stats) -> tuple[dict[bytes, int], int]:
        key_map: dict[bytes, int] = {}
        map_end = plan.first_dirty_offset
        aborted = _AbortedData(plan.aborted)
        for segment, upper in zip(plan.segments, plan.uppers):
            if upper <= plan.first_dirty_offset:
                continue
            segment_keys: dict[bytes, int] = {}
            for batch in self._batches(segment, stats):
                if batch.header.is_control or batch.header in aborted:
                    continue
                for record in batch.records:
                    if record.key is not None and record.offset >= plan.first_dirty_offset:
                        segment_keys[_digest(record.key)] = record.offset
            new_keys = sum(1 for k in segment_keys if k not in key_map)
            if key_map and len(key_map) + new_keys > entries_max:
                break  # the next pass continues from here
            key_map.update(segment_keys)
            map_end = upper
        return key_map, map_end

    def _batches(self, segment: LogSegment, stats: _Stats):
        for bp in segment.iter_headers():
            data = segment.read_bytes(bp.position, bp.header.size_in_bytes)
            stats.bytes_read += len(data)
            yield decode_batch(data)

    # --- cleaning -------------------------------------------------------------------------

    def _clean_segments(self, plan: CleaningPlan, key_map: dict[bytes, int], map_end: int,
                        delete_retention_ms: int, segment_bytes: int, stats: _Stats) -> list[CleanedGroup]:
        todo = [(s, u) for s, u in zip(plan.segments, plan.uppers) if u <= map_end]
        groups: list[list[LogSegment]] = []
        size = 0
        for segment, upper in todo:
            if groups and size + segment.size_bytes <= segment_bytes and (
                upper - groups[-1][0].base_offset <= 2**31 - 1
            ):
                groups[-1].append(segment)
                size += segment.size_bytes
            else:
                groups.append([segment])
                size = segment.size_bytes
        out = []
        aborted = _AbortedData(plan.aborted)
        committed = _CommittedTxns()        # one log-ordered walk across the groups
        for group in groups:
            cleaned = self._clean_group(group, key_map, plan.now_ms, delete_retention_ms, stats,
                                        aborted, committed, plan.last_records)
            if cleaned is not None:
                out.append(cleaned)
        return out

    def _clean_group(self, group: list[LogSegment], key_map: dict[bytes, int], now_ms: int,
                     delete_retention_ms: int, stats: _Stats, aborted: _AbortedData,
                     committed: _CommittedTxns, last_records: Mapping[int, LastRecord]
                     ) -> CleanedGroup | None:
        base = group[0].base_offset
        path = f"{group[0].dir_path}/{segment_file_name(base, LOG_SUFFIX + CLEANED_SUFFIX)}"
        self.storage.create(path)
        position = 0
        changed = len(group) > 1  # merging segments is worth committing by itself
        dropped_markers: set[int] = set()
        for segment in group:
            for bp in segment.iter_headers():
                raw = segment.read_bytes(bp.position, bp.header.size_in_bytes)
                stats.bytes_read += len(raw)
                if bp.header in aborted:
                    # Dropped even when it is its producer's last batch (where Kafka keeps
                    # it empty): its ABORT marker goes at the horizon, and a transactional
                    # batch left without it would reopen the transaction in a producer
                    # state rebuilt from the log.
                    stats.records_removed += bp.header.records_count
                    changed = True
                    continue
                out = self._clean_batch(raw, key_map, now_ms, delete_retention_ms, stats,
                                        dropped_markers, committed, last_records)
                if out is not raw:
                    changed = True
                if out:
                    self.storage.write(path, position, out)
                    position += len(out)
        if not changed:
            self.storage.delete(path)
            return None
        stats.bytes_written += position
        return CleanedGroup(tuple(group), path, base, position, frozenset(dropped_markers))

    def _clean_batch(self, raw: bytes, key_map: dict[bytes, int], now_ms: int,
                     delete_retention_ms: int, stats: _Stats, dropped_markers: set[int],
                     committed: _CommittedTxns, last_records: Mapping[int, LastRecord]) -> bytes:
        """The batch to write instead of `raw`: `raw` itself, a rewritten one, or b""."""
        batch = decode_batch(raw)
        header = batch.header
        if header.is_control:
            record = batch.records[0] if batch.records else None
            control_type = getattr(record, "control_type", None)
            if not header.is_transactional or record is None or control_type not in (
                    ControlRecordType.ABORT, ControlRecordType.COMMIT):
                return raw      # anything else stays
            if control_type is ControlRecordType.ABORT:
                committed.on_abort(header.producer_id)
            elif not committed.commit_removable(header.producer_id):
                return raw      # a record of its transaction is still in the log
            if not header.has_delete_horizon:
                return _encode_batch(header, list(batch.records), now_ms + delete_retention_ms)
            if header.base_timestamp <= now_ms and not _last_of_producer(header, last_records):
                dropped_markers.add(header.base_offset)
                return b""
            return raw      # (Kafka keeps an empty control batch for the last; this keeps it whole)
        committed.on_data(header)       # read, whatever survives (Kafka's rule)
        horizon = header.base_timestamp if header.has_delete_horizon else None
        kept: list[Record] = []
        has_tombstone = False
        for record in batch.records:
            if record.key is None:
                stats.records_removed += 1
                continue
            latest = key_map.get(_digest(record.key))
            if latest is not None and record.offset < latest:
                stats.records_removed += 1
                continue
            if record.value is None:
                if horizon is not None and horizon <= now_ms:
                    stats.records_removed += 1
                    stats.tombstones_removed += 1
                    continue
                has_tombstone = True
            kept.append(record)
        stats.records_kept += len(kept)
        if not kept:
            if not _last_of_producer(header, last_records):
                return b""
            # Its producer's last batch: kept, empty, for the sequence numbers it carries.
            return raw if not batch.records else filtered_batch(header, [])
        needs_horizon = has_tombstone and horizon is None
        if len(kept) == len(batch.records) and not needs_horizon:
            return raw
        new_horizon = (now_ms + delete_retention_ms) if needs_horizon else (
            horizon if has_tombstone else None)
        return _encode_batch(header, kept, new_horizon)


def _last_of_producer(header: BatchHeader, last_records: Mapping[int, LastRecord]) -> bool:
    """Kafka's ``isBatchLastRecordOfProducer``: the batch holding an active producer's
    last data offset (its last sequence number), or, when its last entry is a marker, that
    marker of its current epoch (the epoch that fences). Such a batch is kept, emptied
    if none of its records survive, so the producer state rebuilt from the log still
    knows the producer."""
    if header.producer_id < 0:
        return False
    last = last_records.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


def _encode_batch(header: BatchHeader, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """A batch like `header` holding `records` (offsets and timestamps kept).

    `RecordBatchBuilder` makes the first record's timestamp the base timestamp and has no
    delete horizon, so the cleaner encodes its own batches; the layout is Kafka's
    `DefaultRecord`. TODO(records): move into clients.records once the builder takes a
    base timestamp / delete horizon.
    """
    log_append = header.attributes & _TIMESTAMP_TYPE_BIT
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp if not log_append else header.base_timestamp
    body = bytearray()
    for record in records:
        one = bytearray(1)  # record attributes: unused
        delta_ts = 0 if log_append else record.timestamp - base_timestamp
        write_varlong(one, delta_ts)
        write_varint(one, record.offset - header.base_offset)
        for part in (record.key, record.value):
            if part is None:
                one.append(1)
            else:
                write_varint(one, len(part))
                one += part
        write_varint(one, len(record.headers))
        for hkey, hvalue in record.headers:
            encoded = hkey.encode("utf-8")
            write_varint(one, len(encoded))
            one += encoded
            if hvalue is None:
                one.append(1)
            else:
                write_varint(one, len(hvalue))
                one += hvalue
        write_varint(body, len(one))
        body += one
    compression = header.compression
    region = compress(compression, body) if compression != CompressionType.NONE else bytes(body)
    attributes = header.attributes & ~_DELETE_HORIZON_BIT
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_BIT
    if log_append:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in records)
    out = bytearray(BATCH_HEADER_SIZE + len(region))
    _HEADER.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch,
        2, 0, attributes, header.last_offset_delta, base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, len(records),
    )
    out[BATCH_HEADER_SIZE:] = region
    _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)
