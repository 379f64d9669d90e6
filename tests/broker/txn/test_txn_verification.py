"""KIP-890 leader-side verification guards (pure), and the Produce and TxnOffsetCommit
errors a failed verification becomes."""
from __future__ import annotations

import pytest

from broker.txn.driver import produce_verification_error, txn_offset_commit_verification_error
from broker.txn.verification import VerificationState
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

E = ErrorCode
TP = TopicPartition("t", 0)


def test_verified_until_the_producers_marker() -> None:
    v = VerificationState()
    assert not v.is_verified(TP, 7, 0)
    guard = v.start(TP, 7, 0)
    assert not v.is_verified(TP, 7, 0)              # asked, not answered
    assert v.complete(TP, 7, guard, ok=True)
    assert v.is_verified(TP, 7, 0) and not v.is_verified(TP, 7, 1)
    assert not v.is_verified(TopicPartition("t", 1), 7, 0)
    v.on_marker(TP, 8)                               # another producer's marker
    assert v.is_verified(TP, 7, 0)
    v.on_marker(TP, 7)
    assert not v.is_verified(TP, 7, 0) and len(v) == 0


def test_a_marker_during_the_question_refuses_the_append() -> None:
    """The coordinator said yes, but the transaction ended (its marker appended here)
    before the answer arrived: the batch must not be appended after the marker."""
    v = VerificationState()
    guard = v.start(TP, 7, 0)
    v.on_marker(TP, 7)
    assert not v.complete(TP, 7, guard, ok=True)
    assert not v.is_verified(TP, 7, 0)


def test_leadership_change_and_refusals_drop_the_entry() -> None:
    v = VerificationState()
    guard = v.start(TP, 7, 0)
    v.on_leadership(TP)
    assert not v.complete(TP, 7, guard, ok=True)
    guard = v.start(TP, 7, 0)
    assert not v.complete(TP, 7, guard, ok=False)
    assert len(v) == 0


def test_concurrent_questions_share_a_guard_and_a_new_epoch_replaces_it() -> None:
    v = VerificationState()
    first = v.start(TP, 7, 0)
    assert v.start(TP, 7, 0) == first
    assert v.complete(TP, 7, first, ok=True) and v.complete(TP, 7, first, ok=True)
    newer = v.start(TP, 7, 1)                       # bumped epoch: asked again
    assert newer != first and not v.is_verified(TP, 7, 1)
    assert not v.complete(TP, 7, first, ok=True)


def test_produce_errors_are_kafkas() -> None:
    # ReplicaManager: retriable coordinator trouble -> NOT_ENOUGH_REPLICAS;
    # AddPartitionsToTxnManager: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH and, for
    # Produce v10 and older, TRANSACTION_ABORTABLE -> INVALID_TXN_STATE.
    for code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                 E.COORDINATOR_LOAD_IN_PROGRESS, E.NETWORK_EXCEPTION):
        assert produce_verification_error(code, 9) == E.NOT_ENOUGH_REPLICAS
    assert produce_verification_error(E.PRODUCER_FENCED, 9) == E.INVALID_PRODUCER_EPOCH
    assert produce_verification_error(E.TRANSACTION_ABORTABLE, 10) == E.INVALID_TXN_STATE
    assert produce_verification_error(E.TRANSACTION_ABORTABLE, 11) == E.TRANSACTION_ABORTABLE
    assert produce_verification_error(E.INVALID_PRODUCER_ID_MAPPING, 9) == E.INVALID_PRODUCER_ID_MAPPING


# (coordinator's answer, TxnOffsetCommit version, what the committer hears): Kafka's
# AddPartitionsToTxnManager then GroupMetadataManager.maybeConvertOffsetCommitError.
OFFSET_COMMIT_ROWS = [
    (E.TRANSACTION_ABORTABLE, 3, E.INVALID_TXN_STATE),     # not added: older clients
    (E.TRANSACTION_ABORTABLE, 4, E.TRANSACTION_ABORTABLE),
    (E.PRODUCER_FENCED, 3, E.INVALID_PRODUCER_EPOCH),
    (E.NETWORK_EXCEPTION, 3, E.COORDINATOR_LOAD_IN_PROGRESS),
    (E.NOT_ENOUGH_REPLICAS, 4, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, 4, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, 4, E.NOT_COORDINATOR),
    (E.CONCURRENT_TRANSACTIONS, 4, E.CONCURRENT_TRANSACTIONS),
    (E.COORDINATOR_NOT_AVAILABLE, 2, E.COORDINATOR_NOT_AVAILABLE),
    (E.INVALID_PRODUCER_ID_MAPPING, 4, E.INVALID_PRODUCER_ID_MAPPING),
    (E.INVALID_TXN_STATE, 4, E.INVALID_TXN_STATE),
]


@pytest.mark.parametrize("code,version,expected", OFFSET_COMMIT_ROWS)
def test_txn_offset_commit_errors_are_kafkas(code: int, version: int, expected: int) -> None:
    assert txn_offset_commit_verification_error(code, version) == expected


TP1 = TopicPartition("t", 1)


def test_asked_ahead_a_yes_verifies_and_a_no_is_forgotten() -> None:
    v = VerificationState()
    guard = v.start(TP, 7, 0)
    ahead = v.start_ahead(TP1, 7, 0)
    assert ahead is not None and v.start_ahead(TP, 7, 0) is None     # TP is being asked
    assert v.complete(TP, 7, guard, ok=True)
    v.complete_ahead(TP1, 7, ahead, ok=True)
    assert v.is_verified(TP1, 7, 0)                  # its first batch needs no question
    assert v.start_ahead(TP1, 7, 0) is None           # already verified: not asked again
    v.on_marker(TP1, 7)
    no = v.start_ahead(TP1, 7, 0)
    assert no is not None
    v.complete_ahead(TP1, 7, no, ok=False)            # not in the transaction
    assert not v.is_verified(TP1, 7, 0) and len(v) == 1


def test_a_marker_during_an_ahead_question_voids_its_yes() -> None:
    v = VerificationState()
    ahead = v.start_ahead(TP1, 7, 0)
    assert ahead is not None
    v.on_marker(TP1, 7)
    v.complete_ahead(TP1, 7, ahead, ok=True)
    assert not v.is_verified(TP1, 7, 0) and len(v) == 0


def test_an_ahead_no_leaves_a_batchs_shared_question_alone() -> None:
    """A batch for TP1 came while TP1 was being asked ahead (not yet in the transaction
    then) and shares that guard; its own question, asked after the partition was added,
    says yes. The ahead no, answered first, must not make that yes a refusal."""
    v = VerificationState()
    ahead = v.start_ahead(TP1, 7, 0)
    assert ahead is not None
    shared = v.start(TP1, 7, 0)
    assert shared == ahead
    v.complete_ahead(TP1, 7, ahead, ok=False)
    assert v.complete(TP1, 7, shared, ok=True) and v.is_verified(TP1, 7, 0)


def test_asking_ahead_leaves_another_epochs_entry_alone() -> None:
    v = VerificationState()
    assert v.complete(TP1, 7, v.start(TP1, 7, 0), ok=True)
    assert v.start_ahead(TP1, 7, 1) is None           # the batch's own question decides
    assert v.is_verified(TP1, 7, 0) and not v.is_verified(TP1, 7, 1)
