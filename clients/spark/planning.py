"""Offset arithmetic of the ``ketch`` source: what each micro-batch or batch reads.

Theory of operation: the driver asks the cluster for each partition's log start, high
watermark (or last stable offset under read_committed) and, for timestamp options, the
first offset at a time; everything after that is plain arithmetic here.

- ``resolve``: an ``OffsetSpec`` plus those answers -> a concrete offset per partition
  (the -2/-1 sentinels and timestamps replaced), or an error naming the partition.
- ``rate_limit``: ``maxOffsetsPerTrigger`` spread over partitions in proportion to what
  each has waiting (largest remainders, so a batch takes exactly the limit when that
  much is there: a test can count micro-batches).
- ``plan_ranges``: one ``OffsetRange`` per partition, split into equal pieces when
  ``minPartitions`` asks for more Spark tasks than there are partitions or
  ``maxRecordsPerPartition`` caps a task (Spark's KafkaOffsetRangeCalculator does the same).
- ``checkpoint`` / ``from_checkpoint``: the offsets Spark stores, ``{"topic": {"0": 120}}``.
- ``archive_span`` / ``split_archived`` (tiered storage, with ``ketch.remote.storage``): the
  part of each range below the partition's local log start that the archive holds (from
  the replicated remote log metadata) becomes its own task, read by the executor from the
  store directly; the rest is read through the brokers as before.

Pure: no I/O; the shell (``clients.spark.source``) feeds it cluster answers.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clients.spark.options import EARLIEST, LATEST, KetchSourceError, OffsetSpec
from clients.tiered.metadata import RemoteLogSegmentMetadata
from clients.types import TopicPartition

__all__ = ["OffsetRange", "resolve", "rate_limit", "plan_ranges", "checkpoint", "from_checkpoint",
           "ArchiveSpan", "PlannedRange", "archive_span", "split_archived"]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one partition: one Spark task's work."""
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def resolve(spec: OffsetSpec, which: str, partitions: list[TopicPartition],
            earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
            by_time: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
    """The concrete offset of each partition. ``by_time``: the ListOffsets answer for the
    spec's timestamps (-1 where no record is at or after the time)."""
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in partitions}
    name = {"offsets": f"{which}Offsets", "timestamps": f"{which}OffsetsByTimestamp",
            "timestamp": f"{which}Timestamp"}[spec.kind]
    if spec.kind in ("offsets", "timestamps"):
        known = set(partitions)
        unknown = sorted(str(tp) for tp in spec.offsets if tp not in known)
        if unknown:
            raise KetchSourceError(f"Option '{name}' names partitions this query does not read or "
                                   f"that do not exist: {', '.join(unknown)}")
        missing = sorted(str(tp) for tp in partitions if tp not in spec.offsets)
        if missing:
            raise KetchSourceError(f"Option '{name}' must give every partition the query reads; "
                                   f"missing: {', '.join(missing)}")
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        if spec.kind == "offsets":
            off = spec.offsets[tp]
            out[tp] = earliest[tp] if off == EARLIEST else latest[tp] if off == LATEST else off
            continue
        assert by_time is not None
        found = by_time[tp]
        if found < 0:
            if spec.strategy == "latest":
                found = latest[tp]
            else:
                raise KetchSourceError(
                    f"Option '{name}': partition {tp} has no record at or after the timestamp "
                    f"(set '{which}OffsetsByTimestampStrategy' to latest to start at the end)")
        out[tp] = found
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets that take at most ``limit`` records in all, each partition's share in
    proportion to what it has waiting (Hamilton's largest remainders, ties by partition)."""
    waiting = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * w / total for tp, w in waiting.items()}
    taken = {tp: math.floor(s) for tp, s in shares.items()}
    left = limit - sum(taken.values())
    for tp in sorted(shares, key=lambda tp: (taken[tp] - shares[tp], tp))[:left]:
        taken[tp] += 1
    return {tp: start.get(tp, latest[tp]) + taken[tp] if tp in start else latest[tp]
            for tp in latest}


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                min_partitions: int | None = None,
                max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Offset ranges for Spark's tasks: every non-empty partition range, split so that there
    are at least ``min_partitions`` tasks (large partitions split most) and none is larger
    than ``max_records_per_partition``."""
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp])
              for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = 1
        if min_partitions is not None and min_partitions > len(ranges) and total > 0:
            pieces = max(pieces, math.ceil(r.size * min_partitions / total))
        if max_records_per_partition is not None:
            pieces = max(pieces, math.ceil(r.size / max_records_per_partition))
        pieces = min(pieces, r.size)
        step = r.size / pieces
        bounds = [r.from_offset + round(i * step) for i in range(pieces)] + [r.until_offset]
        out.extend(OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]))
    return out


def checkpoint(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka source's offset JSON: ``{"topic": {"0": 120, ...}}``."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_checkpoint(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    try:
        return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}
    except (AttributeError, TypeError, ValueError):
        raise KetchSourceError(f"the checkpoint's offsets are not the ketch source's "
                               f'{{"topic": {{"0": 120}}}}: {offsets!r}') from None


# ------------------------------------------------------------------ the archive (tiered storage)

@dataclass(frozen=True, slots=True)
class ArchiveSpan:
    """Offsets [start, end) of one partition an executor may read from the archive: held by
    readable remote segments without a gap and below the local log start. ``segments``:
    those segments by start offset."""
    start: int
    end: int
    segments: tuple[RemoteLogSegmentMetadata, ...]


def archive_span(copied: Sequence[RemoteLogSegmentMetadata],
                 local_log_start: int) -> ArchiveSpan | None:
    """``copied``: the partition's readable remote segments (``RemotePartitionIndex.copied``,
    by start offset); None when the archive holds nothing below the local log."""
    if not copied:
        return None
    start = reach = copied[0].start_offset
    held: list[RemoteLogSegmentMetadata] = []
    for s in copied:
        if s.start_offset > reach:
            break                       # a gap: what follows is not read directly
        if s.end_offset + 1 > reach:
            held.append(s)
            reach = s.end_offset + 1
    end = min(reach, local_log_start)
    if end <= start:
        return None
    return ArchiveSpan(start, end, tuple(s for s in held if s.start_offset < end))


@dataclass(frozen=True, slots=True)
class PlannedRange:
    """One Spark task. ``segments`` non-empty: read ``range`` from the archive directly
    (the segments from the one holding its start to the span's end, so a read_committed
    reader finds aborted transactions whose markers lie after the range); empty: through
    the brokers."""
    range: OffsetRange
    segments: tuple[RemoteLogSegmentMetadata, ...] = ()


def split_archived(ranges: Sequence[OffsetRange],
                   spans: Mapping[TopicPartition, ArchiveSpan]) -> list[PlannedRange]:
    """Each range cut where it enters and leaves its partition's archive span."""
    out: list[PlannedRange] = []
    for r in ranges:
        span = spans.get(TopicPartition(r.topic, r.partition))
        if span is None or r.until_offset <= span.start or r.from_offset >= span.end:
            out.append(PlannedRange(r))
            continue
        lo, hi = max(r.from_offset, span.start), min(r.until_offset, span.end)
        if r.from_offset < lo:
            out.append(PlannedRange(OffsetRange(r.topic, r.partition, r.from_offset, lo)))
        out.append(PlannedRange(OffsetRange(r.topic, r.partition, lo, hi),
                                tuple(s for s in span.segments if s.end_offset >= lo)))
        if hi < r.until_offset:
            out.append(PlannedRange(OffsetRange(r.topic, r.partition, hi, r.until_offset)))
    return out
