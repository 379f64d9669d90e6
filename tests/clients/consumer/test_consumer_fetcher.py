"""The consumer's pure fetch pieces: the record decoder against the records package's own
decoder (an independent reference), offsets before the fetch offset, partial batches,
control batches, read_committed filtering of aborted transactions, corrupt input, and
fetch planning over positions, pauses, in-flight fetches and leaders."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from clients._core.fetcher import (
    READ_COMMITTED, READ_UNCOMMITTED, FetchAction, ResetStrategy, SubscriptionState, handle_partition_response,
    plan_fetches, records_from_batches,
)
from clients.protocol.errors import ErrorCode
from clients.records import (
    CompressionType, ControlRecordType, CorruptRecordError, Record, TimestampType, build_batch, build_control_batch,
    decode_batches, end_transaction_marker_value,
)
from clients.types import ConsumerRecord, TopicPartition as TP

TPX = TP("t", 0)

record_st = st.builds(
    lambda k, v, h, dt: (k, v, tuple(h), dt),
    st.one_of(st.none(), st.binary(max_size=300)), st.one_of(st.none(), st.binary(max_size=9000)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
    st.integers(-10_000, 10_000_000))


def batch_of(recs, base: int, compression=CompressionType.NONE, **kw) -> bytes:
    return build_batch([Record(offset=base + i, timestamp=1_700_000_000_000 + dt, key=k, value=v, headers=h)
                        for i, (k, v, h, dt) in enumerate(recs)], base_offset=base, compression=compression, **kw)


@given(st.lists(st.lists(record_st, min_size=1, max_size=8), min_size=1, max_size=4),
       st.sampled_from(list(CompressionType)), st.integers(0, 40))
def test_decoder_agrees_with_the_records_package(batches, compression, fetch_offset) -> None:
    raw, base = b"", 0
    for recs in batches:
        raw += batch_of(recs, base, compression, partition_leader_epoch=7)
        base += len(recs)
    got, next_offset, epoch = records_from_batches(TPX, raw, fetch_offset, None)
    want = [r for b in decode_batches(raw) for r in b.records if r.offset >= fetch_offset]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in want]
    assert all(isinstance(r, ConsumerRecord) and r.leader_epoch == 7 and r.topic_partition == TPX for r in got)
    assert all(r.serialized_value_size == (-1 if r.value is None else len(r.value)) for r in got)
    assert next_offset == max(base, fetch_offset)


def test_partial_tail_is_left_for_the_next_fetch() -> None:
    one = batch_of([(None, b"a", (), 0)] * 3, 0)
    two = batch_of([(None, b"b", (), 0)] * 3, 3)
    got, next_offset, _ = records_from_batches(TPX, one + two[:-5], 1, None)
    assert [r.offset for r in got] == [1, 2] and next_offset == 3


def test_log_append_time_uses_the_batch_max_timestamp() -> None:
    raw = build_batch([Record(offset=0, timestamp=5, key=None, value=b"x")], timestamp_type=TimestampType.LOG_APPEND_TIME,
                      log_append_time_ms=1234)
    (r,), _, _ = records_from_batches(TPX, raw, 0, None)
    assert r.timestamp == 1234 and r.timestamp_type == TimestampType.LOG_APPEND_TIME


def test_read_committed_drops_aborted_transactions_and_markers() -> None:
    """Producer 1 writes 0-1 and aborts (marker at 2); producer 2 writes 3-4 and commits
    (marker 5); a non-transactional record at 6."""
    def txn(pid: int, base: int, n: int) -> bytes:
        return build_batch([Record(offset=base + i, timestamp=1, key=None, value=f"p{pid}-{i}".encode())
                            for i in range(n)], base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                           is_transactional=True)

    def marker(kind, pid: int, base: int) -> bytes:
        return build_control_batch(kind, end_transaction_marker_value(0), timestamp_ms=1, base_offset=base,
                                   producer_id=pid, producer_epoch=0, is_transactional=True)
    raw = (txn(1, 0, 2) + marker(ControlRecordType.ABORT, 1, 2) + txn(2, 3, 2)
           + marker(ControlRecordType.COMMIT, 2, 5) + batch_of([(None, b"plain", (), 0)], 6))
    aborted = [SimpleNamespace(producer_id=1, first_offset=0)]
    data = SimpleNamespace(error_code=0, records=raw, aborted_transactions=aborted)
    committed = handle_partition_response(TPX, 0, data, isolation_level=READ_COMMITTED)
    assert [r.value for r in committed.records] == [b"p2-0", b"p2-1", b"plain"] and committed.next_offset == 7
    everything = handle_partition_response(TPX, 0, data, isolation_level=READ_UNCOMMITTED)
    assert [r.offset for r in everything.records] == [0, 1, 3, 4, 6]      # markers never show


@pytest.mark.parametrize("code,action", [
    (ErrorCode.OFFSET_OUT_OF_RANGE, FetchAction.RESET), (ErrorCode.NOT_LEADER_OR_FOLLOWER, FetchAction.REFRESH_METADATA),
    (ErrorCode.FENCED_LEADER_EPOCH, FetchAction.VALIDATE), (ErrorCode.TOPIC_AUTHORIZATION_FAILED, FetchAction.RAISE),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, FetchAction.REFRESH_METADATA)])
def test_partition_errors_become_actions(code, action) -> None:
    data = SimpleNamespace(error_code=code, records=None, aborted_transactions=None)
    assert handle_partition_response(TPX, 0, data, isolation_level=0).action is action


@given(st.binary(min_size=1, max_size=200), st.integers(0, 150))
def test_garbage_in_a_record_region_is_a_corrupt_record_error(garbage, at) -> None:
    raw = bytearray(batch_of([(b"k", b"v" * 50, (("h", b"1"),), 3)] * 3, 0))
    at = 61 + at % (len(raw) - 61)
    raw[at:at + len(garbage)] = garbage[: len(raw) - at]
    try:
        records_from_batches(TPX, bytes(raw), 0, None, check_crcs=False)
    except CorruptRecordError:
        pass


def test_crc_mismatch_is_refused_when_checked() -> None:
    raw = bytearray(batch_of([(None, b"v", (), 0)], 0))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        records_from_batches(TPX, bytes(raw), 0, None)


def test_plan_fetches_groups_by_leader_and_skips_what_must_not_be_fetched() -> None:
    subs = SubscriptionState(ResetStrategy.EARLIEST)
    tps = [TP("a", 0), TP("a", 1), TP("b", 0), TP("b", 1), TP("c", 0)]
    subs.assign(tps)
    for i, tp in enumerate(tps[:4]):
        subs.seek(tp, 10 * i)
    subs.state(TP("a", 1)).paused = True
    subs.state(TP("b", 1)).fetch_in_flight = True
    leaders = {TP("a", 0): (1, 5), TP("a", 1): (1, 5), TP("b", 0): (2, 9), TP("b", 1): (1, 2)}
    plans = plan_fetches(subs, leaders, lambda tp: False, max_wait_ms=100, min_bytes=1, max_bytes=1000,
                         partition_max_bytes=100, isolation_level=READ_COMMITTED)
    by_node = {p.node_id: p for p in plans}
    assert set(by_node) == {1, 2}            # c-0 has no position; a-1 paused; b-1 in flight
    assert by_node[1].partitions == ((TP("a", 0), 0),) and by_node[2].partitions == ((TP("b", 0), 20),)
    assert by_node[2].versions == (4, 12)    # no topic ids known: names, so v12 at most
    request = by_node[2].request(12)
    (topic,) = request.topics
    (part,) = topic.partitions
    assert (topic.topic, part.partition, part.fetch_offset, part.current_leader_epoch) == ("b", 0, 20, 9)
    assert request.isolation_level == READ_COMMITTED and request.replica_id == -1
    # records still buffered for a-0, node 2 busy: nothing
    assert plan_fetches(subs, leaders, lambda tp: tp == TP("a", 0), max_wait_ms=1, min_bytes=1, max_bytes=1,
                        partition_max_bytes=1, isolation_level=0, busy_nodes=[2]) == []


def test_subscription_state_keeps_positions_of_kept_partitions() -> None:
    subs = SubscriptionState(ResetStrategy.LATEST)
    subs.assign([TP("a", 0), TP("a", 1)])
    subs.seek(TP("a", 0), 42)
    subs.assign([TP("a", 0), TP("a", 2)])
    assert subs.state(TP("a", 0)).position == 42 and subs.needs_committed() == [TP("a", 2)]
    subs.request_reset(TP("a", 2))
    assert subs.needs_reset() == [TP("a", 2)] and subs.state(TP("a", 2)).reset is ResetStrategy.LATEST
    with pytest.raises(KeyError, match="a-1"):
        subs.seek(TP("a", 1), 0)


def test_leader_change_validates_the_position_and_detects_truncation() -> None:
    """KIP-320: a newer leader epoch holds fetching until the new leader says where our
    epoch ends; an end before our position is a truncated log: the position moves back."""
    subs = SubscriptionState(ResetStrategy.EARLIEST)
    tp = TP("t", 0)
    subs.assign([tp])
    subs.seek(tp, 100, epoch=3)
    assert subs.maybe_validate(tp, 3) is False               # first fetch: epoch noted
    assert subs.maybe_validate(tp, 3) is False
    assert subs.maybe_validate(tp, 4) is True and subs.fetchable() == []
    assert subs.complete_validation(tp, 4, end_offset=120, end_epoch=3) is False
    assert subs.state(tp).position == 100 and subs.fetchable() == [tp]
    assert subs.maybe_validate(tp, 5) is True
    assert subs.complete_validation(tp, 5, end_offset=90, end_epoch=3) is True
    assert (subs.state(tp).position, subs.state(tp).position_epoch) == (90, 3)
    # a seek forgets the old leader: nothing to validate
    subs.seek(tp, 7)
    assert subs.maybe_validate(tp, 9) is False


def test_plan_fetches_uses_topic_ids_when_every_topic_of_a_plan_has_one() -> None:
    import uuid
    subs = SubscriptionState(ResetStrategy.EARLIEST)
    subs.assign([TP("a", 0), TP("b", 0)])
    subs.seek(TP("a", 0), 3)
    subs.seek(TP("b", 0), 4)
    a_id = uuid.UUID(int=1)
    leaders = {TP("a", 0): (1, 5), TP("b", 0): (2, 9)}
    plans = {p.node_id: p for p in plan_fetches(
        subs, leaders, lambda tp: False, max_wait_ms=100, min_bytes=1, max_bytes=1000,
        partition_max_bytes=100, isolation_level=0, topic_ids={"a": a_id})}
    assert plans[1].versions == (4, 17) and plans[2].versions == (4, 12)
    (topic,) = plans[1].request(17).topics
    assert topic.topic_id == a_id and topic.partitions[0].fetch_offset == 3
    assert plans[1].topic_names() == {a_id: "a"}
