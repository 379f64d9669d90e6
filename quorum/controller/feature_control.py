"""UpdateFeatures (KIP-584, KIP-778): finalized feature levels, as Kafka's
FeatureControlManager decides them.

Theory of operation
-------------------
A request names features and, for each, a level and an upgrade type (v0: ``AllowDowngrade``
reads as SAFE_DOWNGRADE). Every update is checked against the committed image; the first
that fails fails the whole request (INVALID_UPDATE_VERSION, top level, Kafka's message
"The update failed for all features since the following feature had an error: ..."), and
nothing is written. Otherwise one FeatureLevelRecord per update is appended atomically
(level 0 removes a feature), unless ``validate_only``.

One update, in Kafka's order:

1. the upgrade type is known; the level is not negative;
2. the level is supported by this controller (``metadata_log.features``; Ketch's
   controllers do not register, so every controller is taken to be this build) and by
   every registered broker, from the ranges in its registration (a feature a broker does
   not list is supported only at level 0, Kafka's DISABLED);
3. a lower level than the finalized one needs a downgrade type, a higher one UPGRADE;
4. metadata.version: a known level, at least 3.3-IV0 (4); a downgrade across a level that
   changed the metadata is refused (safe: "might delete metadata information"; unsafe:
   "not supported in this version", as in Kafka 4, KAFKA-13896).

The response carries per-feature results (each NONE) on success for v0-1; the encoder
leaves them out at v2, where they no longer exist. On failure the top-level error is
repeated per feature for v0-1 readers (Kafka 4 sends the top-level error alone; clients
that read the top level first, Kafka's among them, see the same thing). The finalized
levels change when the record is replayed; brokers' ApiVersions then report them with the
metadata offset as the finalized features epoch.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.protocol.features import UpgradeType
from metadata_log.features import (
    METADATA_VERSION_FEATURE, METADATA_VERSION_MIN_SETTABLE, metadata_changed_between,
)
from metadata_log.image import MetadataImage
from quorum.controller.result import ControllerResult

__all__ = ["update_features"]

DISABLED = (0, 0)       # Kafka's QuorumFeatures.DISABLED: a feature a node does not know


def _not_supported(level: int, what: str, supported: tuple[int, int]) -> str | None:
    lo, hi = supported
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions [{lo}-{hi}]"


def _check(image: MetadataImage, name: str, level: int, upgrade_type: int,
           supported_locally: Mapping[str, tuple[int, int]]) -> str | None:
    """Why ``name`` may not go to ``level``, or None (FeatureControlManager.updateFeature)."""
    try:
        kind = UpgradeType(upgrade_type)
    except ValueError:
        kind = UpgradeType.UNKNOWN
    if kind is UpgradeType.UNKNOWN:
        return "The controller does not support the given upgrade type."
    if level < 0:
        return "A feature version cannot be less than 0."
    reason = _not_supported(level, "The controller", supported_locally.get(name, DISABLED))
    for broker_id, b in sorted(image.cluster.brokers.items()):
        if reason is not None:
            break
        ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in b.features}
        reason = _not_supported(level, f"Broker {broker_id}", ranges.get(name, DISABLED))
    if reason is not None:
        return reason
    current = image.features.levels.get(name, 0)
    if level < current and kind is UpgradeType.UPGRADE:
        return ("Can't downgrade the version of this feature without setting the upgrade "
                "type to either safe or unsafe downgrade.")
    if level > current and kind is not UpgradeType.UPGRADE:
        return "Can't downgrade to a newer version."
    if name != METADATA_VERSION_FEATURE:
        # Kafka validates the dependencies between its named features here; Ketch's other
        # feature, eligible.leader.replicas.version, depends on no metadata.version level
        # Ketch supports (every level writes the ELR fields of PartitionChangeRecord v2).
        return None
    if level < METADATA_VERSION_MIN_SETTABLE:
        return (f"Unable to set a metadata.version less than {METADATA_VERSION_MIN_SETTABLE} "
                "(3.3-IV0)")
    if level < current and metadata_changed_between(current, level):
        if kind is UpgradeType.UNSAFE_DOWNGRADE:
            return "Unsafe metadata downgrade is not supported in this version."
        return ("Refusing to perform the requested downgrade because it might delete "
                "metadata information.")
    return None


def update_features(image: MetadataImage, request: messages.UpdateFeaturesRequest,
                    supported_locally: Mapping[str, tuple[int, int]]
                    ) -> ControllerResult[messages.UpdateFeaturesResponse]:
    Response = messages.UpdateFeaturesResponse
    names = [u.feature for u in request.feature_updates]
    records: list[Any] = []
    problem: tuple[ErrorCode, str] | None = None
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        problem = (ErrorCode.INVALID_REQUEST, f"Duplicate feature {duplicates[0]} in the request.")
    for u in request.feature_updates:
        if problem is not None:
            break
        # v0 has no UpgradeType (it decodes as the default, UPGRADE) but AllowDowngrade;
        # v1+ has no AllowDowngrade (it decodes as false).
        upgrade_type = UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else u.upgrade_type
        reason = _check(image, u.feature, u.max_version_level, upgrade_type, supported_locally)
        if reason is not None:
            problem = (ErrorCode.INVALID_UPDATE_VERSION,
                       f"Invalid update version {u.max_version_level} for feature {u.feature}. "
                       f"{reason}")
        elif u.max_version_level != image.features.levels.get(u.feature, 0):
            records.append(messages.FeatureLevelRecord(name=u.feature,
                                                       feature_level=u.max_version_level))
    if problem is not None:
        code, reason = problem
        message = ("The update failed for all features since the following feature had an "
                   f"error: {reason}")
        return ControllerResult((), Response(
            error_code=int(code), error_message=message,
            results=[Response.UpdatableFeatureResult(feature=n, error_code=int(code),
                                                     error_message=message) for n in names]))
    return ControllerResult(() if request.validate_only else tuple(records), Response(
        error_code=ErrorCode.NONE, error_message=None,
        results=[Response.UpdatableFeatureResult(feature=n, error_code=ErrorCode.NONE)
                 for n in names]))
