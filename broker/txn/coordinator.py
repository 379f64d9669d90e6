"""The transaction coordinator (KIP-98), sans I/O.

Theory of operation
-------------------
One ``TransactionCoordinator`` per broker serves every transactional id whose
``__transaction_state`` partition this broker leads (``partition_for_transactional_id``).
It is pure, shaped like the group coordinator: the shell feeds it requests (under a
``token``), append results, allocated producer ids, marker outcomes and the time, and
carries out what it returns.

**Inputs.** ``handle_init_producer_id`` (with a transactional id), ``handle_add_partitions_
to_txn`` (v0-3, the client's form; v4+, the brokers' batched form, ``verify_only`` among
them), ``handle_add_offsets_to_txn``, ``handle_end_txn``, ``handle_describe_transactions``,
``handle_list_transactions``; ``on_append_result``; ``on_producer_id``; ``on_markers_written``;
``poll``; ``begin_load`` / ``complete_load`` / ``unload_partition`` follow the leadership of
``__transaction_state`` partitions; ``set_topics`` says which topics exist.

**Outputs** are effects, in order:

- ``Completion(token, response)``: the answer to the request ``token``, once.
- ``Append(append_id, partition, records, timestamp_ms)``: write the records to
  ``__transaction_state-<partition>`` with acks=all, then ``on_append_result``. Successes
  of one partition are reported in append order (the shell chains them, as the group
  coordinator's does), so metadata follows the log.
- ``AllocateProducerId(request_id)``: get a fresh producer id from the controller's blocks
  (``broker/producer_ids.py``) and report it with ``on_producer_id``.
- ``SendMarkers``: write a commit or abort marker for the producer to every partition of the
  transaction (WriteTxnMarkers to each partition's leader, retried until every partition
  answers or the coordinator epoch moves on), then ``on_markers_written``.

**A transaction, end to end.** InitProducerId gives the id a producer id and bumps its
epoch (fencing older producers; an ongoing transaction is aborted first, the caller retries
on CONCURRENT_TRANSACTIONS). AddPartitionsToTxn / AddOffsetsToTxn write Ongoing with the
partitions. EndTxn writes PrepareCommit or PrepareAbort and answers the client once that
record is acknowledged: from then on the outcome is decided and durable. The markers go
out; once every partition has its marker, CompleteCommit / CompleteAbort is written with no
partitions. The next transaction's AddPartitionsToTxn / AddOffsetsToTxn, arriving while
this goes on (or while another write of its id is in flight), is *held* rather than
answered CONCURRENT_TRANSACTIONS (Kafka's answer; the client then backs off, librdkafka for
``retry.backoff.ms``, the delay KAFKA-5482 describes): it is tried again when the write
ends, and when it is first in line as the Complete* record is written, its Ongoing record
goes in the same batch (one replicated write, both applied in order on success). A held
request answers CONCURRENT_TRANSACTIONS after ``add_partitions_hold_ms``, NOT_COORDINATOR
if the partition is unloaded. A new coordinator that loads a partition holding Prepare* states sends their
markers again (the ``SIGKILL the coordinator mid-commit`` case), so a decided outcome
reaches every partition.

**Timers.** Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing
transaction older than its timeout is aborted with an epoch bump (the producer is fenced);
every ``transaction.remove.expired.transaction.cleanup.interval.ms`` a transactional id idle
(Empty or Complete*) for ``transactional.id.expiration.ms`` is removed with a tombstone; a
Complete* write that failed is retried after ``COMPLETE_RETRY_BACKOFF_MS``.

Rule source: apache/kafka ``core/.../coordinator/transaction/TransactionCoordinator.scala``,
``TransactionStateManager.scala``; KafkaApis for the request shapes. Not done:
transaction.version 2 (KIP-890 part 2: an epoch bump per transaction, EndTxn v5 answering
the new epoch, AddPartitionsToTxn implied by Produce v12); every version is served with
transaction.version 1 semantics. ``poll`` scans every loaded id (linear).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Union

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

from broker.group.effects import group_append_error
from broker.group.records import CONSUMER_OFFSETS_TOPIC, partition_for_group
from broker.txn.records import (
    TransactionLogImage, TransactionLogRecord, encode_batch, partition_for_transactional_id,
)
from broker.txn.state import (
    EPOCH_MAX, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, TransactionState, TxnTransit,
    is_epoch_exhausted,
)

__all__ = [
    "AllocateProducerId", "Append", "Completion", "Effect", "PartitionStatus", "SendMarkers",
    "TransactionConfig", "TransactionCoordinator",
]

E = ErrorCode
S = TransactionState
COMPLETE_RETRY_BACKOFF_MS = 100


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Kafka's broker keys, defaults Kafka's."""
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_state_log_num_partitions: int = 50
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    offsets_topic_num_partitions: int = 50
    # Ketch's own (no Kafka key): how long AddPartitionsToTxn / AddOffsetsToTxn may wait
    # for the previous transaction of its id to complete before CONCURRENT_TRANSACTIONS.
    add_partitions_hold_ms: int = 2_000


@dataclass(frozen=True, slots=True)
class Completion:
    """Effect: answer the request the shell holds under ``token`` with ``response``."""
    token: Hashable
    response: Any


@dataclass(frozen=True, slots=True)
class Append:
    """Effect: append ``records`` to ``__transaction_state-<partition>`` (acks=all), then
    report with ``on_append_result(append_id, error_code, now_ms)``."""
    append_id: int
    partition: int
    records: tuple[TransactionLogRecord, ...]
    timestamp_ms: int

    def batch(self) -> bytes:
        return encode_batch(self.records, self.timestamp_ms)


@dataclass(frozen=True, slots=True)
class AllocateProducerId:
    """Effect: a fresh producer id, reported with ``on_producer_id(request_id, id, now_ms)``."""
    request_id: int


@dataclass(frozen=True, slots=True)
class SendMarkers:
    """Effect: WriteTxnMarkers for (producer_id, producer_epoch) with ``committed`` to the
    leader of each partition; then ``on_markers_written(transactional_id, producer_id,
    producer_epoch, coordinator_epoch, now_ms)``. Stop when ``markers_wanted`` says no."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


Effect = Union[Completion, Append, AllocateProducerId, SendMarkers]
OnDone = Callable[[ErrorCode, int, list], None]       # (error, now_ms, effects)


class PartitionStatus:
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(slots=True)
class _PendingAppend:
    partition: int
    metadata: TransactionMetadata
    transit: TxnTransit
    on_done: OnDone
    # A second record in the same batch: the next transaction's Ongoing after a Complete*.
    then: TxnTransit | None = None


@dataclass(slots=True)
class _PendingInit:
    token: Hashable
    transactional_id: str
    txn_timeout_ms: int
    expected: tuple[int, int] | None       # KIP-360: (producer id, epoch) the producer had
    version: int


@dataclass(slots=True)
class _HeldAdd:
    """An AddPartitionsToTxn / AddOffsetsToTxn waiting for its id's previous transaction
    (or a write in flight) to finish, instead of an immediate CONCURRENT_TRANSACTIONS."""
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    on_result: Callable[[dict[TopicPartition, ErrorCode], list], None]
    deadline_ms: int


@dataclass(slots=True)
class _Gather:
    """Answers for a request that waits on several transactions (AddPartitionsToTxn v4+)."""
    waiting: int
    results: dict[str, dict[TopicPartition, ErrorCode]] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig | None = None) -> None:
        self.config = config or TransactionConfig()
        self.active = True                     # False after shutdown
        self._partitions: dict[int, str] = {}  # partition -> PartitionStatus
        self._coordinator_epochs: dict[int, int] = {}
        # Invariant: every id here maps to an ACTIVE partition.
        self._txns: dict[str, TransactionMetadata] = {}
        self._topics: dict[str, int] = {}      # name -> partition count (metadata image)
        self._pending: dict[int, _PendingAppend] = {}
        self._pending_order: dict[int, deque[int]] = {}
        self._next_append_id = 0
        self._inits: dict[int, _PendingInit] = {}
        self._next_request_id = 0
        self._complete_retries: dict[str, int] = {}   # id -> when to write Complete* again
        self._held: dict[str, deque[_HeldAdd]] = {}     # id -> adds waiting, oldest first
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None

    # ================================================================== partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id,
                                              self.config.transaction_state_log_num_partitions)

    def begin_load(self, partition: int) -> None:
        """This broker leads ``__transaction_state-<partition>``: its ids answer
        COORDINATOR_LOAD_IN_PROGRESS until ``complete_load``."""
        assert 0 <= partition < self.config.transaction_state_log_num_partitions
        assert partition not in self._partitions, f"partition {partition} already loaded"
        self._partitions[partition] = PartitionStatus.LOADING

    def complete_load(self, partition: int, image: TransactionLogImage, coordinator_epoch: int,
                      now_ms: int) -> list[Effect]:
        """Take over the ids the partition's records describe; resend the markers of every
        transaction the records leave in PrepareCommit or PrepareAbort."""
        if self._partitions.get(partition) != PartitionStatus.LOADING:
            return []       # unloaded while loading
        self._partitions[partition] = PartitionStatus.ACTIVE
        self._coordinator_epochs[partition] = coordinator_epoch
        effects: list[Effect] = []
        for tid, value in sorted(image.values.items()):
            if self.partition_for(tid) != partition:
                continue    # written under another partition count; unreachable here
            md = TransactionMetadata.from_log(tid, value, coordinator_epoch)
            if md.state is S.DEAD:
                continue
            self._txns[tid] = md
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(md, now_ms, effects)
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now_ms + \
                self.config.abort_timed_out_transaction_cleanup_interval_ms
            self._next_expire_check_ms = now_ms + \
                self.config.remove_expired_transaction_cleanup_interval_ms
        return effects

    def unload_partition(self, partition: int, now_ms: int) -> list[Effect]:
        """The partition's leadership moved: its ids are forgotten here, writes in flight
        answer NOT_COORDINATOR (the new leader replays whatever reached the log)."""
        effects: list[Effect] = []
        if self._partitions.pop(partition, None) is None:
            return effects
        self._coordinator_epochs.pop(partition, None)
        for tid in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[tid]
            self._complete_retries.pop(tid, None)
        for tid in [t for t in self._held if self.partition_for(t) == partition]:
            for held in self._held.pop(tid):
                held.on_result({tp: E.NOT_COORDINATOR for tp in held.partitions}, effects)
        for append_id in self._pending_order.pop(partition, deque()):
            pending = self._pending.pop(append_id)
            pending.on_done(E.NOT_COORDINATOR, now_ms, effects)
        return effects

    def shutdown(self, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        for partition in sorted(self._partitions):
            effects += self.unload_partition(partition, now_ms)
        for init in self._inits.values():
            effects.append(Completion(init.token, _init_response(E.COORDINATOR_NOT_AVAILABLE)))
        self._inits.clear()
        self.active = False
        return effects

    def coordinator_epoch(self, partition: int) -> int | None:
        """The epoch a loaded partition's ids were loaded under; None while loading."""
        return self._coordinator_epochs.get(partition)

    def set_topics(self, topics: dict[str, int]) -> None:
        """The topics of the current metadata image: name -> partition count."""
        self._topics = topics

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        return self._txns.get(transactional_id)

    def markers_wanted(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int) -> bool:
        """Whether markers for this transaction are still to be sent from here (the shell
        asks before each retry)."""
        md = self._txns.get(transactional_id)
        return (md is not None and md.coordinator_epoch == coordinator_epoch
                and md.producer_id == producer_id and md.producer_epoch == producer_epoch
                and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT))

    def _status_error(self, transactional_id: str) -> ErrorCode | None:
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        status = self._partitions.get(self.partition_for(transactional_id))
        if status is None:
            return E.NOT_COORDINATOR
        if status == PartitionStatus.LOADING:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # ================================================================== appends

    def _append(self, md: TransactionMetadata, transit: TxnTransit, now_ms: int,
                on_done: OnDone, then: TxnTransit | None = None) -> Append:
        partition = self.partition_for(md.transactional_id)
        assert self._partitions.get(partition) == PartitionStatus.ACTIVE
        append_id = self._next_append_id
        self._next_append_id += 1
        self._pending[append_id] = _PendingAppend(partition, md, transit, on_done, then)
        self._pending_order.setdefault(partition, deque()).append(append_id)
        value = None if transit.state is S.DEAD else transit.log_value()
        records = [TransactionLogRecord(md.transactional_id, value)]
        if then is not None:
            records.append(TransactionLogRecord(md.transactional_id, then.log_value()))
        return Append(append_id, partition, tuple(records), now_ms)

    def on_append_result(self, append_id: int, error_code: int, now_ms: int) -> list[Effect]:
        """An ``Append`` ended: NONE once acks=all is satisfied, else the produce error."""
        pending = self._pending.pop(append_id, None)
        effects: list[Effect] = []
        if pending is None:
            return effects       # its partition was unloaded; already answered
        order = self._pending_order[pending.partition]
        assert error_code != E.NONE or order[0] == append_id, \
            "successful appends to one partition must be reported in append order"
        order.remove(append_id)
        if error_code == E.NONE:
            md = pending.metadata
            md.complete_transition(pending.transit)
            if pending.then is not None:
                # The second record of the batch, replayed as a load would.
                then = md.prepare_add_partitions(pending.then.partitions,
                                                 pending.then.txn_last_update_timestamp_ms)
                assert then == pending.then, (then, pending.then)
                md.complete_transition(then)
            if pending.transit.state is S.DEAD:
                self._txns.pop(pending.metadata.transactional_id, None)
            pending.on_done(E.NONE, now_ms, effects)
        else:
            pending.on_done(group_append_error(error_code), now_ms, effects)
        self._release_held(pending.metadata.transactional_id, now_ms, effects)
        return effects

    # ================================================================== InitProducerId

    def handle_init_producer_id(self, token: Hashable, request: Any, version: int,
                                now_ms: int) -> list[Effect]:
        """InitProducerId with a transactional id (without one, the broker's producer id
        manager answers alone)."""
        tid = request.transactional_id
        assert tid is not None
        if tid == "":
            return [Completion(token, _init_response(E.INVALID_REQUEST))]
        timeout_ms = request.transaction_timeout_ms
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return [Completion(token, _init_response(E.INVALID_TRANSACTION_TIMEOUT))]
        error = self._status_error(tid)
        if error is not None:
            return [Completion(token, _init_response(error))]
        expected = ((request.producer_id, request.producer_epoch)
                    if version >= 3 and request.producer_id != NO_PRODUCER_ID else None)
        init = _PendingInit(token, tid, timeout_ms, expected, version)
        md = self._txns.get(tid)
        if md is None:
            return self._allocate(init)       # a new id: a producer id first
        return self._init(init, md, None, now_ms)

    def _allocate(self, init: _PendingInit) -> list[Effect]:
        request_id = self._next_request_id
        self._next_request_id += 1
        self._inits[request_id] = init
        return [AllocateProducerId(request_id)]

    def on_producer_id(self, request_id: int, producer_id: int | None,
                       now_ms: int) -> list[Effect]:
        """A producer id for a parked InitProducerId; None when none could be had."""
        init = self._inits.pop(request_id, None)
        if init is None:
            return []
        if producer_id is None:
            return [Completion(init.token, _init_response(E.COORDINATOR_NOT_AVAILABLE))]
        error = self._status_error(init.transactional_id)
        if error is not None:
            return [Completion(init.token, _init_response(error))]
        md = self._txns.get(init.transactional_id)
        if md is None:
            partition = self.partition_for(init.transactional_id)
            md = TransactionMetadata(
                init.transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                NO_PRODUCER_EPOCH, init.txn_timeout_ms, S.EMPTY, frozenset(), -1, now_ms,
                coordinator_epoch=self._coordinator_epochs[partition])
            self._txns[init.transactional_id] = md
            return self._init(init, md, None, now_ms)
        return self._init(init, md, producer_id, now_ms)

    def _init(self, init: _PendingInit, md: TransactionMetadata, new_producer_id: int | None,
              now_ms: int) -> list[Effect]:
        token = init.token

        def reply(error: ErrorCode) -> list[Effect]:
            return [Completion(token, _init_response(error))]
        if md.pending_transition_in_progress:
            return reply(E.CONCURRENT_TRANSACTIONS)
        expected = init.expected
        if expected is not None and not _valid_producer_id(md, *expected):
            return reply(E.PRODUCER_FENCED)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return reply(E.CONCURRENT_TRANSACTIONS)
        if md.state is S.ONGOING:
            # Abort the ongoing transaction with an epoch bump that fences its producer;
            # the caller retries and then gets an epoch of its own (a second bump, or a new
            # producer id if the fence exhausted the epochs).
            def fenced(error: ErrorCode, now: int, out: list) -> None:
                out.append(Completion(token, _init_response(
                    E.CONCURRENT_TRANSACTIONS if error == E.NONE else error)))
            return self._fence_and_abort(md, now_ms, fenced)
        if md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return reply(E.CONCURRENT_TRANSACTIONS)      # Dead: being removed
        if md.producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            if new_producer_id is None:
                return self._allocate(init)
            transit = md.prepare_producer_id_rotation(new_producer_id, init.txn_timeout_ms,
                                                      now_ms, expected is not None)
        else:
            maybe = md.prepare_increment_producer_epoch(
                init.txn_timeout_ms, None if expected is None else expected[1], now_ms)
            if maybe is None:
                return reply(E.PRODUCER_FENCED)
            transit = maybe

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error == E.NONE:
                out.append(Completion(token, _init_response(E.NONE, transit.producer_id,
                                                            transit.producer_epoch)))
            else:
                md.abort_transition()
                out.append(Completion(token, _init_response(error)))
        return [self._append(md, transit, now_ms, done)]

    # ================================================================== AddPartitions

    def _add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                        partitions: frozenset[TopicPartition], verify_only: bool, now_ms: int,
                        on_result: Callable[[dict[TopicPartition, ErrorCode], list], None],
                        deadline_ms: int | None = None) -> list[Effect]:
        """Add partitions to (or, ``verify_only``, check them against) the ongoing
        transaction; ``on_result(errors by partition, effects)`` now, after the write, or
        once the id's previous transaction is complete (held until ``deadline_ms``)."""
        effects: list[Effect] = []

        def every(error: ErrorCode) -> list[Effect]:
            on_result({tp: error for tp in partitions}, effects)
            return effects
        if tid == "":
            return every(E.INVALID_REQUEST)
        error = self._status_error(tid)
        if error is not None:
            return every(error)
        md = self._txns.get(tid)
        if md is None or md.producer_id != producer_id:
            return every(E.INVALID_PRODUCER_ID_MAPPING)
        if md.producer_epoch != producer_epoch:
            return every(E.PRODUCER_FENCED)
        if verify_only:
            # Kafka checks no pending state here: the partitions count once written.
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return every(E.CONCURRENT_TRANSACTIONS)
            on_result({tp: E.NONE if tp in md.partitions else E.TRANSACTION_ABORTABLE
                       for tp in partitions}, effects)
            return effects
        if md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # Kafka answers CONCURRENT_TRANSACTIONS and the client backs off (librdkafka for
            # retry.backoff.ms, ~100 ms, per transaction). Held here instead, it is answered
            # as soon as the previous transaction is complete (KAFKA-5482's proposal).
            if deadline_ms is None:
                deadline_ms = now_ms + self.config.add_partitions_hold_ms
            if now_ms >= deadline_ms:
                return every(E.CONCURRENT_TRANSACTIONS)
            self._held.setdefault(tid, deque()).append(_HeldAdd(
                producer_id, producer_epoch, partitions, on_result, deadline_ms))
            return effects
        if md.state is S.ONGOING and partitions <= md.partitions:
            return every(E.NONE)
        transit = md.prepare_add_partitions(partitions, now_ms)

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error != E.NONE:
                md.abort_transition()
            on_result({tp: error for tp in partitions}, out)
        effects.append(self._append(md, transit, now_ms, done))
        return effects

    def _release_held(self, tid: str, now_ms: int, effects: list[Effect]) -> None:
        """A write of ``tid`` ended: try its held adds again, oldest first (one that still
        has to wait is held again, with its first deadline)."""
        held = self._held.pop(tid, None)
        while held:
            h = held.popleft()
            md = self._txns.get(tid)
            if md is not None and (md.pending_transition_in_progress
                                   or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)) \
                    and now_ms < h.deadline_ms:
                # Still waiting: keep this and the later ones in order.
                self._held.setdefault(tid, deque()).append(h)
                self._held[tid].extend(held)
                return
            effects += self._add_partitions(tid, h.producer_id, h.producer_epoch, h.partitions,
                                            False, now_ms, h.on_result, h.deadline_ms)

    def _unknown_partitions(self, partitions: frozenset[TopicPartition]) -> set[TopicPartition]:
        return {tp for tp in partitions
                if not 0 <= tp.partition < self._topics.get(tp.topic, 0)}

    def handle_add_partitions_to_txn(self, token: Hashable, request: Any, version: int,
                                     now_ms: int) -> list[Effect]:
        R = messages.AddPartitionsToTxnResponse
        if version <= 3:
            tid = request.v3_and_below_transactional_id
            partitions = frozenset(TopicPartition(t.name, p) for t in request.v3_and_below_topics
                                   for p in t.partitions)

            def answer_v3(errors: dict[TopicPartition, ErrorCode], out: list) -> None:
                out.append(Completion(token, R(results_by_topic_v3_and_below=_topic_results(errors))))
            refused = self._refuse_unknown(partitions)
            if refused is not None:
                effects: list[Effect] = []
                answer_v3(refused, effects)
                return effects
            return self._add_partitions(tid, request.v3_and_below_producer_id,
                                        request.v3_and_below_producer_epoch, partitions, False,
                                        now_ms, answer_v3)
        # v4+: a broker's batch of transactions (KIP-890), each answered on its own.
        txns = request.transactions
        if not txns:
            return [Completion(token, R(error_code=E.NONE, results_by_transaction=[]))]
        gather = _Gather(waiting=len(txns))
        effects = []
        for txn in txns:
            partitions = frozenset(TopicPartition(t.name, p) for t in txn.topics
                                   for p in t.partitions)

            def one(errors: dict[TopicPartition, ErrorCode], out: list,
                    tid: str = txn.transactional_id) -> None:
                gather.results[tid] = errors
                gather.waiting -= 1
                if gather.waiting == 0:
                    out.append(Completion(token, R(error_code=E.NONE, results_by_transaction=[
                        R.AddPartitionsToTxnResult(transactional_id=t,
                                                   topic_results=_topic_results(errs))
                        for t, errs in gather.results.items()])))
            refused = self._refuse_unknown(partitions)
            if refused is not None:
                one(refused, effects)
                continue
            effects += self._add_partitions(txn.transactional_id, txn.producer_id,
                                            txn.producer_epoch, partitions, txn.verify_only,
                                            now_ms, one)
        return effects

    def _refuse_unknown(self, partitions: frozenset[TopicPartition]
                        ) -> dict[TopicPartition, ErrorCode] | None:
        """KafkaApis: unknown partitions answer UNKNOWN_TOPIC_OR_PARTITION, and then the
        others OPERATION_NOT_ATTEMPTED, without asking the coordinator."""
        unknown = self._unknown_partitions(partitions)
        if not unknown:
            return None
        return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                for tp in partitions}

    def handle_add_offsets_to_txn(self, token: Hashable, request: Any, version: int,
                                  now_ms: int) -> list[Effect]:
        """The group's ``__consumer_offsets`` partition joins the transaction (its
        TxnOffsetCommit then goes to the group coordinator)."""
        R = messages.AddOffsetsToTxnResponse
        tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, partition_for_group(
            request.group_id, self.config.offsets_topic_num_partitions))

        def answer(errors: dict[TopicPartition, ErrorCode], out: list) -> None:
            out.append(Completion(token, R(error_code=errors[tp])))
        return self._add_partitions(request.transactional_id, request.producer_id,
                                    request.producer_epoch, frozenset({tp}), False, now_ms,
                                    answer)

    # ================================================================== EndTxn

    def handle_end_txn(self, token: Hashable, request: Any, version: int,
                       now_ms: int) -> list[Effect]:
        R = messages.EndTxnResponse

        def reply(error: ErrorCode) -> list[Effect]:
            return [Completion(token, R(error_code=error))]
        tid = request.transactional_id
        if tid == "":
            return reply(E.INVALID_REQUEST)
        error = self._status_error(tid)
        if error is not None:
            return reply(error)
        md = self._txns.get(tid)
        if md is None or md.producer_id != request.producer_id:
            return reply(E.INVALID_PRODUCER_ID_MAPPING)
        # Strict equality for clients: they never bump the epoch without the coordinator.
        if request.producer_epoch != md.producer_epoch:
            return reply(E.PRODUCER_FENCED)
        if md.pending_transition_in_progress:
            return reply(E.CONCURRENT_TRANSACTIONS)
        committed = bool(request.committed)
        state = md.state
        if state is S.ONGOING:
            def done(error: ErrorCode, now: int, out: list) -> None:
                out.append(Completion(token, R(error_code=error)))
            return self._prepare_end(md, committed, now_ms, done)
        if state is S.COMPLETE_COMMIT:
            return reply(E.NONE if committed else E.INVALID_TXN_STATE)
        if state is S.COMPLETE_ABORT:
            return reply(E.INVALID_TXN_STATE if committed else E.NONE)
        if state is S.PREPARE_COMMIT:
            return reply(E.CONCURRENT_TRANSACTIONS if committed else E.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return reply(E.INVALID_TXN_STATE if committed else E.CONCURRENT_TRANSACTIONS)
        return reply(E.INVALID_TXN_STATE)         # Empty: no transaction to end

    def _prepare_end(self, md: TransactionMetadata, committed: bool, now_ms: int,
                     on_done: OnDone, fencing_epoch: int | None = None) -> list[Effect]:
        transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                                             now_ms, fencing_epoch)

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error == E.NONE:
                on_done(E.NONE, now, out)      # decided: the client may go on
                self._send_markers(md, now, out)
            else:
                md.abort_transition(fencing=fencing_epoch is not None)
                on_done(error, now, out)
        return [self._append(md, transit, now_ms, done)]

    def _fence_and_abort(self, md: TransactionMetadata, now_ms: int,
                         on_done: OnDone) -> list[Effect]:
        epoch = md.prepare_fence_producer_epoch()
        return self._prepare_end(md, False, now_ms, on_done, fencing_epoch=epoch)

    # ================================================================== markers

    def _send_markers(self, md: TransactionMetadata, now_ms: int, effects: list[Effect]) -> None:
        assert md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and not md.pending_state
        if not md.partitions:
            self._write_complete(md, now_ms, effects)     # nothing to mark
            return
        effects.append(SendMarkers(md.transactional_id, md.producer_id, md.producer_epoch,
                                   md.state is S.PREPARE_COMMIT, md.coordinator_epoch,
                                   md.partitions))

    def on_markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           coordinator_epoch: int, now_ms: int) -> list[Effect]:
        """Every partition of the transaction has its marker: write Complete*."""
        effects: list[Effect] = []
        if not self.markers_wanted(transactional_id, producer_id, producer_epoch,
                                   coordinator_epoch):
            return effects
        md = self._txns[transactional_id]
        if md.pending_transition_in_progress:
            return effects
        self._write_complete(md, now_ms, effects)
        return effects

    def _write_complete(self, md: TransactionMetadata, now_ms: int, effects: list[Effect]) -> None:
        transit = md.prepare_complete(now_ms)
        tid = md.transactional_id
        # The next transaction's AddPartitionsToTxn already waits: its Ongoing record goes
        # in the same batch, one replicated write instead of two in a row.
        held = self._held.get(tid)
        add = held[0] if held else None
        if held and add is not None and now_ms < add.deadline_ms and \
                (add.producer_id, add.producer_epoch) == (md.producer_id, md.producer_epoch):
            held.popleft()
            if not held:
                del self._held[tid]
        else:
            add = None
        then = None if add is None else transit.then_add_partitions(add.partitions, now_ms)

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error != E.NONE:
                md.abort_transition()
                if self._txns.get(tid) is md:     # still ours: try again shortly
                    self._complete_retries[tid] = now + COMPLETE_RETRY_BACKOFF_MS
            if add is None:
                return
            if error == E.NONE:
                add.on_result({tp: E.NONE for tp in add.partitions}, out)
            elif self._txns.get(tid) is md:       # held again, first in line
                self._held.setdefault(tid, deque()).appendleft(add)
            else:                                 # unloaded: the new coordinator decides
                add.on_result({tp: error for tp in add.partitions}, out)
        effects.append(self._append(md, transit, now_ms, done, then))

    # ================================================================== describe / list

    def handle_describe_transactions(self, token: Hashable, request: Any, version: int,
                                     now_ms: int) -> list[Effect]:
        R = messages.DescribeTransactionsResponse
        states = []
        for tid in request.transactional_ids:
            error = self._status_error(tid)
            md = self._txns.get(tid) if error is None else None
            if md is None or md.state is S.DEAD:
                states.append(R.TransactionState(
                    error_code=error or E.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                    transaction_state="", topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(md.partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            states.append(R.TransactionState(
                error_code=E.NONE, transactional_id=tid, transaction_state=md.state.kafka_name,
                transaction_timeout_ms=md.txn_timeout_ms,
                transaction_start_time_ms=md.txn_start_timestamp_ms,
                producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return [Completion(token, R(transaction_states=states))]

    def handle_list_transactions(self, token: Hashable, request: Any, version: int,
                                 now_ms: int) -> list[Effect]:
        R = messages.ListTransactionsResponse
        if not self.active:
            return [Completion(token, R(error_code=E.COORDINATOR_NOT_AVAILABLE,
                                        unknown_state_filters=[], transaction_states=[]))]
        if PartitionStatus.LOADING in self._partitions.values():
            return [Completion(token, R(error_code=E.COORDINATOR_LOAD_IN_PROGRESS,
                                        unknown_state_filters=[], transaction_states=[]))]
        names = list(request.state_filters or ())
        states = {s for n in names if (s := TransactionState.from_kafka_name(n)) is not None}
        unknown = [n for n in names if TransactionState.from_kafka_name(n) is None]
        producer_ids = set(request.producer_id_filters or ())
        duration_ms = request.duration_filter if version >= 1 else -1

        def included(md: TransactionMetadata) -> bool:
            if md.state is S.DEAD:
                return False        # being removed
            if producer_ids and md.producer_id not in producer_ids:
                return False
            if names and md.state not in states:
                return False
            # KIP-994: only transactions running longer than the filter.
            return duration_ms < 0 or now_ms - md.txn_start_timestamp_ms > duration_ms
        return [Completion(token, R(
            error_code=E.NONE, unknown_state_filters=unknown, transaction_states=[
                R.TransactionState(transactional_id=md.transactional_id,
                                   producer_id=md.producer_id,
                                   transaction_state=md.state.kafka_name)
                for md in sorted(self._txns.values(), key=lambda m: m.transactional_id)
                if included(md)]))]

    # ================================================================== timers

    def poll(self, now_ms: int) -> tuple[list[Effect], int]:
        """Fire what is due; the effects and the milliseconds until the next deadline."""
        effects: list[Effect] = []
        for tid, due in list(self._complete_retries.items()):
            if due <= now_ms:
                del self._complete_retries[tid]
                md = self._txns.get(tid)
                if md is not None and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) \
                        and not md.pending_transition_in_progress:
                    self._write_complete(md, now_ms, effects)
        for tid in [t for t, q in self._held.items() if q[0].deadline_ms <= now_ms]:
            self._release_held(tid, now_ms, effects)       # CONCURRENT_TRANSACTIONS now
        if self._next_abort_check_ms is not None and self._next_abort_check_ms <= now_ms:
            self._next_abort_check_ms = now_ms + \
                self.config.abort_timed_out_transaction_cleanup_interval_ms
            self._abort_timed_out(now_ms, effects)
        if self._next_expire_check_ms is not None and self._next_expire_check_ms <= now_ms:
            self._next_expire_check_ms = now_ms + \
                self.config.remove_expired_transaction_cleanup_interval_ms
            self._remove_expired(now_ms, effects)
        deadlines = [d for d in (self._next_abort_check_ms, self._next_expire_check_ms,
                                 *self._complete_retries.values(),
                                 *(q[0].deadline_ms for q in self._held.values()))
                     if d is not None]
        wait_ms = max(0, min(deadlines) - now_ms) if deadlines else 60_000
        return effects, wait_ms

    def _abort_timed_out(self, now_ms: int, effects: list[Effect]) -> None:
        for md in list(self._txns.values()):
            if md.state is S.ONGOING and not md.pending_transition_in_progress \
                    and md.txn_start_timestamp_ms + md.txn_timeout_ms < now_ms \
                    and md.producer_epoch < EPOCH_MAX:     # room for the fencing bump
                effects += self._fence_and_abort(md, now_ms, lambda error, now, out: None)

    def _remove_expired(self, now_ms: int, effects: list[Effect]) -> None:
        expiration_ms = self.config.transactional_id_expiration_ms
        for md in list(self._txns.values()):
            if md.state.expiration_allowed and not md.pending_transition_in_progress \
                    and md.txn_last_update_timestamp_ms + expiration_ms <= now_ms:
                transit = md.prepare_dead(now_ms)

                def done(error: ErrorCode, now: int, out: list,
                         md: TransactionMetadata = md) -> None:
                    if error != E.NONE:
                        md.abort_transition()
                effects.append(self._append(md, transit, now_ms, done))


def _valid_producer_id(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a producer naming its id and epoch is fenced unless the metadata was just
    created, the id is the current one (the epoch is checked when bumping), or it is the
    previous id with an exhausted epoch (a retry after a rotation it never heard of)."""
    return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
            or (producer_id == md.previous_producer_id and is_epoch_exhausted(producer_epoch)))


def _init_response(error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
                   producer_epoch: int = NO_PRODUCER_EPOCH) -> Any:
    return messages.InitProducerIdResponse(error_code=error, producer_id=producer_id,
                                           producer_epoch=producer_epoch)


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list:
    R = messages.AddPartitionsToTxnResponse
    by_topic: dict[str, list] = {}
    for tp in sorted(errors):
        by_topic.setdefault(tp.topic, []).append(R.AddPartitionsToTxnPartitionResult(
            partition_index=tp.partition, partition_error_code=errors[tp]))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps)
            for t, ps in by_topic.items()]
