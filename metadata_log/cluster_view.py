"""What an operator asks of the metadata image, as plain JSON-ready values (pure).

Every node follows the metadata log, so every node can answer these from its own image:
the HTTP admin API's cluster, broker and health routes and the brokers' and controllers'
partition-state metrics all read them from here (one home for "under-replicated" and
"offline"). A standby controller or a lagging broker answers from the offset it has
reached; ``metadata_offset`` says which.

- under-replicated: the ISR is smaller than the replica set (Kafka's
  UnderReplicatedPartitions, counted cluster-wide here);
- under-min-ISR: the ISR is smaller than the topic's effective ``min.insync.replicas``
  (acks=all produce is refused: Kafka's UnderMinIsrPartitionCount);
- offline: no leader (Kafka's OfflinePartitionsCount).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from metadata_log.config_layers import ConfigLayers
from metadata_log.image import MetadataImage, PartitionRegistration, TopicImage

__all__ = ["PartitionHealth", "broker_states", "health_report", "partition_health",
           "unhealthy_partitions", "min_insync_replicas", "topic_partitions"]

# Kafka's default when no layer sets min.insync.replicas.
DEFAULT_MIN_INSYNC = 1


def broker_states(image: MetadataImage) -> list[dict[str, Any]]:
    """Every registered broker, fenced ones included (DescribeCluster shows only the live)."""
    out = []
    for broker_id, b in sorted(image.cluster.brokers.items()):
        out.append({
            "id": broker_id, "rack": b.rack, "epoch": b.broker_epoch,
            "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
            "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in b.endpoints],
        })
    return out


def min_insync_replicas(layers: ConfigLayers, topic: str) -> int:
    try:
        return int(layers.topic_value(topic, "min.insync.replicas") or DEFAULT_MIN_INSYNC)
    except ValueError:
        return DEFAULT_MIN_INSYNC     # the controller validates; a view never fails on a value


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    partitions: int
    under_replicated: int
    under_min_isr: int
    offline: int

    @property
    def healthy(self) -> bool:
        return not (self.under_replicated or self.under_min_isr or self.offline)


def topic_partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """Topics by name, partitions by index: a stable order for listings and pages."""
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        for index in sorted(topic.partitions):
            yield topic, index, topic.partitions[index]


def _problems(p: PartitionRegistration, min_isr: int) -> tuple[bool, bool, bool]:
    return len(p.isr) < len(p.replicas), len(p.isr) < min_isr, not p.has_leader()


def partition_health(image: MetadataImage, layers: ConfigLayers) -> PartitionHealth:
    total = urp = umi = offline = 0
    min_isr: dict[str, int] = {}
    for topic, _, p in topic_partitions(image):
        if topic.name not in min_isr:
            min_isr[topic.name] = min_insync_replicas(layers, topic.name)
        u, m, o = _problems(p, min_isr[topic.name])
        total += 1
        urp += u
        umi += m
        offline += o
    return PartitionHealth(total, urp, umi, offline)


def unhealthy_partitions(image: MetadataImage, layers: ConfigLayers, limit: int
                         ) -> list[dict[str, Any]]:
    """The first ``limit`` partitions with a problem, each with what is wrong."""
    out: list[dict[str, Any]] = []
    min_isr: dict[str, int] = {}
    for topic, index, p in topic_partitions(image):
        if len(out) >= limit:
            break
        if topic.name not in min_isr:
            min_isr[topic.name] = min_insync_replicas(layers, topic.name)
        u, m, o = _problems(p, min_isr[topic.name])
        if u or m or o:
            out.append({"topic": topic.name, "partition": index, "leader": p.leader,
                        "replicas": list(p.replicas), "isr": list(p.isr),
                        "under_replicated": u, "under_min_isr": m, "offline": o})
    return out


def health_report(image: MetadataImage, layers: ConfigLayers, problems_max: int) -> dict[str, Any]:
    """The health summary a node reports (HTTP /v1/cluster/health): the counts, whether
    all is well, the metadata offset they are as of, and the first problems."""
    h = partition_health(image, layers)
    return {"healthy": h.healthy, "partitions": h.partitions,
            "under_replicated": h.under_replicated, "under_min_isr": h.under_min_isr,
            "offline": h.offline, "metadata_offset": image.provenance.offset,
            "problems": unhealthy_partitions(image, layers, problems_max)}
