"""TransactionState's transition table and TransactionMetadata's pending transitions (pure)."""
from __future__ import annotations

import itertools

import pytest

from broker.txn.records import TransactionLogValue
from broker.txn.state import (
    EPOCH_MAX, NO_PRODUCER_EPOCH, TransactionMetadata, TransactionState, VALID_PREVIOUS_STATES,
    is_epoch_exhausted,
)
from clients.types import TopicPartition

S = TransactionState
TP0 = TopicPartition("t", 0)

# Kafka's TransactionMetadata.scala validPreviousStates, written out independently.
KAFKA_TRANSITIONS = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def _metadata(state: TransactionState, epoch: int = 3) -> TransactionMetadata:
    return TransactionMetadata("txn", 7, -1, epoch, NO_PRODUCER_EPOCH, 60_000, state,
                               frozenset({TP0}) if state is not S.EMPTY else frozenset(), 100, 100)


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert all(S.from_kafka_name(s.kafka_name) is s for s in S)
    assert S.from_kafka_name("Ongoin") is None
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_transition_table_is_kafkas() -> None:
    table = {(src, dst) for dst, srcs in VALID_PREVIOUS_STATES.items() for src in srcs}
    assert table == KAFKA_TRANSITIONS


@pytest.mark.parametrize("src,dst", list(itertools.product(S, S)),
                         ids=lambda s: s.kafka_name)
def test_every_pair_is_allowed_exactly_when_the_table_says(src: S, dst: S) -> None:
    """prepare_transition_to, for all 64 pairs: the table's pairs prepare, completing
    applies them; the others are assertion failures (a coordinator bug)."""
    md = _metadata(src)
    if (src, dst) in KAFKA_TRANSITIONS:
        transit = md.prepare_transition_to(dst, 7, 3, -1, 60_000, frozenset(), -1, 200)
        assert md.pending_state is dst and md.state is src       # nothing applied yet
        md.complete_transition(transit)
        assert md.state is dst and md.pending_state is None and md.txn_last_update_timestamp_ms == 200
    else:
        with pytest.raises(AssertionError, match="invalid transition"):
            md.prepare_transition_to(dst, 7, 3, -1, 60_000, frozenset(), -1, 200)
        assert md.pending_state is None


def test_a_second_transition_cannot_be_prepared_while_one_is_pending() -> None:
    md = _metadata(S.ONGOING)
    md.prepare_abort_or_commit(S.PREPARE_COMMIT, 200)
    with pytest.raises(AssertionError, match="pending"):
        md.prepare_abort_or_commit(S.PREPARE_ABORT, 201)
    md.abort_transition()
    assert md.state is S.ONGOING and md.pending_state is None


def test_add_partitions_starts_the_transaction_clock_only_when_one_starts() -> None:
    md = _metadata(S.COMPLETE_COMMIT)
    md.partitions = frozenset()
    transit = md.prepare_add_partitions(frozenset({TP0}), 500)
    md.complete_transition(transit)
    assert (md.state, md.txn_start_timestamp_ms) == (S.ONGOING, 500)
    transit = md.prepare_add_partitions(frozenset({TopicPartition("t", 1)}), 900)
    md.complete_transition(transit)
    assert md.txn_start_timestamp_ms == 500
    assert md.partitions == {TP0, TopicPartition("t", 1)}


def test_epoch_bump_and_kip360_retries() -> None:
    md = _metadata(S.EMPTY, epoch=3)
    transit = md.prepare_increment_producer_epoch(60_000, None, 10)
    assert transit is not None and (transit.producer_epoch, transit.last_producer_epoch) == (4, -1)
    md.abort_transition()
    # KIP-360: the producer's epoch is the current one: bump, remembering the old.
    transit = md.prepare_increment_producer_epoch(60_000, 3, 10)
    assert transit is not None
    md.complete_transition(transit)
    assert (md.producer_epoch, md.last_producer_epoch) == (4, 3)
    # A retry of that bump (the answer was lost): the same epoch, no second bump.
    transit = md.prepare_increment_producer_epoch(60_000, 3, 11)
    assert transit is not None and transit.producer_epoch == 4
    md.abort_transition()
    # Any other epoch: a fenced producer.
    assert md.prepare_increment_producer_epoch(60_000, 1, 12) is None
    assert md.pending_state is None


def test_fence_bumps_the_epoch_once_even_when_its_write_fails() -> None:
    md = _metadata(S.ONGOING, epoch=5)
    epoch = md.prepare_fence_producer_epoch()
    assert epoch == 6 and md.pending_state is S.PREPARE_EPOCH_FENCE
    md.prepare_abort_or_commit(S.PREPARE_ABORT, 300, fencing_epoch=epoch)
    md.abort_transition(fencing=True)              # the PrepareAbort write failed
    assert md.producer_epoch == 5 and md.has_failed_epoch_fence
    assert md.prepare_fence_producer_epoch() == 5  # the next attempt does not bump again
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, 301, fencing_epoch=5)
    md.complete_transition(transit)
    assert (md.state, md.producer_epoch, md.has_failed_epoch_fence) == (S.PREPARE_ABORT, 5, False)


def test_producer_id_rotation_when_the_epoch_is_exhausted() -> None:
    assert not is_epoch_exhausted(EPOCH_MAX - 2) and is_epoch_exhausted(EPOCH_MAX - 1)
    md = _metadata(S.COMPLETE_ABORT, epoch=EPOCH_MAX - 1)
    transit = md.prepare_producer_id_rotation(99, 60_000, 10, record_last_epoch=True)
    md.complete_transition(transit)
    assert (md.producer_id, md.previous_producer_id, md.producer_epoch,
            md.last_producer_epoch) == (99, 7, 0, EPOCH_MAX - 1)


def test_metadata_from_its_log_value() -> None:
    value = TransactionLogValue(7, 2, 1000, S.PREPARE_COMMIT.value, frozenset({TP0}), 50, 40)
    md = TransactionMetadata.from_log("txn", value, coordinator_epoch=4)
    assert (md.state, md.producer_id, md.producer_epoch, md.partitions, md.coordinator_epoch,
            md.last_producer_epoch) == (S.PREPARE_COMMIT, 7, 2, {TP0}, 4, NO_PRODUCER_EPOCH)
