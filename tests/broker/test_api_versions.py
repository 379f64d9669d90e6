"""The broker's advertised version ranges against Kafka 4.1's (pure).

Kafka 4.1's ApiVersions answer comes from an independent source, kafka-python 3.0's table
of what each Apache Kafka release advertises (kafka/protocol/broker_version_data.py).
Every range must equal Kafka 4.1's, except a maximum named in KAFKA_4_1_MAX_EXCEPTIONS
with its reason; and every advertised version must exist in the schema Ketch's codec is
generated from, so that it can be decoded. That each advertised version is also answered
by a running broker is tests/integration/test_protocol_features.py's
``test_every_advertised_version_is_answered``."""
from __future__ import annotations

import pytest

from broker.apis import KAFKA_4_1_ABSENT, KAFKA_4_1_MAX_EXCEPTIONS, SUPPORTED_VERSIONS
from clients.protocol import ApiKey, _schemas

broker_version_data = pytest.importorskip("kafka.protocol.broker_version_data")
KAFKA_4_1: dict[int, tuple[int, int]] = broker_version_data.BROKER_API_VERSIONS[(4, 1)]


@pytest.mark.parametrize("api_key", sorted(SUPPORTED_VERSIONS), ids=lambda k: ApiKey(k).name)
def test_each_range_is_kafka_4_1s_unless_a_comment_says_why(api_key: int) -> None:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    if api_key in KAFKA_4_1_ABSENT:
        assert api_key not in KAFKA_4_1     # an exception that no longer is one goes
        return
    kafka_lo, kafka_hi = KAFKA_4_1[api_key]
    assert lo == kafka_lo
    if api_key in KAFKA_4_1_MAX_EXCEPTIONS:
        expected_kafka_hi, _reason = KAFKA_4_1_MAX_EXCEPTIONS[api_key]
        assert (hi, kafka_hi) == (_schema_max(api_key), expected_kafka_hi)
        assert hi < kafka_hi            # an exception that no longer is one goes
    else:
        assert hi == kafka_hi


@pytest.mark.parametrize("api_key", sorted(SUPPORTED_VERSIONS), ids=lambda k: ApiKey(k).name)
def test_every_advertised_version_has_a_schema(api_key: int) -> None:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    schema_lo, schema_hi = _schema_range(api_key)
    assert schema_lo <= lo <= hi <= schema_hi


def _schema_range(api_key: int) -> tuple[int, int]:
    for kind in ("request", "response"):
        found = [entry[2] for entry in _schemas.SCHEMAS.values() if entry[0] == api_key and entry[1] == kind]
        assert len(found) == 1
    (lo, hi), = [entry[2] for entry in _schemas.SCHEMAS.values() if entry[0] == api_key and entry[1] == "request"]
    return lo, hi


def _schema_max(api_key: int) -> int:
    return _schema_range(api_key)[1]
