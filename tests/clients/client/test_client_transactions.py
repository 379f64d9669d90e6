"""The transactional producer's state machine (clients/_core/transactions.py), pure."""
from __future__ import annotations

import pytest

from clients._core.accumulator import IdempotenceState, ProducerBatch, RecordAccumulator
from clients._core.transactions import Outcome, TransactionManager, TransactionState
from clients.protocol.errors import ErrorCode
from clients.records import decode_batch
from clients.types import TopicPartition

E = ErrorCode
S = TransactionState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def ready_manager() -> TransactionManager:
    txn = TransactionManager("tx", 60_000, IdempotenceState(transactional=True))
    assert txn.initialize() is None and txn.state is S.INITIALIZING
    assert txn.init_producer_id_fields() == (-1, -1)
    assert txn.handle_init_producer_id_response(E.NONE, 42, 3) is Outcome.DONE
    assert txn.state is S.READY and txn.idempotence.producer_id == 42
    return txn


def in_transaction() -> TransactionManager:
    txn = ready_manager()
    assert txn.begin() is None
    return txn


def test_send_is_refused_outside_a_transaction() -> None:
    txn = ready_manager()
    assert "READY" in (txn.check_send() or "")
    assert txn.begin() is None
    assert txn.check_send() is None
    assert txn.begin() is not None          # no nested transactions


def test_partitions_are_added_once_in_one_request_before_any_send() -> None:
    txn = in_transaction()
    assert txn.maybe_add_partition(TP0) is True     # new: the sender is woken for it
    assert txn.maybe_add_partition(TP1) is True
    assert txn.maybe_add_partition(TP0) is False    # queued already: no second wake-up
    assert not txn.can_send_to(TP0)
    assert txn.take_partitions_to_add() == [TP0, TP1]
    assert txn.maybe_add_partition(TP0) is False    # being added: not asked again
    assert txn.take_partitions_to_add() == []  # one request at a time
    assert txn.handle_add_partitions_response({TP0: E.NONE, TP1: E.NONE}) is Outcome.DONE
    assert txn.can_send_to(TP0) and txn.can_send_to(TP1)
    assert txn.maybe_add_partition(TP0) is False
    assert txn.take_partitions_to_add() == []
    assert txn.needs_end_txn


@pytest.mark.parametrize("code,outcome", [
    (E.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
    (E.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
    (E.UNKNOWN_TOPIC_OR_PARTITION, Outcome.RETRY),
    (E.NOT_COORDINATOR, Outcome.LOOKUP),
    (E.COORDINATOR_NOT_AVAILABLE, Outcome.LOOKUP),
])
def test_add_partitions_retriable_errors_put_the_partitions_back(code: int, outcome: Outcome) -> None:
    txn = in_transaction()
    txn.maybe_add_partition(TP0)
    txn.maybe_add_partition(TP1)
    txn.take_partitions_to_add()
    assert txn.handle_add_partitions_response({TP0: code, TP1: E.OPERATION_NOT_ATTEMPTED}) is outcome
    assert txn.state is S.IN_TRANSACTION
    assert txn.take_partitions_to_add() == [TP0, TP1]


@pytest.mark.parametrize("code,state", [
    (E.PRODUCER_FENCED, S.FATAL_ERROR),
    (E.INVALID_PRODUCER_EPOCH, S.FATAL_ERROR),
    (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, S.FATAL_ERROR),
    (E.INVALID_TXN_STATE, S.FATAL_ERROR),
    (E.TOPIC_AUTHORIZATION_FAILED, S.ABORTABLE_ERROR),
    (E.UNKNOWN_PRODUCER_ID, S.ABORTABLE_ERROR),
    (E.CORRUPT_MESSAGE, S.FATAL_ERROR),     # unexpected: Kafka's client gives up too
])
def test_add_partitions_errors_that_end_the_transaction_or_the_producer(code: int,
                                                                       state: TransactionState) -> None:
    txn = in_transaction()
    txn.maybe_add_partition(TP0)
    txn.take_partitions_to_add()
    outcome = txn.handle_add_partitions_response({TP0: code})
    assert outcome is (Outcome.FATAL if state is S.FATAL_ERROR else Outcome.ABORTABLE)
    assert txn.state is state and txn.last_error == code
    assert txn.check_send() is not None
    assert txn.begin_commit() is not None
    assert (txn.begin_abort() is None) == (state is S.ABORTABLE_ERROR)


def test_a_failed_batch_makes_the_transaction_abortable_and_the_abort_bumps_the_epoch() -> None:
    txn = in_transaction()
    txn.maybe_add_partition(TP0)
    txn.take_partitions_to_add()
    txn.handle_add_partitions_response({TP0: E.NONE})
    txn.idempotence.epoch_bump_required = True     # what on_failed_for_good leaves
    assert txn.on_batch_failed(E.OUT_OF_ORDER_SEQUENCE_NUMBER) is Outcome.ABORTABLE
    assert txn.begin_commit() is not None
    assert txn.begin_abort() is None and txn.state is S.ABORTING_TRANSACTION
    assert not txn.committing
    assert txn.handle_end_txn_response(E.NONE) is Outcome.DONE
    assert txn.state is S.READY and txn.needs_epoch_bump
    txn.begin_epoch_bump()
    assert txn.init_producer_id_fields() == (42, 3)   # KIP-360: bump this producer's epoch
    assert txn.handle_init_producer_id_response(E.NONE, 42, 4) is Outcome.DONE
    assert txn.state is S.READY and not txn.needs_epoch_bump
    assert txn.init_producer_id_fields() == (-1, -1)


def test_a_fenced_batch_is_fatal() -> None:
    txn = in_transaction()
    assert txn.on_batch_failed(E.PRODUCER_FENCED) is Outcome.FATAL
    assert txn.is_fatal and txn.begin_abort() is not None


def test_commit_and_end_txn_outcomes() -> None:
    txn = in_transaction()
    txn.maybe_add_partition(TP0)
    txn.take_partitions_to_add()
    txn.handle_add_partitions_response({TP0: E.NONE})
    assert txn.begin_commit() is None and txn.committing
    assert txn.begin_commit() is None         # a commit that timed out may be retried
    assert txn.handle_end_txn_response(E.CONCURRENT_TRANSACTIONS) is Outcome.RETRY
    assert txn.handle_end_txn_response(E.NOT_COORDINATOR) is Outcome.LOOKUP
    assert txn.handle_end_txn_response(E.NONE) is Outcome.DONE
    assert txn.state is S.READY and not txn.needs_end_txn and not txn.can_send_to(TP0)


def test_end_txn_fenced_is_fatal() -> None:
    txn = in_transaction()
    txn.begin_commit()
    assert txn.handle_end_txn_response(E.PRODUCER_FENCED) is Outcome.FATAL
    assert txn.is_fatal


def test_a_transaction_with_nothing_added_needs_no_end_txn() -> None:
    txn = in_transaction()
    txn.maybe_add_partition(TP0)          # queued, never added: aborted locally
    assert txn.begin_abort() is None
    assert not txn.needs_end_txn and txn.take_partitions_to_add() == []
    txn.complete_transaction()
    assert txn.state is S.READY


@pytest.mark.parametrize("code,outcome,state", [
    (E.NONE, Outcome.DONE, S.IN_TRANSACTION),
    (E.CONCURRENT_TRANSACTIONS, Outcome.RETRY, S.IN_TRANSACTION),
    (E.COORDINATOR_NOT_AVAILABLE, Outcome.LOOKUP, S.IN_TRANSACTION),
    (E.GROUP_AUTHORIZATION_FAILED, Outcome.ABORTABLE, S.ABORTABLE_ERROR),
    (E.PRODUCER_FENCED, Outcome.FATAL, S.FATAL_ERROR),
])
def test_add_offsets_outcomes(code: int, outcome: Outcome, state: TransactionState) -> None:
    txn = in_transaction()
    assert txn.handle_add_offsets_response(code) is outcome
    assert txn.state is state
    assert txn.needs_end_txn == (code == E.NONE)


@pytest.mark.parametrize("code,outcome,state", [
    (E.NONE, Outcome.DONE, S.IN_TRANSACTION),
    (E.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY, S.IN_TRANSACTION),
    (E.NOT_COORDINATOR, Outcome.LOOKUP, S.IN_TRANSACTION),
    (E.REQUEST_TIMED_OUT, Outcome.LOOKUP, S.IN_TRANSACTION),
    (E.ILLEGAL_GENERATION, Outcome.ABORTABLE, S.ABORTABLE_ERROR),
    (E.UNKNOWN_MEMBER_ID, Outcome.ABORTABLE, S.ABORTABLE_ERROR),
    (E.FENCED_INSTANCE_ID, Outcome.ABORTABLE, S.ABORTABLE_ERROR),
    (E.INVALID_PRODUCER_EPOCH, Outcome.FATAL, S.FATAL_ERROR),
])
def test_txn_offset_commit_outcomes(code: int, outcome: Outcome, state: TransactionState) -> None:
    txn = in_transaction()
    txn.handle_add_offsets_response(E.NONE)
    assert txn.handle_txn_offset_commit_response({TP0: E.NONE, TP1: code}) is outcome
    assert txn.state is state


def test_init_producer_id_outcomes() -> None:
    txn = TransactionManager("tx", 60_000, IdempotenceState(transactional=True))
    assert txn.begin() is not None           # not initialized
    txn.initialize()
    assert txn.handle_init_producer_id_response(E.CONCURRENT_TRANSACTIONS, -1, -1) is Outcome.RETRY
    assert txn.handle_init_producer_id_response(E.NOT_COORDINATOR, -1, -1) is Outcome.LOOKUP
    assert txn.initialize() is None           # after a timeout, init again
    assert txn.handle_init_producer_id_response(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                -1, -1) is Outcome.FATAL
    assert txn.is_fatal


def test_transactional_batches_carry_the_bit_and_wait_for_their_partition() -> None:
    idem = IdempotenceState(transactional=True)
    idem.set_producer_id(42, 3)
    txn = TransactionManager("tx", 60_000, idem)
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, buffer_memory=1 << 20,
                            delivery_timeout_ms=120_000, retry_backoff_ms=100,
                            retry_backoff_max_ms=1000, idempotence=idem)
    acc.may_send_to = txn.can_send_to
    acc.append(TP0, 1, b"k", b"v", (), 30, 0)
    assert acc.drain(1, [TP0], 1 << 20, 10) == []        # not in the transaction yet
    txn.state = S.IN_TRANSACTION
    txn.maybe_add_partition(TP0)
    txn.take_partitions_to_add()
    txn.handle_add_partitions_response({TP0: E.NONE})
    batch: ProducerBatch
    batch, = acc.drain(1, [TP0], 1 << 20, 10)
    header = decode_batch(bytes(batch.payload or b"")).header
    assert (header.is_transactional, header.producer_id, header.producer_epoch,
            header.base_sequence) == (True, 42, 3, 0)
