"""The feature versions this Ketch build supports (KIP-584): what a broker registers with,
what ApiVersions reports, and the metadata.version a controller finalizes on an empty log.

21 is Kafka 3.9-IV0: the highest level whose records (PartitionRecord v2, RegisterBrokerRecord
v3, BrokerRegistrationChangeRecord v2) match the schemas in ../shared/kafka-protocol."""
from __future__ import annotations

__all__ = ["METADATA_VERSION", "SUPPORTED_FEATURES"]

METADATA_VERSION = 21

# feature name -> (min, max) supported level
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"metadata.version": (1, METADATA_VERSION)}
