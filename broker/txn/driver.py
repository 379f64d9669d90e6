"""The transaction coordinator's asyncio shell: the only place the pure core meets the broker.

- requests (InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
  EndTxn, DescribeTransactions, ListTransactions) become core inputs under a token; the
  core's ``Completion`` resolves the request's future, now or later;
- ``Append`` effects are written to ``__transaction_state-<p>`` through the replica manager
  with acks=all, their outcomes reported back in append order per partition (requests,
  appends, the poll timer and loading are ``broker/coordinator_shell.py``'s, shared with
  the group coordinator);
- ``AllocateProducerId`` asks the controller's producer id blocks (``ProducerIdManager``);
- ``SendMarkers`` sends WriteTxnMarkers (v1) to the leader of each partition of the
  transaction, grouped per leader (and with other transactions' markers for the same
  broker in one request), retrying partitions whose leader moved or could not be
  reached (the metadata image names the leaders at each round) until every one answered
  or the core no longer wants them (the coordinator epoch moved on), then reports. The
  partitions this broker leads are written directly (``write_markers``, which also serves
  other coordinators' WriteTxnMarkers), not through its own listener;
- leadership of ``__transaction_state`` partitions loads a partition's transactional ids by
  replaying its log (coordinator epoch = the partition's leader epoch) or unloads them;
- a timer calls ``poll`` when the core's next deadline is due;
- KIP-890 verification for the Produce path (``verify_produce``) and for TxnOffsetCommit
  (``verify_txn_offset_commit``, which the group coordinator calls before it writes
  pending offsets): the leader asks the transactional id's coordinator (the core
  directly when that is this broker), through ``VerificationState``'s guards; a Produce's
  question also covers the other partitions of its topics led here (asked ahead).

Each of these local shortcuts takes a request, its parsing and its response off a
transaction's critical path on the busiest broker (the coordinator is also a leader and
a follower); the answers are the same as over the wire.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from broker.coordinator_shell import CoordinatorShell
from broker.producer_ids import ProducerIdManager
from broker.replica_driver import ReplicaDriver
from broker.txn.channel import BrokerChannel
from broker.txn.coordinator import (
    AllocateProducerId, Append, Completion, SendMarkers, TransactionConfig,
    TransactionCoordinator,
)
from broker.txn.markers import (
    MarkerEntry, judge_answers, marker_answers, marker_request, next_batch, plan_round,
)
from broker.txn.records import (
    TRANSACTION_STATE_TOPIC, TransactionLogLoader, partition_for_transactional_id,
)
from broker.txn.verification import VerificationState
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log.image import MetadataImage

log = logging.getLogger(__name__)

__all__ = ["TXN_VERSIONS", "TransactionCoordinatorDriver"]

E = ErrorCode

TXN_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}
WRITE_TXN_MARKERS_VERSIONS = (1, 1)
VERIFY_VERSIONS = (4, 5)                 # AddPartitionsToTxn's brokers' form
MARKER_RETRY_BACKOFF_MS = (50, 1_000)    # doubled per round without progress, up to the max
# At most this many other partitions asked about ahead with a verification (VerificationState).
VERIFY_AHEAD_MAX = 64

# Produce errors for a failed verification (Kafka's ReplicaManager): retriable coordinator
# trouble becomes NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh.
_VERIFY_RETRIABLE = {E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                     E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}


def produce_verification_error(code: int, produce_version: int) -> int:
    """What a producer hears when its partition could not be verified (Kafka's
    ReplicaManager and AddPartitionsToTxnManager)."""
    if code in _VERIFY_RETRIABLE:
        return E.NOT_ENOUGH_REPLICAS
    if code == E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH        # what producers expect here
    if code == E.TRANSACTION_ABORTABLE and produce_version <= 10:
        return E.INVALID_TXN_STATE             # older clients do not know the newer code
    return code


# TxnOffsetCommit errors for a failed verification (Kafka's AddPartitionsToTxnManager, then
# GroupMetadataManager.maybeConvertOffsetCommitError): what consumers' commit paths retry.
_OFFSET_COMMIT_VERIFY_ERRORS: dict[int, int] = {
    E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.PRODUCER_FENCED: E.INVALID_PRODUCER_EPOCH,
}


def txn_offset_commit_verification_error(code: int, txn_offset_commit_version: int) -> int:
    """What a TxnOffsetCommit hears when its ``__consumer_offsets`` partition could not be
    verified: v4+ clients know TRANSACTION_ABORTABLE, older ones get INVALID_TXN_STATE
    (Kafka's genericError / defaultError operations)."""
    if code == E.TRANSACTION_ABORTABLE and txn_offset_commit_version < 4:
        return E.INVALID_TXN_STATE
    return _OFFSET_COMMIT_VERIFY_ERRORS.get(code, code)


class TransactionCoordinatorDriver:
    def __init__(self, broker_id: int, config: TransactionConfig, replicas: ReplicaDriver,
                 brokers: BrokerChannel, producer_ids: ProducerIdManager,
                 broker_epoch: Callable[[], int],
                 request_timeout_ms: int, now_ms: Callable[[], int],
                 verification_enable: Callable[[], bool] = lambda: True) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replicas = replicas
        self.brokers = brokers
        self.producer_ids = producer_ids
        self.broker_epoch = broker_epoch
        self.request_timeout_ms = request_timeout_ms
        self.now_ms = now_ms
        # transaction.partition.verification.enable, a dynamic cluster-wide key
        self.verification_enable = verification_enable
        self.core = TransactionCoordinator(config)
        self.verification = VerificationState()
        replicas.subscribe_leadership(self.on_leadership)
        replicas.subscribe_txn_markers(self.on_txn_marker)
        self.shell = CoordinatorShell(TRANSACTION_STATE_TOPIC, replicas, request_timeout_ms)
        self._loaded: set[int] = set()
        self._background: set[asyncio.Task] = set()
        # Markers waiting for each broker, and the task sending them (one per broker).
        self._marker_queues: dict[int, list[tuple[MarkerEntry, asyncio.Future]]] = {}
        self._marker_senders: dict[int, asyncio.Task] = {}
        self._task: asyncio.Task | None = None

    def apis(self) -> dict[int, tuple[Any, tuple[int, int]]]:
        """The APIs this coordinator serves: handler and (min, max) version per key.
        InitProducerId stays KafkaApis's (idempotent producers need no coordinator); it
        hands transactional ones to ``handle_init_producer_id``."""
        handlers = {
            ApiKey.ADD_PARTITIONS_TO_TXN: self._simple("handle_add_partitions_to_txn"),
            ApiKey.ADD_OFFSETS_TO_TXN: self._simple("handle_add_offsets_to_txn"),
            ApiKey.END_TXN: self._simple("handle_end_txn"),
            ApiKey.DESCRIBE_TRANSACTIONS: self._simple("handle_describe_transactions"),
            ApiKey.LIST_TRANSACTIONS: self._simple("handle_list_transactions"),
        }
        return {key: (handler, TXN_VERSIONS[key]) for key, handler in handlers.items()}

    async def handle_init_producer_id(self, req: Any, version: int, client: Any) -> Any:
        return await self._call("handle_init_producer_id", req, version, self.now_ms())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll_loop(), name="txn-poll")

    async def stop(self) -> None:
        self.shell.stopped = True
        self._carry_out(self.core.shutdown(self.now_ms()))
        tasks = [t for t in (self._task, *self._background) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.brokers.close()

    def on_metadata(self, image: MetadataImage) -> None:
        self.core.set_topics({t.name: len(t.partitions) for t in image.topics.by_id.values()})
        # Led again under a newer leader epoch (no leadership change was seen here): the
        # coordinator epoch is the leader epoch, so reload under the new one, as Kafka does
        # on every election; markers in flight stop and are sent again under it.
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        for p in sorted(self._loaded):
            reg = None if topic is None else topic.partitions.get(p)
            epoch = self.core.coordinator_epoch(p)
            if reg is not None and reg.leader == self.broker_id and epoch is not None \
                    and reg.leader_epoch > epoch:
                tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
                self.on_leadership(tp, False)
                self.on_leadership(tp, True)

    # ------------------------------------------------------------ effects

    def _carry_out(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, Completion):
                self.shell.complete(effect.token, effect.response)
            elif isinstance(effect, Append):
                self.shell.append(effect.partition, effect.batch(), self._append_reporter(effect.append_id))
            elif isinstance(effect, AllocateProducerId):
                self._spawn(self._allocate(effect))
            else:
                assert isinstance(effect, SendMarkers), effect
                self._spawn(self._send_markers(effect))
        self.shell.wake()

    def _spawn(self, coro: Any) -> None:
        if self.shell.stopped:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _append_reporter(self, append_id: int) -> Callable[[int], None]:
        return lambda code: self._carry_out(self.core.on_append_result(append_id, code, self.now_ms()))

    async def _allocate(self, effect: AllocateProducerId) -> None:
        producer_id = await self.producer_ids.next_producer_id(self.broker_epoch())
        self._carry_out(self.core.on_producer_id(effect.request_id, producer_id, self.now_ms()))

    async def _call(self, method: str, *args: Any) -> Any:
        handle = getattr(self.core, method)
        return await self.shell.call(lambda token: self._carry_out(handle(token, *args)))

    def _simple(self, method: str) -> Callable[..., Any]:
        async def handler(req: Any, version: int, client: Any) -> Any:
            return await self._call(method, req, version, self.now_ms())
        return handler

    async def _poll_loop(self) -> None:
        await self.shell.poll_forever(lambda: self.core.poll(self.now_ms()), self._carry_out)

    # ------------------------------------------------------------ markers

    async def _send_markers(self, effect: SendMarkers) -> None:
        """WriteTxnMarkers to the leaders until every partition has its marker."""
        remaining = set(effect.partitions)
        backoff_ms = MARKER_RETRY_BACKOFF_MS[0]

        def wanted() -> bool:
            return self.core.markers_wanted(effect.transactional_id, effect.producer_id,
                                            effect.producer_epoch, effect.coordinator_epoch)
        while remaining and wanted():
            by_leader, deleted = plan_round(remaining, self.replicas.image)
            if deleted:
                log.info("%s: no marker needed on deleted %s", effect.transactional_id,
                         sorted(deleted))
            answers: dict[TopicPartition, int] = {}
            for answer in await asyncio.gather(*(self._write_markers(leader, effect, tps)
                                                 for leader, tps in by_leader.items())):
                answers.update(answer)
            judged = judge_answers(answers)
            if judged.fenced:
                log.info("%s: markers stopped: %s", effect.transactional_id,
                         {str(tp): E(c).name for tp, c in judged.fenced.items()})
                return
            for tp, code in judged.given_up.items():
                log.error("%s: marker for %s refused with %d; giving it up",
                          effect.transactional_id, tp, code)
            remaining -= deleted | judged.settled
            if remaining:
                backoff_ms = MARKER_RETRY_BACKOFF_MS[0] if judged.written \
                    else min(backoff_ms * 2, MARKER_RETRY_BACKOFF_MS[1])
                await asyncio.sleep(backoff_ms / 1000)
        if not remaining:
            self._carry_out(self.core.on_markers_written(
                effect.transactional_id, effect.producer_id, effect.producer_epoch,
                effect.coordinator_epoch, self.now_ms()))

    async def _write_markers(self, leader: int, effect: SendMarkers,
                             tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """This transaction's markers for ``leader``, queued with those of other
        transactions for the same broker (one WriteTxnMarkers carries them all)."""
        entry = MarkerEntry(effect.producer_id, effect.producer_epoch, effect.committed,
                            effect.coordinator_epoch, tuple(tps))
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self._marker_queues.setdefault(leader, []).append((entry, answer))
        if leader not in self._marker_senders:
            task = asyncio.get_running_loop().create_task(self._drain_markers(leader))
            self._marker_senders[leader] = task
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await answer

    async def _drain_markers(self, leader: int) -> None:
        """One WriteTxnMarkers in flight to ``leader`` at a time, each carrying whatever
        queued while the previous one was out (Kafka's TransactionMarkerChannelManager)."""
        try:
            while self._marker_queues.get(leader):
                batch, rest = next_batch(self._marker_queues[leader])
                self._marker_queues[leader] = rest
                entries = [entry for entry, _ in batch]
                try:
                    if leader == self.broker_id:
                        # Led here: appended directly, not through this broker's own
                        # listener (a request and its response cost this busy process
                        # several event-loop turns on the commit's critical path).
                        answers = await self.write_markers(entries, self.request_timeout_ms)
                    else:
                        resp = await self.brokers.request(leader, ApiKey.WRITE_TXN_MARKERS,
                                                          WRITE_TXN_MARKERS_VERSIONS,
                                                          marker_request(entries))
                        answers = marker_answers(entries, resp)
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    log.info("markers of %d transaction(s) to broker %d failed: %s",
                             len(entries), leader, e)
                    answers = [{tp: E.NETWORK_EXCEPTION for tp in entry.partitions}
                               for entry in entries]
                except Exception:       # not left unanswered: each transaction retries
                    log.exception("markers to broker %d", leader)
                    answers = [{tp: E.UNKNOWN_SERVER_ERROR for tp in entry.partitions}
                               for entry in entries]
                for (_, answer), codes in zip(batch, answers):
                    if not answer.done():
                        answer.set_result(codes)
        finally:
            del self._marker_senders[leader]
            # Cancelled (stop): whatever still waits is failed, not left hanging.
            for _, answer in self._marker_queues.pop(leader, []):
                if not answer.done():
                    answer.cancel()

    async def write_markers(self, entries: list[MarkerEntry], timeout_ms: int
                            ) -> list[dict[TopicPartition, int]]:
        """This broker as the partitions' leader (Kafka's handleWriteTxnMarkersRequest): per
        entry and partition one control batch appended (the producer's id and epoch,
        COMMIT or ABORT, the coordinator epoch), then acks=all awaited within
        ``timeout_ms``. Per partition: UNKNOWN_TOPIC_OR_PARTITION (not hosted here),
        NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH (an older
        producer epoch), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), or
        the replication outcome."""
        answers: list[dict[TopicPartition, int]] = [{} for _ in entries]
        waits: list[tuple[int, TopicPartition, int]] = []
        for i, e in enumerate(entries):
            for tp in e.partitions:
                result = self.replicas.append_txn_marker(tp, e.producer_id, e.producer_epoch,
                                                         e.committed, e.coordinator_epoch)
                answers[i][tp] = result.error_code
                if result.error_code == E.NONE and result.required_offset is not None:
                    waits.append((i, tp, result.required_offset))
        if waits:
            codes = await self.replicas.await_replications(
                [(tp, required) for _, tp, required in waits], timeout_ms)
            for (i, tp, _), code in zip(waits, codes):
                answers[i][tp] = code
        return answers

    # ------------------------------------------------------------ leadership

    def on_leadership(self, tp: TopicPartition, leader: bool) -> None:
        self.verification.on_leadership(tp)
        if tp.topic != TRANSACTION_STATE_TOPIC or \
                tp.partition >= self.config.transaction_state_log_num_partitions:
            return
        p = tp.partition
        if leader and p not in self._loaded:
            self._loaded.add(p)
            self.core.begin_load(p)
            asyncio.get_running_loop().call_soon(self._load, tp)
        elif not leader and p in self._loaded:
            self._loaded.discard(p)
            self._carry_out(self.core.unload_partition(p, self.now_ms()))

    def _load(self, tp: TopicPartition) -> None:
        p = tp.partition
        topic = self.replicas.image.topics.get(TRANSACTION_STATE_TOPIC)
        reg = None if topic is None else topic.partitions.get(p)
        loader = TransactionLogLoader()
        if p not in self._loaded or reg is None or not self.shell.replay_log(p, loader.replay_batches):
            return
        log.info("%s: loaded %d transaction records (coordinator epoch %d)", tp,
                 loader.records_replayed, reg.leader_epoch)
        self._carry_out(self.core.complete_load(p, loader.image, reg.leader_epoch, self.now_ms()))

    # ------------------------------------------------------------ KIP-890 verification

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """A marker was appended to a partition this broker leads (contract point 2)."""
        self.verification.on_marker(tp, producer_id)

    async def verify_produce(self, transactional_id: str, produce_version: int,
                             batches: dict[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int]:
        """Before a transactional Produce appends: ask the coordinator about the partitions
        not yet verified for their (producer id, epoch). The Produce errors of the partitions
        that must not be appended; the others may be, at once (no await in between)."""
        if not self.verification_enable():
            return {}
        codes = await self._verify(transactional_id, batches, ask_ahead=True)
        return {tp: produce_verification_error(code, produce_version) for tp, code in codes.items()}

    async def verify_txn_offset_commit(self, transactional_id: str, producer_id: int,
                                       producer_epoch: int, offsets_partition: TopicPartition,
                                       version: int) -> int:
        """KIP-890 for TxnOffsetCommit, as Kafka 3.8+'s group coordinator: before pending
        offsets are written to ``offsets_partition``, the transaction coordinator must say
        that partition is in the ongoing transaction (AddOffsetsToTxn put it there).
        NONE: append now (no await in between; a marker in the meantime is caught by the
        guard); else the TxnOffsetCommit error for every partition of the request."""
        if not self.verification_enable():
            return E.NONE
        codes = await self._verify(transactional_id,
                                   {offsets_partition: (producer_id, producer_epoch)})
        code = codes.get(offsets_partition, E.NONE)
        return E.NONE if code == E.NONE else txn_offset_commit_verification_error(code, version)

    async def _verify(self, transactional_id: str, batches: dict[TopicPartition, tuple[int, int]],
                      ask_ahead: bool = False) -> dict[TopicPartition, int]:
        """The coordinator's error for each partition that must not be appended;
        ``ask_ahead``: also about the other partitions of the same topics led here."""
        image = self.replicas.image

        def led_here(tp: TopicPartition) -> bool:
            topic = image.topics.get(tp.topic)
            reg = None if topic is None else topic.partitions.get(tp.partition)
            return reg is not None and reg.leader == self.broker_id
        # A partition led elsewhere is refused by the append (NOT_LEADER_OR_FOLLOWER): no
        # question, and no entry that no marker here would ever clear.
        todo = {tp: pe for tp, pe in batches.items()
                if led_here(tp) and not self.verification.is_verified(tp, *pe)}
        if not todo:
            return {}
        if len(set(todo.values())) > 1:
            # Kafka: one transactional producer per request (InvalidPidMappingException).
            return {tp: E.INVALID_PRODUCER_ID_MAPPING for tp in todo}
        (producer_id, producer_epoch), = set(todo.values())
        guards = {tp: self.verification.start(tp, producer_id, producer_epoch) for tp in todo}
        # The producer's next batches for the other partitions of these topics led here
        # need no question of their own if this one covers them (VerificationState).
        ahead: dict[TopicPartition, int] = {}
        for tp in self._led_partitions({tp.topic for tp in todo}) if ask_ahead else ():
            if len(ahead) == VERIFY_AHEAD_MAX:
                break
            if tp not in todo and (guard := self.verification.start_ahead(
                    tp, producer_id, producer_epoch)) is not None:
                ahead[tp] = guard
        codes = await self._ask_coordinator(transactional_id, producer_id, producer_epoch,
                                            [*todo, *ahead])
        if ahead and any(codes.get(tp) == E.OPERATION_NOT_ATTEMPTED for tp in todo):
            # A partition asked ahead is one the coordinator's metadata does not know yet
            # (KafkaApis then refuses the whole question): ask about the batches' alone.
            codes = await self._ask_coordinator(transactional_id, producer_id, producer_epoch,
                                                list(todo))
        for tp, guard in ahead.items():
            self.verification.complete_ahead(tp, producer_id, guard, codes.get(tp) == E.NONE)
        errors: dict[TopicPartition, int] = {}
        for tp, guard in guards.items():
            code = codes.get(tp, E.UNKNOWN_SERVER_ERROR)
            if not self.verification.complete(tp, producer_id, guard, code == E.NONE) \
                    and code == E.NONE:
                code = E.INVALID_TXN_STATE     # the transaction ended while we asked
            if code != E.NONE:
                errors[tp] = code
        return errors

    def _led_partitions(self, topics: set[str]) -> list[TopicPartition]:
        image = self.replicas.image
        led = []
        for name in sorted(topics):
            topic = image.topics.get(name)
            if topic is not None:
                led += [TopicPartition(name, p) for p, reg in sorted(topic.partitions.items())
                        if reg.leader == self.broker_id]
        return led

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        def every(code: int) -> dict[TopicPartition, int]:
            return {tp: code for tp in tps}
        topic = self.replicas.image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return every(E.COORDINATOR_NOT_AVAILABLE)
        reg = topic.partitions.get(partition_for_transactional_id(transactional_id,
                                                                  len(topic.partitions)))
        if reg is None or reg.leader < 0:
            return every(E.COORDINATOR_NOT_AVAILABLE)
        cls = messages.AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        req = cls(transactions=[cls.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True,
            topics=[cls.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])])
        try:
            if reg.leader == self.broker_id:
                # This broker is the coordinator: the core answers at once, no round trip
                # through its own listener.
                resp = await self._call("handle_add_partitions_to_txn", req, VERIFY_VERSIONS[1],
                                        self.now_ms())
            else:
                resp = await self.brokers.request(reg.leader, ApiKey.ADD_PARTITIONS_TO_TXN,
                                                  VERIFY_VERSIONS, req)
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.info("verifying %s with broker %d failed: %s", transactional_id, reg.leader, e)
            return every(E.NETWORK_EXCEPTION)
        if resp.error_code != E.NONE:
            return every(E.INVALID_TXN_STATE if resp.error_code == E.CLUSTER_AUTHORIZATION_FAILED
                         else resp.error_code)
        return {TopicPartition(t.name, p.partition_index): p.partition_error_code
                for r in resp.results_by_transaction if r.transactional_id == transactional_id
                for t in r.topic_results for p in t.results_by_partition}
