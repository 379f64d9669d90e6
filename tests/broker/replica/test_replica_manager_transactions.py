"""Transactions on the partition log, driven by hand through the data-plane core
(broker.replica_manager): hand-built transactional batches, WriteTxnMarkers' per-partition
append (``append_txn_marker``), read_committed fetches and ListOffsets around an aborted
and a committed transaction, the marker hook, a follower replicating markers, restarts
that rebuild producer state and the aborted transaction index (with and without
snapshots), and the cleaner around transactions."""
from __future__ import annotations

import os
import uuid

import pytest

from broker.log import FileStorage, LogCleaner, LogManager
from broker.log.transaction_index import AbortedTxn
from broker.replica_manager import (
    READ_COMMITTED, READ_UNCOMMITTED, FetchedPartition, PartitionsChanged, ReplicaManager,
    TxnMarkerAppended,
)
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch, decode_batches
from clients.types import TopicPartition
from metadata_harness import Metadata

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID(int=15)
LATEST = -1


def brokers(*ids: int) -> list:
    return [M.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=10 + b,
                                   fenced=False) for b in ids]


def open_core(path: str, broker_id: int = 1, props: dict[str, str] | None = None) -> ReplicaManager:
    logs, _ = LogManager.open(FileStorage(), path, now_ms=0)
    return ReplicaManager(broker_id, logs, props or {}, replica_lag_time_max_ms=10_000)


def leader(tmp_path, props: dict[str, str] | None = None) -> tuple[ReplicaManager, Metadata]:
    meta = Metadata()
    core = open_core(str(tmp_path / "b1"), props=props)
    core.apply_metadata(*meta.commit(
        *brokers(1), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1,
                          leader_epoch=2, partition_epoch=0)), 0)
    core.take_effects()
    return core, meta


def reopen(core: ReplicaManager, path: str, meta: Metadata, clean: bool = True,
           props: dict[str, str] | None = None) -> ReplicaManager:
    if clean:
        core.shutdown()
    again = open_core(path, props=props)
    again.apply_metadata(meta.image, None, 0)
    again.take_effects()
    return again


def data(pid: int, seq: int, *values: bytes, txn: bool = True, epoch: int = 0) -> bytes:
    return bytes(build_batch([Record(i, 1_000 + i, None, v) for i, v in enumerate(values)],
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             is_transactional=txn))


def append(core: ReplicaManager, records: bytes) -> int:
    result = core.append(TP, records, 1, 0)
    assert result.error_code == ErrorCode.NONE, result
    return result.base_offset


def marker(core: ReplicaManager, pid: int, committed: bool, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    result = core.append_txn_marker(TP, pid, epoch, committed, coordinator_epoch, 0)
    assert result.error_code == ErrorCode.NONE, result
    return result.base_offset


def fetch(core: ReplicaManager, offset: int, isolation: int):
    return core.read(TP, offset, 1 << 20, -1, -1, 0, True, isolation_level=isolation)


def consumer_view(core: ReplicaManager, offset: int, isolation: int) -> list[bytes]:
    """What a Kafka consumer returns from one fetch: with read_committed it drops the
    batches of the aborted transactions the answer lists (the Java consumer's
    CompletedFetch rule) and every control batch."""
    r = fetch(core, offset, isolation)
    assert r.error_code == ErrorCode.NONE
    if r.records is None:
        return []
    batches = decode_batches(r.log.read_records_bytes(r.records))
    pending = sorted(r.aborted_transactions or (), key=lambda t: t.first_offset)
    aborted: set[int] = set()
    out = []
    for b in batches:
        h = b.header
        while pending and pending[0].first_offset <= h.last_offset:
            aborted.add(pending.pop(0).producer_id)
        if h.is_control:
            if h.producer_id in aborted:
                aborted.discard(h.producer_id)      # that ABORT ends the aborted range
            continue
        if h.is_transactional and h.producer_id in aborted:
            continue
        out += [rec.value for rec in b.records]
    return out


def test_read_committed_around_an_aborted_and_a_committed_transaction(tmp_path) -> None:
    core, _ = leader(tmp_path)
    append(core, data(-1, -1, b"plain", txn=False))                 # 0
    append(core, data(10, 0, b"x1"))                                # 1: producer 10 begins
    append(core, data(11, 0, b"y1"))                                # 2: producer 11 begins
    append(core, data(10, 1, b"x2"))                                # 3
    assert core.partitions[TP].replica.high_watermark == 4
    # Both transactions open: read_committed stops at the first unstable offset.
    r = fetch(core, 0, READ_COMMITTED)
    assert (r.last_stable_offset, r.records.last_offset, r.aborted_transactions) == (1, 0, ())
    assert fetch(core, 0, READ_UNCOMMITTED).records.last_offset == 3
    assert fetch(core, 0, READ_UNCOMMITTED).aborted_transactions is None
    assert core.list_offset(TP, LATEST, -1, -1, READ_COMMITTED)[2] == 1
    assert core.list_offset(TP, LATEST, -1, -1, READ_UNCOMMITTED)[2] == 4
    assert fetch(core, 1, READ_COMMITTED).records is None            # parked until the LSO moves
    code, producers = core.describe_producers(TP)
    assert code == 0 and [(p.producer_id, p.current_txn_start_offset) for p in producers] == \
        [(10, 1), (11, 2)]

    assert marker(core, 10, committed=False, coordinator_epoch=3) == 4
    effects = core.take_effects()
    assert TxnMarkerAppended(TP, 10, False) in effects               # the hook fires at once
    assert any(isinstance(e, PartitionsChanged) and TP in e.partitions for e in effects), \
        "parked read_committed fetches wake: the LSO moved"
    assert fetch(core, 0, READ_COMMITTED).last_stable_offset == 2    # producer 11 still open
    assert marker(core, 11, committed=True) == 5
    assert TxnMarkerAppended(TP, 11, True) in core.take_effects()

    r = fetch(core, 0, READ_COMMITTED)
    assert r.last_stable_offset == 6 and r.records.last_offset == 5
    assert r.aborted_transactions == (AbortedTxn(10, 1, 4, 2),)
    assert consumer_view(core, 0, READ_COMMITTED) == [b"plain", b"y1"]
    assert consumer_view(core, 0, READ_UNCOMMITTED) == [b"plain", b"x1", b"y1", b"x2"]
    assert fetch(core, 5, READ_COMMITTED).aborted_transactions == ()  # past the aborted one
    assert core.list_offset(TP, LATEST, -1, -1, READ_COMMITTED)[2] == 6
    code, producers = core.describe_producers(TP)
    assert [(p.producer_id, p.current_txn_start_offset, p.coordinator_epoch) for p in producers] == \
        [(10, -1, 3), (11, -1, 0)]
    seg = core.partitions[TP].log.active_segment
    assert os.path.getsize(seg.txn_index_path) == 34                  # Kafka's entry size


def test_write_txn_markers_refusals_follow_kafka(tmp_path) -> None:
    core, _ = leader(tmp_path)
    append(core, data(10, 0, b"x", epoch=2))
    marker(core, 10, committed=True, epoch=2, coordinator_epoch=5)
    refuse = core.append_txn_marker
    assert refuse(TP, 10, 1, True, 5, 0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert refuse(TP, 10, 2, True, 4, 0).error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert refuse(TopicPartition("t", 9), 10, 2, True, 5, 0).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    end = core.partitions[TP].log.log_end_offset
    assert end == 2, "a refused marker appends nothing"
    # A marker with a bumped epoch (the coordinator aborted on a timeout) fences the old epoch.
    append(core, data(10, 1, b"y", epoch=2))
    marker(core, 10, committed=False, epoch=3, coordinator_epoch=5)
    assert core.append(TP, data(10, 2, b"z", epoch=2), 1, 0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    # Non-transactional data inside a transaction (Kafka's InvalidTxnStateException).
    append(core, data(10, 0, b"t", epoch=3))
    assert core.append(TP, data(10, 1, b"u", txn=False, epoch=3), 1, 0).error_code == \
        ErrorCode.INVALID_TXN_STATE


def test_a_follower_replicating_markers_builds_the_same_state(tmp_path) -> None:
    core, _ = leader(tmp_path)
    append(core, data(10, 0, b"x1"))
    append(core, data(11, 0, b"y1"))
    marker(core, 10, committed=False)
    plog = core.partitions[TP].log
    leader_bytes = plog.read_records_bytes(plog.read(0, 1 << 20, plog.log_end_offset).records)

    meta = Metadata()
    follower = open_core(str(tmp_path / "b2"), broker_id=2)
    follower.apply_metadata(*meta.commit(
        *brokers(1, 2), M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                          leader_epoch=2, partition_epoch=0)), 0)
    follower.take_effects()
    work = follower.follower_work(1, 0)
    follower.handle_fetched(work, [FetchedPartition(TP, ErrorCode.NONE, 3, 0, leader_bytes)], 1)
    hosted = follower.partitions[TP]
    assert hosted.log.log_end_offset == 3
    assert hosted.producers.first_unstable_offset() == 1              # producer 11's
    assert hosted.log.collect_aborted_transactions(0, 3) == [AbortedTxn(10, 0, 2, 1)]
    assert not [e for e in follower.take_effects() if isinstance(e, TxnMarkerAppended)], \
        "the hook is the leader's"


SMALL_SEGMENTS = {"log.segment.bytes": "200"}


def many_segments(tmp_path) -> tuple[ReplicaManager, Metadata]:
    """A transaction opened in an old segment and still open, an aborted one, a log of
    several segments."""
    core, meta = leader(tmp_path, SMALL_SEGMENTS)
    append(core, data(10, 0, b"open-" + b"x" * 60))                  # 0: stays open
    append(core, data(11, 0, b"gone-" + b"y" * 60))                  # 1
    marker(core, 11, committed=False)                                # 2
    for i in range(6):
        append(core, data(-1, -1, b"filler-%d" % i + b"z" * 60, txn=False))
    assert len(core.partitions[TP].log.segments) > 3
    return core, meta


def state(core: ReplicaManager) -> tuple:
    hosted = core.partitions[TP]
    return (hosted.producers.first_unstable_offset(),
            hosted.log.collect_aborted_transactions(0, hosted.log.log_end_offset),
            hosted.producers.active_producers())


def test_a_clean_restart_loads_the_snapshot_and_keeps_transactions_of_old_segments(tmp_path) -> None:
    core, meta = many_segments(tmp_path)
    before = state(core)
    assert before[0] == 0 and before[1] == [AbortedTxn(11, 1, 2, 0)]
    plog = core.partitions[TP].log
    assert plog.producer_snapshot_offsets, "rolls write snapshots"
    again = reopen(core, str(tmp_path / "b1"), meta, props=SMALL_SEGMENTS)
    assert state(again) == before
    assert again.partitions[TP].log.producer_snapshot_offsets[-1] == \
        again.partitions[TP].log.log_end_offset                      # the shutdown's
    assert fetch(again, 0, READ_COMMITTED).last_stable_offset == 0


def test_without_snapshots_or_txn_index_a_restart_rebuilds_both_from_the_log(tmp_path) -> None:
    core, meta = many_segments(tmp_path)
    before = state(core)
    core.shutdown()
    directory = core.partitions[TP].log.dir_path
    for name in os.listdir(directory):
        if name.endswith((".snapshot", ".txnindex")):
            os.remove(os.path.join(directory, name))
    again = reopen(core, str(tmp_path / "b1"), meta, clean=False, props=SMALL_SEGMENTS)
    assert state(again) == before
    assert any(n.endswith(".txnindex") for n in os.listdir(directory))


def test_a_follower_truncating_a_marker_away_reopens_its_transaction(tmp_path) -> None:
    core, _ = leader(tmp_path)
    append(core, data(10, 0, b"x1"))
    marker(core, 10, committed=False)
    hosted = core.partitions[TP]
    assert hosted.producers.first_unstable_offset() is None
    hosted.log.truncate_to(1)
    hosted.producers = ReplicaManager._rebuild_producer_state(hosted.log)
    assert hosted.producers.first_unstable_offset() == 0
    assert hosted.log.collect_aborted_transactions(0, 1) == []


def test_retention_deletes_snapshots_and_txn_indexes_with_their_segments(tmp_path) -> None:
    core, _ = many_segments(tmp_path)
    plog = core.partitions[TP].log
    first = plog.segments[0]
    txn_path = plog.segments[0].txn_index_path
    core.take_effects()
    assert core.delete_records(TP, plog.segments[2].base_offset)[0] == ErrorCode.NONE
    # A moved log start is a numbered change: follower sessions look at the partition.
    assert any(isinstance(e, PartitionsChanged) and TP in e.partitions for e in core.take_effects())
    plog.delete_old_segments(0, core.partitions[TP].replica.high_watermark)
    assert plog.segments[0] is not first and not os.path.exists(txn_path)
    assert min(plog.producer_snapshot_offsets) >= plog.segments[0].base_offset


def _batches(plog) -> list:
    out: list = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:     # a read stays within one segment
        batches = decode_batches(plog.read_records_bytes(
            plog.read(offset, 1 << 20, plog.log_end_offset).records))
        out += batches
        offset = batches[-1].header.last_offset + 1
    return out


def test_the_cleaner_stops_at_the_lso_and_drops_aborted_data_then_the_abort_marker(tmp_path) -> None:
    props = {**SMALL_SEGMENTS, "log.cleanup.policy": "compact"}
    core, _ = leader(tmp_path, props)

    def keyed(pid: int, seq: int, key: bytes, value: bytes, txn: bool = True) -> bytes:
        return bytes(build_batch([Record(0, 1_000, key, value + b"." * 60)], producer_id=pid,
                                 producer_epoch=0, base_sequence=seq, is_transactional=txn))
    append(core, keyed(-1, -1, b"k", b"committed-1", txn=False))    # 0
    append(core, keyed(10, 0, b"k", b"aborted"))                     # 1
    marker(core, 10, committed=False)                                # 2
    append(core, keyed(11, 0, b"j", b"open"))                        # 3: stays open
    for i in range(4):
        append(core, keyed(-1, -1, b"f%d" % i, b"filler", txn=False))
    plog = core.partitions[TP].log
    lso = core.last_stable_offset_of("t", 0)
    assert lso == 3
    result = LogCleaner(plog.storage).clean(plog, lso, 10_000)
    assert result.committed
    values = [(r.offset, r.value.rstrip(b".")) for b in _batches(plog) for r in b.records
              if not b.header.is_control]
    assert (0, b"committed-1") in values, "an aborted value never shadows a committed one"
    assert (1, b"aborted") not in values
    assert (3, b"open") in values
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == [AbortedTxn(10, 1, 2, 3)]
    (kept_marker,) = [b.header for b in _batches(plog) if b.header.is_control]
    horizon = 10_000 + plog.config.delete_retention_ms
    assert kept_marker.has_delete_horizon and kept_marker.base_timestamp == horizon
    # Before the horizon the marker stays; after it the marker and its index entry go.
    LogCleaner(plog.storage).clean(plog, lso, horizon - 1)
    assert [b.header.base_offset for b in _batches(plog) if b.header.is_control] == [2]
    assert LogCleaner(plog.storage).clean(plog, lso, horizon).committed
    assert [b for b in _batches(plog) if b.header.is_control] == []
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == []
    assert min(plog.producer_snapshot_offsets) > 2, "no snapshot from before the dropped marker"
    assert ReplicaManager._rebuild_producer_state(plog).first_unstable_offset() == 3
    assert (3, b"open") in [(r.offset, r.value.rstrip(b".")) for b in _batches(plog) for r in b.records]


def test_the_driver_tells_marker_subscribers_before_the_append_returns(tmp_path) -> None:
    from broker.replica_driver import ReplicaDriver
    core, _ = leader(tmp_path)
    append(core, data(10, 0, b"x"))
    driver = ReplicaDriver(core, controller=None, now_ms=lambda: 0, broker_epoch=lambda: 1)  # type: ignore[arg-type]
    heard = []
    driver.subscribe_txn_markers(lambda tp, pid, committed: heard.append(
        (tp, pid, committed, core.partitions[tp].log.log_end_offset)))
    result = driver.append_txn_marker(TP, 10, 0, True, 0)
    assert result.error_code == ErrorCode.NONE and result.required_offset == 2
    assert heard == [(TP, 10, True, 2)], "called synchronously, the marker already in the log"
    refused = driver.append_txn_marker(TP, 10, 0, False, coordinator_epoch=-5)
    assert refused.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert len(heard) == 1, "a refused marker is not heard"


# ------------------------------------------------------------ the cleaner and markers
# Each row: a log (d = transactional record of a producer, n = a plain record, C / A = its
# COMMIT / ABORT marker), then the markers left after the first pass, after the pass that
# gives removable markers their delete horizon, and after the horizon; and the values a
# read_committed consumer sees at the end. Kafka's rule: a marker goes once no record of
# its transaction is left before it, and delete.retention.ms after that was first seen.
MARKER_ROWS = [
    # a committed record that stays keeps its COMMIT marker for ever
    ("C kept while its record lives", [("d", 10, "k", "a"), ("C", 10)],
     ["C10"], ["C10"], ["C10"], ["k=a"]),
    # the record is shadowed by a later plain one: pass 1 reads (and drops) it, so the
    # marker stays; pass 2 finds no record of the transaction and sets the horizon
    ("C goes after its record", [("d", 10, "k", "a"), ("C", 10), ("n", 0, "k", "b")],
     ["C10"], ["C10"], [], ["k=b"]),
    # the same producer's next transaction shadows the first: only the first marker goes
    ("two transactions, first shadowed",
     [("d", 10, "k", "a"), ("C", 10), ("d", 10, "k", "b"), ("C", 10)],
     ["C10", "C10"], ["C10", "C10"], ["C10"], ["k=b"]),
    # interleaved producers: each marker judged by its own producer's records
    ("interleaved producers",
     [("d", 10, "k", "a"), ("d", 11, "j", "b"), ("C", 11), ("C", 10), ("n", 0, "k", "c")],
     ["C11", "C10"], ["C11", "C10"], ["C11"], ["j=b", "k=c"]),
    # an ABORT's data is dropped with the first pass, its marker after the horizon
    ("abort", [("n", 0, "k", "a"), ("d", 10, "k", "x"), ("A", 10)],
     ["A10"], ["A10"], [], ["k=a"]),
    # abort then commit by one producer, the committed record shadowed later
    ("abort then commit, shadowed",
     [("d", 10, "k", "x"), ("A", 10), ("d", 10, "k", "b"), ("C", 10), ("n", 0, "k", "c")],
     ["A10", "C10"], ["A10", "C10"], [], ["k=c"]),
    # a plain (non-transactional) batch of the producer id does not hold a marker
    ("idempotent batch of the same id",
     [("d", 10, "k", "a"), ("C", 10), ("n", 10, "k", "b")],
     ["C10"], ["C10"], [], ["k=b"]),
]


def _markers(plog) -> list[str]:
    from clients.records import ControlRecordType
    return [("C" if b.records[0].control_type is ControlRecordType.COMMIT else "A")
            + str(b.header.producer_id) for b in _batches(plog) if b.header.is_control]


@pytest.mark.parametrize("name,entries,after_first,after_second,at_horizon,visible", MARKER_ROWS,
                         ids=[r[0] for r in MARKER_ROWS])
def test_the_cleaner_removes_markers_as_kafkas(tmp_path, name, entries, after_first, after_second,
                                               at_horizon, visible) -> None:
    props = {**SMALL_SEGMENTS, "log.cleanup.policy": "compact"}
    core, meta = leader(tmp_path, props)
    seqs: dict[int, int] = {}

    def keyed(pid: int, key: str, value: str, txn: bool) -> bytes:
        seq = seqs.get(pid, 0) if pid >= 0 else -1
        if pid >= 0:
            seqs[pid] = seq + 1
        return bytes(build_batch([Record(0, 1_000, key.encode(), value.encode() + b"." * 60)],
                                 producer_id=pid if pid > 0 else -1, producer_epoch=0,
                                 base_sequence=seq if pid > 0 else -1, is_transactional=txn))
    for kind, pid, *kv in entries:
        if kind in "dn":
            append(core, keyed(pid, kv[0], kv[1], txn=kind == "d"))
        else:
            marker(core, pid, committed=kind == "C")
    for i in range(3):                  # the markers leave the active segment
        append(core, keyed(0, f"f{i}", "filler", txn=False))
    plog = core.partitions[TP].log
    lso = core.last_stable_offset_of("t", 0)
    assert lso == plog.log_end_offset   # nothing open
    cleaner = LogCleaner(plog.storage)
    now = 10_000
    horizon = now + plog.config.delete_retention_ms
    cleaner.clean(plog, lso, now)
    assert _markers(plog) == after_first
    cleaner.clean(plog, lso, now)
    assert _markers(plog) == after_second
    cleaner.clean(plog, lso, horizon - 1)
    assert _markers(plog) == after_second, "kept until the horizon"
    cleaner.clean(plog, lso, horizon)
    assert _markers(plog) == at_horizon
    values = [f"{r.key.decode()}={r.value.rstrip(b'.').decode()}" for r in
              (r for b in _batches(plog) if not b.header.is_control for r in b.records)
              if not r.key.startswith(b"f")]
    assert sorted(values) == sorted(visible)
    # Nothing left half-open: a producer state rebuilt from what remains, or a restart
    # from the snapshots the cleaner left, has no transaction open.
    assert ReplicaManager._rebuild_producer_state(plog).first_unstable_offset() is None
    if not any(m.startswith("A") for m in at_horizon):
        assert plog.collect_aborted_transactions(0, plog.log_end_offset) == []
    again = reopen(core, str(tmp_path / "b1"), meta, props=props)
    assert again.last_stable_offset_of("t", 0) == again.partitions[TP].log.log_end_offset


# ------------------------------------------------------------ the cleaner and producer state
# Each row: a log (i = an idempotent producer's batch of key=value records, n = a plain
# record, e = an idempotent producer's batch of that many records all parked by delayed
# delivery: an empty batch), then the batches a pass leaves ("i10:" an empty one). Kafka's
# rule (RETAIN_EMPTY): the batch holding an active producer's last data offset stays,
# emptied if need be, so that the producer state rebuilt from the log has its last
# sequence; no other batch is kept for a producer's sake.
PRODUCER_ROWS = [
    ("the last batch, shadowed, stays empty", [("i", 10, "a=1"), ("n", 0, "a=2")],
     ["i10:", "n:a=2"]),
    ("an earlier batch goes, the last stays", [("i", 10, "a=1"), ("i", 10, "a=2")],
     ["i10:a=2"]),
    ("two producers, both shadowed",
     [("i", 10, "a=1"), ("i", 11, "b=1"), ("n", 0, "a=2"), ("n", 0, "b=2")],
     ["i10:", "i11:", "n:a=2", "n:b=2"]),
    ("part of the last batch shadowed", [("i", 10, "a=1 b=1"), ("n", 0, "a=2")],
     ["i10:b=1", "n:a=2"]),
    ("no producer id, nothing kept", [("n", 0, "a=1"), ("n", 0, "a=2")], ["n:a=2"]),
    ("delayed delivery's empty batch, the producer's last: stays", [("e", 10, 2)], ["i10:"]),
    ("delayed delivery's empty batch, then another batch: goes",
     [("e", 10, 2), ("i", 10, "a=1")], ["i10:a=1"]),
]


@pytest.mark.parametrize("name,entries,left", PRODUCER_ROWS, ids=[r[0] for r in PRODUCER_ROWS])
def test_the_cleaner_keeps_each_producers_last_batch_as_kafkas(tmp_path, name, entries, left) -> None:
    from clients.records import decode_batch, filtered_batch
    props = {**SMALL_SEGMENTS, "log.cleanup.policy": "compact"}
    core, meta = leader(tmp_path, props)
    seqs: dict[int, int] = {}

    def batch(pid: int, pairs: list[tuple[bytes, bytes]]) -> bytes:
        seq = seqs.get(pid, 0)
        if pid > 0:
            seqs[pid] = seq + len(pairs)
        return bytes(build_batch([Record(i, 1_000, k, v + b"." * 40) for i, (k, v) in enumerate(pairs)],
                                 producer_id=pid if pid > 0 else -1, producer_epoch=0,
                                 base_sequence=seq if pid > 0 else -1))
    for kind, pid, what in entries:
        if kind == "e":
            full = batch(pid, [(b"parked", b"%d" % i) for i in range(what)])
            result = core.append(TP, filtered_batch(decode_batch(full).header, []), 1, 0,
                                 reserved_gaps=True)
            assert result.error_code == ErrorCode.NONE, result
        else:
            append(core, batch(pid, [tuple(kv.encode().split(b"=")) for kv in what.split()]))
    for i in range(3):                  # the rows leave the active segment
        append(core, batch(0, [(b"f%d" % i, b"filler")]))
    plog = core.partitions[TP].log
    before = core.last_records_of("t", 0)
    cleaner = LogCleaner(plog.storage)
    for now in (10_000, 10_000 + plog.config.delete_retention_ms):
        cleaner.clean(plog, core.last_stable_offset_of("t", 0), now, core.last_records_of("t", 0))
    kept = [(f"i{b.header.producer_id}:" if b.header.producer_id > 0 else "n:")
            + " ".join(f"{r.key.decode()}={r.value.rstrip(b'.').decode()}" for r in b.records)
            for b in _batches(plog) if not (b.records and b.records[0].key.startswith(b"f"))]
    assert kept == left
    # The producer state rebuilt from what is left (no snapshot) knows every producer's
    # last sequence: the retry of its last batch is a duplicate.
    assert ReplicaManager._rebuild_producer_state(plog).last_records() == before
    core.shutdown()
    for name_ in os.listdir(plog.dir_path):
        if name_.endswith(".snapshot"):
            os.remove(os.path.join(plog.dir_path, name_))
    again = reopen(core, str(tmp_path / "b1"), meta, clean=False, props=props)
    assert again.last_records_of("t", 0) == before
    for pid, next_seq in seqs.items():
        last = before[pid].last_data_offset
        assert last is not None
        (first,) = [b for b in _batches(again.partitions[TP].log) if b.header.last_offset == last]
        retry = again.partitions[TP].producers.check(pid, 0, first.header.base_sequence,
                                                     first.header.last_offset_delta)
        assert retry.duplicate_of is not None, (pid, next_seq)


def test_a_retention_pass_that_moves_a_log_start_is_a_numbered_change(tmp_path) -> None:
    # Follower sessions look at an idle partition again only when it changed (and at
    # the long recheck): retention moving its log start must be such a change.
    core, _ = leader(tmp_path, {**SMALL_SEGMENTS, "log.retention.bytes": "300"})
    for i in range(8):
        append(core, data(-1, -1, b"filler-%d" % i + b"z" * 60, txn=False))
    core.take_effects()
    start = core.partitions[TP].log.log_start_offset
    core.poll(3_600_000)        # past log.retention.check.interval.ms
    assert core.partitions[TP].log.log_start_offset > start
    assert any(isinstance(e, PartitionsChanged) and TP in e.partitions for e in core.take_effects())
