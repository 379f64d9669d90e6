"""A broker process's configuration, from Kafka's server.properties keys.

    node.id=101                      process.roles=broker
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
    listeners=PLAINTEXT://127.0.0.1:9092
    advertised.listeners=PLAINTEXT://127.0.0.1:9092      (defaults to listeners)
    log.dirs=/var/ketch/broker-101   broker.rack=r1
    broker.heartbeat.interval.ms=2000  broker.session.timeout.ms=9000 (the controller's)
    replica.lag.time.max.ms=30000      socket.request.max.bytes=104857600
    auto.create.topics.enable=true     num.partitions=1   default.replication.factor=1
    min.insync.replicas=1              unclean.leader.election.enable=false
    offsets.topic.num.partitions=50    offsets.topic.replication.factor=3
    replica.fetch.wait.max.ms=500      request.timeout.ms=30000
    log.segment.bytes, log.retention.ms, log.retention.bytes, log.cleanup.policy, ...
        (broker-wide defaults of the topic configs, Kafka's log.* names: resolved with the
        dynamic layers by metadata_log.config_layers, not here)
    ketch.http.port=-1                 (the HTTP admin API and /metrics; 0 = any free port, -1 = off)
    ketch.event.loop=asyncio           (or uvloop: faster request handling, but its loop has no
                                        sendfile, so fetches copy log data through Python)

Bad configuration raises ``ConfigError`` naming the key; the process refuses to start.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from clients.properties import parse_listeners

__all__ = ["BrokerConfig", "ConfigError", "from_properties", "parse_voters"]


class ConfigError(ValueError):
    """A broker configuration that cannot work; the message names the key."""




def parse_voters(value: str, key: str = "controller.quorum.voters") -> dict[int, tuple[str, int]]:
    voters: dict[int, tuple[str, int]] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, sep, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.strip().isdigit() or not port.isdigit():
            raise ConfigError(f"{key}: {item!r} is not id@host:port")
        voters[int(node)] = (host.strip("[]"), int(port))
    if not voters:
        raise ConfigError(f"{key} is required")
    return voters


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int
    controller_voters: dict[int, tuple[str, int]]
    listener_name: str
    listener_host: str
    listener_port: int
    advertised_host: str
    advertised_port: int
    log_dir: str
    rack: str | None = None
    heartbeat_interval_ms: int = 2000
    replica_lag_time_max_ms: int = 30_000
    socket_request_max_bytes: int = 100 * 1024 * 1024
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    replica_fetch_wait_max_ms: int = 500
    request_timeout_ms: int = 30_000
    http_port: int = -1
    event_loop: str = "asyncio"


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    value = props.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not an integer") from None


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{key}={value!r} is not true or false")
    return value.strip().lower() == "true"


def from_properties(props: Mapping[str, str]) -> BrokerConfig:
    if "node.id" not in props:
        raise ConfigError("node.id is required")
    node_id = _int(props, "node.id", -1)
    roles = {r.strip() for r in props.get("process.roles", "broker").split(",") if r.strip()}
    if roles != {"broker"}:
        raise ConfigError(f"process.roles={props.get('process.roles')!r}: this process runs the "
                          "broker role only (controllers are their own processes)")
    voters = parse_voters(props.get("controller.quorum.voters", ""))
    try:
        listeners = parse_listeners(props.get("listeners", "PLAINTEXT://127.0.0.1:9092"))
        advertised = parse_listeners(props.get("advertised.listeners", "")) or listeners
    except ValueError as e:
        raise ConfigError(f"listeners: {e}") from None
    name = next(iter(listeners))
    host, port = listeners[name]
    adv_host, adv_port = advertised.get(name, (host, port))
    if adv_host in ("0.0.0.0", ""):
        raise ConfigError("advertised.listeners must name a host clients can reach")
    log_dir = props.get("log.dirs", props.get("log.dir", "")).split(",")[0].strip()
    if not log_dir:
        raise ConfigError("log.dirs is required")
    config = BrokerConfig(
        node_id=node_id, controller_voters=voters, listener_name=name,
        listener_host=host, listener_port=port, advertised_host=adv_host,
        advertised_port=adv_port, log_dir=log_dir, rack=props.get("broker.rack") or None,
        heartbeat_interval_ms=_int(props, "broker.heartbeat.interval.ms", 2000),
        replica_lag_time_max_ms=_int(props, "replica.lag.time.max.ms", 30_000),
        socket_request_max_bytes=_int(props, "socket.request.max.bytes", 100 * 1024 * 1024),
        auto_create_topics_enable=_bool(props, "auto.create.topics.enable", True),
        num_partitions=_int(props, "num.partitions", 1),
        default_replication_factor=_int(props, "default.replication.factor", 1),
        offsets_topic_num_partitions=_int(props, "offsets.topic.num.partitions", 50),
        offsets_topic_replication_factor=_int(props, "offsets.topic.replication.factor", 3),
        replica_fetch_wait_max_ms=_int(props, "replica.fetch.wait.max.ms", 500),
        request_timeout_ms=_int(props, "request.timeout.ms", 30_000),
        http_port=_int(props, "ketch.http.port", -1),
        event_loop=props.get("ketch.event.loop", "asyncio").strip().lower(),
    )
    if config.node_id < 0:
        raise ConfigError("node.id must be >= 0")
    if config.num_partitions < 1 or config.default_replication_factor < 1:
        raise ConfigError("num.partitions and default.replication.factor must be >= 1")
    if config.event_loop not in ("asyncio", "uvloop"):
        raise ConfigError(f"ketch.event.loop={config.event_loop!r}: asyncio or uvloop")
    if config.socket_request_max_bytes <= 0 or config.heartbeat_interval_ms <= 0:
        raise ConfigError("socket.request.max.bytes and broker.heartbeat.interval.ms must be positive")
    return config
