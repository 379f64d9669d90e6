"""Tiered storage's pure parts (KIP-405): the remote log metadata codec and state machine, the
remote segment index, the copy and expiry plans, reading batches out of a remote segment
(and the aborted transactions of a read_committed one), the Spark source's split of a range
into the archive's part and the brokers', local retention of copied segments, and the
controller's rules for the topic configs."""
from __future__ import annotations

import random
import uuid

import pytest

from broker.log import LogConfig, PartitionLog, SimStorage
from clients.tiered.metadata import (
    MetadataFormatError, RemoteLogMetadataCache, RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState as S, RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState, RemotePartitionIndex, decode_metadata, encode_metadata,
)
from broker.tiered.plan import (
    LocalSegment, backoff_ms, first_record_at_or_after, remote_segments_to_delete,
    segment_leader_epochs, segments_to_copy, time_index_floor_offset,
)
from clients.spark.planning import (
    ArchiveSpan, OffsetRange, PlannedRange, archive_span, split_archived,
)
from clients.tiered.aborted_txn import AbortedTxn
from clients.tiered.reading import (
    AbortedTransactions, OpenTransactions, position_for_offset, select_batches,
)
from clients.types import TopicPartition
from clients.tiered.remote_storage import RemoteSegmentId
from clients.records import (
    ControlRecordType, Record, RecordError, build_batch, build_control_batch,
)
from clients.records.batch import end_transaction_marker_value
from metadata_log.config_defs import tiered_storage_problem

TOPIC_ID = uuid.UUID(int=7)


def sid(n: int, partition: int = 0) -> RemoteSegmentId:
    return RemoteSegmentId(TOPIC_ID, "orders", partition, uuid.UUID(int=1000 + n))


def seg(n: int, start: int, end: int, *, size: int = 100, max_ts: int = 0,
        epochs: tuple[tuple[int, int], ...] = ((0, 0),)) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(sid(n), start, end, 1, max_ts, 5, epochs, size)


def update(n: int, state: S) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(sid(n), 2, 6, state)


# ---------------------------------------------------------------- codec

@pytest.mark.parametrize("record", [
    seg(1, 0, 99, size=4096, max_ts=1_700_000_000_000, epochs=((3, 0), (4, 50))),
    seg(2, 100, 100, epochs=()),
    update(1, S.COPY_SEGMENT_FINISHED),
    update(1, S.DELETE_SEGMENT_FINISHED),
    RemotePartitionDeleteMetadata(TOPIC_ID, "orders", 3, 1, 9,
                                  RemotePartitionDeleteState.DELETE_PARTITION_MARKED),
], ids=str)
def test_metadata_records_round_trip(record) -> None:
    data = encode_metadata(record)
    assert decode_metadata(data) == record
    assert data[0] == 1                       # frame version (Kafka's RemoteLogMetadataSerde)


def test_metadata_record_bytes_are_kafkas_layout() -> None:
    """Hand-checked against RemoteLogSegmentMetadataUpdateRecord.json v0 (flexible)."""
    data = encode_metadata(update(1, S.COPY_SEGMENT_FINISHED))
    expected = (bytes([1, 1, 0])                              # frame, api key 1, version 0
                + bytes([7]) + b"orders" + TOPIC_ID.bytes + (0).to_bytes(4, "big") + b"\0"
                + uuid.UUID(int=1001).bytes + b"\0"           # RemoteLogSegmentId
                + (2).to_bytes(4, "big") + (6).to_bytes(8, "big")   # BrokerId, EventTimestampMs
                + b"\0"                                        # CustomMetadata null
                + bytes([1]) + b"\0")                          # state, tagged fields
    assert data == expected


@pytest.mark.parametrize("data", [b"", b"\x02\x00\x00", b"\x01\x09\x00", b"\x01\x01\x01",
                                  encode_metadata(update(1, S.COPY_SEGMENT_FINISHED))[:-3],
                                  encode_metadata(update(1, S.COPY_SEGMENT_FINISHED)) + b"\0"])
def test_malformed_metadata_is_refused(data: bytes) -> None:
    with pytest.raises(MetadataFormatError):
        decode_metadata(data)


def test_an_unknown_state_is_refused() -> None:
    data = bytearray(encode_metadata(update(1, S.COPY_SEGMENT_FINISHED)))
    data[-2] = 9
    with pytest.raises(MetadataFormatError):
        decode_metadata(bytes(data))


# ---------------------------------------------------------------- state machine and index

def test_a_segment_is_readable_only_between_copy_finished_and_delete_started() -> None:
    index = RemotePartitionIndex()
    assert index.replay(seg(1, 0, 99)) is None
    assert index.copied() == [] and index.highest_copied_offset() == -1
    assert index.replay(update(1, S.COPY_SEGMENT_FINISHED)) is None
    assert [s.start_offset for s in index.copied()] == [0]
    assert index.highest_copied_offset() == 99 and index.log_start_offset() == 0
    assert index.replay(update(1, S.DELETE_SEGMENT_STARTED)) is None
    assert index.copied() == [] and len(index.in_state(S.DELETE_SEGMENT_STARTED)) == 1
    assert index.replay(update(1, S.DELETE_SEGMENT_FINISHED)) is None
    assert index.segments == {}


@pytest.mark.parametrize("steps, refused", [
    ([S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED], 1),
    ([S.DELETE_SEGMENT_FINISHED], 0),                 # a delete must start first
    ([S.DELETE_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED], 1),   # a zombie's late FINISHED
    ([S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, S.COPY_SEGMENT_STARTED], 2),
])
def test_transitions_outside_the_table_are_ignored(steps: list[S], refused: int) -> None:
    index = RemotePartitionIndex()
    index.replay(seg(1, 0, 9))
    problems = [index.replay(update(1, state)) for state in steps]
    assert [i for i, p in enumerate(problems) if p is not None] == [refused]


def test_updates_of_unknown_segments_and_double_adds_are_ignored() -> None:
    index = RemotePartitionIndex()
    assert index.replay(update(5, S.COPY_SEGMENT_FINISHED)) is not None
    index.replay(seg(1, 0, 9))
    assert index.replay(seg(1, 0, 9)) is not None
    assert index.replay(RemoteLogSegmentMetadata(sid(2), 0, 9, 1, 0, 0, (), 1,
                                                 S.COPY_SEGMENT_FINISHED)) is not None


def finished(index: RemotePartitionIndex, *segments: RemoteLogSegmentMetadata) -> None:
    for s in segments:
        assert index.replay(s) is None
        n = s.segment.segment_id.int - 1000
        assert index.replay(update(n, S.COPY_SEGMENT_FINISHED)) is None


def test_offset_lookup_finds_the_segment_holding_it_or_the_next() -> None:
    index = RemotePartitionIndex()
    finished(index, seg(1, 0, 99), seg(2, 100, 199), seg(3, 250, 299))
    assert index.segment_for_offset(0).segment == sid(1)
    assert index.segment_for_offset(99).segment == sid(1)
    assert index.segment_for_offset(100).segment == sid(2)
    assert index.segment_for_offset(220).segment == sid(3)      # a gap: the next segment
    assert index.segment_for_offset(300) is None
    # A new leader copied [150, 260] again: the copy reaching furthest serves the overlap.
    finished(index, seg(4, 150, 260))
    assert index.segment_for_offset(160).segment == sid(4)
    assert index.segment_for_offset(120).segment == sid(2)
    assert index.highest_copied_offset() == 299 and index.size_bytes() == 400


def test_the_cache_keeps_partitions_apart_and_forgets_deleted_ones() -> None:
    cache = RemoteLogMetadataCache()
    cache.replay(RemoteLogSegmentMetadata(sid(1, partition=1), 0, 9, 1, 0, 0, (), 10))
    cache.replay(RemoteLogSegmentMetadataUpdate(sid(1, partition=1), 1, 0, S.COPY_SEGMENT_FINISHED))
    assert cache.index(TOPIC_ID, 1).highest_copied_offset() == 9
    assert cache.index(TOPIC_ID, 0).highest_copied_offset() == -1
    cache.replay(RemotePartitionDeleteMetadata(TOPIC_ID, "orders", 1, 1, 0,
                                               RemotePartitionDeleteState.DELETE_PARTITION_FINISHED))
    assert cache.index(TOPIC_ID, 1).segments == {}


# ---------------------------------------------------------------- plans

def local(*spans: tuple[int, int], active_last: bool = True) -> list[LocalSegment]:
    return [LocalSegment(b, n, (n - b) * 10, active_last and i == len(spans) - 1)
            for i, (b, n) in enumerate(spans)]


@pytest.mark.parametrize("hw, highest, expected", [
    (300, -1, [0, 100]),          # closed and below the HW; never the active segment
    (150, -1, [0]),               # [100, 200) reaches above the HW: not yet
    (300, 99, [100]),             # already copied up to 99
    (300, 150, [100]),            # a new leader's boundaries: copied whole
    (300, 199, []),
])
def test_segments_to_copy(hw: int, highest: int, expected: list[int]) -> None:
    segments = local((0, 100), (100, 200), (200, 250))
    assert [s.base_offset for s in segments_to_copy(segments, hw, highest)] == expected


def test_remote_expiry_by_time_size_and_log_start() -> None:
    copied = [seg(1, 0, 99, size=100, max_ts=1000), seg(2, 100, 199, size=100, max_ts=2000),
              seg(3, 200, 299, size=100, max_ts=3000)]
    by_time = remote_segments_to_delete(copied, now_ms=3500, retention_ms=1600, retention_bytes=-1,
                                        local_bytes_above=0, log_start_offset=-1)
    assert [(s.start_offset, why) for s, why in by_time] == [(0, "retention.ms")]
    # 300 remote + 150 local, limit 160: over by 290 -> the two oldest (each only while the
    # log stays over the limit without it).
    by_size = remote_segments_to_delete(copied, now_ms=0, retention_ms=-1, retention_bytes=160,
                                        local_bytes_above=150, log_start_offset=-1)
    assert [(s.start_offset, why) for s, why in by_size] == [(0, "retention.bytes"),
                                                             (100, "retention.bytes")]
    by_start = remote_segments_to_delete(copied, now_ms=0, retention_ms=-1, retention_bytes=-1,
                                         local_bytes_above=0, log_start_offset=150)
    assert [s.start_offset for s, _ in by_start] == [0]
    assert remote_segments_to_delete(copied, 10**12, -1, -1, 0, -1) == []


def test_backoff_doubles_up_to_the_cap_with_jitter() -> None:
    rng = random.Random(1)
    waits = [backoff_ms(a, 100, 1000, rng, jitter=0.0) for a in range(1, 7)]
    assert waits == [100, 200, 400, 800, 1000, 1000]
    jittered = [backoff_ms(3, 100, 1000, rng) for _ in range(50)]
    assert min(jittered) >= 320 and max(jittered) <= 480 and len(set(jittered)) > 1


def test_segment_leader_epochs_cover_the_range() -> None:
    entries = [(1, 0), (2, 40), (5, 120), (6, 300)]
    assert segment_leader_epochs(entries, 50, 199) == ((2, 50), (5, 120))
    assert segment_leader_epochs(entries, 120, 150) == ((5, 120),)
    assert segment_leader_epochs(entries, 0, 39) == ((1, 0),)


# ---------------------------------------------------------------- the Spark source's split

def test_archive_span_stops_at_a_gap_and_at_the_local_log_start() -> None:
    a, b, c, d = seg(1, 0, 99), seg(2, 100, 199), seg(3, 150, 249), seg(4, 300, 399)
    # b and c overlap (c copied again by a new leader): the span reaches c's end; d is
    # after a gap and is not read directly.
    assert archive_span([a, b, c, d], local_log_start=1000) == ArchiveSpan(0, 250, (a, b, c))
    assert archive_span([a, b, c, d], local_log_start=120) == ArchiveSpan(0, 120, (a, b))
    assert archive_span([a, b], local_log_start=0) is None       # nothing below the local log
    assert archive_span([], local_log_start=50) is None


def test_split_archived_cuts_ranges_at_the_span() -> None:
    a, b, c = seg(1, 100, 199), seg(2, 200, 299), seg(3, 300, 399)
    tp = TopicPartition("orders", 0)
    span = ArchiveSpan(100, 350, (a, b, c))
    r = lambda lo, hi, p=0: OffsetRange("orders", p, lo, hi)      # noqa: E731
    ranges = [r(50, 150), r(150, 250), r(250, 500), r(600, 700), r(0, 10, 1)]
    assert split_archived(ranges, {tp: span}) == [
        PlannedRange(r(50, 100)),                   # below the archive: the broker's (data loss)
        PlannedRange(r(100, 150), (a, b, c)),       # from its segment to the span's end
        PlannedRange(r(150, 250), (a, b, c)),
        PlannedRange(r(250, 350), (b, c)),
        PlannedRange(r(350, 500)),                  # the local log's
        PlannedRange(r(600, 700)),
        PlannedRange(r(0, 10, 1)),                  # a partition without an archive
    ]
    assert split_archived(ranges[:1], {}) == [PlannedRange(r(50, 150))]


# ---------------------------------------------------------------- read_committed over the archive

def test_aborted_transactions_overlapping_a_read_and_when_they_are_complete() -> None:
    t1, t2 = AbortedTxn(7, 10, 20, 5), AbortedTxn(8, 30, 40, 21)
    late = AbortedTxn(9, 200, 210, 120)     # its last stable offset is past the read
    collected = AbortedTransactions(15, 100)
    assert not collected.add_segment([AbortedTxn(6, 0, 12, 0), t1])   # ended before 15
    assert not collected.add_segment([t2])
    assert collected.add_segment([late])            # nothing after it can overlap [15, 100)
    assert collected.sorted() == (t1, t2)
    assert collected.overlapping(15, 25) == [(10, 7)]
    assert collected.overlapping(25, 100) == [(30, 8)]
    assert collected.aborts(8, 35) and not collected.aborts(8, 41) and not collected.aborts(7, 35)


def txn_batch(pid: int, base: int, n: int = 2) -> bytes:
    return build_batch([Record(base + i, 1, None, b"x") for i in range(n)], base_offset=base,
                       producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)


def marker(pid: int, offset: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(kind, end_transaction_marker_value(0), timestamp_ms=1,
                               base_offset=offset, producer_id=pid, producer_epoch=0,
                               is_transactional=True)


def test_open_transactions_hold_back_what_the_archive_does_not_see_end() -> None:
    aborted = AbortedTransactions(0, 100)
    aborted.add_segment([AbortedTxn(3, 20, 60, 0)])     # producer 3 aborted at 60 (past the read)
    txns = OpenTransactions(aborted)
    plain = build_batch([Record(0, 1, None, b"p")], base_offset=0)
    txns.scan(plain + txn_batch(1, 1) + txn_batch(2, 3), 0)
    assert txns.barrier == 1                            # 1 and 2 not ended yet
    txns.scan(marker(1, 5, ControlRecordType.COMMIT) + txn_batch(3, 20), 0)
    assert txns.barrier == 3                            # 1 ended; 3 is known aborted
    txns.scan(marker(2, 30, ControlRecordType.ABORT), 0)
    assert txns.barrier == float("inf")
    # Complete: what the indexes do not abort committed, nothing is held.
    done = AbortedTransactions(0, 100)
    done.add_segment([AbortedTxn(5, 0, 1, 150)])
    complete = OpenTransactions(done)
    complete.scan(txn_batch(4, 10), 0)
    assert complete.barrier == float("inf")


# ---------------------------------------------------------------- reading a remote segment

def batches(*counts: int, base: int = 0) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Concatenated batches of ``counts`` records; (base offset, position, size) of each."""
    out, layout, offset = bytearray(), [], base
    for n in counts:
        b = build_batch([Record(offset + i, 1, None, b"v%d" % (offset + i)) for i in range(n)],
                        base_offset=offset)
        layout.append((offset, len(out), len(b)))
        out += b
        offset += n
    return bytes(out), layout


def test_offset_index_lookup_is_the_floor_entry() -> None:
    index = b"".join(r.to_bytes(4, "big") + p.to_bytes(4, "big")
                     for r, p in [(0, 0), (10, 4096), (25, 8192)])
    assert position_for_offset(index, 100, 99) == 0
    assert position_for_offset(index, 100, 100) == 0
    assert position_for_offset(index, 100, 115) == 4096
    assert position_for_offset(index, 100, 10_000) == 8192
    assert position_for_offset(b"", 100, 150) == 0


def test_select_batches_returns_whole_batches_from_the_fetch_offset() -> None:
    data, layout = batches(5, 5, 5, 5)
    # From inside the second batch: that batch whole, and as many as fit.
    r = select_batches(data, 7, layout[1][2] + layout[2][2], True, True)
    assert (r.start, r.end, r.next_offset) == (layout[1][1], layout[3][1], 15)
    # max_bytes below one batch: the first batch anyway (KIP-74), or nothing without it.
    r = select_batches(data, 0, 10, True, True)
    assert (r.start, r.end) == (0, layout[0][2])
    assert select_batches(data, 0, 10, False, True).end == 0
    # Past the end of the segment: nothing.
    assert select_batches(data, 20, 10_000, True, True).end == 0


def test_select_batches_asks_for_more_when_the_chunk_cuts_the_first_batch() -> None:
    data, layout = batches(5, 5)
    cut = data[:layout[1][1] + 20]
    r = select_batches(cut, 5, 10_000, True, False)
    assert r.more_bytes_needed > 0 and r.end == 0               # the header first
    r = select_batches(data[:layout[1][1] + 70], 5, 10_000, True, False)
    assert r.more_bytes_needed == layout[1][2] - 70             # then the rest of the batch
    # The first batch whole and the next one cut: the whole one is returned.
    r = select_batches(cut, 0, 10_000, True, False)
    assert (r.start, r.end, r.more_bytes_needed) == (0, layout[0][2], 0)
    with pytest.raises(RecordError):
        select_batches(cut, 5, 10_000, True, True)      # the segment itself is torn


def test_time_index_floor_and_first_record_at_or_after() -> None:
    index = b"".join(t.to_bytes(8, "big") + r.to_bytes(4, "big")
                     for t, r in [(100, 5), (200, 12), (300, 20)])
    assert time_index_floor_offset(index, 1000, 50) == 1000
    assert time_index_floor_offset(index, 1000, 200) == 1005     # entries below 200 only
    assert time_index_floor_offset(index, 1000, 10_000) == 1020
    parts, offset = [], 0
    for ts in ([10, 20, 30], [40, 40, 50], [60]):
        parts.append(build_batch([Record(offset + i, t, None, b"v") for i, t in enumerate(ts)],
                                 base_offset=offset))
        offset += len(ts)
    data = b"".join(parts)
    first_two = len(parts[0]) + len(parts[1])
    assert first_record_at_or_after(data, 35) == ((40, 3), first_two)
    assert first_record_at_or_after(data, 60) == ((60, 6), len(data))
    assert first_record_at_or_after(data, 61) == (None, len(data))
    assert first_record_at_or_after(data[:-5], 61) == (None, first_two)   # a cut batch: not consumed


# ---------------------------------------------------------------- local retention of copied segments

def tiered_log(**configs: str) -> PartitionLog:
    config = LogConfig.from_properties({"segment.bytes": "200", "remote.storage.enable": "true",
                                        "file.delete.delay.ms": "0", **configs})
    plog, _ = PartitionLog.open(SimStorage(), "/d/orders-0", config, now_ms=0)
    for i in range(12):
        result = plog.append_as_leader(bytearray(build_batch([Record(0, i, None, b"x" * 40)])),
                                       1, now_ms=i)
        assert result.error_code == 0, result
    return plog


def test_local_retention_deletes_only_copied_segments() -> None:
    plog = tiered_log(**{"local.retention.bytes": "0"})
    closed = [s.base_offset for s in plog.segments[:-1]]
    assert len(closed) >= 3
    result = plog.delete_old_segments(now_ms=10**6, high_watermark=plog.log_end_offset)
    assert result.deleted_base_offsets == ()            # nothing copied: nothing deleted
    # Copied up to the end of the second segment: exactly the first two go.
    plog.highest_offset_in_remote = closed[2] - 1
    result = plog.delete_old_segments(now_ms=10**6, high_watermark=plog.log_end_offset)
    assert result.deleted_base_offsets == tuple(closed[:2])
    assert set(result.reasons) == {"local.retention.bytes"}
    assert plog.log_start_offset == closed[2]


def test_local_retention_ms_defaults_to_retention_ms() -> None:
    plog = tiered_log(**{"retention.ms": "1000"})
    plog.highest_offset_in_remote = plog.log_end_offset
    result = plog.delete_old_segments(now_ms=10**6, high_watermark=plog.log_end_offset)
    assert result.deleted_base_offsets and set(result.reasons) == {"local.retention.ms"}


# ---------------------------------------------------------------- the controller's rules

@pytest.mark.parametrize("new, current, system, problem", [
    ({"remote.storage.enable": "true"}, None, False, "Tiered Storage functionality is disabled"),
    ({"remote.storage.enable": "true"}, None, True, None),
    ({}, {"remote.storage.enable": "true"}, True, "It is invalid to disable remote storage"),
    ({"remote.storage.enable": "true"}, {"remote.storage.enable": "true"}, False, None),
    ({"remote.storage.enable": "true", "local.retention.ms": "5000", "retention.ms": "1000"},
     None, True, "Value must not be more than retention.ms"),
    ({"remote.storage.enable": "true", "local.retention.bytes": "-1", "retention.bytes": "10"},
     None, True, "Value must not be -1"),
    ({"remote.storage.enable": "true", "local.retention.bytes": "5", "retention.bytes": "10"},
     None, True, None),
    ({"local.retention.ms": "5000", "retention.ms": "1000"}, None, False, None),  # not tiered
])
def test_tiered_storage_topic_config_rules(new, current, system, problem) -> None:
    found = tiered_storage_problem(new, current, system)
    assert (found is None) if problem is None else (found is not None and problem in found)
