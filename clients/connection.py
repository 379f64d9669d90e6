"""An asyncio Kafka connection: the thin shell over ``framing.ClientConnection``.

One TCP connection, pipelined requests, responses matched in order. Used by Ketch's own
clients, by brokers talking to controllers and to other brokers (replica fetchers), and
by tests. Version choice is the caller's: ``negotiate_versions`` asks ApiVersions and
``pick_version`` intersects a wanted range with what the peer advertises.

KIP-368: when a SASL login's answer gives the session a lifetime
(``connections.max.reauth.ms`` on the broker), the connection logs in again on the same
socket once 85-95% of the lifetime has passed (Kafka's client picks the point at random so
that a client's connections do not all renew at once), before it sends its next request.
Requests wait while the login runs; frames that get no answer (acks=0 produce) are held
and written after it, so nothing reaches the broker between the handshake and the end of
the login.
"""
from __future__ import annotations

import asyncio
import collections
import os
import random
import socket
import time
from typing import Any, Callable

from clients.errors import ConnectionClosedError, SaslAuthenticationError
from clients.protocol import NEED_DATA, ApiKey, ClientConnection, CorruptFrameError, messages
from clients.protocol.errors import ErrorCode
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity
from clients.security.sasl import SaslAuthenticationError as MechanismError

# Of a session's lifetime, the part after which a connection logs in again (Kafka's
# SaslClientAuthenticator re-authenticates at a random 85-95%).
REAUTH_FRACTION = (0.85, 0.95)

__all__ = ["CONNECT_VIA", "KafkaConnection", "ConnectionClosedError", "connect", "open_stream", "parse_connect_via",
           "roundtrip"]


class KafkaConnection(asyncio.Protocol):
    """Also the transport's protocol once it owns the connection (in place of the
    stream's StreamReaderProtocol): bytes are taken in the callback that read them, so a
    response resumes its caller one turn of the event loop after it arrived, not two (a
    StreamReader would wake a read task, which would then resolve the caller's waiter;
    issue 22: a replica fetcher's answer waited behind every other ready callback once
    more). So the writing side's flow control and the close are followed here too."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client_id: str | None = "ketch", frame_bytes_max: int = 100 * 1024 * 1024,
                 on_closed: Callable[[], None] | None = None) -> None:
        """``reader``, ``writer``: a connection nothing has been read from yet (a Kafka
        server sends nothing unasked); from here on the connection reads it itself."""
        # Told once when the connection ends, whoever ended it.
        self._on_closed = on_closed
        self._transport = writer.transport
        self._writer = writer       # kept: a StreamWriter closes its transport when collected
        self._conn = ClientConnection(client_id=client_id, frame_bytes_max=frame_bytes_max)
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._closed: BaseException | None = None
        loop = asyncio.get_running_loop()
        self._writing_paused = False
        self._drained: asyncio.Future | None = None
        self._lost = loop.create_future()       # the transport's connection_lost
        self._transport.set_protocol(self)
        self.api_versions: dict[int, tuple[int, int]] = {}
        # KIP-368: how to log in again, and when (loop time); None: the session never ends.
        self._security: ClientSecurity | None = None
        self._login_timeout_s = 30.0
        self._renew_at: float | None = None
        self._renewal: asyncio.Task | None = None
        self._held: list[bytes] = []        # acks=0 frames waiting for the renewal's end
        self.sessions_renewed = 0
        # time.monotonic_ns() of the last socket read: for a caller just resumed by a
        # response, when its last bytes arrived (issue 22's latency trace).
        self.received_ns = 0

    @property
    def peer(self) -> tuple[str, int]:
        return self._transport.get_extra_info("peername")

    # ------------------------------------------------------------ asyncio.Protocol

    def data_received(self, data: bytes) -> None:
        """Bytes from the socket: each whole response to its waiter, in order."""
        if self._closed is not None:
            return
        self.received_ns = time.monotonic_ns()
        try:
            self._conn.receive_data(data)
            while (event := self._conn.next_event()) is not NEED_DATA:
                if not self._waiters:
                    raise CorruptFrameError("a response to no request")
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(event.body)
        except Exception as e:      # a frame that cannot be read: the connection is done
            self._fail(e)

    def eof_received(self) -> bool:
        self._fail(ConnectionClosedError("connection closed by peer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else ConnectionClosedError("connection closed"))
        if not self._lost.done():
            self._lost.set_result(None)
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # ------------------------------------------------------------

    def _fail(self, error: BaseException) -> None:
        if self._closed is None:
            self._closed = error
            if self._on_closed is not None:
                self._on_closed()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionClosedError(str(error)))
        self._waiters.clear()
        self._transport.close()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def request(self, api_key: int, api_version: int, body: Any,
                      timeout_s: float | None = 30.0, close_on_timeout: bool = True) -> Any:
        """Send one request and wait for its response body (after renewing the SASL
        session first, when it is due). ``close_on_timeout=False``: a timeout leaves the
        connection open, its late response skipped (the server answers in order)."""
        if self._renewal is not None or self._session_due():
            await self._renew_session()
        return await self._request(api_key, api_version, body, timeout_s, close_on_timeout)

    def _session_due(self) -> bool:
        return self._renew_at is not None and asyncio.get_running_loop().time() >= self._renew_at

    async def _renew_session(self) -> None:
        if self._renewal is None:
            self._renewal = asyncio.get_running_loop().create_task(self._renew())
        await asyncio.shield(self._renewal)

    async def _renew(self) -> None:
        assert self._security is not None
        try:
            await self._login(self._security, self._login_timeout_s)
            self.sessions_renewed += 1
        finally:
            self._renewal = None
            held, self._held = self._held, []
            if self._closed is None:
                for data in held:
                    self._transport.write(data)

    async def _request(self, api_key: int, api_version: int, body: Any,
                       timeout_s: float | None = 30.0, close_on_timeout: bool = True) -> Any:
        if self._closed is not None:
            raise ConnectionClosedError(str(self._closed))
        _, data = self._conn.send(api_key, api_version, body)
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        # A waiter abandoned by a timeout may still fail later: mark its error as seen.
        waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._waiters.append(waiter)
        self._transport.write(data)
        if timeout_s is None:
            return await waiter
        # A timer on the waiter itself, not wait_for(shield(waiter)): the response resumes
        # the caller in one turn of the event loop instead of three, each a turn of every
        # other ready callback first (issue 22: a replica fetcher's answer waited ~3 turns).
        # A cancelled caller cancels the waiter; data_received skips it, order kept.
        timer = loop.call_later(timeout_s, self._time_out, waiter, close_on_timeout)
        try:
            return await waiter
        finally:
            timer.cancel()

    def _time_out(self, waiter: asyncio.Future, close: bool = True) -> None:
        if not waiter.done():
            waiter.set_exception(asyncio.TimeoutError())
            # The response may still come; unless the caller knows the peer answers every
            # request in order, the connection can no longer be trusted in order.
            if close:
                self.close()

    def send_without_response(self, api_key: int, api_version: int, body: Any) -> None:
        """Produce with acks=0 (``drain`` waits until the socket took the bytes)."""
        if self._closed is not None:
            raise ConnectionClosedError(str(self._closed))
        _, data = self._conn.send(api_key, api_version, body, expect_response=False)
        if self._renewal is None and self._session_due():
            self._renewal = asyncio.get_running_loop().create_task(self._renew())
        if self._renewal is not None:
            self._held.append(data)        # after the login, in order
        else:
            self._transport.write(data)

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark (flow control
        for requests that get no response)."""
        if self._closed is not None:
            raise ConnectionClosedError(str(self._closed))
        if self._writing_paused:
            if self._drained is None:
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)

    async def negotiate_versions(self) -> dict[int, tuple[int, int]]:
        resp = await self.request(ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
            client_software_name="ketch", client_software_version="0.1"))
        if resp.error_code != 0:
            resp = await self.request(ApiKey.API_VERSIONS, 0, messages.ApiVersionsRequest())
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return self.api_versions

    async def sasl_authenticate(self, security: ClientSecurity, timeout_s: float = 30.0,
                                renew_sessions: bool = True) -> None:
        """Log in (KIP-152: SaslHandshake v1, then SaslAuthenticate until the mechanism is
        done). Raises SaslAuthenticationError when the broker refuses; it then closes.
        ``renew_sessions``: log in again before a session with a lifetime ends (KIP-368)."""
        self._renew_at = None
        await self._login(security, timeout_s)
        if renew_sessions:
            self._security, self._login_timeout_s = security, timeout_s
        else:
            self._renew_at = None

    async def _login(self, security: ClientSecurity, timeout_s: float) -> None:
        assert security.sasl_mechanism is not None
        mechanism = security.sasl_client()
        handshake = await self._request(ApiKey.SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(
            mechanism=security.sasl_mechanism), timeout_s)
        if handshake.error_code != ErrorCode.NONE:
            self.close()
            raise SaslAuthenticationError(
                f"{ErrorCode(handshake.error_code).name}: the broker enables "
                f"{', '.join(handshake.mechanisms) or 'no SASL mechanism'}, not {security.sasl_mechanism}")
        version = self.pick_version(ApiKey.SASL_AUTHENTICATE, 0, 2) if self.api_versions else 1
        token: bytes | None = mechanism.initial_response()
        lifetime_ms = 0
        while token is not None:
            resp = await self._request(ApiKey.SASL_AUTHENTICATE, version,
                                       messages.SaslAuthenticateRequest(auth_bytes=token), timeout_s)
            if resp.error_code != ErrorCode.NONE:
                self.close()
                raise SaslAuthenticationError(f"{ErrorCode(resp.error_code).name}: {resp.error_message}")
            lifetime_ms = getattr(resp, "session_lifetime_ms", 0) or 0
            try:
                token = mechanism.evaluate(resp.auth_bytes)
            except MechanismError as e:
                self.close()
                raise SaslAuthenticationError(str(e)) from None
        self._renew_at = None if lifetime_ms <= 0 else (
            asyncio.get_running_loop().time() + lifetime_ms / 1000 * random.uniform(*REAUTH_FRACTION))

    def pick_version(self, api_key: int, lo: int, hi: int) -> int:
        peer = self.api_versions.get(api_key)
        if peer is None:
            raise ConnectionError(f"peer does not support API {api_key}")
        version = min(hi, peer[1])
        if version < max(lo, peer[0]):
            raise ConnectionError(f"no common version for API {api_key}: ours {lo}-{hi}, peer {peer}")
        return version

    def close(self) -> None:
        self._fail(ConnectionClosedError("closed by us"))

    async def wait_closed(self) -> None:
        await asyncio.shield(self._lost)


def parse_connect_via(spec: str) -> dict[tuple[str, int], tuple[str, int]]:
    """``host:port=host:port,...``: dial the right-hand address instead of the left."""
    routes = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        left, sep, right = item.partition("=")
        if not sep:
            raise ValueError(f"KETCH_CONNECT_VIA entry {item!r} is not host:port=host:port")
        (lh, _, lp), (rh, _, rp) = left.rpartition(":"), right.rpartition(":")
        routes[(lh, int(lp))] = (rh, int(rp))
    return routes


# Where this process dials, per destination: the chaos suite routes each inter-node link
# through its own fault proxy by setting KETCH_CONNECT_VIA in a node's environment.
CONNECT_VIA: dict[tuple[str, int], tuple[str, int]] = parse_connect_via(
    os.environ.get("KETCH_CONNECT_VIA", ""))


async def open_stream(host: str, port: int, security: ClientSecurity, timeout_s: float
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """TCP, or TLS checked against the host dialled (before CONNECT_VIA rerouting)."""
    dial_host, dial_port = CONNECT_VIA.get((host, port), (host, port))
    if security.ssl_context is None:
        return await asyncio.wait_for(asyncio.open_connection(dial_host, dial_port), timeout_s)
    return await asyncio.wait_for(asyncio.open_connection(
        dial_host, dial_port, ssl=security.ssl_context, server_hostname=host,
        ssl_handshake_timeout=timeout_s), timeout_s)


async def connect(host: str, port: int, client_id: str | None = "ketch",
                  timeout_s: float = 10.0,
                  on_closed: Callable[[], None] | None = None,
                  security: ClientSecurity = PLAINTEXT_SECURITY,
                  renew_sessions: bool = True, negotiate: bool = False) -> KafkaConnection:
    """A connection, logged in when ``security`` says so; ``negotiate``: ApiVersions asked
    too (``api_versions`` filled). A failure on the way closes it."""
    reader, writer = await open_stream(host, port, security, timeout_s)
    conn = KafkaConnection(reader, writer, client_id=client_id, on_closed=on_closed)
    try:
        if security.sasl_mechanism is not None:
            await conn.sasl_authenticate(security, timeout_s, renew_sessions)
        if negotiate:
            await conn.negotiate_versions()
    except BaseException:
        conn.close()
        raise
    return conn


def roundtrip(host: str, port: int, api_key: int, api_version: int, body: Any, *,
              timeout_s: float = 10.0, client_id: str | None = "ketch",
              security: ClientSecurity = PLAINTEXT_SECURITY) -> Any:
    """One request on a fresh, blocking socket; the decoded response body.

    For tests, tools and the chaos harness that must ask one particular node, at one
    particular version, with no client's connections, caches or retries in between (a
    broker's own metadata image, a controller's view of the quorum). Everything else goes
    through ``clients.aio.Cluster`` and the clients built on it. ``timeout_s`` bounds the
    connect and every read; a peer closing early raises ConnectionError. Dials the address
    given (``CONNECT_VIA`` routes node-to-node links, not these questions). ``security``:
    TLS and a SASL login first (SaslHandshake v1, SaslAuthenticate v1)."""
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        raw.settimeout(timeout_s)
        s = raw if security.ssl_context is None else security.ssl_context.wrap_socket(
            raw, server_hostname=host)
        conn = ClientConnection(client_id=client_id)

        def ask(key: int, version: int, request: Any) -> Any:
            _, data = conn.send(key, version, request)
            s.sendall(data)
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise ConnectionClosedError(f"{host}:{port} closed the connection")
                conn.receive_data(chunk)
                event = conn.next_event()
                if event is not NEED_DATA:
                    return event.body
        if security.sasl_mechanism is not None:
            handshake = ask(ApiKey.SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(
                mechanism=security.sasl_mechanism))
            if handshake.error_code != ErrorCode.NONE:
                raise SaslAuthenticationError(f"{ErrorCode(handshake.error_code).name}: "
                                              f"{host}:{port} enables {handshake.mechanisms}")
            mechanism = security.sasl_client()
            token: bytes | None = mechanism.initial_response()
            while token is not None:
                resp = ask(ApiKey.SASL_AUTHENTICATE, 1, messages.SaslAuthenticateRequest(auth_bytes=token))
                if resp.error_code != ErrorCode.NONE:
                    raise SaslAuthenticationError(f"{ErrorCode(resp.error_code).name}: {resp.error_message}")
                try:
                    token = mechanism.evaluate(resp.auth_bytes)
                except MechanismError as e:
                    raise SaslAuthenticationError(str(e)) from None
        return ask(api_key, api_version, body)
