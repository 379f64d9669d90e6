"""A controller with an authorizer: brokers' requests and the metadata fetch need
CLUSTER_ACTION on the cluster (Kafka's ControllerApis); the principal is the connection's
(User:ANONYMOUS on a plaintext listener)."""
from __future__ import annotations

import asyncio

from clients.connection import connect
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from metadata_log.authorizer import AuthorizerConfig, StandardAuthorizer
from quorum.network import KafkaServer
from quorum.port import InMemoryQuorum
from quorum.server import ControllerApis, ControllerDriver
from tests.quorum.test_controller_server import fetch_request


async def _fetch_and_heartbeat_codes(config: AuthorizerConfig) -> tuple[int, int]:
    quorum = InMemoryQuorum(node_id=1)
    driver = ControllerDriver(quorum, None)
    apis = ControllerApis(1, quorum, driver, {1: ("127.0.0.1", 0)},
                          authorizer=StandardAuthorizer(config))
    listener = KafkaServer(apis, "127.0.0.1", 0)
    port = await listener.start()
    conn = await connect("127.0.0.1", port)
    try:
        await quorum.append([b"a"])
        fetched = await conn.request(ApiKey.FETCH, 13, fetch_request(0, 0))
        quorum_described = await conn.request(ApiKey.DESCRIBE_QUORUM, 2,
                                              messages.DescribeQuorumRequest(topics=[]))
        return fetched.error_code, quorum_described.error_code
    finally:
        conn.close()
        await listener.stop()


def test_without_cluster_acls_anonymous_is_refused_and_a_super_user_is_served() -> None:
    refused = asyncio.run(_fetch_and_heartbeat_codes(AuthorizerConfig(frozenset())))
    assert refused == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    served = asyncio.run(_fetch_and_heartbeat_codes(AuthorizerConfig(frozenset({"User:ANONYMOUS"}))))
    assert served == (ErrorCode.NONE, ErrorCode.NONE)
