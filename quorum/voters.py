"""The controller quorum's voter set and the rules for changing it (KIP-853). Pure.

Theory of operation
-------------------
Kafka 4 keeps the voter set in the metadata log itself, as ``VotersRecord`` control
records; the latest committed (in Ketch: appended, see below) one is the set. A voter is
known by its replica id **and its directory id** (``directory.id`` of its
``meta.properties``, written once when the directory is first used): a controller whose
disk was wiped comes back with a new directory id, so it cannot take the place, and the
votes, of the voter it used to be. Each voter's endpoints are its Kafka listener
(``CONTROLLER``) and, in Ketch, the address of pysyncobj's transport (``RAFT``).

Ketch stores the encoded ``VotersRecord`` (Kafka's schema, version 0) in the replicated
state (``quorum/replicated_log.py``'s ``VotersCommand``): it is replicated, dumped and
installed with the log, as Kafka's control records are. It is not a metadata record:
brokers never see it (Kafka's observers skip control records too).

The rules, as Kafka's ``AddVoterHandler`` / ``RemoveVoterHandler`` apply them:

- one change at a time: while a change is in flight every other one is refused
  (``REQUEST_TIMED_OUT``, as Kafka), so old and new majorities always overlap (Raft's
  single-server change, section 4.1 of Ongaro's thesis);
- a voter is added only once it is caught up: it must be an observer of the metadata log
  whose fetch reached the high watermark within ``caught_up_window_ms``, otherwise
  ``REQUEST_TIMED_OUT`` with a message that says so (the caller retries);
- an id already in the set is ``DUPLICATE_VOTER``, whatever its directory id: a wiped
  controller must first be removed under its old directory id, then added under its new
  one;
- removing an id/directory id pair not in the set is ``VOTER_NOT_FOUND``; removing the
  last voter is refused (``INVALID_REQUEST``): a quorum of none could never commit again;
  so is a removal that leaves fewer caught-up voters than a majority of those left
  (``REQUEST_TIMED_OUT``): with voters {1, 2, 3} and 2 down, removing 3 leaves {1, 2},
  which cannot commit until 2 returns (found by the process test: the removal's own
  pysyncobj entry then never commits);
- an update (Kafka's ``UpdateRaftVoter``) may change a voter's endpoints, or give a
  directory id to a voter that had none (a statically configured voter before it first
  spoke), never replace one directory id with another.

``admits`` is the check every Raft message passes (``quorum/raft.py``): a message from a
voter's address carrying another directory id than the set has for it is dropped.

Not here: how the change reaches pysyncobj (``quorum/raft.py``), how requests arrive
(``quorum/server.py``).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from clients.protocol import CorruptFrameError, decode_message, encode_message, messages
from clients.protocol.errors import ErrorCode
from clients.protocol.types import ZERO_UUID

__all__ = [
    "CONTROLLER_ENDPOINT", "RAFT_ENDPOINT", "KRAFT_VERSION", "Voter", "VoterSet", "Refusal",
    "VoterChange", "decide_add", "decide_remove", "decide_update", "is_caught_up",
    "with_directory",
]

CONTROLLER_ENDPOINT = "CONTROLLER"
RAFT_ENDPOINT = "RAFT"
# kraft.version 1: the voter set is dynamic (KRaftVersionRecord). Ketch supports only it
# once a VotersRecord exists; a cluster without one runs on its static configuration.
KRAFT_VERSION = 1
_RECORD = messages.VotersRecord


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    directory_id: uuid.UUID         # ZERO_UUID: not known yet (a static voter before it spoke)
    host: str                       # the Kafka listener
    port: int
    raft_host: str                  # pysyncobj's transport
    raft_port: int

    @property
    def raft_address(self) -> str:
        return f"{self.raft_host}:{self.raft_port}"


@dataclass(frozen=True, slots=True)
class VoterSet:
    """Invariant: voters sorted by id, ids unique, raft addresses unique, never empty."""
    voters: tuple[Voter, ...]

    def __post_init__(self) -> None:
        ids = [v.voter_id for v in self.voters]
        assert self.voters, "a voter set is never empty"
        assert ids == sorted(set(ids)), "voters sorted by id, ids unique"
        assert len({v.raft_address for v in self.voters}) == len(ids), "two voters share a Raft address"

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> "VoterSet":
        return cls(tuple(sorted(voters, key=lambda v: v.voter_id)))

    @classmethod
    def static(cls, listeners: Mapping[int, tuple[str, int]],
               raft: Mapping[int, tuple[str, int]]) -> "VoterSet":
        """The bootstrap set from controller.quorum.voters / ketch.raft.voters: no
        directory ids yet (each voter's is filled in when it first speaks)."""
        return cls.of(Voter(nid, ZERO_UUID, *listeners[nid], *raft[nid]) for nid in listeners)

    def get(self, voter_id: int) -> Voter | None:
        return next((v for v in self.voters if v.voter_id == voter_id), None)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.voter_id for v in self.voters)

    def by_raft_address(self, address: str) -> Voter | None:
        return next((v for v in self.voters if v.raft_address == address), None)

    def listeners(self) -> dict[int, tuple[str, int]]:
        return {v.voter_id: (v.host, v.port) for v in self.voters}

    def raft_addresses(self) -> dict[int, str]:
        return {v.voter_id: v.raft_address for v in self.voters}

    def admits(self, voter_id: int, directory_id: uuid.UUID) -> bool:
        """May a Raft message of this id and directory id count? Not if the set knows the
        id under another directory id (a wiped disk)."""
        voter = self.get(voter_id)
        return voter is None or voter.directory_id in (ZERO_UUID, directory_id)

    # -- the record --

    def to_record(self) -> Any:
        feature = _RECORD.KRaftVersionFeature(min_supported_version=0,
                                              max_supported_version=KRAFT_VERSION)
        return _RECORD(version=0, voters=[
            _RECORD.Voter(voter_id=v.voter_id, voter_directory_id=v.directory_id,
                          endpoints=[_RECORD.Endpoint(name=CONTROLLER_ENDPOINT, host=v.host, port=v.port),
                                     _RECORD.Endpoint(name=RAFT_ENDPOINT, host=v.raft_host, port=v.raft_port)],
                          k_raft_version_feature=feature)
            for v in self.voters])

    def encode(self) -> bytes:
        return encode_message(self.to_record(), 0)

    @classmethod
    def decode(cls, data: bytes) -> "VoterSet":
        """The set from an encoded VotersRecord; CorruptFrameError if it is not one."""
        record = decode_message(_RECORD, 0, bytes(data))
        voters = []
        for v in record.voters:
            endpoints = {e.name: (e.host, e.port) for e in v.endpoints}
            if CONTROLLER_ENDPOINT not in endpoints or RAFT_ENDPOINT not in endpoints:
                raise CorruptFrameError(f"voter {v.voter_id} lacks an endpoint")
            voters.append(Voter(v.voter_id, v.voter_directory_id, *endpoints[CONTROLLER_ENDPOINT],
                                *endpoints[RAFT_ENDPOINT]))
        try:
            return cls.of(voters)
        except AssertionError as e:
            raise CorruptFrameError(f"not a voter set: {e}") from None


@dataclass(frozen=True, slots=True)
class Refusal:
    error_code: int
    message: str


@dataclass(frozen=True, slots=True)
class VoterChange:
    """A decided change: pysyncobj adds or removes ``raft_address`` (None: no Raft
    membership change, an update), then ``after`` is the voter set."""
    kind: str                       # "add" | "remove" | "update"
    voter: Voter
    after: VoterSet

    @property
    def raft_address(self) -> str | None:
        return None if self.kind == "update" else self.voter.raft_address


def is_caught_up(last_caught_up_ms: int, now_ms: int, window_ms: int) -> bool:
    """A replica whose fetch reached the high watermark within the window (Kafka: an
    observer's lastCaughtUpTimestamp within the fetch timeout)."""
    return last_caught_up_ms >= 0 and now_ms - last_caught_up_ms <= window_ms


def decide_add(current: VoterSet, candidate: Voter, *, change_in_flight: bool,
               last_caught_up_ms: int, now_ms: int, caught_up_window_ms: int) -> VoterChange | Refusal:
    if change_in_flight:
        return Refusal(ErrorCode.REQUEST_TIMED_OUT,
                       "another voter change is in flight: retry once it completes")
    if candidate.directory_id == ZERO_UUID:
        return Refusal(ErrorCode.INVALID_REQUEST, "a new voter needs its directory id")
    existing = current.get(candidate.voter_id)
    if existing is not None:
        return Refusal(ErrorCode.DUPLICATE_VOTER,
                       f"voter {candidate.voter_id} is already in the voter set with directory id "
                       f"{existing.directory_id}" + (
                           "" if existing.directory_id == candidate.directory_id else
                           ": a controller with a new directory (a wiped disk) must be added "
                           "after the old one is removed"))
    if current.by_raft_address(candidate.raft_address) is not None:
        return Refusal(ErrorCode.DUPLICATE_VOTER,
                       f"another voter already uses Raft address {candidate.raft_address}")
    if not is_caught_up(last_caught_up_ms, now_ms, caught_up_window_ms):
        return Refusal(ErrorCode.REQUEST_TIMED_OUT,
                       f"controller {candidate.voter_id} has not caught up with the metadata log "
                       f"(it must be running and fetching as an observer): retry when it has")
    return VoterChange("add", candidate, VoterSet.of((*current.voters, candidate)))


def decide_remove(current: VoterSet, voter_id: int, directory_id: uuid.UUID, *,
                  change_in_flight: bool, caught_up: frozenset[int] | None = None) -> VoterChange | Refusal:
    """`caught_up`: the voters the leader has seen at its log end lately (itself
    included); None: not checked. The voters left must hold a majority of caught-up
    ones, or the quorum could commit nothing more, not even the change undoing this
    one (a voter refused as a wiped disk, or down, counts as not caught up)."""
    if change_in_flight:
        return Refusal(ErrorCode.REQUEST_TIMED_OUT,
                       "another voter change is in flight: retry once it completes")
    voter = current.get(voter_id)
    if voter is None or (directory_id != ZERO_UUID and voter.directory_id not in (ZERO_UUID, directory_id)):
        return Refusal(ErrorCode.VOTER_NOT_FOUND,
                       f"no voter {voter_id} with directory id {directory_id} in the voter set")
    if len(current.voters) == 1:
        return Refusal(ErrorCode.INVALID_REQUEST,
                       f"voter {voter_id} is the last voter: a quorum without voters cannot commit")
    after = VoterSet.of(v for v in current.voters if v.voter_id != voter_id)
    if caught_up is not None:
        live = sorted(set(after.ids) & caught_up)
        if len(live) < len(after.ids) // 2 + 1:
            return Refusal(ErrorCode.REQUEST_TIMED_OUT,
                           f"removing voter {voter_id} would leave voters {list(after.ids)} of which "
                           f"only {live} are caught up: not a majority, the quorum could not commit "
                           "(remove a voter that is down first, or wait until they catch up)")
    return VoterChange("remove", voter, after)


def decide_update(current: VoterSet, voter: Voter, *, change_in_flight: bool) -> VoterChange | Refusal | None:
    """None: nothing to change. The Raft address cannot move (pysyncobj knows a voter by
    it): remove the voter and add it back instead."""
    existing = current.get(voter.voter_id)
    if existing is None:
        return Refusal(ErrorCode.VOTER_NOT_FOUND, f"voter {voter.voter_id} is not in the voter set")
    if existing.directory_id not in (ZERO_UUID, voter.directory_id):
        return Refusal(ErrorCode.INVALID_VOTER_KEY,
                       f"voter {voter.voter_id} has directory id {existing.directory_id}, not "
                       f"{voter.directory_id}: a wiped controller cannot rejoin under its old id")
    if existing.raft_address != voter.raft_address:
        return Refusal(ErrorCode.INVALID_REQUEST, "a voter's Raft address cannot change in place")
    if existing == voter:
        return None
    if change_in_flight:
        return Refusal(ErrorCode.REQUEST_TIMED_OUT,
                       "another voter change is in flight: retry once it completes")
    return VoterChange("update", voter, VoterSet.of(
        voter if v.voter_id == voter.voter_id else v for v in current.voters))


def with_directory(voter: Voter, directory_id: uuid.UUID) -> Voter:
    return replace(voter, directory_id=directory_id)
