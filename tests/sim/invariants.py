"""Named invariants, checked after every simulated event and once the faults have healed.

Theory of operation
-------------------
Like the checks of Kafka's ``RaftEventSimulationTest`` (``SingleLeader``,
``MonotonicHighWatermark``, ``ConsistentCommittedData``) and the VOPR's, each invariant has
a name and a failure names the seed, the invariant and the last events of the run
(``InvariantViolation``), enough to replay it with ``python -m tests.sim --seed N``.

Safety, after every event on a broker (cheap) or every ``deep_check_interval_ms`` of
simulated time (reads logs):

- ``one_leader_per_epoch``: no two brokers ever act as leader of a partition at the same
  leader epoch (``Role.LEADER`` in their cores).
- ``monotonic_high_watermark``: while a broker process leads a partition at one epoch,
  its HW never goes down.
- ``no_acked_record_lost``: every record acknowledged with acks=all, while unclean
  election was off for its topic, is in the log of the partition's current leader, at the
  offset it was acknowledged with.
- ``replicas_identical_below_hw``: any two live replicas hold the same batches (offset,
  value, leader epoch) below their high watermarks. Skipped while unclean election is
  allowed (SCENARIOS L3/L4 break it on purpose until the old leader truncates) and after
  a power cut (``SimCluster.durability_exempt_before_ms``).

- ``acks_all_on_committed_isr``: when a leader completes an acks=all produce, every live
  member of the controller's committed ISR (same leader epoch) has the records.

Liveness, after ``heal``: ``converged`` (every partition has a leader, every replica is
in the committed ISR and has the leader's LEO and HW) within ``settle_ms``; an
availability bug (a follower that stopped fetching for good) fails here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from broker.replica.partition import Role
from clients.records import decode_batches
from clients.types import TopicPartition

if TYPE_CHECKING:
    from tests.sim.cluster import SimBroker, SimCluster
    from tests.sim.workload import History

__all__ = ["InvariantViolation", "Invariants", "replica_log"]


class InvariantViolation(AssertionError):
    def __init__(self, seed: int, invariant: str, detail: str, trace: list[str]) -> None:
        self.seed, self.invariant, self.detail, self.trace = seed, invariant, detail, trace
        lines = "\n  ".join(trace)
        super().__init__(f"SIM_SEED={seed} invariant {invariant} violated: {detail}\n"
                         f"last events:\n  {lines}")

    def __reduce__(self):
        # Verdicts come back from the explorer's worker processes pickled.
        return type(self), (self.seed, self.invariant, self.detail, self.trace)


def replica_log(broker: "SimBroker", tp: TopicPartition, end: int | None = None,
                start: int | None = None) -> dict[int, tuple[str, int]]:
    """offset -> (value, leader epoch) of a replica's log in [start, end) (default: all)."""
    hosted = broker.core.partitions[tp]
    plog = hosted.log
    upper = plog.log_end_offset if end is None else min(end, plog.log_end_offset)
    out: dict[int, tuple[str, int]] = {}
    offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
    while offset < upper:
        r = plog.read(offset, 1 << 20, upper, True)
        if r.records is None or r.records.is_empty:
            break
        for batch in decode_batches(plog.read_records_bytes(r.records)):
            for rec in batch.records:
                if offset <= rec.offset < upper:
                    out[rec.offset] = (rec.value.decode(), batch.header.partition_leader_epoch)
            offset = batch.header.base_offset + batch.header.last_offset_delta + 1
    return out


class Invariants:
    def __init__(self, cluster: "SimCluster", history: "History", partitions: list[TopicPartition],
                 deep_check_interval_ms: int = 300) -> None:
        self.cluster = cluster
        self.history = history
        self.partitions = partitions
        self.deep_check_interval_ms = deep_check_interval_ms
        self._next_deep_ms = 0
        self._leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self._hw: dict[tuple[int, int, TopicPartition, int], int] = {}
        self._verified: dict[TopicPartition, tuple] = {}
        self.checks = 0
        cluster.step_listeners.append(self.on_step)
        cluster.ack_listeners.append(self.check_acks_all_on_committed_isr)

    def fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(self.cluster.seed, invariant, detail, list(self.cluster.trace))

    # ---------------------------------------------------------- continuous

    def on_step(self, node: str) -> None:
        c = self.cluster
        if node.startswith("b"):
            b = c.brokers[int(node[1:])]
            if b.core is not None:
                self._check_leaders(b)
        if c.loop.now_ms >= self._next_deep_ms:
            self._next_deep_ms = c.loop.now_ms + self.deep_check_interval_ms
            self.deep_check()

    def _check_leaders(self, b: "SimBroker") -> None:
        incarnation = self.cluster.loop.node(b.name).incarnation
        for tp, hosted in b.core.partitions.items():
            replica = hosted.replica
            if replica.role is not Role.LEADER:
                continue
            epoch = replica.leader_epoch
            other = self._leader_of_epoch.setdefault((tp, epoch), b.broker_id)
            if other != b.broker_id:
                self.fail("one_leader_per_epoch",
                          f"{tp} has leaders b{other} and b{b.broker_id} at leader epoch {epoch}")
            key = (b.broker_id, incarnation, tp, epoch)
            hw = replica.high_watermark
            before = self._hw.get(key, hw)
            if hw < before:
                self.fail("monotonic_high_watermark",
                          f"{tp} on leader b{b.broker_id} (epoch {epoch}): HW went {before} -> {hw}")
            self._hw[key] = hw

    def deep_check(self) -> None:
        self.checks += 1
        for tp in self.partitions:
            self.check_acked_on_leader(tp)
            # Unclean elections and power cuts may lose committed records; until the
            # stale replicas truncate, they differ below their old HW (checked after heal).
            if not self.cluster.unclean_allowed(tp) and not self.cluster.power_cuts:
                self.check_identical_below_hw(tp)

    def check_acked_on_leader(self, tp: TopicPartition) -> None:
        c = self.cluster
        leader = c.leader_of(tp)
        if leader is None:
            return
        b = c.brokers[leader]
        hosted = b.core.partitions[tp]
        # A leader never truncates during its term: what was verified on it stays verified,
        # and its log is read once, incrementally (the check stays cheap on long runs).
        term = (leader, c.loop.node(b.name).incarnation, hosted.replica.leader_epoch)
        state = self._verified.get(tp)
        if state is None or state[0] != term:
            state = self._verified[tp] = (term, {}, [0], [hosted.log.log_start_offset])
        _, records, verified_upto, read_upto = state
        exempt_before = c.durability_exempt_before_ms()
        acked = self.history.acked_in_order
        while verified_upto[0] < len(acked):
            v, a = acked[verified_upto[0]]
            if a.acks != -1 or a.unclean_allowed or a.partition != tp or a.time_ms <= exempt_before:
                verified_upto[0] += 1
                continue
            if a.offset >= read_upto[0]:
                records.update(replica_log(b, tp, start=read_upto[0]))
                read_upto[0] = hosted.log.log_end_offset
            found = records.get(a.offset)
            if found is None or found[0] != v:
                self.fail("no_acked_record_lost",
                          f"{v} was acknowledged (acks=all) at {tp} offset {a.offset} at t={a.time_ms}; "
                          f"leader b{leader} has {found[0] if found else 'nothing'} there "
                          f"(LEO {hosted.log.log_end_offset})")
            verified_upto[0] += 1

    def check_identical_below_hw(self, tp: TopicPartition) -> None:
        c = self.cluster
        replicas = []
        for b in c.live_brokers():
            hosted = b.core.partitions.get(tp)
            if hosted is None or hosted.replica.role is Role.NONE or not c.loop.is_running(b.name):
                continue
            replicas.append((b, min(hosted.replica.high_watermark, hosted.log.log_end_offset)))
        if len(replicas) < 2:
            return
        # Followers store the leader's batches byte for byte: compare the bytes below the
        # common HW first, and decode only to explain a difference.
        upper = min(hw for _, hw in replicas)
        start = max(b.core.partitions[tp].log.log_start_offset for b, _ in replicas)
        if upper <= start:
            return
        raw = []
        for b, _ in replicas:
            plog = b.core.partitions[tp].log
            r = plog.read(start, 1 << 30, upper, True)
            raw.append(b"" if r.records is None else plog.read_records_bytes(r.records))
        if all(x == raw[0] for x in raw[1:]):
            return
        a_b, _ = replicas[0]
        a = replica_log(a_b, tp, upper, start)
        for other, _ in replicas[1:]:
            o = replica_log(other, tp, upper, start)
            for offset in range(start, upper):
                if offset in a and offset in o and a[offset] != o[offset]:
                    self.fail("replicas_identical_below_hw",
                              f"{tp} offset {offset}: b{a_b.broker_id} has {a[offset]}, "
                              f"b{other.broker_id} has {o[offset]} (common HW {upper})")

    def check_acks_all_on_committed_isr(self, broker_id: int, tp: TopicPartition,
                                        leader_epoch: int, required_offset: int) -> None:
        """At the moment a leader completes an acks=all produce, every live member of the
        ISR the controller has *committed* for that leader epoch holds the records: the
        leader counts every ISR it proposed until it learns the outcome, and the
        controller only adds members the leader proposed, so the committed ISR is never
        wider than what the leader waited for. (This is what a lost AlterPartition
        answer broke; electing the new member later turned it into lost records.)"""
        c = self.cluster
        reg = c.registration(tp)
        if reg is None or reg.leader != broker_id or reg.leader_epoch != leader_epoch or c.power_cuts:
            return
        for r in reg.isr:
            b = c.brokers[r]
            if r == broker_id or b.core is None or not c.loop.is_up(b.name):
                continue
            # A restarted broker opens its logs before it hosts them (it waits for its
            # registration in the metadata log): read the log itself.
            plog = b.core.logs.get_log(tp.topic, tp.partition)
            leo = -1 if plog is None else plog.log_end_offset
            if leo < required_offset:
                self.fail("acks_all_on_committed_isr",
                          f"b{broker_id} acknowledged {tp} up to offset {required_offset - 1} "
                          f"(leader epoch {leader_epoch}) but b{r}, in the committed ISR "
                          f"{list(reg.isr)}, has LEO {leo}")

    # ---------------------------------------------------------- after healing

    def converged(self) -> bool:
        c = self.cluster
        for tp in self.partitions:
            leader = c.leader_of(tp)
            if leader is None:
                return False
            reg = c.registration(tp)
            if set(reg.isr) != set(reg.replicas):
                return False
            lh = c.brokers[leader].core.partitions[tp]
            if lh.replica.high_watermark != lh.log.log_end_offset:
                return False        # a follower has yet to report its LEO to this leader
            for r in reg.replicas:
                b = c.brokers[r]
                if b.core is None or not c.loop.is_running(b.name):
                    return False
                h = b.core.partitions.get(tp)
                if h is None or h.log.log_end_offset != lh.log.log_end_offset:
                    return False
                if h.replica.high_watermark != lh.replica.high_watermark:
                    return False
        return True

    def divergent_after_heal(self, tp: TopicPartition) -> int:
        """Replicas whose whole log (up to the HW, equal everywhere once converged)
        differs from the leader's."""
        c = self.cluster
        leader = c.leader_of(tp)
        lead = replica_log(c.brokers[leader], tp, c.brokers[leader].core.partitions[tp].replica.high_watermark)
        divergent = 0
        for r in c.registration(tp).replicas:
            if r == leader:
                continue
            b = c.brokers[r]
            mine = replica_log(b, tp, b.core.partitions[tp].replica.high_watermark)
            if {o: v[0] for o, v in mine.items()} != {o: v[0] for o, v in lead.items()}:
                divergent += 1
        return divergent
