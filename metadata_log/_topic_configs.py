"""Kafka's topic configs (``TopicConfig`` / ``LogConfig``): name, type, default, limits,
the broker keys that supply the default, and a line of documentation."""
from __future__ import annotations

from metadata_log._config_types import (
    INT64_MAX, ConfigDef, ConfigType as T, Synonym as S, at_least, between, non_empty_list_of,
    one_of,
)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

TOPIC_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("cleanup.policy", T.LIST, "delete", non_empty_list_of(*CLEANUP_POLICIES),
              synonyms=(S("log.cleanup.policy"),)),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES),
              synonyms=(S("compression.type"),)),
    ConfigDef("delete.retention.ms", T.LONG, "86400000", at_least(0),
              synonyms=(S("log.cleaner.delete.retention.ms"),)),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", at_least(0),
              synonyms=(S("log.segment.delete.delay.ms"),)),
    ConfigDef("flush.messages", T.LONG, str(INT64_MAX), at_least(1),
              synonyms=(S("log.flush.interval.messages"),)),
    ConfigDef("flush.ms", T.LONG, str(INT64_MAX), at_least(0),
              synonyms=(S("log.flush.interval.ms"), S("log.flush.scheduler.interval.ms"))),
    ConfigDef("index.interval.bytes", T.INT, "4096", at_least(0),
              synonyms=(S("log.index.interval.bytes"),)),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(INT64_MAX), at_least(1),
              synonyms=(S("log.cleaner.max.compaction.lag.ms"),)),
    ConfigDef("max.message.bytes", T.INT, "1048588", at_least(0),
              synonyms=(S("message.max.bytes"),)),
    ConfigDef("message.downconversion.enable", T.BOOLEAN, "true",
              synonyms=(S("log.message.downconversion.enable"),)),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              synonyms=(S("log.message.timestamp.after.max.ms"),)),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              synonyms=(S("log.message.timestamp.before.max.ms"),)),
    ConfigDef("message.timestamp.difference.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              synonyms=(S("log.message.timestamp.difference.max.ms"),)),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime", one_of(*TIMESTAMP_TYPES),
              synonyms=(S("log.message.timestamp.type"),)),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", between(0, 1),
              synonyms=(S("log.cleaner.min.cleanable.ratio"),)),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0", at_least(0),
              synonyms=(S("log.cleaner.min.compaction.lag.ms"),)),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1),
              synonyms=(S("min.insync.replicas"),)),
    ConfigDef("preallocate", T.BOOLEAN, "false", synonyms=(S("log.preallocate"),)),
    ConfigDef("retention.bytes", T.LONG, "-1", synonyms=(S("log.retention.bytes"),)),
    ConfigDef("retention.ms", T.LONG, "604800000", at_least(-1),
              synonyms=(S("log.retention.ms"), S("log.retention.minutes", 60_000),
                        S("log.retention.hours", 3_600_000))),
    # Kafka's pre-4.0 floor (LegacyRecord.RECORD_OVERHEAD_V0): tests use tiny segments.
    ConfigDef("segment.bytes", T.INT, "1073741824", at_least(14),
              synonyms=(S("log.segment.bytes"),)),
    ConfigDef("segment.index.bytes", T.INT, "10485760", at_least(4),
              synonyms=(S("log.index.size.max.bytes"),)),
    ConfigDef("segment.jitter.ms", T.LONG, "0", at_least(0),
              synonyms=(S("log.roll.jitter.ms"), S("log.roll.jitter.hours", 3_600_000))),
    ConfigDef("segment.ms", T.LONG, "604800000", at_least(1),
              synonyms=(S("log.roll.ms"), S("log.roll.hours", 3_600_000))),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false",
              synonyms=(S("unclean.leader.election.enable"),)),
)
