"""The broker's side of the HTTP admin API (clients/http_api): what only this broker
knows, as a ``NodeView`` (its registration and readiness, its metadata image's view of the
cluster, the replicas it hosts)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from broker.replica_manager import ReplicaManager
from clients.types import TopicPartition
from metadata_log.cluster_view import broker_states, health_report

__all__ = ["BrokerView"]


class BrokerView:
    role = "broker"

    def __init__(self, node_id: int, replicas: ReplicaManager,
                 lifecycle_state: Callable[[], dict[str, Any]],
                 mirrors: Callable[[], list[Mapping[str, Any]]] = lambda: []) -> None:
        """``lifecycle_state()``: cluster_id, broker_epoch, fenced and caught_up;
        ``mirrors()``: the mirror partitions led here (``MirrorManager.describe``)."""
        self.node_id = node_id
        self.replicas = replicas
        self.lifecycle_state = lifecycle_state
        self.mirrors = mirrors

    def identity(self) -> dict[str, Any]:
        return {**self.lifecycle_state(), "metadata_offset": self.replicas.image.provenance.offset,
                "partitions_hosted": len(self.replicas.partitions)}

    def not_ready(self) -> str | None:
        state = self.lifecycle_state()
        if state["broker_epoch"] < 0:
            return "not registered with the controller yet"
        if not state["caught_up"]:
            return "catching up with the metadata log"
        if state["fenced"]:
            return "fenced by the controller"
        return None

    def brokers(self) -> list[dict[str, Any]]:
        return broker_states(self.replicas.image)

    def health(self, problems_max: int) -> dict[str, Any]:
        return health_report(self.replicas.image, self.replicas.config_layers, problems_max)

    def has_topic(self, name: str) -> bool:
        return self.replicas.image.topics.get(name) is not None

    def local_replicas(self) -> Mapping[TopicPartition, Mapping[str, Any]]:
        out = {}
        for tp, hosted in self.replicas.partitions.items():
            r = hosted.replica
            out[tp] = {"role": r.role.value, "leader": r.leader_id, "leader_epoch": r.leader_epoch,
                       "partition_epoch": r.partition_epoch, "replicas": list(r.replicas),
                       "isr": list(r.isr), "log_start_offset": hosted.log.log_start_offset,
                       "log_end_offset": hosted.log.log_end_offset,
                       "high_watermark": r.high_watermark, "size_bytes": hosted.log.size_bytes}
        return out

    def snapshot(self) -> dict[str, Any] | None:
        return None
