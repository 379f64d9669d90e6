"""The mirror fetcher's core for one cluster link: which source partition to ask what next.

Theory of operation
-------------------
A destination broker leads some partitions of active mirror topics (``ketch.mirror.*``,
``metadata_log.mirror_topics``). For each, ``MirrorLinkCore`` keeps a ``MirrorPartition``
and plans requests to the SOURCE cluster as a follower plans them to its leader
(``broker.replica.follower``), but as a consumer would send them (replica id -1,
read_uncommitted, so the source answers only below its high watermark: nothing that a
source failover could still take back is ever copied).

Per partition:

    AWAITING_SOURCE --metadata names the source leader--> TRUNCATING or FETCHING
    TRUNCATING --OffsetForLeaderEpoch answered, logs agree--> FETCHING
    FETCHING --source leader changed (metadata epoch moved) / OUT_OF_RANGE--> TRUNCATING
    any --source says not leader, fenced, unknown, or unreachable--> AWAITING_SOURCE

- AWAITING_SOURCE: no source leader known. The link's metadata is refreshed (at once
  after an error, after a backoff that doubles per consecutive failure up to
  ``backoff_max_ms``; else every ``metadata_max_age_ms``).
- TRUNCATING: whenever the source leader may have changed, the local log may hold
  batches the new source leader does not have (only after an unclean election there, or
  after truncate-and-restore of a promoted topic). The core asks the source
  OffsetForLeaderEpoch(latest local epoch) and cuts where the logs diverge
  (``truncation_decision``, KIP-101/KIP-279), exactly as a follower does. A partition
  with no epoch at all skips this.
- FETCHING: Fetch from the local log end offset; whole batches are appended as they are
  (offsets, timestamps, producer ids, partition leader epochs kept) through the port,
  which is the follower append path on the destination leader.

Leader epochs. The batches carry the source's partition leader epochs, and the local
leader epoch cache learns those (the destination leader adds no epoch of its own while
the mirror is active: ``ReplicaManager._apply_registration``), so OffsetForLeaderEpoch
answers from either cluster are in the same space. On promote the destination leader
stamps its own batches with max(its leader epoch, latest cached epoch + 1)
(``broker.replica_manager.record_epoch_for_leader``): strictly above every source epoch
it holds. Limit: two successive destination leaders of a promoted topic that each lack
the other's newest batches may compute the same number; and after both clusters took
writes (split brain), epochs cannot tell their histories apart. Truncate-and-restore is
for a former side that stopped writing.

Lag is the source high watermark from the last Fetch answer minus the local LEO.

Pure: no I/O, no clock (``now_ms`` arguments). The local log is reached through
``MirrorLogPort`` (a synchronous port, like the storage port); the shell
(``broker.mirror.manager``) sends the requests and hands the answers back.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from broker.replica.follower import truncation_decision
from clients.protocol.errors import ErrorCode
from clients.records import RecordError, iter_batches
from clients.types import TopicPartition

__all__ = [
    "MirrorLinkCore", "MirrorLogPort", "MirrorLogState", "MirrorPartitionState",
    "MirrorPartitionStatus", "MirrorAssignment", "SourceEpochAnswer", "SourceEpochQuery",
    "SourceFetch", "SourceFetched", "SourcePartitionMetadata", "SourceWork", "NO_LEADER",
]

NO_LEADER = -1
UNKNOWN_OFFSET = -1

# The source's metadata is older or newer than its leader's view, or the leader moved:
# look the leader up again.
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE,
})


class MirrorPartitionState(enum.Enum):
    AWAITING_SOURCE = "awaiting_source"
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True, slots=True)
class MirrorLogState:
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    latest_epoch: int


class MirrorLogPort(Protocol):
    """The destination leader's log of a mirror partition, as long as this broker leads
    it in ``leader_epoch`` and the mirror is active (else: None / False / an error)."""

    def log_state(self, tp: TopicPartition, leader_epoch: int) -> MirrorLogState | None: ...

    def end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int,
                             epoch: int) -> tuple[int, int]: ...

    def truncate_to(self, tp: TopicPartition, leader_epoch: int, offset: int, now_ms: int) -> bool: ...

    def restart_at(self, tp: TopicPartition, leader_epoch: int, offset: int, now_ms: int) -> bool: ...

    def append(self, tp: TopicPartition, leader_epoch: int, records: bytes | memoryview,
               source_log_start_offset: int, now_ms: int) -> int:
        """The error code (NONE: appended)."""
        ...


@dataclass(frozen=True, slots=True)
class MirrorAssignment:
    """A partition this broker leads as an active mirror through this link."""
    partition: TopicPartition           # destination
    source: TopicPartition              # same index, the source topic's name
    leader_epoch: int                   # the destination leader epoch


@dataclass(frozen=True, slots=True)
class SourcePartitionMetadata:
    source: TopicPartition
    error_code: int
    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SourceEpochQuery:
    partition: TopicPartition
    source: TopicPartition
    current_leader_epoch: int           # the source leader's epoch (KIP-320 fencing)
    leader_epoch: int                   # the local epoch whose end the source is asked


@dataclass(frozen=True, slots=True)
class SourceFetch:
    partition: TopicPartition
    source: TopicPartition
    current_leader_epoch: int
    fetch_offset: int


@dataclass(frozen=True, slots=True)
class SourceWork:
    """One round of requests to one source broker; empty: nothing due before ``wait_ms``."""
    source_leader: int
    epoch_queries: tuple[SourceEpochQuery, ...]
    fetches: tuple[SourceFetch, ...]
    wait_ms: int


@dataclass(frozen=True, slots=True)
class SourceEpochAnswer:
    source: TopicPartition
    error_code: int
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class SourceFetched:
    source: TopicPartition
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes | memoryview | None


@dataclass(frozen=True, slots=True)
class MirrorPartitionStatus:
    """What ``/v1/mirrors`` and the metrics show for one partition."""
    partition: TopicPartition
    source: TopicPartition
    state: MirrorPartitionState
    source_leader: int
    log_end_offset: int
    source_high_watermark: int          # -1 until the first Fetch answer
    last_error: str

    @property
    def lag(self) -> int:
        """Source HW - local LEO; -1 while unknown."""
        if self.source_high_watermark < 0 or self.log_end_offset < 0:
            return -1
        return max(0, self.source_high_watermark - self.log_end_offset)


@dataclass(slots=True)
class MirrorPartition:
    assignment: MirrorAssignment
    state: MirrorPartitionState = MirrorPartitionState.AWAITING_SOURCE
    source_leader: int = NO_LEADER
    source_leader_epoch: int = -1
    fetch_offset: int = 0
    epoch_to_ask: int = -1
    source_high_watermark: int = -1
    retry_at_ms: int = 0
    failures: int = 0                   # consecutive, for the backoff
    last_error: str = ""


class MirrorLinkCore:
    def __init__(self, link: str, port: MirrorLogPort, backoff_ms: int = 100,
                 backoff_max_ms: int = 5_000, metadata_max_age_ms: int = 5_000) -> None:
        assert 0 < backoff_ms <= backoff_max_ms
        self.link = link
        self.port = port
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.partitions: dict[TopicPartition, MirrorPartition] = {}
        # Invariant: at most one destination partition per source partition (a second
        # destination topic mirroring the same source topic waits; see ``assign``).
        self._by_source: dict[TopicPartition, TopicPartition] = {}
        self._metadata_due_ms = 0
        self._metadata_failures = 0
        self.last_metadata_error = ""

    # ------------------------------------------------------------ assignments

    def assign(self, assignments: Iterable[MirrorAssignment], now_ms: int) -> None:
        """The partitions this broker now leads as active mirrors of this link. New ones
        (or a new destination leader epoch) start over: they wait for the source leader."""
        wanted = {a.partition: a for a in assignments}
        for tp in list(self.partitions):
            p = self.partitions[tp]
            if wanted.get(tp) != p.assignment:
                del self.partitions[tp]
                self._by_source.pop(p.assignment.source, None)
        for tp, a in sorted(wanted.items()):
            if tp in self.partitions or a.source in self._by_source:
                continue
            self.partitions[tp] = MirrorPartition(a)
            self._by_source[a.source] = tp
            self._metadata_due_ms = min(self._metadata_due_ms, now_ms)

    def source_topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.assignment.source.topic for p in self.partitions.values()}))

    # ------------------------------------------------------------ source metadata

    def metadata_due(self, now_ms: int) -> bool:
        return bool(self.partitions) and now_ms >= self._metadata_due_ms

    def metadata_wait_ms(self, now_ms: int) -> int:
        return max(1, self._metadata_due_ms - now_ms)

    def _backoff(self, failures: int) -> int:
        return min(self.backoff_max_ms, self.backoff_ms * (1 << min(failures - 1, 20)))

    def _metadata_soon(self, now_ms: int) -> None:
        self._metadata_due_ms = min(self._metadata_due_ms, now_ms + self.backoff_ms)

    def handle_metadata(self, answers: Iterable[SourcePartitionMetadata], now_ms: int) -> None:
        """The source's Metadata answer: who leads each source partition, in which epoch."""
        self._metadata_failures = 0
        self.last_metadata_error = ""
        self._metadata_due_ms = now_ms + self.metadata_max_age_ms
        found = {a.source: a for a in answers}
        for p in self.partitions.values():
            a = found.get(p.assignment.source)
            if a is None:
                a = SourcePartitionMetadata(p.assignment.source, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if a.error_code != ErrorCode.NONE or a.leader_id == NO_LEADER:
                code = a.error_code if a.error_code != ErrorCode.NONE else ErrorCode.LEADER_NOT_AVAILABLE
                self._await_source(p, f"source {p.assignment.source}: {_name(code)}", now_ms)
                continue
            if (p.state is not MirrorPartitionState.AWAITING_SOURCE
                    and a.leader_id == p.source_leader and a.leader_epoch == p.source_leader_epoch):
                continue
            p.source_leader = a.leader_id
            p.source_leader_epoch = a.leader_epoch
            self._start_truncating(p)

    def handle_metadata_failed(self, error: str, now_ms: int) -> None:
        """No source broker answered Metadata: every partition waits, with backoff."""
        self._metadata_failures += 1
        self.last_metadata_error = error
        self._metadata_due_ms = now_ms + self._backoff(self._metadata_failures)
        for p in self.partitions.values():
            if p.state is MirrorPartitionState.AWAITING_SOURCE:
                p.last_error = error

    def _await_source(self, p: MirrorPartition, error: str, now_ms: int) -> None:
        p.state = MirrorPartitionState.AWAITING_SOURCE
        p.source_leader = NO_LEADER
        p.source_leader_epoch = -1
        p.failures += 1
        p.retry_at_ms = now_ms + self._backoff(p.failures)
        p.last_error = error
        self._metadata_due_ms = min(self._metadata_due_ms, p.retry_at_ms)

    def _start_truncating(self, p: MirrorPartition) -> None:
        local = self.port.log_state(p.assignment.partition, p.assignment.leader_epoch)
        if local is None:
            return      # no longer led here: the next ``assign`` drops it
        p.fetch_offset = local.log_end_offset
        p.epoch_to_ask = local.latest_epoch
        if 0 <= p.source_leader_epoch < local.latest_epoch:
            # Local epochs above the source leader's are not the source's (written here
            # after a promote): a source answers UNDEFINED for an epoch newer than all of
            # its own, so ask about our largest epoch it can know; the decision then cuts
            # everything after that epoch's end as well.
            known, _ = self.port.end_offset_for_epoch(
                p.assignment.partition, p.assignment.leader_epoch, p.source_leader_epoch)
            if known >= 0:
                p.epoch_to_ask = known
        # Nothing local could diverge when no batch carries an epoch.
        p.state = (MirrorPartitionState.FETCHING if local.latest_epoch < 0
                   else MirrorPartitionState.TRUNCATING)

    # ------------------------------------------------------------ planning

    def work(self, source_leader: int, now_ms: int) -> SourceWork:
        queries: list[SourceEpochQuery] = []
        fetches: list[SourceFetch] = []
        wait_ms = self.metadata_max_age_ms
        for tp, p in sorted(self.partitions.items()):
            if p.source_leader != source_leader or p.state is MirrorPartitionState.AWAITING_SOURCE:
                continue
            if p.retry_at_ms > now_ms:
                wait_ms = min(wait_ms, p.retry_at_ms - now_ms)
                continue
            a = p.assignment
            if p.state is MirrorPartitionState.TRUNCATING:
                queries.append(SourceEpochQuery(tp, a.source, p.source_leader_epoch, p.epoch_to_ask))
            else:
                fetches.append(SourceFetch(tp, a.source, p.source_leader_epoch, p.fetch_offset))
        return SourceWork(source_leader, tuple(queries), tuple(fetches), max(1, wait_ms))

    def source_leaders(self) -> frozenset[int]:
        """The source brokers some partition fetches from now."""
        return frozenset(p.source_leader for p in self.partitions.values()
                         if p.state is not MirrorPartitionState.AWAITING_SOURCE)

    def _asked(self, source_leader: int, asked: Sequence[SourceEpochQuery | SourceFetch],
               answers: Iterable[SourceEpochAnswer | SourceFetched]):
        """(answer, question, partition) for answers to questions whose partition still
        fetches from ``source_leader`` in the source epoch and local state they were
        asked in."""
        by_source = {q.source: q for q in asked}
        for answer in answers:
            q = by_source.get(answer.source)
            if q is None:
                continue
            p = self.partitions.get(q.partition)
            if (p is None or p.source_leader != source_leader
                    or p.source_leader_epoch != q.current_leader_epoch):
                continue
            yield answer, q, p

    # ------------------------------------------------------------ answers

    def handle_source_unreachable(self, source_leader: int, error: str, now_ms: int) -> None:
        """The connection to a source broker failed: its partitions look the leader up
        again after a backoff (it may have died and another leads now)."""
        for p in self.partitions.values():
            if p.source_leader == source_leader and p.state is not MirrorPartitionState.AWAITING_SOURCE:
                self._await_source(p, f"source broker {source_leader}: {error}", now_ms)

    def _on_error(self, p: MirrorPartition, error_code: int, now_ms: int) -> None:
        if error_code in _METADATA_ERRORS:
            self._await_source(p, f"source {p.assignment.source}: {_name(error_code)}", now_ms)
        else:
            p.failures += 1
            p.retry_at_ms = now_ms + self._backoff(p.failures)
            p.last_error = f"source {p.assignment.source}: {_name(error_code)}"

    def handle_epoch_answers(self, work: SourceWork, answers: Iterable[SourceEpochAnswer],
                             now_ms: int) -> None:
        for a, q, p in self._asked(work.source_leader, work.epoch_queries, answers):
            if p.state is not MirrorPartitionState.TRUNCATING or p.epoch_to_ask != q.leader_epoch:
                continue
            if a.error_code != ErrorCode.NONE:
                self._on_error(p, a.error_code, now_ms)
                continue
            tp, epoch = p.assignment.partition, p.assignment.leader_epoch
            local = self.port.log_state(tp, epoch)
            if local is None:
                continue

            def local_end(asked: int) -> tuple[int, int]:
                return self.port.end_offset_for_epoch(tp, epoch, asked)
            decision = truncation_decision(a.leader_epoch, a.end_offset, local.log_end_offset,
                                           local.high_watermark, local_end)
            if decision.truncate_to < local.log_end_offset:
                if not self.port.truncate_to(tp, epoch, decision.truncate_to, now_ms):
                    continue
            if decision.done:
                after = self.port.log_state(tp, epoch)
                if after is None:
                    continue
                p.state = MirrorPartitionState.FETCHING
                p.fetch_offset = after.log_end_offset
            else:
                p.epoch_to_ask = decision.next_epoch

    def handle_fetched(self, work: SourceWork, fetched: Iterable[SourceFetched], now_ms: int) -> None:
        for f, q, p in self._asked(work.source_leader, work.fetches, fetched):
            if p.state is not MirrorPartitionState.FETCHING or p.fetch_offset != q.fetch_offset:
                continue
            if f.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(p, f, now_ms)
            elif f.error_code != ErrorCode.NONE:
                self._on_error(p, f.error_code, now_ms)
            else:
                self._append(p, f, now_ms)

    def _out_of_range(self, p: MirrorPartition, f: SourceFetched, now_ms: int) -> None:
        tp, epoch = p.assignment.partition, p.assignment.leader_epoch
        if f.log_start_offset >= 0 and p.fetch_offset < f.log_start_offset:
            # Everything we lack is gone at the source (retention): start at its start.
            if self.port.restart_at(tp, epoch, f.log_start_offset, now_ms):
                p.fetch_offset = f.log_start_offset
            return
        # Ahead of the source: find the divergence point by epoch again, after a pause
        # (a source whose HW lags its new leader's LEO answers this for a while).
        p.last_error = f"source {p.assignment.source}: OFFSET_OUT_OF_RANGE at {p.fetch_offset}"
        self._start_truncating(p)
        p.failures += 1
        p.retry_at_ms = now_ms + self._backoff(p.failures)

    def _append(self, p: MirrorPartition, f: SourceFetched, now_ms: int) -> None:
        tp, epoch = p.assignment.partition, p.assignment.leader_epoch
        p.source_high_watermark = f.high_watermark
        records = f.records
        chunk: bytes | memoryview = b""
        if records is not None and len(records) > 0:
            try:
                headers = [(pos, h) for pos, h in iter_batches(records, partial_tail_ok=True)]
            except RecordError as e:
                self._on_error(p, ErrorCode.CORRUPT_MESSAGE, now_ms)
                p.last_error = f"source {p.assignment.source}: corrupt batch: {e}"
                return
            # A source answers with the whole batch holding the fetch offset: skip batches
            # we already have; the fetch may end in a partial batch: keep whole ones only.
            kept = [(pos, h) for pos, h in headers if h.last_offset >= p.fetch_offset]
            if kept:
                start = kept[0][0]
                end = kept[-1][0] + kept[-1][1].size_in_bytes
                first = kept[0][1]
                if first.base_offset < p.fetch_offset:
                    # Our log starts inside a batch (restarted at a source log start that
                    # DeleteRecords put mid-batch): take the batch whole from its base.
                    if not self.port.restart_at(tp, epoch, first.base_offset, now_ms):
                        return
                chunk = memoryview(records)[start:end]
        code = self.port.append(tp, epoch, chunk, f.log_start_offset, now_ms)
        if code != ErrorCode.NONE:
            p.last_error = f"append at {p.fetch_offset}: {_name(code)}"
            self._start_truncating(p)
            p.failures += 1
            p.retry_at_ms = now_ms + self._backoff(p.failures)
            return
        local = self.port.log_state(tp, epoch)
        if local is None:
            return
        p.fetch_offset = local.log_end_offset
        p.failures = 0
        p.last_error = ""

    # ------------------------------------------------------------ status

    def status(self) -> list[MirrorPartitionStatus]:
        out = []
        for tp, p in sorted(self.partitions.items()):
            local = self.port.log_state(tp, p.assignment.leader_epoch)
            out.append(MirrorPartitionStatus(
                tp, p.assignment.source, p.state, p.source_leader,
                UNKNOWN_OFFSET if local is None else local.log_end_offset,
                p.source_high_watermark, p.last_error or self.last_metadata_error))
        return out


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
