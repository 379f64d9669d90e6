"""The transaction coordinator's flows, deterministically (pure core, fake clock):
init / add / end / markers / timeout / fencing / load with Prepare* resends markers."""
from __future__ import annotations

from broker.txn.coordinator import COMPLETE_RETRY_BACKOFF_MS, TransactionConfig
from broker.txn.records import TransactionLogImage, TransactionLogValue
from broker.txn.state import TransactionState
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from txn_harness import Harness, add_errors

E = ErrorCode
S = TransactionState
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def _init(h: Harness, tid: str = "txn") -> tuple[int, int]:
    resp = h.init(tid)
    assert resp.error_code == E.NONE, resp
    return resp.producer_id, resp.producer_epoch


def _begin(h: Harness, *tps: TopicPartition) -> tuple[int, int]:
    pid, epoch = _init(h)
    assert set(add_errors(h.add(pid, epoch, *tps)).values()) == {E.NONE}
    return pid, epoch


def test_init_gives_a_new_id_a_producer_id_and_bumps_the_epoch_after() -> None:
    h = Harness()
    assert _init(h) == (100, 0)
    assert _init(h) == (100, 1)                      # same id, next epoch: the old one fenced
    assert _init(h, "other") == (101, 0)
    md = h.core.transaction("txn")
    assert md is not None and (md.state, md.producer_epoch) == (S.EMPTY, 1)
    assert [r.transactional_id for r in h.log] == ["txn", "txn", "other"]


def test_init_refuses_bad_timeouts_and_empty_ids() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1,
                                  transaction_max_timeout_ms=10_000))
    assert h.init(timeout_ms=10_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(tid="").error_code == E.INVALID_REQUEST
    assert h.core.transaction("txn") is None and not h.log


def test_ids_of_partitions_not_led_here_answer_not_coordinator() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=2), load=())
    tid0 = next(f"x{i}" for i in range(100) if h.core.partition_for(f"x{i}") == 0)
    tid1 = next(f"x{i}" for i in range(100) if h.core.partition_for(f"x{i}") == 1)
    h.core.begin_load(0)
    assert h.init(tid0).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    h.run(h.core.complete_load(0, TransactionLogImage(), 1, h.now))
    assert h.init(tid0).error_code == E.NONE
    assert h.init(tid1).error_code == E.NOT_COORDINATOR
    assert h.end(100, 0, True, tid=tid1).error_code == E.NOT_COORDINATOR


def test_commit_writes_prepare_answers_then_markers_then_complete() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0, U0)
    assert add_errors(h.add(pid, epoch, T1)) == {T1: E.NONE}
    assert h.core.transaction("txn").partitions == {T0, T1, U0}
    h.auto_ack = False
    token = h.call_token("handle_end_txn", messages.EndTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, committed=True), 3)
    assert token not in h.answers                    # not before PrepareCommit is durable
    assert h.end(pid, epoch, True).error_code == E.CONCURRENT_TRANSACTIONS   # pending write
    h.ack()
    assert h.answers[token].error_code == E.NONE
    marker, = h.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch,
            marker.partitions) == (pid, epoch, True, 5, {T0, T1, U0})
    md = h.core.transaction("txn")
    assert md.state is S.PREPARE_COMMIT and h.log[-1].value.state_id == S.PREPARE_COMMIT.value
    # Until the markers are written: a retried commit waits, an abort is refused (a new
    # transaction's AddPartitionsToTxn is held: the tests below).
    assert h.end(pid, epoch, True).error_code == E.CONCURRENT_TRANSACTIONS
    assert h.end(pid, epoch, False).error_code == E.INVALID_TXN_STATE
    assert h.core.markers_wanted("txn", pid, epoch, 5)
    h.auto_ack = True
    h.markers_written()
    assert md.state is S.COMPLETE_COMMIT and md.partitions == frozenset()
    assert h.log[-1].value.state_id == S.COMPLETE_COMMIT.value and not h.log[-1].value.partitions
    assert not h.core.markers_wanted("txn", pid, epoch, 5)
    assert h.end(pid, epoch, True).error_code == E.NONE           # a retry after it completed
    assert h.end(pid, epoch, False).error_code == E.INVALID_TXN_STATE
    # The next transaction, same epoch (transaction.version 1).
    assert add_errors(h.add(pid, epoch, T1)) == {T1: E.NONE}
    assert md.state is S.ONGOING and md.txn_start_timestamp_ms == h.now


def test_abort_marks_every_partition_with_abort() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    assert h.end(pid, epoch, False).error_code == E.NONE
    assert h.markers[-1].committed is False
    assert h.end(pid, epoch, False).error_code == E.CONCURRENT_TRANSACTIONS
    assert h.end(pid, epoch, True).error_code == E.INVALID_TXN_STATE
    h.markers_written()
    assert h.core.transaction("txn").state is S.COMPLETE_ABORT
    assert h.end(pid, epoch, True).error_code == E.INVALID_TXN_STATE


def test_end_txn_errors_are_kafkas() -> None:
    h = Harness()
    pid, epoch = _init(h)
    assert h.end(pid, epoch, True).error_code == E.INVALID_TXN_STATE      # Empty: nothing to end
    assert h.end(pid + 1, epoch, True).error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end(pid, epoch, True, tid="unknown").error_code == E.INVALID_PRODUCER_ID_MAPPING
    _init(h)                                                                # epoch bumped
    assert h.end(pid, epoch, True).error_code == E.PRODUCER_FENCED
    assert add_errors(h.add(pid, epoch, T0)) == {T0: E.PRODUCER_FENCED}
    assert add_errors(h.add(pid + 5, epoch + 1, T0)) == {T0: E.INVALID_PRODUCER_ID_MAPPING}


def test_failed_writes_change_nothing_and_answer_coordinator_errors() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    h.auto_ack = False
    token = h.call_token("handle_end_txn", messages.EndTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, committed=True), 3)
    h.ack(E.NOT_ENOUGH_REPLICAS)
    assert h.answers[token].error_code == E.COORDINATOR_NOT_AVAILABLE
    md = h.core.transaction("txn")
    assert md.state is S.ONGOING and md.pending_state is None and not h.markers
    token = h.call_token("handle_end_txn", messages.EndTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, committed=True), 3)
    h.ack(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answers[token].error_code == E.NOT_COORDINATOR


def test_init_during_a_transaction_aborts_it_with_an_epoch_bump_that_fences() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    resp = h.init()
    assert resp.error_code == E.CONCURRENT_TRANSACTIONS        # retried by the client
    marker, = h.markers
    assert (marker.committed, marker.producer_epoch, marker.partitions) == (False, epoch + 1, {T0})
    assert h.log[-1].value.state_id == S.PREPARE_ABORT.value
    assert h.log[-1].value.producer_epoch == epoch + 1
    # The zombie is fenced at once, before the abort completes.
    assert add_errors(h.add(pid, epoch, U0)) == {U0: E.PRODUCER_FENCED}
    assert h.end(pid, epoch, True).error_code == E.PRODUCER_FENCED
    assert h.init().error_code == E.CONCURRENT_TRANSACTIONS    # markers still going
    h.markers_written()
    assert _init(h) == (pid, epoch + 2)


def test_timed_out_transaction_is_aborted_with_an_epoch_bump() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1,
                                  abort_timed_out_transaction_cleanup_interval_ms=1_000))
    resp = h.init(timeout_ms=5_000)
    pid, epoch = resp.producer_id, resp.producer_epoch
    assert set(add_errors(h.add(pid, epoch, T0)).values()) == {E.NONE}
    start = h.now
    h.now = start + 5_000
    assert h.poll() <= 1_000
    assert not h.markers                                     # not past its timeout yet
    h.now = start + 6_000
    h.poll()
    marker, = h.markers
    assert (marker.committed, marker.producer_epoch) == (False, epoch + 1)
    assert h.end(pid, epoch, True).error_code == E.PRODUCER_FENCED
    h.markers_written()
    assert h.core.transaction("txn").state is S.COMPLETE_ABORT


def test_kip360_init_with_the_producers_id_and_epoch() -> None:
    h = Harness()
    pid, epoch = _init(h)
    resp = h.init(producer_id=pid, producer_epoch=epoch)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.NONE, pid, epoch + 1)
    # The same request again (its answer was lost): the same epoch, not another bump.
    resp = h.init(producer_id=pid, producer_epoch=epoch)
    assert (resp.error_code, resp.producer_epoch) == (E.NONE, epoch + 1)
    assert h.init(producer_id=pid, producer_epoch=epoch - 1 if epoch else 7).error_code \
        == E.PRODUCER_FENCED
    assert h.init(producer_id=pid + 50, producer_epoch=0).error_code == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    image = TransactionLogImage({"txn": TransactionLogValue(
        7, 0x7FFE, 60_000, S.COMPLETE_COMMIT.value, frozenset(), 500, 400)})
    h = Harness(image=image)
    resp = h.init()
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.NONE, 100, 0)
    assert h.core.transaction("txn").previous_producer_id == 7


def test_load_resends_markers_of_prepared_transactions_under_the_new_epoch() -> None:
    """The coordinator dies after PrepareCommit was acknowledged: the next leader of the
    partition replays the log and sends the markers again, then completes."""
    first = Harness(coordinator_epoch=5)
    pid, epoch = _begin(first, T0, T1)
    assert first.end(pid, epoch, True).error_code == E.NONE
    # ... and the process is killed before the markers are written: only the log remains.
    image = TransactionLogImage()
    for record in first.log:
        image.replay(record)
    second = Harness(coordinator_epoch=6, image=image)
    marker, = second.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch,
            marker.partitions) == (pid, epoch, True, 6, {T0, T1})
    assert not second.core.markers_wanted("txn", pid, epoch, 5)    # the old epoch's are not
    second.markers_written()
    assert second.core.transaction("txn").state is S.COMPLETE_COMMIT
    assert second.end(pid, epoch, True).error_code == E.NONE


def test_unload_answers_waiting_requests_and_forgets_the_ids() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    h.auto_ack = False
    token = h.call_token("handle_end_txn", messages.EndTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, committed=True), 3)
    h.run(h.core.unload_partition(0, h.now))
    assert h.answers[token].error_code == E.NOT_COORDINATOR
    assert h.core.transaction("txn") is None
    h.ack()                                            # the late acknowledgement is ignored
    assert not h.markers
    assert h.init().error_code == E.NOT_COORDINATOR


def test_complete_write_failure_is_retried() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    assert h.end(pid, epoch, True).error_code == E.NONE
    h.auto_ack = False
    h.markers_written()
    h.ack(E.NOT_ENOUGH_REPLICAS)
    md = h.core.transaction("txn")
    assert md.state is S.PREPARE_COMMIT and md.pending_state is None
    assert h.poll() <= COMPLETE_RETRY_BACKOFF_MS
    h.now += COMPLETE_RETRY_BACKOFF_MS
    h.poll()
    h.ack()
    assert md.state is S.COMPLETE_COMMIT


def test_verify_only_answers_per_partition_without_writing() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0)
    written = len(h.log)
    assert add_errors(h.verify(pid, epoch, T0, T1)) == {T0: E.NONE, T1: E.TRANSACTION_ABORTABLE}
    assert add_errors(h.verify(pid, epoch + 1, T0)) == {T0: E.PRODUCER_FENCED}
    assert add_errors(h.verify(pid, epoch, T0, tid="nope")) == {T0: E.INVALID_PRODUCER_ID_MAPPING}
    assert len(h.log) == written
    assert h.end(pid, epoch, True).error_code == E.NONE
    assert add_errors(h.verify(pid, epoch, T0)) == {T0: E.CONCURRENT_TRANSACTIONS}
    h.markers_written()
    assert add_errors(h.verify(pid, epoch, T0)) == {T0: E.TRANSACTION_ABORTABLE}


def test_batched_add_partitions_answers_each_transaction() -> None:
    h = Harness()
    a = h.init("a")
    b = h.init("b")
    R = messages.AddPartitionsToTxnRequest
    resp = h.call("handle_add_partitions_to_txn", R(transactions=[
        R.AddPartitionsToTxnTransaction(transactional_id="a", producer_id=a.producer_id,
                                        producer_epoch=a.producer_epoch, verify_only=False,
                                        topics=[R.AddPartitionsToTxnTopic(name="t", partitions=[0])]),
        R.AddPartitionsToTxnTransaction(transactional_id="b", producer_id=b.producer_id,
                                        producer_epoch=b.producer_epoch + 1, verify_only=False,
                                        topics=[R.AddPartitionsToTxnTopic(name="t", partitions=[1])]),
    ]), 5)
    assert resp.error_code == E.NONE
    by_txn = {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                   for t in r.topic_results for p in t.results_by_partition}
              for r in resp.results_by_transaction}
    assert by_txn == {"a": {("t", 0): E.NONE}, "b": {("t", 1): E.PRODUCER_FENCED}}


def test_unknown_partitions_are_refused_and_the_others_not_attempted() -> None:
    h = Harness()
    pid, epoch = _init(h)
    written = len(h.log)
    assert add_errors(h.add(pid, epoch, T0, TopicPartition("t", 9), TopicPartition("gone", 0))) == {
        T0: E.OPERATION_NOT_ATTEMPTED, TopicPartition("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(h.log) == written and h.core.transaction("txn").state is S.EMPTY


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, epoch = _init(h)
    resp = h.call("handle_add_offsets_to_txn", messages.AddOffsetsToTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, group_id="my-group"), 3)
    assert resp.error_code == E.NONE
    # "my-group".hashCode() = -1906497762 (String.hashCode's definition); abs % 50 = 12
    assert h.core.transaction("txn").partitions == {TopicPartition("__consumer_offsets", 12)}


def test_describe_and_list_transactions() -> None:
    h = Harness()
    pid, epoch = _begin(h, T0, U0)
    _init(h, "idle")
    h.now += 5_000
    resp = h.call("handle_describe_transactions", messages.DescribeTransactionsRequest(
        transactional_ids=["txn", "nope"]), 0)
    txn, nope = resp.transaction_states
    assert (txn.error_code, txn.transaction_state, txn.producer_id, txn.producer_epoch,
            txn.transaction_timeout_ms, txn.transaction_start_time_ms) == (
        E.NONE, "Ongoing", pid, epoch, 60_000, 1_000)
    assert {(t.topic, tuple(t.partitions)) for t in txn.topics} == {("t", (0,)), ("u", (0,))}
    assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND

    def listed(states: list[str] | None = None, pids: list[int] | None = None,
               duration_ms: int = -1) -> tuple[list[str], list[str]]:
        r = h.call("handle_list_transactions", messages.ListTransactionsRequest(
            state_filters=states or [], producer_id_filters=pids or [],
            duration_filter=duration_ms), 1)
        assert r.error_code == E.NONE
        return sorted(t.transactional_id for t in r.transaction_states), r.unknown_state_filters
    assert listed() == (["idle", "txn"], [])
    assert listed(["Ongoing", "Bogus"]) == (["txn"], ["Bogus"])
    assert listed(["Bogus"]) == ([], ["Bogus"])
    assert listed(pids=[pid]) == (["txn"], [])
    assert listed(["Ongoing"], duration_ms=4_999) == (["txn"], [])
    assert listed(["Ongoing"], duration_ms=5_000) == ([], [])


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1,
                                  transactional_id_expiration_ms=10_000,
                                  remove_expired_transaction_cleanup_interval_ms=1_000))
    _init(h, "idle")
    pid, epoch = _begin(h, T0)
    h.now += 20_000
    h.poll()
    assert h.core.transaction("idle") is None
    assert h.log[-1].transactional_id == "idle" and h.log[-1].value is None
    assert h.core.transaction("txn") is not None              # ongoing: never expired here


# ------------------------------------------------------------ held AddPartitionsToTxn

def _committing(h: Harness) -> tuple[int, int]:
    """A transaction whose PrepareCommit is durable and whose markers are not yet written."""
    pid, epoch = _begin(h, T0)
    assert h.end(pid, epoch, True).error_code == E.NONE
    assert h.core.transaction("txn").state is S.PREPARE_COMMIT
    return pid, epoch


def _add_token(h: Harness, pid: int, epoch: int, *tps: TopicPartition) -> int:
    R = messages.AddPartitionsToTxnRequest
    return h.call_token("handle_add_partitions_to_txn", R(
        v3_and_below_transactional_id="txn", v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=tp.topic, partitions=[tp.partition])
                             for tp in tps]), 3)


def test_the_next_transactions_add_is_held_until_the_previous_one_is_complete() -> None:
    h = Harness()
    pid, epoch = _committing(h)
    token = _add_token(h, pid, epoch, T1)
    assert token not in h.answers                       # not CONCURRENT_TRANSACTIONS
    assert h.poll() <= h.config.add_partitions_hold_ms
    h.auto_ack = False
    h.markers_written()
    # CompleteCommit and the next transaction's Ongoing: one batch, one replicated write.
    append, = h.appends
    assert [(r.value.state_id, r.value.partitions) for r in append.records] == \
        [(S.COMPLETE_COMMIT.value, frozenset()), (S.ONGOING.value, {T1})]
    assert token not in h.answers
    h.ack()
    assert add_errors(h.answers[token]) == {T1: E.NONE}
    md = h.core.transaction("txn")
    assert (md.state, md.partitions, md.pending_state) == (S.ONGOING, {T1}, None)
    assert md.txn_start_timestamp_ms == h.now
    # What a new coordinator loads from the log is what this one holds.
    image = TransactionLogImage()
    for record in h.log:
        image.replay(record)
    reloaded = Harness(image=image)
    assert reloaded.core.transaction("txn") == md


def test_a_failed_merged_write_holds_the_add_again_and_retries_the_complete() -> None:
    h = Harness()
    pid, epoch = _committing(h)
    token = _add_token(h, pid, epoch, T1)
    h.auto_ack = False
    h.markers_written()
    h.ack(E.NOT_ENOUGH_REPLICAS)
    md = h.core.transaction("txn")
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, None) and token not in h.answers
    h.now += COMPLETE_RETRY_BACKOFF_MS
    h.poll()                                            # Complete* again, the add with it
    assert len(h.appends[0].records) == 2
    h.ack()
    assert add_errors(h.answers[token]) == {T1: E.NONE}
    assert (md.state, md.partitions) == (S.ONGOING, {T1})


def test_a_held_add_answers_concurrent_transactions_at_its_deadline() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1,
                                  add_partitions_hold_ms=500))
    pid, epoch = _committing(h)
    token = _add_token(h, pid, epoch, T1)
    h.now += 499
    assert h.poll() == 1 and token not in h.answers
    h.now += 1
    h.poll()
    assert add_errors(h.answers[token]) == {T1: E.CONCURRENT_TRANSACTIONS}
    h.markers_written()                                 # answered once only (the harness checks)
    assert h.core.transaction("txn").state is S.COMPLETE_COMMIT


def test_held_adds_are_answered_in_order_and_unloading_answers_them() -> None:
    h = Harness()
    pid, epoch = _committing(h)
    first = _add_token(h, pid, epoch, T1)
    second = h.call_token("handle_add_offsets_to_txn", messages.AddOffsetsToTxnRequest(
        transactional_id="txn", producer_id=pid, producer_epoch=epoch, group_id="g"), 3)
    h.auto_ack = False
    h.markers_written()
    h.ack()                                  # CompleteCommit + the first add's Ongoing
    assert add_errors(h.answers[first]) == {T1: E.NONE} and second not in h.answers
    h.ack()                                  # the second's own write
    assert h.answers[second].error_code == E.NONE
    assert {tp.topic for tp in h.core.transaction("txn").partitions} == {"t", "__consumer_offsets"}
    # A zombie's add is not held: it is fenced at once, even while the id is busy.
    h.auto_ack = True
    assert h.end(pid, epoch, True).error_code == E.NONE
    assert add_errors(h.add(pid, epoch + 1, T0)) == {T0: E.PRODUCER_FENCED}
    # Unloading the partition answers what is held with NOT_COORDINATOR.
    held = _add_token(h, pid, epoch, T0)
    h.run(h.core.unload_partition(0, h.now))
    assert add_errors(h.answers[held]) == {T0: E.NOT_COORDINATOR}
