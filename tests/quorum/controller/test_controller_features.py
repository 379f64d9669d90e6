"""UpdateFeatures on the controller: Kafka's FeatureControlManager rules for upgrades, safe
and unsafe downgrades, the registered brokers' ranges, metadata.version's own rules,
validate_only, and the response's shape by version."""
from __future__ import annotations

import pytest

from clients.protocol import decode_message, encode_message, messages as M
from clients.protocol.errors import ErrorCode
from clients.protocol.features import UpgradeType
from metadata_log.features import metadata_changed_between
from tests.quorum.controller.harness import Harness

U = M.UpdateFeaturesRequest
MV = "metadata.version"


def update(h: Harness, *updates: tuple[str, int, UpgradeType], validate_only: bool = False,
           allow_downgrade: bool = False) -> tuple[M.UpdateFeaturesResponse, tuple]:
    request = U(validate_only=validate_only, feature_updates=[
        U.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=int(kind),
                           allow_downgrade=allow_downgrade)
        for name, level, kind in updates])
    result = h.controller.handle_update_features(request, h.now_ms)
    return h.commit(result), result.records


def setup(brokers: int = 2) -> Harness:
    h = Harness()
    for b in range(1, brokers + 1):
        h.start_broker(b)
    assert h.image.features.levels == {MV: 21, "eligible.leader.replicas.version": 1}
    return h


def test_safe_downgrade_and_upgrade_of_metadata_version_write_feature_level_records() -> None:
    h = setup()
    response, records = update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE))
    assert (response.error_code, response.error_message) == (0, None)
    assert [(r.name, r.feature_level) for r in records] == [(MV, 18)]
    assert h.image.features.levels[MV] == 18
    assert [(r.feature, r.error_code) for r in response.results] == [(MV, 0)]
    response, records = update(h, (MV, 21, UpgradeType.UPGRADE))
    assert response.error_code == 0 and h.image.features.levels[MV] == 21
    # The level it already has: accepted, nothing written.
    response, records = update(h, (MV, 21, UpgradeType.UPGRADE))
    assert response.error_code == 0 and records == ()


@pytest.mark.parametrize("name, level, kind, says", [
    (MV, 18, UpgradeType.UPGRADE, "Can't downgrade the version of this feature without setting"),
    (MV, 22, UpgradeType.UPGRADE, "The controller only supports versions [1-21]"),
    (MV, -1, UpgradeType.SAFE_DOWNGRADE, "A feature version cannot be less than 0."),
    (MV, 0, UpgradeType.SAFE_DOWNGRADE, "The controller only supports versions [1-21]"),
    (MV, 3, UpgradeType.SAFE_DOWNGRADE, "Unable to set a metadata.version less than 4"),
    # 21 -> 16 crosses 17 (3.7-IV2), which changed the metadata
    (MV, 16, UpgradeType.SAFE_DOWNGRADE, "might delete metadata information"),
    (MV, 16, UpgradeType.UNSAFE_DOWNGRADE, "Unsafe metadata downgrade is not supported"),
    (MV, 20, UpgradeType.UNKNOWN, "does not support the given upgrade type"),
    (MV, 20, 9, "does not support the given upgrade type"),
    ("transaction.version", 1, UpgradeType.UPGRADE, "The controller does not support this feature."),
])
def test_refused_updates_are_invalid_update_version_and_write_nothing(name, level, kind, says) -> None:
    h = setup()
    response, records = update(h, (name, level, kind))
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION, response
    assert response.error_message.startswith(
        "The update failed for all features since the following feature had an error: "
        f"Invalid update version {level} for feature {name}. ")
    assert says in response.error_message
    assert records == () and h.image.features.levels[MV] == 21


def test_an_upgrade_type_that_goes_the_wrong_way_is_refused() -> None:
    h = setup()
    update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE))
    response, _ = update(h, (MV, 20, UpgradeType.SAFE_DOWNGRADE))
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "Can't downgrade to a newer version." in response.error_message


def test_every_registered_brokers_range_bounds_the_level() -> None:
    h = setup(brokers=1)
    R = M.BrokerRegistrationRequest
    old = h.registration_request(2)
    old = R(**{**{f: getattr(old, f) for f in old.__dataclass_fields__},
               "features": [R.Feature(name=MV, min_supported_version=19, max_supported_version=21)]})
    assert h.commit(h.controller.handle_broker_registration(old, h.now_ms)).error_code == 0
    response, _ = update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE))     # still fenced: counts
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "Broker 2 only supports versions [19-21]" in response.error_message
    response, _ = update(h, (MV, 19, UpgradeType.SAFE_DOWNGRADE))
    assert response.error_code == 0 and h.image.features.levels[MV] == 19


def test_a_v0_request_downgrades_with_allow_downgrade() -> None:
    h = setup()
    response, _ = update(h, (MV, 18, UpgradeType.UPGRADE))             # UPGRADE: v0's default
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    response, _ = update(h, (MV, 18, UpgradeType.UPGRADE), allow_downgrade=True)
    assert response.error_code == 0 and h.image.features.levels[MV] == 18


def test_validate_only_decides_and_writes_nothing() -> None:
    h = setup()
    response, records = update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE), validate_only=True)
    assert response.error_code == 0 and records == () and h.image.features.levels[MV] == 21
    response, records = update(h, (MV, 16, UpgradeType.SAFE_DOWNGRADE), validate_only=True)
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION


def test_one_bad_update_fails_the_whole_request() -> None:
    h = setup()
    response, records = update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE),
                               ("group.version", 1, UpgradeType.UPGRADE))
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION and records == ()
    assert [(r.feature, r.error_code) for r in response.results] == [
        (MV, ErrorCode.INVALID_UPDATE_VERSION), ("group.version", ErrorCode.INVALID_UPDATE_VERSION)]
    response, _ = update(h, (MV, 18, UpgradeType.SAFE_DOWNGRADE), (MV, 19, UpgradeType.SAFE_DOWNGRADE))
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert h.image.features.levels == {MV: 21, "eligible.leader.replicas.version": 1}


def test_removing_an_unknown_feature_is_a_no_op() -> None:
    h = setup()
    response, records = update(h, ("transaction.version", 0, UpgradeType.SAFE_DOWNGRADE))
    assert response.error_code == 0 and records == ()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_per_feature_results_exist_up_to_v1(version: int) -> None:
    h = setup()
    response, _ = update(h, (MV, 20, UpgradeType.SAFE_DOWNGRADE))
    decoded = decode_message(M.UpdateFeaturesResponse, version, encode_message(response, version))
    assert decoded.error_code == 0
    assert [r.feature for r in decoded.results] == ([MV] if version <= 1 else [])


def test_metadata_changes_between_levels_follow_kafkas_table() -> None:
    assert not metadata_changed_between(21, 17)      # 18..21 changed nothing
    assert metadata_changed_between(21, 16)          # 17 (3.7-IV2) did
    assert not metadata_changed_between(10, 8) and metadata_changed_between(11, 10)
    assert metadata_changed_between(4, 5) == metadata_changed_between(5, 4)
