"""Delayed delivery's pure parts (issue 18): the Produce-path diversion, the delay
store's codec, the due-time indexes and the scheduler, as tables."""
from __future__ import annotations

import random

import pytest

from broker.delayed.divert import DELIVER_AFTER, DELIVER_AT, DivertError, delivery_time, divert
from broker.delayed.index import SqliteDueIndex
from broker.delayed.scheduler import IDLE_POLL_MS, DeliveryScheduler, MemoryDueIndex
from broker.delayed.store import (
    ParkedRecord, StoreFormatError, decode_parked, due_ms_of, encode_parked, store_batches,
    store_partition_for,
)
from broker.log import LogConfig
from clients.records import Record, RecordBatchBuilder, decode_batch, iter_batches
from clients.records.compression import CompressionType
from clients.types import TopicPartition

TP = TopicPartition("orders", 2)
NOW = 1_700_000_000_000
MAX = 30 * 24 * 3600 * 1000


def batch(headers_per_record, *, pid=-1, epoch=-1, seq=-1, txn=False,
          compression=CompressionType.NONE) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=txn, compression=compression)
    for i, headers in enumerate(headers_per_record):
        b.append(NOW - 5, f"k{i}".encode(), f"v{i}".encode(), headers)
    return b.build()


def at(ms: int) -> tuple[str, bytes]:
    return (DELIVER_AT, str(ms).encode())


@pytest.mark.parametrize("headers, due", [
    ((), None),
    (((DELIVER_AT, b"1700000005000"),), 1_700_000_005_000),
    (((DELIVER_AFTER, b"2500"),), NOW + 2500),
    (((DELIVER_AFTER, b" 0 "),), NOW),
    (((DELIVER_AT, b"5"), ("other", None)), 5),        # in the past: delivered at once
])
def test_delivery_time(headers, due) -> None:
    assert delivery_time(headers, NOW) == due


@pytest.mark.parametrize("headers, why", [
    (((DELIVER_AT, b"soon"),), "decimal"),
    (((DELIVER_AT, None),), "decimal"),
    (((DELIVER_AT, b""),), "decimal"),
    (((DELIVER_AT, b"1e9"),), "decimal"),
    (((DELIVER_AFTER, b"-1"),), "negative"),
    (((DELIVER_AT, b"1"), (DELIVER_AFTER, b"1")), "both"),
])
def test_malformed_delivery_times_are_refused(headers, why) -> None:
    with pytest.raises(DivertError, match=why):
        delivery_time(headers, NOW)


def test_a_batch_without_delivery_headers_passes_untouched() -> None:
    raw = batch([(), (("x", b"y"),)], pid=7, epoch=0, seq=0)
    assert divert(TP, raw, NOW, MAX, random.Random(1)) is None


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_batches_without_the_headers_are_not_decoded(codec, monkeypatch) -> None:
    import broker.delayed.divert as d
    monkeypatch.setattr(d, "decode_batch", lambda *a, **k: pytest.fail("decoded"))
    raw = batch([(("x", b"ketch"),), ()], compression=codec) + batch([(at(NOW + 9),)])
    with pytest.raises(BaseException, match="decoded"):
        divert(TP, raw, NOW, MAX, random.Random(1))          # the second batch has one
    assert divert(TP, raw[:len(batch([(("x", b"ketch"),), ()], compression=codec))], NOW, MAX,
                  random.Random(1)) is None


def test_past_delivery_times_pass_untouched() -> None:
    raw = batch([(at(NOW),), (at(NOW - 1000),)])
    assert divert(TP, raw, NOW, MAX, random.Random(1)) is None


def test_delayed_records_leave_gaps_and_keep_the_batch_identity() -> None:
    raw = batch([(), (at(NOW + 1000), ("app", b"1")), (), ((DELIVER_AFTER, b"50"),)],
                pid=7, epoch=3, seq=100)
    d = divert(TP, raw, NOW, MAX, random.Random(1))
    assert d is not None
    (_, h), = list(iter_batches(d.records))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 100)
    assert h.last_offset_delta == 3 and h.records_count == 2
    kept = decode_batch(d.records).records
    assert [(r.offset, r.value) for r in kept] == [(0, b"v0"), (2, b"v2")]
    assert [(p.target, p.due_ms, p.value, p.store_key) for p in d.parked] == [
        (TP, NOW + 1000, b"v1", b"orders:2:7:3:101"),
        (TP, NOW + 50, b"v3", b"orders:2:7:3:103")]
    # The delivered copy carries its absolute due time and the app's headers.
    assert d.parked[0].headers == (("app", b"1"), (DELIVER_AT, str(NOW + 1000).encode()))
    assert d.parked[1].headers == ((DELIVER_AT, str(NOW + 50).encode()),)
    assert d.parked[0].timestamp_ms == NOW - 5


def test_an_all_delayed_batch_becomes_empty_spanning_its_offsets() -> None:
    raw = batch([(at(NOW + 10),), (at(NOW + 20),)], pid=7, epoch=0, seq=0,
                compression=CompressionType.LZ4)
    d = divert(TP, raw, NOW, MAX, random.Random(1))
    assert d is not None and len(d.parked) == 2
    (_, h), = list(iter_batches(d.records))
    assert (h.records_count, h.last_offset_delta, h.base_sequence) == (0, 1, 0)
    assert decode_batch(d.records).records == ()


def test_a_retry_parks_the_same_keys_and_a_producer_without_id_random_ones() -> None:
    raw = batch([(at(NOW + 10),)], pid=7, epoch=0, seq=5)
    a = divert(TP, raw, NOW, MAX, random.Random(1))
    b = divert(TP, raw, NOW + 3, MAX, random.Random(2))
    assert a is not None and b is not None and a.parked[0].store_key == b.parked[0].store_key
    raw = batch([(at(NOW + 10),), (at(NOW + 10),)])
    c = divert(TP, raw, NOW, MAX, random.Random(1))
    assert c is not None and len({p.store_key for p in c.parked}) == 2


@pytest.mark.parametrize("headers, txn, why", [
    ((at(NOW + MAX + 1),), False, "at most"),
    (((DELIVER_AT, b"x"),), False, "decimal"),
    ((at(NOW + 10),), True, "transactions"),
])
def test_bad_input_refuses_the_whole_data(headers, txn, why) -> None:
    raw = batch([(), headers], pid=7, epoch=0, seq=0, txn=txn)
    with pytest.raises(DivertError, match=why):
        divert(TP, raw, NOW, MAX, random.Random(1))


def test_a_transactional_batch_due_now_passes() -> None:
    raw = batch([(at(NOW),)], pid=7, epoch=0, seq=0, txn=True)
    assert divert(TP, raw, NOW, MAX, random.Random(1)) is None


def test_the_log_takes_a_gapped_batch_only_when_told(tmp_path) -> None:
    from broker.log import PartitionLog
    from broker.log.storage import FileStorage
    storage = FileStorage()
    plog, _ = PartitionLog.open(storage, str(tmp_path / "orders-2"), LogConfig(), now_ms=NOW)
    raw = batch([(), (at(NOW + 1000),), (at(NOW + 1000),)], pid=7, epoch=0, seq=0)
    d = divert(TP, raw, NOW, MAX, random.Random(1))
    assert d is not None
    refused = plog.append_as_leader(bytearray(d.records), 0, NOW)
    assert refused.error_code != 0
    ok = plog.append_as_leader(bytearray(d.records), 0, NOW, reserved_gaps=True)
    assert (ok.error_code, ok.base_offset, ok.last_offset, plog.log_end_offset) == (0, 0, 2, 3)
    empty = divert(TP, batch([(at(NOW + 5),)], pid=7, epoch=0, seq=3), NOW, MAX, random.Random(1))
    assert empty is not None
    ok = plog.append_as_leader(bytearray(empty.records), 0, NOW, reserved_gaps=True)
    assert (ok.base_offset, ok.last_offset, plog.log_end_offset) == (3, 3, 4)
    plog.close()
    storage.close()


def test_store_codec_round_trips_and_refuses_garbage() -> None:
    r = ParkedRecord(b"k1", TP, NOW + 5, NOW, None, b"v", (("h", None), ("i", b"\x00")))
    assert decode_parked(b"k1", encode_parked(r)) == r
    assert due_ms_of(encode_parked(r)) == NOW + 5
    r2 = ParkedRecord(b"k2", TopicPartition("é", 0), 0, -1, b"", None)
    assert decode_parked(b"k2", encode_parked(r2)) == r2
    for bad in (b"", b"\x01" + encode_parked(r)[1:], encode_parked(r)[:-1], encode_parked(r)[:-2],
                encode_parked(r)[:-5], encode_parked(r2)[:-1], encode_parked(r2)[:-4]):
        with pytest.raises(StoreFormatError):
            decode_parked(b"k", bad)
    for bad in (b"", b"\x01" + encode_parked(r)[1:], encode_parked(r)[:12]):
        with pytest.raises(StoreFormatError):
            due_ms_of(bad)
    assert {store_partition_for(TopicPartition("t", p), 8) for p in range(64)} == set(range(8))
    assert store_partition_for(TP, 8) == store_partition_for(TopicPartition("orders", 2), 8)


@pytest.fixture(params=["memory", "sqlite"])
def index(request, tmp_path):
    ix = MemoryDueIndex() if request.param == "memory" else SqliteDueIndex(str(tmp_path / "x" / "0.sqlite"))
    yield ix
    ix.close()


def test_index_orders_by_due_and_replaces_by_key(index) -> None:
    index.put(b"b", 20, b"B")
    index.put(b"a", 10, b"A")
    index.put(b"c", 10, b"C")
    index.put(b"b", 5, b"B2")
    index.commit()
    assert len(index) == 3 and index.next_due() == 5
    assert index.due_by(100, 2) == [(b"b", 5, b"B2"), (b"a", 10, b"A")]
    assert index.due_by(9, 10) == [(b"b", 5, b"B2")] and index.due_by(4, 10) == []
    index.remove(b"b")
    index.remove(b"zz")
    assert [k for k, _, _ in index.due_by(100, 10)] == [b"a", b"c"] and len(index) == 2


def test_sqlite_index_starts_empty(tmp_path) -> None:
    path = str(tmp_path / "0.sqlite")
    a = SqliteDueIndex(path)
    a.put(b"a", 1, b"x")
    a.commit()
    a.close()
    b = SqliteDueIndex(path)
    assert len(b) == 0 and b.next_due() is None
    b.close()


def parked(key: str, due: int) -> bytes:
    return encode_parked(ParkedRecord(key.encode(), TP, due, NOW, None, key.encode()))


def test_scheduler_delivers_nothing_before_caught_up_nor_before_due(index) -> None:
    s = DeliveryScheduler(index, batch_max=2)
    assert s.replay([(b"a", parked("a", NOW + 100)), (b"b", parked("b", NOW + 50)),
                     (b"c", parked("c", NOW + 60)),
                     (b"c", None)]) == []          # delivered by the previous leader
    assert s.due(NOW + 1000) == [] and s.poll(NOW) == IDLE_POLL_MS
    s.caught_up()
    assert s.poll(NOW) == 50 and s.poll(NOW + 70) == 0
    assert s.due(NOW + 49) == []
    got = s.due(NOW + 100)
    assert [r.store_key for r in got] == [b"b", b"a"]
    assert s.due(NOW + 100) == []                  # one transaction in flight at a time
    s.failed()                                     # aborted: tried again
    assert [r.store_key for r in s.due(NOW + 100)] == [b"b", b"a"]
    s.delivered()
    assert s.pending == 0 and s.due(NOW + 10_000) == []
    s.replay([(b"a", None)])                       # our own tombstones come back: harmless
    assert s.poll(NOW) == IDLE_POLL_MS


def test_scheduler_batches_at_most_batch_max(index) -> None:
    s = DeliveryScheduler(index, batch_max=2)
    s.replay([(f"k{i}".encode(), parked(f"k{i}", NOW + i)) for i in range(5)])
    s.caught_up()
    assert [r.value for r in s.due(NOW + 2)] == [b"k0", b"k1"]
    s.delivered()
    assert [r.value for r in s.due(NOW + 2)] == [b"k2"]
    s.delivered()
    assert s.pending == 2 and s.poll(NOW + 2) == 1


def test_a_key_parked_again_after_its_delivery_is_delivered_again(index) -> None:
    """Delivered keys are not looked up again when their own tombstones come back; a key
    parked again in between (a retry's) is still taken out by the tombstone after it,
    and one parked after the tombstone stays, exactly as the log says."""
    s = DeliveryScheduler(index)
    s.replay([(b"a", parked("a", NOW)), (b"b", parked("b", NOW))])
    s.caught_up()
    assert len(s.due(NOW)) == 2
    s.delivered()
    s.replay([(b"a", parked("a", NOW)),          # parked again before the tombstone
              (b"a", None), (b"b", None),        # the delivery's tombstones
              (b"b", parked("b", NOW + 1))])     # parked again after it
    assert [(r.store_key, r.due_ms) for r in s.due(NOW + 1)] == [(b"b", NOW + 1)]
    s.delivered()
    s.replay([(b"b", None)])
    assert s.pending == 0


def test_store_batches_hold_the_parked_records_as_a_producer_would_send_them() -> None:
    rs = [ParkedRecord(f"k{i}".encode(), TP, NOW + i, NOW, None, b"v" * 100) for i in range(30)]
    raw = store_batches(rs, NOW, batch_bytes=1000)
    batches = [decode_batch(raw, pos) for pos, _ in iter_batches(raw)]
    assert len(batches) > 1 and all(b.header.size_in_bytes < 1000 + 200 for b in batches)
    got = [r for b in batches for r in b.records]
    assert [(r.key, decode_parked(r.key, r.value)) for r in got] == [(r.store_key, r) for r in rs]
    assert {r.timestamp for r in got} == {NOW}


def test_scheduler_refuses_an_unreadable_store_value(index) -> None:
    s = DeliveryScheduler(index)
    bad = s.replay([(b"x", b"\x09junk"), (b"y", parked("y", NOW)), (None, parked("z", NOW))])
    assert [(i, type(e)) for i, e in bad] == [(0, StoreFormatError), (2, StoreFormatError)]
    assert s.pending == 1


def test_gapped_and_empty_batches_survive_reads_compaction_and_a_restart() -> None:
    """The holes parked records leave, as the log's read path, the cleaner and recovery
    see them: offsets never renumbered, the log end kept, the latest value per key kept."""
    from broker.log import LogCleaner, PartitionLog, SimStorage
    from clients.records import decode_batches
    config = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=64,
                       delete_retention_ms=1_000)
    storage = SimStorage()
    plog, _ = PartitionLog.open(storage, "/d/c-0", config, now_ms=0)
    seq = 0
    for i in range(12):
        # k0..k2 due now, the fourth parked; every third batch wholly parked (empty).
        headers = [(at(NOW + 5),)] * 4 if i % 3 == 2 else [(), (), (), (at(NOW + 5),)]
        b = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=seq)
        for j, h in enumerate(headers):
            b.append(NOW, f"k{j}".encode(), f"v{i}".encode(), h)
        seq += 4
        d = divert(TP, b.build(), NOW, MAX, random.Random(i))
        assert d is not None
        result = plog.append_as_leader(bytearray(d.records), 0, NOW, reserved_gaps=True)
        assert (result.error_code, result.base_offset) == (0, 4 * i)

    def records() -> list[tuple[int, bytes | None, bytes | None]]:
        out, offset = [], plog.log_start_offset
        while offset < plog.log_end_offset:
            read = plog.read(offset, 4096, plog.log_end_offset)
            if read.records.is_empty:
                break
            batches = decode_batches(plog.read_records_bytes(read.records))
            out += [(r.offset, r.key, r.value) for bt in batches for r in bt.records]
            offset = batches[-1].header.last_offset + 1
        return out
    before = records()
    assert [o for o, _, _ in before][:6] == [0, 1, 2, 4, 5, 6] and plog.log_end_offset == 48
    plog.roll(now_ms=0)
    plog.flush(now_ms=0)
    assert LogCleaner(storage).clean(plog, high_watermark=plog.log_end_offset, now_ms=10).committed
    after = records()
    assert after == [(40, b"k0", b"v10"), (41, b"k1", b"v10"), (42, b"k2", b"v10")]
    plog.close()
    reopened, report = PartitionLog.open(storage, "/d/c-0", config, now_ms=0)
    assert not report.dropped_anything and reopened.log_end_offset == 48


def test_the_plain_produce_is_passed_through_without_decoding() -> None:
    """The common Produce (uncompressed v2 batches, no marker bytes) is told from the
    bytes as they arrive, a memoryview into the request frame included; anything else
    (a marker, compression, another magic, a torn batch) gets the closer look."""
    from broker.delayed.divert import _plainly_without_marker
    plain = batch([[("h", b"x")], []]) + batch([[]])
    assert _plainly_without_marker(plain) and _plainly_without_marker(memoryview(bytearray(plain)))
    assert divert(TP, memoryview(bytearray(plain)), NOW, 10_000, random.Random(1)) is None
    assert not _plainly_without_marker(batch([[at(NOW + 5)]]))
    assert not _plainly_without_marker(batch([[]], compression=CompressionType.LZ4))
    legacy = bytearray(plain)
    legacy[16] = 1
    assert not _plainly_without_marker(legacy)
    assert not _plainly_without_marker(plain[:-3])
    assert not _plainly_without_marker(plain + b"\x00" * 70)
