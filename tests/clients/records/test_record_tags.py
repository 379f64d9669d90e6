"""Tag filtering (issue 18), without a cluster: the broker's batch filter, the request
field that carries a consumer's tags, and the consumer's own fallback filter."""
from __future__ import annotations

import pytest

from clients._core.fetcher import handle_partition_response, records_from_batches
from clients.protocol import messages
from clients.protocol.tag_filter import FETCH_TAG_FILTER, decode_tag_filter, encode_tag_filter, tag_filter_of
from clients.protocol.types import CorruptFrameError
from clients.records import (
    BATCH_HEADER_SIZE, CompressionType, ControlRecordType, Record, build_batch, build_control_batch,
    decode_batches, end_transaction_marker_value, iter_batches,
)
from clients.records.tags import TAG_HEADER, filter_batches, record_matches
from clients.types import TopicPartition

VIP = frozenset({b"vip"})


def tagged(offset: int, tag: str | None, ts: int = 1_000) -> Record:
    headers = ((TAG_HEADER, tag.encode()),) if tag else ()
    return Record(offset, ts + offset, f"k{offset}".encode(), f"v{offset}".encode(), headers + (("x", b"y"),))


def batch(first: int, tags: list[str | None], compression=CompressionType.NONE) -> bytes:
    return build_batch([tagged(first + i, t) for i, t in enumerate(tags)], base_offset=first,
                       compression=compression, producer_id=7, producer_epoch=1, base_sequence=first)


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_a_partly_matching_batch_keeps_its_offsets_and_drops_the_rest(compression) -> None:
    raw = batch(10, ["std", "vip", None, "vip", "std"], compression)
    out = filter_batches(raw, VIP)
    assert (out.records_kept, out.records_dropped, out.batches_rebuilt) == (2, 3, 1)
    [b] = decode_batches(out.data)
    assert [r.offset for r in b.records] == [11, 13]
    assert [r.timestamp for r in b.records] == [1011, 1013]
    assert b.records[0].headers == ((TAG_HEADER, b"vip"), ("x", b"y"))
    original = next(iter_batches(raw))[1]
    assert b.header.last_offset == original.last_offset == 14      # a reader moves past offset 14
    assert (b.header.producer_id, b.header.base_sequence, b.header.compression) == (7, 10, compression)


def test_whole_batches_pass_as_they_were_and_empty_ones_shrink_to_a_header() -> None:
    keep = batch(0, ["vip", "vip"])
    drop = batch(2, ["std"] * 50)
    out = filter_batches(keep + drop, VIP)
    assert out.data[:len(keep)] == keep                            # not re-encoded
    empty = out.data[len(keep):]
    assert len(empty) == BATCH_HEADER_SIZE
    [b] = decode_batches(empty)
    assert b.records == () and b.header.last_offset == 51 and b.header.records_count == 0
    records, next_offset, _ = records_from_batches(TopicPartition("t", 0), out.data, 0, None)
    assert [r.offset for r in records] == [0, 1] and next_offset == 52


def test_control_batches_and_a_partial_tail_are_kept() -> None:
    marker = build_control_batch(ControlRecordType.COMMIT, end_transaction_marker_value(3), timestamp_ms=5,
                                 base_offset=4, producer_id=7, producer_epoch=1)
    tail = batch(5, ["std"] * 3)
    raw = batch(0, ["std"] * 4) + marker + tail[:30]
    out = filter_batches(raw, VIP)
    assert marker in out.data and out.data.endswith(tail[:30])
    assert out.records_kept == 0 and out.records_dropped == 4


def test_the_tag_field_round_trips_and_refuses_garbage() -> None:
    f = {"orders": frozenset({b"paid", b"refund"}), "clicks": frozenset({b"vip"})}
    data = encode_tag_filter(f)
    assert decode_tag_filter(data) == f
    req = messages.FetchRequest(unknown_tagged_fields=((FETCH_TAG_FILTER, data),))
    assert tag_filter_of(req.unknown_tagged_fields) == f
    assert tag_filter_of(()) == {}
    for bad in (data[:-1], data + b"\x00", b"\x05"):
        with pytest.raises(CorruptFrameError):
            decode_tag_filter(bad)


def test_the_consumer_filters_by_itself_when_the_broker_did_not() -> None:
    raw = batch(0, ["vip", "std", None, "vip"])
    data = messages.FetchResponse.PartitionData(partition_index=0, error_code=0, high_watermark=4, records=raw)
    got = handle_partition_response(TopicPartition("t", 0), 0, data, isolation_level=0, tags=VIP)
    assert [r.offset for r in got.records] == [0, 3] and got.next_offset == 4
    assert record_matches(((TAG_HEADER, b"a"), (TAG_HEADER, b"vip")), VIP)     # any of several tags
    assert not record_matches((("other", b"vip"),), VIP)
