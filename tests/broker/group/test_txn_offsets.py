"""Transactional offset commits (TxnOffsetCommit): pending until the marker, then committed
or dropped; OffsetFetch require_stable; the loader after a failover (pure)."""
from __future__ import annotations

import pytest

from broker.group import GroupConfig, GroupCoordinator
from clients.protocol.errors import ErrorCode
from clients.records import decode_batches
from group_harness import Harness, coordinator_partition

E = ErrorCode
PID = 4000


def txn_errors(h: Harness, token: int) -> dict[tuple[str, int], int]:
    return h.commit_errors(token)


def test_txn_offsets_are_invisible_until_the_commit_marker() -> None:
    h = Harness()
    t = h.txn_commit("g", {("t", 0): 10, ("t", 1): 20}, producer_id=PID, producer_epoch=3)
    assert txn_errors(h, t) == {("t", 0): 0, ("t", 1): 0}
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    h.marker("g", PID, committed=True, producer_epoch=3)
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 20}


def test_the_batch_is_transactional_under_the_producers_id_and_epoch() -> None:
    h = Harness(auto_ack=False)
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID, producer_epoch=3)
    append, = h.pending_appends
    header = decode_batches(append.batch())[0].header
    assert (header.is_transactional, header.producer_id, header.producer_epoch,
            header.base_sequence) == (True, PID, 3, 0)
    h.commit("g", {("t", 1): 5})
    plain = h.pending_appends[1]
    assert not decode_batches(plain.batch())[0].header.is_transactional


def test_abort_marker_drops_pending_offsets_and_keeps_the_committed_ones() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 5})
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.marker("g", PID, committed=False)
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 5}
    h.marker("g", PID, committed=True)      # nothing pending any more: nothing changes
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 5}


def test_markers_of_one_producer_leave_anothers_pending_offsets() -> None:
    h = Harness()
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.txn_commit("g", {("t", 1): 11}, producer_id=PID + 1)
    h.marker("g", PID, committed=True)
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): -1}
    assert h.fetch_stable("g", {"t": [0, 1]}) == {("t", 0): (10, 0),
                                                   ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}


def test_a_plain_commit_written_after_the_txn_record_wins_over_the_commit_marker() -> None:
    # Kafka keeps, per partition, the offset whose record is later in the log.
    h = Harness()
    h.txn_commit("g", {("t", 0): 10, ("t", 1): 11}, producer_id=PID)
    h.commit("g", {("t", 0): 99})
    h.marker("g", PID, committed=True)
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): 99, ("t", 1): 11}
    loaded = h.log.load(coordinator_partition("g")).image
    assert {tp: v.offset for tp, v in loaded.offsets["g"].items()} == {("t", 0): 99, ("t", 1): 11}


@pytest.mark.parametrize("version", [7, 8])
def test_require_stable_answers_unstable_while_a_transaction_is_open(version: int) -> None:
    h = Harness()
    h.commit("g", {("t", 0): 5, ("t", 1): 6})
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    assert h.fetch_stable("g", {"t": [0, 1]}, version=version) == {
        ("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT), ("t", 1): (6, 0)}
    assert h.fetch_stable("g", None, version=version) == {
        ("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT), ("t", 1): (6, 0)}
    # Without require_stable the last committed offset is read.
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 5}
    h.marker("g", PID, committed=True)
    assert h.fetch_stable("g", {"t": [0, 1]}, version=version) == {("t", 0): (10, 0),
                                                                   ("t", 1): (6, 0)}


def test_a_marker_during_an_unacknowledged_append_is_replayed_after_it() -> None:
    # The txn record is in the leader's log before the marker; the marker hook fires
    # before the record's acks=all completes. The marker must still commit it.
    h = Harness(auto_ack=False)
    t = h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.marker("g", PID, committed=True, in_log=False)
    assert h.fetched("g", {"t": [0]}) == {("t", 0): -1}
    h.ack_all()
    h.log.marker(coordinator_partition("g"), PID, 0, True)
    assert txn_errors(h, t) == {("t", 0): 0}
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 10}
    assert h.fetch_stable("g", {"t": [0]}) == {("t", 0): (10, 0)}


def test_a_marker_behind_a_failed_append_waits_for_the_earlier_one() -> None:
    h = Harness(auto_ack=False)
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID)      # append A
    h.commit("g", {("t", 1): 1})                            # append B
    h.marker("g", PID, committed=True, in_log=False)         # behind B in the log
    b = h.pending_appends.pop(1)
    h.run(h.coordinator.on_append_result(b.append_id, int(E.NOT_ENOUGH_REPLICAS), h.now_ms))
    assert h.fetched("g", {"t": [0]}) == {("t", 0): -1}      # A not replayed yet
    h.ack_next()
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): -1}


def test_failed_txn_append_reports_the_fencing_error_and_stays_invisible() -> None:
    h = Harness(auto_ack=False)
    t = h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.ack_next(E.PRODUCER_FENCED)
    assert txn_errors(h, t) == {("t", 0): E.PRODUCER_FENCED}
    h.marker("g", PID, committed=True)
    assert h.fetched("g", {"t": [0]}) == {("t", 0): -1}
    t = h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.ack_next(E.NOT_LEADER_OR_FOLLOWER)
    assert txn_errors(h, t) == {("t", 0): E.NOT_COORDINATOR}


def test_loader_replays_pending_committed_and_aborted_transactions() -> None:
    h = Harness()
    h.txn_commit("g", {("t", 0): 10}, producer_id=PID)
    h.marker("g", PID, committed=True)
    h.txn_commit("g", {("t", 0): 20}, producer_id=PID)
    h.marker("g", PID, committed=False)
    h.txn_commit("g", {("t", 1): 30}, producer_id=PID + 1)     # still open at failover
    p = coordinator_partition("g")
    image = h.log.load(p).image
    assert {tp: v.offset for tp, v in image.offsets["g"].items()} == {("t", 0): 10}
    assert image.pending_txn_partitions("g") == {("t", 1)}
    # The new coordinator answers as the old one did, and completes the open transaction.
    c = GroupCoordinator(h.config)
    c.begin_load(p)
    c.complete_load(p, image, h.now_ms)
    h.coordinator = c
    assert h.fetch_stable("g", {"t": [0, 1]}) == {("t", 0): (10, 0),
                                                   ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    h.marker("g", PID + 1, committed=True)
    assert h.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 30}


def test_a_loading_partition_ignores_the_hook_the_loader_reads_the_marker() -> None:
    p = coordinator_partition("g")
    h = Harness(partitions=())
    h.coordinator.begin_load(p)
    assert h.coordinator.on_txn_marker(p, PID, True, h.now_ms) == []


def test_generation_checks_from_v3() -> None:
    h = Harness()
    leader, = h.form_group("g", 1)
    generation = h.group("g").generation_id
    ok = h.txn_commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation)
    assert txn_errors(h, ok) == {("t", 0): 0}
    stale = h.txn_commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation + 1)
    assert txn_errors(h, stale) == {("t", 0): E.ILLEGAL_GENERATION}
    unknown = h.txn_commit("g", {("t", 0): 1}, member_id="nobody", generation_id=generation)
    assert txn_errors(h, unknown) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # v0-v2 carry no member: accepted even though the group has members.
    old = h.txn_commit("g", {("t", 0): 1}, member_id="nobody", generation_id=7, version=2)
    assert txn_errors(h, old) == {("t", 0): 0}
    # A generation for a group that does not exist is refused; -1 creates a simple group.
    gone = h.txn_commit("nope", {("t", 0): 1}, member_id="m", generation_id=3)
    assert txn_errors(h, gone) == {("t", 0): E.ILLEGAL_GENERATION}
    assert txn_errors(h, h.txn_commit("", {("t", 0): 1})) == {("t", 0): E.INVALID_GROUP_ID}


def test_offsets_with_an_open_transaction_do_not_expire() -> None:
    config = GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1,
                         offsets_retention_check_interval_ms=1_000)
    h = Harness(config)
    h.commit("solo", {("t", 0): 5})
    h.txn_commit("solo", {("t", 0): 10}, producer_id=PID)
    h.advance(120_000)
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 5}
    h.marker("solo", PID, committed=True)
    assert h.fetched("solo", {"t": [0]}) == {("t", 0): 10}
