"""Where a record's end-to-end time goes: sampled per-stage latency of the acks=all path.

Theory of operation
-------------------
Issue 22 asks for the path of one batch, stage by stage. On a leader, one batch per
partition at a time is traced (a new trace starts with the next append once the previous
one has ended, or after ``max_age_ns``); each stage is observed (``observe(stage, ms)``,
a Prometheus histogram in the broker) the first time its event happens, as the time since
the previous stage's event:

    produce_queue    the Produce request's bytes were read -> its append began (the
                     connection serves one request at a time: the wait behind earlier ones)
    leader_append    append began -> appended to the leader's log
    follower_fetch   appended -> the first follower fetch that returns it (a parked
                     follower fetch is woken by the append)
    follower_flush   -> that fetch's response written to the socket
    follower_report  -> the first follower fetch whose offset is past it (that follower's
                     LEO: it read the response, appended and fetched again; the follower's
                     own part is its follower_append and follower_refetch, the rest is
                     two hops between processes, mostly each one's wait for a CPU)
    hw_advance       -> the high watermark past it (the other in-sync followers' reports)
    produce_ack      HW -> the acks=all wait of its Produce resumed
    consumer_fetch   HW -> the first consumer fetch answered with it
    consumer_flush   -> that response written to the socket
    total            Produce bytes read -> that consumer response written

Followers add their side of each fetch that brought records (not only traced batches):

    follower_append  fetch response's bytes read from the socket -> its batches appended
                     (the fetcher's wait for its turn of the event loop included)
    follower_refetch appended -> the next fetch sent (reports the new LEO)

Pure: times are arguments (monotonic nanoseconds from one clock shared by the processes
of a machine, so a follower's stages line up with its leader's); the shells
(``broker.replica_driver``, ``broker.apis``, ``broker.fetcher``) call it. The cost when
enabled is a dict lookup per append and per read; ``enabled=False`` makes every call
return at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from clients.types import TopicPartition

__all__ = ["LEADER_STAGES", "FOLLOWER_STAGES", "LatencyTracer"]

LEADER_STAGES = ("produce_queue", "leader_append", "follower_fetch", "follower_flush",
                 "follower_report", "hw_advance", "produce_ack", "consumer_fetch", "consumer_flush", "total")
FOLLOWER_STAGES = ("follower_append", "follower_refetch")
NO_TIME = -1


@dataclass(slots=True)
class _Trace:
    last_offset: int            # the traced batch's last offset
    received_ns: int
    appended_ns: int
    fetched_ns: int = NO_TIME   # a follower fetch returned it
    fetched_by: int = -1        # that follower
    fetch_flushed_ns: int = NO_TIME     # that fetch's response was written
    reported_ns: int = NO_TIME  # a follower fetch reported an offset past it
    hw_ns: int = NO_TIME        # the HW passed it
    acked: bool = False
    consumed_ns: int = NO_TIME  # a consumer fetch answered with it
    flushed: bool = False


class LatencyTracer:
    def __init__(self, observe: Callable[[str, float], None], enabled: bool = True,
                 max_age_ns: int = 1_000_000_000) -> None:
        """``observe(stage, milliseconds)``; ``max_age_ns``: a trace not ended by then
        (no consumer, a lost follower) gives way to a new one."""
        self.observe = observe
        self.enabled = enabled
        self.max_age_ns = max_age_ns
        self._traces: dict[TopicPartition, _Trace] = {}
        self._follower_appended_ns: dict[int, int] = {}     # leader id -> last append

    def _stage(self, stage: str, since_ns: int, now_ns: int) -> None:
        self.observe(stage, max(0, now_ns - since_ns) / 1e6)

    # ------------------------------------------------------------ leader

    def appended(self, tp: TopicPartition, last_offset: int, received_ns: int, started_ns: int,
                 now_ns: int, high_watermark: int) -> None:
        """A Produce's batches for ``tp`` are in the leader's log up to ``last_offset``."""
        if not self.enabled or self.tracing(tp, now_ns):
            return                      # one batch per partition at a time
        self._traces[tp] = trace = _Trace(last_offset, received_ns, now_ns)
        self._stage("produce_queue", received_ns, started_ns)
        self._stage("leader_append", started_ns, now_ns)
        self._hw(trace, high_watermark, now_ns)      # RF 1: committed by the append itself

    def tracing(self, tp: TopicPartition, now_ns: int) -> bool:
        """Whether a batch of ``tp`` is traced now (an append then starts no trace: its
        caller need not look up the HW ``appended`` takes)."""
        trace = self._traces.get(tp)
        return trace is not None and not trace.flushed and now_ns - trace.received_ns < self.max_age_ns

    def follower_read(self, tp: TopicPartition, fetch_offset: int, returned_last_offset: int | None,
                      high_watermark: int, now_ns: int, replica_id: int = -1) -> None:
        """Follower ``replica_id``'s fetch was read: its offset (the follower's LEO), the
        last offset it returns (None: nothing), and the HW after it."""
        if not self.enabled:
            return
        trace = self._traces.get(tp)
        if trace is None:
            return
        if trace.fetched_ns == NO_TIME and returned_last_offset is not None \
                and fetch_offset <= trace.last_offset <= returned_last_offset:
            trace.fetched_ns, trace.fetched_by = now_ns, replica_id
            self._stage("follower_fetch", trace.appended_ns, now_ns)
        if trace.reported_ns == NO_TIME and trace.fetched_ns != NO_TIME and fetch_offset > trace.last_offset:
            trace.reported_ns = now_ns
            since = trace.fetch_flushed_ns if trace.fetch_flushed_ns != NO_TIME else trace.fetched_ns
            self._stage("follower_report", since, now_ns)
        self._hw(trace, high_watermark, now_ns)

    def follower_flushed(self, replica_id: int, tps: Iterable[TopicPartition], now_ns: int) -> None:
        """Follower ``replica_id``'s fetch response, which returned records of ``tps``, is
        written."""
        if not self.enabled:
            return
        for tp in tps:
            trace = self._traces.get(tp)
            if (trace is not None and trace.fetched_by == replica_id and trace.fetched_ns != NO_TIME
                    and trace.fetch_flushed_ns == NO_TIME):
                trace.fetch_flushed_ns = now_ns
                self._stage("follower_flush", trace.fetched_ns, now_ns)

    def _hw(self, trace: _Trace, high_watermark: int, now_ns: int) -> None:
        if trace.hw_ns != NO_TIME or high_watermark <= trace.last_offset:
            return
        trace.hw_ns = now_ns
        since = trace.reported_ns if trace.reported_ns != NO_TIME else trace.appended_ns
        self._stage("hw_advance", since, now_ns)

    def produce_acked(self, tp: TopicPartition, required_offset: int, now_ns: int) -> None:
        """The acks=all wait for ``required_offset`` (last offset + 1) resumed."""
        if not self.enabled:
            return
        trace = self._traces.get(tp)
        if trace is None or trace.acked or trace.hw_ns == NO_TIME or required_offset != trace.last_offset + 1:
            return
        trace.acked = True
        self._stage("produce_ack", trace.hw_ns, now_ns)

    def consumer_answered(self, reads: Iterable[tuple[TopicPartition, int, int]],
                          now_ns: int) -> list[TopicPartition]:
        """A consumer fetch is answered with (partition, fetch offset, last offset
        returned) reads; the traced partitions among them, for ``consumer_flushed``."""
        if not self.enabled:
            return []
        traced = []
        for tp, fetch_offset, last_offset in reads:
            trace = self._traces.get(tp)
            if (trace is None or trace.consumed_ns != NO_TIME or trace.hw_ns == NO_TIME
                    or not fetch_offset <= trace.last_offset <= last_offset):
                continue
            trace.consumed_ns = now_ns
            self._stage("consumer_fetch", trace.hw_ns, now_ns)
            traced.append(tp)
        return traced

    def consumer_flushed(self, tps: Iterable[TopicPartition], now_ns: int) -> None:
        """The consumer response that carried these traced batches is written."""
        for tp in tps:
            trace = self._traces.get(tp)
            if trace is None or trace.flushed or trace.consumed_ns == NO_TIME:
                continue
            trace.flushed = True        # ends the trace: the next append starts another
            self._stage("consumer_flush", trace.consumed_ns, now_ns)
            self._stage("total", trace.received_ns, now_ns)

    # ------------------------------------------------------------ follower

    def follower_fetched(self, leader_id: int, received_ns: int, appended_ns: int) -> None:
        """A fetch response from ``leader_id`` with records arrived at ``received_ns``;
        appended by ``appended_ns``."""
        if not self.enabled:
            return
        self._stage("follower_append", received_ns, appended_ns)
        self._follower_appended_ns[leader_id] = appended_ns

    def follower_fetch_sent(self, leader_id: int, now_ns: int) -> None:
        """The fetcher for ``leader_id`` sent its next fetch."""
        if not self.enabled:
            return
        appended_ns = self._follower_appended_ns.pop(leader_id, NO_TIME)
        if appended_ns != NO_TIME:
            self._stage("follower_refetch", appended_ns, now_ns)
