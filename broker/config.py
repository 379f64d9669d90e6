"""A broker process's configuration, from Kafka's server.properties keys.

    node.id=101                      process.roles=broker
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
        or controller.quorum.bootstrap.servers=127.0.0.1:9093,127.0.0.1:9094 (KIP-853: the
        voters are learned from the quorum; when both are set the voters win, as in Kafka)
    listeners=PLAINTEXT://127.0.0.1:9092      (several: INTERNAL://...:9092,EXTERNAL://...:9192)
    advertised.listeners=PLAINTEXT://127.0.0.1:9092      (per name; defaults to listeners)
    listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL
    inter.broker.listener.name=INTERNAL (the listener brokers reach each other on; default:
        the first listener), with each listener's ssl.* / sasl.* keys (quorum/network.py)
    log.dirs=/var/ketch/broker-101   broker.rack=r1
        (several directories, comma-separated: JBOD; each gets its own meta.properties
        with a directory.id, and new partitions go to the one with the fewest)
    broker.heartbeat.interval.ms=2000  broker.session.timeout.ms=9000 (the controller's)
    replica.lag.time.max.ms=30000      socket.request.max.bytes=104857600
    auto.create.topics.enable=true     num.partitions=1   default.replication.factor=1
    min.insync.replicas=1              unclean.leader.election.enable=false
    offsets.topic.num.partitions=50    offsets.topic.replication.factor=3
    transaction.max.timeout.ms=900000  transactional.id.expiration.ms=604800000
    transaction.state.log.num.partitions=50  transaction.state.log.replication.factor=3
    transaction.state.log.min.isr=2    transaction.state.log.segment.bytes=104857600
    transaction.abort.timed.out.transaction.cleanup.interval.ms=10000
    transaction.remove.expired.transaction.cleanup.interval.ms=3600000
    transaction.partition.verification.enable=true   (KIP-890; dynamic, read where applied)
    replica.fetch.wait.max.ms=500      request.timeout.ms=30000
    log.segment.bytes, log.retention.ms, log.retention.bytes, log.cleanup.policy, ...
        (broker-wide defaults of the topic configs, Kafka's log.* names: resolved with the
        dynamic layers by metadata_log.config_layers, not here)
    ketch.http.port=-1                 (the HTTP admin API and /metrics; 0 = any free port, -1 = off)
    ketch.metrics.enable=true          ketch.metrics.group.lag.interval.ms=30000
    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
        (unset: every request allowed)    super.users=User:admin;User:ops
    allow.everyone.if.no.acl.found=false
    ketch.event.loop=uvloop            (or asyncio: the standard library's loop, which spends
                                        more CPU per request; both send large reads with sendfile)

The file is read through ``metadata_log.node_config`` (shared with controllers): every key
Kafka or Ketch knows is validated with its type and limits, Kafka's synonyms
(``log.retention.hours``, ``log.roll.hours``, ...) are accepted, an unknown key is logged
once as a warning, and unset keys take the catalogue's defaults. The static topic-config
defaults are also checked as the logs will apply them. Bad configuration raises
``ConfigError`` naming the key; the process refuses to start.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Mapping

from broker.controller_endpoints import parse_bootstrap_servers
from broker.log import LogConfig
from broker.log.config import LogConfigError
from metadata_log.authorizer import AuthorizerConfig
from clients.security.listeners import ListenerError, ListenerSpec, parse_listener_specs
from metadata_log.config_layers import ConfigLayers
from metadata_log.config_defs import TOPIC_CONFIGS
from metadata_log.image import EMPTY_IMAGE
from metadata_log.node_config import ConfigError, parse_voters, read_node_properties

__all__ = ["BrokerConfig", "ConfigError", "from_properties", "parse_voters"]

log = logging.getLogger(__name__)

# Ketch binds the loopback interface unless told otherwise (Kafka's default is every one).
DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The keys a broker process acts on at start-up; defaults are the catalogue's."""
    node_id: int
    controller_voters: dict[int, tuple[str, int]]     # {} when only bootstrap servers are given
    # The inter-broker listener (inter.broker.listener.name): what other brokers and this
    # broker's own clients connect to; every listener is in ``listeners``.
    listener_name: str
    listener_host: str
    listener_port: int
    advertised_host: str
    advertised_port: int
    log_dirs: tuple[str, ...]               # log.dirs, in order; at least one
    rack: str | None
    heartbeat_interval_ms: int
    replica_lag_time_max_ms: int
    socket_request_max_bytes: int
    auto_create_topics_enable: bool
    num_partitions: int
    default_replication_factor: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    replica_fetch_wait_max_ms: int
    fetch_session_cache_slots: int          # max.incremental.fetch.session.cache.slots
    rack_aware_reads: bool                  # replica.selector.class = RackAwareReplicaSelector
    partitions_per_describe_max: int        # max.request.partition.size.limit
    request_timeout_ms: int
    http_port: int
    event_loop: str
    metrics_enable: bool = True
    group_lag_interval_ms: int = 30_000
    # The transaction coordinator (broker/txn/), Kafka's keys and defaults.
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # authorizer.class.name, super.users, allow.everyone.if.no.acl.found; None: no authorizer.
    authorizer: AuthorizerConfig | None = None
    listeners: tuple[ListenerSpec, ...] = ()
    controller_bootstrap_servers: tuple[tuple[str, int], ...] = ()


# replica.selector.class (KIP-392): Kafka's two selectors, by their Java class names.
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _replica_selector(name: str | None) -> bool:
    """Whether consumers are sent to a replica in their rack."""
    if not name or name == LEADER_SELECTOR:
        return False
    if name == RACK_AWARE_SELECTOR:
        return True
    raise ConfigError(f"replica.selector.class: {name!r} is not a selector Ketch has "
                      f"(use {RACK_AWARE_SELECTOR} or {LEADER_SELECTOR})")


def from_properties(props: Mapping[str, str]) -> BrokerConfig:
    node = read_node_properties(props)
    for warning in node.warnings:
        log.warning("%s", warning)
    if not node.is_set("node.id"):
        raise ConfigError("node.id is required")
    node_id = node.get_int("node.id")
    roles = {r.strip() for r in props.get("process.roles", "broker").split(",") if r.strip()}
    if roles != {"broker"}:
        raise ConfigError(f"process.roles={props.get('process.roles')!r}: this process runs the "
                          "broker role only (controllers are their own processes)")
    try:
        bootstrap = parse_bootstrap_servers(props.get("controller.quorum.bootstrap.servers", ""))
    except ValueError as e:
        raise ConfigError(f"controller.quorum.bootstrap.servers: {e}") from None
    if (props.get("controller.quorum.voters") or "").strip() or not bootstrap:
        voters = parse_voters(props.get("controller.quorum.voters", ""), "controller.quorum.voters")
    else:
        voters = {}
    try:
        specs = parse_listener_specs(props, DEFAULT_LISTENERS)
    except ListenerError as e:
        raise ConfigError(str(e)) from None
    inter_broker_name = (props.get("inter.broker.listener.name") or "").strip().upper()
    inter_broker = next((s for s in specs if s.name == inter_broker_name), None) if inter_broker_name \
        else specs[0]
    if inter_broker is None:
        raise ConfigError(f"inter.broker.listener.name={inter_broker_name} is not in listeners")
    if inter_broker.security_protocol.uses_sasl:
        mechanism = (props.get("sasl.mechanism.inter.broker.protocol") or "").upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism or '(unset)'}: the "
                              f"inter-broker listener {inter_broker.name} is {inter_broker.security_protocol.name}; "
                              "set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 and that mechanism's "
                              f"listener.name.{inter_broker.name.lower()}.<mechanism>.sasl.jaas.config "
                              'with username="..." password="..."')
    name, host, port = inter_broker.name, inter_broker.host, inter_broker.port
    adv_host, adv_port = inter_broker.advertised_host, inter_broker.advertised_port
    log_dirs = tuple(os.path.normpath(d.strip()) for d in
                     props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip())
    if not log_dirs:
        raise ConfigError("log.dirs is required")
    try:
        authorizer = AuthorizerConfig.from_properties(props)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if len(set(log_dirs)) != len(log_dirs):
        raise ConfigError(f"log.dirs names a directory twice: {','.join(log_dirs)}")
    config = BrokerConfig(
        node_id=node_id, controller_voters=voters, listener_name=name,
        listener_host=host, listener_port=port, advertised_host=adv_host,
        advertised_port=adv_port, log_dirs=log_dirs, rack=node.get_str("broker.rack") or None,
        heartbeat_interval_ms=node.get_int("broker.heartbeat.interval.ms"),
        replica_lag_time_max_ms=node.get_int("replica.lag.time.max.ms"),
        socket_request_max_bytes=node.get_int("socket.request.max.bytes"),
        auto_create_topics_enable=node.get_bool("auto.create.topics.enable"),
        num_partitions=node.get_int("num.partitions"),
        default_replication_factor=node.get_int("default.replication.factor"),
        offsets_topic_num_partitions=node.get_int("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=node.get_int("offsets.topic.replication.factor"),
        replica_fetch_wait_max_ms=node.get_int("replica.fetch.wait.max.ms"),
        fetch_session_cache_slots=node.get_int("max.incremental.fetch.session.cache.slots"),
        rack_aware_reads=_replica_selector(node.get_str("replica.selector.class")),
        partitions_per_describe_max=node.get_int("max.request.partition.size.limit"),
        request_timeout_ms=node.get_int("request.timeout.ms"),
        http_port=node.get_int("ketch.http.port"),
        event_loop=(node.get_str("ketch.event.loop") or "uvloop").lower(),
        metrics_enable=node.get_bool("ketch.metrics.enable"),
        group_lag_interval_ms=node.get_int("ketch.metrics.group.lag.interval.ms"),
        transaction_max_timeout_ms=node.get_int("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=node.get_int("transactional.id.expiration.ms"),
        transaction_state_log_num_partitions=node.get_int("transaction.state.log.num.partitions"),
        transaction_state_log_replication_factor=node.get_int(
            "transaction.state.log.replication.factor"),
        transaction_state_log_min_isr=node.get_int("transaction.state.log.min.isr"),
        transaction_state_log_segment_bytes=node.get_int("transaction.state.log.segment.bytes"),
        transaction_abort_timed_out_transaction_cleanup_interval_ms=node.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        transaction_remove_expired_transaction_cleanup_interval_ms=node.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"),
        authorizer=authorizer,
        listeners=tuple(specs),
        controller_bootstrap_servers=tuple(bootstrap),
    )
    if config.node_id < 0:
        raise ConfigError("node.id must be >= 0")
    if config.default_replication_factor < 1:
        raise ConfigError("default.replication.factor must be >= 1")
    if config.heartbeat_interval_ms <= 0:
        raise ConfigError("broker.heartbeat.interval.ms must be positive")
    _check_static_topic_defaults(props, node_id)
    return config


def _check_static_topic_defaults(props: Mapping[str, str], node_id: int) -> None:
    """The broker-wide topic defaults (``log.segment.bytes``, ``log.retention.hours``, ...) as
    every log will apply them: a value the catalogue takes but a log cannot (a segment
    smaller than one batch) is refused here, naming the broker key that set it."""
    layers = ConfigLayers(EMPTY_IMAGE.configs, node_id, props)
    try:
        LogConfig.from_properties(layers.topic_config(""))
    except LogConfigError as e:
        topic_key = str(e).split("=")[0].split(" ")[0]
        entry = layers.topic_entry("", topic_key) if topic_key in TOPIC_CONFIGS else None
        set_by = next((s for s in (entry.synonyms if entry else ())
                       if s.name in props), None)
        where = f"{set_by.name}={props[set_by.name]}" if set_by else topic_key
        raise ConfigError(f"{where}: not a usable topic default ({e})") from None
