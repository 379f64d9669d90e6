"""The controller listener in-process over InMemoryQuorum, with opaque record bytes: the
metadata fetch (long poll, batches, snapshot redirect and FetchSnapshot), DescribeQuorum,
ApiVersions, and an observer reaching the controller's log."""
from __future__ import annotations

import asyncio

from clients.connection import connect
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import decode_batches
from broker.metadata_follower import MetadataObserver
from quorum.network import KafkaServer
from quorum.port import InMemoryQuorum
from quorum.replicated_log import CommittedBatch, MetadataSnapshot
from quorum.server import (
    METADATA_TOPIC, METADATA_TOPIC_ID, ControllerApis, ControllerDriver,
)


class Records:
    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.snapshots: list[MetadataSnapshot] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        for i, r in enumerate(batch.records):
            self.records[batch.base_offset + i] = r

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        self.snapshots.append(snapshot)
        self.records = {}


async def start(quorum: InMemoryQuorum):
    driver = ControllerDriver(quorum, None)
    apis = ControllerApis(quorum.node_id, quorum, driver, {quorum.node_id: ("127.0.0.1", 0)})
    listener = KafkaServer(apis, "127.0.0.1", 0)
    port = await listener.start()
    return listener, port


def fetch_request(offset: int, max_wait_ms: int) -> messages.FetchRequest:
    return messages.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                                 max_bytes=1 << 20, topics=[messages.FetchRequest.FetchTopic(
                                     topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                     partitions=[messages.FetchRequest.FetchPartition(
                                         partition=0, fetch_offset=offset,
                                         partition_max_bytes=1 << 20)])])


def test_metadata_fetch_returns_committed_batches_as_v2_record_batches() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        listener, port = await start(quorum)
        conn = await connect("127.0.0.1", port)
        try:
            await quorum.append([b"a", b"b"])
            await quorum.append([b"c"])
            for version in (12, 13, 17):
                response = await conn.request(ApiKey.FETCH, version, fetch_request(1, 0))
                part = response.responses[0].partitions[0]
                assert part.error_code == 0 and part.high_watermark == 3
                assert part.current_leader.leader_id == 1
                batches = decode_batches(part.records)
                # The batch holding offset 1 comes whole; the observer skips what it has.
                assert [(b.header.base_offset, [r.value for r in b.records]) for b in batches] == \
                       [(0, [b"a", b"b"]), (2, [b"c"])]
                assert batches[0].header.partition_leader_epoch == quorum.epoch
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_an_empty_fetch_waits_until_a_record_commits() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        listener, port = await start(quorum)
        conn = await connect("127.0.0.1", port)
        try:
            pending = asyncio.ensure_future(conn.request(ApiKey.FETCH, 13, fetch_request(0, 20_000)))
            await asyncio.sleep(0.05)
            assert not pending.done()           # long polling
            await quorum.append([b"wake"])
            part = (await asyncio.wait_for(pending, 5)).responses[0].partitions[0]
            assert [r.value for b in decode_batches(part.records) for r in b.records] == [b"wake"]
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_fetch_below_the_log_start_points_to_the_snapshot_and_fetch_snapshot_serves_it() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        listener, port = await start(quorum)
        conn = await connect("127.0.0.1", port)
        try:
            for i in range(5):
                await quorum.append([b"r%d" % i])
            image = tuple(b"image-record-%d" % i for i in range(2500))
            quorum.install_snapshot(MetadataSnapshot(4, quorum.epoch, image))
            part = (await conn.request(ApiKey.FETCH, 13, fetch_request(0, 0))).responses[0].partitions[0]
            assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (4, quorum.epoch)
            assert part.log_start_offset == 4
            request = messages.FetchSnapshotRequest(replica_id=-1, max_bytes=1 << 20, topics=[
                messages.FetchSnapshotRequest.TopicSnapshot(name=METADATA_TOPIC, partitions=[
                    messages.FetchSnapshotRequest.PartitionSnapshot(
                        partition=0, snapshot_id=messages.FetchSnapshotRequest.SnapshotId(
                            end_offset=4, epoch=quorum.epoch), position=0)])])
            snap = (await conn.request(ApiKey.FETCH_SNAPSHOT, 1, request)).topics[0].partitions[0]
            assert snap.error_code == 0 and snap.size == len(snap.unaligned_records)
            assert tuple(r.value for b in decode_batches(snap.unaligned_records)
                         for r in b.records) == image
            wrong_request = messages.FetchSnapshotRequest(
                replica_id=-1, max_bytes=1 << 20, topics=[messages.FetchSnapshotRequest.TopicSnapshot(
                    name=METADATA_TOPIC, partitions=[messages.FetchSnapshotRequest.PartitionSnapshot(
                        partition=0, snapshot_id=messages.FetchSnapshotRequest.SnapshotId(
                            end_offset=3, epoch=quorum.epoch), position=0)])])
            wrong = (await conn.request(ApiKey.FETCH_SNAPSHOT, 1, wrong_request)
                     ).topics[0].partitions[0]
            assert wrong.error_code == ErrorCode.SNAPSHOT_NOT_FOUND
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_an_observer_reaches_the_controllers_log_from_zero_and_through_a_snapshot() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        listener, port = await start(quorum)
        for i in range(30):
            await quorum.append([b"r%d-%d" % (i, j) for j in range(3)])
        follower = Records()
        observer = MetadataObserver([("127.0.0.1", port)], follower, snapshot_chunk_bytes=1000)
        task = asyncio.ensure_future(observer.run())
        try:
            await observer.wait_for_offset(89, timeout_s=10)
            assert follower.records == dict(quorum.log.records_after(-1))
            quorum.install_snapshot(MetadataSnapshot(90, quorum.epoch, (b"img",) * 700))
            await quorum.append([b"tail"])
            late = Records()
            late_observer = MetadataObserver([("127.0.0.1", port)], late, snapshot_chunk_bytes=1000)
            late_task = asyncio.ensure_future(late_observer.run())
            await late_observer.wait_for_offset(90, timeout_s=10)
            await observer.wait_for_offset(90, timeout_s=10)
            assert late.snapshots == [MetadataSnapshot(90, quorum.epoch, (b"img",) * 700)]
            assert late.records == {90: b"tail"} and follower.records[90] == b"tail"
            assert late_observer.snapshots_loaded == 1 and observer.snapshots_loaded == 0
            late_task.cancel()
            late_observer.close()
        finally:
            task.cancel()
            observer.close()
            await listener.stop()
    asyncio.run(scenario())


def test_describe_quorum_and_api_versions() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        listener, port = await start(quorum)
        conn = await connect("127.0.0.1", port)
        try:
            await quorum.append([b"x"])
            versions = await conn.negotiate_versions()
            assert ApiKey.FETCH in versions and ApiKey.DESCRIBE_QUORUM in versions
            request = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
                topic_name=METADATA_TOPIC, partitions=[messages.DescribeQuorumRequest.PartitionData(
                    partition_index=0)])])
            part = (await conn.request(ApiKey.DESCRIBE_QUORUM, 1, request)).topics[0].partitions[0]
            assert (part.leader_id, part.leader_epoch, part.high_watermark) == (1, quorum.epoch, 1)
            assert [v.replica_id for v in part.current_voters] == [1]
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_brokers_register_unfence_and_create_topics_and_an_observer_gets_the_same_image() -> None:
    """The real QuorumController behind the listener: decisions commit and replay, and an
    observer replaying the fetched log reaches exactly the controller's image."""
    import random

    from quorum.controller import ControllerConfig, QuorumController
    from broker.metadata_follower import MetadataImageListener
    from quorum_helpers import create_topic, heartbeat, register_broker

    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        driver = ControllerDriver(quorum, lambda: QuorumController(ControllerConfig(),
                                                                   random.Random(7)))
        apis = ControllerApis(1, quorum, driver, {1: ("127.0.0.1", 0)})
        listener = KafkaServer(apis, "127.0.0.1", 0)
        port = await listener.start()
        conn = await connect("127.0.0.1", port)
        await conn.negotiate_versions()
        follower = MetadataImageListener()
        observer = MetadataObserver([("127.0.0.1", port)], follower)
        task = asyncio.ensure_future(observer.run())
        try:
            for broker_id in (1, 2, 3):
                registered = await register_broker(conn, broker_id, rack=f"r{broker_id}")
                assert registered.error_code == 0
                beat = await heartbeat(conn, broker_id, registered.broker_epoch)
                assert beat.error_code == 0 and not beat.is_fenced
            created = await create_topic(conn, "orders", partitions=6, replication=3)
            assert [(t.name, t.error_code) for t in created.topics] == [("orders", 0)]
            again = await create_topic(conn, "orders", partitions=6, replication=3)
            assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            image = driver.controller.image
            assert image.topics.get("orders") is not None
            await observer.wait_for_offset(quorum.last_committed_offset, timeout_s=10)
            assert follower.image == image and follower.batches_skipped == 0
            assert driver.replay_errors == 0
            # A standby refuses writes and names the active controller.
            quorum.elect(2)
            refused = await create_topic(conn, "later", partitions=1, replication=1)
            assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        finally:
            task.cancel()
            observer.close()
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_a_write_the_quorum_cannot_commit_times_out_and_the_next_decision_sees_its_outcome() -> None:
    """REQUEST_TIMED_OUT has an unknown outcome: the record may still commit. The driver
    decides nothing until it knows, so a retry sees the first attempt."""
    import random

    from quorum.controller import ControllerConfig, QuorumController
    from quorum_helpers import create_topic, heartbeat, register_broker

    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        driver = ControllerDriver(quorum, lambda: QuorumController(ControllerConfig(),
                                                                   random.Random(3)),
                                  write_timeout_ms=500)
        apis = ControllerApis(1, quorum, driver, {1: ("127.0.0.1", 0)})
        listener = KafkaServer(apis, "127.0.0.1", 0)
        port = await listener.start()
        conn = await connect("127.0.0.1", port)
        await conn.negotiate_versions()
        try:
            registered = await register_broker(conn, 1)
            assert not (await heartbeat(conn, 1, registered.broker_epoch)).is_fenced
            quorum.hold_commits()
            first = await create_topic(conn, "t", partitions=2, replication=1)
            assert first.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
            pending = asyncio.ensure_future(create_topic(conn, "t", partitions=2, replication=1))
            await asyncio.sleep(0.05)
            assert not pending.done()       # waits for the first attempt's outcome
            quorum.release_commits()
            retry = await pending
            assert retry.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            assert driver.controller.image.topics.get("t") is not None
            assert driver.replay_errors == 0
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())


def test_a_heartbeat_queued_behind_a_slow_write_keeps_the_brokers_session() -> None:
    """A session counts from the heartbeat's arrival, not from its turn at the write lock:
    a broker heartbeating on time is not fenced while its heartbeat waits behind a commit
    (at 100k partitions, a queue of large ISR changes made live brokers' sessions expire)."""
    import random

    from quorum.controller import ControllerConfig, QuorumController
    from quorum_helpers import create_topic, heartbeat, register_broker

    async def scenario():
        clock = [1_000_000]
        quorum = InMemoryQuorum(node_id=1)
        config = ControllerConfig(broker_session_timeout_ms=1000,
                                  broker_heartbeat_interval_ms=100)
        driver = ControllerDriver(quorum, lambda: QuorumController(config, random.Random(5)),
                                  write_timeout_ms=60_000, clock_ms=lambda: clock[0])
        apis = ControllerApis(1, quorum, driver, {1: ("127.0.0.1", 0)})
        listener = KafkaServer(apis, "127.0.0.1", 0)
        port = await listener.start()
        conn = await connect("127.0.0.1", port)
        await conn.negotiate_versions()
        beats = await connect("127.0.0.1", port)     # a broker heartbeats on its own connection
        await beats.negotiate_versions()
        try:
            registered = await register_broker(conn, 1)
            assert not (await heartbeat(beats, 1, registered.broker_epoch)).is_fenced
            quorum.hold_commits()
            slow = asyncio.ensure_future(create_topic(conn, "t", partitions=1, replication=1))
            await asyncio.sleep(0.05)
            clock[0] += 800                  # the heartbeat arrives in time...
            queued = asyncio.ensure_future(heartbeat(beats, 1, registered.broker_epoch))
            await asyncio.sleep(0.05)
            assert not queued.done()         # ...and waits behind the commit
            clock[0] += 700                  # past the previous heartbeat's session
            decision, _ = driver.controller.poll(clock[0])
            fenced = [r for r in decision.records
                      if type(r) is messages.BrokerRegistrationChangeRecord and r.fenced == 1]
            assert fenced == []
            clock[0] += 1000                 # and nothing arrived since: expired
            decision, _ = driver.controller.poll(clock[0])
            assert [r.broker_id for r in decision.records
                    if type(r) is messages.BrokerRegistrationChangeRecord and r.fenced == 1] == [1]
            quorum.release_commits()
            assert (await slow).topics[0].error_code == 0
            assert (await queued).error_code == 0
        finally:
            beats.close()
            conn.close()
            await listener.stop()
    asyncio.run(scenario())
