"""A deterministic driver for the pure TransactionCoordinator: a fake clock, appends
acknowledged on demand (or at once), producer ids counted up, markers collected."""
from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from broker.txn.coordinator import (
    AllocateProducerId, Append, Completion, SendMarkers, TransactionConfig,
    TransactionCoordinator,
)
from broker.txn.records import TransactionLogImage, TransactionLogRecord
from clients.protocol import messages
from clients.types import TopicPartition

TOPICS = {"t": 3, "u": 1, "__consumer_offsets": 50}


class Harness:
    def __init__(self, config: TransactionConfig | None = None, coordinator_epoch: int = 5,
                 image: TransactionLogImage | None = None, load: tuple[int, ...] = (0,)) -> None:
        self.config = config or TransactionConfig(transaction_state_log_num_partitions=1)
        self.core = TransactionCoordinator(self.config)
        self.core.set_topics(dict(TOPICS))
        self.now = 1_000
        self.next_producer_id = 100
        self.auto_ack = True
        self.answers: dict[int, Any] = {}
        self.appends: deque[Append] = deque()
        self.markers: list[SendMarkers] = []
        self.log: list[TransactionLogRecord] = []    # acknowledged records, in order
        self._tokens = itertools.count(1)
        for p in load:
            self.core.begin_load(p)
            self.run(self.core.complete_load(p, image or TransactionLogImage(), coordinator_epoch,
                                             self.now))

    def run(self, effects: list) -> None:
        queue = deque(effects)
        while queue:
            e = queue.popleft()
            if isinstance(e, Completion):
                assert e.token not in self.answers, "answered twice"
                self.answers[e.token] = e.response
            elif isinstance(e, Append):
                self.appends.append(e)
                if self.auto_ack:
                    queue.extend(self._ack(0))
            elif isinstance(e, AllocateProducerId):
                pid = self.next_producer_id
                self.next_producer_id += 1
                queue.extend(self.core.on_producer_id(e.request_id, pid, self.now))
            else:
                assert isinstance(e, SendMarkers)
                self.markers.append(e)

    def _ack(self, error: int) -> list:
        e = self.appends.popleft()
        if error == 0:
            self.log.extend(e.records)
        return self.core.on_append_result(e.append_id, error, self.now)

    def ack(self, error: int = 0) -> None:
        self.run(self._ack(error))

    def call(self, method: str, request: Any, version: int) -> Any:
        """The answer, or None while the request waits."""
        token = next(self._tokens)
        self.run(getattr(self.core, method)(token, request, version, self.now))
        return self.answers.get(token)

    def call_token(self, method: str, request: Any, version: int) -> int:
        token = next(self._tokens)
        self.run(getattr(self.core, method)(token, request, version, self.now))
        return token

    # ------------------------------------------------------------ requests

    def init(self, tid: str = "txn", timeout_ms: int = 60_000, producer_id: int = -1,
             producer_epoch: int = -1, version: int = 4) -> Any:
        return self.call("handle_init_producer_id", messages.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=producer_id,
            producer_epoch=producer_epoch), version)

    def add(self, pid: int, epoch: int, *tps: TopicPartition, tid: str = "txn") -> Any:
        R = messages.AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return self.call("handle_add_partitions_to_txn", R(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in by_topic.items()]), 3)

    def verify(self, pid: int, epoch: int, *tps: TopicPartition, tid: str = "txn") -> Any:
        R = messages.AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return self.call("handle_add_partitions_to_txn", R(transactions=[
            R.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])]), 4)

    def end(self, pid: int, epoch: int, commit: bool, tid: str = "txn") -> Any:
        return self.call("handle_end_txn", messages.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), 3)

    def markers_written(self, index: int = -1) -> None:
        m = self.markers[index]
        self.run(self.core.on_markers_written(m.transactional_id, m.producer_id,
                                              m.producer_epoch, m.coordinator_epoch, self.now))

    def poll(self) -> int:
        effects, wait_ms = self.core.poll(self.now)
        self.run(effects)
        return wait_ms


def add_errors(resp: Any) -> dict[TopicPartition, int]:
    """AddPartitionsToTxn's per-partition codes, either form."""
    results = resp.results_by_topic_v3_and_below if resp.results_by_transaction in (None, []) \
        else [t for r in resp.results_by_transaction for t in r.topic_results]
    return {TopicPartition(t.name, p.partition_index): p.partition_error_code
            for t in results for p in t.results_by_partition}
