"""A transactional producer's state machine, sans I/O (Kafka's TransactionManager).

Theory of operation
-------------------
The shell (clients/aio/producer.py) owns the sockets; this object decides. The user's
calls move the state; each response is handed to a ``handle_<api>_response`` method,
which updates the state and returns an ``Outcome`` telling the shell what to do next:

==============  ============================================================================
DONE            the request did what it should; go on
RETRY           send the same request again after a backoff (CONCURRENT_TRANSACTIONS,
                COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION, ...)
LOOKUP          the coordinator moved: FindCoordinator again, then retry
ABORTABLE       the transaction cannot commit (``last_error``); the user must abort it
FATAL           the producer cannot go on (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE, or an error
                Kafka's client does not expect for that request, retriable or not, as
                its handlers do); only ``close`` is left
==============  ============================================================================

States (Kafka's names)::

    UNINITIALIZED -init-> INITIALIZING -InitProducerId-> READY -begin-> IN_TRANSACTION
    IN_TRANSACTION -commit-> COMMITTING_TRANSACTION -EndTxn-> READY
    IN_TRANSACTION | ABORTABLE_ERROR -abort-> ABORTING_TRANSACTION -EndTxn-> READY
    IN_TRANSACTION | COMMITTING_TRANSACTION -abortable error-> ABORTABLE_ERROR
    any -fatal error-> FATAL_ERROR

Partitions: the first record for a partition in a transaction puts it in
``pending_partitions``; the shell's sender takes them all at once
(``take_partitions_to_add``: one AddPartitionsToTxn per sender step, as Java's sender
does) and sends nothing to a partition until ``can_send_to`` says it is in the
transaction. A transaction whose partitions and offsets were never added ends without an
EndTxn (the coordinator knows nothing of it).

The epoch: a transactional producer never bumps its epoch by itself. A batch that failed
for good leaves a sequence gap (``IdempotenceState.epoch_bump_required``): the
transaction becomes abortable, and once the abort's EndTxn succeeds the shell asks
InitProducerId with the current producer id and epoch (KIP-360), which bumps it.
"""
from __future__ import annotations

import enum

from clients._core.accumulator import IdempotenceState
from clients.protocol.errors import ERROR_INFO, ErrorCode
from clients.types import TopicPartition

__all__ = ["Outcome", "TransactionManager", "TransactionState"]

E = ErrorCode


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class Outcome(enum.Enum):
    DONE = "done"
    RETRY = "retry"
    LOOKUP = "lookup"
    ABORTABLE = "abortable"
    FATAL = "fatal"


S = TransactionState
_COORDINATOR_MOVED = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE}
_TRY_AGAIN = {E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}
_FENCED = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH}
_ALWAYS_FATAL = _FENCED | {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.INVALID_TXN_STATE}
# The coordinator no longer knows this producer id: the transaction is lost, not the producer.
_PRODUCER_ID_LOST = {E.UNKNOWN_PRODUCER_ID, E.INVALID_PRODUCER_ID_MAPPING,
                     E.TRANSACTION_ABORTABLE}


class TransactionManager:
    def __init__(self, transactional_id: str, transaction_timeout_ms: int,
                 idempotence: IdempotenceState) -> None:
        assert transactional_id, "a transactional id is not empty"
        assert idempotence.transactional
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.idempotence = idempotence
        self.state = S.UNINITIALIZED
        self.last_error: int = E.NONE       # the abortable or fatal error, a Kafka code
        self.last_error_context = ""        # which request met it
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.partitions_being_added: set[TopicPartition] = set()
        self.offsets_added = False          # AddOffsetsToTxn succeeded in this transaction
        self._bumping_epoch = False         # InitProducerId after an abort (KIP-360)

    # ------------------------------------------------------------ transitions

    def _transition_to(self, state: TransactionState) -> None:
        self.state = state

    def _fail(self, outcome: Outcome, code: int, context: str) -> Outcome:
        """Record an abortable or fatal error; an abortable one met while aborting (or
        before any transaction) is fatal, as Kafka's transition table has it."""
        if outcome is Outcome.ABORTABLE and self.state not in (
                S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            outcome = Outcome.FATAL
        if self.state is not S.FATAL_ERROR:
            self.last_error, self.last_error_context = code, context
        self._transition_to(S.ABORTABLE_ERROR if outcome is Outcome.ABORTABLE else S.FATAL_ERROR)
        return outcome

    @property
    def has_error(self) -> bool:
        return self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    @property
    def is_fatal(self) -> bool:
        return self.state is S.FATAL_ERROR

    # ------------------------------------------------------------ user calls
    # Each returns None when allowed, else why not (the shell raises IllegalStateError).

    def _refuse(self, what: str, allowed: tuple[TransactionState, ...]) -> str | None:
        if self.state in allowed:
            return None
        if self.state is S.FATAL_ERROR:
            return f"cannot {what}: the producer hit a fatal error ({self._error_name()})"
        if self.state is S.ABORTABLE_ERROR:
            return (f"cannot {what}: the transaction hit an abortable error "
                    f"({self._error_name()}); abort it first")
        return f"cannot {what} in state {self.state.value}"

    def _error_name(self) -> str:
        code = self.last_error
        name = ErrorCode(code).name if code in ERROR_INFO else f"code {code}"
        return f"{name} in {self.last_error_context}" if self.last_error_context else name

    def initialize(self) -> str | None:
        """init_transactions(); may be called again after it timed out."""
        why = self._refuse("initialize transactions", (S.UNINITIALIZED, S.INITIALIZING))
        if why is None:
            self._transition_to(S.INITIALIZING)
        return why

    def begin(self) -> str | None:
        why = self._refuse("begin a transaction", (S.READY,))
        if why is None:
            self._transition_to(S.IN_TRANSACTION)
        return why

    def check_send(self) -> str | None:
        """A send is allowed only inside a transaction (Kafka's maybeAddPartition)."""
        return self._refuse("send", (S.IN_TRANSACTION,))

    def check_send_offsets(self) -> str | None:
        return self._refuse("send offsets to the transaction", (S.IN_TRANSACTION,))

    def begin_commit(self) -> str | None:
        why = self._refuse("commit the transaction", (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION))
        if why is None:
            self._transition_to(S.COMMITTING_TRANSACTION)
        return why

    def begin_abort(self) -> str | None:
        why = self._refuse("abort the transaction",
                           (S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION))
        if self.state is S.ABORTABLE_ERROR:
            why = None
        if why is None:
            self._transition_to(S.ABORTING_TRANSACTION)
            # Partitions never added get no marker: their queued records are aborted.
            self.pending_partitions.clear()
        return why

    # ------------------------------------------------------------ partitions

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """Queue ``tp`` for AddPartitionsToTxn; True when it was not queued, being added
        or in the transaction yet (the sender then has a new partition to ask for)."""
        if (tp in self.partitions_in_transaction or tp in self.partitions_being_added
                or tp in self.pending_partitions):
            return False
        self.pending_partitions.add(tp)
        return True

    def can_send_to(self, tp: TopicPartition) -> bool:
        return tp in self.partitions_in_transaction

    def take_partitions_to_add(self) -> list[TopicPartition]:
        """The partitions for one AddPartitionsToTxn, or [] (one request at a time)."""
        if self.partitions_being_added or not self.pending_partitions \
                or self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            return []
        self.partitions_being_added = set(self.pending_partitions)
        self.pending_partitions.clear()
        return sorted(self.partitions_being_added)

    def handle_add_partitions_response(self, errors: dict[TopicPartition, int]) -> Outcome:
        """AddPartitionsToTxn's per-partition errors (a top-level v4+ error copied to each)."""
        being_added, self.partitions_being_added = self.partitions_being_added, set()
        for tp, code in errors.items():
            if code == E.NONE and tp in being_added:
                self.partitions_in_transaction.add(tp)
        failed = {code for code in errors.values() if code not in (E.NONE,
                                                                   E.OPERATION_NOT_ATTEMPTED)}
        retry_later = being_added - self.partitions_in_transaction
        if not failed:
            if not retry_later:
                return Outcome.DONE
            failed = {E.OPERATION_NOT_ATTEMPTED}
        code = min(failed)    # deterministic when several differ
        if failed & _ALWAYS_FATAL:
            return self._fail(Outcome.FATAL, min(failed & _ALWAYS_FATAL), "AddPartitionsToTxn")
        if failed & ({E.TOPIC_AUTHORIZATION_FAILED} | _PRODUCER_ID_LOST):
            return self._fail(Outcome.ABORTABLE, code, "AddPartitionsToTxn")
        if self.state is S.ABORTING_TRANSACTION:
            return Outcome.DONE          # the abort no longer needs them
        self.pending_partitions |= retry_later
        if failed & _COORDINATOR_MOVED:
            return Outcome.LOOKUP
        if failed <= (_TRY_AGAIN | {E.UNKNOWN_TOPIC_OR_PARTITION, E.OPERATION_NOT_ATTEMPTED}):
            return Outcome.RETRY
        return self._fail(Outcome.FATAL, code, "AddPartitionsToTxn")

    def on_batch_failed(self, code: int) -> Outcome:
        """A produce batch of the transaction failed for good: the transaction cannot
        commit (abortable) unless the producer itself was fenced (fatal)."""
        if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            return Outcome.DONE     # aborting: the batch is aborted anyway
        if code in _ALWAYS_FATAL:
            return self._fail(Outcome.FATAL, code, "Produce")
        return self._fail(Outcome.ABORTABLE, code, "Produce")

    # ------------------------------------------------------------ InitProducerId

    def init_producer_id_fields(self) -> tuple[int, int]:
        """(producer id, epoch) for InitProducerId: -1/-1 at first, the current ones to
        bump the epoch after an abort that left a sequence gap (KIP-360)."""
        idem = self.idempotence
        if self._bumping_epoch and idem.has_producer_id:
            return idem.producer_id, idem.producer_epoch
        return -1, -1

    @property
    def needs_epoch_bump(self) -> bool:
        return self.idempotence.epoch_bump_required

    def begin_epoch_bump(self) -> None:
        assert self.state is S.READY and self.needs_epoch_bump
        self._bumping_epoch = True
        self._transition_to(S.INITIALIZING)

    def handle_init_producer_id_response(self, code: int, producer_id: int,
                                         producer_epoch: int) -> Outcome:
        if code == E.NONE:
            self.idempotence.set_producer_id(producer_id, producer_epoch)
            self._bumping_epoch = False
            self._transition_to(S.READY)
            return Outcome.DONE
        if code in _COORDINATOR_MOVED:
            return Outcome.LOOKUP
        if code in _TRY_AGAIN:
            return Outcome.RETRY
        return self._fail(Outcome.FATAL, code, "InitProducerId")

    # ------------------------------------------------------------ offsets

    def handle_add_offsets_response(self, code: int) -> Outcome:
        if code == E.NONE:
            self.offsets_added = True
            return Outcome.DONE
        if code in _COORDINATOR_MOVED:
            return Outcome.LOOKUP
        if code in _TRY_AGAIN:
            return Outcome.RETRY
        if code in _ALWAYS_FATAL:
            return self._fail(Outcome.FATAL, code, "AddOffsetsToTxn")
        if code == E.GROUP_AUTHORIZATION_FAILED or code in _PRODUCER_ID_LOST:
            return self._fail(Outcome.ABORTABLE, code, "AddOffsetsToTxn")
        return self._fail(Outcome.FATAL, code, "AddOffsetsToTxn")

    def handle_txn_offset_commit_response(self, errors: dict[TopicPartition, int]) -> Outcome:
        """TxnOffsetCommit's per-partition errors. LOOKUP means the *group* coordinator
        moved; RETRY resends the partitions that failed."""
        failed = {code for code in errors.values() if code != E.NONE}
        if not failed:
            return Outcome.DONE
        code = min(failed)
        if failed & _ALWAYS_FATAL:
            return self._fail(Outcome.FATAL, min(failed & _ALWAYS_FATAL), "TxnOffsetCommit")
        if failed & {E.GROUP_AUTHORIZATION_FAILED, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
                     E.FENCED_INSTANCE_ID, E.TRANSACTION_ABORTABLE}:
            # The consumer lost its partitions (KIP-447): another member may own them now.
            return self._fail(Outcome.ABORTABLE, code, "TxnOffsetCommit")
        if failed & (_COORDINATOR_MOVED | {E.REQUEST_TIMED_OUT}):
            return Outcome.LOOKUP
        if failed <= {E.COORDINATOR_LOAD_IN_PROGRESS, E.UNKNOWN_TOPIC_OR_PARTITION,
                      E.CONCURRENT_TRANSACTIONS}:
            return Outcome.RETRY
        return self._fail(Outcome.FATAL, code, "TxnOffsetCommit")

    # ------------------------------------------------------------ EndTxn

    @property
    def needs_end_txn(self) -> bool:
        """Whether the coordinator knows of this transaction (so it needs EndTxn)."""
        return bool(self.partitions_in_transaction) or self.offsets_added

    @property
    def committing(self) -> bool:
        assert self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)
        return self.state is S.COMMITTING_TRANSACTION

    def handle_end_txn_response(self, code: int) -> Outcome:
        if code == E.NONE:
            self.complete_transaction()
            return Outcome.DONE
        if code in _COORDINATOR_MOVED:
            return Outcome.LOOKUP
        if code in _TRY_AGAIN:
            return Outcome.RETRY
        if code in _ALWAYS_FATAL:
            return self._fail(Outcome.FATAL, code, "EndTxn")
        if code in _PRODUCER_ID_LOST:
            return self._fail(Outcome.ABORTABLE, code, "EndTxn")
        return self._fail(Outcome.FATAL, code, "EndTxn")

    def complete_transaction(self) -> None:
        """The transaction ended (EndTxn succeeded, or nothing reached the coordinator)."""
        assert self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION), self.state
        self.partitions_in_transaction.clear()
        self.pending_partitions.clear()
        self.offsets_added = False
        self.last_error, self.last_error_context = E.NONE, ""
        self._transition_to(S.READY)
