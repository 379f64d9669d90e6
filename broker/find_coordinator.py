"""FindCoordinator: which broker coordinates a key, for every kind of coordinator.

A coordinator key (a group id, key_type 0; a transactional id, key_type 1) hashes to one
partition of the coordinator's internal topic (``__consumer_offsets``,
``__transaction_state``), and that partition's leader is the coordinator (Kafka's
``KafkaApis.handleFindCoordinatorRequest``). The internal topic is created on first use
(its partition count and replication factor capped by the live brokers, compacted);
until its leaders are known the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
Share coordinators (key_type 2) do not exist in Ketch: INVALID_REQUEST.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from broker.auto_topic_creation import AutoTopicCreationManager
from broker.replica_driver import ReplicaDriver
from clients.protocol import messages
from clients.protocol.errors import ErrorCode

__all__ = ["CoordinatorKeyType", "CoordinatorTopic", "FindCoordinatorHandler",
           "FIND_COORDINATOR_VERSIONS"]

FIND_COORDINATOR_VERSIONS = (0, 6)


class CoordinatorKeyType(enum.IntEnum):
    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class CoordinatorTopic:
    """A coordinator's internal topic: how keys map to its partitions, and how to make it."""
    name: str
    num_partitions: int
    replication_factor: int
    partition_for: Callable[[str, int], int]      # (key, partitions) -> partition
    configs: tuple[tuple[str, str], ...]
    # Capped by the replication factor, like the replication factor by the live brokers,
    # so that a cluster smaller than the defaults assume still has a usable coordinator
    # (Kafka would refuse every write with NOT_ENOUGH_REPLICAS until reconfigured).
    min_insync_replicas: int | None = None


Answer = tuple[int, "str | None", int, str, int]   # error, message, node, host, port


class FindCoordinatorHandler:
    def __init__(self, replicas: ReplicaDriver, topic_creation: AutoTopicCreationManager,
                 listener_name: str, topics: dict[CoordinatorKeyType, CoordinatorTopic]) -> None:
        self.replicas = replicas
        self.topic_creation = topic_creation
        self.listener_name = listener_name
        self.topics = topics
        self._creating: set[str] = set()

    async def handle_find_coordinator(self, req: Any, version: int, client: Any) -> Any:
        cls = messages.FindCoordinatorResponse
        keys = req.coordinator_keys if version >= 4 else [req.key]
        answers: list[tuple[str, Answer]] = []
        for key in keys:
            # The coordinator's endpoint on the listener the request came in on.
            answers.append((key, await self.coordinator_for(
                req.key_type, key, getattr(client, "listener_name", None) or self.listener_name)))
        if version >= 4:
            return cls(coordinators=[cls.Coordinator(key=k, node_id=n, host=h, port=pt,
                                                     error_code=c, error_message=m)
                                     for k, (c, m, n, h, pt) in answers])
        code, message, node, host, port = answers[0][1]
        return cls(error_code=code, error_message=message, node_id=node, host=host, port=port)

    async def coordinator_for(self, key_type: int, key: str, listener_name: str | None = None) -> Answer:
        spec = self.topics.get(key_type)       # type: ignore[call-overload]
        if spec is None:
            return ErrorCode.INVALID_REQUEST, f"no coordinator of key type {key_type}", -1, "", -1
        image = self.replicas.image
        topic = image.topics.get(spec.name)
        if topic is None:
            await self._create(spec)
            image = self.replicas.image
            topic = image.topics.get(spec.name)
            if topic is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {spec.name}", -1, "", -1
        reg = topic.partitions.get(spec.partition_for(key, len(topic.partitions)))
        if reg is None or reg.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no leader yet", -1, "", -1
        broker = image.cluster.get(reg.leader)
        endpoint = None if broker is None else (broker.endpoint(listener_name or self.listener_name)
                                                or (broker.endpoints[0] if broker.endpoints else None))
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator has no endpoint", -1, "", -1
        return ErrorCode.NONE, None, reg.leader, endpoint.host, endpoint.port

    async def _create(self, spec: CoordinatorTopic) -> None:
        if spec.name in self._creating:
            await self.topic_creation.wait_for_topics([spec.name], 5.0)
            return
        self._creating.add(spec.name)
        try:
            rf = max(1, min(spec.replication_factor, self.topic_creation.live_brokers()))
            cls = messages.CreateTopicsRequest
            configs = list(spec.configs)
            if spec.min_insync_replicas is not None:
                configs.append(("min.insync.replicas", str(min(spec.min_insync_replicas, rf))))
            await self.topic_creation.create([cls.CreatableTopic(
                name=spec.name, num_partitions=spec.num_partitions, replication_factor=rf,
                configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs])],
                timeout_s=20.0)
        finally:
            self._creating.discard(spec.name)
