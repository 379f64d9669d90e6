"""``__transaction_state`` records, byte for byte, placement, and replay (pure)."""
from __future__ import annotations

import struct

import pytest

from broker.group.records import partition_for_group
from broker.txn.records import (
    TransactionLogLoader, TransactionLogRecord, TransactionLogRecordError, TransactionLogValue,
    decode_record, encode_batch, partition_for_transactional_id,
)
from clients.records import assign_base_offset
from clients.types import TopicPartition


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_value_v0_bytes_are_kafkas_layout() -> None:
    """TransactionLogValue v0, laid out by hand from Kafka's schema: version, ProducerId,
    ProducerEpoch, TransactionTimeoutMs, TransactionStatus, TransactionPartitions (topic,
    partition ids), TransactionLastUpdateTimestampMs, TransactionStartTimestampMs."""
    value = TransactionLogValue(1234, 5, 60_000, 1, frozenset(
        {TopicPartition("b", 2), TopicPartition("a", 1), TopicPartition("a", 0)}), 999, 900)
    record = TransactionLogRecord("my-txn", value)
    assert record.encode_key() == struct.pack(">h", 0) + _string("my-txn")
    expected = (struct.pack(">hqhib", 0, 1234, 5, 60_000, 1) + struct.pack(">i", 2)
                + _string("a") + struct.pack(">iii", 2, 0, 1)
                + _string("b") + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 999, 900))
    assert record.encode_value() == expected
    assert decode_record(record.encode_key(), expected) == record


def test_tombstone_and_bad_records() -> None:
    key = TransactionLogRecord("x", None).encode_key()
    assert decode_record(key, None) == TransactionLogRecord("x", None)
    with pytest.raises(TransactionLogRecordError, match="unknown TransactionLogKey version"):
        decode_record(struct.pack(">h", 1) + _string("x"), None)
    with pytest.raises(TransactionLogRecordError):
        decode_record(key, struct.pack(">hq", 0, 1))          # truncated value


def test_placement_is_javas_string_hash_like_groups() -> None:
    # The same placement as partition_for_group (one Java hash); "my-txn".hashCode() is
    # sum(c * 31^(n-1-i)) as int32 = -1061187895, by the definition of String.hashCode.
    for tid in ("my-txn", "", "txn-1", "ünïcode", "a" * 100):
        assert partition_for_transactional_id(tid) == partition_for_group(tid)
    assert partition_for_transactional_id("my-txn") == 1061187895 % 50 == 45
    assert all(0 <= partition_for_transactional_id(f"t{i}", 7) < 7 for i in range(100))


def test_loader_keeps_the_last_value_per_id_and_drops_tombstones() -> None:
    v1 = TransactionLogValue(1, 0, 1000, 0, frozenset(), 10, -1)
    v2 = TransactionLogValue(1, 0, 1000, 1, frozenset({TopicPartition("t", 0)}), 20, 20)
    batches = [encode_batch([TransactionLogRecord("a", v1), TransactionLogRecord("b", v1)], 10),
               encode_batch([TransactionLogRecord("a", v2)], 20),
               encode_batch([TransactionLogRecord("b", None)], 30)]
    log = bytearray()
    for base, batch in zip((0, 2, 3), batches):     # the offsets a log would assign
        buf = bytearray(batch)
        assign_base_offset(buf, base)
        log += buf
    loader = TransactionLogLoader()
    loader.replay_batches(log)
    assert loader.image.values == {"a": v2}
    assert loader.records_replayed == 4
