"""The aborted transaction index (`<base>.txnindex`, Kafka's TransactionIndex): the 34-byte
entry format, append/replay/truncate, a torn tail, and the query across segments
(broker.log.transaction_index, PartitionLog)."""
from __future__ import annotations

import struct

import pytest

from broker.log import AppendOrigin, FileStorage, LogConfig, PartitionLog
from broker.log.transaction_index import AbortedTxn, TransactionIndex
from clients.records import ControlRecordType, build_control_batch, end_transaction_marker_value

from _log_helpers import make_batch


def test_entry_is_kafkas_34_bytes() -> None:
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=11)
    assert txn.encode() == struct.pack(">hqqqq", 0, 7, 10, 20, 11)
    assert AbortedTxn.decode(txn.encode()) == txn


def test_append_is_idempotent_truncation_forgets_and_a_torn_tail_is_dropped(tmp_path) -> None:
    storage = FileStorage()
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(storage, path)
    a, b = AbortedTxn(1, 0, 5, 1), AbortedTxn(2, 3, 9, 6)
    assert index.append(a) and index.append(b)
    assert not index.append(a), "a replay adds nothing"
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)                               # a crash mid-append
    loaded = TransactionIndex.load(storage, path)
    assert loaded.entries == (a, b)
    loaded.truncate_to(9)
    assert TransactionIndex.load(storage, path).entries == (a,)


@pytest.mark.parametrize("fetch_offset,upper,expected", [
    (0, 100, [1, 2]), (6, 100, [2]), (0, 3, [1]), (9, 100, []), (0, 4, [1, 2]),
])
def test_overlap_query(tmp_path, fetch_offset: int, upper: int, expected: list[int]) -> None:
    index = TransactionIndex(FileStorage(), str(tmp_path / "x.txnindex"))
    index.append(AbortedTxn(1, 0, 5, 1))
    index.append(AbortedTxn(2, 3, 8, 6))
    assert [t.producer_id for t in index.overlapping(fetch_offset, upper)] == expected


def test_the_log_indexes_in_the_markers_segment_and_queries_across_segments(tmp_path) -> None:
    storage = FileStorage()
    log, _ = PartitionLog.open(storage, str(tmp_path / "t-0"), LogConfig(segment_bytes=300), now_ms=0)
    marker = bytearray(build_control_batch(ControlRecordType.ABORT, end_transaction_marker_value(0),
                                           timestamp_ms=0, producer_id=5, producer_epoch=0,
                                           is_transactional=True))
    for i in range(6):
        log.append_as_leader(make_batch(2, tag=i), 0, 0)
    assert log.append_as_leader(bytearray(marker), 0, 0, AppendOrigin.COORDINATOR).error_code == 0
    marker_offset = log.log_end_offset - 1
    txn = AbortedTxn(5, 1, marker_offset, marker_offset + 1)
    log.append_aborted_txn(txn)
    assert len(log.segments) > 2
    assert log.segments[-1].txn_index.entries == (txn,)
    assert log.collect_aborted_transactions(0, 2) == [txn]          # begins in segment 0
    assert log.collect_aborted_transactions(marker_offset + 1, log.log_end_offset + 1) == []
    log.truncate_to(marker_offset)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


def test_recovery_after_a_crash_drops_entries_whose_marker_was_lost(tmp_path) -> None:
    storage = FileStorage()
    path = str(tmp_path / "t-0")
    log, _ = PartitionLog.open(storage, path, LogConfig(), now_ms=0)
    log.append_as_leader(make_batch(2), 0, 0)
    marker = bytearray(build_control_batch(ControlRecordType.ABORT, end_transaction_marker_value(0),
                                           timestamp_ms=0, producer_id=5, producer_epoch=0,
                                           is_transactional=True))
    size_before_marker = log.active_segment.size_bytes
    assert log.append_as_leader(marker, 0, 0, AppendOrigin.COORDINATOR).error_code == 0
    log.append_aborted_txn(AbortedTxn(5, 0, 2, 3))
    # A crash: the marker's bytes never reached the disk, the index entry did.
    storage.truncate(log.active_segment.log_path, size_before_marker + 7)
    again, report = PartitionLog.open(storage, path, LogConfig(), now_ms=0, clean_shutdown=False)
    assert again.log_end_offset == 2 and report.truncated_bytes == 7
    assert again.collect_aborted_transactions(0, 10) == []
