"""The MetadataQuorum port, through InMemoryQuorum (the same QuorumBase and apply rules as
RaftQuorum): offsets, group commit, fencing on leadership loss, lost entries, long polls,
snapshots and restart."""
from __future__ import annotations

import asyncio

import pytest

from quorum.port import InMemoryQuorum, LeaderAndEpoch, NotControllerError
from quorum.replicated_log import CommittedBatch, MetadataSnapshot


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []
        self.snapshots: list[MetadataSnapshot] = []
        self.leaders: list[LeaderAndEpoch] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        expected = self.records[-1][0] + 1 if self.records else (
            self.snapshots[-1].end_offset if self.snapshots else 0)
        assert batch.base_offset == expected, "commits arrive in offset order without gaps"
        self.records.extend((batch.base_offset + i, r) for i, r in enumerate(batch.records))

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        self.snapshots.append(snapshot)
        self.records = []

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)


def run(coro):
    return asyncio.run(coro)


def test_appends_get_offsets_in_call_order_and_listeners_see_every_record() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        seen = Recorder()
        quorum.register(seen)
        futures = [quorum.append([b"a%d" % i, b"b%d" % i]) for i in range(5)]
        offsets = await asyncio.gather(*futures)
        assert offsets == [1, 3, 5, 7, 9]
        assert seen.records == [(i, r) for i, r in enumerate(
            r for n in range(5) for r in (b"a%d" % n, b"b%d" % n))]
        assert quorum.last_committed_offset == 9
        assert seen.leaders[-1] == LeaderAndEpoch(1, 1) and quorum.is_active
    run(scenario())


def test_waiting_appends_are_merged_into_one_entry_each_keeping_its_offsets() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1, in_flight_max=1)
        futures = [quorum.append([b"x%d" % i]) for i in range(10)]
        assert await asyncio.gather(*futures) == list(range(10))
        # The first went alone; the nine that waited behind it went as one entry.
        assert [len(b.records) for b in quorum.log.batches()] == [1, 9]
    run(scenario())


def test_a_standby_refuses_appends_with_the_active_controller_id() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=2, active=False)
        quorum.elect(3)
        with pytest.raises(NotControllerError) as raised:
            await quorum.append([b"x"])
        assert raised.value.leader_id == 3 and raised.value.error_code == 41
    run(scenario())


def test_losing_leadership_fails_appends_in_flight_and_a_new_term_continues_the_log() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        await quorum.append([b"committed"])
        in_flight = quorum.append([b"unknown-outcome"])
        quorum.depose()
        with pytest.raises(NotControllerError):
            await in_flight
        assert not quorum.is_active
        # The InMemoryQuorum applied the entry anyway (as Raft may, when a majority had it):
        # the failure said "unknown outcome", and the log is what counts.
        await asyncio.sleep(0)
        quorum.elect(1)
        assert quorum.is_active
        offset = await quorum.append([b"next"])
        assert offset == quorum.log.high_watermark - 1
        assert [r for b in quorum.log.batches() for r in b.records][-1] == b"next"
    run(scenario())


def test_a_lost_entry_dooms_the_ones_behind_it_and_writing_resumes_without_gaps() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1, in_flight_max=4)
        seen = Recorder()
        quorum.register(seen)
        await quorum.append([b"a"])
        quorum.fail_next_proposals(1)
        lost = quorum.append([b"lost"])
        results = await asyncio.gather(lost, return_exceptions=True)
        assert isinstance(results[0], NotControllerError)
        assert quorum.is_active
        assert await quorum.append([b"b", b"c"]) == 2
        assert seen.records == [(0, b"a"), (1, b"b"), (2, b"c")]
    run(scenario())


def test_long_poll_returns_when_the_offset_commits_or_the_timeout_passes() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        assert await quorum.wait_for_commit(0, timeout_s=0.01) is False
        waiter = asyncio.ensure_future(quorum.wait_for_commit(1, timeout_s=5))
        await quorum.append([b"a"])
        assert not waiter.done() or waiter.result() is False
        await quorum.append([b"b"])
        assert await waiter is True
    run(scenario())


def test_snapshot_compacts_the_log_and_a_restart_loads_it_then_the_tail() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        for i in range(4):
            await quorum.append([b"r%d" % i])
        quorum.install_snapshot(MetadataSnapshot(3, 1, (b"image-at-3",)))
        assert quorum.log.log_start_offset == 3
        assert [b.base_offset for b in quorum.log.batches()] == [3]
        seen = Recorder()
        quorum.register(seen)
        quorum.restart()
        assert seen.snapshots[-1] == MetadataSnapshot(3, 1, (b"image-at-3",))
        assert seen.records == [(3, b"r3")]
        assert await quorum.append([b"r4"]) == 4
    run(scenario())


def test_empty_append_is_a_caller_bug() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        with pytest.raises(ValueError):
            quorum.append([])
    run(scenario())


def test_listeners_hear_when_this_node_becomes_active_and_when_it_stops() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1, active=False)
        flips: list[bool] = []

        class ActivityListener(Recorder):
            def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
                super().handle_leader_change(leader)
                flips.append(quorum.is_active)

        quorum.register(ActivityListener())
        quorum.elect(1)
        assert quorum.is_active and flips[-1] is True
        quorum.depose()
        assert not quorum.is_active and flips[-1] is False
    run(scenario())
