"""Pre-vote (KIP-996) for the controllers' Raft: ask before campaigning (pure: no I/O, no clock).

Theory of operation
-------------------
Plain Raft lets any voter whose election timeout expires bump its term and campaign. A
controller that was cut off or starved (SIGSTOP, a partition, a CPU-starved tick thread)
does exactly that when it comes back, and its higher term deposes a healthy leader: a few
hundred ms of NOT_CONTROLLER for nothing. KIP-996 (after Ongaro's thesis, 9.6) puts a
*prospective* step in front of the campaign:

- a voter whose election timeout expires asks every other voter "would you vote for me
  at my term + 1?" with its log end (``PreVoteRequest``), **without bumping its term or
  voting for itself on disk**;
- a voter says yes only if it is not the leader, has **not heard from a leader within
  the minimum election timeout**, the asker's prospective term is not below its own, and
  the asker's log is at least as up to date as its own (Raft's vote rule);
- only with a majority of yeses (counting itself) does the voter start the real election.
  Otherwise it waits for its next timeout and asks again; meanwhile the leader's next
  heartbeat makes it a follower again.

So a returning voter cannot raise the quorum's term while the others still hear from a
leader, and because its term never moved it accepts that leader's heartbeats at once.
When the leader really is gone, the others stop hearing from it, their minimum timeout
passes, and they say yes: failover costs at most one extra round trip (and, rarely, one
more timeout when a peer heard the dead leader's last heartbeat a few ms later).

A round is identified by a number the asker chooses (its term does not move between
rounds); an answer to an older round is ignored. ``quorum/raft.py`` carries requests and
answers as pysyncobj messages and holds pysyncobj's own election back until
``may_campaign`` says yes; this module decides.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

__all__ = ["LogEnd", "PreVote", "PreVoteRequest", "PreVoteResponse",
           "PRE_VOTE_REQUEST", "PRE_VOTE_RESPONSE"]

PRE_VOTE_REQUEST = "pre_vote_request"      # message types on pysyncobj's transport
PRE_VOTE_RESPONSE = "pre_vote_response"

NEVER = -(1 << 62)


@dataclass(frozen=True, slots=True, order=True)
class LogEnd:
    """A Raft log's last entry; ordered like Raft's up-to-date rule (term first, then index)."""

    last_term: int
    last_index: int


@dataclass(frozen=True, slots=True)
class PreVoteRequest:
    round: int              # the asker's round number, echoed in the answer
    term: int               # the term the asker would campaign at: its term + 1
    log_end: LogEnd

    def to_message(self) -> dict[str, Any]:
        return {"type": PRE_VOTE_REQUEST, "round": self.round, "term": self.term,
                "last_log_term": self.log_end.last_term,
                "last_log_index": self.log_end.last_index}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> "PreVoteRequest":
        return cls(int(message["round"]), int(message["term"]),
                   LogEnd(int(message["last_log_term"]), int(message["last_log_index"])))


@dataclass(frozen=True, slots=True)
class PreVoteResponse:
    round: int
    term: int               # the request's term
    granted: bool
    reason: str = ""        # why not, for the log

    def to_message(self) -> dict[str, Any]:
        return {"type": PRE_VOTE_RESPONSE, "round": self.round, "term": self.term,
                "granted": self.granted, "reason": self.reason}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> "PreVoteResponse":
        return cls(int(message["round"]), int(message["term"]), bool(message["granted"]),
                   str(message.get("reason", "")))


class PreVote:
    """One voter's pre-vote state: the round it runs as a prospective candidate, and when it
    last heard from a leader (to answer others). Times are ``now_ms`` on one monotonic clock."""

    def __init__(self, election_timeout_min_ms: int) -> None:
        assert election_timeout_min_ms > 0
        self.election_timeout_min_ms = election_timeout_min_ms
        self._last_leader_contact_ms = NEVER
        self._round = 0
        self._round_term = -1           # the term the current round asks for; -1: none
        self._voters = 0
        self._granted: set[Hashable] = set()
        self._won_term = -1
        # counters, for logs and metrics
        self.rounds_started = 0
        self.rounds_won = 0
        self.requests_granted = 0
        self.requests_rejected = 0

    # -- as a follower / leader: answering --

    def observe_leader(self, now_ms: int) -> None:
        """A leader of this voter's term (or a later one) was heard from: AppendEntries. A
        round in progress, or won but not yet used, is dropped: this voter is a follower
        again, and its next timeout asks afresh."""
        self._last_leader_contact_ms = max(self._last_leader_contact_ms, now_ms)
        self._round_term = -1
        self._won_term = -1

    def handle_request(self, request: PreVoteRequest, *, term: int, log_end: LogEnd,
                       leading: bool, now_ms: int) -> PreVoteResponse:
        """Would this voter (at ``term``, with ``log_end``) vote for the asker? Changes no
        Raft state: neither the term nor the vote."""
        reason = ""
        if leading:
            reason = "the leader is alive: it is me"
        elif now_ms - self._last_leader_contact_ms < self.election_timeout_min_ms:
            reason = (f"heard from the leader {now_ms - self._last_leader_contact_ms} ms ago "
                      f"(< {self.election_timeout_min_ms} ms)")
        elif request.term < term:
            reason = f"term {request.term} is behind mine ({term})"
        elif request.log_end < log_end:
            reason = f"log {request.log_end} is behind mine ({log_end})"
        granted = not reason
        if granted:
            self.requests_granted += 1
        else:
            self.requests_rejected += 1
        return PreVoteResponse(request.round, request.term, granted, reason)

    # -- as a prospective candidate: asking --

    def start(self, *, term: int, log_end: LogEnd, voters: int) -> PreVoteRequest:
        """Begin a round asking to campaign at ``term + 1`` among ``voters`` voters (this one
        included, and counted as a yes). With a single voter the round is won at once."""
        assert voters >= 1
        self._round += 1
        self._round_term = term + 1
        self._voters = voters
        self._granted = set()
        self.rounds_started += 1
        self._check_won()
        return PreVoteRequest(self._round, term + 1, log_end)

    def handle_response(self, voter: Hashable, response: PreVoteResponse) -> bool:
        """Count an answer; True when it is the one that makes the majority."""
        if response.round != self._round or response.term != self._round_term:
            return False        # an older round, or the round is over
        if not response.granted:
            return False
        self._granted.add(voter)
        return self._check_won()

    def may_campaign(self, term: int) -> bool:
        """Has a round asking to campaign at ``term + 1`` been won (and not yet used)?"""
        return self._won_term == term + 1

    def campaigned(self) -> None:
        """The real election started: the won round is used up."""
        self._won_term = -1
        self._round_term = -1

    def _check_won(self) -> bool:
        if self._round_term < 0 or self._won_term == self._round_term:
            return False
        if 1 + len(self._granted) > self._voters / 2:
            self._won_term = self._round_term
            self.rounds_won += 1
            return True
        return False
