"""Kafka's feature-update wire enum (UpdateFeaturesRequest v1+ ``UpgradeType``, KIP-778),
shared by the controller that applies it and the admin client that sends it."""
from __future__ import annotations

from enum import IntEnum

__all__ = ["UpgradeType"]


class UpgradeType(IntEnum):
    """FeatureUpdate.UpgradeType. A v0 request's ``AllowDowngrade`` reads as SAFE_DOWNGRADE."""
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2       # lossless: refused if a level in between changed the metadata
    UNSAFE_DOWNGRADE = 3     # lossy: Kafka refuses it for metadata.version (KAFKA-13896)
