"""The network layer's SASL gate in-process (quorum/network.py over a real socket): the
legacy SaslHandshake v0 path with raw tokens, the refusal of requests before
authentication, ILLEGAL_SASL_STATE on a plaintext listener, and the principal that
authentication sets on ClientInfo."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from clients.connection import connect
from clients.errors import ConnectionClosedError, SaslAuthenticationError
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.protocol.framing import ClientConnection, frame
from clients.protocol.types import INT32
from clients.security.client_auth import ClientSecurity
from clients.security.listeners import ListenerSpec, SecurityProtocol
from quorum.network import SASL_VERSIONS, ClientInfo, KafkaServer, listener_security

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-pw";')


class Handler:
    """ApiVersions and Metadata; remembers who asked."""

    def __init__(self) -> None:
        self.principals: list[str] = []

    async def handle(self, request: Any, client: ClientInfo) -> tuple[int, Any]:
        self.principals.append(str(client.principal))
        if request.header.api_key == ApiKey.API_VERSIONS:
            return 0, messages.ApiVersionsResponse(error_code=0, api_keys=[
                messages.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in {ApiKey.API_VERSIONS: (0, 0), **SASL_VERSIONS}.items()])
        return request.header.api_version, messages.MetadataResponse(brokers=[], topics=[])

    def handle_unsupported(self, request: Any) -> None:
        return None


async def _server(protocol: SecurityProtocol, handler: Handler) -> KafkaServer:
    spec = ListenerSpec(protocol.name, "127.0.0.1", 0, protocol, "127.0.0.1", 0)
    props = {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS}
    server = KafkaServer(handler, "127.0.0.1", 0,
                         listener=listener_security(spec, props, lambda user, m: None))
    await server.start()
    return server


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = INT32.unpack(await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def test_legacy_v0_handshake_then_raw_tokens() -> None:
    async def run() -> None:
        handler = Handler()
        server = await _server(SecurityProtocol.SASL_PLAINTEXT, handler)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            conn = ClientConnection("legacy")
            _, data = conn.send(ApiKey.SASL_HANDSHAKE, 0, messages.SaslHandshakeRequest(mechanism="PLAIN"))
            writer.write(data)
            payload = await _read_frame(reader)
            conn.receive_data(frame(payload))
            assert conn.next_event().body.error_code == ErrorCode.NONE
            writer.write(frame(b"\0alice\0alice-pw"))          # a raw token, no header
            assert await _read_frame(reader) == b""            # PLAIN's empty challenge
            _, data = conn.send(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]))
            writer.write(data)
            conn.receive_data(frame(await _read_frame(reader)))
            assert conn.next_event().body.topics == []
            assert handler.principals == ["User:alice"]
            writer.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_wrong_legacy_token_closes_and_counts() -> None:
    async def run() -> None:
        server = await _server(SecurityProtocol.SASL_PLAINTEXT, Handler())
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            conn = ClientConnection("legacy")
            _, data = conn.send(ApiKey.SASL_HANDSHAKE, 0, messages.SaslHandshakeRequest(mechanism="PLAIN"))
            writer.write(data)
            await _read_frame(reader)
            started = time.monotonic()
            writer.write(frame(b"\0alice\0guess"))
            assert await reader.read() == b""                  # closed, nothing said
            # ... after connection.failed.authentication.delay.ms (default 100 ms).
            assert time.monotonic() - started >= 0.09
            assert server.failed_authentications == 1
        finally:
            await server.stop()
    asyncio.run(run())


def test_ketch_client_logs_in_and_a_wrong_password_is_refused() -> None:
    async def run() -> None:
        handler = Handler()
        server = await _server(SecurityProtocol.SASL_PLAINTEXT, handler)
        try:
            good = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "PLAIN", "alice", "alice-pw")
            conn = await connect("127.0.0.1", server.port, security=good)
            await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]))
            conn.close()
            assert handler.principals == ["User:alice"]
            bad = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "PLAIN", "alice", "nope")
            try:
                await connect("127.0.0.1", server.port, security=bad)
                raise AssertionError("a wrong password logged in")
            except SaslAuthenticationError as e:
                assert "SASL_AUTHENTICATION_FAILED" in str(e) and "nope" not in str(e)
            other = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "SCRAM-SHA-256", "alice", "alice-pw")
            try:
                await connect("127.0.0.1", server.port, security=other)
                raise AssertionError("an unsupported mechanism logged in")
            except SaslAuthenticationError as e:
                assert "UNSUPPORTED_SASL_MECHANISM" in str(e) and "PLAIN" in str(e)
        finally:
            await server.stop()
    asyncio.run(run())


def test_a_request_before_authentication_closes_the_connection() -> None:
    async def run() -> None:
        handler = Handler()
        server = await _server(SecurityProtocol.SASL_PLAINTEXT, handler)
        try:
            conn = await connect("127.0.0.1", server.port)
            try:
                await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]), timeout_s=5)
                raise AssertionError("served before authentication")
            except ConnectionClosedError:
                pass
            assert handler.principals == []
        finally:
            await server.stop()
    asyncio.run(run())


def test_sasl_on_a_plaintext_listener_is_an_illegal_state() -> None:
    async def run() -> None:
        handler = Handler()
        server = await _server(SecurityProtocol.PLAINTEXT, handler)
        try:
            conn = await connect("127.0.0.1", server.port)
            resp = await conn.request(ApiKey.SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(mechanism="PLAIN"))
            assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
            await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]))
            assert handler.principals == ["User:ANONYMOUS"]
            conn.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_a_session_is_renewed_on_its_connection_and_closed_once_it_ends() -> None:
    """KIP-368 through the network layer: connections.max.reauth.ms=600; Ketch's client
    logs in again on the same connection (the broker renews the session), and once the
    session has ended the next request closes the connection."""
    async def run() -> None:
        handler = Handler()
        spec = ListenerSpec("SASL_PLAINTEXT", "127.0.0.1", 0, SecurityProtocol.SASL_PLAINTEXT, "127.0.0.1", 0)
        props = {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS,
                 "connections.max.reauth.ms": "600"}
        server = KafkaServer(handler, "127.0.0.1", 0,
                             listener=listener_security(spec, props, lambda user, m: None))
        await server.start()
        try:
            security = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "PLAIN", "alice", "alice-pw")
            # A client that does not renew (as the Java client before KIP-368).
            conn = await connect("127.0.0.1", server.port, security=security, renew_sessions=False)
            await conn.sasl_authenticate(security, renew_sessions=False)   # a re-login, same principal
            await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]))
            await asyncio.sleep(0.8)                               # past the session's end
            try:
                await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]), timeout_s=5)
                raise AssertionError("served after the session ended")
            except ConnectionClosedError:
                pass
            assert handler.principals == ["User:alice"]
            # Ketch's client renews by itself, on the same connection, while busy and after
            # idling past a session's end: its requests keep being served.
            conn = await connect("127.0.0.1", server.port, security=security)
            deadline = time.monotonic() + 10
            served = 0
            while conn.sessions_renewed < 3 and time.monotonic() < deadline:
                await conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[]), timeout_s=5)
                served += 1
                await asyncio.sleep(0.05 if served % 10 else 0.7)   # now and then past a session
            assert not conn.closed and conn.sessions_renewed >= 3, conn.sessions_renewed
            assert server.failed_authentications == 0
            conn.close()
        finally:
            await server.stop()
    asyncio.run(run())
