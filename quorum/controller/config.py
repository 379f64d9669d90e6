"""`ControllerConfig`: the controller's settings, with Kafka's names and defaults."""
from __future__ import annotations

from dataclasses import dataclass

# The metadata.version the controller finalizes when it bootstraps an empty log.
from metadata_log.features import METADATA_VERSION

__all__ = ["ControllerConfig", "METADATA_VERSION"]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    # Brokers must present this cluster id when they register; None accepts any (tests).
    cluster_id: str | None = None
    broker_session_timeout_ms: int = 9000          # broker.session.timeout.ms
    broker_heartbeat_interval_ms: int = 2000        # broker.heartbeat.interval.ms
    # ketch.broker.disconnect.fence.ms: fence a broker this long after the connection it
    # heartbeats on closed, unless it heartbeats again (-1: only the session timeout).
    broker_disconnect_fence_ms: int = 250
    num_partitions: int = 1                         # num.partitions (CreateTopics with -1)
    default_replication_factor: int = 1             # default.replication.factor
    # unclean.leader.election.enable as the static broker default; a topic config or the
    # dynamic cluster-wide broker config overrides it.
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True       # auto.leader.rebalance.enable
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds
    # Kafka's maxElectionsPerImbalance: bounds one periodic batch.
    elections_per_poll_max: int = 1000
    # Partition changes in one controlled-shutdown or fencing batch (Kafka's
    # MAX_RECORDS_PER_USER_OP, 10,000): a broker in the ISR of 100,000 partitions leaves
    # them in ten batches (one per shutdown heartbeat, or per poll once fenced),
    # leaderships first, instead of one Raft entry of 100,000.
    controlled_shutdown_records_max: int = 10_000
    # A limit on one CreateTopics/CreatePartitions request, so that a typo such as
    # num_partitions=2147483647 is refused instead of stalling the controller.
    partitions_per_request_max: int = 1_000_000
    producer_id_block_size: int = 1000      # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
    metadata_version: int = METADATA_VERSION
    # eligible.leader.replicas.version finalized when the log is bootstrapped (KIP-966):
    # 1 as Kafka 4.1's new clusters; 0 keeps Kafka 3.x's elections (UpdateFeatures moves it).
    eligible_leader_replicas_version: int = 1
    # remote.log.storage.system.enable: may topics turn on remote.storage.enable (KIP-405;
    # Kafka's controller judges by its own copy of the broker switch).
    remote_log_storage_system_enable: bool = False

    def __post_init__(self) -> None:
        assert self.broker_session_timeout_ms > 0
        assert 0 < self.broker_heartbeat_interval_ms <= self.broker_session_timeout_ms
        assert self.broker_disconnect_fence_ms >= -1
        assert self.num_partitions > 0 and self.default_replication_factor > 0
        assert self.leader_imbalance_check_interval_ms > 0
        assert self.partitions_per_request_max > 0
        assert self.elections_per_poll_max > 0 and self.producer_id_block_size > 0
        assert self.controlled_shutdown_records_max > 0
        assert self.eligible_leader_replicas_version in (0, 1)
