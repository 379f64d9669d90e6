"""What the cluster knows, as a log of records: metadata record types, the immutable
`MetadataImage` built by replaying them, and snapshots.

- ``records``: ``MetadataRecordType`` and the KRaft record frame (``encode_record``,
  ``decode_record``); records themselves are ``clients.protocol.messages`` objects;
- ``image``: ``MetadataImage`` and its parts, frozen and structurally shared;
- ``delta``: ``MetadataDelta.replay(record)`` / ``apply(provenance)``, the typed changes
  brokers act on, and ``replay_batch`` (all-or-nothing batches);
- ``snapshot``: image <-> records, and the snapshot file format.

Not here: networking, Raft, or any decision about what to append (that is `quorum`).
"""
from metadata_log.delta import (
    BatchOutcome, BrokerControlledShutdown, BrokerFenced, BrokerRegistered, BrokerUnfenced,
    BrokerUnregistered, ConfigChange, ElrChange, FeatureLevelChange, IsrChange, LeaderChange,
    LeaderRecoveryChange, MetadataChange, MetadataDelta, MetadataReplayError, PartitionCreated,
    ProducerIdsAllocated, ReplicasChange, TopicCreated, TopicDeleted, replay_batch,
)
from metadata_log.image import (
    EMPTY_IMAGE, EMPTY_PROVENANCE, LEADER_UNCHANGED, NO_LEADER, BrokerFeatureRange,
    BrokerRegistration, ClusterImage, ConfigResource, ConfigResourceType, ConfigsImage,
    Endpoint, FeaturesImage, LeaderRecoveryState, MetadataImage, PartitionRegistration,
    ProducerIdsImage, Provenance, TopicImage, TopicsImage,
)
from metadata_log.records import (
    MetadataRecordType, decode_record, encode_record, record_type, record_version,
)
from metadata_log.snapshot import (
    CorruptSnapshotError, decode_snapshot, encode_snapshot, image_to_records,
    latest_snapshot, list_snapshots, read_snapshot, records_to_image, write_snapshot,
)

__all__ = [
    "BatchOutcome", "BrokerControlledShutdown", "BrokerFeatureRange", "BrokerFenced",
    "BrokerRegistered", "BrokerRegistration", "BrokerUnfenced", "BrokerUnregistered",
    "ClusterImage", "ConfigChange", "ConfigResource", "ConfigResourceType", "ConfigsImage",
    "CorruptSnapshotError", "EMPTY_IMAGE", "EMPTY_PROVENANCE", "ElrChange", "Endpoint",
    "FeatureLevelChange", "FeaturesImage", "IsrChange", "LEADER_UNCHANGED", "LeaderChange",
    "LeaderRecoveryChange", "LeaderRecoveryState", "MetadataChange", "MetadataDelta",
    "MetadataImage", "MetadataRecordType", "MetadataReplayError", "NO_LEADER",
    "PartitionCreated", "PartitionRegistration", "ProducerIdsAllocated", "ProducerIdsImage",
    "Provenance", "ReplicasChange", "TopicCreated", "TopicDeleted", "TopicImage",
    "TopicsImage", "decode_record", "decode_snapshot", "encode_record", "encode_snapshot",
    "image_to_records", "latest_snapshot", "list_snapshots", "read_snapshot",
    "record_type", "record_version", "records_to_image", "replay_batch", "write_snapshot",
]
