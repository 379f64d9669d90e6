"""Simulated clients and the history they write: what was attempted, acknowledged, read.

Theory of operation
-------------------
``SimProducer`` is a Kafka producer reduced to what the data-plane contract is about:
one partition, ``max.in.flight.requests.per.connection=1``, batches built with
``clients.records.build_batch``, each record's value unique (``"<producer>-<n>"``), so the
checker can tell every record apart. It sends to the broker it believes leads the
partition; on a retriable error or a timeout (``request_timeout_ms``: the answer may
have been lost after the append, SCENARIOS N6) it asks a random broker for metadata
and resends the *same* batch: with ``enable.idempotence`` the same producer id, epoch
and sequence, so the leader can recognise a duplicate. After ``delivery_timeout_ms`` a
batch is given up (outcome unknown) and an idempotent producer bumps its epoch, as
Kafka's producer does (KIP-360), so its next sequence starts at 0.
``acks=0`` sends and forgets: such records count as *sent*, never acknowledged.

``History`` is SCENARIOS.md's log of attempts; ``History.judge(final_log)`` computes the
figures (acked, lost, duplicated, reordered, phantom) against what a fresh reader found.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch, decode_batches
from clients.types import TopicPartition

if TYPE_CHECKING:
    from tests.sim.cluster import SimCluster

__all__ = ["Figures", "History", "SimProducer", "read_partition"]

RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
})


@dataclass(slots=True)
class Acked:
    offset: int
    acks: int
    time_ms: int
    # True when an unclean election was possible for the partition at ack time: the
    # no-loss promise does not cover such records (SCENARIOS L3/L4).
    unclean_allowed: bool
    partition: TopicPartition


@dataclass(frozen=True, slots=True)
class Figures:
    acked: int
    lost: int                 # acknowledged (acks=all) but not in the final log
    lost_acks1: int           # acknowledged by the leader alone (acks=1), not in the final log
    lost_sent: int            # acks=0: sent, never told, not in the final log
    duplicated: int
    reordered: int
    phantom: int
    lost_values: tuple[str, ...] = ()
    lost_exempt: int = 0      # of ``lost``: unclean election allowed, or a correlated power cut


@dataclass(slots=True)
class History:
    attempted: set[str] = field(default_factory=set)
    acked: dict[str, Acked] = field(default_factory=dict)
    acked_in_order: list[tuple[str, Acked]] = field(default_factory=list)
    sent_acks0: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    errors: dict[int, int] = field(default_factory=dict)      # error code -> count seen
    order: dict[str, list[str]] = field(default_factory=dict)  # producer -> values in send order

    def judge(self, final: list[tuple[int, str]], exempt_before_ms: int = -1) -> Figures:
        """``final``: (offset, value) of every record a fresh reader found, in log order.
        ``lost`` counts acks=all records lost, including those a correlated power cut
        exempts from the promise (``lost_exempt``)."""
        seen: dict[str, int] = {}
        for _, v in final:
            seen[v] = seen.get(v, 0) + 1
        lost = tuple(sorted(v for v, a in self.acked.items() if a.acks == -1 and v not in seen))
        lost_exempt = sum(1 for v in lost if self.acked[v].time_ms <= exempt_before_ms
                          or self.acked[v].unclean_allowed)
        lost_acks1 = sum(1 for v, a in self.acked.items() if a.acks == 1 and v not in seen)
        lost_sent = sum(1 for v in self.sent_acks0 if v not in seen)
        duplicated = sum(n - 1 for n in seen.values() if n > 1)
        phantom = sum(1 for v in seen if v not in self.attempted)
        reordered = 0
        position = {}
        for i, (_, v) in enumerate(final):
            position.setdefault(v, i)
        for values in self.order.values():
            found = [position[v] for v in values if v in position]
            reordered += sum(1 for a, b in zip(found, found[1:]) if b < a)
        return Figures(len(self.acked), len(lost), lost_acks1, lost_sent, duplicated, reordered,
                       phantom, lost, lost_exempt)


def read_partition(cluster: "SimCluster", tp: TopicPartition) -> list[tuple[int, str]] | None:
    """A fresh consumer: every record from the log start up to the HW, through the
    leader's ``read`` (the consumer path, replica_id -1). None: no leader now."""
    leader = cluster.leader_of(tp)
    if leader is None:
        return None
    core = cluster.brokers[leader].core
    out: list[tuple[int, str]] = []
    offset = core.partitions[tp].log.log_start_offset
    while True:
        r = core.read(tp, offset, 1 << 20, -1, -1, cluster.loop.now_ms, True)
        assert r.error_code == ErrorCode.NONE, r.error_code
        if r.records is None or r.records.is_empty:
            return out
        for batch in decode_batches(r.log.read_records_bytes(r.records)):
            for rec in batch.records:
                if rec.offset >= offset:
                    out.append((rec.offset, rec.value.decode()))
            offset = batch.header.base_offset + batch.header.last_offset_delta + 1


class SimProducer:
    def __init__(self, cluster: "SimCluster", name: str, tp: TopicPartition, history: History, *,
                 acks: int = -1, idempotent: bool = True, producer_id: int = 1000,
                 interval_ms: int = 20, batch_records_max: int = 3,
                 request_timeout_ms: int = 300, delivery_timeout_ms: int = 4_000,
                 retry_backoff_ms: int = 50) -> None:
        self.cluster = cluster
        self.name = name
        self.tp = tp
        self.history = history
        self.acks = acks
        self.idempotent = idempotent
        self.producer_id = producer_id if idempotent else -1
        self.producer_epoch = 0 if idempotent else -1
        self.next_sequence = 0
        self.interval_ms = interval_ms
        self.batch_records_max = batch_records_max
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.leader: int | None = None
        self.count = 0
        self.remaining = 0
        self.running = False
        self._batch: tuple[list[str], bytes, int] | None = None    # values, bytes, first send time
        self._request = 0
        history.order.setdefault(name, [])

    @property
    def loop(self):
        return self.cluster.loop

    def produce(self, records: int) -> None:
        """Send ``records`` more records, one batch at a time."""
        self.remaining += records
        if not self.running:
            self.running = True
            self.loop.after(0, self.name, self._next_batch)

    def stop(self) -> None:
        self.remaining = 0

    @property
    def idle(self) -> bool:
        return self._batch is None and self.remaining == 0

    def _next_batch(self) -> None:
        if self._batch is not None:
            return
        if self.remaining <= 0:
            self.running = False
            return
        n = min(self.remaining, self.cluster.rng.randint(1, self.batch_records_max))
        self.remaining -= n
        values = [f"{self.name}-{self.count + i}" for i in range(n)]
        self.count += n
        now = self.loop.now_ms
        data = build_batch([Record(i, now, None, v.encode()) for i, v in enumerate(values)],
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=self.next_sequence if self.idempotent else -1)
        if self.idempotent:
            self.next_sequence += n
        self.history.attempted.update(values)
        self.history.order[self.name].extend(values)
        self._batch = (values, data, now)
        self._send()

    def _send(self) -> None:
        if self.leader is None:
            self._refresh_metadata()
            return
        values, data, _ = self._batch
        self._request += 1
        rid = self._request
        broker = self.cluster.brokers[self.leader]
        net = self.cluster.network
        tp, acks = self.tp, self.acks

        def at_broker() -> None:
            broker.handle_produce(tp, data, acks,
                                  lambda code, offset: net.send(broker.name, self.name,
                                                                lambda: self._answered(rid, code, offset)))
        net.send(self.name, broker.name, at_broker)
        if acks == 0:
            self.history.sent_acks0.update(values)
            self._batch = None
            self.loop.after(self.interval_ms, self.name, self._next_batch)
            return
        self.loop.after(self.request_timeout_ms, self.name, lambda: self._timed_out(rid))

    def _answered(self, rid: int, code: int, base_offset: int) -> None:
        if rid != self._request or self._batch is None:
            return
        self._request += 1                       # later answers to this request are stale
        values, _, _ = self._batch
        self.history.errors[code] = self.history.errors.get(code, 0) + 1
        if code == ErrorCode.NONE:
            unclean = self.cluster.unclean_allowed(self.tp)
            for i, v in enumerate(values):
                a = Acked(base_offset + i, self.acks, self.loop.now_ms, unclean, self.tp)
                self.history.acked[v] = a
                self.history.acked_in_order.append((v, a))
            self.cluster.note(f"{self.name} acked {values[0]}..{values[-1]} at {base_offset} "
                              f"by b{self.leader} (acks={self.acks})")
            self._batch = None
            self.loop.after(self.interval_ms, self.name, self._next_batch)
        elif code in RETRIABLE:
            if code != ErrorCode.NOT_ENOUGH_REPLICAS:
                self.leader = None
            self._retry()
        else:
            self._give_up(f"error {ErrorCode(code).name}")

    def _timed_out(self, rid: int) -> None:
        if rid != self._request or self._batch is None:
            return
        self._request += 1
        self.leader = None
        self._retry()

    def _retry(self) -> None:
        _, _, first_sent = self._batch
        if self.loop.now_ms - first_sent >= self.delivery_timeout_ms:
            self._give_up("delivery timeout")
            return
        self.loop.after(self.retry_backoff_ms, self.name, self._send)

    def _give_up(self, why: str) -> None:
        values, _, _ = self._batch
        self.history.failed.update(values)
        self.cluster.note(f"{self.name} gave up {values[0]}..{values[-1]}: {why}")
        self._batch = None
        if self.idempotent:
            # The outcome is unknown: a new epoch, whose sequences start again at 0.
            self.producer_epoch += 1
            self.next_sequence = 0
        self.loop.after(self.interval_ms, self.name, self._next_batch)

    def _refresh_metadata(self) -> None:
        """Ask a random broker who leads the partition (its own, maybe stale, image)."""
        brokers = list(self.cluster.brokers.values())
        broker = self.cluster.rng.choice(brokers)
        net = self.cluster.network
        tp = self.tp
        rid = self._request = self._request + 1

        def at_broker() -> None:
            topic = broker.image.topics.get(tp.topic)
            reg = None if topic is None else topic.partitions.get(tp.partition)
            leader = reg.leader if reg is not None and reg.leader >= 0 else None
            net.send(broker.name, self.name, lambda: answered(leader))

        def answered(leader: int | None) -> None:
            if rid != self._request:
                return
            self._request += 1
            self.leader = leader
            self.loop.after(self.retry_backoff_ms if leader is None else 0, self.name,
                            self._send if self._batch is not None else self._next_batch)

        def timed_out() -> None:
            if rid == self._request:
                self._request += 1
                self._retry()
        net.send(self.name, broker.name, at_broker)
        self.loop.after(self.request_timeout_ms, self.name, timed_out)


def values_of(final: Iterable[tuple[int, str]]) -> list[str]:
    return [v for _, v in final]
