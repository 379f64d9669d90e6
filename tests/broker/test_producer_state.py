"""Idempotent producer sequence checks (duplicates, gaps, fencing)."""
from broker.producer_state import ProducerStateTable
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
