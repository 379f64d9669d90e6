"""Idempotent producer sequence checks (duplicates, gaps, fencing) and transactions
(ongoing transactions, markers, the first unstable offset, snapshots)."""
import pytest

from broker.producer_state import CompletedTxn, ProducerStateTable, SnapshotError, decode_snapshot
from clients.protocol.errors import ErrorCode


def test_sequence_flow_duplicates_and_gaps() -> None:
    t = ProducerStateTable()
    assert t.check(7, 0, 0, 4).error_code == ErrorCode.NONE
    t.update(7, 0, 0, 4, first_offset=100, timestamp_ms=1)
    assert t.check(7, 0, 5, 4).error_code == ErrorCode.NONE
    t.update(7, 0, 5, 4, first_offset=105, timestamp_ms=2)
    dup = t.check(7, 0, 0, 4)
    assert dup.error_code == ErrorCode.NONE and dup.duplicate_of.first_offset == 100
    assert t.check(7, 0, 12, 0).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(8, 0, 3, 0).error_code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert t.check(-1, -1, -1, 9).error_code == ErrorCode.NONE


def test_epochs_fence_zombies_and_reset_sequences() -> None:
    t = ProducerStateTable()
    t.update(7, 1, 0, 0, 0, 0)
    assert t.check(7, 0, 1, 0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check(7, 2, 0, 0).error_code == ErrorCode.NONE
    assert t.check(7, 2, 3, 0).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_only_the_last_five_batches_are_remembered_and_truncation_forgets() -> None:
    t = ProducerStateTable()
    for i in range(7):
        t.update(7, 0, i, 0, first_offset=i, timestamp_ms=i)
    assert t.check(7, 0, 1, 0).duplicate_of is None      # too old to be recognized
    assert t.check(7, 0, 6, 0).duplicate_of.first_offset == 6
    t.truncate_to(5)
    assert t.check(7, 0, 5, 0).error_code == ErrorCode.NONE


def test_sequence_wraps_at_int32_max() -> None:
    t = ProducerStateTable()
    t.update(7, 0, 0x7FFFFFFE, 1, 0, 0)   # sequences MAX-1, MAX
    assert t.check(7, 0, 0, 0).error_code == ErrorCode.NONE


# ---------------------------------------------------------------- transactions (issue 15)


def _txn(table: ProducerStateTable, pid: int, epoch: int, seq: int, n: int, offset: int) -> None:
    assert table.check(pid, epoch, seq, n - 1, is_transactional=True).error_code == ErrorCode.NONE
    table.update(pid, epoch, seq, n - 1, offset, 0, is_transactional=True)


# (steps, expected first unstable offset after them, completions in order)
# steps: ("data", pid, offset) a transactional batch of one record; ("commit"/"abort", pid, offset)
TXN_CASES = [
    ("one open transaction pins the LSO at its first offset",
     [("data", 1, 10), ("data", 1, 11)], 10, []),
    ("a commit unpins it", [("data", 1, 10), ("commit", 1, 12)], None,
     [CompletedTxn(1, 10, 12, False)]),
    ("the oldest of two open transactions decides",
     [("data", 1, 10), ("data", 2, 11), ("abort", 1, 12)], 11,
     [CompletedTxn(1, 10, 12, True)]),
    ("a marker without data completes nothing", [("commit", 3, 5)], None, []),
    ("a new transaction after a marker starts at its own first offset",
     [("data", 1, 10), ("commit", 1, 11), ("data", 1, 12)], 12,
     [CompletedTxn(1, 10, 11, False)]),
]


@pytest.mark.parametrize("name,steps,first_unstable,completed", TXN_CASES, ids=[c[0] for c in TXN_CASES])
def test_transaction_table(name, steps, first_unstable, completed) -> None:
    t = ProducerStateTable()
    seqs: dict[int, int] = {}
    done = []
    for kind, pid, offset in steps:
        if kind == "data":
            _txn(t, pid, 0, seqs.get(pid, 0), 1, offset)
            seqs[pid] = seqs.get(pid, 0) + 1
        else:
            assert t.check_marker(pid, 0, 0) == ErrorCode.NONE
            c = t.update_marker(pid, 0, offset, kind == "commit", 0, 0)
            if c is not None:
                done.append(c)
    assert t.first_unstable_offset() == first_unstable
    assert done == completed


def test_lso_a_completed_transaction_allows() -> None:
    t = ProducerStateTable()
    _txn(t, 1, 0, 0, 1, 10)
    _txn(t, 2, 0, 0, 1, 11)
    c = t.update_marker(2, 0, 12, False, 0, 0)
    assert t.last_stable_offset_after(c) == 10          # producer 1 still open
    c = t.update_marker(1, 0, 13, True, 0, 0)
    assert t.last_stable_offset_after(c) == 14          # none open: past the marker


def test_markers_fence_old_producer_and_coordinator_epochs() -> None:
    t = ProducerStateTable()
    _txn(t, 1, 2, 0, 1, 0)
    assert t.check_marker(1, 1, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    t.update_marker(1, 2, 1, True, coordinator_epoch=5, timestamp_ms=0)
    assert t.check_marker(1, 2, 4) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert t.check_marker(1, 2, 5) == ErrorCode.NONE
    assert t.check_marker(99, 0, 0) == ErrorCode.NONE     # unknown producer: accepted


def test_a_marker_with_a_bumped_epoch_fences_the_old_epochs_transactional_data() -> None:
    t = ProducerStateTable()
    _txn(t, 1, 0, 0, 1, 0)
    c = t.update_marker(1, 1, 1, False, 0, 0)            # the coordinator aborted on timeout
    assert c == CompletedTxn(1, 0, 1, True)
    assert t.check(1, 0, 1, 0, is_transactional=True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check(1, 1, 0, 0, is_transactional=True).error_code == ErrorCode.NONE


def test_non_transactional_data_inside_a_transaction_is_invalid_txn_state() -> None:
    t = ProducerStateTable()
    _txn(t, 1, 0, 0, 1, 0)
    assert t.check(1, 0, 1, 0, is_transactional=False).error_code == ErrorCode.INVALID_TXN_STATE
    assert t.check(1, 0, 0, 0, is_transactional=False).duplicate_of is not None  # a retry stays a retry


def test_describe_shows_the_ongoing_transaction_and_coordinator_epoch() -> None:
    t = ProducerStateTable()
    _txn(t, 1, 0, 0, 3, 7)
    (p,) = t.active_producers()
    assert (p.current_txn_start_offset, p.coordinator_epoch, p.last_sequence) == (7, -1, 2)
    t.update_marker(1, 0, 10, True, 4, 0)
    (p,) = t.active_producers()
    assert (p.current_txn_start_offset, p.coordinator_epoch) == (-1, 4)


def test_truncation_below_a_transaction_start_forgets_it() -> None:
    t = ProducerStateTable()
    t.update(1, 0, 0, 0, 0, 0)
    _txn(t, 1, 0, 1, 1, 5)
    t.truncate_to(5)
    assert t.first_unstable_offset() is None
    assert t.check(1, 0, 1, 0).error_code == ErrorCode.NONE


def test_snapshot_round_trip_keeps_last_batch_epochs_and_open_transactions() -> None:
    t = ProducerStateTable()
    t.update(1, 3, 0, 4, 100, 9)                          # idempotent only
    _txn(t, 2, 0, 0, 2, 105)                              # open transaction
    t.update_marker(4, 1, 107, True, 6, 11)               # a marker, no batch
    data = t.to_snapshot()
    assert len(data) == 2 + 4 + 4 + 3 * 46                # Kafka's layout
    back = ProducerStateTable.from_snapshot(data)
    assert back.active_producers() == t.active_producers()
    assert back.first_unstable_offset() == 105
    assert back.check(1, 3, 0, 4).duplicate_of.first_offset == 100
    assert back.check(1, 3, 5, 0).error_code == ErrorCode.NONE
    assert back.check_marker(4, 1, 5) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    torn = bytearray(data)
    torn[-1] ^= 1
    with pytest.raises(SnapshotError):
        decode_snapshot(bytes(torn))
    with pytest.raises(SnapshotError):
        decode_snapshot(data[:-3])


# ---------------------------------------------------------------- producer id expiry


def test_idle_producers_expire_but_not_inside_an_open_transaction() -> None:
    t = ProducerStateTable()
    t.update(1, 0, 0, 0, first_offset=0, timestamp_ms=1_000)       # idle since 1,000
    t.update(2, 0, 0, 0, first_offset=1, timestamp_ms=5_000)       # idle since 5,000
    _txn(t, 3, 0, 0, 1, 2)                                          # batch timestamp 0, open
    assert t.remove_expired(now_ms=10_999, expiration_ms=10_000) == 0
    assert t.remove_expired(now_ms=11_000, expiration_ms=10_000) == 1   # producer 1, at the bound
    assert [p.producer_id for p in t.active_producers()] == [2, 3]
    # An expired producer is new to the partition: sequence 0 starts it again, any other
    # sequence is UNKNOWN_PRODUCER_ID (the client resets, KIP-360).
    assert t.check(1, 0, 1, 0).error_code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert t.check(1, 0, 0, 0).error_code == ErrorCode.NONE
    # The open transaction keeps producer 3 however old; once it ends, it can expire.
    assert t.remove_expired(now_ms=10**9, expiration_ms=10_000) == 1
    assert [p.producer_id for p in t.active_producers()] == [3]
    t.update_marker(3, 0, 3, committed=True, coordinator_epoch=0, timestamp_ms=6_000)
    assert t.remove_expired(now_ms=10**9, expiration_ms=10_000) == 1
    assert len(t) == 0 and 3 not in t.last_records()
