"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asks for, so
an idle consumer of many partitions sends and receives only what changed.

Theory of operation
-------------------
A Fetch request carries ``session_id`` and ``session_epoch`` (Kafka's ``FetchMetadata``):

- ``(0, -1)``: a full fetch with no session (what Ketch answered to everything before);
- ``(0, 0)``: a full fetch that asks for a session: the broker caches the partitions and
  answers with a new session id (or 0 when its cache has no room);
- ``(id, 0)``: close session ``id`` and open a new one with this full fetch;
- ``(id, -1)``: close session ``id``; this fetch is full and sessionless;
- ``(id, n > 0)``: an incremental fetch: the request names only partitions that were added
  or whose fetch position changed, plus the partitions to forget; the other partitions of
  the session are fetched as cached. An unknown id is FETCH_SESSION_ID_NOT_FOUND; an epoch
  other than the one the session expects is INVALID_FETCH_SESSION_EPOCH (a lost or
  duplicated request). A good one moves the session's epoch on by one.

The answer to a full fetch holds every partition. The answer to an incremental fetch holds
only partitions with something new for the fetcher: records, an error, or a high
watermark / log start offset other than the one it was last told. The session keeps, per
partition, the position the fetcher asked for and what it was last told.

Topic ids (KIP-516). From Fetch v13 a request names topics by id, and a session keeps its
partitions under ``TopicIdPartition`` keys; before v13, under ``TopicPartition``. A session
remembers which (Kafka's ``usesTopicIds``): an incremental fetch of the other kind is
FETCH_SESSION_TOPIC_ID_ERROR, since its partitions could not be matched with the cached
ones. Resolving an id to a topic (or answering UNKNOWN_TOPIC_ID) is the caller's, on every
fetch, so that a session keeps partitions of a topic not yet in the metadata, as Kafka's
does, and answers them once it is.

The cache is bounded (``max.incremental.fetch.session.cache.slots``), counted in sessions
as Kafka's is (``FetchSessionCache.maybeCreateSession``: ``sessions.size < maxEntries``),
not in partitions: a follower's session holds every partition it follows from this
leader, tens of thousands in a big cluster, and is the session that must exist most (a
follower without one names and is answered every partition on every fetch). A new
session that does not fit evicts the least recently used session that has been idle at
least ``min.incremental.fetch.session.eviction.ms``, or, for a follower (privileged, as in
Kafka), the least recently used consumer session; otherwise the fetch is answered
sessionless (session id 0) and the fetcher simply keeps doing full fetches.

Pure: time is ``now_ms``, new session ids come from a seeded ``random.Random``.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Union

from clients.frozen import fast_init
from clients.protocol.errors import ErrorCode
from clients.types import TopicIdPartition, TopicPartition

__all__ = [
    "FINAL_EPOCH", "INITIAL_EPOCH", "CachedPartition", "FetchContext", "FetchSessionCache",
    "IdlePartitions", "PartitionAsked", "SessionEntry", "SessionPartition", "SessionView",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0

# How a session names a partition: by topic id from Fetch v13, by topic name before.
SessionPartition = Union[TopicPartition, TopicIdPartition]


@fast_init
@dataclass(frozen=True, slots=True)
class PartitionAsked:
    """One partition of a Fetch request, as the session needs it."""
    tp: SessionPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int = -1


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: where the fetcher reads, and what it was last told."""
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def changed_by(self, error_code: int, has_records: bool, high_watermark: int,
                   log_start_offset: int) -> bool:
        """Whether an incremental answer must include this partition; records what the
        fetcher is told."""
        news = (has_records or error_code != ErrorCode.NONE
                or high_watermark != self.high_watermark
                or log_start_offset != self.log_start_offset)
        self.high_watermark, self.log_start_offset = high_watermark, log_start_offset
        return news


@dataclass(slots=True)
class FetchSession:
    session_id: int
    privileged: bool                     # a follower's
    uses_topic_ids: bool                 # created by a Fetch v13+: keys are TopicIdPartitions
    partitions: dict[SessionPartition, CachedPartition]
    next_epoch: int = 1
    last_used_ms: int = 0
    # What the caller derives from the partitions and keeps between fetches (handle_fetch's
    # SessionView). Partitions that came or went since it was made are in ``added`` and
    # ``removed``, in that order, for the caller to bring it up to date (a follower's
    # session changes by a few partitions per fetch while topics are created: no
    # rebuild of tens of thousands).
    memo: Any = None
    added: list[tuple[SessionPartition, CachedPartition]] = field(default_factory=list)
    removed: list[SessionPartition] = field(default_factory=list)


@dataclass(slots=True)
class FetchContext:
    """What one Fetch reads and how its answer is shaped."""
    session_id: int                      # in the response; 0 without a session
    incremental: bool
    partitions: Collection[tuple[SessionPartition, CachedPartition]]
    error_code: int = ErrorCode.NONE     # a request-level error: answer nothing else
    # Incremental: the partitions this request named (added, or their position moved);
    # the session's others are fetched as cached.
    named: set[SessionPartition] = field(default_factory=set)
    session: FetchSession | None = None

    @property
    def memo(self) -> Any:
        """The session's memo (``FetchSession.memo``); None without a session."""
        return None if self.session is None else self.session.memo

    def remember(self, memo: Any) -> None:
        """Keep ``memo``, made from the session's partitions as they are now."""
        if self.session is not None:
            self.session.memo = memo
            self.session.added.clear()
            self.session.removed.clear()

    def take_changes(self) -> tuple[list[SessionPartition], list[tuple[SessionPartition, CachedPartition]]]:
        """The partitions removed from and added to the session since its memo was made
        or last brought up to date, to apply in that order (a partition forgotten and
        asked again in one fetch is in both)."""
        session = self.session
        if session is None or not (session.added or session.removed):
            return [], []
        changes = session.removed, session.added
        session.removed, session.added = [], []
        return changes

    def include(self, cached: CachedPartition, error_code: int, has_records: bool,
                high_watermark: int, log_start_offset: int) -> bool:
        """Whether the answer carries this partition (always, unless incremental)."""
        news = cached.changed_by(error_code, has_records, high_watermark, log_start_offset)
        return news or not self.incremental


# One partition of a session as the fetch reads it: its session key, its name (None: a
# topic id this broker's metadata does not know) and what the session keeps of it.
SessionEntry = tuple[SessionPartition, Union[TopicPartition, None], CachedPartition]
ResolvedEntry = tuple[SessionPartition, TopicPartition, CachedPartition]


@dataclass(slots=True)
class SessionView:
    """A session's partitions as a Fetch reads them, kept between its fetches: by name;
    by id, resolved against the broker's metadata. Made anew when a topic was deleted
    (``deletions_version``); otherwise kept up to date with the session: partitions that
    come are resolved as they come, those that go leave (a follower drops a partition
    from its session while it backs off), and the ids that did not resolve are tried
    again when topics were created (``ids_version``). A leader or ISR change elsewhere
    changes nothing here, so an idle follower's session of ~33,000 partitions at 100k
    costs nothing per fetch. ``readable``: the named ones as a set, what a parked fetch
    waits on; ``idle``: a follower's IdlePartitions, made by its first incremental fetch.
    ``hosted_key``: the broker's own TopicPartition equal to one resolved, kept instead
    of it (one object per replica, not one more per session set it is in)."""
    ids_version: int
    deletions_version: int
    resolve: Any                                # topic id -> name or None (this image)
    hosted_key: Callable[[TopicPartition], TopicPartition] = lambda tp: tp
    resolved: dict[SessionPartition, ResolvedEntry] = field(default_factory=dict)
    unresolved: dict[SessionPartition, SessionEntry] = field(default_factory=dict)
    readable: set[TopicPartition] = field(default_factory=set)
    idle: "IdlePartitions | None" = None

    @classmethod
    def of(cls, partitions: Iterable[tuple[SessionPartition, CachedPartition]], ids_version: int,
           deletions_version: int, resolve: Any,
           hosted_key: Callable[[TopicPartition], TopicPartition] = lambda tp: tp) -> SessionView:
        view = cls(ids_version, deletions_version, resolve, hosted_key)
        view.add(partitions)
        return view

    @property
    def entries(self) -> list[SessionEntry]:
        return [*self.resolved.values(), *self.unresolved.values()]

    def add(self, partitions: Iterable[tuple[SessionPartition, CachedPartition]]) -> None:
        names: dict[Any, str | None] = {}           # a session's partitions share topics
        for key, cached in partitions:
            if isinstance(key, TopicIdPartition):
                topic_id = key.topic_id
                if topic_id in names:
                    name = names[topic_id]
                else:
                    name = names[topic_id] = self.resolve(topic_id)
                if name is None:
                    self.unresolved[key] = (key, None, cached)
                    continue
                self._resolved((key, self.hosted_key(TopicPartition(name, key.partition)), cached))
            else:
                self._resolved((key, key, cached))

    def remove(self, keys: Iterable[SessionPartition]) -> None:
        for key in keys:
            self.unresolved.pop(key, None)
            entry = self.resolved.pop(key, None)
            if entry is not None:
                self.readable.discard(entry[1])
                if self.idle is not None:
                    self.idle.remove(entry[1])

    def topics_created(self, ids_version: int, resolve: Any) -> None:
        """Topics were created (none deleted) since: try the unresolved ids again."""
        self.ids_version, self.resolve = ids_version, resolve
        if self.unresolved:
            still, self.unresolved = self.unresolved, {}
            self.add((key, cached) for key, _, cached in still.values())

    def _resolved(self, entry: ResolvedEntry) -> None:
        key, tp, _ = entry
        if self.idle is not None and key in self.resolved:
            self.idle.remove(tp)            # the session's new CachedPartition replaces it
        self.resolved[key] = entry
        self.readable.add(tp)
        if self.idle is not None:
            self.idle.add(tp, entry)


@dataclass(slots=True)
class IdlePartitions:
    """A follower session's partitions on its leader, split into the ones the next fetch
    must look at (``active``) and the idle ones it need not (``quiet``: at its last look
    the follower was caught up there and had been told the HW and log start). A quiet
    partition becomes active when it changes on the leader (``wake``, from the leader's
    numbered partition changes after ``change_seq``) or the fetch names it; every
    ``recheck_ms`` all become active, for changes the leader does not number (a log start
    moved by retention). So an idle follower's fetch costs what changed, not its session's
    size (Kafka's leaders read every partition of a session per fetch)."""
    entries: dict[TopicPartition, Any]         # every partition, by name: the caller's entry
    change_seq: int
    recheck_at_ms: int
    active: dict[TopicPartition, Any] = field(default_factory=dict)
    quiet: set[TopicPartition] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.active = dict(self.entries)

    def wake(self, tps: Iterable[TopicPartition]) -> None:
        quiet = self.quiet
        woken = quiet.intersection(tps)
        if woken:
            quiet -= woken
            entries, active = self.entries, self.active
            for tp in woken:
                active[tp] = entries[tp]

    def wake_all(self) -> None:
        self.active = dict(self.entries)
        self.quiet = set()

    def add(self, tp: TopicPartition, entry: Any) -> None:
        self.entries[tp] = self.active[tp] = entry

    def remove(self, tp: TopicPartition) -> None:
        self.entries.pop(tp, None)
        self.active.pop(tp, None)
        self.quiet.discard(tp)

    def settle(self, tps: Iterable[TopicPartition]) -> None:
        """``tps`` are idle now: quiet until they change."""
        active, quiet = self.active, self.quiet
        for tp in tps:
            if active.pop(tp, None) is not None:
                quiet.add(tp)


@dataclass(slots=True)
class FetchSessionCache:
    max_sessions: int = 1000             # max.incremental.fetch.session.cache.slots
    eviction_ms: int = 120_000           # min.incremental.fetch.session.eviction.ms
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    sessions: "OrderedDict[int, FetchSession]" = field(default_factory=OrderedDict)  # LRU first
    cached_partitions: int = 0
    evictions: int = 0

    def context(self, session_id: int, epoch: int, asked: Iterable[PartitionAsked],
                forgotten: Iterable[SessionPartition], privileged: bool,
                now_ms: int, uses_topic_ids: bool = False) -> FetchContext:
        """``uses_topic_ids``: the request is Fetch v13+, its partitions TopicIdPartitions."""
        asked = list(asked)
        if epoch == INITIAL_EPOCH or epoch == FINAL_EPOCH:
            if session_id != NO_SESSION:
                self._remove(session_id)
            partitions = [(p.tp, _cached(p)) for p in asked]
            if epoch == INITIAL_EPOCH:
                new = self._create(dict(partitions), privileged, uses_topic_ids, now_ms)
                if new is not None:
                    return FetchContext(new.session_id, False, new.partitions.items(), session=new)
            return FetchContext(NO_SESSION, False, partitions)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(NO_SESSION, False, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.next_epoch:
            return FetchContext(NO_SESSION, False, [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            # Names cannot be matched with ids (nor ids with names): the fetcher starts anew.
            return FetchContext(NO_SESSION, False, [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        before = len(session.partitions)
        for tp in forgotten:
            if session.partitions.pop(tp, None) is not None and session.memo is not None:
                session.removed.append(tp)
        named = set()
        for p in asked:
            named.add(p.tp)
            cached = session.partitions.get(p.tp)
            if cached is None:
                cached = session.partitions[p.tp] = _cached(p)
                if session.memo is not None:
                    session.added.append((p.tp, cached))
            else:
                cached.fetch_offset = p.fetch_offset
                cached.partition_max_bytes = p.partition_max_bytes
                cached.current_leader_epoch = p.current_leader_epoch
        self.cached_partitions += len(session.partitions) - before
        session.next_epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
        session.last_used_ms = now_ms
        self.sessions.move_to_end(session_id)
        # A view, not a copy: the caller reads it before anything can change the session.
        return FetchContext(session_id, True, session.partitions.items(), named=named,
                            session=session)

    def _create(self, partitions: dict[SessionPartition, CachedPartition], privileged: bool,
                uses_topic_ids: bool, now_ms: int) -> FetchSession | None:
        size = len(partitions)
        if size == 0 or self.max_sessions <= 0:
            return None
        if len(self.sessions) >= self.max_sessions:
            victim = self._evictable(privileged, now_ms)
            if victim is None:
                return None
            self._remove(victim)
            self.evictions += 1
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, uses_topic_ids, partitions, last_used_ms=now_ms)
        self.sessions[session_id] = session
        self.cached_partitions += size
        return session

    def _evictable(self, privileged: bool, now_ms: int) -> int | None:
        for session in self.sessions.values():          # least recently used first
            if now_ms - session.last_used_ms >= self.eviction_ms:
                return session.session_id
            if privileged and not session.privileged:
                return session.session_id
        return None

    def _new_id(self) -> int:
        while True:
            session_id = self.rng.randint(1, 0x7FFFFFFF)
            if session_id not in self.sessions:
                return session_id

    def _remove(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.cached_partitions -= len(session.partitions)


def _cached(p: PartitionAsked) -> CachedPartition:
    return CachedPartition(p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
