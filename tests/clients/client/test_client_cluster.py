"""clients.aio.Cluster against a real 3+3 cluster: metadata, leader_for, coordinators,
request routing to the right broker, coalesced refreshes, and reconnecting after a broker
restart."""
from __future__ import annotations

import asyncio
import signal

import pytest

from ketch_client_helpers import admin_cluster, create_topic_async

from clients.aio._cluster import Cluster
from clients._core.config import parse_config
from clients.errors import NodeNotReadyError, RequestTimeoutError, UnknownTopicOrPartitionError
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

pytestmark = [pytest.mark.process]


def _list_offsets(tp: TopicPartition, epoch: int = -1) -> messages.ListOffsetsRequest:
    R = messages.ListOffsetsRequest
    return R(replica_id=-1, topics=[R.ListOffsetsTopic(name=tp.topic, partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=tp.partition,
                                                current_leader_epoch=epoch, timestamp=-1)])])


def _code(resp) -> int:
    return resp.topics[0].partitions[0].error_code


def test_bootstrap_metadata_names_every_broker(cluster) -> None:
    async def go() -> None:
        c = admin_cluster(cluster.spec.bootstrap_servers)
        await c.start()
        try:
            meta = c.metadata
            assert set(meta.brokers) == {b.id for b in cluster.spec.brokers}
            assert {(b.host, b.port) for b in meta.brokers.values()} == {
                ("127.0.0.1", b.port) for b in cluster.spec.brokers}
            assert meta.cluster_id == cluster.spec.cluster_id
            assert meta.controller_id in meta.brokers  # KRaft: a broker stands in (KIP-590)
            assert await c.controller() in meta.brokers
        finally:
            await c.close()
    asyncio.run(go())


def test_requests_go_to_the_leader_and_only_it_answers(cluster) -> None:
    async def go() -> None:
        c = admin_cluster(cluster.spec.bootstrap_servers)
        await c.start()
        try:
            await create_topic_async(c, "cluster-routing", 3, 3)
            for p in range(3):
                tp = TopicPartition("cluster-routing", p)
                leader, epoch = await c.leader_for(tp)
                assert leader in c.metadata.brokers and epoch >= 0
                _, resp = await c.request(leader, ApiKey.LIST_OFFSETS, _list_offsets(tp, epoch))
                assert _code(resp) == ErrorCode.NONE
                follower = next(n for n in c.metadata.brokers if n != leader)
                _, resp = await c.request(follower, ApiKey.LIST_OFFSETS, _list_offsets(tp))
                assert _code(resp) == ErrorCode.NOT_LEADER_OR_FOLLOWER
                # The body may depend on the negotiated version.
                seen = []
                version, _ = await c.request(None, ApiKey.METADATA,
                                             lambda v: seen.append(v) or messages.MetadataRequest(
                                                 topics=[]), versions=(4, 9))
                assert seen == [version] and 4 <= version <= 9
        finally:
            await c.close()
    asyncio.run(go())


def test_unknown_topic_without_auto_create_names_the_topic(cluster) -> None:
    async def go() -> None:
        c = admin_cluster(cluster.spec.bootstrap_servers, **{"retry.backoff.ms": 20})
        await c.start()
        try:
            with pytest.raises(UnknownTopicOrPartitionError, match="'no-such-topic'"):
                await c.leader_for(TopicPartition("no-such-topic", 0), timeout_ms=1500,
                                   allow_auto_topic_creation=True)
            await create_topic_async(c, "two-partitions", 2, 1)
            with pytest.raises(UnknownTopicOrPartitionError, match="no partition 7"):
                await c.leader_for(TopicPartition("two-partitions", 7), timeout_ms=500)
        finally:
            await c.close()
    asyncio.run(go())


def test_concurrent_refreshes_share_one_request(cluster) -> None:
    async def go() -> None:
        c = admin_cluster(cluster.spec.bootstrap_servers)
        await c.start()
        try:
            views = await asyncio.gather(*(c.refresh_metadata(None) for _ in range(10)))
            assert all(v is views[0] for v in views)   # one response merged once
            narrow = await asyncio.gather(c.refresh_metadata(None), c.refresh_metadata(["x"]))
            assert narrow[0] is narrow[1]               # all topics covers ["x"]
        finally:
            await c.close()
    asyncio.run(go())


def test_group_coordinator_is_found_and_cached(cluster) -> None:
    async def go() -> None:
        c = admin_cluster(cluster.spec.bootstrap_servers)
        await c.start()
        try:
            node = await c.coordinator("cluster-test-group")
            assert node in c.metadata.brokers
            assert await c.coordinator("cluster-test-group") == node
            R = messages.DescribeGroupsRequest
            _, resp = await c.request(node, ApiKey.DESCRIBE_GROUPS, R(groups=["cluster-test-group"]))
            assert resp.groups[0].error_code == ErrorCode.NONE
            c.invalidate_coordinator("cluster-test-group")
            assert await c.coordinator("cluster-test-group") == node
        finally:
            await c.close()
    asyncio.run(go())


def test_reconnects_after_a_broker_restart(cluster) -> None:
    async def go() -> None:
        c = Cluster(parse_config("admin", {"bootstrap.servers": cluster.spec.bootstrap_servers,
                                           "reconnect.backoff.ms": 20,
                                           "reconnect.backoff.max.ms": 200}))
        await c.start()
        try:
            victim = max(c.metadata.brokers)
            await c.request(victim, ApiKey.METADATA, messages.MetadataRequest(topics=[]))
            assert c.is_connected(victim)
            await asyncio.to_thread(cluster.stop_node, victim)
            with pytest.raises(ConnectionError):
                # the old connection breaks; then connecting fails while it is down
                for _ in range(3):
                    await c.request(victim, ApiKey.METADATA, messages.MetadataRequest(topics=[]))
            with pytest.raises(NodeNotReadyError):
                await c.request(victim, ApiKey.METADATA, messages.MetadataRequest(topics=[]))
            cluster.start_node(victim)
            await asyncio.to_thread(cluster.wait_until_ready, 60)

            async def answers() -> bool:
                try:
                    _, r = await c.request(victim, ApiKey.METADATA,
                                           messages.MetadataRequest(topics=[]))
                    return victim in {b.node_id for b in r.brokers}
                except ConnectionError:
                    await asyncio.sleep(0.1)
                    return False
            for _ in range(300):
                if await answers():
                    break
            else:
                raise AssertionError(f"no answer from restarted broker {victim}")
            assert c.is_connected(victim)
        finally:
            await c.close()
    asyncio.run(go())


def test_a_paused_broker_times_out_and_is_reconnected_after(cluster) -> None:
    async def go() -> None:
        c = Cluster(parse_config("admin", {"bootstrap.servers": cluster.spec.bootstrap_servers,
                                           "reconnect.backoff.ms": 20}))
        await c.start()
        victim = min(c.metadata.brokers)
        body = messages.MetadataRequest(topics=[])
        try:
            await c.request(victim, ApiKey.METADATA, body)
            cluster.signal_node(victim, signal.SIGSTOP)
            with pytest.raises(RequestTimeoutError, match=f"node {victim}"):
                await c.request(victim, ApiKey.METADATA, body, timeout_ms=500)
            assert not c.is_connected(victim)   # a late answer could not be matched
        finally:
            cluster.signal_node(victim, signal.SIGCONT)
        try:
            for _ in range(300):
                try:
                    await c.request(victim, ApiKey.METADATA, body)
                    break
                except ConnectionError:
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"broker {victim} never answered again")
        finally:
            await c.close()
    asyncio.run(go())
