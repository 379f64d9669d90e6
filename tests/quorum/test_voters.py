"""KIP-853's voter set and its change rules (quorum/voters.py), the voter set in the
replicated state (quorum/replicated_log.py) and the port's proposal of it (quorum/port.py).
Deterministic: no processes, no clock."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from clients.protocol import CorruptFrameError
from clients.protocol.errors import ErrorCode
from clients.protocol.types import ZERO_UUID
from quorum.port import InMemoryQuorum, NotControllerError
from quorum.replicated_log import (
    LeaderChangeCommand, ReplicatedLogState, VotersChanged, VotersCommand, VotersFenced,
    decode_command, encode_command,
)
from quorum.voters import (
    Refusal, Voter, VoterChange, VoterSet, decide_add, decide_remove, decide_update, is_caught_up,
)

D1, D2, D3, WIPED = (uuid.UUID(int=i) for i in (1, 2, 3, 99))


def voter(nid: int, directory: uuid.UUID) -> Voter:
    return Voter(nid, directory, "127.0.0.1", 9090 + nid, "127.0.0.1", 19090 + nid)


ONE = VoterSet.of([voter(1, D1)])
THREE = VoterSet.of([voter(1, D1), voter(2, D2), voter(3, D3)])
NOW = 1_000_000
WINDOW = 2_000


def add(current: VoterSet, candidate: Voter, *, in_flight: bool = False,
        caught_up_ms: int = NOW - 10) -> VoterChange | Refusal:
    return decide_add(current, candidate, change_in_flight=in_flight, last_caught_up_ms=caught_up_ms,
                      now_ms=NOW, caught_up_window_ms=WINDOW)


def test_the_record_round_trips_with_ids_directory_ids_and_both_endpoints() -> None:
    decoded = VoterSet.decode(THREE.encode())
    assert decoded == THREE
    record = THREE.to_record()
    assert [v.voter_directory_id for v in record.voters] == [D1, D2, D3]
    assert [e.name for e in record.voters[0].endpoints] == ["CONTROLLER", "RAFT"]
    assert decoded.listeners()[2] == ("127.0.0.1", 9092)
    assert decoded.raft_addresses()[3] == "127.0.0.1:19093"


def test_a_record_that_is_not_a_voter_set_is_refused() -> None:
    with pytest.raises(CorruptFrameError):
        VoterSet.decode(b"\x00\x00\x01")       # version 0, no voters: never a quorum
    with pytest.raises(CorruptFrameError):
        VoterSet.decode(THREE.encode()[:-3])


def test_a_static_set_has_no_directory_ids_until_each_voter_speaks() -> None:
    static = VoterSet.static({1: ("h", 9093), 2: ("h", 9094)}, {1: ("h", 19093), 2: ("h", 19094)})
    assert [v.directory_id for v in static.voters] == [ZERO_UUID, ZERO_UUID]
    assert static.admits(1, D1) and static.admits(2, WIPED)
    change = decide_update(static, Voter(1, D1, "h", 9093, "h", 19093), change_in_flight=False)
    assert isinstance(change, VoterChange) and change.after.get(1).directory_id == D1


@pytest.mark.parametrize("caught_up_ms, expected", [
    (NOW - 10, True), (NOW - WINDOW, True), (NOW - WINDOW - 1, False), (-1, False)])
def test_caught_up_means_at_the_high_watermark_within_the_window(caught_up_ms: int, expected: bool) -> None:
    assert is_caught_up(caught_up_ms, NOW, WINDOW) is expected


def test_adding_a_caught_up_voter_grows_the_set_one_at_a_time() -> None:
    change = add(ONE, voter(2, D2))
    assert isinstance(change, VoterChange) and change.kind == "add"
    assert change.after.ids == (1, 2) and change.raft_address == "127.0.0.1:19092"
    change = add(change.after, voter(3, D3))
    assert isinstance(change, VoterChange) and change.after == THREE


@pytest.mark.parametrize("current, candidate, kwargs, code, words", [
    (ONE, voter(2, D2), {"caught_up_ms": -1}, ErrorCode.REQUEST_TIMED_OUT, "has not caught up"),
    (ONE, voter(2, D2), {"caught_up_ms": NOW - WINDOW - 1}, ErrorCode.REQUEST_TIMED_OUT, "has not caught up"),
    (ONE, voter(2, D2), {"in_flight": True}, ErrorCode.REQUEST_TIMED_OUT, "in flight"),
    (THREE, voter(2, D2), {}, ErrorCode.DUPLICATE_VOTER, "already in the voter set"),
    (THREE, voter(2, WIPED), {}, ErrorCode.DUPLICATE_VOTER, "wiped disk"),
    (ONE, voter(2, ZERO_UUID), {}, ErrorCode.INVALID_REQUEST, "directory id"),
    (ONE, Voter(2, D2, "127.0.0.1", 9092, "127.0.0.1", 19091), {}, ErrorCode.DUPLICATE_VOTER, "Raft address"),
])
def test_adds_that_are_refused(current, candidate, kwargs, code, words) -> None:
    refusal = add(current, candidate, **kwargs)
    assert isinstance(refusal, Refusal) and refusal.error_code == code
    assert words in refusal.message


def test_removing_shrinks_the_set_and_the_last_voter_stays() -> None:
    change = decide_remove(THREE, 3, D3, change_in_flight=False)
    assert isinstance(change, VoterChange) and change.kind == "remove" and change.after.ids == (1, 2)
    change = decide_remove(change.after, 2, ZERO_UUID, change_in_flight=False)   # any directory
    assert isinstance(change, VoterChange) and change.after == ONE
    refusal = decide_remove(ONE, 1, D1, change_in_flight=False)
    assert isinstance(refusal, Refusal) and refusal.error_code == ErrorCode.INVALID_REQUEST
    assert "last voter" in refusal.message


@pytest.mark.parametrize("voter_id, directory, in_flight, code", [
    (4, D1, False, ErrorCode.VOTER_NOT_FOUND),
    (2, WIPED, False, ErrorCode.VOTER_NOT_FOUND),       # the old voter is known by its directory
    (2, D2, True, ErrorCode.REQUEST_TIMED_OUT),
])
def test_removes_that_are_refused(voter_id, directory, in_flight, code) -> None:
    refusal = decide_remove(THREE, voter_id, directory, change_in_flight=in_flight)
    assert isinstance(refusal, Refusal) and refusal.error_code == code


def test_a_wiped_controller_cannot_rejoin_under_its_old_id() -> None:
    assert THREE.admits(2, D2) and THREE.admits(4, WIPED)
    assert not THREE.admits(2, WIPED)
    refusal = decide_update(THREE, voter(2, WIPED), change_in_flight=False)
    assert isinstance(refusal, Refusal) and refusal.error_code == ErrorCode.INVALID_VOTER_KEY


def test_an_update_fills_in_a_directory_id_or_moves_the_kafka_listener_only() -> None:
    static = VoterSet.of([voter(1, ZERO_UUID), voter(2, D2)])
    change = decide_update(static, voter(1, D1), change_in_flight=False)
    assert isinstance(change, VoterChange) and change.kind == "update" and change.raft_address is None
    assert change.after.get(1) == voter(1, D1) and not change.after.admits(1, WIPED)
    assert decide_update(THREE, voter(2, D2), change_in_flight=False) is None
    moved = Voter(2, D2, "127.0.0.1", 7000, "127.0.0.1", 19092)
    change = decide_update(THREE, moved, change_in_flight=False)
    assert isinstance(change, VoterChange) and change.after.listeners()[2] == ("127.0.0.1", 7000)
    refusal = decide_update(THREE, Voter(2, D2, "127.0.0.1", 9092, "127.0.0.1", 1), change_in_flight=False)
    assert isinstance(refusal, Refusal) and refusal.error_code == ErrorCode.INVALID_REQUEST
    refusal = decide_update(THREE, moved, change_in_flight=True)
    assert isinstance(refusal, Refusal) and refusal.error_code == ErrorCode.REQUEST_TIMED_OUT


# -- the voter set in the replicated state ---------------------------------------------------


def test_the_voters_command_is_fenced_by_epoch_and_survives_the_dump() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(3, 1))
    command = decode_command(encode_command(VotersCommand(3, THREE.encode())))
    assert command == VotersCommand(3, THREE.encode())
    assert state.apply(VotersCommand(2, ONE.encode())) == VotersFenced(2, 3)
    assert state.voters is None
    assert state.apply(command) == VotersChanged(3, THREE.encode())
    assert state.next_offset == 0, "a voter set takes no offset"
    restored = ReplicatedLogState.decode(state.encode())
    assert restored.voters == THREE.encode() and state.copy().voters == THREE.encode()
    assert ReplicatedLogState.decode(ReplicatedLogState().encode()).voters is None


def test_a_version_1_dump_still_loads_without_a_voter_set() -> None:
    import struct
    import crc32c
    state = ReplicatedLogState()
    body = state.encode()[:-4]
    assert body[8:10] == struct.pack(">H", 2)
    v1 = body[:8] + struct.pack(">H", 1) + body[10:-4]        # without the voters field
    loaded = ReplicatedLogState.decode(v1 + struct.pack(">I", crc32c.crc32c(v1)))
    assert loaded.voters is None and loaded.next_offset == 0


def test_the_port_proposes_a_voter_set_once_active_and_restores_it_on_restart() -> None:
    async def scenario() -> None:
        quorum = InMemoryQuorum(node_id=1)
        assert quorum.voters_record is None
        await quorum.propose_voters(THREE.encode())
        assert quorum.voters_record == THREE.encode()
        quorum.restart()
        assert quorum.voters_record == THREE.encode()
        first = quorum.propose_voters(ONE.encode())
        with pytest.raises(NotControllerError, match="in flight"):
            await quorum.propose_voters(THREE.encode())
        await first
        quorum.depose()
        with pytest.raises(NotControllerError):
            await quorum.propose_voters(THREE.encode())
        assert VoterSet.decode(quorum.voters_record) == ONE
    asyncio.run(scenario())


# -- pysyncobj's restart gap (quorum/raft.py) ------------------------------------------------


def membership_entry(kind: str, address: str) -> tuple[bytes, int, int]:
    """A journal entry as pysyncobj writes one for addNodeToCluster / removeNodeFromCluster."""
    import pickle
    from pysyncobj.node import TCPNode
    return bytes([2]) + pickle.dumps([kind, address, TCPNode(address)]), 0, 0


def test_the_membership_before_start_replays_the_journal_after_the_dump() -> None:
    from quorum.raft import membership_after_entries
    regular = (bytes([0]) + b"payload", 0, 0)
    entries = [membership_entry("add", "h:2"), regular, membership_entry("add", "h:3"),
               membership_entry("rem", "h:2")]
    assert membership_after_entries(["h:1"], entries) == ["h:1", "h:3"]
    # Entries the dump already covers change nothing (add of a member, rem of a non-member).
    assert membership_after_entries(["h:1", "h:3"], entries) == ["h:1", "h:3"]
    assert membership_after_entries(["h:1"], [regular]) == ["h:1"]


@pytest.mark.parametrize("voter_id, caught_up, allowed", [
    (3, frozenset({1, 2, 3}), True),
    (3, frozenset({1, 3}), False),      # leaves {1, 2} with 2 down: could not commit
    (2, frozenset({1, 3}), True),       # remove the one that is down first
    (3, frozenset({1}), False),
])
def test_a_removal_must_leave_a_caught_up_majority(voter_id, caught_up, allowed) -> None:
    decision = decide_remove(THREE, voter_id, ZERO_UUID, change_in_flight=False, caught_up=caught_up)
    assert isinstance(decision, VoterChange) is allowed
    if not allowed:
        assert decision.error_code == ErrorCode.REQUEST_TIMED_OUT and "not a majority" in decision.message
