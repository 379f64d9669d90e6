"""The feature versions this Ketch build supports (KIP-584): what a broker registers with,
what ApiVersions reports, and the metadata.version a controller finalizes on an empty log.

21 is Kafka 3.9-IV0: the highest level whose records (PartitionRecord v2, RegisterBrokerRecord
v3, BrokerRegistrationChangeRecord v2) match the schemas in ../shared/kafka-protocol."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_log.image import MetadataImage

__all__ = ["ELR_FEATURE", "METADATA_VERSION", "SUPPORTED_FEATURES", "elr_enabled"]

METADATA_VERSION = 21
# KIP-966 eligible leader replicas: level 1 turns them on (Kafka 4.1's feature).
ELR_FEATURE = "eligible.leader.replicas.version"

# feature name -> (min, max) supported level
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"metadata.version": (1, METADATA_VERSION),
                                                  ELR_FEATURE: (0, 1)}


def elr_enabled(image: "MetadataImage") -> bool:
    return image.features.levels.get(ELR_FEATURE, 0) >= 1
