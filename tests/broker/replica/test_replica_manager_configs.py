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
