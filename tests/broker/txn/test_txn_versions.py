"""The transaction coordinator's and FindCoordinator's advertised versions against Kafka
4.1's (pure; the same source as tests/broker/test_api_versions.py)."""
from __future__ import annotations

import pytest

from broker.apis import KAFKA_4_1_MAX_EXCEPTIONS
from broker.find_coordinator import FIND_COORDINATOR_VERSIONS
from broker.txn.driver import TXN_VERSIONS
from clients.protocol import ApiKey, _schemas

broker_version_data = pytest.importorskip("kafka.protocol.broker_version_data")
KAFKA_4_1: dict[int, tuple[int, int]] = broker_version_data.BROKER_API_VERSIONS[(4, 1)]
SERVED = {**TXN_VERSIONS, ApiKey.FIND_COORDINATOR: FIND_COORDINATOR_VERSIONS}


@pytest.mark.parametrize("api_key", sorted(SERVED), ids=lambda k: ApiKey(k).name)
def test_each_range_is_kafka_4_1s_unless_a_comment_says_why(api_key: int) -> None:
    lo, hi = SERVED[api_key]
    kafka_lo, kafka_hi = KAFKA_4_1[api_key]
    assert lo == kafka_lo
    (schema_lo, schema_hi), = [entry[2] for entry in _schemas.SCHEMAS.values()
                               if entry[0] == api_key and entry[1] == "request"]
    assert schema_lo <= lo <= hi <= schema_hi
    if api_key in KAFKA_4_1_MAX_EXCEPTIONS:
        assert (hi, kafka_hi) == (schema_hi, KAFKA_4_1_MAX_EXCEPTIONS[api_key][0])
        assert hi < kafka_hi
    else:
        assert hi == kafka_hi
