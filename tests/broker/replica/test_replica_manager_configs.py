"""Config changes reach hosted replicas from the metadata delta's typed changes, live."""
from __future__ import annotations

import uuid

from broker.log import FileStorage, LogManager
from clients.types import TopicPartition
from broker.replica_manager import ReplicaManager
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_harness import Metadata
from metadata_log.image import ConfigResourceType

TOPIC, BROKER = int(ConfigResourceType.TOPIC), int(ConfigResourceType.BROKER)
TP = TopicPartition("t", 0)


def apply(manager: ReplicaManager, committed, now: int) -> None:
    image, changes = committed
    manager.apply_metadata(image, changes, now)


def config(rtype: int, name: str, key: str, value: str | None):
    return M.ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=value)


def start(tmp_path, static: dict[str, str] | None = None):
    storage = FileStorage()
    logs, _ = LogManager.open(storage, str(tmp_path), now_ms=0)
    manager = ReplicaManager(1, logs, static or {})
    cluster = Metadata()
    tid = uuid.UUID(int=42)
    apply(manager, cluster.commit(
        M.RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=1,
                               fenced=False),
        M.TopicRecord(name="t", topic_id=tid),
        M.PartitionRecord(partition_id=0, topic_id=tid, replicas=[1], isr=[1], leader=1,
                          leader_epoch=0, partition_epoch=0)), 0)
    return manager, cluster


def test_a_topic_config_change_reaches_the_hosted_log_and_replica(tmp_path) -> None:
    manager, cluster = start(tmp_path)
    hosted = manager.partitions[TP]
    assert hosted.log.config.max_message_bytes == 1048588
    apply(manager, cluster.commit(config(TOPIC, "t", "max.message.bytes", "10000"),
                                  config(TOPIC, "t", "cleanup.policy", "compact"),
                                  config(TOPIC, "t", "min.insync.replicas", "2")), 1)
    assert hosted.log.config.max_message_bytes == 10000 and hosted.log.config.compact
    assert hosted.replica.min_insync_replicas == 2
    # A raised min.insync.replicas is enforced on the next acks=all append (ISR is {1}).
    assert hosted.replica.check_append(-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert hosted.replica.check_append(1).error_code == ErrorCode.NONE
    # Deleting the override falls back to the broker layers.
    apply(manager, cluster.commit(config(TOPIC, "t", "max.message.bytes", None)), 2)
    assert hosted.log.config.max_message_bytes == 1048588
    manager.shutdown()


def test_broker_level_defaults_apply_to_topics_without_their_own(tmp_path) -> None:
    manager, cluster = start(tmp_path, static={"log.segment.bytes": "100000"})
    hosted = manager.partitions[TP]
    assert hosted.log.config.segment_bytes == 100000              # static layer
    apply(manager, cluster.commit(config(BROKER, "", "log.segment.bytes", "50000")), 1)
    assert hosted.log.config.segment_bytes == 50000               # cluster default beats static
    apply(manager, cluster.commit(config(BROKER, "1", "log.segment.bytes", "40000")), 2)
    assert hosted.log.config.segment_bytes == 40000               # this broker's own beats both
    apply(manager, cluster.commit(config(BROKER, "2", "log.segment.bytes", "30000")), 3)
    assert hosted.log.config.segment_bytes == 40000               # another broker's: not ours
    apply(manager, cluster.commit(config(TOPIC, "t", "segment.bytes", "20000")), 4)
    assert hosted.log.config.segment_bytes == 20000               # the topic's own beats all
    manager.shutdown()


def test_a_snapshot_load_reapplies_every_config(tmp_path) -> None:
    manager, cluster = start(tmp_path)
    hosted = manager.partitions[TP]
    image, _ = cluster.commit(config(TOPIC, "t", "retention.ms", "1234"))
    manager.apply_metadata(image, None, 1)                        # None: anything may have changed
    assert hosted.log.config.retention_ms == 1234
    manager.shutdown()


def test_idle_producer_ids_expire_every_check_interval_with_the_dynamic_expiration(tmp_path) -> None:
    from clients.records import Record, build_batch

    manager, cluster = start(tmp_path, static={"producer.id.expiration.check.interval.ms": "1000"})
    idle_since = 1_000_000
    for pid in (7, 8):
        batch = build_batch([Record(0, idle_since, None, b"v")], producer_id=pid, producer_epoch=0,
                            base_sequence=0)
        assert manager.append(TP, bytes(batch), 1, idle_since).error_code == ErrorCode.NONE

    def producers() -> list[int]:
        code, active = manager.describe_producers(TP)
        assert code == ErrorCode.NONE
        return [p.producer_id for p in active]

    day = 86_400_000
    manager.poll(idle_since)                        # the first check is due one interval later
    manager.poll(idle_since + day - 1)              # a check: idle one ms short of a day
    assert producers() == [7, 8]                    # (the default expiration)
    manager.poll(idle_since + day)
    assert producers() == [7, 8]                    # no check due yet
    manager.poll(idle_since + day - 1 + 1000)
    assert producers() == []
    # producer.id.expiration.ms is a cluster-wide dynamic config, read at each check.
    later = idle_since + 2 * day
    batch = build_batch([Record(0, later, None, b"v")], producer_id=9, producer_epoch=0, base_sequence=0)
    assert manager.append(TP, bytes(batch), 1, later).error_code == ErrorCode.NONE
    apply(manager, cluster.commit(config(BROKER, "", "producer.id.expiration.ms", "60000")), later)
    manager.poll(later + 59_999)
    assert producers() == [9]
    manager.poll(later + 61_000)
    assert producers() == []
    manager.shutdown()
