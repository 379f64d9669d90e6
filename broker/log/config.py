"""Per-topic log configuration, with Kafka's property names and defaults.

`LogConfig` is a frozen value: the broker builds one per topic from the topic's
configs in the metadata image (`LogConfig.from_properties`) and hands it to the
partition log; a config change replaces the object (`PartitionLog.update_config`).

Names follow Kafka's topic-level properties, dots turned into underscores
(`segment.bytes` -> `segment_bytes`); the broker-level `log.` prefix is dropped because
these are the per-topic values (Kafka: `LogConfig.java`, `TopicConfig.java`). The
defaults are the config catalogue's (`metadata_log.config_defs.TOPIC_CONFIGS`), the one
table DescribeConfigs and the controller also read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from metadata_log.config_defs import TOPIC_CONFIGS

__all__ = [
    "LogConfig",
    "LogConfigError",
    "NO_LIMIT",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
]

# Kafka's "never" for flush.messages / flush.ms is Long.MAX_VALUE.
NO_LIMIT = 2**63 - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# Index positions are int32 on disk, so a segment can never be larger than this.
_SEGMENT_BYTES_MAX = 2**31 - 1
_OFFSET_INDEX_ENTRY_BYTES = 8
_TIME_INDEX_ENTRY_BYTES = 12


_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _default(name: str, kind: type = int) -> Any:
    """Kafka's default for a topic config, from the one catalogue (metadata_log)."""
    return kind(TOPIC_CONFIGS[name].default)


class LogConfigError(ValueError):
    """A topic config value Kafka would reject (INVALID_CONFIG, 40, at the admin API)."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Configuration of one topic's partition logs.

    Invariants are checked in `__post_init__`: a bad value is a caller bug or an
    INVALID_CONFIG the admin layer must catch first via `from_properties`.
    """

    segment_bytes: int = _default("segment.bytes")  # roll when the .log would pass it
    segment_ms: int = _default("segment.ms")  # roll a non-empty segment this old
    segment_index_bytes: int = _default("segment.index.bytes")  # roll when an index is full
    segment_jitter_ms: int = _default("segment.jitter.ms")  # time-based rolls up to this much earlier
    file_delete_delay_ms: int = _default("file.delete.delay.ms")  # retired segment files kept this long
    index_interval_bytes: int = _default("index.interval.bytes")  # log bytes between index entries
    flush_messages: int = _default("flush.messages")  # fsync after this many unflushed records
    flush_ms: int = _default("flush.ms")  # fsync when the oldest unflushed append is this old
    retention_ms: int = _default("retention.ms")  # -1: keep forever
    retention_bytes: int = _default("retention.bytes")  # per partition; -1: no size limit
    # Tiered storage (KIP-405): closed segments are copied to remote storage, and a copied
    # segment is deleted locally by local.retention.* (-2: the same as retention.*), while
    # retention.* bounds the whole log, remote part included.
    remote_storage_enable: bool = False
    local_retention_ms: int = _default("local.retention.ms")
    local_retention_bytes: int = _default("local.retention.bytes")
    cleanup_policy: str = _default("cleanup.policy", str)  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = _default("delete.retention.ms")  # tombstone lifetime
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")  # never compact younger records
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")  # compact older ones regardless
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio", float)
    max_message_bytes: int = _default("max.message.bytes")  # largest batch
    message_timestamp_type: str = _default("message.timestamp.type", str)
    # CreateTime records may be at most this much older / newer than the broker's clock
    # (KIP-937); message.timestamp.difference.max.ms is the older single bound for both.
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    compression_type: str = _default("compression.type", str)  # "producer" keeps the producer's
    # Levels the broker uses when it recompresses (KIP-390); Kafka's defaults.
    compression_gzip_level: int = _default("compression.gzip.level")  # -1 is the codec's default
    compression_lz4_level: int = _default("compression.lz4.level")  # 1-17
    compression_zstd_level: int = _default("compression.zstd.level")
    # Not Kafka properties: limits of this implementation, passed explicitly (STYLE 7).
    cleaner_key_map_entries_max: int = 1_000_000  # keys one cleaning pass may hold in memory
    policies: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        policies = frozenset(p.strip() for p in self.cleanup_policy.split(",") if p.strip())
        if not policies or not policies <= {"delete", "compact"}:
            raise LogConfigError(f"cleanup.policy {self.cleanup_policy!r}")
        object.__setattr__(self, "policies", policies)
        # 61 bytes is one empty batch header; anything smaller cannot hold a batch.
        if not 61 <= self.segment_bytes <= _SEGMENT_BYTES_MAX:
            raise LogConfigError(f"segment.bytes {self.segment_bytes}")
        if self.segment_jitter_ms < 0 or self.file_delete_delay_ms < 0:
            raise LogConfigError("segment.jitter.ms / file.delete.delay.ms must be >= 0")
        if self.segment_ms < 1:
            raise LogConfigError(f"segment.ms {self.segment_ms}")
        if self.segment_index_bytes < _TIME_INDEX_ENTRY_BYTES:
            raise LogConfigError(f"segment.index.bytes {self.segment_index_bytes}")
        if self.index_interval_bytes < 0:
            raise LogConfigError(f"index.interval.bytes {self.index_interval_bytes}")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise LogConfigError(f"flush.messages {self.flush_messages} / flush.ms {self.flush_ms}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise LogConfigError(f"retention.ms {self.retention_ms} / bytes {self.retention_bytes}")
        if self.local_retention_ms < -2 or self.local_retention_bytes < -2:
            raise LogConfigError(f"local.retention.ms {self.local_retention_ms} / bytes "
                                 f"{self.local_retention_bytes}")
        if self.max_compaction_lag_ms < 1:
            raise LogConfigError(f"max.compaction.lag.ms {self.max_compaction_lag_ms}")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise LogConfigError("delete.retention.ms / min.compaction.lag.ms must be >= 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise LogConfigError(f"min.cleanable.dirty.ratio {self.min_cleanable_dirty_ratio}")
        if self.max_message_bytes < 0:
            raise LogConfigError(f"max.message.bytes {self.max_message_bytes}")
        if min(self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms,
               self.message_timestamp_difference_max_ms) < 0:
            raise LogConfigError("message.timestamp.*.max.ms must be >= 0")
        if self.compression_type not in _COMPRESSION_TYPES:
            raise LogConfigError(f"compression.type {self.compression_type!r}")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise LogConfigError(f"message.timestamp.type {self.message_timestamp_type!r}")
        if self.cleaner_key_map_entries_max < 1:
            raise LogConfigError("cleaner_key_map_entries_max must be >= 1")

    @property
    def timestamp_before_max_ms(self) -> int:
        return min(self.message_timestamp_before_max_ms, self.message_timestamp_difference_max_ms)

    @property
    def timestamp_after_max_ms(self) -> int:
        return min(self.message_timestamp_after_max_ms, self.message_timestamp_difference_max_ms)

    def compression_level(self, codec: str) -> int | None:
        """The level to recompress with in ``codec`` (None: the codec's default)."""
        if codec == "gzip":
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if codec == "lz4":
            return min(self.compression_lz4_level, 16)     # lz4's frame levels stop at 16
        if codec == "zstd":
            return self.compression_zstd_level
        return None

    @property
    def local_retention_ms_effective(self) -> int:
        """local.retention.ms with -2 resolved (Kafka's localRetentionMs)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.policies

    @property
    def delete(self) -> bool:
        return "delete" in self.policies

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def offset_index_entries_max(self) -> int:
        return self.segment_index_bytes // _OFFSET_INDEX_ENTRY_BYTES

    @property
    def time_index_entries_max(self) -> int:
        return self.segment_index_bytes // _TIME_INDEX_ENTRY_BYTES

    def with_overrides(self, **changes: object) -> LogConfig:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Topic configs as Kafka spells them ("segment.bytes": "1048576") over `base`.

        Unknown names are ignored (they belong to other layers, e.g. min.insync.replicas);
        a malformed value raises LogConfigError.
        """
        base = base or cls()
        changes: dict[str, object] = {}
        for name, raw in properties.items():
            attr = _PROPERTY_ATTRS.get(name)
            if attr is None:
                continue
            kind = _ATTR_KINDS[attr]
            try:
                if kind is bool:
                    changes[attr] = _parse_bool(name, raw)
                    continue
                changes[attr] = kind(raw.strip()) if kind is not str else raw.strip()
            except ValueError:
                raise LogConfigError(f"{name}={raw!r}") from None
        return replace(base, **changes)  # type: ignore[arg-type]


_PROPERTY_ATTRS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "segment.jitter.ms": "segment_jitter_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
}
_ATTR_KINDS: dict[str, type] = {
    attr: (float if attr == "min_cleanable_dirty_ratio" else str if attr in (
        "cleanup_policy", "message_timestamp_type", "compression_type")
        else bool if attr == "remote_storage_enable" else int)
    for attr in _PROPERTY_ATTRS.values()
}


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise LogConfigError(f"{name}={raw!r}")
    return value == "true"
