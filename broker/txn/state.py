"""A transactional id's state machine: ``TransactionState``, its transition table, and
``TransactionMetadata`` with its pending transition (pure).

Theory of operation
-------------------
Each transactional id the coordinator knows has one ``TransactionMetadata``: the producer
id and epoch it handed out, the transaction timeout, the state, and the partitions of the
ongoing transaction. States (Kafka's ``TransactionState``; the id is what the log holds):

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit
      ▲                                   │ ▲  │                         │ markers written
      │ InitProducerId (epoch bump)       │ └──┘ more partitions         ▼
      │                                   ├──EndTxn(abort)──▶ PrepareAbort ──▶ CompleteAbort
      │                                   └─fence (InitProducerId,  ▲      markers written
      │                                     timeout)─▶ PrepareEpochFence
      └──────────────── CompleteCommit / CompleteAbort ◀─ (a new transaction starts from
                                                           here, or InitProducerId)
    Empty, CompleteCommit, CompleteAbort ──transactional.id.expiration.ms──▶ Dead (tombstone)

``VALID_PREVIOUS_STATES`` is that picture as data (Kafka's ``validPreviousStates``);
``TransactionMetadata.prepare_transition_to`` refuses anything else with an assertion:
a coordinator asking for a transition the table lacks is a bug, not a client error (the
coordinator answers clients' mistakes before it gets here).

**Pending transitions.** The coordinator never changes a metadata in place when a client
asks for something: it *prepares* a ``TxnTransit`` (the state the record will hold), sets
``pending_state`` and appends the record. Only the acknowledged append applies the
transit (``complete_transition``: STYLE.md's "only replay changes state"); a failed one
drops it (``abort_transition``). While a transition is pending every other request for the
id gets CONCURRENT_TRANSACTIONS, which clients retry.

``PrepareEpochFence`` is the one state never written: it marks, in memory, that the
coordinator is bumping the epoch to fence a producer (InitProducerId while a transaction
is ongoing, or the transaction timed out). The abort that follows writes PrepareAbort with
the bumped epoch; if that write fails, ``has_failed_epoch_fence`` keeps the next attempt
from bumping the epoch a second time (the bumped epoch never reached a client).

Rule source: apache/kafka ``core/.../coordinator/transaction/TransactionMetadata.scala``.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from clients.types import TopicPartition

from broker.txn.records import TransactionLogValue

__all__ = [
    "EPOCH_MAX", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TransactionMetadata",
    "TransactionState", "TxnTransit", "VALID_PREVIOUS_STATES", "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
EPOCH_MAX = 0x7FFF            # Short.MaxValue
NO_START_TIMESTAMP = -1


class TransactionState(enum.Enum):
    """Kafka's states; ``value`` is the id in ``TransactionLogValue.TransactionStatus``."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions carry ("PrepareCommit")."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may be removed."""
        return self in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

    @classmethod
    def from_kafka_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)


S = TransactionState
_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit",
          S.PREPARE_ABORT: "PrepareAbort", S.COMPLETE_COMMIT: "CompleteCommit",
          S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
          S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {n: s for s, n in _NAMES.items()}

# The transition table: state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
assert set(VALID_PREVIOUS_STATES) == set(TransactionState)


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: one epoch is kept for fencing (KIP-360)."""
    return producer_epoch >= EPOCH_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transactional id moves to once its record is acknowledged."""
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int

    def then_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> "TxnTransit":
        """The Ongoing that AddPartitionsToTxn at ``now_ms`` makes of this Complete* state
        (what ``prepare_add_partitions`` gives once this transit is completed)."""
        assert self.state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
        return dataclasses.replace(self, state=TransactionState.ONGOING, partitions=added,
                                   txn_start_timestamp_ms=now_ms,
                                   txn_last_update_timestamp_ms=now_ms)

    def log_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms, state_id=self.state.value,
            partitions=self.partitions, last_update_timestamp_ms=self.txn_last_update_timestamp_ms,
            start_timestamp_ms=self.txn_start_timestamp_ms)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    # The epoch before the last bump, for KIP-360 retries of InitProducerId; volatile
    # (value version 0 does not hold it), as in Kafka.
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    # Invariant: pending_state is None or in VALID_PREVIOUS_STATES's row for it from state.
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False
    # The coordinator epoch the metadata was loaded or created under (the leader epoch of
    # its __transaction_state partition); markers carry it.
    coordinator_epoch: int = 0
    _pending: TxnTransit | None = field(default=None, repr=False)

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue,
                 coordinator_epoch: int) -> "TransactionMetadata":
        state = TransactionState(value.state_id)
        return cls(transactional_id, value.producer_id, value.previous_producer_id,
                   value.producer_epoch, NO_PRODUCER_EPOCH, value.transaction_timeout_ms, state,
                   value.partitions, value.start_timestamp_ms, value.last_update_timestamp_ms,
                   coordinator_epoch=coordinator_epoch)

    # ------------------------------------------------------------------ queries

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # ------------------------------------------------------------------ prepare

    def prepare_transition_to(self, state: TransactionState, producer_id: int,
                              producer_epoch: int, last_producer_epoch: int, txn_timeout_ms: int,
                              partitions: frozenset[TopicPartition], txn_start_timestamp_ms: int,
                              now_ms: int, previous_producer_id: int | None = None) -> TxnTransit:
        assert self.pending_state is None, \
            f"{self.transactional_id}: {self.pending_state} pending, cannot prepare {state}"
        assert self.state in VALID_PREVIOUS_STATES[state], \
            f"{self.transactional_id}: invalid transition {self.state} -> {state}"
        assert 0 <= producer_epoch <= EPOCH_MAX
        transit = TxnTransit(
            producer_id, self.previous_producer_id if previous_producer_id is None
            else previous_producer_id, producer_epoch, last_producer_epoch, txn_timeout_ms, state,
            partitions, txn_start_timestamp_ms, now_ms)
        self.pending_state = state
        self._pending = transit
        return transit

    def prepare_no_transition(self) -> TxnTransit:
        """The current state as a transit (a KIP-360 retry answered as before)."""
        return TxnTransit(self.producer_id, self.previous_producer_id, self.producer_epoch,
                          self.last_producer_epoch, self.txn_timeout_ms, self.state,
                          self.partitions, self.txn_start_timestamp_ms,
                          self.txn_last_update_timestamp_ms)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit | None:
        """InitProducerId on a completed or empty transaction: the next epoch, or None when
        the expected epoch (KIP-360) shows the caller is a fenced producer."""
        assert not self.producer_epoch_exhausted
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer was lost: the same epoch again.
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return None
        return self.prepare_transition_to(S.EMPTY, self.producer_id, epochs[0], epochs[1],
                                           txn_timeout_ms, frozenset(), NO_START_TIMESTAMP,
                                           now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        return self.prepare_transition_to(
            S.EMPTY, new_producer_id, 0, self.producer_epoch if record_last_epoch
            else NO_PRODUCER_EPOCH, txn_timeout_ms, frozenset(), NO_START_TIMESTAMP, now_ms,
            previous_producer_id=self.producer_id)

    def prepare_fence_producer_epoch(self) -> int:
        """Mark, in memory, that the epoch is being bumped to fence the current producer;
        returns the fencing epoch, which the abort that follows writes."""
        assert self.producer_epoch < EPOCH_MAX
        assert self.state is S.ONGOING and self.pending_state is None
        self.pending_state = S.PREPARE_EPOCH_FENCE
        return self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) \
            else self.txn_start_timestamp_ms
        return self.prepare_transition_to(S.ONGOING, self.producer_id, self.producer_epoch,
                                          self.last_producer_epoch, self.txn_timeout_ms,
                                          self.partitions | added, start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int,
                                fencing_epoch: int | None = None) -> TxnTransit:
        """PrepareCommit or PrepareAbort; ``fencing_epoch`` when the abort fences (the
        PrepareEpochFence mark is replaced by the PrepareAbort it led to)."""
        assert state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if fencing_epoch is not None:
            assert state is S.PREPARE_ABORT and self.pending_state is S.PREPARE_EPOCH_FENCE
            self.pending_state = None
            epoch, last = fencing_epoch, NO_PRODUCER_EPOCH
        return self.prepare_transition_to(state, self.producer_id, epoch, last,
                                          self.txn_timeout_ms, self.partitions,
                                          self.txn_start_timestamp_ms, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        assert self.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        return self.prepare_transition_to(state, self.producer_id, self.producer_epoch,
                                          self.last_producer_epoch, self.txn_timeout_ms,
                                          frozenset(), self.txn_start_timestamp_ms, now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        return self.prepare_transition_to(S.DEAD, self.producer_id, self.producer_epoch,
                                          self.last_producer_epoch, self.txn_timeout_ms,
                                          frozenset(), self.txn_start_timestamp_ms, now_ms)

    # ------------------------------------------------------------------ complete

    def complete_transition(self, transit: TxnTransit) -> None:
        """The transit's record was acknowledged: apply it (the replay of that record)."""
        assert self._pending == transit, f"{self.transactional_id}: completing {transit}, " \
            f"pending {self._pending}"
        assert self.state in VALID_PREVIOUS_STATES[transit.state]
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = transit.partitions
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.pending_state = None
        self._pending = None
        self.has_failed_epoch_fence = False

    def abort_transition(self, fencing: bool = False) -> None:
        """The transit's record was not written: nothing changes but the pending mark."""
        self.pending_state = None
        self._pending = None
        if fencing:
            self.has_failed_epoch_fence = True
