"""KIP-227 fetch sessions, the pure cache (broker/fetch_session.py)."""
from __future__ import annotations

import random

from broker.fetch_session import FetchSessionCache, PartitionAsked
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

T0, T1, T2 = (TopicPartition("t", i) for i in range(3))


def asked(tp: TopicPartition, offset: int = 0) -> PartitionAsked:
    return PartitionAsked(tp, offset, 1 << 20, -1)


def answer(ctx, news: dict[TopicPartition, tuple[int, bool, int]]) -> list[TopicPartition]:
    """The partitions the answer carries, given per partition (error, records?, HW)."""
    out = []
    for tp, cached in ctx.partitions:
        error, has_records, hw = news.get(tp, (0, False, cached.high_watermark))
        if ctx.include(cached, error, has_records, hw, 0):
            out.append(tp)
    return out


def test_sessionless_full_fetch_and_a_session_that_then_answers_only_changes() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    plain = cache.context(0, -1, [asked(T0), asked(T1)], [], False, 0)
    assert plain.session_id == 0 and not plain.incremental and len(cache.sessions) == 0
    full = cache.context(0, 0, [asked(T0), asked(T1), asked(T2)], [], False, 0)
    sid = full.session_id
    assert sid > 0 and not full.incremental
    assert answer(full, {tp: (0, False, 5) for tp in (T0, T1, T2)}) == [T0, T1, T2]
    # Nothing new: an incremental fetch that names no partition reads all three and
    # answers none.
    idle = cache.context(sid, 1, [], [], False, 10)
    assert idle.incremental and [tp for tp, _ in idle.partitions] == [T0, T1, T2]
    assert answer(idle, {}) == []
    # New records on one, a moved HW on another.
    busy = cache.context(sid, 2, [], [], False, 20)
    assert answer(busy, {T0: (0, True, 6), T2: (0, False, 7)}) == [T0, T2]
    # The fetcher moves its position on T0 and forgets T1.
    moved = cache.context(sid, 3, [asked(T0, 40)], [T1], False, 30)
    assert [(tp, c.fetch_offset) for tp, c in moved.partitions] == [(T0, 40), (T2, 0)]
    assert cache.cached_partitions == 2
    # An error is always news.
    assert answer(cache.context(sid, 4, [], [], False, 40),
                  {T2: (ErrorCode.NOT_LEADER_OR_FOLLOWER, False, -1)}) == [T2]


def test_wrong_epochs_unknown_ids_and_closing() -> None:
    cache = FetchSessionCache(rng=random.Random(2))
    sid = cache.context(0, 0, [asked(T0)], [], False, 0).session_id
    assert cache.context(sid, 2, [], [], False, 1).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.context(sid, 1, [], [], False, 1).error_code == ErrorCode.NONE
    assert cache.context(sid, 1, [], [], False, 1).error_code == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH          # a duplicated request
    assert cache.context(sid + 1, 1, [], [], False, 1).error_code == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    closed = cache.context(sid, -1, [asked(T1)], [], False, 2)   # close, sessionless
    assert closed.session_id == 0 and sid not in cache.sessions and cache.cached_partitions == 0
    again = cache.context(0, 0, [asked(T0)], [], False, 3)
    renewed = cache.context(again.session_id, 0, [asked(T2)], [], False, 4)  # close and reopen
    assert renewed.session_id not in (0, again.session_id)
    assert list(cache.sessions) == [renewed.session_id] and cache.cached_partitions == 1


def test_the_cache_is_bounded_and_evicts_idle_then_consumer_sessions_for_followers() -> None:
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000, rng=random.Random(3))
    a = cache.context(0, 0, [asked(T0), asked(T1)], [], False, 0).session_id
    b = cache.context(0, 0, [asked(T0), asked(T1)], [], False, 100).session_id
    assert a and b and cache.cached_partitions == 4
    # Full, nothing idle long enough: a new consumer gets no session (full fetches go on).
    assert cache.context(0, 0, [asked(T2)], [], False, 500).session_id == 0
    # A follower's session takes the least recently used consumer session's place.
    f = cache.context(0, 0, [asked(T2)], [], True, 600).session_id
    assert f and a not in cache.sessions and cache.evictions == 1
    # A consumer session idle for eviction_ms makes room for anyone.
    cache.context(f, 1, [], [], True, 1500)
    c = cache.context(0, 0, [asked(T0), asked(T1)], [], False, 1500).session_id
    assert c and b not in cache.sessions and f in cache.sessions
    assert cache.cached_partitions == sum(len(s.partitions) for s in cache.sessions.values())


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_sessions=0)
    assert cache.context(0, 0, [asked(T0)], [], False, 0).session_id == 0


def test_slots_count_sessions_so_a_follower_of_more_partitions_than_slots_gets_one() -> None:
    """Kafka counts sessions: with partitions counted, a follower of more partitions than
    the slots (1,000 by default) was never given a session after its first fetch lost one,
    and named and was answered every partition on every fetch from then on."""
    many = [asked(TopicPartition("u", i)) for i in range(5)]
    cache = FetchSessionCache(max_sessions=1, rng=random.Random(4))
    sid = cache.context(0, 0, many, [], True, 0).session_id
    assert sid and cache.cached_partitions == 5
    idle = cache.context(sid, 1, [], [], True, 10)
    assert idle.incremental and len(idle.partitions) == 5


def test_a_session_by_topic_id_keys_partitions_by_id_and_refuses_a_fetch_by_name() -> None:
    import uuid
    from clients.types import TopicIdPartition
    cache = FetchSessionCache(rng=random.Random(3))
    t0 = TopicIdPartition(uuid.UUID(int=1), 0)
    recreated = TopicIdPartition(uuid.UUID(int=2), 0)
    sid = cache.context(0, 0, [asked(t0)], [], False, 0, uses_topic_ids=True).session_id
    assert sid > 0
    # Kafka's FETCH_SESSION_TOPIC_ID_ERROR: a v12 fetch cannot name this session's partitions.
    refused = cache.context(sid, 1, [], [], False, 1, uses_topic_ids=False)
    assert refused.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # By id, the same partition of a recreated topic is another partition of the session.
    moved = cache.context(sid, 1, [asked(recreated, 7)], [t0], False, 2, uses_topic_ids=True)
    assert [(key, c.fetch_offset) for key, c in moved.partitions] == [(recreated, 7)]
    # A session by name refuses a fetch by id alike.
    by_name = cache.context(0, 0, [asked(T0)], [], False, 3).session_id
    assert cache.context(by_name, 1, [], [], False, 4, uses_topic_ids=True).error_code == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_an_incremental_fetch_says_what_it_named_and_what_came_and_went_since_the_memo() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    sid = cache.context(0, 0, [asked(T0), asked(T1)], [], True, 0).session_id
    first = cache.context(sid, 1, [], [], True, 1)
    assert first.named == set() and first.memo is None
    first.remember("resolved")
    moved = cache.context(sid, 2, [asked(T0, 7)], [], True, 2)
    assert moved.named == {T0} and moved.memo == "resolved"      # a position moved: kept
    assert dict(moved.partitions)[T0].fetch_offset == 7
    added = cache.context(sid, 3, [asked(T2)], [], True, 3)
    assert added.named == {T2} and added.memo == "resolved"       # a partition came: told
    [], [(tp, cached)] = added.take_changes()
    assert tp == T2 and cached is dict(added.partitions)[T2] and added.take_changes() == ([], [])
    added.remember("again")
    went = cache.context(sid, 4, [asked(T1, 3)], [T1], True, 4)     # forgotten and asked again
    assert went.memo == "again" and went.take_changes() == ([T1], [(T1, dict(went.partitions)[T1])])
    sessionless = cache.context(0, -1, [asked(T0)], [], True, 5)
    sessionless.remember("nowhere")
    assert sessionless.memo is None


def test_idle_partitions_are_looked_at_again_only_when_woken() -> None:
    from broker.fetch_session import IdlePartitions
    entries = {tp: ("entry", tp) for tp in (T0, T1, T2)}
    idle = IdlePartitions(dict(entries), change_seq=0, recheck_at_ms=5_000)
    assert idle.active == entries and not idle.quiet            # a new session: all looked at
    idle.settle([T0, T1])
    assert list(idle.active) == [T2] and idle.quiet == {T0, T1}
    idle.settle([T0])                                           # already quiet: no change
    assert idle.quiet == {T0, T1}
    idle.wake(frozenset({T1, TopicPartition("other", 0)}))      # changes elsewhere: ignored
    assert idle.active == {T2: entries[T2], T1: entries[T1]} and idle.quiet == {T0}
    idle.wake_all()
    assert idle.active == entries and not idle.quiet


def test_a_session_view_grows_with_its_session_and_resolves_ids_as_topics_come() -> None:
    import uuid
    from broker.fetch_session import CachedPartition, SessionView
    from clients.types import TopicIdPartition
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    names = {a: "a"}
    c = CachedPartition(0, 1 << 20, -1)
    view = SessionView.of([(TopicIdPartition(a, 0), c), (TopicIdPartition(b, 0), c)], 1, 0, names.get)
    assert view.readable == {TopicPartition("a", 0)} and [e[1] for e in view.entries] == [
        TopicPartition("a", 0), None]
    view.add([(TopicIdPartition(a, 1), c)])
    assert view.readable == {TopicPartition("a", 0), TopicPartition("a", 1)}
    names[b] = "b"                                  # topic b created: its id resolves now
    view.topics_created(2, names.get)
    assert view.unresolved == {} and TopicPartition("b", 0) in view.readable
    view.remove([TopicIdPartition(a, 0)])
    assert view.readable == {TopicPartition("a", 1), TopicPartition("b", 0)}
    by_name = SessionView.of([(T0, c)], 1, 0, names.get)
    assert by_name.entries == [(T0, T0, c)]


def test_a_session_view_keeps_the_brokers_own_topic_partitions() -> None:
    # One TopicPartition object per replica: the view's sets hold the hosted one, not
    # one decoded per session (56 B each, in three sets per follower partition).
    import uuid
    from broker.fetch_session import CachedPartition, SessionView
    from clients.types import TopicIdPartition
    a = uuid.UUID(int=1)
    hosted = {TopicPartition("a", 0): TopicPartition("a", 0)}
    c = CachedPartition(0, 1 << 20, -1)
    view = SessionView.of([(TopicIdPartition(a, 0), c), (TopicIdPartition(a, 1), c)], 1, 0,
                          {a: "a"}.get, lambda tp: hosted.get(tp, tp))
    [own] = [tp for tp in view.readable if tp.partition == 0]
    assert own is hosted[TopicPartition("a", 0)]
    assert {tp.partition for tp in view.readable} == {0, 1}
