"""The HTTP admin API (aiohttp) that every broker and every controller serves.

A thin front end: each route checks its input against ``spec.ROUTES`` and then does what
Ketch's admin client does (``clients.aio.Admin``: the same calls ``ketch`` makes), so a
write travels the Kafka protocol to the active controller exactly as a Kafka tool's would.
What only the node itself knows (its identity, readiness, its metadata image's view of the
brokers and of partition health, the replicas it hosts) comes from a ``NodeView`` the
process passes in; the admin clients come from an ``AdminSource`` (a broker asks through
its own listener; a controller asks the quorum directly, and the brokers it knows for the
rest).

Every error is JSON ``{"error": <Kafka's error name>, "message": ..., "field"?: ...}``
with a fitting status: 400 bad input, 404 unknown topic / group / broker, 409 a state
conflict (exists already, group not empty), 503 a node or leader unavailable, 504 a
deadline. A handler never answers 500 for anything a client can send.

Security (``HttpSecurity``, clients/http_api/auth.py): HTTPS when configured; with
``ketch.http.authentication=basic`` a call without valid Basic credentials gets 401, and
one the ACLs do not allow 403 (Kafka's *_AUTHORIZATION_FAILED), checked before the call
is made with the node's own admin client (which logs in as the node does).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Collection, Iterable, Mapping, Protocol

import orjson
from aiohttp import web

from clients._core.admin import (
    AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType, NewPartitions,
    NewTopic, OffsetReset, OffsetResetKind, OffsetSpec,
)
from clients._core.reassignment import ElectionType, PlanError
from clients.aio.admin import Admin
from clients.errors import ErrorCode, KafkaApiError, KafkaTimeoutError
from clients.http_api import spec
from clients.http_api.auth import (
    Caller, HttpAuthConfig, HttpAuthError, PasswordCheck, parse_basic, required_checks,
)
from clients.http_api.auth import ScramLookup
from clients.protocol.acls import AclOperation, AclResourceType, KafkaPrincipal
from clients.security.jaas import JaasError, parse_jaas_config
from clients.security.listeners import listener_value
from clients.security.sasl import PLAIN
from clients.security.tls import TlsConfigError, server_ssl_context
from clients.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["AdminHttpServer", "AdminSource", "HttpSecurity", "NodeView", "http_security"]

CALL_TIMEOUT_MS = 15_000
STATUS_PAGE = os.path.join(os.path.dirname(__file__), "status.html")

# Kafka error -> HTTP status (anything else: 400 if the client can fix it, else 503).
_NOT_FOUND = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
              ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.BROKER_NOT_AVAILABLE,
              ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.RESOURCE_NOT_FOUND}
_CONFLICT = {ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NON_EMPTY_GROUP,
             ErrorCode.REASSIGNMENT_IN_PROGRESS, ErrorCode.ELECTION_NOT_NEEDED}
_AUTH = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
         ErrorCode.CLUSTER_AUTHORIZATION_FAILED}


class NodeView(Protocol):
    """What this node knows itself (a broker's or a controller's own state)."""
    node_id: int
    role: str                                   # "broker" or "controller"

    def identity(self) -> dict[str, Any]: ...
    def not_ready(self) -> str | None: ...      # None when ready, else why not
    def brokers(self) -> list[dict[str, Any]]: ...
    def health(self, problems_max: int) -> dict[str, Any]: ...
    def local_replicas(self) -> Mapping[TopicPartition, Mapping[str, Any]]: ...
    def has_topic(self, name: str) -> bool: ...
    def snapshot(self) -> dict[str, Any] | None: ...
    def mirrors(self) -> list[Mapping[str, Any]]: ...   # the mirror partitions led here


class AdminSource(Protocol):
    async def cluster_admin(self) -> Admin: ...     # topics, groups, actions (via brokers)
    async def quorum_admin(self) -> Admin: ...      # DescribeQuorum
    async def close(self) -> None: ...


Authorize = Callable[[Caller, AclOperation, AclResourceType, str], bool]
# In a list route's query: may the caller DESCRIBE (resource type, name)? Lists hide what
# it may not, as Metadata and ListGroups do.
MAY_DESCRIBE = "may_describe"
FAILED_LOGIN_DELAY_S = 0.1      # Kafka's connection.failed.authentication.delay.ms default


@dataclass(frozen=True)
class HttpSecurity:
    config: HttpAuthConfig
    passwords: PasswordCheck
    authorize: Authorize        # the node's authorizer over its image's ACLs
    ssl_context: ssl.SSLContext | None = None


def http_security(props: Mapping[str, str], listener: str, scram_credentials: ScramLookup,
                  authorize: Authorize) -> HttpSecurity | None:
    """A node's HTTP security from its properties (auth.py's keys); None when it has none.
    PLAIN users are those of ``listener``'s JAAS table (the node's inter-broker or
    controller listener). Raises HttpAuthError for a bad configuration."""
    config = HttpAuthConfig.from_properties(props)
    if not (config.authentication or config.tls):
        return None
    context = None
    if config.tls:
        def get(key: str) -> str | None:
            value = props.get("ketch.http." + key)
            return value if value is not None or key == "ssl.client.auth" else props.get(key)
        try:
            context = server_ssl_context(get)
        except TlsConfigError as e:
            raise HttpAuthError(f"ketch.http.ssl: {e}") from None
    jaas_text = listener_value(props, listener, "sasl.jaas.config", mechanism=PLAIN)
    try:
        users = parse_jaas_config(jaas_text).users if jaas_text else {}
    except JaasError as e:
        raise HttpAuthError(str(e)) from None
    return HttpSecurity(config, PasswordCheck(users, scram_credentials, os.urandom(32)),
                        authorize, context)


class HttpError(Exception):
    def __init__(self, status: int, error: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.field = status, error, message, field


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error_body(error: str, message: str, field: str | None = None) -> dict[str, Any]:
    out = {"error": error, "message": message}
    if field is not None:
        out["field"] = field
    return out


def error_response(e: BaseException) -> web.Response:
    """The JSON error for an exception a handler let through."""
    if isinstance(e, HttpError):
        return _json(_error_body(e.error, e.message, e.field), e.status)
    if isinstance(e, spec.InvalidInput):
        return _json(_error_body("INVALID_REQUEST", str(e), e.field), 400)
    if isinstance(e, PlanError):
        return _json(_error_body("INVALID_REPLICA_ASSIGNMENT", str(e)), 400)
    if isinstance(e, KafkaApiError):
        code = e.error_code
        name = _error_name(code)
        if code in _NOT_FOUND:
            status = 404
        elif code in _CONFLICT:
            status = 409
        elif code in _AUTH:
            status = 403
        elif code == ErrorCode.REQUEST_TIMED_OUT:
            status = 504
        elif e.retriable or code in (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.NOT_CONTROLLER):
            status = 503
        else:
            status = 400
        return _json(_error_body(name, str(e)), status)
    if isinstance(e, ValueError):
        # The admin client's refusal of a request it cannot carry out as asked (a shift of
        # a partition the group never committed): the caller's to fix.
        return _json(_error_body("INVALID_REQUEST", str(e)), 400)
    if isinstance(e, (KafkaTimeoutError, asyncio.TimeoutError)):
        return _json(_error_body("REQUEST_TIMED_OUT", str(e) or "no answer in time"), 504)
    if isinstance(e, (ConnectionError, OSError)):
        return _json(_error_body("BROKER_NOT_AVAILABLE", str(e) or type(e).__name__), 503)
    raise e


@web.middleware
async def _json_http_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """aiohttp's own refusals (no such route, a method the route lacks, a body too large)
    as JSON errors like every other."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        error = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "REQUEST_TOO_LARGE"}.get(
            e.status, "INVALID_REQUEST")
        resp = _json(_error_body(error, f"{request.method} {request.path}: {e.reason}"), e.status)
        if "Allow" in e.headers:
            resp.headers["Allow"] = e.headers["Allow"]
        return resp


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"


def _tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


class AdminHttpServer:
    """Serves ``spec.ROUTES`` for one node on ``host:port`` (0: any free port)."""

    def __init__(self, node: NodeView, admins: AdminSource,
                 metrics: Callable[[Collection[str] | None], tuple[Iterable[str], str]],
                 host: str, port: int, *, call_timeout_ms: int = CALL_TIMEOUT_MS,
                 link_status: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None,
                 security: HttpSecurity | None = None) -> None:
        """``metrics(names)``: the Prometheus exposition of this node (its text in pieces,
        the content type), of the series ``names`` only unless None;
        ``link_status()``: each cluster link's state as this node's link manager sees it
        (a broker's; only the broker that runs the manager has any); ``security``: TLS,
        logins and ACLs (None: open, plain HTTP)."""
        self.node = node
        self.link_status = link_status
        self.admins = admins
        self.metrics_text = metrics
        self.host = host
        self.port = port
        self.call_timeout_ms = call_timeout_ms
        self.security = security
        # PBKDF2 for a SCRAM login runs in a thread, one at a time: guessing passwords
        # costs the node one core at most, and never the event loop.
        self._slow_logins = asyncio.Semaphore(1)
        self._runner: web.AppRunner | None = None
        self._openapi = orjson.dumps(spec.openapi_document())
        with open(STATUS_PAGE, "rb") as f:       # read once: no file I/O on the event loop
            self._status_page = f.read()
        app = web.Application(client_max_size=1024 * 1024, middlewares=[_json_http_errors])
        for route in spec.ROUTES:
            app.router.add_route(route.method, route.path, self._wrap(route))
        self.app = app

    def _wrap(self, route: spec.Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        handler = getattr(self, route.handler)

        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                caller = await self._login(request, route)
                query = spec.check_query(route, request.query)
                for p in route.params:
                    if p.where == "path":
                        raw = request.match_info[p.name]
                        value: Any = raw
                        if p.schema.get("type") == "integer":
                            if not raw.isdigit():
                                raise spec.InvalidInput(p.name, "must be an integer")
                            value = int(raw)
                        spec.check(p.schema, value, p.name)
                        query[p.name] = value
                body = None
                if route.body is not None:
                    body = await self._read_body(request, route.body)
                elif request.can_read_body and request.method != "GET":
                    raw_body = await request.read()
                    if raw_body.strip() not in (b"", b"{}"):
                        raise spec.InvalidInput("", "this route takes no request body")
                # Before "no such topic": a caller may not learn what it may not describe.
                query[MAY_DESCRIBE] = self._check_access(caller, route, query, body)
                # This node's metadata image answers "no such topic" at once (the admin
                # client would wait a few seconds for a topic that may be just created).
                if "topic" in query and not self.node.has_topic(query["topic"]):
                    raise HttpError(404, "UNKNOWN_TOPIC_OR_PARTITION",
                                    f"topic {query['topic']!r} does not exist")
                return await handler(query, body)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                try:
                    response = error_response(e)
                    if response.status == 401:
                        response.headers["WWW-Authenticate"] = 'Basic realm="ketch", charset="UTF-8"'
                    return response
                except Exception:
                    log.exception("HTTP %s %s failed", request.method, request.path)
                    return _json(_error_body("UNKNOWN_SERVER_ERROR", f"{type(e).__name__}: {e}"), 500)
        return serve

    async def _login(self, request: web.Request, route: spec.Route) -> Caller | None:
        """The caller, from its Basic credentials; None when the route is open to all."""
        security = self.security
        if security is None or not security.config.needs_login(route.handler, route.method):
            return None
        try:
            credentials = parse_basic(request.headers.get("Authorization"))
        except HttpAuthError as e:
            raise HttpError(401, "SASL_AUTHENTICATION_FAILED", str(e)) from None
        if credentials is None:
            raise HttpError(401, "SASL_AUTHENTICATION_FAILED",
                            "this call needs HTTP Basic credentials (a SCRAM or PLAIN user)")
        user, password = credentials
        ok = security.passwords.quick(user, password)
        if ok is None:
            async with self._slow_logins:
                ok = await asyncio.to_thread(security.passwords.slow, user, password)
        if not ok:
            # Logged without the password; the delay is this request's alone.
            log.info("HTTP %s %s from %s: failed login as %r", request.method, request.path,
                     request.remote, user)
            await asyncio.sleep(FAILED_LOGIN_DELAY_S)
            raise HttpError(401, "SASL_AUTHENTICATION_FAILED",
                            f"authentication failed for user {user!r}")
        return Caller(KafkaPrincipal("User", user), request.remote or "")

    def _check_access(self, caller: Caller | None, route: spec.Route, query: Mapping[str, Any],
                      body: Any) -> Callable[[AclResourceType, str], bool]:
        """Refuse (403) what the ACLs do not allow; the DESCRIBE test list routes filter by."""
        if caller is None or self.security is None:
            return lambda kind, name: True
        authorize = self.security.authorize
        for check in required_checks(route.handler, route.method, query, body):
            if not any(authorize(caller, a.operation, a.resource_type, a.name)
                       for a in check.alternatives):
                raise HttpError(403, check.error, f"{caller.principal} may not: {check.describe()}")
        return lambda kind, name: authorize(caller, AclOperation.DESCRIBE, kind, name)

    @staticmethod
    async def _read_body(request: web.Request, schema_name: str) -> Any:
        raw = await request.read()
        if not raw.strip():
            body: Any = {}
        else:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise spec.InvalidInput("", f"the body is not JSON: {e}") from None
        spec.check({"$ref": f"#/components/schemas/{schema_name}"}, body)
        return body

    async def start(self) -> int:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port,
                           ssl_context=None if self.security is None else self.security.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]   # the bound port (0 asks for any free one)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------ status

    async def status_page(self, q: dict, body: Any) -> web.Response:
        return web.Response(body=self._status_page, content_type="text/html", charset="utf-8")

    async def metrics(self, q: dict, body: Any) -> web.Response:
        pieces, content_type = self.metrics_text(q.get("name[]"))
        text = []
        for piece in pieces:
            text.append(piece)
            await asyncio.sleep(0)      # requests and replication go on between the pieces
        return web.Response(body="".join(text).encode(), headers={"Content-Type": content_type})

    async def openapi(self, q: dict, body: Any) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    async def live(self, q: dict, body: Any) -> web.Response:
        return _json({"status": "live", "node_id": self.node.node_id, "role": self.node.role})

    async def ready(self, q: dict, body: Any) -> web.Response:
        reason = self.node.not_ready()
        if reason is None:
            return _json({"status": "ready", "node_id": self.node.node_id, "role": self.node.role})
        return _json({"status": "not ready", "reason": reason, "node_id": self.node.node_id,
                      "role": self.node.role}, 503)

    async def node_info(self, q: dict, body: Any) -> web.Response:
        return _json({"id": self.node.node_id, "role": self.node.role, **self.node.identity(),
                      "replicas": [{**_tp_json(tp), **r} for tp, r in
                                   sorted(self.node.local_replicas().items())]})

    async def local_mirrors(self, q: dict, body: Any) -> web.Response:
        return _json({"node": self.node.node_id, "mirrors": list(self.node.mirrors())})

    # ------------------------------------------------------------ cluster and quorum

    async def _active_controller(self) -> dict[str, Any]:
        admin = await self.admins.quorum_admin()
        info = await admin.describe_quorum(timeout_ms=self.call_timeout_ms)
        host, port = info.nodes.get(info.leader_id, (None, None))
        if info.leader_id < 0:
            raise HttpError(503, "NOT_CONTROLLER", "the quorum has no leader now (an election is on)")
        return {"id": info.leader_id, "epoch": info.leader_epoch, "host": host, "port": port}

    async def cluster(self, q: dict, body: Any) -> web.Response:
        identity = self.node.identity()
        return _json({"cluster_id": identity.get("cluster_id"),
                      "active_controller": await self._active_controller(),
                      "brokers": self.node.brokers(), "health": self.node.health(0),
                      "answered_by": {"id": self.node.node_id, "role": self.node.role}})

    async def brokers(self, q: dict, body: Any) -> web.Response:
        return _json(self.node.brokers())

    async def active_controller(self, q: dict, body: Any) -> web.Response:
        return _json(await self._active_controller())

    async def health(self, q: dict, body: Any) -> web.Response:
        health = self.node.health(100)
        return _json(health, 200 if health["healthy"] else 503)

    async def quorum(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.quorum_admin()
        info = await admin.describe_quorum(timeout_ms=self.call_timeout_ms)

        def replica(r: Any) -> dict[str, Any]:
            return {"id": r.replica_id, "log_end_offset": r.log_end_offset, "lag": r.lag,
                    "last_fetch_timestamp": r.last_fetch_timestamp,
                    "last_caught_up_timestamp": r.last_caught_up_timestamp}
        return _json({"leader_id": info.leader_id, "leader_epoch": info.leader_epoch,
                      "high_watermark": info.high_watermark,
                      "voters": [replica(r) for r in info.voters],
                      "observers": [replica(r) for r in info.observers],
                      "snapshot": self.node.snapshot()})

    # ------------------------------------------------------------ topics

    async def list_topics(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        listed = await admin.list_topics(include_internal=q.get("internal", False),
                                         timeout_ms=self.call_timeout_ms)
        listed = {n: t for n, t in listed.items() if q[MAY_DESCRIBE](AclResourceType.TOPIC, n)}
        described = await admin.describe_topics(list(listed), timeout_ms=self.call_timeout_ms) \
            if listed else {}
        items = [{"name": name, "topic_id": str(t.topic_id), "internal": t.is_internal,
                  "partitions": len(described[name].partitions),
                  "replication_factor": max((len(p.replicas) for p in described[name].partitions),
                                            default=0)}
                 for name, t in sorted(listed.items()) if name in described]
        return _json(spec.page(items, lambda i: i["name"], q))

    async def _describe_topic(self, admin: Admin, name: str) -> dict[str, Any]:
        (d,) = (await admin.describe_topics([name], timeout_ms=self.call_timeout_ms)).values()
        tps = [TopicPartition(name, p.partition) for p in d.partitions]
        led = [tp for tp, p in zip(tps, d.partitions) if p.leader >= 0]
        start: dict[TopicPartition, int] = {}
        end: dict[TopicPartition, int] = {}
        sizes: dict[TopicPartition, int] = {}
        if led:
            # Offsets and sizes come from each partition's leader; a leader that fails to
            # answer leaves its partition's numbers null rather than failing the describe.
            results = await asyncio.gather(
                admin.list_offsets({tp: OffsetSpec.earliest() for tp in led},
                                   timeout_ms=self.call_timeout_ms),
                admin.list_offsets({tp: OffsetSpec.latest() for tp in led},
                                   timeout_ms=self.call_timeout_ms),
                admin.describe_log_dirs(led, timeout_ms=self.call_timeout_ms),
                return_exceptions=True)
            for target, result, attr in ((start, results[0], "offset"), (end, results[1], "offset"),
                                         (sizes, results[2], "size_bytes")):
                # A failed call still carries every partition's outcome (Admin's `results`).
                values = getattr(result, "results", None) if isinstance(result, BaseException) \
                    else result
                if isinstance(values, dict):
                    for tp, v in values.items():
                        if not isinstance(v, BaseException):
                            target[tp] = getattr(v, attr)
        local = self.node.local_replicas()
        partitions = []
        for tp, p in zip(tps, d.partitions):
            mine = local.get(tp)
            partitions.append({
                "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas), "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
                "high_watermark": end.get(tp), "log_start_offset": start.get(tp),
                # Kafka's protocol has no request for another broker's log end offset:
                # it is known where this node hosts a replica of the partition.
                "log_end_offset": None if mine is None else mine["log_end_offset"],
                "size_bytes": sizes.get(tp)})
        return {"name": d.name, "topic_id": str(d.topic_id), "internal": d.is_internal,
                "partitions": partitions}

    async def describe_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        return _json(await self._describe_topic(admin, q["topic"]))

    async def create_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.create_topics([NewTopic(body["name"], body.get("partitions", -1),
                                            body.get("replication_factor", -1),
                                            configs=body.get("configs", {}))],
                                  timeout_ms=self.call_timeout_ms)
        # The new topic reaches the brokers' metadata a moment after the controller commits it.
        for _ in range(50):
            try:
                return _json(await self._describe_topic(admin, body["name"]), 201)
            except KafkaApiError as e:
                if e.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
                await asyncio.sleep(0.1)
        return _json({"name": body["name"], "partitions": []}, 201)

    async def delete_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.delete_topics([q["topic"]], timeout_ms=self.call_timeout_ms)
        return _json({"deleted": q["topic"]})

    async def add_partitions(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.create_partitions({q["topic"]: NewPartitions(body["count"])},
                                      timeout_ms=self.call_timeout_ms)
        return _json({"topic": q["topic"], "partitions": body["count"]})

    async def _topic_exists(self, admin: Admin, topic: str) -> None:
        await admin.describe_topics([topic], timeout_ms=self.call_timeout_ms)

    async def topic_configs(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await self._topic_exists(admin, q["topic"])
        resource = ConfigResource(ConfigResourceType.TOPIC, q["topic"])
        (entries,) = (await admin.describe_configs([resource], timeout_ms=self.call_timeout_ms)).values()
        return _json({name: {"value": e.value, "source": e.source.name, "default": e.is_default,
                             "read_only": e.read_only, "sensitive": e.sensitive}
                      for name, e in sorted(entries.items())})

    async def alter_topic_configs(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await self._topic_exists(admin, q["topic"])
        ops = [AlterConfigOp(k, v) for k, v in body.get("set", {}).items()]
        ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in body.get("delete", [])]
        if not ops:
            raise spec.InvalidInput("set", "name at least one key to set or delete")
        resource = ConfigResource(ConfigResourceType.TOPIC, q["topic"])
        await admin.incremental_alter_configs({resource: ops},
                                              validate_only=body.get("validate_only", False),
                                              timeout_ms=self.call_timeout_ms)
        return _json({"topic": q["topic"], "set": body.get("set", {}),
                      "deleted": body.get("delete", []),
                      "validate_only": body.get("validate_only", False)})

    # ------------------------------------------------------------ cluster links (issue 21)

    async def list_links(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        links = await admin.list_cluster_links(timeout_ms=self.call_timeout_ms)
        # The link manager's view (state, last error), from the broker that runs it; null
        # on the others.
        status = self.link_status() if self.link_status is not None else {}
        return _json([{"name": n, "bootstrap_servers": s, "status": status.get(n)}
                      for n, s in links.items()])

    async def create_link(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        if body["name"] in await admin.list_cluster_links(timeout_ms=self.call_timeout_ms):
            raise HttpError(409, "INVALID_REQUEST", f"cluster link {body['name']!r} exists already")
        await admin.create_cluster_link(body["name"], body["configs"], timeout_ms=self.call_timeout_ms)
        return _json({"name": body["name"], "created": True}, 201)

    async def describe_link(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        entries = await admin.describe_cluster_link(q["link"], timeout_ms=self.call_timeout_ms)
        mirrors = await admin.list_mirror_topics(timeout_ms=self.call_timeout_ms)
        return _json({"name": q["link"],
                      "configs": {name: {"value": e.value, "default": e.is_default,
                                         "sensitive": e.sensitive}
                                  for name, e in sorted(entries.items())},
                      "mirror_topics": [{"topic": t, **m} for t, m in mirrors.items()
                                        if m["link"] == q["link"]]})

    async def alter_link(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        ops = [AlterConfigOp(k, v) for k, v in body.get("set", {}).items()]
        ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in body.get("delete", [])]
        if not ops:
            raise spec.InvalidInput("set", "name at least one key to set or delete")
        if body.get("validate_only", False):
            raise spec.InvalidInput("validate_only", "not supported for links")
        await admin.alter_cluster_link(q["link"], ops, timeout_ms=self.call_timeout_ms)
        return _json({"name": q["link"], "set": body.get("set", {}), "deleted": body.get("delete", [])})

    async def delete_link(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.delete_cluster_link(q["link"], timeout_ms=self.call_timeout_ms)
        return _json({"deleted": q["link"]})

    async def list_mirror_topics(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        mirrors = await admin.list_mirror_topics(timeout_ms=self.call_timeout_ms)
        return _json([{"topic": t, **m} for t, m in mirrors.items()])

    async def create_mirror_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.create_mirror_topic(body["topic"], body["link"], timeout_ms=self.call_timeout_ms)
        return _json({"topic": body["topic"], "link": body["link"], "requested": True})

    async def _mirror_topic(self, admin: Admin, topic: str) -> dict[str, str]:
        mirrors = await admin.list_mirror_topics(timeout_ms=self.call_timeout_ms)
        if topic not in mirrors:
            await self._topic_exists(admin, topic)          # 404 for no such topic
            raise HttpError(400, "INVALID_REQUEST", f"topic {topic!r} is not a mirror topic")
        return mirrors[topic]

    async def promote_mirror_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await self._mirror_topic(admin, q["topic"])
        await admin.promote_mirror_topics([q["topic"]], timeout_ms=self.call_timeout_ms)
        return _json({"topic": q["topic"], "state": "promoted"})

    async def restore_mirror_topic(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await self._topic_exists(admin, q["topic"])
        await admin.restore_mirror_topic(q["topic"], body["link"], body.get("source_topic"),
                                         timeout_ms=self.call_timeout_ms)
        return _json({"topic": q["topic"], "link": body["link"], "state": "active"})

    # ------------------------------------------------------------ groups

    async def list_groups(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        groups = await admin.list_consumer_groups(timeout_ms=self.call_timeout_ms)
        items = [{"group_id": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
                  "type": g.type} for g in groups
                 if q[MAY_DESCRIBE](AclResourceType.GROUP, g.group_id)]
        return _json(spec.page(items, lambda i: i["group_id"], q))

    async def describe_group(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        group = q["group"]
        (d,) = (await admin.describe_consumer_groups([group], timeout_ms=self.call_timeout_ms)).values()
        if d.state == "Dead":
            raise HttpError(404, "GROUP_ID_NOT_FOUND", f"group {group!r} does not exist")
        lag = await admin.consumer_group_lag(group, timeout_ms=self.call_timeout_ms)
        return _json({
            "group_id": d.group_id, "state": d.state, "protocol_type": d.protocol_type,
            "protocol": d.protocol, "coordinator": d.coordinator,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "host": m.host,
                         "assignment": [_tp_json(tp) for tp in m.assignment]} for m in d.members],
            "lag": [{**_tp_json(tp), "committed": v.committed, "log_start_offset": v.log_start_offset,
                     "log_end_offset": v.log_end_offset, "lag": v.lag}
                    for tp, v in sorted(lag.items())],
            "total_lag": sum(v.lag for v in lag.values())})

    async def delete_group(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        await admin.delete_consumer_groups([q["group"]], timeout_ms=self.call_timeout_ms)
        return _json({"deleted": q["group"]})

    async def reset_group_offsets(self, q: dict, body: Any) -> web.Response:
        kind = OffsetResetKind(body["to"])
        value = body.get("value")
        if kind in (OffsetResetKind.TIMESTAMP, OffsetResetKind.OFFSET, OffsetResetKind.SHIFT):
            if value is None:
                raise spec.InvalidInput("value", f"is required when resetting to {kind.value}")
            if kind is not OffsetResetKind.SHIFT and value < 0:
                raise spec.InvalidInput("value", "must be at least 0")
        admin = await self.admins.cluster_admin()
        dry_run = body.get("dry_run", False)
        plan = await admin.reset_consumer_group_offsets(
            q["group"], OffsetReset(kind, value or 0), topics=body.get("topics"),
            dry_run=dry_run, timeout_ms=self.call_timeout_ms)
        return _json({"group_id": q["group"], "dry_run": dry_run,
                      "offsets": [{**_tp_json(tp), "offset": o} for tp, o in sorted(plan.items())]})

    # ------------------------------------------------------------ actions

    async def elect_leaders(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        kind = ElectionType.UNCLEAN if body.get("type") == "unclean" else ElectionType.PREFERRED
        tps = None if body.get("partitions") is None else [
            TopicPartition(p["topic"], p["partition"]) for p in body["partitions"]]
        outcomes = await admin.elect_leaders(kind, tps, timeout_ms=self.call_timeout_ms)
        return _json({"type": kind.name.lower(), "partitions": [
            {**_tp_json(tp), "error": None if e is None else _error_name(e.error_code),
             "message": None if e is None else str(e)} for tp, e in sorted(outcomes.items())]})

    async def list_reassignments(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        ongoing = await admin.list_partition_reassignments(timeout_ms=self.call_timeout_ms)
        return _json([{**_tp_json(tp), "replicas": list(r.replicas),
                       "adding_replicas": list(r.adding_replicas),
                       "removing_replicas": list(r.removing_replicas)}
                      for tp, r in sorted(ongoing.items())])

    async def reassign(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        wanted: dict[TopicPartition, Any] = {}
        for i, p in enumerate(body["partitions"]):
            tp = TopicPartition(p["topic"], p["partition"])
            if tp in wanted:
                raise spec.InvalidInput(f"partitions[{i}]", f"{tp} is listed twice")
            replicas = p["replicas"]
            if replicas is not None and (not replicas or len(set(replicas)) != len(replicas)):
                raise spec.InvalidInput(f"partitions[{i}].replicas",
                                        "must be non-empty, without duplicates (or null to cancel)")
            wanted[tp] = replicas
        await admin.alter_partition_reassignments(wanted, timeout_ms=self.call_timeout_ms)
        return _json({"partitions": [{**_tp_json(tp), "replicas": r}
                                     for tp, r in sorted(wanted.items())]})

    async def decommission(self, q: dict, body: Any) -> web.Response:
        admin = await self.admins.cluster_admin()
        dry_run = (body or {}).get("dry_run", False)
        plan = await admin.decommission_broker(q["broker_id"], dry_run=dry_run,
                                               timeout_ms=self.call_timeout_ms)
        return _json({"broker_id": q["broker_id"], "dry_run": dry_run,
                      "partitions": [{**_tp_json(tp), "replicas": list(r)}
                                     for tp, r in sorted(plan.items())]})
