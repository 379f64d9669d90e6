"""DescribeQuorum's observers and DescribeCluster's controller endpoints, on the controller
listener over InMemoryQuorum with the real QuorumController (quorum/server.py)."""
from __future__ import annotations

import asyncio
import random

from clients.connection import connect
from clients.protocol import ApiKey, messages
from quorum.controller import ControllerConfig, QuorumController
from quorum.network import KafkaServer
from quorum.port import InMemoryQuorum
from quorum.server import METADATA_TOPIC, METADATA_TOPIC_ID, ControllerApis, ControllerDriver
from quorum_helpers import describe_quorum, heartbeat, register_broker

VOTERS = {1: ("127.0.0.1", 0), 2: ("127.0.0.1", 1), 3: ("127.0.0.1", 2)}


def fetch(replica_id: int, offset: int, replica_state: bool) -> messages.FetchRequest:
    R = messages.FetchRequest
    return R(replica_id=-1 if replica_state else replica_id,
             replica_state=R.ReplicaState(replica_id=replica_id if replica_state else -1),
             max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[R.FetchTopic(
                 topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[R.FetchPartition(
                     partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def test_the_active_controller_reports_observers_from_fetches_and_heartbeats() -> None:
    async def scenario():
        quorum = InMemoryQuorum(node_id=1)
        driver = ControllerDriver(quorum, lambda: QuorumController(ControllerConfig(),
                                                                   random.Random(1)))
        apis = ControllerApis(1, quorum, driver, VOTERS)
        apis.wall_clock_ms = lambda: 5_000
        listener = KafkaServer(apis, "127.0.0.1", 0)
        port = await listener.start()
        conn = await connect("127.0.0.1", port)
        await conn.negotiate_versions()
        try:
            registered = await register_broker(conn, 7)
            await heartbeat(conn, 7, registered.broker_epoch, metadata_offset=1 << 40)
            hw = quorum.log.high_watermark
            await conn.request(ApiKey.FETCH, 12, fetch(8, 0, replica_state=False))
            await conn.request(ApiKey.FETCH, 17, fetch(9, hw, replica_state=True))
            await conn.request(ApiKey.FETCH, 12, fetch(-1, 0, replica_state=False))  # a consumer
            part = await describe_quorum(conn)
            observers = {o.replica_id: (o.log_end_offset, o.last_fetch_timestamp,
                                        o.last_caught_up_timestamp) for o in part.observers}
            # 7 claimed more than the log holds: it is counted at the log's end.
            assert observers == {7: (hw, 5_000, 5_000), 8: (0, 5_000, -1), 9: (hw, 5_000, 5_000)}
            voters = {v.replica_id: v.log_end_offset for v in part.current_voters}
            assert voters == {1: hw, 2: -1, 3: -1}      # in memory: no followers to ask
            # KIP-919: an admin client bootstrapped from the controllers lists them.
            cluster = await conn.request(ApiKey.DESCRIBE_CLUSTER, 1,
                                         messages.DescribeClusterRequest(endpoint_type=2))
            assert (cluster.endpoint_type, cluster.controller_id) == (2, 1)
            assert [(b.broker_id, b.port) for b in cluster.brokers] == [(1, 0), (2, 1), (3, 2)]
            brokers = await conn.request(ApiKey.DESCRIBE_CLUSTER, 1, messages.DescribeClusterRequest())
            assert [b.broker_id for b in brokers.brokers] == [7]
            # A standby names the leader and reports no observers.
            quorum.elect(2)
            part = await describe_quorum(conn)
            assert part.leader_id == 2 and part.observers == []
        finally:
            conn.close()
            await listener.stop()
    asyncio.run(scenario())
