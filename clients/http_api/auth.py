"""Who may call the HTTP admin API, and what each route needs (issue 16). Pure.

Authentication is HTTP Basic, checked against the users the node's Kafka listeners know:
the PLAIN user table of its JAAS config (``user_<name>="<password>"``) and the SCRAM
credentials of the metadata log, as Redpanda's admin API checks Basic credentials against
its SCRAM users. A SCRAM verifier holds no password: the password sent is salted and
hashed with the verifier's salt and iteration count (PBKDF2, the costly step, which the
shell runs off the event loop) and its StoredKey compared. A password that passed is
remembered, keyed by a keyed hash, so a client sending the same header on every call
pays PBKDF2 once; a changed or deleted credential no longer matches.

Authorization asks the same questions Kafka's KafkaApis asks for the API a route stands
for (``required_checks``): creating a topic needs CREATE on the cluster or the topic
(CreateTopics), deleting it DELETE on the topic (DeleteTopics), and so on. A route this
table does not name needs ALTER on the cluster if it changes anything and DESCRIBE on the
cluster if it reads: the safe answer for a route added later.

Configuration (a node's properties):
    ketch.http.authentication   none (default) | basic
    ketch.http.open.status      true (default): /, /metrics, /v1/openapi.json, /v1/live and
                                /v1/ready answer without credentials (scrapers, probes)
    ketch.http.open.reads       false (default): with true, GETs need no credentials (and
                                are answered in full); only calls that change state do
    ketch.http.ssl.enabled      true: HTTPS, with ketch.http.ssl.keystore.location etc.,
                                falling back to the node's ssl.* keys (not ssl.client.auth)
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from clients.protocol.acls import CLUSTER_NAME, AclOperation, AclResourceType, KafkaPrincipal
from clients.security import scram
from clients.security.scram import ScramCredential, ScramMechanism

__all__ = ["Action", "Caller", "Check", "HttpAuthConfig", "HttpAuthError", "PasswordCheck",
           "STATUS_HANDLERS", "parse_basic", "required_checks"]

# The routes a scraper or a probe calls (spec.ROUTES tagged "status").
STATUS_HANDLERS = frozenset({"status_page", "metrics", "openapi", "live", "ready"})

_O, _R = AclOperation, AclResourceType
_TRUE = ("true", "yes", "1")


class HttpAuthError(ValueError):
    """Malformed credentials or configuration; the text never holds a password."""


@dataclass(frozen=True, slots=True)
class HttpAuthConfig:
    authentication: bool = False
    open_status: bool = True
    open_reads: bool = False
    tls: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "HttpAuthConfig":
        kind = (props.get("ketch.http.authentication") or "none").strip().lower()
        if kind not in ("none", "basic"):
            raise HttpAuthError(f"ketch.http.authentication={kind}: none or basic")
        return cls(authentication=kind == "basic",
                   open_status=(props.get("ketch.http.open.status") or "true").strip().lower() in _TRUE,
                   open_reads=(props.get("ketch.http.open.reads") or "false").strip().lower() in _TRUE,
                   tls=(props.get("ketch.http.ssl.enabled") or "false").strip().lower() in _TRUE)

    def needs_login(self, handler: str, method: str) -> bool:
        if not self.authentication:
            return False
        if handler in STATUS_HANDLERS and self.open_status:
            return False
        return not (method == "GET" and self.open_reads)


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic ...`` header; None without one."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise HttpAuthError(f"the Authorization scheme must be Basic, not {scheme[:16]!r}")
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise HttpAuthError("the Basic credentials are not base64 of UTF-8 user:password") from None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise HttpAuthError("the Basic credentials must be user:password")
    return user, password


ScramLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]


class PasswordCheck:
    """Whether a user's password is right, by the PLAIN table or a SCRAM verifier."""

    CACHE_MAX = 1024

    def __init__(self, plain_users: Mapping[str, str], scram_credentials: ScramLookup,
                 cache_key: bytes) -> None:
        """``cache_key``: random bytes, so that the remembered hashes say nothing."""
        self.plain_users = dict(plain_users)
        self.scram_credentials = scram_credentials
        self.cache_key = cache_key
        self._passed: OrderedDict[bytes, bytes] = OrderedDict()   # fingerprint -> stored key

    def _fingerprint(self, user: str, password: str, mechanism: ScramMechanism) -> bytes:
        return hmac.new(self.cache_key, b"\0".join((mechanism.name.encode(), user.encode(),
                                                    password.encode())), hashlib.sha256).digest()

    def quick(self, user: str, password: str) -> bool | None:
        """The answer when it costs nothing (a PLAIN user, a remembered pass, no such
        user); None when a SCRAM verifier must be computed (``slow``)."""
        expected = self.plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        credentials = [(m, c) for m in scram.MECHANISMS.values()
                       if (c := self.scram_credentials(user, m)) is not None]
        if not credentials:
            return False
        for mechanism, credential in credentials:
            remembered = self._passed.get(self._fingerprint(user, password, mechanism))
            if remembered is not None and hmac.compare_digest(remembered, credential.stored_key):
                return True
        return None

    def slow(self, user: str, password: str) -> bool:
        """PBKDF2 against the user's SCRAM verifiers (one is enough)."""
        for mechanism in scram.MECHANISMS.values():
            credential = self.scram_credentials(user, mechanism)
            if credential is None:
                continue
            computed = scram.credential_from_password(mechanism, password, credential.salt,
                                                      credential.iterations)
            if hmac.compare_digest(computed.stored_key, credential.stored_key):
                self._passed[self._fingerprint(user, password, mechanism)] = credential.stored_key
                while len(self._passed) > self.CACHE_MAX:
                    self._passed.popitem(last=False)
                return True
        return False


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made an HTTP call (broker.auth_helper.Client's shape)."""
    principal: KafkaPrincipal
    host: str


@dataclass(frozen=True, slots=True)
class Action:
    operation: AclOperation
    resource_type: AclResourceType
    name: str


@dataclass(frozen=True, slots=True)
class Check:
    """Passes when any of ``alternatives`` is authorized."""
    alternatives: tuple[Action, ...]

    @property
    def error(self) -> str:
        """Kafka's error for a refusal: the most specific resource's (the last)."""
        return {_R.TOPIC: "TOPIC_AUTHORIZATION_FAILED", _R.GROUP: "GROUP_AUTHORIZATION_FAILED"}.get(
            self.alternatives[-1].resource_type, "CLUSTER_AUTHORIZATION_FAILED")

    def describe(self) -> str:
        return " or ".join(f"{a.operation.name} on {a.resource_type.name} {a.name!r}"
                           for a in self.alternatives)


def _one(op: AclOperation, kind: AclResourceType, name: str = CLUSTER_NAME) -> Check:
    return Check((Action(op, kind, name),))


def required_checks(handler: str, method: str, query: Mapping[str, Any], body: Any) -> list[Check]:
    """What the caller needs for one call, as Kafka's KafkaApis asks it for the API the
    route stands for. List routes filter their items instead (DESCRIBE on each)."""
    topic, group = str(query.get("topic", "")), str(query.get("group", ""))
    body = body if isinstance(body, dict) else {}
    if handler in STATUS_HANDLERS or handler in ("list_topics", "list_groups"):
        return []
    if handler == "create_topic":                           # CreateTopics
        return [Check((Action(_O.CREATE, _R.CLUSTER, CLUSTER_NAME),
                       Action(_O.CREATE, _R.TOPIC, body.get("name", ""))))]
    if handler == "describe_topic":                         # Metadata, ListOffsets
        return [_one(_O.DESCRIBE, _R.TOPIC, topic)]
    if handler == "delete_topic":                           # DeleteTopics
        return [_one(_O.DELETE, _R.TOPIC, topic)]
    if handler == "add_partitions":                         # CreatePartitions
        return [_one(_O.ALTER, _R.TOPIC, topic)]
    if handler == "topic_configs":                          # DescribeConfigs
        return [_one(_O.DESCRIBE_CONFIGS, _R.TOPIC, topic)]
    if handler == "alter_topic_configs":                    # IncrementalAlterConfigs
        return [_one(_O.ALTER_CONFIGS, _R.TOPIC, topic)]
    if handler == "describe_group":                         # DescribeGroups, OffsetFetch
        return [_one(_O.DESCRIBE, _R.GROUP, group)]
    if handler == "delete_group":                           # DeleteGroups
        return [_one(_O.DELETE, _R.GROUP, group)]
    if handler == "reset_group_offsets":
        if body.get("dry_run"):                             # OffsetFetch
            return [_one(_O.DESCRIBE, _R.GROUP, group)]
        topics = body.get("topics")
        if topics is None:
            # OffsetCommit needs READ on each topic the group has committed, which only
            # the handler learns: name the topics, or hold ALTER on the cluster.
            return [_one(_O.READ, _R.GROUP, group), _one(_O.ALTER, _R.CLUSTER)]
        return [_one(_O.READ, _R.GROUP, group), *(_one(_O.READ, _R.TOPIC, t) for t in topics)]
    if handler in ("elect_leaders", "reassign"):            # ElectLeaders, AlterPartitionReassignments
        return [_one(_O.ALTER, _R.CLUSTER)]
    if handler == "decommission":                           # reassignments; a dry run reads
        return [_one(_O.DESCRIBE if body.get("dry_run") else _O.ALTER, _R.CLUSTER)]
    # DescribeQuorum, ListPartitionReassignments, the cluster's state; and any route this
    # table does not know.
    return [_one(_O.DESCRIBE if method == "GET" else _O.ALTER, _R.CLUSTER)]
