"""RaftQuorum on real pysyncobj: three voters in one process on 127.0.0.1 (each SyncObj runs
its own thread and sockets), real journals and dumps in tmp dirs. Covers election to an
active controller, replication, failover, restart of all voters from disk, log compaction
through a metadata snapshot, and a voter far behind catching up through the leader's dump."""
from __future__ import annotations

import asyncio

import pytest

from clients.cli.launcher import free_ports  # listeners below the ephemeral range
from quorum.port import LeaderAndEpoch
from quorum.raft import RaftQuorum, RaftSettings
from quorum.replicated_log import CommittedBatch, MetadataSnapshot

pytestmark = pytest.mark.process
SECRET = "test-cluster-secret"


class Follower:
    """A listener keeping (offset, record) pairs and the snapshots it loaded."""

    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.loaded: list[MetadataSnapshot] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        for i, r in enumerate(batch.records):
            self.records[batch.base_offset + i] = r

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        self.loaded.append(snapshot)
        self.records = {}

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


class Cluster:
    def __init__(self, tmp_path, settings: RaftSettings | None = None) -> None:
        self.voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
        self.tmp_path = tmp_path
        self.settings = settings or RaftSettings(cluster_secret=SECRET)
        self.nodes: dict[int, RaftQuorum] = {}
        self.followers: dict[int, Follower] = {}

    def start(self, node_id: int) -> RaftQuorum:
        quorum = RaftQuorum(node_id=node_id, raft_address=self.voters[node_id],
                            voters=self.voters, data_dir=str(self.tmp_path / f"c{node_id}"),
                            settings=self.settings)
        self.followers[node_id] = Follower()
        quorum.register(self.followers[node_id])
        self.nodes[node_id] = quorum
        return quorum

    async def stop(self, node_id: int) -> None:
        await self.nodes.pop(node_id).close()

    async def active(self, timeout_s: float = 10.0) -> RaftQuorum:
        async def poll() -> RaftQuorum:
            while True:
                for q in self.nodes.values():
                    if q.is_active:
                        return q
                await asyncio.sleep(0.02)
        return await asyncio.wait_for(poll(), timeout_s)

    async def converged(self, offset: int, timeout_s: float = 10.0) -> None:
        await asyncio.gather(*(q.wait_for_commit(offset, timeout_s) for q in self.nodes.values()))
        for q in self.nodes.values():
            assert q.last_committed_offset >= offset, f"node {q.node_id} did not reach {offset}"

    async def close(self) -> None:
        for node_id in list(self.nodes):
            await self.stop(node_id)


def run(coro):
    return asyncio.run(coro)


def test_an_elected_voter_becomes_active_and_every_voter_holds_the_same_log(tmp_path) -> None:
    async def scenario():
        cluster = Cluster(tmp_path)
        try:
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            offsets = await asyncio.gather(*(active.append([b"r%d" % i] * 3) for i in range(20)))
            assert offsets == [2 + 3 * i for i in range(20)]
            await cluster.converged(59)
            logs = [sorted(f.records.items()) for f in cluster.followers.values()]
            assert logs[0] == logs[1] == logs[2] and len(logs[0]) == 60
            standby = next(q for q in cluster.nodes.values() if not q.is_active)
            assert standby.leader_id == active.node_id and standby.epoch == active.epoch
            assert active.journal.fsync_count > 0
        finally:
            await cluster.close()
    run(scenario())


def test_failover_keeps_every_committed_record_and_the_new_active_continues(tmp_path) -> None:
    async def scenario():
        cluster = Cluster(tmp_path)
        try:
            for i in (1, 2, 3):
                cluster.start(i)
            first = await cluster.active()
            last = await first.append([b"before-%d" % i for i in range(10)])
            await cluster.stop(first.node_id)
            second = await cluster.active()
            assert second.node_id != first.node_id and second.epoch > first.epoch
            assert second.log.records_after(-1)[:10] == [(i, b"before-%d" % i) for i in range(10)]
            assert await second.append([b"after"]) == last + 1
        finally:
            await cluster.close()
    run(scenario())


def test_restarting_every_voter_recovers_the_log_from_disk(tmp_path) -> None:
    async def scenario():
        cluster = Cluster(tmp_path)
        try:
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            for i in range(5):
                await active.append([b"durable-%d" % i])
            await cluster.converged(4)
            await cluster.close()
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            await cluster.converged(4)
            for follower in cluster.followers.values():
                assert [follower.records[i] for i in range(5)] == [b"durable-%d" % i for i in range(5)]
            assert await active.append([b"after-restart"]) == 5
        finally:
            await cluster.close()
    run(scenario())


def test_a_voter_behind_the_compacted_log_catches_up_from_the_leaders_dump(tmp_path) -> None:
    async def scenario():
        # Not a failover test: slow elections keep a loaded machine from moving the leader
        # while the scenario writes through it.
        settings = RaftSettings(cluster_secret=SECRET, log_compaction_entries_min=20,
                                election_timeout_min_s=1.0, election_timeout_max_s=2.0,
                                connection_timeout_s=2.0, leader_fallback_timeout_s=3.0)
        cluster = Cluster(tmp_path, settings)
        try:
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            await active.append([b"early"])
            laggard = next(i for i in cluster.nodes if i != active.node_id)
            await cluster.stop(laggard)
            for i in range(60):
                await active.append([b"late-%d" % i])
            # The leader's image at 31 stands for offsets 0..30 (an opaque record here).
            active.install_snapshot(MetadataSnapshot(31, active.epoch, (b"image@31",)))
            for i in range(60, 100):
                await active.append([b"late-%d" % i])
            await _until(lambda: active.dumped_snapshot_end_offset == 31)
            assert active.log.log_start_offset == 31
            cluster.start(laggard)
            await cluster.converged(100)
            caught_up = cluster.followers[laggard]
            assert caught_up.loaded and caught_up.loaded[-1].records == (b"image@31",)
            assert caught_up.records[100] == b"late-99"
            assert cluster.nodes[laggard].log.log_start_offset == 31
        finally:
            await cluster.close()
    run(scenario())


async def _until(predicate, timeout_s: float = 10.0) -> None:
    async def poll():
        while not predicate():
            await asyncio.sleep(0.02)
    await asyncio.wait_for(poll(), timeout_s)


def test_a_restart_after_a_metadata_snapshot_loads_it_then_the_entries_after_it(tmp_path) -> None:
    async def scenario():
        cluster = Cluster(tmp_path)
        try:
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            for i in range(10):
                await active.append([b"r%d" % i])
            for quorum in cluster.nodes.values():
                await quorum.wait_for_commit(9, 10)
                quorum.install_snapshot(MetadataSnapshot(10, active.epoch, (b"image@10",)))
            await _until(lambda: all(q.dumped_snapshot_end_offset == 10
                                      for q in cluster.nodes.values()))
            await active.append([b"after-snapshot"])
            await cluster.converged(10)
            await cluster.close()
            for i in (1, 2, 3):
                cluster.start(i)
            active = await cluster.active()
            await cluster.converged(10)
            for follower in cluster.followers.values():
                assert follower.loaded[0] == MetadataSnapshot(10, follower.loaded[0].epoch, (b"image@10",))
                assert follower.records[10] == b"after-snapshot"
            for quorum in cluster.nodes.values():
                assert quorum.log.log_start_offset == 10
                assert len(quorum.journal) < 10      # the dump replaced the journal's entries
        finally:
            await cluster.close()
    run(scenario())
