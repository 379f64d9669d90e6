"""Kafka's topic configs (``TopicConfig`` / ``LogConfig``): name, type, default, limits,
the broker keys that supply the default, and a line of documentation.

Names, types, defaults and limits are Kafka 3.9.0's (read from its ``LogConfig`` definition,
which Kafka 4.0 keeps apart from dropping ``message.format.version`` and the down-conversion
and timestamp-difference keys; they stay here because 3.9 clients and tools still send them).
A config whose part Ketch does not have is accepted and shown, ``applied=False``, and its doc
says why.
"""
from __future__ import annotations

import re

from metadata_log._config_types import (
    INT64_MAX, ConfigDef, ConfigType as T, Synonym as S, Validator, at_least, between,
    non_empty_list_of, one_of,
)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

# Kafka's MetadataVersion names as of 3.9 (inter.broker.protocol.version and the
# deprecated message format keys accept them, or their release prefix such as "3.0").
METADATA_VERSIONS = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1",
    "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
    "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0",
    "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2",
    "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1",
    "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
    "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0",
    "4.0-IV0", "4.0-IV1",
)
_RELEASES = frozenset(v.split("-IV")[0] for v in METADATA_VERSIONS)
_THROTTLED_REPLICA = re.compile(r"^\d+:\d+$")


def metadata_version() -> Validator:
    """A MetadataVersion name ("3.0-IV1") or a release ("3.0"), as Kafka's parser takes."""
    def check(v: object) -> str | None:
        ok = v in METADATA_VERSIONS or v in _RELEASES
        return None if ok else f"String must be one of: {', '.join(METADATA_VERSIONS)}"
    return check


def between_or(low: int, high: int, special: int) -> Validator:
    """In [low, high], or the one out-of-range value that means "the codec's default"."""
    inner = between(low, high)

    def check(v: object) -> str | None:
        return None if v == special else inner(v)
    return check


def throttled_replicas() -> Validator:
    """``*`` or ``partition:broker`` pairs (Kafka's ThrottledReplicaListValidator)."""
    def check(v: object) -> str | None:
        items = v if isinstance(v, list) else [v]
        if items == ["*"] or all(_THROTTLED_REPLICA.match(str(i)) for i in items):
            return None
        return ("Must be the wildcard (*) or a list of replicas in the form "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


# Why a config has no effect in Ketch (the doc says so: see ConfigDef.applied).
_NO_TIERED = "Accepted; no effect in Ketch: it does not implement this tiered storage option."
_LEVEL = "Used when the broker recompresses (the topic's compression.type is not producer)."



TOPIC_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("cleanup.policy", T.LIST, "delete", non_empty_list_of(*CLEANUP_POLICIES),
              "How old segments are discarded: delete (by retention), compact (keep the last "
              "record per key), or both", synonyms=(S("log.cleanup.policy"),)),
    ConfigDef("compression.gzip.level", T.INT, "-1", between_or(1, 9, -1),
              f"gzip level when compression.type=gzip (-1: the codec's default). {_LEVEL}",
              synonyms=(S("compression.gzip.level"),)),
    ConfigDef("compression.lz4.level", T.INT, "9", between(1, 17),
              f"lz4 level when compression.type=lz4. {_LEVEL}",
              synonyms=(S("compression.lz4.level"),)),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES),
              "Codec batches are stored in; producer keeps the producer's codec, others are "
              "recompressed on append", synonyms=(S("compression.type"),)),
    ConfigDef("compression.zstd.level", T.INT, "3", between(-131072, 22),
              f"zstd level when compression.type=zstd. {_LEVEL}",
              synonyms=(S("compression.zstd.level"),)),
    ConfigDef("delete.retention.ms", T.LONG, "86400000", at_least(0),
              "How long a compacted topic keeps tombstones (and transaction markers) after "
              "cleaning, so slow consumers still see deletes",
              synonyms=(S("log.cleaner.delete.retention.ms"),)),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", at_least(0),
              "How long a deleted segment's files linger before they are removed from disk",
              synonyms=(S("log.segment.delete.delay.ms"),)),
    ConfigDef("flush.messages", T.LONG, str(INT64_MAX), at_least(1),
              "Records appended before the log is fsynced (the default leaves it to the OS "
              "and to replication)", synonyms=(S("log.flush.interval.messages"),)),
    ConfigDef("flush.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Age of the oldest unflushed append after which the log is fsynced",
              synonyms=(S("log.flush.interval.ms"), S("log.flush.scheduler.interval.ms"))),
    ConfigDef("follower.replication.throttled.replicas", T.LIST, "", throttled_replicas(),
              "Replicas (partition:broker, or *) whose fetching, while out of the ISR, is held to "
              "follower.replication.throttled.rate (KIP-73)"),
    ConfigDef("index.interval.bytes", T.INT, "4096", at_least(0),
              "Log bytes between two offset index entries",
              synonyms=(S("log.index.interval.bytes"),)),
    # Issue 21's mirror topics (metadata_log.mirror_topics says what they mean).
    ConfigDef("ketch.mirror.link", T.STRING, "", None,
              "The cluster link this topic mirrors its source topic through (empty: not a "
              "mirror). A mirror is read-only while its state is active or stopped"),
    ConfigDef("ketch.mirror.source.topic", T.STRING, "", None,
              "The mirrored topic's name on the source cluster (empty: this topic's name)"),
    ConfigDef("ketch.mirror.state", T.STRING, "active", one_of("active", "stopped", "promoted"),
              "active: the partition leaders fetch from the source (read-only); stopped: not "
              "fetching, read-only; promoted: a normal writable topic that keeps its history"),
    ConfigDef("leader.replication.throttled.replicas", T.LIST, "", throttled_replicas(),
              "Replicas (partition:broker, or *) that, as leader, send to out-of-sync followers at "
              "most leader.replication.throttled.rate (KIP-73)"),
    ConfigDef("local.retention.bytes", T.LONG, "-2", at_least(-2),
              "Bytes a tiered partition keeps on local disk once copied to remote storage "
              "(-2: retention.bytes)", synonyms=(S("log.local.retention.bytes"),)),
    ConfigDef("local.retention.ms", T.LONG, "-2", at_least(-2),
              "Time a tiered partition keeps a segment on local disk once copied to remote "
              "storage (-2: retention.ms)", synonyms=(S("log.local.retention.ms"),)),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(INT64_MAX), at_least(1),
              "Longest a record may stay uncompacted; an older dirty segment makes its log due "
              "for cleaning", synonyms=(S("log.cleaner.max.compaction.lag.ms"),)),
    ConfigDef("max.message.bytes", T.INT, "1048588", at_least(0),
              "Largest record batch (after compression) the topic accepts",
              synonyms=(S("message.max.bytes"),)),
    ConfigDef("message.downconversion.enable", T.BOOLEAN, "true", None,
              "Whether old consumers may be sent down-converted batches. Accepted; no effect "
              "in Ketch: it serves Fetch from v4 (record batch v2), so nothing is down-converted",
              synonyms=(S("log.message.downconversion.enable"),), applied=False),
    ConfigDef("message.format.version", T.STRING, "3.0-IV1", metadata_version(),
              "Record format the topic is written in; ignored since Kafka 3.0 and gone in 4.0. "
              "Accepted; no effect in Ketch: it always writes record batch v2",
              synonyms=(S("log.message.format.version"),), applied=False),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "How far in the future a CreateTime timestamp may be before the batch is refused",
              synonyms=(S("log.message.timestamp.after.max.ms"),)),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "How far in the past a CreateTime timestamp may be before the batch is refused",
              synonyms=(S("log.message.timestamp.before.max.ms"),)),
    ConfigDef("message.timestamp.difference.max.ms", T.LONG, str(INT64_MAX), at_least(0),
              "Deprecated bound on a CreateTime timestamp's distance from the broker's clock "
              "(superseded by the before/after keys)",
              synonyms=(S("log.message.timestamp.difference.max.ms"),)),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime", one_of(*TIMESTAMP_TYPES),
              "Whether batches keep the producer's timestamp (CreateTime) or get the broker's "
              "(LogAppendTime)", synonyms=(S("log.message.timestamp.type"),)),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", between(0, 1),
              "Share of a compacted log that must be uncleaned before the cleaner takes it",
              synonyms=(S("log.cleaner.min.cleanable.ratio"),)),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0", at_least(0),
              "Youngest a record may be and still be compacted away",
              synonyms=(S("log.cleaner.min.compaction.lag.ms"),)),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1),
              "In-sync replicas an acks=all write needs; fewer gives NOT_ENOUGH_REPLICAS",
              synonyms=(S("min.insync.replicas"),)),
    ConfigDef("preallocate", T.BOOLEAN, "false", None,
              "Whether new segment files are preallocated. Accepted; no effect in Ketch: it "
              "does not preallocate segment files", synonyms=(S("log.preallocate"),),
              applied=False),
    ConfigDef("remote.log.copy.disable", T.BOOLEAN, "false", None,
              f"Stop copying segments of a tiered topic to remote storage. {_NO_TIERED}",
              applied=False),
    ConfigDef("remote.log.delete.on.disable", T.BOOLEAN, "false", None,
              f"Delete remote segments when tiering is turned off. {_NO_TIERED}", applied=False),
    ConfigDef("remote.storage.enable", T.BOOLEAN, "false", None,
              "Whether the topic's closed segments are copied to remote storage (KIP-405); "
              "refused while the controllers' remote.log.storage.system.enable is false"),
    ConfigDef("retention.bytes", T.LONG, "-1", None,
              "Largest a partition may grow before its oldest segments are deleted (-1: no "
              "limit)", synonyms=(S("log.retention.bytes"),)),
    ConfigDef("retention.ms", T.LONG, "604800000", at_least(-1),
              "Age after which a segment is deleted, by its newest timestamp (-1: keep forever)",
              synonyms=(S("log.retention.ms"), S("log.retention.minutes", 60_000),
                        S("log.retention.hours", 3_600_000))),
    # Kafka's pre-4.0 floor (LegacyRecord.RECORD_OVERHEAD_V0): tests use tiny segments.
    ConfigDef("segment.bytes", T.INT, "1073741824", at_least(14),
              "Size at which the active segment is rolled",
              synonyms=(S("log.segment.bytes"),)),
    ConfigDef("segment.index.bytes", T.INT, "10485760", at_least(4),
              "Size of a segment's offset and time indexes; a full index rolls the segment",
              synonyms=(S("log.index.size.max.bytes"),)),
    ConfigDef("segment.jitter.ms", T.LONG, "0", at_least(0),
              "Random amount subtracted from segment.ms per segment, so logs do not all roll "
              "at once",
              synonyms=(S("log.roll.jitter.ms"), S("log.roll.jitter.hours", 3_600_000))),
    ConfigDef("segment.ms", T.LONG, "604800000", at_least(1),
              "Age at which a non-empty active segment is rolled, so retention can delete it",
              synonyms=(S("log.roll.ms"), S("log.roll.hours", 3_600_000))),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", None,
              "Whether a replica outside the ISR may become leader when no ISR member is left "
              "(may lose acknowledged writes)", synonyms=(S("unclean.leader.election.enable"),)),
)
