"""Pre-vote (KIP-996), the pure decisions of quorum/prevote.py: who says yes, when a round is
won, and that nothing here moves a term."""
from __future__ import annotations

from quorum.prevote import LogEnd, PreVote, PreVoteRequest, PreVoteResponse

MIN_MS = 150
LOG = LogEnd(last_term=3, last_index=40)


def answer(voter: PreVote, request: PreVoteRequest, *, term: int = 3, log_end: LogEnd = LOG,
           leading: bool = False, now_ms: int = 10_000) -> PreVoteResponse:
    return voter.handle_request(request, term=term, log_end=log_end, leading=leading,
                                now_ms=now_ms)


def test_a_voter_that_heard_from_the_leader_within_the_minimum_timeout_says_no() -> None:
    voter = PreVote(MIN_MS)
    request = PreVoteRequest(round=1, term=4, log_end=LOG)
    voter.observe_leader(now_ms=10_000)
    assert not answer(voter, request, now_ms=10_000 + MIN_MS - 1).granted
    # once the leader has been silent for the minimum timeout, the same request is granted
    assert answer(voter, request, now_ms=10_000 + MIN_MS).granted
    assert (voter.requests_granted, voter.requests_rejected) == (1, 1)


def test_the_leader_says_no_and_a_fresh_voter_says_yes() -> None:
    request = PreVoteRequest(round=1, term=4, log_end=LOG)
    assert not answer(PreVote(MIN_MS), request, leading=True).granted
    assert answer(PreVote(MIN_MS), request).granted     # never heard from a leader


def test_an_asker_behind_in_term_or_log_is_refused() -> None:
    voter = PreVote(MIN_MS)
    assert not answer(voter, PreVoteRequest(1, term=3, log_end=LOG), term=4).granted
    assert answer(voter, PreVoteRequest(1, term=4, log_end=LOG), term=4).granted
    behind_in_index = LogEnd(last_term=3, last_index=39)
    assert not answer(voter, PreVoteRequest(1, 4, behind_in_index)).granted
    older_term_longer_log = LogEnd(last_term=2, last_index=99)
    assert not answer(voter, PreVoteRequest(1, 4, older_term_longer_log)).granted
    newer_term_shorter_log = LogEnd(last_term=4, last_index=1)
    assert answer(voter, PreVoteRequest(1, 5, newer_term_shorter_log)).granted


def test_a_round_is_won_with_a_majority_counting_itself_and_asks_for_the_next_term() -> None:
    asker = PreVote(MIN_MS)
    request = asker.start(term=7, log_end=LOG, voters=5)
    assert request.term == 8 and not asker.may_campaign(7)
    assert not asker.handle_response("b", PreVoteResponse(request.round, 8, granted=False))
    assert not asker.handle_response("c", PreVoteResponse(request.round, 8, granted=True))
    assert not asker.handle_response("c", PreVoteResponse(request.round, 8, granted=True)), \
        "the same voter twice is one yes"
    assert asker.handle_response("d", PreVoteResponse(request.round, 8, granted=True))
    assert asker.may_campaign(7) and not asker.may_campaign(8)
    assert not asker.handle_response("e", PreVoteResponse(request.round, 8, granted=True)), \
        "a round is won once"
    asker.campaigned()
    assert not asker.may_campaign(7)
    assert (asker.rounds_started, asker.rounds_won) == (1, 1)


def test_hearing_from_a_leader_drops_the_round_and_an_unused_win() -> None:
    asker = PreVote(MIN_MS)
    request = asker.start(term=7, log_end=LOG, voters=3)
    asker.observe_leader(now_ms=1_000)      # the leader was only slow
    assert not asker.handle_response("b", PreVoteResponse(request.round, 8, granted=True))
    assert not asker.may_campaign(7)
    request = asker.start(term=7, log_end=LOG, voters=3)
    assert asker.handle_response("b", PreVoteResponse(request.round, 8, granted=True))
    asker.observe_leader(now_ms=2_000)
    assert not asker.may_campaign(7), "a win is not kept for a later timeout"


def test_answers_to_an_older_round_do_not_count() -> None:
    asker = PreVote(MIN_MS)
    first = asker.start(term=7, log_end=LOG, voters=3)
    second = asker.start(term=7, log_end=LOG, voters=3)     # same term: rounds differ
    assert second.round != first.round
    assert not asker.handle_response("b", PreVoteResponse(first.round, 8, granted=True))
    assert not asker.may_campaign(7)
    assert asker.handle_response("b", PreVoteResponse(second.round, 8, granted=True))


def test_a_single_voter_wins_at_once_and_three_need_one_yes() -> None:
    alone = PreVote(MIN_MS)
    alone.start(term=0, log_end=LOG, voters=1)
    assert alone.may_campaign(0)
    three = PreVote(MIN_MS)
    request = three.start(term=0, log_end=LOG, voters=3)
    assert not three.may_campaign(0)
    assert three.handle_response("b", PreVoteResponse(request.round, 1, granted=True))


def test_messages_round_trip_through_the_transport_shape() -> None:
    request = PreVoteRequest(round=9, term=4, log_end=LOG)
    assert PreVoteRequest.from_message(request.to_message()) == request
    response = PreVoteResponse(round=9, term=4, granted=False, reason="leader")
    assert PreVoteResponse.from_message(response.to_message()) == response
