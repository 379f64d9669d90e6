"""Kafka's broker configs (``KafkaConfig`` and the ``*Configs`` classes it gathers) and
Ketch's own ``ketch.*`` keys: name, type, default, limits, where each may be changed
(``DynamicScope``), whether Ketch acts on it, and a line of documentation.

Where the facts come from
-------------------------
Names, types, defaults and limits are Kafka 3.9.0's: every key of ``KafkaConfig``'s
definition (``AbstractKafkaConfig.CONFIG_DEF``: server, KRaft, socket server, replication,
log, log cleaner, group and share coordinators, transactions, quorum, metrics, quotas,
security, delegation tokens, password encoder, remote log storage), Kafka-internal keys
included, plus the three dynamic-only broker quota keys of ``DynamicConfig.Broker``, plus the
two keys of Kafka's ``StandardAuthorizer`` (``super.users``,
``allow.everyone.if.no.acl.found``), plus the keys Kafka 4.0 development added (share
coordinator, ``remote.list.offsets.request.timeout.ms``). ZooKeeper's own keys
(``zookeeper.*``) are left out: Ketch runs in KRaft mode only, and Kafka 4.0 dropped them.
Keys 4.0 removed (``delegation.token.master.key``, ``offsets.commit.required.acks``,
``auto.include.jmx.reporter``, ``log.message.format.version``...) stay, because 3.9 accepts
them.

``dynamic`` follows Kafka's ``DynamicBrokerConfig``: a key is dynamic when one of its
reconfigurables lists it (SSL key and trust stores, listeners, SASL, connection limits, thread
pools, the log cleaner, the topic-config defaults named by ``ServerTopicConfigSynonyms``,
metric reporters, producer-state and remote-log keys); it is PER_BROKER when it is an SSL
or listener key other than ``max.connections``, ``max.connection.creation.rate`` and
``num.network.threads``. Everything else is READ_ONLY, including the hour and minute forms
of the retention and roll keys (``log.retention.hours``) and ``log.cleaner.enable``.

``applied`` is True for the keys Ketch's processes read (broker/config.py, quorum/config.py,
the group coordinator's config, LogManagerConfig, the log cleaner) and for every broker key
that supplies a topic config's default, when Ketch applies that topic config. The rest are
accepted, validated and shown, and their doc says why they change nothing in Ketch.
Five millisecond keys that Kafka defines without a limit (``log.retention.ms``,
``log.roll.ms``, ``log.roll.jitter.ms``, ``log.flush.interval.ms``,
``log.flush.scheduler.interval.ms``) carry their topic config's limit here: their value
becomes that topic config's default, which Kafka checks when it builds a log's config.
Docs are written for Ketch, one line each.
"""
from __future__ import annotations

import re

from metadata_log._config_types import (
    INT32_MAX, INT64_MAX, ConfigDef, ConfigType as T, DynamicScope as D, Validator, at_least,
    between, list_of, non_empty_list_of, one_of,
)
from metadata_log._topic_configs import (
    CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES, between_or, metadata_version,
)

_VOTER = re.compile(r"^\d+@(\[[0-9a-fA-F:.]+\]|[^:@\s]+):\d+$")
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^:@\s]+):\d+$")


def non_empty_string() -> Validator:
    """Unset (null) is allowed; an empty string is not (Kafka's NonEmptyString)."""
    def check(v: object) -> str | None:
        return "String may not be empty" if v == "" else None
    return check


def at_least_or(low: int, special: int) -> Validator:
    """At least ``low``, or ``special`` meaning "take it from another key"."""
    inner = at_least(low)

    def check(v: object) -> str | None:
        return None if v == special else (inner(v) and f"Value can be {special} or at least {low}")
    return check


def one_of_ignore_case(*allowed: str) -> Validator:
    inner = one_of(*allowed)

    def check(v: object) -> str | None:
        return inner(v.upper() if isinstance(v, str) else v)
    return check


def voter_list() -> Validator:
    """``id@host:port`` items (may be empty: controller.quorum.bootstrap.servers instead)."""
    def check(v: object) -> str | None:
        bad = [item for item in v if not _VOTER.match(item)]  # type: ignore[attr-defined]
        return f"{bad[0]!r} is not id@host:port" if bad else None
    return check


def host_port_list() -> Validator:
    def check(v: object) -> str | None:
        bad = [item for item in v if not _HOST_PORT.match(item)]  # type: ignore[attr-defined]
        return f"{bad[0]!r} is not host:port" if bad else None
    return check


BROKER_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    # -------- server: identity, roles, listeners
    ConfigDef("node.id", T.INT, "-1", None,
              "This node's id, unique among brokers and controllers of the cluster"),
    ConfigDef("broker.id", T.INT, "-1", None,
              "The older name of node.id; Ketch reads node.id only. Accepted; no effect in Ketch: "
              "not read yet", applied=False),
    ConfigDef("process.roles", T.LIST, "", list_of("broker", "controller"),
              "The roles this process runs: broker, controller (one per Ketch process)"),
    ConfigDef("broker.rack", T.STRING, None, None,
              "The rack of this broker, used to spread replicas across racks"),
    # Dynamic per broker in Kafka; read-only in Ketch, whose listener is bound at start-up
    # (refused, rather than accepted and silently not applied).
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092", None,
              "The addresses this process listens on, as NAME://host:port (change it in "
              "server.properties and restart: Ketch does not rebind listeners live)"),
    ConfigDef("advertised.listeners", T.STRING, None, None,
              "The addresses clients are told to connect to (defaults to listeners; change it "
              "in server.properties and restart)"),
    ConfigDef("listener.security.protocol.map", T.STRING,
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
              None,
              "Maps each listener name to its security protocol (PLAINTEXT, SSL, "
              "SASL_PLAINTEXT, SASL_SSL); a listener named after a protocol needs no entry. "
              "Read at start-up",
              dynamic=D.PER_BROKER),
    ConfigDef("inter.broker.listener.name", T.STRING, None, None,
              "The listener brokers use to reach each other (default: the first listener); "
              "PLAINTEXT only for now: Ketch's own client does not speak TLS or SASL yet"),
    ConfigDef("early.start.listeners", T.STRING, None, None,
              "Listeners opened before the authorizer is ready. Accepted; no effect in Ketch: "
              "Ketch has no authentication or authorization until the security issue lands",
              applied=False),
    ConfigDef("control.plane.listener.name", T.STRING, None, None,
              "A separate listener for controller-to-broker requests. Accepted; no effect in "
              "Ketch: a ZooKeeper-mode setting; Ketch runs in KRaft mode only", applied=False),
    ConfigDef("controller.listener.names", T.STRING, None, None,
              "The listener names controllers accept Kafka requests on (the first one is used)"),
    ConfigDef("broker.id.generation.enable", T.BOOLEAN, "true", None,
              "Whether ZooKeeper-mode brokers may get an id generated for them. Accepted; no "
              "effect in Ketch: a ZooKeeper-mode setting; Ketch runs in KRaft mode only",
              applied=False),
    ConfigDef("reserved.broker.max.id", T.INT, "1000", at_least(0),
              "The largest broker id not handed out by id generation. Accepted; no effect in "
              "Ketch: a ZooKeeper-mode setting; Ketch runs in KRaft mode only", applied=False),
    # -------- KRaft
    ConfigDef("controller.quorum.voters", T.LIST, "", voter_list(),
              "The metadata quorum's voters, as id@host:port, comma separated"),
    ConfigDef("controller.quorum.bootstrap.servers", T.LIST, "", host_port_list(),
              "Addresses a broker finds the metadata quorum at before it learns the voters "
              "from it (KIP-853); controller.quorum.voters wins when both are set"),
    ConfigDef("controller.quorum.append.linger.ms", T.INT, "25", None,
              "How long the quorum leader waits to batch metadata appends. Accepted; no effect in "
              "Ketch: Ketch's metadata quorum runs on pysyncobj with its own ketch.raft.* "
              "timings, not Kafka's KRaft client", applied=False),
    ConfigDef("controller.quorum.election.backoff.max.ms", T.INT, "1000", None,
              "Longest backoff before a new controller election. Accepted; no effect in Ketch: "
              "Ketch's metadata quorum runs on pysyncobj with its own ketch.raft.* timings, not "
              "Kafka's KRaft client", applied=False),
    ConfigDef("controller.quorum.election.timeout.ms", T.INT, "1000", None,
              "How long a voter waits without a leader before an election. Accepted; no effect in "
              "Ketch: Ketch's metadata quorum runs on pysyncobj with its own ketch.raft.* "
              "timings, not Kafka's KRaft client", applied=False),
    ConfigDef("controller.quorum.fetch.timeout.ms", T.INT, "2000", None,
              "How long a voter waits for the leader's fetch answers before suspecting it. "
              "Accepted; no effect in Ketch: Ketch's metadata quorum runs on pysyncobj with its "
              "own ketch.raft.* timings, not Kafka's KRaft client", applied=False),
    ConfigDef("controller.quorum.request.timeout.ms", T.INT, "2000", None,
              "Timeout of a request between quorum members. Accepted; no effect in Ketch: Ketch's "
              "metadata quorum runs on pysyncobj with its own ketch.raft.* timings, not Kafka's "
              "KRaft client", applied=False),
    ConfigDef("controller.quorum.retry.backoff.ms", T.INT, "20", None,
              "Backoff before a failed quorum request is retried. Accepted; no effect in Ketch: "
              "Ketch's metadata quorum runs on pysyncobj with its own ketch.raft.* timings, not "
              "Kafka's KRaft client", applied=False),
    ConfigDef("controller.socket.timeout.ms", T.INT, "30000", None,
              "Socket timeout of controller-to-broker channels. Accepted; no effect in Ketch: not "
              "read yet", applied=False),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, "2000", None,
              "How often a broker heartbeats to the active controller"),
    ConfigDef("broker.session.timeout.ms", T.INT, "9000", None,
              "How long the controller waits for a heartbeat before fencing a broker"),
    ConfigDef("initial.broker.registration.timeout.ms", T.INT, "60000", None,
              "How long a starting broker keeps trying to register before giving up. Accepted; no "
              "effect in Ketch: not read yet", applied=False),
    ConfigDef("metadata.log.dir", T.STRING, None, None,
              "Where a controller keeps the metadata log (defaults to the first log.dirs entry)"),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, "20971520", at_least(1),
              "Bytes of metadata records after which a new snapshot is taken"),
    ConfigDef("metadata.log.max.snapshot.interval.ms", T.LONG, "3600000", at_least(0),
              "Longest time between metadata snapshots when records arrive. Accepted; no effect "
              "in Ketch: Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.log.segment.bytes", T.INT, "1073741824", at_least(12),
              "Size of one metadata log segment. Accepted; no effect in Ketch: Ketch's metadata "
              "log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.log.segment.min.bytes", T.INT, "8388608", at_least(12),
              "Lower bound of metadata.log.segment.bytes (Kafka internal, for tests). Accepted; "
              "no effect in Ketch: Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.log.segment.ms", T.LONG, "604800000", None,
              "Age after which a metadata log segment is rolled. Accepted; no effect in Ketch: "
              "Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.max.retention.bytes", T.LONG, "104857600", None,
              "Metadata log bytes kept before old snapshots and segments are deleted. Accepted; "
              "no effect in Ketch: Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.max.retention.ms", T.LONG, "604800000", None,
              "Age after which old metadata snapshots and segments are deleted. Accepted; no "
              "effect in Ketch: Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("metadata.max.idle.interval.ms", T.INT, "500", at_least(0),
              "How often the active controller writes a no-op record when idle. Accepted; no "
              "effect in Ketch: Ketch's metadata log is pysyncobj's journal, compacted by "
              "metadata.log.max.record.bytes.between.snapshots only", applied=False),
    ConfigDef("eligible.leader.replicas.enable", T.BOOLEAN, "false", None,
              "Kafka 3.x's switch for eligible leader replicas (KIP-966). Accepted; no effect "
              "in Ketch, which (as Kafka 4) follows the eligible.leader.replicas.version "
              "feature, finalized at 1 when a cluster is created",
              applied=False),
    ConfigDef("unstable.api.versions.enable", T.BOOLEAN, "false", None,
              "Advertise API versions still under development (Kafka internal). Accepted; no "
              "effect in Ketch: Ketch's wire versions and metadata.version are fixed by its code",
              applied=False),
    ConfigDef("unstable.feature.versions.enable", T.BOOLEAN, "false", None,
              "Allow feature levels still under development (Kafka internal). Accepted; no effect "
              "in Ketch: Ketch's wire versions and metadata.version are fixed by its code",
              applied=False),
    ConfigDef("inter.broker.protocol.version", T.STRING, "3.9-IV0", metadata_version(),
              "The protocol version brokers speak to each other (superseded by metadata.version "
              "in KRaft). Accepted; no effect in Ketch: Ketch's wire versions and "
              "metadata.version are fixed by its code", applied=False),
    ConfigDef("server.max.startup.time.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Longest a broker may take to catch up with metadata at startup (Kafka internal). "
              "Accepted; no effect in Ketch: not read yet", applied=False),
    # -------- server: general
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, "true", None,
              "Whether Metadata requests for an unknown topic create it"),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, "true", None,
              "Whether the controller moves leadership back to preferred replicas"),
    ConfigDef("leader.imbalance.check.interval.seconds", T.LONG, "300", at_least(1),
              "How often the controller checks for leadership imbalance"),
    ConfigDef("leader.imbalance.per.broker.percentage", T.INT, "10", None,
              "Share of non-preferred leaders per broker that triggers a rebalance. Accepted; no "
              "effect in Ketch: not read yet", applied=False),
    ConfigDef("background.threads", T.INT, "10", at_least(1),
              "Threads for background jobs (log deletion, checkpoints). Accepted; no effect in "
              "Ketch: each Ketch process serves requests on one asyncio event loop, with no such "
              "thread pool", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("num.io.threads", T.INT, "8", at_least(1),
              "Threads that carry out requests. Accepted; no effect in Ketch: each Ketch process "
              "serves requests on one asyncio event loop, with no such thread pool",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("num.network.threads", T.INT, "3", at_least(1),
              "Threads that read requests and write responses. Accepted; no effect in Ketch: each "
              "Ketch process serves requests on one asyncio event loop, with no such thread pool",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, "1", at_least(1),
              "Threads per log directory that load and recover logs at startup. Accepted; no "
              "effect in Ketch: each Ketch process serves requests on one asyncio event loop, "
              "with no such thread pool", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("num.replica.fetchers", T.INT, "1", None,
              "Fetcher threads per source broker for follower replication. Accepted; no effect in "
              "Ketch: each Ketch process serves requests on one asyncio event loop, with no such "
              "thread pool", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("num.replica.alter.log.dirs.threads", T.INT, None, None,
              "Threads that move replicas between log directories. Accepted; no effect in Ketch: "
              "Ketch uses one log directory per broker and does not move replicas between "
              "directories", applied=False),
    ConfigDef("default.replication.factor", T.INT, "1", None,
              "Replication factor of topics created without one"),
    ConfigDef("num.partitions", T.INT, "1", at_least(1),
              "Partition count of topics created without one"),
    ConfigDef("delete.topic.enable", T.BOOLEAN, "true", None,
              "Whether topics may be deleted; Ketch always allows it. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("message.max.bytes", T.INT, "1048588", at_least(0),
              "Largest record batch a broker accepts; cluster default of max.message.bytes",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1),
              "Cluster default of the topic config min.insync.replicas", dynamic=D.CLUSTER_WIDE),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", None,
              "Cluster default of the topic config unclean.leader.election.enable",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("unclean.leader.election.interval.ms", T.LONG, "300000", at_least(1),
              "How often the controller looks for unclean elections to run (Kafka internal). "
              "Accepted; no effect in Ketch: not read yet", applied=False),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES),
              "Cluster default of the topic config compression.type", dynamic=D.CLUSTER_WIDE),
    ConfigDef("compression.gzip.level", T.INT, "-1", between_or(1, 9, -1),
              "Cluster default of the topic config compression.gzip.level",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("compression.lz4.level", T.INT, "9", between(1, 17),
              "Cluster default of the topic config compression.lz4.level", dynamic=D.CLUSTER_WIDE),
    ConfigDef("compression.zstd.level", T.INT, "3", between(-131072, 22),
              "Cluster default of the topic config compression.zstd.level",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("request.timeout.ms", T.INT, "30000", None,
              "Timeout of requests a broker sends to other nodes"),
    ConfigDef("fetch.max.bytes", T.INT, "57671680", at_least(1024),
              "Largest response to a consumer Fetch, whatever the request asks. Accepted; no "
              "effect in Ketch: not read yet", applied=False),
    ConfigDef("max.incremental.fetch.session.cache.slots", T.INT, "1000", at_least(0),
              "Incremental fetch sessions (KIP-227) a broker keeps, whatever their sizes (as "
              "Kafka's); 0 answers every fetch without a session"),
    ConfigDef("max.request.partition.size.limit", T.INT, "2000", at_least(1),
              "Most partitions one DescribeTopicPartitions response carries (a cursor pages "
              "the rest)"),
    ConfigDef("fetch.purgatory.purge.interval.requests", T.INT, "1000", None,
              "Requests between purges of the fetch purgatory. Accepted; no effect in Ketch: "
              "Ketch keeps no purgatories to purge; parked requests are removed when they "
              "complete", applied=False),
    ConfigDef("producer.purgatory.purge.interval.requests", T.INT, "1000", None,
              "Requests between purges of the produce purgatory. Accepted; no effect in Ketch: "
              "Ketch keeps no purgatories to purge; parked requests are removed when they "
              "complete", applied=False),
    ConfigDef("delete.records.purgatory.purge.interval.requests", T.INT, "1", None,
              "Requests between purges of the DeleteRecords purgatory. Accepted; no effect in "
              "Ketch: Ketch keeps no purgatories to purge; parked requests are removed when they "
              "complete", applied=False),
    ConfigDef("controlled.shutdown.enable", T.BOOLEAN, "true", None,
              "Whether a stopping broker first moves its leaderships away. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("controlled.shutdown.max.retries", T.INT, "3", None,
              "Attempts at a controlled shutdown (ZooKeeper mode). Accepted; no effect in Ketch: "
              "a ZooKeeper-mode setting; Ketch runs in KRaft mode only", applied=False),
    ConfigDef("controlled.shutdown.retry.backoff.ms", T.LONG, "5000", None,
              "Backoff between controlled shutdown attempts (ZooKeeper mode). Accepted; no effect "
              "in Ketch: a ZooKeeper-mode setting; Ketch runs in KRaft mode only", applied=False),
    ConfigDef("alter.config.policy.class.name", T.CLASS, None, None,
              "Class checking AlterConfigs requests. Accepted; no effect in Ketch: Ketch loads no "
              "Java plugin classes (policies, authorizers, callbacks)", applied=False),
    ConfigDef("create.topic.policy.class.name", T.CLASS, None, None,
              "Class checking CreateTopics requests. Accepted; no effect in Ketch: Ketch loads no "
              "Java plugin classes (policies, authorizers, callbacks)", applied=False),
    ConfigDef("authorizer.class.name", T.STRING, "", None,
              "Class authorizing requests (empty: none); Ketch has Kafka's "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log)"),
    ConfigDef("principal.builder.class", T.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
              None,
              "Class turning a connection into a KafkaPrincipal. Accepted; no effect in Ketch: "
              "Ketch has no authentication or authorization until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("replica.selector.class", T.STRING, None, None,
              "Which replica a consumer fetches from (KIP-392): "
              "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer with "
              "client.rack to an in-sync replica in its rack; unset or LeaderSelector: the leader"),
    ConfigDef("telemetry.max.bytes", T.INT, "1048576", at_least(1),
              "Largest client telemetry push (KIP-714) a broker accepts; a larger one gets "
              "TELEMETRY_TOO_LARGE"),
    # -------- socket server and quotas
    ConfigDef("socket.request.max.bytes", T.INT, "104857600", at_least(1),
              "Largest request a broker accepts; larger frames close the connection"),
    ConfigDef("socket.send.buffer.bytes", T.INT, "102400", None,
              "SO_SNDBUF of server sockets (-1: the OS default). Accepted; no effect in Ketch: "
              "Ketch leaves socket buffers and connection limits to the operating system and "
              "asyncio", applied=False),
    ConfigDef("socket.receive.buffer.bytes", T.INT, "102400", None,
              "SO_RCVBUF of server sockets (-1: the OS default). Accepted; no effect in Ketch: "
              "Ketch leaves socket buffers and connection limits to the operating system and "
              "asyncio", applied=False),
    ConfigDef("socket.listen.backlog.size", T.INT, "50", at_least(1),
              "Pending connection backlog of each listening socket. Accepted; no effect in Ketch: "
              "Ketch leaves socket buffers and connection limits to the operating system and "
              "asyncio", applied=False),
    ConfigDef("socket.connection.setup.timeout.ms", T.LONG, "10000", None,
              "First timeout for setting up an outgoing connection. Accepted; no effect in Ketch: "
              "not read yet", applied=False),
    ConfigDef("socket.connection.setup.timeout.max.ms", T.LONG, "30000", None,
              "Longest timeout for setting up an outgoing connection. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("connections.max.idle.ms", T.LONG, "600000", None,
              "Idle time after which a connection is closed. Accepted; no effect in Ketch: not "
              "read yet", applied=False),
    ConfigDef("connection.failed.authentication.delay.ms", T.INT, "100", at_least(0),
              "Delay before closing a connection that failed authentication (the answer goes "
              "out at once; only that connection waits): slows password guessing"),
    ConfigDef("max.connections", T.INT, str(INT32_MAX), at_least(0),
              "Most connections a broker accepts (per listener when prefixed). Accepted; no "
              "effect in Ketch: Ketch leaves socket buffers and connection limits to the "
              "operating system and asyncio", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("max.connections.per.ip", T.INT, str(INT32_MAX), at_least(0),
              "Most connections from one IP address. Accepted; no effect in Ketch: Ketch leaves "
              "socket buffers and connection limits to the operating system and asyncio",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("max.connections.per.ip.overrides", T.STRING, "", None,
              "Per-IP or per-host overrides of max.connections.per.ip. Accepted; no effect in "
              "Ketch: Ketch leaves socket buffers and connection limits to the operating system "
              "and asyncio", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("max.connection.creation.rate", T.INT, str(INT32_MAX), at_least(0),
              "Most new connections per second (per listener when prefixed). Accepted; no effect "
              "in Ketch: Ketch leaves socket buffers and connection limits to the operating "
              "system and asyncio", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("queued.max.requests", T.INT, "500", at_least(1),
              "Requests queued for I/O threads before network threads stop reading. Accepted; no "
              "effect in Ketch: each Ketch process serves requests on one asyncio event loop, "
              "with no such thread pool", applied=False),
    ConfigDef("queued.max.request.bytes", T.LONG, "-1", None,
              "Bytes of queued requests before reading stops (-1: no limit). Accepted; no effect "
              "in Ketch: each Ketch process serves requests on one asyncio event loop, with no "
              "such thread pool", applied=False),
    ConfigDef("quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for client quotas. Accepted; no effect in Ketch: Ketch enforces no "
              "client, controller or replication quotas", applied=False),
    ConfigDef("quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one client quota sample. Accepted; no effect in Ketch: Ketch enforces no "
              "client, controller or replication quotas", applied=False),
    ConfigDef("replication.quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for replication quotas. Accepted; no effect in Ketch: Ketch enforces "
              "no client, controller or replication quotas", applied=False),
    ConfigDef("replication.quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one replication quota sample. Accepted; no effect in Ketch: Ketch "
              "enforces no client, controller or replication quotas", applied=False),
    ConfigDef("alter.log.dirs.replication.quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for log directory move quotas. Accepted; no effect in Ketch: Ketch "
              "enforces no client, controller or replication quotas", applied=False),
    ConfigDef("alter.log.dirs.replication.quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one log directory move quota sample. Accepted; no effect in Ketch: Ketch "
              "enforces no client, controller or replication quotas", applied=False),
    ConfigDef("controller.quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for controller mutation quotas. Accepted; no effect in Ketch: Ketch "
              "enforces no client, controller or replication quotas", applied=False),
    ConfigDef("controller.quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one controller mutation quota sample. Accepted; no effect in Ketch: "
              "Ketch enforces no client, controller or replication quotas", applied=False),
    ConfigDef("client.quota.callback.class", T.CLASS, None, None,
              "Class deciding client quotas. Accepted; no effect in Ketch: Ketch enforces no "
              "client, controller or replication quotas", applied=False),
    ConfigDef("leader.replication.throttled.rate", T.LONG, str(INT64_MAX), at_least(0),
              "Bytes per second a leader sends to out-of-sync followers of the replicas named in "
              "leader.replication.throttled.replicas (KIP-73)", dynamic=D.CLUSTER_WIDE),
    ConfigDef("follower.replication.throttled.rate", T.LONG, str(INT64_MAX), at_least(0),
              "Bytes per second an out-of-sync follower fetches for the replicas named in "
              "follower.replication.throttled.replicas (KIP-73)", dynamic=D.CLUSTER_WIDE),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, str(INT64_MAX),
              at_least(0),
              "Bytes per second for moving replicas between log directories. Accepted; no effect "
              "in Ketch: Ketch uses one log directory per broker and does not move replicas "
              "between directories", dynamic=D.CLUSTER_WIDE, applied=False),
    # -------- log
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs", None,
              "The log directory, used when log.dirs is unset"),
    ConfigDef("log.dirs", T.STRING, None, None,
              "The log directories (Ketch uses the first one)"),
    ConfigDef("log.dir.failure.timeout.ms", T.LONG, "30000", at_least(1),
              "How long a broker waits for the controller after a log directory fails. Accepted; "
              "no effect in Ketch: not read yet", applied=False),
    ConfigDef("log.segment.bytes", T.INT, "1073741824", at_least(14),
              "Cluster default of the topic config segment.bytes", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.roll.ms", T.LONG, None, at_least(1),
              "Cluster default of the topic config segment.ms", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.roll.hours", T.INT, "168", at_least(1),
              "Cluster default of segment.ms in hours (log.roll.ms wins)"),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, at_least(0),
              "Cluster default of the topic config segment.jitter.ms", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.roll.jitter.hours", T.INT, "0", at_least(0),
              "Cluster default of segment.jitter.ms in hours (log.roll.jitter.ms wins)"),
    ConfigDef("log.retention.ms", T.LONG, None, at_least(-1),
              "Cluster default of the topic config retention.ms (-1: keep forever)",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.retention.minutes", T.INT, None, None,
              "Cluster default of retention.ms in minutes (log.retention.ms wins)"),
    ConfigDef("log.retention.hours", T.INT, "168", None,
              "Cluster default of retention.ms in hours (log.retention.ms and .minutes win)"),
    ConfigDef("log.retention.bytes", T.LONG, "-1", None,
              "Cluster default of the topic config retention.bytes", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.retention.check.interval.ms", T.LONG, "300000", at_least(1),
              "How often logs are checked for segments to delete"),
    ConfigDef("log.cleanup.policy", T.LIST, "delete", non_empty_list_of(*CLEANUP_POLICIES),
              "Cluster default of the topic config cleanup.policy", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.index.interval.bytes", T.INT, "4096", at_least(0),
              "Cluster default of the topic config index.interval.bytes", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.index.size.max.bytes", T.INT, "10485760", at_least(4),
              "Cluster default of the topic config segment.index.bytes", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.flush.interval.messages", T.LONG, str(INT64_MAX), at_least(1),
              "Cluster default of the topic config flush.messages", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.flush.interval.ms", T.LONG, None, at_least(0),
              "Cluster default of the topic config flush.ms (unset: "
              "log.flush.scheduler.interval.ms)", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Cluster default of flush.ms when log.flush.interval.ms is unset"),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, "60000", at_least(0),
              "How often the recovery point checkpoint is written"),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T.INT, "60000", at_least(0),
              "How often the log start offset checkpoint is written. Accepted; no effect in "
              "Ketch: Ketch writes a partition's log start offset with the partition itself when "
              "it moves", applied=False),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, "60000", at_least(0),
              "Cluster default of the topic config file.delete.delay.ms", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.preallocate", T.BOOLEAN, "false", None,
              "Cluster default of the topic config preallocate. Accepted; no effect in Ketch: "
              "Ketch does not preallocate segment files", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", one_of(*TIMESTAMP_TYPES),
              "Cluster default of the topic config message.timestamp.type",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.message.timestamp.difference.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Cluster default of the topic config message.timestamp.difference.max.ms",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Cluster default of the topic config message.timestamp.before.max.ms",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Cluster default of the topic config message.timestamp.after.max.ms",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.message.downconversion.enable", T.BOOLEAN, "true", None,
              "Cluster default of the topic config message.downconversion.enable. Accepted; no "
              "effect in Ketch: Ketch serves Fetch from v4 only (record batch v2), so nothing is "
              "ever down-converted", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.message.format.version", T.STRING, "3.0-IV1", metadata_version(),
              "Cluster default of the topic config message.format.version (ignored since 3.0). "
              "Accepted; no effect in Ketch: Ketch's wire versions and metadata.version are fixed "
              "by its code", applied=False),
    ConfigDef("log.local.retention.ms", T.LONG, "-2", at_least(-2),
              "Cluster default of the topic config local.retention.ms",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.local.retention.bytes", T.LONG, "-2", at_least(-2),
              "Cluster default of the topic config local.retention.bytes",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.initial.task.delay.ms", T.LONG, "30000", at_least(0),
              "Delay before a broker's first log maintenance tasks (Kafka internal). Accepted; no "
              "effect in Ketch: not read yet", applied=False),
    # -------- log cleaner
    ConfigDef("log.cleaner.enable", T.BOOLEAN, "true", None,
              "Whether the log cleaner runs (compacted topics need it)"),
    ConfigDef("log.cleaner.threads", T.INT, "1", at_least(0),
              "Threads that clean compacted logs. Accepted; no effect in Ketch: Ketch's cleaner "
              "is one task that cleans one log at a time", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, "15000", at_least(0),
              "Pause of the cleaner when no log needs cleaning", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, "134217728", None,
              "Memory for the cleaner's key map, across all cleaner threads",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.io.buffer.size", T.INT, "524288", at_least(0),
              "Memory for the cleaner's read and write buffers. Accepted; no effect in Ketch: "
              "Ketch's cleaner sizes its buffers itself and is not throttled",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.cleaner.io.buffer.load.factor", T.DOUBLE, "0.9", None,
              "Load factor of the cleaner's key map. Accepted; no effect in Ketch: Ketch's "
              "cleaner sizes its buffers itself and is not throttled",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.cleaner.io.max.bytes.per.second", T.DOUBLE, "1.7976931348623157E308", None,
              "Read plus write bytes per second the cleaner may use. Accepted; no effect in "
              "Ketch: Ketch's cleaner sizes its buffers itself and is not throttled",
              dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, "86400000", at_least(0),
              "Cluster default of the topic config delete.retention.ms", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, "0.5", between(0, 1),
              "Cluster default of the topic config min.cleanable.dirty.ratio",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, "0", at_least(0),
              "Cluster default of the topic config min.compaction.lag.ms", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, str(INT64_MAX), at_least(1),
              "Cluster default of the topic config max.compaction.lag.ms", dynamic=D.CLUSTER_WIDE),
    # -------- replication
    ConfigDef("replica.lag.time.max.ms", T.LONG, "30000", None,
              "How long a follower may lag before the leader drops it from the ISR"),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, "500", None,
              "Longest a follower's fetch waits at the leader for new data"),
    ConfigDef("replica.fetch.min.bytes", T.INT, "1", None,
              "Bytes a follower's fetch waits for before the leader answers. Accepted; no effect "
              "in Ketch: Ketch's replica fetcher takes its limits from its own defaults",
              applied=False),
    ConfigDef("replica.fetch.max.bytes", T.INT, "1048576", at_least(0),
              "Bytes a follower fetches per partition per request. Accepted; no effect in Ketch: "
              "Ketch's replica fetcher takes its limits from its own defaults", applied=False),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, "10485760", at_least(0),
              "Bytes a follower fetches per request. Accepted; no effect in Ketch: Ketch's "
              "replica fetcher takes its limits from its own defaults", applied=False),
    ConfigDef("replica.fetch.backoff.ms", T.INT, "1000", at_least(0),
              "Pause of a follower after a failed fetch. Accepted; no effect in Ketch: Ketch's "
              "replica fetcher takes its limits from its own defaults", applied=False),
    ConfigDef("replica.socket.timeout.ms", T.INT, "30000", None,
              "Socket timeout of follower fetch connections. Accepted; no effect in Ketch: "
              "Ketch's replica fetcher takes its limits from its own defaults", applied=False),
    ConfigDef("replica.socket.receive.buffer.bytes", T.INT, "65536", None,
              "SO_RCVBUF of follower fetch connections. Accepted; no effect in Ketch: Ketch "
              "leaves socket buffers and connection limits to the operating system and asyncio",
              applied=False),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T.LONG, "5000", None,
              "How often each broker writes its high watermark checkpoint. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    # -------- group coordinator
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, "3000", None,
              "How long the first rebalance of an empty group waits for more members"),
    ConfigDef("group.min.session.timeout.ms", T.INT, "6000", None,
              "Shortest session timeout a member may ask for"),
    ConfigDef("group.max.session.timeout.ms", T.INT, "1800000", None,
              "Longest session timeout a member may ask for"),
    ConfigDef("group.max.size", T.INT, str(INT32_MAX), at_least(1),
              "Most members one classic group may have"),
    ConfigDef("group.coordinator.rebalance.protocols", T.LIST, "classic,consumer",
              list_of("consumer", "classic", "share", "unknown"),
              "Group protocols the coordinator accepts (classic, consumer, share). Accepted; no "
              "effect in Ketch: its group coordinator always serves classic and KIP-848 "
              "consumer groups (no share groups)", applied=False),
    ConfigDef("group.coordinator.new.enable", T.BOOLEAN, "true", None,
              "Whether the KIP-848 group coordinator runs (Kafka internal). Accepted; no effect "
              "in Ketch: its one group coordinator serves both protocols", applied=False),
    ConfigDef("group.coordinator.threads", T.INT, "1", at_least(1),
              "Threads of the group coordinator. Accepted; no effect in Ketch: each Ketch process "
              "serves requests on one asyncio event loop, with no such thread pool",
              applied=False),
    ConfigDef("group.coordinator.append.linger.ms", T.INT, "10", at_least(0),
              "How long the group coordinator waits to batch its log writes. Accepted; no effect "
              "in Ketch: not read yet", applied=False),
    ConfigDef("group.consumer.assignors", T.LIST, "uniform,range", None,
              "Server-side assignors of KIP-848 consumer groups, the first the default: uniform "
              "and range (or Kafka's class names UniformAssignor and RangeAssignor)"),
    ConfigDef("group.consumer.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "The heartbeat interval the coordinator gives KIP-848 consumer group members"),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "Shortest heartbeat interval a consumer group may set. Accepted; no effect in "
              "Ketch: no per-group overrides (group configs) yet", applied=False),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", T.INT, "15000", at_least(1),
              "Longest heartbeat interval a consumer group may set. Accepted; no effect in "
              "Ketch: no per-group overrides (group configs) yet", applied=False),
    ConfigDef("group.consumer.session.timeout.ms", T.INT, "45000", at_least(1),
              "How long a KIP-848 consumer group member may go without heartbeating"),
    ConfigDef("group.consumer.min.session.timeout.ms", T.INT, "45000", at_least(1),
              "Shortest session timeout a consumer group may set. Accepted; no effect in Ketch: "
              "no per-group overrides (group configs) yet", applied=False),
    ConfigDef("group.consumer.max.session.timeout.ms", T.INT, "60000", at_least(1),
              "Longest session timeout a consumer group may set. Accepted; no effect in Ketch: "
              "no per-group overrides (group configs) yet", applied=False),
    ConfigDef("group.consumer.max.size", T.INT, str(INT32_MAX), at_least(1),
              "Most members one KIP-848 consumer group may have"),
    ConfigDef("group.consumer.migration.policy", T.STRING, "bidirectional",
              one_of_ignore_case('DISABLED', 'DOWNGRADE', 'UPGRADE', 'BIDIRECTIONAL'),
              "Online migration between classic and KIP-848 consumer groups: upgrade when a "
              "consumer-protocol member joins a classic group, downgrade when the last one "
              "leaves"),
    ConfigDef("offsets.topic.num.partitions", T.INT, "50", at_least(1),
              "Partitions of __consumer_offsets (set before it is created)"),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, "3", at_least(1),
              "Replication factor of __consumer_offsets"),
    ConfigDef("offsets.topic.segment.bytes", T.INT, "104857600", at_least(1),
              "Segment size of __consumer_offsets. Accepted; no effect in Ketch: not read yet",
              applied=False),
    ConfigDef("offsets.topic.compression.codec", T.INT, "0", None,
              "Compression codec id for offset commit writes (0: none). Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("offsets.retention.minutes", T.INT, "10080", at_least(1),
              "How long committed offsets of an empty group are kept"),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, "600000", at_least(1),
              "How often expired offsets are looked for. Accepted; no effect in Ketch: not read "
              "yet", applied=False),
    ConfigDef("offsets.load.buffer.size", T.INT, "5242880", at_least(1),
              "Read buffer used when a coordinator loads its partition. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("offsets.commit.timeout.ms", T.INT, "5000", at_least(1),
              "How long an offset commit waits for its write to replicate. Accepted; no effect in "
              "Ketch: not read yet", applied=False),
    ConfigDef("offsets.commit.required.acks", T.SHORT, "-1", None,
              "Acks for offset commit writes (deprecated; removed in Kafka 4.0). Accepted; no "
              "effect in Ketch: not read yet", applied=False),
    ConfigDef("offset.metadata.max.bytes", T.INT, "4096", None,
              "Largest metadata string of one committed offset. Accepted; no effect in Ketch: not "
              "read yet", applied=False),
    # -------- share groups
    ConfigDef("group.share.enable", T.BOOLEAN, "false", None,
              "Whether share groups are enabled (Kafka internal, early access). Accepted; no "
              "effect in Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.delivery.count.limit", T.INT, "5", between(2, 10),
              "Deliveries of a record before it is given up on. Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "Heartbeat interval of share group members. Accepted; no effect in Ketch: Ketch has "
              "no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.min.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "Shortest heartbeat interval a share group may set. Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.max.heartbeat.interval.ms", T.INT, "15000", at_least(1),
              "Longest heartbeat interval a share group may set. Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.session.timeout.ms", T.INT, "45000", at_least(1),
              "Session timeout of share group members. Accepted; no effect in Ketch: Ketch has no "
              "share groups (KIP-932)", applied=False),
    ConfigDef("group.share.min.session.timeout.ms", T.INT, "45000", at_least(1),
              "Shortest session timeout a share group may set. Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.max.session.timeout.ms", T.INT, "60000", at_least(1),
              "Longest session timeout a share group may set. Accepted; no effect in Ketch: Ketch "
              "has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.max.groups", T.SHORT, "10", between(1, 100),
              "Most share groups a cluster may have. Accepted; no effect in Ketch: Ketch has no "
              "share groups (KIP-932)", applied=False),
    ConfigDef("group.share.max.size", T.SHORT, "200", between(10, 1000),
              "Most members one share group may have. Accepted; no effect in Ketch: Ketch has no "
              "share groups (KIP-932)", applied=False),
    ConfigDef("group.share.partition.max.record.locks", T.INT, "200", between(100, 10000),
              "Most records in flight per share partition. Accepted; no effect in Ketch: Ketch "
              "has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.record.lock.duration.ms", T.INT, "30000", between(1000, 60000),
              "How long a delivered record stays locked to its consumer. Accepted; no effect in "
              "Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.min.record.lock.duration.ms", T.INT, "15000", between(1000, 30000),
              "Shortest record lock a share group may set. Accepted; no effect in Ketch: Ketch "
              "has no share groups (KIP-932)", applied=False),
    ConfigDef("group.share.max.record.lock.duration.ms", T.INT, "60000", between(30000, 3600000),
              "Longest record lock a share group may set. Accepted; no effect in Ketch: Ketch has "
              "no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.append.linger.ms", T.INT, "10", at_least(0),
              "How long the share coordinator waits to batch its writes (Kafka 4.0). Accepted; no "
              "effect in Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.load.buffer.size", T.INT, "5242880", at_least(1),
              "Read buffer used when the share coordinator loads (Kafka 4.0). Accepted; no effect "
              "in Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", T.INT, "500", at_least(0),
              "Share state updates between snapshots (Kafka 4.0). Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.state.topic.compression.codec", T.INT, "0", None,
              "Compression codec id of share state writes (Kafka 4.0). Accepted; no effect in "
              "Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.state.topic.min.isr", T.SHORT, "2", at_least(1),
              "min.insync.replicas of __share_group_state (Kafka 4.0). Accepted; no effect in "
              "Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.state.topic.num.partitions", T.INT, "50", at_least(1),
              "Partitions of __share_group_state (Kafka 4.0). Accepted; no effect in Ketch: Ketch "
              "has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.state.topic.replication.factor", T.SHORT, "3", at_least(1),
              "Replication factor of __share_group_state (Kafka 4.0). Accepted; no effect in "
              "Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.state.topic.segment.bytes", T.INT, "104857600", at_least(1),
              "Segment size of __share_group_state (Kafka 4.0). Accepted; no effect in Ketch: "
              "Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.threads", T.INT, "1", at_least(1),
              "Threads of the share coordinator (Kafka 4.0). Accepted; no effect in Ketch: Ketch "
              "has no share groups (KIP-932)", applied=False),
    ConfigDef("share.coordinator.write.timeout.ms", T.INT, "5000", at_least(1),
              "How long a share state write waits to replicate (Kafka 4.0). Accepted; no effect "
              "in Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.fetch.max.fetch.records", T.INT, str(INT32_MAX), None,
              "Most records one share fetch returns (Kafka 4.0 internal). Accepted; no effect in "
              "Ketch: Ketch has no share groups (KIP-932)", applied=False),
    ConfigDef("share.fetch.purgatory.purge.interval.requests", T.INT, "1000", None,
              "Requests between purges of the share fetch purgatory (Kafka 4.0). Accepted; no "
              "effect in Ketch: Ketch has no share groups (KIP-932)", applied=False),
    # -------- transactions and producer ids
    ConfigDef("transaction.max.timeout.ms", T.INT, "900000", at_least(1),
              "Longest transaction timeout a producer may ask for"),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, "10000",
              at_least(1),
              "How often timed-out transactions are aborted"),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, "3600000",
              at_least(1),
              "How often expired transactional ids are removed"),
    ConfigDef("transaction.state.log.load.buffer.size", T.INT, "5242880", at_least(1),
              "Read buffer used when a transaction coordinator loads. Accepted; no effect in "
              "Ketch: Ketch has no transaction coordinator (idempotent producers only)",
              applied=False),
    ConfigDef("transaction.state.log.min.isr", T.INT, "2", at_least(1),
              "min.insync.replicas of __transaction_state (capped by its replication factor)"),
    ConfigDef("transaction.state.log.num.partitions", T.INT, "50", at_least(1),
              "Partitions of __transaction_state (set before it is created)"),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, "3", at_least(1),
              "Replication factor of __transaction_state (capped by the live brokers)"),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, "104857600", at_least(1),
              "Segment size of __transaction_state"),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, "true", None,
              "Whether leaders verify a partition is in a transaction before a transactional "
              "write (KIP-890)", dynamic=D.CLUSTER_WIDE),
    ConfigDef("transactional.id.expiration.ms", T.INT, "604800000", at_least(1),
              "Idle time after which a transactional id is forgotten"),
    ConfigDef("producer.id.expiration.ms", T.INT, "86400000", at_least(1),
              "Idle time after which a producer id's state is dropped from partitions (no "
              "transaction of it open there; its last batch's timestamp that old)",
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("producer.id.expiration.check.interval.ms", T.INT, "600000", at_least(1),
              "How often expired producer ids are looked for (Kafka internal)"),
    # -------- security
    ConfigDef("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
              "Security protocol between brokers when inter.broker.listener.name is unset. "
              "Accepted; no effect in Ketch: Ketch listeners speak PLAINTEXT only until the "
              "security issue lands", applied=False),
    ConfigDef("security.providers", T.STRING, None, None,
              "Classes adding Java security providers. Accepted; no effect in Ketch: Ketch has no "
              "authentication or authorization until the security issue lands", applied=False),
    ConfigDef("super.users", T.STRING, None, None,
              "Principals the authorizer allows everything, separated by semicolons "
              "(StandardAuthorizer's key): User:admin;User:ops"),
    ConfigDef("allow.everyone.if.no.acl.found", T.BOOLEAN, "false", None,
              "Whether the authorizer allows resources that have no ACLs (StandardAuthorizer's "
              "key)"),
    ConfigDef("ssl.protocol", T.STRING, "TLSv1.3", None,
              "TLS protocol used to build the SSL context. Accepted; no effect in Ketch: Ketch "
              "listeners speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.provider", T.STRING, None, None,
              "Security provider of the SSL context. Accepted; no effect in Ketch: Ketch "
              "listeners speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.cipher.suites", T.LIST, "", None,
              "Allowed TLS cipher suites (empty: all the JVM allows). Accepted; no effect in "
              "Ketch: Ketch listeners speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.enabled.protocols", T.LIST, "TLSv1.2,TLSv1.3", None,
              "TLS protocol versions a listener accepts. Accepted; no effect in Ketch: Ketch "
              "listeners speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.client.auth", T.STRING, "none", one_of("required", "requested", "none"),
              "Whether TLS clients must, may or need not present a certificate (none, "
              "requested, required); the principal is then the certificate's subject", dynamic=D.PER_BROKER),
    ConfigDef("ssl.endpoint.identification.algorithm", T.STRING, "https", None,
              "Host name check of peer certificates (https, or empty for none). Accepted; no "
              "effect in Ketch: Ketch listeners speak PLAINTEXT only until the security issue "
              "lands", dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.engine.factory.class", T.CLASS, None, None,
              "Class that builds SSL engines. Accepted; no effect in Ketch: Ketch listeners speak "
              "PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.keystore.type", T.STRING, "JKS", None,
              "Format of the key store: Ketch reads PEM (JKS, the default name, is taken to "
              "mean a PEM file too)",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.keystore.location", T.STRING, None, None,
              "Path of a PEM file with the listener's certificate chain and private key",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.keystore.password", T.PASSWORD, None, None,
              "Password of the key store. Accepted; no effect in Ketch: Ketch listeners speak "
              "PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.keystore.key", T.PASSWORD, None, None,
              "Private key in PEM, instead of a key store file (with "
              "ssl.keystore.certificate.chain)",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.keystore.certificate.chain", T.PASSWORD, None, None,
              "Certificate chain in PEM, instead of a key store file (with ssl.keystore.key)",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.key.password", T.PASSWORD, None, None,
              "Password of the private key, if it is encrypted",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.truststore.type", T.STRING, "JKS", None,
              "Format of the trust store: Ketch reads PEM (JKS, the default name, is taken to "
              "mean a PEM file too)",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.truststore.location", T.STRING, None, None,
              "Path of a PEM file with the CAs that client certificates must chain to",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.truststore.password", T.PASSWORD, None, None,
              "Password of the trust store. Accepted; no effect in Ketch: Ketch listeners speak "
              "PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.truststore.certificates", T.PASSWORD, None, None,
              "Trusted CA certificates in PEM, instead of a trust store file",
              dynamic=D.PER_BROKER),
    ConfigDef("ssl.keymanager.algorithm", T.STRING, "SunX509", None,
              "Key manager factory algorithm. Accepted; no effect in Ketch: Ketch listeners speak "
              "PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.trustmanager.algorithm", T.STRING, "PKIX", None,
              "Trust manager factory algorithm. Accepted; no effect in Ketch: Ketch listeners "
              "speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.secure.random.implementation", T.STRING, None, None,
              "SecureRandom implementation for TLS. Accepted; no effect in Ketch: Ketch listeners "
              "speak PLAINTEXT only until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("ssl.principal.mapping.rules", T.STRING, "DEFAULT", None,
              "Rules mapping a certificate's distinguished name to a principal. Accepted; no "
              "effect in Ketch: Ketch listeners speak PLAINTEXT only until the security issue "
              "lands", applied=False),
    ConfigDef("ssl.allow.dn.changes", T.BOOLEAN, "false", None,
              "Whether a reloaded key store may change the certificate's distinguished name. "
              "Accepted; no effect in Ketch: Ketch listeners speak PLAINTEXT only until the "
              "security issue lands", applied=False),
    ConfigDef("ssl.allow.san.changes", T.BOOLEAN, "false", None,
              "Whether a reloaded key store may change the certificate's subject alternative "
              "names. Accepted; no effect in Ketch: Ketch listeners speak PLAINTEXT only until "
              "the security issue lands", applied=False),
    ConfigDef("sasl.enabled.mechanisms", T.LIST, "GSSAPI", None,
              "SASL mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
              "(unset: both SCRAM mechanisms, and PLAIN when a PLAIN user table is "
              "configured)",
              dynamic=D.PER_BROKER),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", None,
              "SASL mechanism brokers log in to each other with on a SASL inter-broker "
              "listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI is not one Ketch has)",
              dynamic=D.PER_BROKER),
    ConfigDef("sasl.mechanism.controller.protocol", T.STRING, "GSSAPI", None,
              "SASL mechanism used to reach controllers. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.jaas.config", T.PASSWORD, None, None,
              "JAAS login configuration, inline; a SASL listener's PLAIN users are its "
              "user_<name>=\"<password>\" options (listener.name.<l>.plain.sasl.jaas.config "
              "first)",
              dynamic=D.PER_BROKER),
    ConfigDef("sasl.client.callback.handler.class", T.CLASS, None, None,
              "Callback handler class of SASL clients. Accepted; no effect in Ketch: Ketch has no "
              "SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.server.callback.handler.class", T.CLASS, None, None,
              "Callback handler class of the SASL server. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.class", T.CLASS, None, None,
              "Login class for SASL. Accepted; no effect in Ketch: Ketch has no SASL "
              "authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.callback.handler.class", T.CLASS, None, None,
              "Callback handler class of SASL login. Accepted; no effect in Ketch: Ketch has no "
              "SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.connect.timeout.ms", T.INT, None, None,
              "Connect timeout of OAuth token requests. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.read.timeout.ms", T.INT, None, None,
              "Read timeout of OAuth token requests. Accepted; no effect in Ketch: Ketch has no "
              "SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.retry.backoff.ms", T.LONG, "100", None,
              "First backoff between OAuth token request attempts. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.login.retry.backoff.max.ms", T.LONG, "10000", None,
              "Longest backoff between OAuth token request attempts. Accepted; no effect in "
              "Ketch: Ketch has no SASL authentication until the security issue lands",
              applied=False),
    ConfigDef("sasl.login.refresh.window.factor", T.DOUBLE, "0.8", None,
              "Share of a credential's lifetime after which it is refreshed. Accepted; no effect "
              "in Ketch: Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.login.refresh.window.jitter", T.DOUBLE, "0.05", None,
              "Random jitter added to the refresh time, as a share of the lifetime. Accepted; no "
              "effect in Ketch: Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.login.refresh.min.period.seconds", T.SHORT, "60", None,
              "Shortest time between credential refreshes. Accepted; no effect in Ketch: Ketch "
              "has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.login.refresh.buffer.seconds", T.SHORT, "300", None,
              "Time kept before expiry when refreshing a credential. Accepted; no effect in "
              "Ketch: Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.service.name", T.STRING, None, None,
              "Kerberos principal name Kafka runs as. Accepted; no effect in Ketch: Ketch has no "
              "SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.kinit.cmd", T.STRING, "/usr/bin/kinit", None,
              "Path of the kinit command. Accepted; no effect in Ketch: Ketch has no SASL "
              "authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", T.DOUBLE, "0.8", None,
              "Share of a ticket's lifetime after which it is renewed. Accepted; no effect in "
              "Ketch: Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", T.DOUBLE, "0.05", None,
              "Random jitter added to the ticket renewal time. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.min.time.before.relogin", T.LONG, "60000", None,
              "Shortest time between Kerberos relogins. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.kerberos.principal.to.local.rules", T.LIST, "DEFAULT", None,
              "Rules mapping Kerberos principals to short names. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands",
              dynamic=D.PER_BROKER, applied=False),
    ConfigDef("sasl.server.max.receive.size", T.INT, "524288", None,
              "Largest SASL packet accepted before authentication. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", T.INT, "30", None,
              "Clock skew allowed when checking OAuth tokens. Accepted; no effect in Ketch: Ketch "
              "has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.expected.audience", T.LIST, None, None,
              "Audiences an OAuth token must name one of. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.expected.issuer", T.STRING, None, None,
              "Issuer an OAuth token must name. Accepted; no effect in Ketch: Ketch has no SASL "
              "authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", T.STRING, None, None,
              "Where the OAuth signing keys are fetched from. Accepted; no effect in Ketch: Ketch "
              "has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", T.LONG, "3600000", None,
              "How often the OAuth signing keys are refetched. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", T.LONG, "100", None,
              "First backoff between signing key fetch attempts. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", T.LONG, "10000", None,
              "Longest backoff between signing key fetch attempts. Accepted; no effect in Ketch: "
              "Ketch has no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.scope.claim.name", T.STRING, "scope", None,
              "Name of the OAuth token's scope claim. Accepted; no effect in Ketch: Ketch has no "
              "SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.sub.claim.name", T.STRING, "sub", None,
              "Name of the OAuth token's subject claim. Accepted; no effect in Ketch: Ketch has "
              "no SASL authentication until the security issue lands", applied=False),
    ConfigDef("sasl.oauthbearer.token.endpoint.url", T.STRING, None, None,
              "Where OAuth tokens are requested. Accepted; no effect in Ketch: Ketch has no SASL "
              "authentication until the security issue lands", applied=False),
    ConfigDef("connections.max.reauth.ms", T.LONG, "0", None,
              "Longest SASL session before the client must re-authenticate on its connection "
              "(KIP-368; 0: never); a connection whose session ended is closed at its next "
              "request"),
    ConfigDef("password.encoder.secret", T.PASSWORD, None, None,
              "Secret encrypting dynamic password configs. Accepted; no effect in Ketch: KRaft, "
              "and so Ketch, keeps dynamic passwords in the metadata log without this encoder (a "
              "ZooKeeper-mode setting)", applied=False),
    ConfigDef("password.encoder.old.secret", T.PASSWORD, None, None,
              "Previous password encoder secret, to re-encrypt with the new one. Accepted; no "
              "effect in Ketch: KRaft, and so Ketch, keeps dynamic passwords in the metadata log "
              "without this encoder (a ZooKeeper-mode setting)", applied=False),
    ConfigDef("password.encoder.cipher.algorithm", T.STRING, "AES/CBC/PKCS5Padding", None,
              "Cipher used to encrypt dynamic password configs. Accepted; no effect in Ketch: "
              "KRaft, and so Ketch, keeps dynamic passwords in the metadata log without this "
              "encoder (a ZooKeeper-mode setting)", applied=False),
    ConfigDef("password.encoder.iterations", T.INT, "4096", at_least(1024),
              "Key derivation iterations for dynamic password configs. Accepted; no effect in "
              "Ketch: KRaft, and so Ketch, keeps dynamic passwords in the metadata log without "
              "this encoder (a ZooKeeper-mode setting)", applied=False),
    ConfigDef("password.encoder.key.length", T.INT, "128", at_least(8),
              "Key length for dynamic password configs. Accepted; no effect in Ketch: KRaft, and "
              "so Ketch, keeps dynamic passwords in the metadata log without this encoder (a "
              "ZooKeeper-mode setting)", applied=False),
    ConfigDef("password.encoder.keyfactory.algorithm", T.STRING, None, None,
              "Key factory algorithm for dynamic password configs. Accepted; no effect in Ketch: "
              "KRaft, and so Ketch, keeps dynamic passwords in the metadata log without this "
              "encoder (a ZooKeeper-mode setting)", applied=False),
    ConfigDef("delegation.token.secret.key", T.PASSWORD, None, None,
              "Secret that signs delegation tokens. Accepted; no effect in Ketch: Ketch has no "
              "delegation tokens", applied=False),
    ConfigDef("delegation.token.master.key", T.PASSWORD, None, None,
              "Old name of delegation.token.secret.key (removed in Kafka 4.0). Accepted; no "
              "effect in Ketch: Ketch has no delegation tokens", applied=False),
    ConfigDef("delegation.token.max.lifetime.ms", T.LONG, "604800000", at_least(1),
              "Longest lifetime of a delegation token. Accepted; no effect in Ketch: Ketch has no "
              "delegation tokens", applied=False),
    ConfigDef("delegation.token.expiry.time.ms", T.LONG, "86400000", at_least(1),
              "Lifetime of a delegation token before it must be renewed. Accepted; no effect in "
              "Ketch: Ketch has no delegation tokens", applied=False),
    ConfigDef("delegation.token.expiry.check.interval.ms", T.LONG, "3600000", at_least(1),
              "How often expired delegation tokens are removed. Accepted; no effect in Ketch: "
              "Ketch has no delegation tokens", applied=False),
    # -------- metrics
    ConfigDef("metric.reporters", T.LIST, "", None,
              "Classes receiving the broker's metrics. Accepted; no effect in Ketch: Ketch "
              "exports its own metrics on the HTTP admin port (ketch.http.port), not through "
              "Kafka reporters", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("metrics.num.samples", T.INT, "2", at_least(1),
              "Samples kept to compute a metric. Accepted; no effect in Ketch: Ketch exports its "
              "own metrics on the HTTP admin port (ketch.http.port), not through Kafka reporters",
              applied=False),
    ConfigDef("metrics.recording.level", T.STRING, "INFO", None,
              "Highest metric recording level. Accepted; no effect in Ketch: Ketch exports its "
              "own metrics on the HTTP admin port (ketch.http.port), not through Kafka reporters",
              applied=False),
    ConfigDef("metrics.sample.window.ms", T.LONG, "30000", at_least(1),
              "Length of one metrics sample. Accepted; no effect in Ketch: Ketch exports its own "
              "metrics on the HTTP admin port (ketch.http.port), not through Kafka reporters",
              applied=False),
    ConfigDef("kafka.metrics.reporters", T.LIST, "", None,
              "Yammer metrics reporter classes. Accepted; no effect in Ketch: Ketch exports its "
              "own metrics on the HTTP admin port (ketch.http.port), not through Kafka reporters",
              applied=False),
    ConfigDef("kafka.metrics.polling.interval.secs", T.INT, "10", at_least(1),
              "Polling interval of Yammer metrics reporters. Accepted; no effect in Ketch: Ketch "
              "exports its own metrics on the HTTP admin port (ketch.http.port), not through "
              "Kafka reporters", applied=False),
    ConfigDef("auto.include.jmx.reporter", T.BOOLEAN, "true", None,
              "Whether the JMX reporter is always added (removed in Kafka 4.0). Accepted; no "
              "effect in Ketch: Ketch exports its own metrics on the HTTP admin port "
              "(ketch.http.port), not through Kafka reporters", applied=False),
    # -------- tiered storage
    ConfigDef("remote.log.storage.system.enable", T.BOOLEAN, "false", None,
              "Whether tiered storage (KIP-405) is enabled: on brokers, copy closed segments of "
              "remote.storage.enable topics to remote storage and serve fetches from it; on "
              "controllers, allow remote.storage.enable on topics (docs/tiered_storage.md)"),
    ConfigDef("remote.log.storage.manager.class.name", T.STRING, "filesystem",
              one_of("filesystem", "s3"),
              "The remote store: filesystem (ketch.remote.storage.fs.path, e.g. an HDFS or NFS "
              "mount) or s3 (ketch.remote.storage.s3.*)"),
    ConfigDef("remote.log.storage.manager.class.path", T.STRING, None, None,
              "Class path of the RemoteStorageManager. Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.storage.manager.impl.prefix", T.STRING, "rsm.config.",
              non_empty_string(),
              "Prefix of keys handed to the RemoteStorageManager. Accepted; no effect in Ketch: "
              "Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.metadata.manager.class.name", T.STRING,
              ("org.apache.kafka.server.log.remote.metadata.storage."
               "TopicBasedRemoteLogMetadataManager"),
              non_empty_string(),
              "RemoteLogMetadataManager implementation class. Accepted; no effect in Ketch: Ketch "
              "has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.metadata.manager.class.path", T.STRING, None, None,
              "Class path of the RemoteLogMetadataManager. Accepted; no effect in Ketch: Ketch "
              "has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.metadata.manager.impl.prefix", T.STRING, "rlmm.config.",
              non_empty_string(),
              "Prefix of keys handed to the RemoteLogMetadataManager. Accepted; no effect in "
              "Ketch: Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.metadata.manager.listener.name", T.STRING, None, non_empty_string(),
              "Listener the RemoteLogMetadataManager's clients connect to. Accepted; no effect in "
              "Ketch: Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.metadata.custom.metadata.max.bytes", T.INT, "128", at_least(0),
              "Largest custom metadata a remote segment may carry. Accepted; no effect in Ketch: "
              "Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", T.LONG, "1073741824", at_least(1),
              "Disk space for cached remote segment indexes. Accepted; no effect in Ketch: Ketch "
              "has no tiered (remote) log storage", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("remote.log.manager.thread.pool.size", T.INT, "10", at_least(1),
              "Threads copying, cleaning and fetching remote segments. Accepted; no effect in "
              "Ketch: Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.copier.thread.pool.size", T.INT, "-1", at_least_or(1, -1),
              "Threads copying segments to remote storage (-1: "
              "remote.log.manager.thread.pool.size). Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.expiration.thread.pool.size", T.INT, "-1", at_least_or(1, -1),
              "Threads deleting expired remote segments (-1: "
              "remote.log.manager.thread.pool.size). Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.task.interval.ms", T.LONG, "30000", at_least(1),
              "How often a leader looks for segments to copy to, and expire from, remote storage"),
    ConfigDef("remote.log.manager.task.retry.backoff.ms", T.LONG, "500", at_least(1),
              "First backoff after a remote storage operation failed"),
    ConfigDef("remote.log.manager.task.retry.backoff.max.ms", T.LONG, "30000", at_least(1),
              "Longest backoff after remote storage operations failed"),
    ConfigDef("remote.log.manager.task.retry.jitter", T.DOUBLE, "0.2", between(0, 0.5),
              "Jitter of remote log task backoffs (Kafka internal). Accepted; no effect in Ketch: "
              "Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.copy.max.bytes.per.second", T.LONG, str(INT64_MAX), at_least(1),
              "Bytes per second copied to remote storage. Accepted; no effect in Ketch: Ketch has "
              "no tiered (remote) log storage", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("remote.log.manager.copy.quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for the remote copy quota. Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.copy.quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one remote copy quota sample. Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.fetch.max.bytes.per.second", T.LONG, str(INT64_MAX), at_least(1),
              "Bytes per second read from remote storage. Accepted; no effect in Ketch: Ketch has "
              "no tiered (remote) log storage", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("remote.log.manager.fetch.quota.window.num", T.INT, "11", at_least(1),
              "Samples kept for the remote fetch quota. Accepted; no effect in Ketch: Ketch has "
              "no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.manager.fetch.quota.window.size.seconds", T.INT, "1", at_least(1),
              "Length of one remote fetch quota sample. Accepted; no effect in Ketch: Ketch has "
              "no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.reader.threads", T.INT, "10", at_least(1),
              "Threads reading from remote storage for fetches. Accepted; no effect in Ketch: "
              "Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.log.reader.max.pending.tasks", T.INT, "100", at_least(1),
              "Remote reads that may wait for a reader thread. Accepted; no effect in Ketch: "
              "Ketch has no tiered (remote) log storage", applied=False),
    ConfigDef("remote.fetch.max.wait.ms", T.INT, "500", at_least(1),
              "Longest a fetch waits for remote data. Accepted; no effect in Ketch: Ketch has no "
              "tiered (remote) log storage", dynamic=D.CLUSTER_WIDE, applied=False),
    ConfigDef("remote.list.offsets.request.timeout.ms", T.LONG, "30000", at_least(1),
              "Timeout of ListOffsets answered from remote storage (Kafka 4.0). Accepted; no "
              "effect in Ketch: Ketch has no tiered (remote) log storage",
              dynamic=D.CLUSTER_WIDE, applied=False),
    # -------- Ketch's own keys (server.properties only)
    ConfigDef("ketch.cluster.id", T.STRING, None, None,
              "The cluster's id: a broker formats new storage with it and refuses data of "
              "another cluster; controllers refuse brokers of another cluster"),
    ConfigDef("ketch.cluster.secret", T.PASSWORD, None, None,
              "Password of the controllers' Raft (pysyncobj) transport; this or "
              "ketch.cluster.secret.file is required"),
    ConfigDef("ketch.cluster.secret.file", T.STRING, None, None,
              "File holding ketch.cluster.secret, relative to the properties file"),
    ConfigDef("ketch.raft.voters", T.LIST, None, voter_list(),
              "pysyncobj addresses of the voters as id@host:port (unset: each "
              "controller.quorum.voters port plus ketch.raft.port.offset)"),
    ConfigDef("ketch.raft.port.offset", T.INT, "10000", between(-65535, 65535),
              "Added to a voter's controller port to get its Raft port when ketch.raft.voters "
              "is unset"),
    ConfigDef("ketch.raft.election.timeout.min.ms", T.INT, "150", at_least(1),
              "Shortest Raft election timeout of a controller (below ...max.ms)"),
    ConfigDef("ketch.raft.election.timeout.max.ms", T.INT, "300", at_least(1),
              "Longest Raft election timeout of a controller"),
    ConfigDef("ketch.raft.pre.vote.enable", T.BOOLEAN, "true", None,
              "A controller whose election timeout expires first asks the others whether "
              "they would vote for it (KIP-996 pre-vote) and campaigns only with a majority"),
    ConfigDef("ketch.broker.disconnect.fence.ms", T.INT, "250", at_least_or(0, -1),
              "How long after the connection a broker heartbeats on closes (its process "
              "died) the active controller fences it unless it heartbeats again; -1 waits "
              "for broker.session.timeout.ms"),
    ConfigDef("ketch.controller.write.timeout.ms", T.INT, "5000", at_least(1),
              "How long a metadata write may wait to commit before the request gets "
              "REQUEST_TIMED_OUT (the write may still commit)"),
    ConfigDef("ketch.controller.poll.interval.ms", T.INT, "250", at_least(1),
              "How often a controller's shell polls its core for due timers"),
    ConfigDef("ketch.http.port", T.INT, "-1", between(-1, 65535),
              "Port of the node's HTTP admin API, /metrics and status page (0: any free "
              "port, -1: off)"),
    ConfigDef("ketch.http.authentication", T.STRING, "none", one_of("none", "basic"),
              "basic: calls to the HTTP admin API need Basic credentials of a SCRAM user of "
              "the metadata log or a PLAIN user of the node's JAAS table, and the ACLs the "
              "equivalent Kafka API needs (clients/http_api/auth.py)"),
    ConfigDef("ketch.http.open.status", T.BOOLEAN, "true", None,
              "With ketch.http.authentication=basic, /, /metrics, /v1/openapi.json and the "
              "probes still answer without credentials"),
    ConfigDef("ketch.http.open.reads", T.BOOLEAN, "false", None,
              "With ketch.http.authentication=basic, GETs need no credentials; only calls "
              "that change state do"),
    ConfigDef("ketch.http.ssl.enabled", T.BOOLEAN, "false", None,
              "Serve the HTTP admin API over TLS: ketch.http.ssl.keystore.location (and the "
              "other ssl.* keys, prefixed), falling back to the node's own ssl.* keys"),
    ConfigDef("ketch.metrics.enable", T.BOOLEAN, "true", None,
              "Count requests, records and bytes per API and topic on the request path "
              "(the gauges read at scrape time are always served)"),
    ConfigDef("ketch.metrics.group.lag.interval.ms", T.INT, "30000", at_least(100),
              "How often a broker computes the lag of the consumer groups it coordinates "
              "for kafka_consumergroup_lag"),
    ConfigDef("ketch.event.loop", T.STRING, "uvloop", one_of("asyncio", "uvloop"),
              "The broker's event loop: uvloop (a dependency of Ketch; less CPU per request), "
              "or asyncio's own; large fetch reads are sent with sendfile under either"),
    ConfigDef("ketch.delayed.delivery.enable", T.BOOLEAN, "true", None,
              "Park records whose ketch.deliver.at / ketch.deliver.after header is in the "
              "future and append them to their partition when due (docs/delayed_delivery.md)"),
    ConfigDef("ketch.delayed.delivery.max.delay.ms", T.LONG, "2592000000", at_least(1),
              "The furthest a delivery time may lie ahead; further ones are refused with "
              "INVALID_RECORD (default 30 days)"),
    ConfigDef("ketch.delayed.delivery.topic.partitions", T.INT, "8", at_least(1),
              "Partitions of __ketch_delayed_delivery when it is created (fixed afterwards)"),
    ConfigDef("ketch.delayed.delivery.topic.replication.factor", T.INT, "3", at_least(1),
              "Replication factor of __ketch_delayed_delivery (capped by the live brokers)"),
    ConfigDef("ketch.delayed.delivery.batch.max.records", T.INT, "500", at_least(1),
              "Most records one delivery transaction of a store partition moves"),
    # -------- tiered storage: the remote stores and the metadata topic (docs/tiered_storage.md)
    ConfigDef("rlmm.config.remote.log.metadata.topic.num.partitions", T.INT, "50", at_least(1),
              "Partitions of __remote_log_metadata when it is created (fixed afterwards)"),
    ConfigDef("rlmm.config.remote.log.metadata.topic.replication.factor", T.SHORT, "3",
              at_least(1),
              "Replication factor of __remote_log_metadata (capped by the live brokers)"),
    ConfigDef("ketch.remote.storage.fs.path", T.STRING, "", None,
              "remote.log.storage.manager.class.name=filesystem: the directory segments are "
              "copied to (an HDFS or NFS mount shared by the brokers, or a local path)"),
    ConfigDef("ketch.remote.storage.s3.endpoint", T.STRING, "", None,
              "s3: the S3-compatible endpoint, e.g. http://127.0.0.1:9000"),
    ConfigDef("ketch.remote.storage.s3.bucket", T.STRING, "", None, "s3: the bucket"),
    ConfigDef("ketch.remote.storage.s3.region", T.STRING, "us-east-1", None, "s3: the region"),
    ConfigDef("ketch.remote.storage.s3.access.key", T.STRING, "", None, "s3: the access key id"),
    ConfigDef("ketch.remote.storage.s3.secret.key", T.PASSWORD, "", None,
              "s3: the secret access key"),
    ConfigDef("ketch.remote.storage.s3.prefix", T.STRING, "", None,
              "s3: a prefix of every object name (optional)"),
    ConfigDef("ketch.delayed.delivery.park.timeout.ms", T.INT, "30000", at_least(1),
              "How long a Produce waits for its delayed records to be parked before it is "
              "answered REQUEST_TIMED_OUT"),
)
