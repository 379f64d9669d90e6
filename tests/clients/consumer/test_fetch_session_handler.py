"""The client's side of KIP-227 fetch sessions (clients/_core/fetch_session.py)."""
from __future__ import annotations

import uuid

from clients.protocol import messages
from clients.protocol._codec import encode_message
from clients.protocol.fetch_session import FetchSessionHandler, WantedPartition, request_topics
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))
NO_ID = uuid.UUID(int=0)
T_ID, T_NEW_ID = uuid.UUID(int=7), uuid.UUID(int=8)


def at(offset: int, topic_id: uuid.UUID = NO_ID) -> WantedPartition:
    return WantedPartition(offset, 0, 1 << 20, topic_id=topic_id)


def test_full_then_incremental_then_full_again_after_an_error() -> None:
    h = FetchSessionHandler()
    first = h.build({A: at(0), B: at(0)})
    assert (first.session_id, first.session_epoch, first.to_send, first.forgotten) == (0, 0, (A, B), ())
    assert h.handle_response(77, ErrorCode.NONE)
    idle = h.build({A: at(0), B: at(0)})
    assert (idle.session_id, idle.session_epoch, idle.to_send, idle.forgotten) == (77, 1, (), ())
    h.handle_response(77, ErrorCode.NONE)
    moved = h.build({A: at(5), C: at(0)})             # A moved on, C added, B no longer wanted
    assert (moved.session_epoch, moved.to_send, moved.forgotten) == (2, (A, C), ((B, NO_ID),))
    h.handle_response(77, ErrorCode.NONE)
    assert h.build({A: at(5), C: at(0)}).session_epoch == 3
    # The broker evicted the session: the next fetch is full, closing 77 and asking anew.
    assert not h.handle_response(0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    again = h.build({A: at(5), C: at(0)})
    assert (again.session_id, again.session_epoch, again.to_send) == (77, 0, (A, C))


def test_a_broker_without_room_is_asked_again_and_a_lost_answer_resets() -> None:
    h = FetchSessionHandler()
    h.build({A: at(0)})
    h.handle_response(0, ErrorCode.NONE)                # no session given: stay full
    assert h.build({A: at(0)}).session_epoch == 0
    h.handle_response(9, ErrorCode.NONE)
    h.build({A: at(0)})
    h.reset()                                           # the request's fate is unknown
    assert h.build({A: at(0)}).session_epoch == 0


def test_a_session_by_topic_id_sends_and_forgets_by_id_and_follows_a_recreated_topic() -> None:
    h = FetchSessionHandler()
    first = h.build({A: at(0, T_ID), B: at(0, T_ID)}, uses_topic_ids=True)
    topics, _ = request_topics(first, {A: at(0, T_ID), B: at(0, T_ID)})
    assert [(t.topic_id, [p.partition for p in t.partitions]) for t in topics] == [(T_ID, [0, 1])]
    # v13+ writes the id, not the name.
    encoded = encode_message(messages.FetchRequest(topics=topics), 13)
    assert T_ID.bytes in encoded and b"t" not in encoded.replace(T_ID.bytes, b"")
    h.handle_response(5, ErrorCode.NONE)
    # The topic was recreated: A is fetched under the new id and forgotten under the old.
    wanted = {A: at(0, T_NEW_ID)}
    moved = h.build(wanted, uses_topic_ids=True)
    assert (moved.session_epoch, moved.to_send) == (1, (A,))
    assert set(moved.forgotten) == {(A, T_ID), (B, T_ID)}
    topics, forgotten = request_topics(moved, wanted)
    assert [t.topic_id for t in topics] == [T_NEW_ID]
    assert [(f.topic_id, f.partitions) for f in forgotten] == [(T_ID, [0, 1])]


def test_switching_between_names_and_ids_starts_a_new_session() -> None:
    h = FetchSessionHandler()
    h.build({A: at(0, T_ID)}, uses_topic_ids=True)
    h.handle_response(5, ErrorCode.NONE)
    assert h.build({A: at(0, T_ID)}, uses_topic_ids=True).session_epoch == 1
    h.handle_response(5, ErrorCode.NONE)
    # The leader now speaks at most v12 (or a topic id is unknown): a full fetch by name
    # that closes session 5, since the broker would refuse it (FETCH_SESSION_TOPIC_ID_ERROR).
    by_name = h.build({A: at(0, T_ID)}, uses_topic_ids=False)
    assert (by_name.session_id, by_name.session_epoch, by_name.to_send) == (5, 0, (A,))
    h.handle_response(6, ErrorCode.NONE)
    assert not h.uses_topic_ids
    assert h.build({A: at(0, T_ID)}).session_epoch == 1


def test_build_changed_compares_only_what_the_caller_says_changed_and_agrees_with_build() -> None:
    h, g = FetchSessionHandler(), FetchSessionHandler()
    wanted = {A: at(0, T_ID), B: at(0, T_ID)}
    assert h.build_changed(wanted, {A}, True) == g.build(wanted, True)    # no session yet: full
    h.handle_response(77, ErrorCode.NONE)
    g.handle_response(77, ErrorCode.NONE)
    assert h.build_changed(wanted, set(), True).to_send == ()             # nothing to compare
    h.handle_response(77, ErrorCode.NONE)
    g.build(wanted, True)
    g.handle_response(77, ErrorCode.NONE)
    # A moved, B gone, C came, and B's old entry recreated under a new topic id is both
    # forgotten and sent, as build says.
    moved = {A: at(5, T_ID), C: at(0, T_ID)}
    plan = h.build_changed(moved, {A, B, C}, True)
    expected = g.build(moved, True)
    assert (sorted(plan.to_send), sorted(plan.forgotten)) == (sorted(expected.to_send), sorted(expected.forgotten))
    h.handle_response(77, ErrorCode.NONE)
    g.handle_response(77, ErrorCode.NONE)
    renamed = {A: at(5, T_ID), C: at(0, T_NEW_ID)}
    plan, expected = h.build_changed(renamed, {C}, True), g.build(renamed, True)
    assert (plan.to_send, plan.forgotten) == (expected.to_send, expected.forgotten) == ((C,), ((C, T_ID),))
    # The answer's changes go into the session's partitions in place: no copy of every
    # wanted partition per fetch (a follower's session holds tens of thousands).
    held = h.partitions
    h.handle_response(77, ErrorCode.NONE)
    g.handle_response(77, ErrorCode.NONE)
    assert h.partitions is held and h.partitions == g.partitions == renamed
    h.build_changed({A: at(9, T_ID), C: at(0, T_NEW_ID)}, {A}, True)
    assert not h.handle_response(77, ErrorCode.FETCH_SESSION_ID_NOT_FOUND) and h.partitions == {}
