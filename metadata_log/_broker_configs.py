"""Kafka's broker configs (``KafkaConfig`` and the ``*Configs`` classes it gathers) and
Ketch's own ``ketch.*`` keys: name, type, default, limits, where each may be changed
(``DynamicScope``, Kafka's DynamicBrokerConfig), whether Ketch acts on it, and a line of
documentation.

NOTE: a first cut holding the keys Ketch already reads; the whole catalogue replaces it.
"""
from __future__ import annotations

from metadata_log._config_types import (
    INT64_MAX, ConfigDef, ConfigType as T, DynamicScope as D, at_least, between,
    non_empty_list_of, one_of,
)
from metadata_log._topic_configs import CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES

BROKER_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleanup.policy", T.LIST, "delete", non_empty_list_of(*CLEANUP_POLICIES),
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.flush.interval.messages", T.LONG, str(INT64_MAX), at_least(1), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.flush.interval.ms", T.LONG, None, at_least(0), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", one_of(*TIMESTAMP_TYPES),
              dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.retention.bytes", T.LONG, "-1", dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.retention.ms", T.LONG, None, at_least(-1), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.retention.minutes", T.INT, None, dynamic=D.READ_ONLY),
    ConfigDef("log.retention.hours", T.INT, "168", dynamic=D.READ_ONLY),
    ConfigDef("log.roll.ms", T.LONG, None, at_least(1), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.roll.hours", T.INT, "168", at_least(1), dynamic=D.READ_ONLY),
    ConfigDef("log.segment.bytes", T.INT, "1073741824", at_least(14), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.index.interval.bytes", T.INT, "4096", at_least(0), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.index.size.max.bytes", T.INT, "10485760", at_least(4), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, "86400000", at_least(0), dynamic=D.CLUSTER_WIDE),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, "0.5", between(0, 1), dynamic=D.CLUSTER_WIDE),
    ConfigDef("message.max.bytes", T.INT, "1048588", at_least(0), dynamic=D.CLUSTER_WIDE),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1), dynamic=D.CLUSTER_WIDE),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", dynamic=D.CLUSTER_WIDE),
    # Static keys (server.properties only).
    ConfigDef("node.id", T.INT, "-1"),
    ConfigDef("process.roles", T.LIST, ""),
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092"),
    ConfigDef("advertised.listeners", T.STRING, None),
    ConfigDef("controller.quorum.voters", T.LIST, ""),
    ConfigDef("controller.listener.names", T.STRING, None),
    ConfigDef("log.dirs", T.STRING, None),
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs"),
    ConfigDef("metadata.log.dir", T.STRING, None),
    ConfigDef("broker.rack", T.STRING, None),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, "2000"),
    ConfigDef("broker.session.timeout.ms", T.INT, "9000"),
    ConfigDef("replica.lag.time.max.ms", T.LONG, "30000"),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, "500"),
    ConfigDef("request.timeout.ms", T.INT, "30000"),
    ConfigDef("socket.request.max.bytes", T.INT, "104857600", at_least(1)),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, "true"),
    ConfigDef("num.partitions", T.INT, "1", at_least(1)),
    ConfigDef("default.replication.factor", T.INT, "1"),
    ConfigDef("offsets.topic.num.partitions", T.INT, "50", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, "3", at_least(1)),
    ConfigDef("offsets.retention.minutes", T.INT, "10080", at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, "3000"),
    ConfigDef("group.min.session.timeout.ms", T.INT, "6000"),
    ConfigDef("group.max.session.timeout.ms", T.INT, "1800000"),
    ConfigDef("group.max.size", T.INT, "2147483647", at_least(1)),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, "true"),
    ConfigDef("leader.imbalance.check.interval.seconds", T.LONG, "300"),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, "20971520"),
    ConfigDef("ketch.http.port", T.INT, "-1"),
    ConfigDef("ketch.event.loop", T.STRING, "asyncio", one_of("asyncio", "uvloop")),
    ConfigDef("ketch.cluster.secret", T.PASSWORD, None),
    ConfigDef("ketch.cluster.secret.file", T.STRING, None),
)
