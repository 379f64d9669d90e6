"""A controller process's configuration, read from Kafka's server.properties keys.

Kafka keys understood:

    node.id=1
    process.roles=controller                   # only the controller role runs here
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
                                               # the voters a new quorum starts with; a
                                               # controller not among them joins (KIP-853:
                                               # an observer until AddRaftVoter adds it)
    listeners=CONTROLLER://127.0.0.1:9093      # this node's Kafka-protocol listener
    controller.listener.names=CONTROLLER       # optional; the first listener otherwise
    metadata.log.dir=/var/ketch/meta           # or the first entry of log.dirs
    metadata.log.max.record.bytes.between.snapshots=20971520
    broker.session.timeout.ms, broker.heartbeat.interval.ms, num.partitions,
    default.replication.factor, unclean.leader.election.enable,
    auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds

Ketch keys:

    ketch.cluster.secret=...          # required (or ketch.cluster.secret.file=PATH): the
                                      # password of pysyncobj's transport, see quorum/raft.py
    ketch.raft.voters=1@127.0.0.1:19093,...
                                      # pysyncobj's own addresses, one per voter. Raft does
                                      # not run over the Kafka listener: pysyncobj has its
                                      # own TCP transport. When absent, each voter's Raft
                                      # address is its controller.quorum.voters host with
                                      # port + ketch.raft.port.offset (default 10000:
                                      # 9093 -> 19093). Bind: this node's Raft address only.
    ketch.raft.port.offset=10000
    ketch.cluster.id=...              # optional: brokers must present it when registering
    ketch.controller.write.timeout.ms=5000
                                      # a metadata write not committed by then is answered
                                      # REQUEST_TIMED_OUT (the record may still commit)
    ketch.controller.poll.interval.ms=250
    ketch.raft.election.timeout.min.ms=150, ketch.raft.election.timeout.max.ms=300
    ketch.raft.pre.vote.enable=true   # ask before campaigning (KIP-996, quorum/prevote.py)
    ketch.http.port=-1                # the HTTP admin API, /metrics and the status page
                                      # (0: any free port, -1: off; ketch up sets one)

The file is read through ``metadata_log.node_config`` (shared with brokers): every key Kafka
or Ketch knows is validated with its type and limits, an unknown key is logged once as a
warning, and unset keys take the catalogue's defaults. Bad configuration raises
``ConfigError`` with the key at fault: the process refuses to start.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping

from clients.properties import load_properties, parse_listeners
from clients.security.listeners import (
    ListenerError, ListenerSpec, SecurityProtocol, parse_listener_specs,
)
from metadata_log.authorizer import AuthorizerConfig
from metadata_log.node_config import ConfigError, parse_voters, read_node_properties

__all__ = ["ConfigError", "ControllerProcessConfig", "from_properties", "load", "parse_voters"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerProcessConfig:
    node_id: int
    voters: dict[int, tuple[str, int]]          # node id -> Kafka controller listener
    raft_voters: dict[int, tuple[str, int]]     # node id -> pysyncobj address (this node's too)
    listener_host: str
    listener_port: int
    metadata_log_dir: str
    cluster_secret: str
    cluster_id: str | None
    write_timeout_ms: int
    poll_interval_ms: int
    snapshot_bytes: int
    election_timeout_min_ms: int
    election_timeout_max_ms: int
    pre_vote: bool
    raft_port_offset: int = 10000               # a voter's Raft port when only its listener is named
    # Kafka controller settings handed to quorum.controller.ControllerConfig.
    controller_settings: dict[str, object] = field(default_factory=dict)
    http_port: int = -1                         # ketch.http.port: admin API, /metrics, status page
    # The server.properties as given: the static layer of the effective topic configs
    # the HTTP API's health view resolves (min.insync.replicas).
    properties: Mapping[str, str] = field(default_factory=dict)
    # authorizer.class.name, super.users, allow.everyone.if.no.acl.found; None: no authorizer.
    authorizer: AuthorizerConfig | None = None
    # The first of controller.listener.names, with its security protocol (Kafka's
    # listener.security.protocol.map; PLAINTEXT when unmapped).
    listener: ListenerSpec = ListenerSpec("CONTROLLER", "127.0.0.1", 0, SecurityProtocol.PLAINTEXT,
                                          "127.0.0.1", 0)

    @property
    def raft_address(self) -> str:
        host, port = self.raft_voters[self.node_id]
        return f"{host}:{port}"

    def raft_addresses(self) -> dict[int, str]:
        """The configured voters' Raft addresses (without this node when it joins)."""
        return {nid: f"{h}:{p}" for nid, (h, p) in self.raft_voters.items() if nid in self.voters}

    @property
    def joining(self) -> bool:
        return self.node_id not in self.voters


def from_properties(props: Mapping[str, str], base_dir: str = ".") -> ControllerProcessConfig:
    node = read_node_properties(props)
    for warning in node.warnings:
        log.warning("%s", warning)
    if not node.is_set("node.id"):
        raise ConfigError("node.id is required")
    node_id = node.get_int("node.id")
    roles = {r.strip() for r in props.get("process.roles", "controller").split(",") if r.strip()}
    if roles != {"controller"}:
        raise ConfigError(f"process.roles={props.get('process.roles')!r}: this process runs "
                          "the controller role only (run brokers as their own processes)")
    voters = parse_voters(props.get("controller.quorum.voters", ""), "controller.quorum.voters")
    # A controller not among the voters joins the quorum (KIP-853): it follows the log as
    # an observer until `ketch quorum add-controller` (AddRaftVoter) makes it a voter.
    if "ketch.raft.voters" in props:
        raft_voters = parse_voters(props["ketch.raft.voters"], "ketch.raft.voters")
        if set(raft_voters) != set(voters):
            raise ConfigError("ketch.raft.voters must name the same nodes as controller.quorum.voters")
    else:
        offset = node.get_int("ketch.raft.port.offset")
        raft_voters = {n: (h, p + offset) for n, (h, p) in voters.items()}
        if any(not 0 < p < 65536 for _, p in raft_voters.values()):
            raise ConfigError("ketch.raft.port.offset moves a Raft port out of range")
    if len(set(raft_voters.values())) != len(raft_voters):
        raise ConfigError("two voters share a Raft address")
    try:
        listeners = parse_listeners(props.get("listeners", ""))
    except ValueError as e:
        raise ConfigError(f"listeners: {e}") from None
    if not listeners:
        raise ConfigError("listeners is required, e.g. CONTROLLER://127.0.0.1:9093")
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
    name = names[0] if names else next(iter(listeners))
    if name not in listeners:
        raise ConfigError(f"controller.listener.names names {name}, which is not in listeners")
    host, port = listeners[name]
    if node_id not in raft_voters:
        own_raft = (host, port + node.get_int("ketch.raft.port.offset"))
        if own_raft in raft_voters.values():
            raise ConfigError(f"this controller's Raft address {own_raft[0]}:{own_raft[1]} is a voter's")
        raft_voters = {**raft_voters, node_id: own_raft}
    try:
        listener = next(s for s in parse_listener_specs(props, "", frozenset({name}))
                        if s.name == name)
    except ListenerError as e:
        raise ConfigError(str(e)) from None
    log_dir = props.get("metadata.log.dir") or props.get("log.dirs", "").split(",")[0].strip()
    if not log_dir:
        raise ConfigError("metadata.log.dir (or log.dirs) is required")
    secret = props.get("ketch.cluster.secret")
    if not secret and props.get("ketch.cluster.secret.file"):
        path = os.path.join(base_dir, props["ketch.cluster.secret.file"])
        try:
            with open(path) as f:
                secret = f.read().strip()
        except OSError as e:
            raise ConfigError(f"ketch.cluster.secret.file: {e}") from None
    if not secret:
        raise ConfigError("ketch.cluster.secret (or ketch.cluster.secret.file) is required: "
                          "the Raft transport unpickles what it receives and must authenticate it")
    settings: dict[str, object] = {}
    for key, attr in (("broker.session.timeout.ms", "broker_session_timeout_ms"),
                      ("broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms"),
                      ("ketch.broker.disconnect.fence.ms", "broker_disconnect_fence_ms"),
                      ("num.partitions", "num_partitions"),
                      ("default.replication.factor", "default_replication_factor")):
        if key in props:
            settings[attr] = node.get_int(key)
    for key, attr in (("unclean.leader.election.enable", "unclean_leader_election_enable"),
                      ("auto.leader.rebalance.enable", "auto_leader_rebalance_enable"),
                      ("remote.log.storage.system.enable", "remote_log_storage_system_enable")):
        if key in props:
            settings[attr] = node.get_bool(key)
    if "leader.imbalance.check.interval.seconds" in props:
        settings["leader_imbalance_check_interval_ms"] = 1000 * node.get_int(
            "leader.imbalance.check.interval.seconds")
    cluster_id = props.get("ketch.cluster.id") or None
    if cluster_id is not None:
        settings["cluster_id"] = cluster_id
    election_min = node.get_int("ketch.raft.election.timeout.min.ms")
    election_max = node.get_int("ketch.raft.election.timeout.max.ms")
    if not 0 < election_min < election_max:
        raise ConfigError("ketch.raft.election.timeout.min.ms must be below ...max.ms")
    try:
        authorizer = AuthorizerConfig.from_properties(props)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    config = ControllerProcessConfig(
        authorizer=authorizer,
        node_id=node_id, voters=voters, raft_voters=raft_voters,
        listener_host=host, listener_port=port, listener=listener,
        metadata_log_dir=os.path.join(base_dir, log_dir),
        cluster_secret=secret, cluster_id=cluster_id,
        write_timeout_ms=node.get_int("ketch.controller.write.timeout.ms"),
        poll_interval_ms=node.get_int("ketch.controller.poll.interval.ms"),
        snapshot_bytes=node.get_int("metadata.log.max.record.bytes.between.snapshots"),
        election_timeout_min_ms=election_min, election_timeout_max_ms=election_max,
        pre_vote=node.get_bool("ketch.raft.pre.vote.enable"),
        raft_port_offset=node.get_int("ketch.raft.port.offset"),
        controller_settings=settings,
        http_port=node.get_int("ketch.http.port"),
        properties=dict(props),
    )
    if config.write_timeout_ms <= 0 or config.poll_interval_ms <= 0 or config.snapshot_bytes <= 0:
        raise ConfigError("timeouts, intervals and snapshot bytes must be positive")
    return config


def load(path: str) -> ControllerProcessConfig:
    try:
        props = load_properties(path)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    return from_properties(props, base_dir=os.path.dirname(os.path.abspath(path)))
