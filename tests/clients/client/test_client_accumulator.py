"""The record accumulator and idempotence state, deterministically (time is an int)."""
from __future__ import annotations

import pytest

from clients._core.accumulator import (
    FAIL, RETRY, RETRY_AND_BUMP, BatchState, IdempotenceState, RecordAccumulator,
    record_size_upper_bound,
)
from clients.protocol.errors import ErrorCode
from clients.records import CompressionType, decode_batch, validate_batches
from clients.types import RecordMetadata, TimestampType, TopicPartition

T0, T1, T2 = (TopicPartition("t", i) for i in range(3))
LEADERS = {T0: 1, T1: 1, T2: 2}


def acc(idempotent: bool = False, **kw) -> RecordAccumulator:
    args = dict(batch_size=1000, linger_ms=10, buffer_memory=100_000, delivery_timeout_ms=5000,
                retry_backoff_ms=100, retry_backoff_max_ms=1000)
    args.update(kw)
    a = RecordAccumulator(idempotence=IdempotenceState() if idempotent else None, **args)
    if idempotent:
        a.idempotence.set_producer_id(7, 0)
    return a


def add(a: RecordAccumulator, tp: TopicPartition, value: bytes, now: int = 0, key=None):
    size = record_size_upper_bound(key, value)
    return a.append(tp, 1_700_000_000_000 + now, key, value, (), size, now)


def test_a_batch_waits_for_linger_ms_then_goes() -> None:
    a = acc()
    batch, index, wake = add(a, T0, b"x", now=0)
    assert index == 0 and wake
    nodes, next_ms, unknown = a.ready(5, LEADERS.get)
    assert nodes == set() and next_ms == 5 and unknown == []
    assert a.drain(1, [T0], 10**6, 5) == []
    nodes, _, _ = a.ready(10, LEADERS.get)
    assert nodes == {1}
    assert a.drain(1, [T0], 10**6, 10) == [batch] and batch.state is BatchState.IN_FLIGHT


def test_a_full_batch_goes_at_once_and_the_next_record_opens_another() -> None:
    a = acc()
    first, _, _ = add(a, T0, b"a" * 600)
    second, index, wake = add(a, T0, b"b" * 600)  # does not fit beside the first
    assert second is not first and index == 0 and wake
    nodes, _, _ = a.ready(0, LEADERS.get)
    assert nodes == {1}                          # linger not reached, but a batch is closed
    assert a.drain(1, [T0], 10**6, 0) == [first]  # one batch per partition per request


def test_unknown_leaders_are_reported_and_flush_ignores_linger() -> None:
    a = acc()
    add(a, T0, b"x")
    add(a, TopicPartition("new", 0), b"y")
    _, _, unknown = a.ready(0, LEADERS.get)
    assert unknown == [TopicPartition("new", 0)]
    a.flushes_in_progress += 1
    nodes, _, _ = a.ready(0, LEADERS.get)
    assert nodes == {1}


def test_drain_respects_max_request_size_and_rotates_partitions() -> None:
    a = acc(linger_ms=0)
    for tp in (T0, T1):
        add(a, tp, b"v" * 500)
    got = a.drain(1, [T0, T1], 600, 0)     # the first batch always goes; the second waits
    assert [b.tp for b in got] == [T0]
    add(a, T0, b"w" * 500)
    got = a.drain(1, [T0, T1], 600, 0)
    assert [b.tp for b in got] == [T1]     # where the last drain stopped


def test_buffer_memory_is_reserved_per_batch_and_released_on_completion() -> None:
    a = acc(buffer_memory=2500, linger_ms=0)
    b0, _, _ = add(a, T0, b"x")
    b1, _, _ = add(a, T1, b"x")
    assert a.used_bytes == 2000 and not a.has_room(600) and a.has_room(500)
    (sent,) = a.drain(1, [T0], 10**6, 0)
    a.complete(sent, base_offset=42)
    assert a.used_bytes == 1000 and a.has_room(600)
    assert sent.record_result(0) == (42, -1, -1, None)


@pytest.mark.parametrize("compression", list(CompressionType))
def test_batches_are_valid_v2_batches_in_every_compression(compression) -> None:
    a = acc(compression=compression, linger_ms=0)
    batch = None
    for i in range(5):
        batch, index, _ = a.append(T0, 1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"1")],
                                   50, 0)
        assert index == i
    (sent,) = a.drain(1, [T0], 10**6, 0)
    assert sent is batch
    (header,) = validate_batches(bytes(sent.payload))   # CRC and framing hold
    assert header.compression == compression and header.records_count == 5
    records = decode_batch(bytes(sent.payload)).records
    assert [(r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (b"k%d" % i, b"v%d" % i, 1000 + i, (("h", b"1"),)) for i in range(5)]


def test_queued_batches_expire_after_delivery_timeout() -> None:
    a = acc()
    batch, _, _ = add(a, T0, b"x", now=0)
    assert a.expired(4999) == []
    assert a.expired(5000) == [batch]
    assert not a.has_queued()


def test_retry_goes_to_the_front_after_a_growing_backoff() -> None:
    a = acc(linger_ms=0)
    first, _, _ = add(a, T0, b"a" * 600)
    (sent,) = a.drain(1, [T0], 10**6, 0)
    second, _, _ = add(a, T0, b"b" * 600)
    a.reenqueue(sent, now_ms=0)
    assert sent.retry_at_ms == 100                    # attempt 1: retry.backoff.ms
    assert a.drain(1, [T0], 10**6, 50) == []          # backing off; the head blocks order
    assert a.drain(1, [T0], 10**6, 100) == [first]
    a.reenqueue(first, now_ms=100)
    assert first.retry_at_ms == 100 + 200             # attempt 2: doubled


# --- idempotence ---

def test_sequences_are_per_partition_and_in_flight_is_capped_at_five() -> None:
    a = acc(idempotent=True, linger_ms=0, batch_size=100)
    for _ in range(7):
        add(a, T0, b"x" * 80)     # one record per batch
    add(a, T1, b"y")
    sent = []
    for _ in range(8):
        sent += a.drain(1, [T0, T1], 10**6, 0)
    t0 = [b for b in sent if b.tp == T0]
    assert [b.base_sequence for b in t0] == [0, 1, 2, 3, 4]   # five in flight, no more
    assert [b.base_sequence for b in sent if b.tp == T1] == [0]
    assert all((b.producer_id, b.producer_epoch) == (7, 0) for b in sent)
    header = validate_batches(bytes(t0[3].payload))[0]          # stamped, CRC fixed
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 3)
    a.complete(t0[0], 0)
    assert [b.base_sequence for b in a.drain(1, [T0], 10**6, 0)] == [5]


def test_a_retried_batch_is_resent_alone_and_in_sequence_order() -> None:
    a = acc(idempotent=True, linger_ms=0, batch_size=100)
    idem = a.idempotence
    for _ in range(3):
        add(a, T0, b"x" * 80)
    b0, = a.drain(1, [T0], 10**6, 0)
    b1, = a.drain(1, [T0], 10**6, 0)
    b2, = a.drain(1, [T0], 10**6, 0)
    # b0 hits a leader change; b1 and b2 then arrive out of order at the new leader.
    assert idem.on_error(b0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, True) == RETRY
    a.reenqueue(b0, 0)
    assert idem.on_error(b2, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 0, True) == RETRY
    a.reenqueue(b2, 0)
    assert idem.on_error(b1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 0, True) == RETRY
    a.reenqueue(b1, 0)
    assert not idem.epoch_bump_required     # not the next sequence: no gap, just waiting
    order = []
    for now in (1000, 1000, 2000, 2000, 3000):
        got = a.drain(1, [T0], 10**6, now)
        assert len(got) <= 1                # in-order retries: one at a time
        for b in got:
            order.append(b.base_sequence)
            a.complete(b, 10 + b.base_sequence)
    assert order == [0, 1, 2]


def test_out_of_order_for_the_next_sequence_bumps_the_epoch_and_restarts_at_zero() -> None:
    a = acc(idempotent=True, linger_ms=0, batch_size=100)
    idem = a.idempotence
    add(a, T0, b"x" * 80)
    add(a, T0, b"x" * 80)
    b0, = a.drain(1, [T0], 10**6, 0)
    a.complete(b0, 0)
    b1, = a.drain(1, [T0], 10**6, 0)
    assert b1.base_sequence == 1
    # The broker lost our state (the next sequence is out of order): KIP-360 bump.
    assert idem.on_error(b1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 0, True) == RETRY_AND_BUMP
    a.reenqueue(b1, 0)
    assert a.drain(1, [T0], 10**6, 1000) == []   # no sends until the bump is carried out
    assert idem.maybe_bump_epoch() and idem.producer_epoch == 1
    (again,) = a.drain(1, [T0], 10**6, 1000)
    assert again is b1 and (again.producer_epoch, again.base_sequence) == (1, 0)
    header = validate_batches(bytes(again.payload))[0]
    assert (header.producer_epoch, header.base_sequence) == (1, 0)


def test_unknown_producer_id_bumps_unless_the_batch_was_already_reset() -> None:
    idem = IdempotenceState()
    idem.set_producer_id(7, 3)
    a = acc(linger_ms=0)
    a.idempotence = idem
    add(a, T0, b"x")
    b, = a.drain(1, [T0], 10**6, 0)
    assert idem.on_error(b, ErrorCode.UNKNOWN_PRODUCER_ID, -1, True) == RETRY  # no log start
    b.state = BatchState.IN_FLIGHT
    assert idem.on_error(b, ErrorCode.UNKNOWN_PRODUCER_ID, 0, True) == RETRY_AND_BUMP
    idem.maybe_bump_epoch()
    assert idem.on_error(b, ErrorCode.UNKNOWN_PRODUCER_ID, 0, True) == RETRY   # old epoch
    assert idem.on_error(b, ErrorCode.INVALID_RECORD, 0, False) == FAIL


def test_a_batch_failed_for_good_after_getting_a_sequence_forces_a_bump() -> None:
    a = acc(idempotent=True, linger_ms=0)
    add(a, T0, b"x")
    b, = a.drain(1, [T0], 10**6, 0)
    a.fail(b, RuntimeError("gone"))
    assert a.idempotence.epoch_bump_required
    assert b.record_result(0)[3].args == ("gone",)


def test_the_epoch_restarts_a_partition_only_after_its_old_batches_are_answered() -> None:
    a = acc(idempotent=True, linger_ms=0, batch_size=100)
    idem = a.idempotence
    add(a, T0, b"x" * 80)
    old, = a.drain(1, [T0], 10**6, 0)
    add(a, T0, b"y" * 80)
    idem.epoch_bump_required = True
    idem.maybe_bump_epoch()
    assert a.drain(1, [T0], 10**6, 0) == []       # `old` is still in flight under epoch 0
    a.complete(old, 0)
    new, = a.drain(1, [T0], 10**6, 0)
    assert (new.producer_epoch, new.base_sequence) == (1, 0)


def test_split_keeps_records_order_and_sequences_and_completes_the_parent() -> None:
    a = acc(idempotent=True, linger_ms=0, batch_size=10_000)
    for i in range(3):
        add(a, T0, bytes([65 + i]) * 300)
    parent, = a.drain(1, [T0], 10**6, 0)
    assert parent.base_sequence == 0 and parent.record_count == 3
    a.batch_size = 400                            # children of one record each
    children = a.split_and_reenqueue(parent, 0)
    assert [c.record_count for c in children] == [1, 1, 1]
    assert [c.base_sequence for c in children] == [0, 1, 2]
    assert parent.state is BatchState.SPLIT and not parent.is_done
    assert [decode_batch(bytes(c.payload)).records[0].value[:1] for c in children] == [
        b"A", b"B", b"C"]
    done = []
    parent.callbacks.append(lambda b: done.append(b))
    sent = []
    for _ in range(3):
        got = a.drain(1, [T0], 10**6, 0)
        assert len(got) == 1                      # sequenced: one at a time, in order
        sent += got
        if got[0] is children[1]:
            a.fail(got[0], ValueError("too large"))
            # The gap after sequence 1 forces an epoch bump before anything else goes.
            assert a.drain(1, [T0], 10**6, 0) == [] and a.idempotence.maybe_bump_epoch()
        else:
            a.complete(got[0], 100 + len(sent) - 1)
    assert sent == children and done == [parent]
    assert (children[2].producer_epoch, children[2].base_sequence) == (1, 0)
    assert parent.record_result(0)[0] == 100 and parent.record_result(2)[0] == 102
    assert isinstance(parent.record_result(1)[3], ValueError)
    assert all(c.payload is None for c in children)     # done: the bytes are let go


def test_send_callbacks_are_called_in_record_order_with_each_records_metadata() -> None:
    a = acc(linger_ms=0)
    told: list = []
    for i in range(3):
        batch, index, _ = add(a, T0, b"v" * (i + 1), now=i)
        batch.add_record_callback(lambda md, err, i=i: told.append((i, md, err)), index,
                                  1_700_000_000_000 + i, -1, i + 1)
    other, index, _ = add(a, T1, b"w")
    other.add_record_callback(lambda md, err: told.append(("t1", md, err)), index, 5, 2, 1)
    first, = a.drain(1, [T0], 10**6, 0)
    second, = a.drain(1, [T1], 10**6, 0)
    a.complete(first, 40, log_start_offset=7)
    assert told == [(i, RecordMetadata("t", 0, 40 + i, 1_700_000_000_000 + i, -1, i + 1,
                                       TimestampType.CREATE_TIME, 7), None) for i in range(3)]
    error = RuntimeError("the partition's leader is gone")
    a.fail(second, error)
    assert told[3] == ("t1", None, error)
    # LogAppendTime: the broker's time replaces the record's; each callback is called once.
    told.clear()
    batch, index, _ = add(a, T2, b"x")
    batch.add_record_callback(lambda md, err: told.append(md), index, 1, -1, 1)
    batch, = a.drain(2, [T2], 10**6, 0)
    a.complete(batch, 0, log_append_time_ms=99)
    assert [(md.timestamp, md.timestamp_type) for md in told] == [
        (99, TimestampType.LOG_APPEND_TIME)]


def test_a_raising_callback_is_logged_and_the_batchs_other_callbacks_still_run(caplog) -> None:
    a = acc(linger_ms=0)
    told: list = []

    def buggy(*_args) -> None:
        raise RuntimeError("a bug in the application's callback")
    for callback in (told.append, buggy, told.append):
        batch, index, _ = add(a, T0, b"v")
        batch.add_record_callback(lambda md, err, cb=callback: cb(md.offset), index, 0, -1, 1)
    batch.callbacks.append(lambda b: told.append("waiter"))
    batch.callbacks.append(buggy)
    batch.callbacks.append(lambda b: told.append("listener"))
    batch, = a.drain(1, [T0], 10**6, 0)
    a.complete(batch, 10)
    assert told == [10, 12, "waiter", "listener"]
    assert [r.getMessage() for r in caplog.records] == [
        "a send callback for a record of t-0 raised", "a callback on a batch of t-0 raised"]


def test_send_callbacks_of_a_split_batch_get_their_childrens_results() -> None:
    a = acc(linger_ms=0, batch_size=10_000)
    told: list = []
    for i in range(3):
        batch, index, _ = add(a, T0, bytes([65 + i]) * 300)
        batch.add_record_callback(lambda md, err: told.append((md and md.offset, err)),
                                  index, 0, -1, 300)
    parent, = a.drain(1, [T0], 10**6, 0)
    a.batch_size = 400
    children = a.split_and_reenqueue(parent, 0)
    error = ValueError("too large")
    for child in children:
        got, = a.drain(1, [T0], 10**6, 0)
        assert got is child and told == []        # nothing until the parent is done
        if child is children[1]:
            a.fail(child, error)
        else:
            a.complete(child, 200 + children.index(child))
    assert told == [(200, None), (None, error), (202, None)]


def test_the_fast_record_encoder_writes_what_the_records_codec_writes() -> None:
    """The producer's table-driven encoder (_FastRecordBatchBuilder.append_next) against
    clients.records' RecordBatchBuilder.append, on random records of every shape."""
    import random

    from clients._core.accumulator import _FastRecordBatchBuilder
    from clients.records import RecordBatchBuilder

    rng = random.Random(10)
    for _ in range(200):
        compression = rng.choice(list(CompressionType))
        fast = _FastRecordBatchBuilder(compression=compression)
        slow = RecordBatchBuilder(compression=compression)
        for _ in range(rng.randrange(1, 12)):
            ts = 1_700_000_000_000 + rng.randrange(-10**5, 10**9)
            key = None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 3, 200, 20000]))
            value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 100, 70000]))
            headers = [("h\u00e9" * rng.randrange(0, 40), None if rng.random() < 0.5
                        else rng.randbytes(rng.randrange(0, 300)))
                       for _ in range(rng.randrange(0, 3))]
            fast.append_next(ts, key, value, headers)
            slow.append(ts, key, value, headers)
        assert fast.build() == slow.build()
