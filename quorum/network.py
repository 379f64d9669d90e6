"""The asyncio Kafka-protocol listener: socket bytes <-> ServerConnection <-> API handlers.

Shared by controllers and brokers; what each serves is its ``ApiHandler``. It lives in
``quorum`` because KRaft brokers are the quorum's observers and already depend on it (as
Kafka's broker depends on its raft module); ``broker`` may import this module and nothing
else from ``quorum`` (tests/test_layering.py).

Each connection is served one request at a time, in arrival order, as Kafka's network
layer does (it mutes a channel until the response to its current request is sent): that
keeps responses in request order with no bookkeeping, while clients still pipeline
requests into the socket. Produce with acks=0 gets no response. One exception (issue 22):
a Produce whose handler says it now only waits (``ClientInfo.allow_next_request``, after
its appends, while acks=all waits for the in-sync replicas) lets the next request start if
that is a Produce too, up to ``PIPELINED_PRODUCES_MAX`` of them; their appends still happen
in request order (each starts only after the previous one's appends), their responses are
written in request order by one task, and any other request waits until they all are.
Otherwise a connection carried one replication round of acks=all data at a time, and the
client's queue behind it was most of the end-to-end latency. A Produce's handling starts
in the connection's own task (as an eager task would): one answered without suspending
(acks=0/1) with nothing unwritten before it is written there, with no Task or queue entry.

A malformed frame (CorruptFrameError) closes that connection only. A request whose API
key or version Ketch does not know is answered where Kafka answers it (ApiVersions: error
35 and a v0 body listing what is supported, KIP-511) and otherwise closes the connection.

Responses whose ``records`` are log file regions go out with ``os.sendfile`` (zero-copy)
on plain TCP, under asyncio's loop and uvloop alike (``send_file_region``); other parts
with ``transport.write``.

Each listener has a name and a security protocol (``ListenerSecurity``, issue 16). On SSL
and SASL_SSL, asyncio runs the TLS handshake before the first byte reaches
``ServerConnection``; a plaintext client on a TLS port fails that handshake and is closed,
and TLS bytes on a plaintext port are a frame size out of range (closed as any corrupt
frame). On SASL_PLAINTEXT and SASL_SSL every request before authentication completes goes
to the connection's pure ``SaslServerAuthenticator`` (clients/security/sasl.py): only
ApiVersions, SaslHandshake and SaslAuthenticate (or the legacy raw tokens) are served, a
failure is answered and closes the connection, and the attempt is logged without secrets.
Authentication sets ``ClientInfo.principal``: the SASL user, or on SSL the client
certificate's subject (``User:CN=...``), as Kafka's default principal builder does.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Generator, Mapping, Protocol

from clients.protocol import (
    NEED_DATA, ApiKey, CorruptFrameError, RequestReceived, ServerConnection, UnsupportedRequest,
    messages,
)
from clients.protocol.acls import ANONYMOUS, KafkaPrincipal
from clients.protocol.errors import ErrorCode
from clients.protocol.framing import frame
from clients.security import scram
from clients.security.jaas import JaasError, parse_jaas_config
from clients.security.listeners import ListenerSpec, SecurityProtocol, listener_value
from clients.security.sasl import PLAIN, PlainServer, SaslAnswer, SaslServerAuthenticator, ScramServer
from clients.security.scram import ScramCredential, ScramMechanism
from clients.security.tls import TlsConfigError, principal_name, server_ssl_context

log = logging.getLogger(__name__)

__all__ = ["ApiHandler", "ClientInfo", "FileRegion", "KafkaServer", "ListenerConfigError",
           "ListenerSecurity", "SASL_VERSIONS", "listener_security"]

# Served by this layer on every listener, so every ApiHandler advertises them in ApiVersions
# (Kafka does, on PLAINTEXT listeners too, where they answer ILLEGAL_SASL_STATE).
SASL_VERSIONS: dict[int, tuple[int, int]] = {ApiKey.SASL_HANDSHAKE: (0, 1),
                                             ApiKey.SASL_AUTHENTICATE: (0, 2)}
# A client that has not finished its TLS handshake by then is dropped.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a listener requires of its connections: TLS when ``ssl_context`` is set, SASL
    when ``authenticator`` is (a factory: one pure state machine per connection)."""
    name: str = "PLAINTEXT"
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    authenticator: Callable[[], SaslServerAuthenticator] | None = None
    # connection.failed.authentication.delay.ms: a failed login's connection is closed
    # this long after the answer (only that connection waits), slowing password guessing.
    failed_authentication_delay_ms: int = 100

READ_CHUNK_BYTES = 256 * 1024
# Below this, a log region is read into the response buffer rather than sent with
# sendfile: a separate send() of the region, and the wait for the transport to flush
# first, cost more than copying a small batch (most follower and consumer fetches at the
# tail of a log carry a few KB).
SENDFILE_MIN_BYTES = 64 * 1024
# Produce requests of one connection waiting for replication at once (issue 22); the
# Java producer's max.in.flight.requests.per.connection is 5, librdkafka's up to 1,000,000.
PIPELINED_PRODUCES_MAX = 16


class ApiHandler(Protocol):
    async def handle(self, request: RequestReceived, client: "ClientInfo") -> tuple[int, Any] | None:
        """(response api version, response body), or None for no response (acks=0)."""

    def handle_unsupported(self, request: UnsupportedRequest) -> tuple[int, Any] | None:
        """A response for an unknown version (ApiVersions), or None to close."""


def _resolve(future: asyncio.Future, _: Any = None) -> None:
    if not future.done():
        future.set_result(None)


class _Resumed:
    """The rest of a coroutine whose first step already ran and suspended on
    ``yielded``: awaited in a Task, it goes on there (the Task gets ``yielded`` first,
    so it wakes when that is done), as Python 3.12's eager tasks do."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self.coro = coro
        self.yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self.coro, self.yielded
        while True:
            try:
                sent = yield yielded
            except BaseException as e:      # cancellation reaches the handler
                try:
                    yielded = coro.throw(e)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as done:
                    return done.value


async def _go_on(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    return await _Resumed(coro, yielded)


class _Unwritten:
    """A connection's pipelined Produce requests whose responses are not written yet,
    oldest first, each as (its handling: a Task or a done Future, api key, correlation
    id): the reading loop puts, one writer task takes, writes and says ``written``.
    ``count`` includes the one being written. A deque and two futures made only when
    someone waits: asyncio.Queue's machinery cost more per request."""

    __slots__ = ("entries", "count", "loop", "ready", "idle")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.entries: collections.deque[tuple[asyncio.Future, int, int]] = collections.deque()
        self.count = 0
        self.loop = loop
        self.ready: asyncio.Future | None = None    # the writer waits for an entry
        self.idle: asyncio.Future | None = None     # the reading loop waits for count 0

    def put(self, entry: tuple[asyncio.Future, int, int]) -> None:
        self.entries.append(entry)
        self.count += 1
        if self.ready is not None:
            _resolve(self.ready)

    async def get(self) -> tuple[asyncio.Future, int, int]:
        while not self.entries:
            self.ready = self.loop.create_future()
            try:
                await self.ready
            finally:
                self.ready = None
        return self.entries.popleft()

    def written(self) -> None:
        self.count -= 1
        if self.count == 0 and self.idle is not None:
            _resolve(self.idle)

    async def join(self) -> None:
        while self.count:
            self.idle = self.loop.create_future()
            try:
                await self.idle
            finally:
                self.idle = None

    def cancel_all(self) -> None:
        """Nothing more is written: cancel what waits, release the reading loop."""
        while self.entries:
            self.entries.popleft()[0].cancel()
            self.written()


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ListenerConfigError(ValueError):
    """A listener's security settings cannot be used; the process refuses to start."""


ScramLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]


def listener_security(spec: ListenerSpec, props: Mapping[str, str], scram_credentials: ScramLookup,
                      random_bytes: Callable[[int], bytes] = os.urandom) -> ListenerSecurity:
    """A listener's TLS context and SASL mechanisms from Kafka's keys (``listener.name.<l>.``
    prefixed first): ``ssl.*`` (clients/security/tls.py), ``sasl.enabled.mechanisms``
    (default: SCRAM-SHA-256 and SCRAM-SHA-512, and PLAIN when a PLAIN user table is set),
    PLAIN's users from ``listener.name.<l>.plain.sasl.jaas.config`` or ``sasl.jaas.config``
    (``user_<name>="<password>"``), SCRAM verifiers from ``scram_credentials`` (the
    metadata image's), the session lifetime from ``connections.max.reauth.ms`` (KIP-368)."""
    protocol = spec.security_protocol
    context = None
    if protocol.uses_tls:
        try:
            context = server_ssl_context(lambda key: listener_value(props, spec.name, key))
        except TlsConfigError as e:
            raise ListenerConfigError(f"listener {spec.name}: {e}") from None
    authenticator = None
    if protocol.uses_sasl:
        jaas_text = listener_value(props, spec.name, "sasl.jaas.config", mechanism=PLAIN)
        try:
            users = parse_jaas_config(jaas_text).users if jaas_text else {}
        except JaasError as e:
            raise ListenerConfigError(f"listener {spec.name}: {e}") from None
        enabled_text = listener_value(props, spec.name, "sasl.enabled.mechanisms")
        if enabled_text is None:
            enabled = [*scram.MECHANISMS] + ([PLAIN] if users else [])
        else:
            enabled = [m.strip().upper() for m in enabled_text.split(",") if m.strip()]
        factories: dict[str, Callable[[], Any]] = {}
        for name in enabled:
            if name == PLAIN:
                if not users:
                    raise ListenerConfigError(
                        f"listener {spec.name}: PLAIN needs users: listener.name.{spec.name.lower()}"
                        '.plain.sasl.jaas.config with user_<name>="<password>" entries')
                factories[name] = functools.partial(PlainServer, users)
            elif name in scram.MECHANISMS:
                mechanism = scram.MECHANISMS[name]
                factories[name] = functools.partial(
                    ScramServer, mechanism, functools.partial(_scram_lookup, scram_credentials, mechanism),
                    random_bytes)
            else:
                raise ListenerConfigError(f"listener {spec.name}: SASL mechanism {name} is not one "
                                          "Ketch has (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
        if not factories:
            raise ListenerConfigError(f"listener {spec.name}: sasl.enabled.mechanisms is empty")
        try:
            lifetime = int(listener_value(props, spec.name, "connections.max.reauth.ms") or 0)
        except ValueError:
            raise ListenerConfigError(f"listener {spec.name}: connections.max.reauth.ms must be "
                                      "an integer") from None
        authenticator = functools.partial(SaslServerAuthenticator, factories, max(0, lifetime))
    try:
        delay_ms = int(listener_value(props, spec.name, "connection.failed.authentication.delay.ms") or 100)
    except ValueError:
        raise ListenerConfigError(f"listener {spec.name}: connection.failed.authentication.delay.ms "
                                  "must be an integer") from None
    return ListenerSecurity(spec.name, protocol, context, authenticator, max(0, delay_ms))


def _scram_lookup(credentials: ScramLookup, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
    return credentials(user, mechanism)


class ClientInfo:
    __slots__ = ("host", "port", "connection_id", "client_id", "client_software_name",
                 "client_software_version", "principal", "listener_name", "received_ns",
                 "after_write", "pipelined", "next_request_allowed", "allowed_waiter")

    def __init__(self, host: str, port: int, connection_id: int,
                 listener_name: str = "PLAINTEXT") -> None:
        self.host = host
        self.port = port
        self.connection_id = connection_id
        # The listener the connection came in on: Metadata answers with its endpoints.
        self.listener_name = listener_name
        self.client_id: str | None = None   # of the request being handled
        # What the client said in ApiVersions v3+ (KIP-511); None until then.
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        # Who the listener authenticated (issue 16); ANONYMOUS on a plaintext listener.
        self.principal: KafkaPrincipal = ANONYMOUS
        # time.monotonic_ns() of the socket read that completed the request being handled
        # (the connection is served one request at a time: the wait behind earlier ones
        # counts from here); and what to call once its response is written (issue 22's
        # latency trace), cleared after the call.
        self.received_ns = 0
        self.after_write: Callable[[], None] | None = None
        # Set by the server while a Produce is handled that may be pipelined: see
        # allow_next_request; ``allowed_waiter``: the server's wait for it, if it waits.
        self.pipelined = False
        self.next_request_allowed = False
        self.allowed_waiter: asyncio.Future | None = None

    def allow_next_request(self) -> None:
        """The request being handled has done what must happen in request order (a
        Produce: its appends) and now only waits: the server may start the connection's
        next Produce. Responses still leave in request order."""
        if self.pipelined and not self.next_request_allowed:
            self.next_request_allowed = True
            waiter = self.allowed_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


class FileRegion:
    """A byte range of a log file whose descriptor the log has pinned for this response;
    sent with os.sendfile, then ``release()``d. Pinning at read time means a later
    compaction swap or deletion cannot change what is sent (the pinned descriptor keeps
    reading the old file); a truncation in place that makes the send come up short closes
    the connection, and the client fetches again."""
    __slots__ = ("fd", "position", "length", "release")

    def __init__(self, fd: int, position: int, length: int, release: Any) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self.release = release

    def __len__(self) -> int:
        return self.length


async def send_file_region(writer: asyncio.StreamWriter, region: FileRegion) -> None:
    """Send ``region`` after everything already written to ``writer``, with os.sendfile
    on the connection's socket (zero copy), under any event loop whose transport exposes
    its socket: uvloop has no ``loop.sendfile``, and asyncio's pauses reading and makes
    futures around the same syscalls. The caller writes nothing else meanwhile (one
    response at a time per connection). A short file (truncated under a pinned
    descriptor) or a connection closed meanwhile raises ConnectionError."""
    transport = writer.transport
    if transport.get_write_buffer_size():
        # The region must follow the bytes still queued in the transport: with a high
        # water mark of 0 its flow control pauses the writer until the queue is empty.
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            await writer.drain()
        finally:
            transport.set_write_buffer_limits(high=high, low=low)
    if transport.is_closing():
        raise ConnectionError("connection closed under a response")
    # A descriptor of this send's own for the socket: the transport closes its one when
    # the client goes away, and while this waits that number could come to name another
    # file. Both loops also refuse a writer on a descriptor their transport owns.
    sock_fd = os.dup(transport.get_extra_info("socket").fileno())
    try:
        position, end = region.position, region.position + region.length
        while position < end:
            try:
                sent = os.sendfile(sock_fd, region.fd, position, end - position)
            except BlockingIOError:
                await _writable(sock_fd)
                if transport.is_closing():
                    raise ConnectionError("connection closed under a response") from None
                continue
            if sent == 0:
                raise ConnectionError("log file shrank under a response: closing")
            position += sent
    finally:
        os.close(sock_fd)


async def _writable(fd: int) -> None:
    """Until the socket can take more bytes (or has failed: the next send raises). The
    writer is removed before the caller closes ``fd``: epoll keeps watching a socket
    while any descriptor of it is open."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    loop.add_writer(fd, _resolve, waiter)
    try:
        await waiter
    finally:
        loop.remove_writer(fd)


class KafkaServer:
    def __init__(self, handler: ApiHandler, host: str, port: int,
                 frame_bytes_max: int = 100 * 1024 * 1024, use_sendfile: bool = True,
                 on_connection_closed: Callable[[ClientInfo], None] | None = None,
                 listener: ListenerSecurity = ListenerSecurity()) -> None:
        self.handler = handler
        self.listener = listener
        # Told when a client's connection ends, however it ended (the controller fences a
        # broker whose heartbeat connection closed: its process died).
        self.on_connection_closed = on_connection_closed
        self.host = host
        self.port = port
        self.frame_bytes_max = frame_bytes_max
        self.use_sendfile = use_sendfile
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._next_connection_id = 0
        self.connections_closed_for_protocol_errors = 0
        self.failed_authentications = 0

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> int:
        tls = self.listener.ssl_context
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, limit=READ_CHUNK_BYTES,
            ssl=tls, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        self._next_connection_id += 1
        client = ClientInfo(peer[0], peer[1], self._next_connection_id, self.listener.name)
        tls = writer.get_extra_info("ssl_object")
        if tls is not None and self.listener.authenticator is None:
            certificate = tls.getpeercert(binary_form=True)
            if certificate:
                client.principal = KafkaPrincipal("User", principal_name(certificate))
        auth = self.listener.authenticator() if self.listener.authenticator is not None else None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        conn = ServerConnection(frame_bytes_max=self.frame_bytes_max)
        loop = asyncio.get_running_loop()
        # Produce requests whose responses are not written yet, oldest first, and the task
        # that writes them in that order (see the module docstring).
        unwritten = _Unwritten(loop)
        pipeline_writer: asyncio.Task | None = None
        try:
            while True:
                data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    return
                client.received_ns = time.monotonic_ns()
                conn.receive_data(data)
                while True:
                    if auth is not None and auth.expects_legacy_token:
                        token = conn.next_token()
                        if token is NEED_DATA:
                            break
                        assert isinstance(token, bytes)
                        if not await self._sasl_answer(writer, client, auth,
                                                       auth.legacy_token(token, _now_ms()), None):
                            return
                        continue
                    event = conn.next_event()
                    if event is NEED_DATA:
                        break
                    key = event.api_key if isinstance(event, UnsupportedRequest) else event.header.api_key
                    pipelining = isinstance(event, RequestReceived) and key == ApiKey.PRODUCE
                    if unwritten.count and not pipelining:
                        await unwritten.join()      # every earlier response is written first
                    if auth is not None and key != ApiKey.SASL_HANDSHAKE and auth.expired(_now_ms()):
                        log.info("closing %s:%s on listener %s: its SASL session of %s ended without "
                                 "re-authentication (KIP-368)", client.host, client.port,
                                 self.listener.name, client.principal)
                        return
                    if isinstance(event, RequestReceived) and key in SASL_VERSIONS:
                        if not await self._sasl_request(writer, conn, client, auth, event):
                            return
                        continue
                    if auth is not None and not auth.complete and not auth.allows(key):
                        await self._sasl_answer(writer, client, auth, auth.refuse(key), None)
                        return
                    if isinstance(event, UnsupportedRequest):
                        answer = self.handler.handle_unsupported(event)
                        if answer is None:
                            log.info("closing %s:%s: unsupported API %s v%s", client.host,
                                     client.port, event.api_key, event.api_version)
                            return
                        api_key, correlation_id = event.api_key, event.correlation_id
                    else:
                        client.client_id = event.header.client_id
                        api_key, correlation_id = event.header.api_key, event.header.correlation_id
                        if pipelining:
                            handling, answer = await self._start_pipelined(event, client, loop)
                            if handling is not None or unwritten.count:
                                # Still running, or earlier responses go first.
                                if handling is None:
                                    handling = loop.create_future()
                                    handling.set_result(answer)
                                if pipeline_writer is None:
                                    pipeline_writer = loop.create_task(
                                        self._write_in_order(writer, conn, client, unwritten))
                                unwritten.put((handling, api_key, correlation_id))
                                if unwritten.count >= PIPELINED_PRODUCES_MAX:
                                    await unwritten.join()
                                continue
                            # Answered in its first step with nothing before it: written
                            # here, as any other request's answer.
                        else:
                            answer = await self.handler.handle(event, client)
                        if answer is None:
                            continue
                    version, body = answer
                    await self._write(writer, conn.send(api_key, version, correlation_id, body))
                    if client.after_write is not None:
                        written, client.after_write = client.after_write, None
                        written()
                    throttle_ms = getattr(body, "throttle_time_ms", 0)
                    if throttle_ms > 0:
                        # KIP-219: the response went out at once; the connection reads
                        # nothing more until the throttle time has passed.
                        await asyncio.sleep(throttle_ms / 1000)
        except CorruptFrameError as e:
            self.connections_closed_for_protocol_errors += 1
            log.warning("closing %s:%s: %s", client.host, client.port, e)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            # A bug in a handler: close this connection, keep the broker serving others.
            log.exception("internal error serving %s:%s; closing the connection", client.host, client.port)
        finally:
            if pipeline_writer is not None:
                pipeline_writer.cancel()
            unwritten.cancel_all()
            self._connections.discard(task)
            writer.close()
            if self.on_connection_closed is not None:
                self.on_connection_closed(client)

    async def _start_pipelined(self, event: RequestReceived, client: ClientInfo,
                               loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Future | None, Any]:
        """Start handling a Produce that may let the connection's next request start
        before it is answered; return once it has (``client.allow_next_request``) or is
        done: (None, its answer) when it was answered without suspending, else (the Task
        or failed Future it goes on in, None).

        Its first step runs here, in the connection's task, as an eager task's would:
        an acks=0/1 Produce is answered in it, with no Task, future or queue entry of its
        own. (A handler must then not rely on ``asyncio.current_task()`` or
        ``asyncio.timeout`` across its first suspension: the Produce handler does not.)"""
        client.pipelined, client.next_request_allowed = True, False
        coro = self.handler.handle(event, client)
        try:
            try:
                yielded = coro.send(None)
            except StopIteration as done:
                return None, done.value
            except Exception as e:      # written (and the connection closed) in its turn
                failed = loop.create_future()
                failed.set_exception(e)
                return failed, None
            handling = loop.create_task(_go_on(coro, yielded))
            if not client.next_request_allowed:
                # It waits before its appends are done (a transaction's verification, a
                # delayed delivery's parking): so does the next request.
                allowed = client.allowed_waiter = loop.create_future()
                handling.add_done_callback(functools.partial(_resolve, allowed))
                try:
                    await allowed
                except BaseException:
                    handling.cancel()       # the connection closes: nothing is written
                    raise
                finally:
                    client.allowed_waiter = None
            return handling, None
        finally:
            client.pipelined = False

    async def _write_in_order(self, writer: asyncio.StreamWriter, conn: ServerConnection,
                              client: ClientInfo, unwritten: _Unwritten) -> None:
        """Write the responses of pipelined Produce requests in request order; a failure
        closes the connection (the serving loop then ends)."""
        try:
            while True:
                handling, api_key, correlation_id = await unwritten.get()
                try:
                    answer = await handling
                    if answer is not None:
                        version, body = answer
                        await self._write(writer, conn.send(api_key, version, correlation_id, body))
                        throttle_ms = getattr(body, "throttle_time_ms", 0)
                        if throttle_ms > 0:
                            # KIP-219: muted for the throttle time (the reading loop waits
                            # for this task once PIPELINED_PRODUCES_MAX are pending).
                            await asyncio.sleep(throttle_ms / 1000)
                finally:
                    unwritten.written()
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError):
            pass
        except Exception:
            log.exception("internal error serving %s:%s; closing the connection", client.host, client.port)
        writer.close()
        unwritten.cancel_all()          # nothing more is written: release the reading loop

    async def _sasl_request(self, writer: asyncio.StreamWriter, conn: ServerConnection,
                            client: ClientInfo, auth: SaslServerAuthenticator | None,
                            event: RequestReceived) -> bool:
        """SaslHandshake / SaslAuthenticate; False: the connection is to close."""
        header = event.header
        if auth is None or (auth.complete and not auth.reauthenticates):
            # Not a SASL listener, or authenticated for good (no session lifetime: clients
            # never re-authenticate, KIP-368).
            if header.api_key == ApiKey.SASL_HANDSHAKE:
                body: Any = messages.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                           mechanisms=[])
            else:
                body = messages.SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                    error_message="SASL authentication is not expected on this connection")
            await self._write(writer, conn.send(header.api_key, header.api_version,
                                                header.correlation_id, body))
            return True
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            answer = auth.handshake(event.body, header.api_version)
        else:
            answer = auth.authenticate(event.body, header.api_version, _now_ms())
        return await self._sasl_answer(writer, client, auth, answer,
                                       (conn, header.api_key, header.api_version, header.correlation_id))

    async def _sasl_answer(self, writer: asyncio.StreamWriter, client: ClientInfo,
                           auth: SaslServerAuthenticator, answer: SaslAnswer,
                           framed: tuple[ServerConnection, int, int, int] | None) -> bool:
        """Send what the authenticator answered (a response, or a raw token when not
        ``framed``); log a failure; set the principal on success. False: close."""
        if answer.response is not None:
            if framed is None:
                assert isinstance(answer.response, bytes)
                await self._write(writer, [frame(answer.response)])
            else:
                conn, api_key, version, correlation_id = framed
                await self._write(writer, conn.send(api_key, version, correlation_id, answer.response))
        if answer.close:
            self.failed_authentications += 1
            log.warning("failed authentication on listener %s from %s:%s: %s", self.listener.name,
                        client.host, client.port, auth.failure)
            await asyncio.sleep(self.listener.failed_authentication_delay_ms / 1000)
            return False
        if auth.complete and client.principal is ANONYMOUS:
            client.principal = KafkaPrincipal("User", auth.authorization_id)
            log.debug("%s:%s authenticated as %s with %s", client.host, client.port,
                      client.principal, auth.mechanism_name)
        elif auth.complete:
            log.debug("%s:%s re-authenticated as %s", client.host, client.port, client.principal)
        return True

    async def _write(self, writer: asyncio.StreamWriter, parts: list[Any]) -> None:
        """One response: its bytes gathered into as few socket writes as possible (a
        write is a send() syscall), log regions below SENDFILE_MIN_BYTES read into the
        same buffer, larger ones sent with sendfile (zero copy)."""
        if len(parts) == 1 and not isinstance(parts[0], FileRegion):
            # The common response: one buffer, one send(). drain() only has work when the
            # socket did not take it all (it then waits for the buffer to empty).
            writer.write(parts[0])
            if writer.transport.get_write_buffer_size() or writer.transport.is_closing():
                await writer.drain()
            return
        pending: list[Any] = []
        try:
            for part in parts:
                if isinstance(part, (bytes, bytearray, memoryview)):
                    pending.append(part)
                    continue
                assert isinstance(part, FileRegion), type(part)
                if part.length == 0:
                    continue
                if not self.use_sendfile or part.length < SENDFILE_MIN_BYTES:
                    data = os.pread(part.fd, part.length, part.position)
                    if len(data) != part.length:
                        raise ConnectionError("log file shrank under a response: closing")
                    pending.append(data)
                    continue
                if pending:
                    writer.write(b"".join(pending))
                    pending = []
                await send_file_region(writer, part)
            if pending:
                writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
            await writer.drain()
        finally:
            for part in parts:
                if isinstance(part, FileRegion):
                    part.release()
