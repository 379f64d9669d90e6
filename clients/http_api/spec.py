"""The HTTP admin API's contract: every route, its parameters, bodies and answers (pure).

One table (``ROUTES``) is the home of what the API serves: the server registers its
handlers from it and ``openapi_document()`` describes it as OpenAPI 3.0, served at
``/v1/openapi.json``. Request bodies and query parameters are checked against the same
schemas (``check``) before a handler runs, so a wrong type or an unknown field is a 400
naming the field, never an exception deeper down.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["ROUTES", "Route", "InvalidInput", "check", "check_query", "openapi_document",
           "page", "TOPIC_NAME_PATTERN", "PAGE_LIMIT_MAX"]

API_VERSION = "1"
PAGE_LIMIT_DEFAULT = 100
PAGE_LIMIT_MAX = 1000
# A topic's partition count through this API (Kafka's protocol has no limit; one click or
# a typo should not ask a cluster for a million partitions). The admin client and the
# Kafka API take more.
PARTITIONS_PER_CALL_MAX = 10_000
# Kafka's legal topic names (Topic.validate): 1-249 of these characters, not "." or "..".
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"


class InvalidInput(ValueError):
    """A request that does not match the contract; ``field`` names where (JSON path)."""

    def __init__(self, field_: str, message: str) -> None:
        self.field = field_
        super().__init__(f"{field_}: {message}" if field_ else message)


# ------------------------------------------------------------------ schemas

def _obj(properties: Mapping[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict:
    out: dict[str, Any] = {"type": "object", "properties": dict(properties),
                           "additionalProperties": False}
    if required:
        out["required"] = list(required)
    out.update(extra)
    return out


_INT = {"type": "integer"}
_NULLABLE_INT = {"type": "integer", "nullable": True}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_INTS = {"type": "array", "items": _INT}
_TOPIC = {"type": "string", "pattern": TOPIC_NAME_PATTERN}
_PARTITION = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_BROKER_ID = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_CONFIG_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_TP = _obj({"topic": _TOPIC, "partition": _PARTITION}, ("topic", "partition"))
# A cluster link's name through this API: a path segment, so the topic-name characters.
_LINK = {"type": "string", "pattern": TOPIC_NAME_PATTERN}

SCHEMAS: dict[str, dict] = {
    "Error": {"type": "object", "required": ["error", "message"], "properties": {
        "error": {"type": "string", "description": "Kafka's error name, e.g. UNKNOWN_TOPIC_OR_PARTITION"},
        "message": _STR, "field": {"type": "string", "description": "the offending input"}}},
    "Listener": {"type": "object", "properties": {"name": _STR, "host": _STR, "port": _INT}},
    "Broker": {"type": "object", "properties": {
        "id": _INT, "rack": {"type": "string", "nullable": True}, "epoch": _INT,
        "fenced": _BOOL, "in_controlled_shutdown": _BOOL,
        "listeners": {"type": "array", "items": {"$ref": "#/components/schemas/Listener"}}}},
    "Health": {"type": "object", "properties": {
        "healthy": _BOOL, "partitions": _INT, "under_replicated": _INT, "under_min_isr": _INT,
        "offline": _INT, "metadata_offset": _INT,
        "problems": {"type": "array", "items": {"type": "object"}}}},
    "ActiveController": {"type": "object", "properties": {
        "id": _INT, "epoch": _INT, "host": {"type": "string", "nullable": True},
        "port": _NULLABLE_INT}},
    "QuorumReplica": {"type": "object", "properties": {
        "id": _INT, "log_end_offset": _INT, "lag": _NULLABLE_INT,
        "last_fetch_timestamp": _INT, "last_caught_up_timestamp": _INT}},
    "Quorum": {"type": "object", "properties": {
        "leader_id": _INT, "leader_epoch": _INT, "high_watermark": _INT,
        "voters": {"type": "array", "items": {"$ref": "#/components/schemas/QuorumReplica"}},
        "observers": {"type": "array", "items": {"$ref": "#/components/schemas/QuorumReplica"}},
        "snapshot": {"type": "object", "nullable": True}}},
    "Page": {"type": "object", "properties": {
        "items": {"type": "array", "items": {}}, "next": {"type": "string", "nullable": True}}},
    "Partition": {"type": "object", "properties": {
        "partition": _INT, "leader": _INT, "leader_epoch": _INT, "replicas": _INTS, "isr": _INTS,
        "offline_replicas": _INTS, "high_watermark": _NULLABLE_INT,
        "log_start_offset": _NULLABLE_INT, "log_end_offset": _NULLABLE_INT,
        "size_bytes": _NULLABLE_INT}},
    "Topic": {"type": "object", "properties": {
        "name": _STR, "topic_id": _STR, "internal": _BOOL,
        "partitions": {"type": "array", "items": {"$ref": "#/components/schemas/Partition"}}}},
    "Group": {"type": "object", "properties": {
        "group_id": _STR, "state": _STR, "protocol_type": _STR, "protocol": _STR,
        "coordinator": _INT, "members": {"type": "array", "items": {"type": "object"}},
        "lag": {"type": "array", "items": {"type": "object"}}, "total_lag": _INT}},
    "NewTopic": _obj({
        "name": _TOPIC,
        "partitions": {"type": "integer", "minimum": 1, "maximum": PARTITIONS_PER_CALL_MAX},
        "replication_factor": {"type": "integer", "minimum": 1, "maximum": 32767},
        "configs": _CONFIG_MAP}, ("name",)),
    "NewPartitions": _obj({"count": {"type": "integer", "minimum": 1, "maximum": PARTITIONS_PER_CALL_MAX}},
                          ("count",)),
    "ConfigChanges": _obj({
        "set": _CONFIG_MAP, "delete": {"type": "array", "items": _STR},
        "validate_only": _BOOL}),
    "OffsetReset": _obj({
        "to": {"type": "string", "enum": ["earliest", "latest", "timestamp", "offset", "shift"]},
        "value": {"type": "integer", "minimum": -2**62, "maximum": 2**62},
        "topics": {"type": "array", "items": _TOPIC},
        "dry_run": _BOOL}, ("to",)),
    "ElectLeaders": _obj({
        "type": {"type": "string", "enum": ["preferred", "unclean"]},
        "partitions": {"type": "array", "items": _TP, "nullable": True}}),
    "Reassignment": _obj({"partitions": {"type": "array", "minItems": 1, "items": _obj({
        "topic": _TOPIC, "partition": _PARTITION,
        "replicas": {"type": "array", "items": _BROKER_ID, "nullable": True}},
        ("topic", "partition", "replicas"))}}, ("partitions",)),
    "Decommission": _obj({"dry_run": _BOOL}),
    # Cluster links and mirror topics (issue 21).
    "NewLink": _obj({"name": _LINK, "configs": _CONFIG_MAP}, ("name", "configs")),
    "NewMirrorTopic": _obj({"topic": _TOPIC, "link": _LINK}, ("topic", "link")),
    "MirrorRestore": _obj({"link": _LINK, "source_topic": _TOPIC}, ("link",)),
}

_ANY_OBJECT = {"type": "object"}


# ------------------------------------------------------------------ routes

@dataclass(frozen=True)
class Param:
    name: str
    where: str                  # "path" or "query"
    schema: dict
    description: str = ""


@dataclass(frozen=True)
class Route:
    method: str
    path: str                   # aiohttp's form: /v1/topics/{topic}
    handler: str                # the server's method name
    summary: str
    params: tuple[Param, ...] = ()
    body: str | None = None     # a SCHEMAS name
    ok: tuple[int, str | None] = (200, None)     # status, SCHEMAS name (None: any object)
    errors: tuple[int, ...] = (400, 503)
    content_type: str = "application/json"
    tags: tuple[str, ...] = field(default=())


_TOPIC_PARAM = Param("topic", "path", _TOPIC, "a topic name")
_GROUP_PARAM = Param("group", "path", {"type": "string", "minLength": 1, "maxLength": 4096},
                     "a consumer group id")
_LINK_PARAM = Param("link", "path", _LINK, "a cluster link's name")
_PAGE = (Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX},
               f"items per page (default {PAGE_LIMIT_DEFAULT})"),
         Param("after", "query", {"type": "string"}, "the last item of the previous page"))

ROUTES: tuple[Route, ...] = (
    Route("GET", "/", "status_page", "The status page (HTML, refreshes itself)",
          content_type="text/html", errors=(), tags=("status",)),
    Route("GET", "/metrics", "metrics", "Prometheus metrics (text exposition format)",
          params=(Param("name[]", "query", {"type": "array", "items": {"type": "string"}},
                        "only these series (repeat for several), as prometheus_client's "
                        "exposition takes it: a probe of one count without every "
                        "partition's series"),),
          content_type="text/plain", errors=(), tags=("status",)),
    Route("GET", "/v1/openapi.json", "openapi", "This document", errors=(), tags=("status",)),
    Route("GET", "/v1/live", "live", "Liveness: 200 while the process serves", errors=(),
          tags=("status",)),
    Route("GET", "/v1/ready", "ready",
          "Readiness: 200 once this node serves its role (a broker registered, unfenced and "
          "caught up; a controller following an elected quorum leader), else 503",
          errors=(503,), tags=("status",)),
    Route("GET", "/v1/node", "node_info", "This node: id, role, cluster id, metadata offset and "
          "role-specific state", errors=(), tags=("cluster",)),
    Route("GET", "/v1/mirrors", "local_mirrors",
          "The mirror topic partitions this broker leads (issue 21): link, topic, partition, "
          "source topic, state, lag (source high watermark - local log end offset) and the "
          "last error; empty on a controller", errors=(), tags=("status",)),
    Route("GET", "/v1/cluster", "cluster", "Cluster id, the active controller, brokers and "
          "partition health in one answer", tags=("cluster",)),
    Route("GET", "/v1/cluster/brokers", "brokers", "Every registered broker, fenced ones too",
          errors=(), tags=("cluster",)),
    Route("GET", "/v1/cluster/controller", "active_controller",
          "The active controller, from the metadata quorum (the same on every node)",
          ok=(200, "ActiveController"), tags=("cluster",)),
    Route("GET", "/v1/cluster/health", "health",
          "Partition health; 503 when any partition is under-replicated, under min ISR or "
          "offline (a load-balancer or Kubernetes probe)", ok=(200, "Health"), errors=(503,),
          tags=("cluster",)),
    Route("GET", "/v1/quorum", "quorum",
          "The metadata quorum: leader, epoch, high watermark, voters and observers with "
          "log end offset, lag and last caught-up time", ok=(200, "Quorum"), tags=("quorum",)),
    Route("GET", "/v1/topics", "list_topics", "Topics, by name, a page at a time",
          params=(*_PAGE, Param("internal", "query", _BOOL, "include internal topics")),
          ok=(200, "Page"), tags=("topics",)),
    Route("POST", "/v1/topics", "create_topic", "Create a topic", body="NewTopic",
          ok=(201, "Topic"), errors=(400, 409, 503), tags=("topics",)),
    Route("GET", "/v1/topics/{topic}", "describe_topic",
          "A topic's partitions: leader, ISR, replicas, high watermark, log start and end, size",
          params=(_TOPIC_PARAM,), ok=(200, "Topic"), errors=(400, 404, 503), tags=("topics",)),
    Route("DELETE", "/v1/topics/{topic}", "delete_topic", "Delete a topic",
          params=(_TOPIC_PARAM,), errors=(400, 404, 503), tags=("topics",)),
    Route("POST", "/v1/topics/{topic}/partitions", "add_partitions",
          "Grow a topic to `count` partitions", params=(_TOPIC_PARAM,), body="NewPartitions",
          errors=(400, 404, 503), tags=("topics",)),
    Route("GET", "/v1/topics/{topic}/configs", "topic_configs",
          "A topic's effective configuration with each value's source",
          params=(_TOPIC_PARAM,), errors=(400, 404, 503), tags=("topics",)),
    Route("PATCH", "/v1/topics/{topic}/configs", "alter_topic_configs",
          "Set and delete topic configuration keys (IncrementalAlterConfigs)",
          params=(_TOPIC_PARAM,), body="ConfigChanges", errors=(400, 404, 503), tags=("topics",)),
    Route("GET", "/v1/groups", "list_groups", "Consumer groups, by id, a page at a time",
          params=_PAGE, ok=(200, "Page"), tags=("groups",)),
    Route("GET", "/v1/groups/{group}", "describe_group",
          "A group's state, members and assignments, and its lag per partition and in total "
          "(log end minus committed offset, computed by the brokers)",
          params=(_GROUP_PARAM,), ok=(200, "Group"), errors=(400, 404, 503), tags=("groups",)),
    Route("DELETE", "/v1/groups/{group}", "delete_group",
          "Delete an empty group and its committed offsets", params=(_GROUP_PARAM,),
          errors=(400, 404, 409, 503), tags=("groups",)),
    Route("POST", "/v1/groups/{group}/offsets/reset", "reset_group_offsets",
          "Move an inactive group's committed offsets (dry_run: only compute them)",
          params=(_GROUP_PARAM,), body="OffsetReset", errors=(400, 404, 409, 503),
          tags=("groups",)),
    Route("POST", "/v1/actions/elect-leaders", "elect_leaders",
          "Preferred (default) or unclean leader election, for the given partitions or all",
          body="ElectLeaders", tags=("actions",)),
    Route("GET", "/v1/actions/reassignments", "list_reassignments",
          "Partition reassignments in progress", tags=("actions",)),
    Route("POST", "/v1/actions/reassignments", "reassign",
          "Start (replicas) or cancel (null) partition reassignments", body="Reassignment",
          errors=(400, 404, 503), tags=("actions",)),
    Route("POST", "/v1/brokers/{broker_id}/decommission", "decommission",
          "Move every replica off a broker to the other live brokers",
          params=(Param("broker_id", "path", _BROKER_ID),), body="Decommission",
          errors=(400, 404, 503), tags=("actions",)),
    Route("GET", "/v1/links", "list_links",
          "Cluster links: each one's name and its source's bootstrap servers", tags=("links",)),
    Route("POST", "/v1/links", "create_link",
          "Create a cluster link (configs: bootstrap.servers, topics, security, sync settings)",
          body="NewLink", ok=(201, None), errors=(400, 409, 503), tags=("links",)),
    Route("GET", "/v1/links/{link}", "describe_link",
          "A link's configs (defaults shown, secrets hidden) and its mirror topics",
          params=(_LINK_PARAM,), errors=(400, 404, 503), tags=("links",)),
    Route("PATCH", "/v1/links/{link}", "alter_link",
          "Set and delete a link's configs (IncrementalAlterConfigs)", params=(_LINK_PARAM,),
          body="ConfigChanges", errors=(400, 404, 503), tags=("links",)),
    Route("DELETE", "/v1/links/{link}", "delete_link",
          "Delete a link; refused (400) while mirror topics use it", params=(_LINK_PARAM,),
          errors=(400, 404, 503), tags=("links",)),
    Route("GET", "/v1/mirror-topics", "list_mirror_topics",
          "Mirror topics: each one's link, source topic and state", tags=("links",)),
    Route("POST", "/v1/mirror-topics", "create_mirror_topic",
          "Mirror a source topic through a link (added to the link's topics; the link "
          "manager creates it)", body="NewMirrorTopic", errors=(400, 404, 503), tags=("links",)),
    Route("POST", "/v1/mirror-topics/{topic}/promote", "promote_mirror_topic",
          "Make a mirror topic writable at its current end (failover)", params=(_TOPIC_PARAM,),
          errors=(400, 404, 503), tags=("links",)),
    Route("POST", "/v1/mirror-topics/{topic}/restore", "restore_mirror_topic",
          "Make a topic follow a link's source again (truncate-and-restore)",
          params=(_TOPIC_PARAM,), body="MirrorRestore", errors=(400, 404, 503), tags=("links",)),
)

_STATUS_TEXT = {200: "OK", 201: "Created", 400: "Bad input", 404: "Not found",
                409: "Conflict with the current state", 503: "Unavailable or unhealthy",
                504: "Timed out", 401: "No or wrong credentials (when the node requires them)",
                403: "Not authorized by the ACLs"}


def _ref(name: str | None) -> dict:
    return {"$ref": f"#/components/schemas/{name}"} if name else _ANY_OBJECT


def openapi_document() -> dict:
    paths: dict[str, dict] = {}
    for r in ROUTES:
        op: dict[str, Any] = {"operationId": r.handler, "summary": r.summary, "tags": list(r.tags)}
        if r.params:
            op["parameters"] = [{"name": p.name, "in": p.where, "required": p.where == "path",
                                 "schema": p.schema, **({"description": p.description}
                                                        if p.description else {})}
                                for p in r.params]
        if r.body:
            op["requestBody"] = {"required": r.body in ("NewTopic", "NewPartitions",
                                                        "OffsetReset", "Reassignment"),
                                 "content": {"application/json": {"schema": _ref(r.body)}}}
        status, schema = r.ok
        if r.content_type == "application/json":
            ok_content = {"application/json": {"schema": _ref(schema)}}
        else:
            ok_content = {r.content_type: {"schema": {"type": "string"}}}
        responses: dict[str, Any] = {str(status): {"description": _STATUS_TEXT[status],
                                                   "content": ok_content}}
        for code in sorted({*r.errors, *((400,) if r.params or r.body else ()),
                            *((504,) if 503 in r.errors else ()),
                            # A secured node (clients/http_api/auth.py) may refuse any call
                            # but the status routes.
                            *((401, 403) if "status" not in r.tags else ())}):
            body = _ref("Health") if (r.handler == "health" and code == 503) else _ref("Error")
            responses[str(code)] = {"description": _STATUS_TEXT[code],
                                    "content": {"application/json": {"schema": body}}}
        op["responses"] = responses
        if "status" not in r.tags:
            op["security"] = [{}, {"basicAuth": []}]        # optional unless the node requires it
        paths.setdefault(r.path, {})[r.method.lower()] = op
    return {
        "openapi": "3.0.3",
        "info": {"title": "Ketch admin API", "version": API_VERSION,
                 "description": "Every broker and every controller serves this API. Writes "
                                "go to the active controller as Kafka's admin APIs do; every "
                                "error is a JSON body naming Kafka's error."},
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"basicAuth": {"type": "http", "scheme": "basic"}}},
    }


# ------------------------------------------------------------------ checking input

def _resolve(schema: dict) -> dict:
    ref = schema.get("$ref")
    return SCHEMAS[ref.rsplit("/", 1)[1]] if ref else schema


def check(schema: dict, value: Any, where: str = "") -> None:
    """Raise InvalidInput unless ``value`` matches ``schema`` (the subset of JSON Schema
    the tables above use)."""
    schema = _resolve(schema)
    if value is None:
        if schema.get("nullable"):
            return
        raise InvalidInput(where, "must not be null")
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            raise InvalidInput(where, "must be a JSON object")
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise InvalidInput(f"{where}.{name}" if where else name, "is required")
        extra = schema.get("additionalProperties", True)
        for name, v in value.items():
            path = f"{where}.{name}" if where else name
            if name in props:
                check(props[name], v, path)
            elif extra is False:
                raise InvalidInput(path, "is not a known field")
            elif isinstance(extra, dict):
                check(extra, v, path)
    elif kind == "array":
        if not isinstance(value, list):
            raise InvalidInput(where, "must be a JSON array")
        if len(value) < schema.get("minItems", 0):
            raise InvalidInput(where, f"needs at least {schema['minItems']} item(s)")
        for i, v in enumerate(value):
            check(schema.get("items", {}), v, f"{where}[{i}]")
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(where, "must be an integer")
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidInput(where, f"must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidInput(where, f"must be at most {schema['maximum']}")
    elif kind == "string":
        if not isinstance(value, str):
            raise InvalidInput(where, "must be a string")
        if len(value) < schema.get("minLength", 0):
            raise InvalidInput(where, "must not be empty")
        if len(value) > schema.get("maxLength", 1 << 30):
            raise InvalidInput(where, f"must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not re.match(schema["pattern"], value):
            raise InvalidInput(where, f"must match {schema['pattern']}")
        if value in (".", "..") and schema.get("pattern") == TOPIC_NAME_PATTERN:
            raise InvalidInput(where, "'.' and '..' are not topic names")
        if "enum" in schema and value not in schema["enum"]:
            raise InvalidInput(where, f"must be one of {', '.join(schema['enum'])}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidInput(where, "must be true or false")


def check_query(route: Route, query: Mapping[str, str]) -> dict[str, Any]:
    """The route's query parameters, converted to their types and checked."""
    out: dict[str, Any] = {}
    known = {p.name: p for p in route.params if p.where == "query"}
    for name in query:
        if name not in known:
            raise InvalidInput(name, "is not a known query parameter")
    for name, p in known.items():
        if name not in query:
            continue
        raw = query[name]
        kind = p.schema.get("type")
        value: Any = raw
        if kind == "array":
            # Repeated (form style, exploded): name[]=a&name[]=b; the strings as given.
            getall = getattr(query, "getall", None)
            value = list(getall(name)) if getall is not None else [raw]
        elif kind == "integer":
            try:
                value = int(raw)
            except ValueError:
                raise InvalidInput(name, "must be an integer") from None
        elif kind == "boolean":
            if raw not in ("true", "false"):
                raise InvalidInput(name, "must be true or false")
            value = raw == "true"
        check(p.schema, value, name)
        out[name] = value
    return out


def page(items: list[Any], key: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """One page of ``items`` (sorted by ``key``): those after ``after``, at most ``limit``."""
    after = params.get("after")
    limit = params.get("limit", PAGE_LIMIT_DEFAULT)
    chosen = [i for i in items if after is None or key(i) > after]
    out = chosen[:limit]
    return {"items": out, "next": key(out[-1]) if len(chosen) > limit else None}
