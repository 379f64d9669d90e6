"""The feature versions this Ketch build supports (KIP-584): what a broker registers with,
what ApiVersions reports, the metadata.version a controller finalizes on an empty log,
and Kafka's rules for moving metadata.version (UpdateFeatures, KIP-778).

21 is Kafka 3.9-IV0: the highest level whose records (PartitionRecord v2, RegisterBrokerRecord
v3, BrokerRegistrationChangeRecord v2) match the schemas in ../shared/kafka-protocol."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_log.image import MetadataImage

__all__ = [
    "ELR_FEATURE", "METADATA_VERSION", "METADATA_VERSION_FEATURE",
    "METADATA_VERSION_MIN_SETTABLE", "SUPPORTED_FEATURES", "elr_enabled",
    "metadata_changed_between",
]

METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION = 21
# KIP-966 eligible leader replicas: level 1 turns them on (Kafka 4.1's feature).
ELR_FEATURE = "eligible.leader.replicas.version"
# Kafka's MetadataVersion.MINIMUM_BOOTSTRAP_VERSION (3.3-IV0): the first level that has
# FeatureLevelRecord at all, so nothing lower can be written.
METADATA_VERSION_MIN_SETTABLE = 4

# feature name -> (min, max) supported level
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {METADATA_VERSION_FEATURE: (1, METADATA_VERSION),
                                                  ELR_FEATURE: (0, 1)}

# The metadata.version levels that changed the metadata records (Kafka's
# MetadataVersion.didMetadataChange, levels 1..21: 3.0-IV1 .. 3.9-IV0). Going down across
# one of them could drop information that only the higher level can express.
_METADATA_CHANGED_AT = frozenset({1, 3, 5, 6, 7, 8, 11, 13, 14, 15, 17})


def metadata_changed_between(a: int, b: int) -> bool:
    """Whether some level in (low, high] changed the metadata, as Kafka's
    MetadataVersion.checkIfMetadataChanged (the lower level itself does not count)."""
    low, high = min(a, b), max(a, b)
    return any(level in _METADATA_CHANGED_AT for level in range(low + 1, high + 1))


def elr_enabled(image: "MetadataImage") -> bool:
    return image.features.levels.get(ELR_FEATURE, 0) >= 1
