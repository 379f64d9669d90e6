"""The blocking admin client: `clients.aio.admin.Admin` run on the shared client loop.

    from clients import Admin
    from clients.admin import NewTopic

    with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("orders", 6, 3)])
        print(admin.describe_cluster())

Every method has the asyncio client's signature, results and errors (see its module
docstring); the caller's thread waits for the coroutine on `LoopThread.shared()`. A call
with ``timeout_ms`` gets that deadline inside the loop, and the caller waits a little
longer for the loop to report it, so a timeout raises the asyncio client's error (which
names the item), not a bare wait timeout.
"""
from __future__ import annotations

from typing import Any, Coroutine, Iterable, Mapping, Sequence, TypeVar

from clients._blocking import LoopThread
from clients._core.admin import (
    ANY_NAME, AlterConfigOp, AlterConfigOpType, BrokerNode, ClientQuotaEntity, ClusterDescription,
    ConfigEntry, FeatureMetadata, FeatureUpdate, UpgradeType, client_quota_entity,
    ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion,
    ConfigResource, ConfigResourceType, ConfigSource, ConfigSynonym, ConfigType,
    ConsumerGroupDescription, ConsumerGroupListing, CreateTopicResult, ListOffsetsResult,
    MemberDescription, NewPartitions, NewTopic, OffsetReset, OffsetSpec, PartitionLag,
    LogDirDescription, QuorumInfo, QuorumReplica, ReplicaInfo, ReplicaLogDir, ReplicaLogDirInfo,
    TopicDescription, TopicListing,
    TopicPartitionInfo,
    AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing,
)
from clients._core.config import ClientConfig
from clients.protocol.acls import (
    AclBinding, AclBindingFilter, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
)
from clients._core.reassignment import ElectionType, PartitionReassignment
from clients.aio.admin import Admin as AsyncAdmin
from clients.errors import ClientClosedError, KafkaApiError
from clients.types import OffsetAndMetadata, TopicPartition, TopicPartitionReplica

__all__ = [
    "AclBinding", "AclBindingFilter", "AclOperation", "AclPatternType", "AclPermissionType",
    "AclResourceType", "ANY_NAME", "Admin", "AlterConfigOp", "AlterConfigOpType", "AsyncAdmin", "BrokerNode",
    "ClientQuotaEntity", "client_quota_entity", "ScramCredentialInfo",
    "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
    "ClusterDescription", "ConfigEntry", "ConfigResource", "ConfigResourceType",
    "ConfigSource", "ConfigSynonym", "ConfigType", "ConsumerGroupDescription",
    "ConsumerGroupListing", "CreateTopicResult", "ElectionType", "FeatureMetadata",
    "FeatureUpdate", "ListOffsetsResult", "UpgradeType",
    "MemberDescription", "PartitionReassignment",
    "NewPartitions", "NewTopic", "OffsetAndMetadata", "OffsetReset", "OffsetSpec",
    "LogDirDescription", "PartitionLag", "QuorumInfo", "QuorumReplica", "ReplicaInfo",
    "ReplicaLogDir", "ReplicaLogDirInfo",
    "TopicDescription", "TopicListing", "TopicPartition", "TopicPartitionInfo",
    "TopicPartitionReplica",
    "AbortTransactionSpec", "ProducerState", "TransactionDescription", "TransactionListing",
]

T = TypeVar("T")

# The caller waits this much longer than the call's own deadline: the loop reports the
# deadline itself, with an error naming what was still unanswered.
_REPORT_GRACE_S = 5.0


class Admin:
    """Blocking admin client (module docstring). Connects in the constructor; ``close()``
    or ``with`` ends it."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None, /,
                 **overrides: Any) -> None:
        self._loop = LoopThread.shared()
        self._admin = AsyncAdmin(config, **overrides)
        self._closed = False
        self._run(self._admin.start(), None)

    @property
    def config(self) -> ClientConfig:
        return self._admin.config

    def _run(self, coro: Coroutine[Any, Any, T], timeout_ms: int | None) -> T:
        if self._closed:
            coro.close()
            raise ClientClosedError("the admin client is closed")
        budget = self._admin.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        return self._loop.run(coro, budget / 1000 + _REPORT_GRACE_S)

    def close(self) -> None:
        if not self._closed:
            self._loop.run(self._admin.close(), _REPORT_GRACE_S + 30)
            self._closed = True

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ topics

    def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False,
                      timeout_ms: int | None = None) -> dict[str, CreateTopicResult]:
        return self._run(self._admin.create_topics(list(topics), validate_only=validate_only,
                                                   timeout_ms=timeout_ms), timeout_ms)

    def list_topics(self, *, include_internal: bool = False,
                    timeout_ms: int | None = None) -> dict[str, TopicListing]:
        return self._run(self._admin.list_topics(include_internal=include_internal,
                                                 timeout_ms=timeout_ms), timeout_ms)

    def describe_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                        ) -> dict[str, TopicDescription]:
        return self._run(self._admin.describe_topics(list(topics), timeout_ms=timeout_ms),
                         timeout_ms)

    def delete_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                      ) -> dict[str, None]:
        return self._run(self._admin.delete_topics(list(topics), timeout_ms=timeout_ms),
                         timeout_ms)

    def create_partitions(self, new_partitions: Mapping[str, NewPartitions], *,
                          validate_only: bool = False, timeout_ms: int | None = None
                          ) -> dict[str, None]:
        return self._run(self._admin.create_partitions(
            dict(new_partitions), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ cluster links (issue 21)

    def create_cluster_link(self, name: str, configs: Mapping[str, str], *,
                            validate_only: bool = False, timeout_ms: int | None = None) -> None:
        return self._run(self._admin.create_cluster_link(
            name, dict(configs), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    def alter_cluster_link(self, name: str, ops: Sequence[AlterConfigOp], *,
                           timeout_ms: int | None = None) -> None:
        return self._run(self._admin.alter_cluster_link(name, list(ops), timeout_ms=timeout_ms),
                         timeout_ms)

    def list_cluster_links(self, *, timeout_ms: int | None = None) -> dict[str, str]:
        return self._run(self._admin.list_cluster_links(timeout_ms=timeout_ms), timeout_ms)

    def describe_cluster_link(self, name: str, *, timeout_ms: int | None = None
                              ) -> dict[str, ConfigEntry]:
        return self._run(self._admin.describe_cluster_link(name, timeout_ms=timeout_ms), timeout_ms)

    def delete_cluster_link(self, name: str, *, timeout_ms: int | None = None) -> None:
        return self._run(self._admin.delete_cluster_link(name, timeout_ms=timeout_ms), timeout_ms)

    def list_mirror_topics(self, *, timeout_ms: int | None = None) -> dict[str, dict[str, str]]:
        return self._run(self._admin.list_mirror_topics(timeout_ms=timeout_ms), timeout_ms)

    def create_mirror_topic(self, topic: str, link: str, *, timeout_ms: int | None = None) -> None:
        return self._run(self._admin.create_mirror_topic(topic, link, timeout_ms=timeout_ms),
                         timeout_ms)

    def promote_mirror_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                              ) -> dict[str, None]:
        return self._run(self._admin.promote_mirror_topics(list(topics), timeout_ms=timeout_ms),
                         timeout_ms)

    def restore_mirror_topic(self, topic: str, link: str, source_topic: str | None = None, *,
                             timeout_ms: int | None = None) -> None:
        return self._run(self._admin.restore_mirror_topic(topic, link, source_topic,
                                                          timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ configs

    def describe_configs(self, resources: Iterable[ConfigResource], *,
                         include_synonyms: bool = False, include_documentation: bool = False,
                         timeout_ms: int | None = None
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return self._run(self._admin.describe_configs(
            list(resources), include_synonyms=include_synonyms,
            include_documentation=include_documentation, timeout_ms=timeout_ms), timeout_ms)

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
                                  *, validate_only: bool = False, timeout_ms: int | None = None
                                  ) -> dict[ConfigResource, None]:
        return self._run(self._admin.incremental_alter_configs(
            dict(changes), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                      validate_only: bool = False, timeout_ms: int | None = None
                      ) -> dict[ConfigResource, None]:
        return self._run(self._admin.alter_configs(
            dict(configs), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    def list_client_metrics_resources(self, *, timeout_ms: int | None = None) -> list[str]:
        return self._run(self._admin.list_client_metrics_resources(timeout_ms=timeout_ms),
                         timeout_ms)

    # ------------------------------------------------------------ client quotas

    def describe_client_quotas(self, filter: Mapping[str, Any] | None = None, *,
                               strict: bool = False, timeout_ms: int | None = None
                               ) -> dict[ClientQuotaEntity, dict[str, float]]:
        return self._run(self._admin.describe_client_quotas(
            filter, strict=strict, timeout_ms=timeout_ms), timeout_ms)

    def alter_client_quotas(self, alterations: Mapping[ClientQuotaEntity, Mapping[str, float | None]],
                            *, validate_only: bool = False, timeout_ms: int | None = None
                            ) -> dict[ClientQuotaEntity, None]:
        return self._run(self._admin.alter_client_quotas(
            dict(alterations), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ ACLs

    def create_acls(self, acls: Sequence[AclBinding], *,
                    timeout_ms: int | None = None) -> dict[AclBinding, None]:
        return self._run(self._admin.create_acls(list(acls), timeout_ms=timeout_ms), timeout_ms)

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter(), *,
                      timeout_ms: int | None = None) -> list[AclBinding]:
        return self._run(self._admin.describe_acls(acl_filter, timeout_ms=timeout_ms), timeout_ms)

    def delete_acls(self, filters: Sequence[AclBindingFilter], *, timeout_ms: int | None = None
                    ) -> dict[AclBindingFilter, list[AclBinding]]:
        return self._run(self._admin.delete_acls(list(filters), timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ SCRAM users (KIP-554)

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None, *,
                                        timeout_ms: int | None = None
                                        ) -> dict[str, list[ScramCredentialInfo]]:
        return self._run(self._admin.describe_user_scram_credentials(users, timeout_ms=timeout_ms),
                         timeout_ms)

    def alter_user_scram_credentials(
            self, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion],
            *, timeout_ms: int | None = None) -> dict[str, None]:
        return self._run(self._admin.alter_user_scram_credentials(list(alterations), timeout_ms=timeout_ms),
                         timeout_ms)

    # ------------------------------------------------------------ cluster

    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        return self._run(self._admin.describe_cluster(timeout_ms=timeout_ms), timeout_ms)

    def describe_features(self, *, timeout_ms: int | None = None) -> FeatureMetadata:
        return self._run(self._admin.describe_features(timeout_ms=timeout_ms), timeout_ms)

    def update_features(self, updates: Mapping[str, FeatureUpdate], *, validate_only: bool = False,
                        timeout_ms: int | None = None) -> dict[str, None]:
        return self._run(self._admin.update_features(
            dict(updates), validate_only=validate_only, timeout_ms=timeout_ms), timeout_ms)

    def describe_quorum(self, *, timeout_ms: int | None = None) -> QuorumInfo:
        return self._run(self._admin.describe_quorum(timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ elections, reassignment

    def elect_leaders(self, election_type: ElectionType,
                      partitions: Iterable[TopicPartition] | None = None, *,
                      timeout_ms: int | None = None
                      ) -> dict[TopicPartition, KafkaApiError | None]:
        return self._run(self._admin.elect_leaders(
            election_type, None if partitions is None else list(partitions),
            timeout_ms=timeout_ms), timeout_ms)

    def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
            timeout_ms: int | None = None) -> dict[TopicPartition, None]:
        return self._run(self._admin.alter_partition_reassignments(
            dict(reassignments), timeout_ms=timeout_ms), timeout_ms)

    def decommission_broker(self, broker_id: int, *, dry_run: bool = False,
                            timeout_ms: int | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        return self._run(self._admin.decommission_broker(broker_id, dry_run=dry_run,
                                                         timeout_ms=timeout_ms), timeout_ms)

    def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        return self._run(self._admin.list_partition_reassignments(
            None if partitions is None else list(partitions), timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ log directories

    def describe_log_dirs(self, partitions: Iterable[TopicPartition], *,
                          timeout_ms: int | None = None) -> dict[TopicPartition, ReplicaLogDir]:
        return self._run(self._admin.describe_log_dirs(list(partitions), timeout_ms=timeout_ms),
                         timeout_ms)

    def describe_broker_log_dirs(self, broker_ids: Iterable[int],
                                 partitions: Iterable[TopicPartition] | None = None, *,
                                 timeout_ms: int | None = None
                                 ) -> dict[int, tuple[LogDirDescription, ...]]:
        return self._run(self._admin.describe_broker_log_dirs(
            list(broker_ids), None if partitions is None else list(partitions),
            timeout_ms=timeout_ms), timeout_ms)

    def describe_replica_log_dirs(self, replicas: Iterable[TopicPartitionReplica], *,
                                  timeout_ms: int | None = None
                                  ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        return self._run(self._admin.describe_replica_log_dirs(list(replicas), timeout_ms=timeout_ms),
                         timeout_ms)

    def alter_replica_log_dirs(self, assignments: Mapping[TopicPartitionReplica, str], *,
                               timeout_ms: int | None = None) -> dict[TopicPartitionReplica, None]:
        return self._run(self._admin.alter_replica_log_dirs(dict(assignments), timeout_ms=timeout_ms),
                         timeout_ms)

    # ------------------------------------------------------------ consumer groups

    def list_consumer_groups(self, *, states: Iterable[str] | None = None,
                             timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        return self._run(self._admin.list_consumer_groups(
            states=None if states is None else list(states), timeout_ms=timeout_ms), timeout_ms)

    def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                 timeout_ms: int | None = None
                                 ) -> dict[str, ConsumerGroupDescription]:
        return self._run(self._admin.describe_consumer_groups(list(group_ids),
                                                              timeout_ms=timeout_ms), timeout_ms)

    def list_consumer_group_offsets(self, group_id: str,
                                    partitions: Iterable[TopicPartition] | None = None, *,
                                    require_stable: bool = False, timeout_ms: int | None = None
                                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(self._admin.list_consumer_group_offsets(
            group_id, None if partitions is None else list(partitions),
            require_stable=require_stable, timeout_ms=timeout_ms), timeout_ms)

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[TopicPartition, int | OffsetAndMetadata], *,
                                     timeout_ms: int | None = None
                                     ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(self._admin.alter_consumer_group_offsets(
            group_id, dict(offsets), timeout_ms=timeout_ms), timeout_ms)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                                      *, timeout_ms: int | None = None) -> None:
        return self._run(self._admin.delete_consumer_group_offsets(
            group_id, list(partitions), timeout_ms=timeout_ms), timeout_ms)

    def delete_consumer_groups(self, group_ids: Iterable[str], *,
                               timeout_ms: int | None = None) -> dict[str, None]:
        return self._run(self._admin.delete_consumer_groups(list(group_ids),
                                                            timeout_ms=timeout_ms), timeout_ms)

    def consumer_group_lag(self, group_id: str, topics: Iterable[str] | None = None, *,
                           timeout_ms: int | None = None) -> dict[TopicPartition, PartitionLag]:
        return self._run(self._admin.consumer_group_lag(
            group_id, None if topics is None else list(topics), timeout_ms=timeout_ms), timeout_ms)

    def reset_consumer_group_offsets(self, group_id: str, spec: OffsetReset, *,
                                     partitions: Iterable[TopicPartition] | None = None,
                                     topics: Iterable[str] | None = None, dry_run: bool = False,
                                     timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return self._run(self._admin.reset_consumer_group_offsets(
            group_id, spec, partitions=None if partitions is None else list(partitions),
            topics=None if topics is None else list(topics), dry_run=dry_run,
            timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ transactions

    def describe_transactions(self, transactional_ids: Iterable[str], *,
                              timeout_ms: int | None = None) -> dict[str, TransactionDescription]:
        return self._run(self._admin.describe_transactions(list(transactional_ids),
                                                           timeout_ms=timeout_ms), timeout_ms)

    def list_transactions(self, *, states: Iterable[str] | None = None,
                          producer_ids: Iterable[int] | None = None,
                          duration_filter_ms: int = -1,
                          timeout_ms: int | None = None) -> list[TransactionListing]:
        return self._run(self._admin.list_transactions(
            states=None if states is None else list(states),
            producer_ids=None if producer_ids is None else list(producer_ids),
            duration_filter_ms=duration_filter_ms, timeout_ms=timeout_ms), timeout_ms)

    def describe_producers(self, partitions: Iterable[TopicPartition], *,
                           timeout_ms: int | None = None
                           ) -> dict[TopicPartition, list[ProducerState]]:
        return self._run(self._admin.describe_producers(list(partitions),
                                                        timeout_ms=timeout_ms), timeout_ms)

    def abort_transaction(self, spec: AbortTransactionSpec, *,
                          timeout_ms: int | None = None) -> None:
        return self._run(self._admin.abort_transaction(spec, timeout_ms=timeout_ms), timeout_ms)

    # ------------------------------------------------------------ offsets and records

    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                     isolation_level: str = "read_uncommitted", timeout_ms: int | None = None
                     ) -> dict[TopicPartition, ListOffsetsResult]:
        return self._run(self._admin.list_offsets(dict(specs), isolation_level=isolation_level,
                                                  timeout_ms=timeout_ms), timeout_ms)

    def delete_records(self, before: Mapping[TopicPartition, int], *,
                       timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return self._run(self._admin.delete_records(dict(before), timeout_ms=timeout_ms),
                         timeout_ms)
