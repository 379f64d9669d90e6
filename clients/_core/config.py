"""Kafka's client configuration keys, with Kafka's defaults, types and validation.

Theory of operation
-------------------
A client is configured by Kafka's own property names (`bootstrap.servers`, `acks`,
`linger.ms`, `group.id`, ...), given as a dict of strings (a `.properties` file, a CLI) or of
Python values (`{"linger.ms": 5, "enable.idempotence": True}`). `parse_config(kind, props)`
checks every key against one table of `ConfigKey`s, converts each value to its type, checks
its range or allowed values, fills in Kafka's default for every key not given, then runs the
cross-key rules of Kafka's `ProducerConfig` / `ConsumerConfig` (idempotence needs acks=all;
`delivery.timeout.ms` >= `linger.ms` + `request.timeout.ms`; auto-commit needs a group).
The result is a `ClientConfig`, an immutable mapping from key to typed value.

Errors: an unknown key, a key of another client kind (`group.id` for a producer), a value
of the wrong type or out of range, all raise `ConfigError` naming the key, as Kafka's
`ConfigException` does, before any connection is made.

Defaults are Kafka 4.0's (the Java client's `ProducerConfig`, `ConsumerConfig`,
`AdminClientConfig`, `CommonClientConfigs`): notably `linger.ms` is 5 (KIP-1030; it was 0
before 4.0), `enable.idempotence` is true and `acks` is `all` (3.0, KIP-679),
`partition.assignment.strategy` is range then cooperative-sticky, and
`metadata.recovery.strategy` is `rebootstrap` (KIP-899).

Ketch's differences, on purpose:
* Serializers, deserializers and partitioners are Python callables, not Java class
  names; the names of Kafka's own String/ByteArray (de)serializers are also accepted.
* Keys Ketch's client does not implement (interceptors, metrics reporters) are refused as
  unknown rather than silently ignored. TLS and SASL (PLAIN, SCRAM-SHA-256/512) take
  Kafka's Java names and librdkafka's (`sasl.username`/`sasl.password`, `ssl.ca.location`,
  `ssl.certificate.location`, `ssl.key.location`): see clients/security/client_auth.py.
* Assignor names are kept as protocol names: `range`, `roundrobin`, `sticky`,
  `cooperative-sticky` (Java class names such as
  `org.apache.kafka.clients.consumer.RangeAssignor` are accepted and mapped).

Other helpers may append keys to `_KEYS` (one `_key(...)` line each).

Pure: no I/O, no clock, no randomness.
"""
from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from clients.errors import ConfigError

__all__ = [
    "ConfigType", "ConfigKey", "ClientConfig", "parse_config", "config_keys", "KINDS",
    "PRODUCER", "CONSUMER", "ADMIN", "builtin_serializer", "builtin_deserializer",
    "ASSIGNOR_NAMES",
]

PRODUCER, CONSUMER, ADMIN = "producer", "consumer", "admin"
KINDS = (PRODUCER, CONSUMER, ADMIN)
_ALL = frozenset(KINDS)
_P, _C, _A = frozenset({PRODUCER}), frozenset({CONSUMER}), frozenset({ADMIN})
_PC = _P | _C

_INT_MAX = (1 << 31) - 1
_LONG_MAX = (1 << 63) - 1


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    INT = "int"        # int32
    LONG = "long"      # int64
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"      # comma-separated in strings; a tuple of str once parsed
    CALLABLE = "callable"  # Kafka's CLASS: here a Python callable (or a known name)


_REQUIRED = object()  # the default of a key that must be given (bootstrap.servers)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    kinds: frozenset[str]
    doc: str
    # Extra check/conversion on the typed value; raises ValueError with a reason.
    validator: Callable[[Any], Any] | None = None
    nullable: bool = False
    kind_defaults: tuple[tuple[str, Any], ...] = ()  # per-kind defaults where Kafka differs

    def default_for(self, kind: str) -> Any:
        for k, v in self.kind_defaults:
            if k == kind:
                return v
        return self.default


def _at_least(lo: int | float) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v < lo:
            raise ValueError(f"must be at least {lo}, got {v}")
        return v
    return check


def _between(lo: int, hi: int, *extra: int) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not (lo <= v <= hi or v in extra):
            allowed = f"between {lo} and {hi}" + "".join(f" or {e}" for e in extra)
            raise ValueError(f"must be {allowed}, got {v}")
        return v
    return check


def _one_of(*choices: str, lower: bool = True) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        s = v.lower() if lower else v
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {v!r}")
        return s
    return check


def _upper_one_of(*choices: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        s = v.strip().upper()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {v!r}")
        return s
    return check


def _acks(v: Any) -> int:
    s = str(v).strip().lower()
    if s in ("all", "-1"):
        return -1
    if s in ("0", "1"):
        return int(s)
    raise ValueError(f"must be one of all, -1, 0, 1; got {v!r}")


def _bootstrap(servers: tuple[str, ...]) -> tuple[str, ...]:
    if not servers:
        raise ValueError("must list at least one host:port")
    for s in servers:
        host, sep, port = s.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{s!r} is not host:port")
    return servers


ASSIGNOR_NAMES = ("range", "roundrobin", "sticky", "cooperative-sticky")
_JAVA_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _assignors(names: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for n in names:
        short = _JAVA_ASSIGNORS.get(n, n.lower())
        if short not in ASSIGNOR_NAMES:
            raise ValueError(f"unknown assignor {n!r}; known: {', '.join(ASSIGNOR_NAMES)}")
        out.append(short)
    if not out:
        raise ValueError("must name at least one assignor")
    return tuple(out)


def _only(value: Any, why: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v != value:
            raise ValueError(why)
        return v
    return check


def _serde_str(value: bytes | str | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"StringSerializer takes str or bytes, got {type(value).__name__}")


def _serde_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"ByteArraySerializer takes bytes, got {type(value).__name__}")


def _deserde_str(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


def _deserde_bytes(data: bytes | None) -> bytes | None:
    return None if data is None else bytes(data)


_SERIALIZERS: dict[str, Callable[[Any], bytes | None]] = {
    "string": _serde_str, "org.apache.kafka.common.serialization.StringSerializer": _serde_str,
    "bytes": _serde_bytes, "org.apache.kafka.common.serialization.ByteArraySerializer": _serde_bytes,
}
_DESERIALIZERS: dict[str, Callable[[bytes | None], Any]] = {
    "string": _deserde_str, "org.apache.kafka.common.serialization.StringDeserializer": _deserde_str,
    "bytes": _deserde_bytes, "org.apache.kafka.common.serialization.ByteArrayDeserializer": _deserde_bytes,
}


def builtin_serializer(name: str) -> Callable[[Any], bytes | None]:
    return _SERIALIZERS[name]


def builtin_deserializer(name: str) -> Callable[[bytes | None], Any]:
    return _DESERIALIZERS[name]


def _named(table: dict[str, Callable]) -> Callable[[Any], Any]:
    def resolve(v: Any) -> Any:
        if isinstance(v, str):
            if v not in table:
                raise ValueError(f"unknown name {v!r}; give a callable or one of "
                                 f"{', '.join(sorted(table))}")
            return table[v]
        return v
    return resolve


_KEYS: list[ConfigKey] = []


def _key(name: str, type_: ConfigType, default: Any, kinds: frozenset[str], doc: str,
         validator: Callable[[Any], Any] | None = None, nullable: bool = False,
         **kind_defaults: Any) -> None:
    _KEYS.append(ConfigKey(name, type_, default, kinds, doc, validator, nullable,
                           tuple(kind_defaults.items())))


B, I, L, D, S, LIST, F = (ConfigType.BOOLEAN, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
                          ConfigType.STRING, ConfigType.LIST, ConfigType.CALLABLE)

# --- common to every client (CommonClientConfigs) ---
_key("bootstrap.servers", LIST, _REQUIRED, _ALL, "host:port pairs for the first metadata request",
     _bootstrap)
_key("client.id", S, "", _ALL, "sent in every request header; names the client in broker logs")
_key("request.timeout.ms", I, 30000, _ALL, "how long to wait for one response", _at_least(0))
_key("retry.backoff.ms", L, 100, _ALL, "first wait before retrying a failed request", _at_least(0))
_key("retry.backoff.max.ms", L, 1000, _ALL, "longest wait between retries (exponential, KIP-580)",
     _at_least(0))
_key("reconnect.backoff.ms", L, 50, _ALL, "first wait before reconnecting to a broker", _at_least(0))
_key("reconnect.backoff.max.ms", L, 1000, _ALL, "longest wait before reconnecting", _at_least(0))
_key("socket.connection.setup.timeout.ms", L, 10000, _ALL, "how long one connect may take",
     _at_least(0))
_key("socket.connection.setup.timeout.max.ms", L, 30000, _ALL,
     "longest connect timeout after repeated failures", _at_least(0))
_key("metadata.max.age.ms", L, 300000, _ALL, "refresh metadata at least this often", _at_least(0))
_key("connections.max.idle.ms", L, 540000, _ALL, "close connections idle this long",
     admin=300000)
_key("send.buffer.bytes", I, 131072, _ALL, "SO_SNDBUF; -1 keeps the OS default", _at_least(-1))
_key("receive.buffer.bytes", I, 65536, _ALL, "SO_RCVBUF; -1 keeps the OS default", _at_least(-1),
     producer=32768)
_key("security.protocol", S, "PLAINTEXT", _ALL, "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
     _upper_one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
_key("sasl.mechanism", S, "GSSAPI", _ALL, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default "
     "GSSAPI is not one Ketch has)", _upper_one_of("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
_key("sasl.jaas.config", S, None, _ALL, "Kafka's login options: ...LoginModule required "
     'username="..." password="...";', nullable=True)
_key("sasl.username", S, None, _ALL, "the SASL user (librdkafka's name)", nullable=True)
_key("sasl.password", S, None, _ALL, "the SASL password (librdkafka's name)", nullable=True)
for _name, _doc in (
        ("ssl.truststore.location", "PEM file of the CAs the broker's certificate must chain to"),
        ("ssl.ca.location", "librdkafka's name for ssl.truststore.location"),
        ("ssl.truststore.certificates", "those CAs as PEM text"),
        ("ssl.ca.pem", "librdkafka's name for ssl.truststore.certificates"),
        ("ssl.truststore.type", "PEM (JKS is taken to mean a PEM file too)"),
        ("ssl.keystore.location", "PEM file with this client's certificate chain and key"),
        ("ssl.keystore.type", "PEM (JKS is taken to mean a PEM file too)"),
        ("ssl.certificate.location", "librdkafka's: this client's certificate (PEM)"),
        ("ssl.key.location", "librdkafka's: this client's private key (PEM)"),
        ("ssl.key.password", "the private key's password"),
        ("ssl.keystore.certificate.chain", "this client's certificate chain as PEM text"),
        ("ssl.keystore.key", "this client's private key as PEM text")):
    _key(_name, S, None, _ALL, _doc, nullable=True)
del _name, _doc
_key("ssl.endpoint.identification.algorithm", S, "https", _ALL,
     "https: the broker's certificate must name the host dialled; empty: not checked",
     _one_of("https", "none", ""))
_key("metadata.recovery.strategy", S, "rebootstrap", _ALL,
     "what to do when every known broker is unreachable (KIP-899)", _one_of("none", "rebootstrap"))
# Accepted, not enforced: with strategy rebootstrap, Ketch's Cluster falls back to the
# bootstrap servers as soon as every known broker fails a metadata request.
_key("metadata.recovery.rebootstrap.trigger.ms", L, 300000, _ALL,
     "rebootstrap after this long without a usable broker (not enforced yet)", _at_least(0))
_key("retries", I, _INT_MAX, _P | _A, "how many times to retry a failed request", _at_least(0))
_key("default.api.timeout.ms", I, 60000, _C | _A, "the deadline of calls that take no timeout",
     _at_least(0))

# --- producer (ProducerConfig) ---
_key("acks", S, "all", _P, "all/-1: the whole ISR has the record; 1: the leader; 0: no answer",
     _acks)
_key("batch.size", I, 16384, _P, "bytes per partition batch before it is sent", _at_least(0))
_key("linger.ms", L, 5, _P, "wait this long for more records before sending a batch",
     _at_least(0))
_key("buffer.memory", L, 33554432, _P, "bytes of records the producer may hold unsent",
     _at_least(0))
_key("max.block.ms", L, 60000, _P, "how long send() may wait for metadata or buffer space",
     _at_least(0))
_key("compression.type", S, "none", _P, "none, gzip, snappy, lz4 or zstd",
     _one_of("none", "gzip", "snappy", "lz4", "zstd"))
_key("compression.gzip.level", I, -1, _P, "gzip level (KIP-390); -1 the codec's default",
     _between(1, 9, -1))
_key("compression.lz4.level", I, 9, _P, "lz4 level (KIP-390)", _between(1, 17))
_key("compression.zstd.level", I, 3, _P, "zstd level (KIP-390)", _between(-131072, 22))
_key("delivery.timeout.ms", I, 120000, _P, "upper bound from send() to success or failure",
     _at_least(0))
_key("enable.idempotence", B, True, _P, "exactly one copy of each record per partition (KIP-98)")
_key("max.in.flight.requests.per.connection", I, 5, _P,
     "unacknowledged produce requests per broker", _at_least(1))
_key("max.request.size", I, 1048576, _P, "largest produce request, and so largest record",
     _at_least(0))
_key("metadata.max.idle.ms", L, 300000, _P,
     "stop refreshing a topic not produced to for this long", _at_least(5000))
_key("partitioner.class", F, None, _P,
     "callable(topic, key_bytes, partition_count) -> partition; None: murmur2 / sticky",
     nullable=True)
_key("partitioner.ignore.keys", B, False, _P, "sticky partitioning even for keyed records")
_key("partitioner.adaptive.partitioning.enable", B, True, _P,
     "sticky batches go more often to faster brokers (KIP-794)")
_key("partitioner.availability.timeout.ms", L, 0, _P,
     "KIP-794's unavailable-broker timeout: not implemented, only 0 (off, Kafka's default)",
     _only(0, "only 0 is supported: Ketch's client does not implement KIP-794's "
              "availability timeout (partitions without a live leader are skipped instead)"))
_key("key.serializer", F, None, _P, "callable(key) -> bytes; None: bytes as is, str as UTF-8",
     _named(_SERIALIZERS), nullable=True)
_key("value.serializer", F, None, _P, "callable(value) -> bytes; None: bytes as is, str as UTF-8",
     _named(_SERIALIZERS), nullable=True)
_key("transactional.id", S, None, _P, "the transactional id (KIP-98); implies idempotence",
     nullable=True)
_key("transaction.timeout.ms", I, 60000, _P, "the coordinator aborts a transaction open "
     "this long", _at_least(0))

# --- consumer (ConsumerConfig) ---
_key("group.id", S, None, _C, "the consumer group; None: no group (assign() only)", nullable=True)
_key("group.instance.id", S, None, _C, "static membership id (KIP-345)", nullable=True)
_key("group.protocol", S, "classic", _C, "only the classic group protocol",
     _one_of("classic"))
_key("session.timeout.ms", I, 45000, _C, "a member silent this long leaves the group",
     _at_least(1))
_key("heartbeat.interval.ms", I, 3000, _C, "heartbeat period", _at_least(1))
_key("partition.assignment.strategy", LIST, ("range", "cooperative-sticky"), _C,
     "assignors in order of preference", _assignors)
_key("auto.offset.reset", S, "latest", _C, "earliest, latest or none when there is no position",
     _one_of("earliest", "latest", "none"))
_key("enable.auto.commit", B, True, _C, "commit positions every auto.commit.interval.ms")
_key("auto.commit.interval.ms", I, 5000, _C, "auto-commit period", _at_least(0))
_key("fetch.min.bytes", I, 1, _C, "bytes a fetch waits for", _at_least(0))
_key("fetch.max.bytes", I, 52428800, _C, "bytes per fetch response", _at_least(0))
_key("fetch.max.wait.ms", I, 500, _C, "how long a fetch may wait for fetch.min.bytes",
     _at_least(0))
_key("max.partition.fetch.bytes", I, 1048576, _C, "bytes per partition per fetch", _at_least(0))
_key("max.poll.records", I, 500, _C, "records one poll() returns at most", _at_least(1))
_key("max.poll.interval.ms", I, 300000, _C, "longest gap between poll() calls in a group",
     _at_least(1))
_key("isolation.level", S, "read_uncommitted", _C, "read_uncommitted or read_committed",
     _one_of("read_uncommitted", "read_committed"))
_key("check.crcs", B, True, _C, "check record batch CRCs")
_key("exclude.internal.topics", B, True, _C, "patterns never match internal topics")
_key("allow.auto.create.topics", B, True, _C, "subscribing may auto-create a topic")
_key("client.rack", S, "", _C, "the rack of this consumer (KIP-392)")
_key("key.deserializer", F, None, _C, "callable(bytes) -> key; None: bytes as they came",
     _named(_DESERIALIZERS), nullable=True)
_key("value.deserializer", F, None, _C, "callable(bytes) -> value; None: bytes as they came",
     _named(_DESERIALIZERS), nullable=True)

del B, I, L, D, S, LIST, F

_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in _KEYS}
assert len(_BY_NAME) == len(_KEYS), "duplicate config key"


def config_keys(kind: str) -> list[ConfigKey]:
    """The keys a client of this kind accepts, in table order."""
    assert kind in KINDS, kind
    return [k for k in _BY_NAME.values() if kind in k.kinds]


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"must be true or false, got {raw!r}")


def _parse_int(raw: Any, bits_max: int) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"must be an integer, got {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"must be an integer, got {raw!r}") from None
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    else:
        raise ValueError(f"must be an integer, got {raw!r}")
    if not -bits_max - 1 <= value <= bits_max:
        raise ValueError(f"{value} does not fit in {'an int' if bits_max == _INT_MAX else 'a long'}")
    return value


def _convert(key: ConfigKey, raw: Any) -> Any:
    t = key.type
    if raw is None:
        if key.nullable:
            return None
        raise ValueError("must not be null")
    if t is ConfigType.BOOLEAN:
        return _parse_bool(raw)
    if t is ConfigType.INT:
        return _parse_int(raw, _INT_MAX)
    if t is ConfigType.LONG:
        return _parse_int(raw, _LONG_MAX)
    if t is ConfigType.DOUBLE:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"must be a number, got {raw!r}") from None
    if t is ConfigType.STRING:
        if key.name == "acks" and isinstance(raw, int) and not isinstance(raw, bool):
            return str(raw)
        if not isinstance(raw, str):
            raise ValueError(f"must be a string, got {type(raw).__name__}")
        return raw.strip()
    if t is ConfigType.LIST:
        if isinstance(raw, str):
            return tuple(x.strip() for x in raw.split(",") if x.strip())
        if isinstance(raw, (list, tuple)) and all(isinstance(x, str) for x in raw):
            return tuple(x.strip() for x in raw)
        raise ValueError(f"must be a list of strings or a comma-separated string, got {raw!r}")
    assert t is ConfigType.CALLABLE, t
    if callable(raw) or isinstance(raw, str):
        return raw  # names are resolved by the key's validator
    raise ValueError(f"must be a callable, got {type(raw).__name__}")


class ClientConfig(Mapping[str, Any]):
    """A validated configuration: every key of its kind, typed, defaults filled in.

    `config["linger.ms"]` is an int, `config["acks"]` one of -1/0/1,
    `config["bootstrap.servers"]` a tuple of "host:port". `is_set(key)` tells whether the
    user gave the key (some of Kafka's rules depend on it). Immutable."""

    __slots__ = ("kind", "_values", "_given")

    def __init__(self, kind: str, values: dict[str, Any], given: frozenset[str]) -> None:
        self.kind = kind
        self._values = values
        self._given = given

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"{key!r} is not a {self.kind} config key") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def is_set(self, key: str) -> bool:
        return key in self._given

    def given(self) -> dict[str, Any]:
        """Only the keys the user gave, typed."""
        return {k: self._values[k] for k in self._given}

    def __repr__(self) -> str:
        return f"ClientConfig({self.kind}, {self.given()!r})"


def parse_config(kind: str, props: Mapping[str, Any] | None = None, /, **overrides: Any
                 ) -> ClientConfig:
    """Validate `props` for a client of `kind` ("producer", "consumer", "admin").

    Keyword overrides use underscores for dots (`linger_ms=10`), a convenience for calls
    written in Python; both spellings name the same key."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    given: dict[str, Any] = dict(props or {})
    for k, v in overrides.items():
        given[k.replace("_", ".")] = v
    values: dict[str, Any] = {}
    for name, raw in given.items():
        if not isinstance(name, str):
            raise ConfigError(str(name), "config keys are strings")
        key = _BY_NAME.get(name)
        if key is None:
            raise ConfigError(name, f"unknown {kind} config key")
        if kind not in key.kinds:
            raise ConfigError(name, f"not a {kind} config key (it is for "
                              f"{' and '.join(sorted(key.kinds))} clients)")
        try:
            value = _convert(key, raw)
            if value is not None and key.validator is not None:
                value = key.validator(value)
        except (ValueError, TypeError) as e:
            raise ConfigError(name, str(e)) from None
        values[name] = value
    for key in config_keys(kind):
        if key.name not in values:
            default = key.default_for(kind)
            if default is _REQUIRED:
                raise ConfigError(key.name, f"is required for a {kind}")
            values[key.name] = default if key.name != "acks" else _acks(default)
    _cross_checks(kind, values, frozenset(given))
    return ClientConfig(kind, values, frozenset(given))


def _cross_checks(kind: str, values: dict[str, Any], given: frozenset[str]) -> None:
    """Kafka's postProcess rules, which look at several keys at once."""
    if kind == PRODUCER:
        # ProducerConfig.postProcessAndValidateIdempotenceConfigs (Kafka 3.2+): an explicit
        # enable.idempotence=true with conflicting keys is an error; the default one quietly
        # turns itself off instead.
        conflicts = []
        if values["acks"] != -1:
            conflicts.append(("acks", "must be all (-1) for an idempotent producer"))
        if values["max.in.flight.requests.per.connection"] > 5:
            conflicts.append(("max.in.flight.requests.per.connection",
                              "must be at most 5 for an idempotent producer"))
        if values["retries"] == 0:
            conflicts.append(("retries", "must be above 0 for an idempotent producer"))
        transactional = values["transactional.id"] is not None
        if transactional and values["transactional.id"] == "":
            raise ConfigError("transactional.id", "must not be empty (use None for none)")
        if transactional and not values["enable.idempotence"]:
            raise ConfigError("enable.idempotence",
                              "cannot be false with a transactional.id (it implies idempotence)")
        if values["enable.idempotence"] and conflicts:
            if "enable.idempotence" in given or transactional:
                raise ConfigError(*conflicts[0])
            values["enable.idempotence"] = False
        # ProducerConfig: delivery.timeout.ms >= linger.ms + request.timeout.ms.
        floor = values["linger.ms"] + values["request.timeout.ms"]
        if values["delivery.timeout.ms"] < floor:
            if "delivery.timeout.ms" in given:
                raise ConfigError("delivery.timeout.ms",
                                  f"must be at least linger.ms + request.timeout.ms = {floor}")
            values["delivery.timeout.ms"] = floor
    elif kind == CONSUMER:
        if values["group.id"] is None:
            # ConsumerConfig.maybeOverrideEnableAutoCommit: no group, nothing to commit to.
            if values["enable.auto.commit"] and "enable.auto.commit" in given:
                raise ConfigError("enable.auto.commit", "needs a group.id")
            values["enable.auto.commit"] = False
            if values["group.instance.id"] is not None:
                raise ConfigError("group.instance.id", "needs a group.id")
        elif values["group.id"] == "":
            raise ConfigError("group.id", "must not be empty (use None for no group)")
    if values["security.protocol"].startswith("SASL_"):
        if values["sasl.mechanism"] == "GSSAPI":
            raise ConfigError("sasl.mechanism", "GSSAPI (Kerberos) is not supported by Ketch's client: "
                                                "use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        if values["sasl.username"] is None and values["sasl.jaas.config"] is None:
            raise ConfigError("sasl.jaas.config", "SASL needs credentials: sasl.jaas.config "
                                                  "(or sasl.username and sasl.password)")
    if values["retry.backoff.max.ms"] < values["retry.backoff.ms"]:
        values["retry.backoff.max.ms"] = values["retry.backoff.ms"]  # as CommonClientConfigs
    if values["reconnect.backoff.max.ms"] < values["reconnect.backoff.ms"]:
        values["reconnect.backoff.max.ms"] = values["reconnect.backoff.ms"]
