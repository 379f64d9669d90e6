"""parse_config: Kafka's keys, Kafka's defaults, and clear errors naming the key."""
from __future__ import annotations

import pytest

from clients._core.config import ConfigType, config_keys, parse_config
from clients.errors import ConfigError

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_producer_defaults_are_kafkas() -> None:
    c = parse_config("producer", BOOT)
    assert c["acks"] == -1 and c["enable.idempotence"] is True
    assert c["linger.ms"] == 5 and c["batch.size"] == 16384 and c["buffer.memory"] == 33554432
    assert c["delivery.timeout.ms"] == 120000 and c["max.in.flight.requests.per.connection"] == 5
    assert c["max.request.size"] == 1048576 and c["compression.type"] == "none"
    assert c["request.timeout.ms"] == 30000 and c["retry.backoff.ms"] == 100
    assert c["retry.backoff.max.ms"] == 1000 and c["metadata.max.age.ms"] == 300000
    assert c["receive.buffer.bytes"] == 32768 and c["connections.max.idle.ms"] == 540000
    assert c["bootstrap.servers"] == ("127.0.0.1:9092",)


def test_consumer_and_admin_defaults_are_kafkas() -> None:
    c = parse_config("consumer", {**BOOT, "group.id": "g"})
    assert c["auto.offset.reset"] == "latest" and c["enable.auto.commit"] is True
    assert c["auto.commit.interval.ms"] == 5000 and c["session.timeout.ms"] == 45000
    assert c["heartbeat.interval.ms"] == 3000 and c["max.poll.records"] == 500
    assert c["max.poll.interval.ms"] == 300000 and c["isolation.level"] == "read_uncommitted"
    assert c["partition.assignment.strategy"] == ("range", "cooperative-sticky")
    assert c["default.api.timeout.ms"] == 60000 and c["group.instance.id"] is None
    a = parse_config("admin", BOOT)
    assert a["connections.max.idle.ms"] == 300000 and a["default.api.timeout.ms"] == 60000


def test_strings_and_python_values_give_the_same_typed_config() -> None:
    from_strings = parse_config("producer", {**BOOT, "linger.ms": "20", "acks": "1",
                                             "enable.idempotence": "false",
                                             "compression.type": "LZ4"})
    from_values = parse_config("producer", {**BOOT, "linger.ms": 20, "acks": 1,
                                            "enable.idempotence": False,
                                            "compression.type": "lz4"})
    assert dict(from_strings) == dict(from_values)
    assert from_values["compression.type"] == "lz4" and from_values["acks"] == 1
    assert parse_config("producer", BOOT, linger_ms=7)["linger.ms"] == 7


@pytest.mark.parametrize("kind,props,key", [
    ("producer", {"linger.msec": 5}, "linger.msec"),
    ("producer", {"group.id": "g"}, "group.id"),
    ("consumer", {"acks": "all"}, "acks"),
    ("producer", {"acks": "2"}, "acks"),
    ("producer", {"linger.ms": "soon"}, "linger.ms"),
    ("producer", {"linger.ms": -1}, "linger.ms"),
    ("producer", {"batch.size": 1 << 40}, "batch.size"),
    ("producer", {"compression.type": "brotli"}, "compression.type"),
    ("producer", {"enable.idempotence": "yes"}, "enable.idempotence"),
    ("producer", {"security.protocol": "TLS"}, "security.protocol"),
    ("producer", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ("admin", {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a"}, "sasl.mechanism"),
    ("producer", {"transactional.id": ""}, "transactional.id"),
    ("producer", {"transactional.id": "tx", "enable.idempotence": False}, "enable.idempotence"),
    ("producer", {"transactional.id": "tx", "acks": 1}, "acks"),
    ("producer", {"key.serializer": 42}, "key.serializer"),
    ("consumer", {"auto.offset.reset": "smallest"}, "auto.offset.reset"),
    ("consumer", {"isolation.level": "serializable"}, "isolation.level"),
    ("consumer", {"partition.assignment.strategy": "fair"}, "partition.assignment.strategy"),
    ("consumer", {"group.id": "g", "max.poll.records": 0}, "max.poll.records"),
    ("admin", {"bootstrap.servers": "nohost"}, "bootstrap.servers"),
    ("admin", {"bootstrap.servers": "h:99999"}, "bootstrap.servers"),
])
def test_bad_keys_and_values_name_the_key(kind: str, props: dict, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(kind, {**BOOT, **props})
    assert e.value.key == key and repr(key) in str(e.value)


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        parse_config("consumer", {"group.id": "g"})


def test_idempotence_rules_follow_kafka() -> None:
    # Default idempotence yields to conflicting keys; an explicit one refuses them.
    assert parse_config("producer", {**BOOT, "acks": "1"})["enable.idempotence"] is False
    assert parse_config("producer", {**BOOT, "max.in.flight.requests.per.connection": 6}
                        )["enable.idempotence"] is False
    for key, value in (("acks", "0"), ("max.in.flight.requests.per.connection", 6),
                       ("retries", 0)):
        with pytest.raises(ConfigError) as e:
            parse_config("producer", {**BOOT, key: value, "enable.idempotence": True})
        assert e.value.key == key


def test_delivery_timeout_covers_linger_and_request_timeout() -> None:
    c = parse_config("producer", {**BOOT, "linger.ms": 100000, "request.timeout.ms": 30000})
    assert c["delivery.timeout.ms"] == 130000
    with pytest.raises(ConfigError) as e:
        parse_config("producer", {**BOOT, "delivery.timeout.ms": 1000})
    assert e.value.key == "delivery.timeout.ms"


def test_auto_commit_needs_a_group() -> None:
    assert parse_config("consumer", BOOT)["enable.auto.commit"] is False
    with pytest.raises(ConfigError) as e:
        parse_config("consumer", {**BOOT, "enable.auto.commit": True})
    assert e.value.key == "enable.auto.commit"
    with pytest.raises(ConfigError) as e:
        parse_config("consumer", {**BOOT, "group.instance.id": "i1"})
    assert e.value.key == "group.instance.id"


def test_assignor_java_names_and_serializer_names_resolve() -> None:
    c = parse_config("consumer", {**BOOT, "group.id": "g", "partition.assignment.strategy":
                                  "org.apache.kafka.clients.consumer.RoundRobinAssignor, sticky",
                                  "value.deserializer":
                                  "org.apache.kafka.common.serialization.StringDeserializer"})
    assert c["partition.assignment.strategy"] == ("roundrobin", "sticky")
    assert c["value.deserializer"](b"\xc3\xa9") == "\u00e9"
    p = parse_config("producer", {**BOOT, "key.serializer": "string"})
    assert p["key.serializer"]("\u00e9") == b"\xc3\xa9"


def test_every_key_has_a_typed_default_of_its_type() -> None:
    py = {ConfigType.BOOLEAN: bool, ConfigType.INT: int, ConfigType.LONG: int,
          ConfigType.DOUBLE: float, ConfigType.STRING: (str, int), ConfigType.LIST: tuple}
    for kind in ("producer", "consumer", "admin"):
        c = parse_config(kind, BOOT)
        assert set(c) == {k.name for k in config_keys(kind)}
        for k in config_keys(kind):
            if c[k.name] is not None and k.type in py:
                assert isinstance(c[k.name], py[k.type]), k.name
