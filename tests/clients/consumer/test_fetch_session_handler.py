"""The client's side of KIP-227 fetch sessions (clients/_core/fetch_session.py)."""
from __future__ import annotations

from clients.protocol.fetch_session import FetchSessionHandler, WantedPartition
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))


def at(offset: int) -> WantedPartition:
    return WantedPartition(offset, 0, 1 << 20)


def test_full_then_incremental_then_full_again_after_an_error() -> None:
    h = FetchSessionHandler()
    first = h.build({A: at(0), B: at(0)})
    assert (first.session_id, first.session_epoch, first.to_send, first.forgotten) == (0, 0, (A, B), ())
    assert h.handle_response(77, ErrorCode.NONE)
    idle = h.build({A: at(0), B: at(0)})
    assert (idle.session_id, idle.session_epoch, idle.to_send, idle.forgotten) == (77, 1, (), ())
    h.handle_response(77, ErrorCode.NONE)
    moved = h.build({A: at(5), C: at(0)})             # A moved on, C added, B no longer wanted
    assert (moved.session_epoch, moved.to_send, moved.forgotten) == (2, (A, C), (B,))
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
