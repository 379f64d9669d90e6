"""metadata_log/node_config.py: server.properties checked against the config catalogue, for
controllers and brokers alike (issue 12's configuration bullets)."""
from __future__ import annotations

import pytest

from metadata_log.config_defs import BROKER_CONFIGS
from metadata_log.node_config import ConfigError, parse_voters, read_node_properties


def test_known_keys_read_typed_with_the_catalogues_defaults() -> None:
    node = read_node_properties({"node.id": "3", "auto.create.topics.enable": " FALSE ",
                                 "log.retention.hours": "5", "broker.rack": " r1 "})
    assert node.unknown == () and node.warnings == []
    assert node.get_int("node.id") == 3
    assert node.get_bool("auto.create.topics.enable") is False
    assert node.get_int("log.retention.hours") == 5          # a synonym is a key of its own
    assert node.get_str("broker.rack") == "r1"
    # Unset: Kafka's default from the catalogue, or the caller's, or None where Kafka has none.
    assert node.get_int("num.partitions") == int(BROKER_CONFIGS["num.partitions"].default) == 1
    assert node.get_int("replica.lag.time.max.ms") == 30_000
    assert node.get_int("num.partitions", default=4) == 4
    assert node.get_str("metadata.log.dir") is None


@pytest.mark.parametrize("key, value, says", [
    ("log.retention.ms", "abc", "Not a number of type LONG"),
    ("log.retention.hours", "1.5", "Not a number of type INT"),
    ("log.roll.hours", "0", "at least 1"),
    ("num.partitions", "0", "at least 1"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("ketch.event.loop", "trio", "asyncio, uvloop"),
    ("controller.quorum.voters", "1@nohost", "is not id@host:port"),
])
def test_every_error_names_its_key_and_value(key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        read_node_properties({"node.id": "1", key: value})
    message = str(info.value)
    assert f"Invalid value {value} for configuration {key}:" in message
    assert says in message


def test_unknown_keys_warn_once_each_with_the_nearest_known_key() -> None:
    node = read_node_properties({"log.retention.hourz": "5", "log.retention.ms": "1000",
                                 "frobnicate.level": "11", "node.id": "1"})
    assert node.unknown == (("log.retention.hourz", "log.retention.hours"),
                            ("frobnicate.level", None))
    assert node.warnings == [
        "log.retention.hourz is not a known configuration key and is ignored "
        "(did you mean log.retention.hours?)",
        "frobnicate.level is not a known configuration key and is ignored",
    ]
    assert node.get_int("log.retention.ms") == 1000


def test_listener_prefixed_keys_are_known() -> None:
    node = read_node_properties({"listener.name.internal.max.connections": "10"})
    assert node.unknown == ()


def test_an_unset_key_without_any_default_is_an_error_naming_it() -> None:
    node = read_node_properties({})
    with pytest.raises(ConfigError, match=r"^log\.retention\.minutes is required$"):
        node.get_int("log.retention.minutes")          # Kafka's default is null


def test_typed_reads_refuse_the_wrong_type_and_unknown_keys() -> None:
    node = read_node_properties({})
    with pytest.raises(TypeError, match="log.dirs is a string"):
        node.get_int("log.dirs")
    with pytest.raises(KeyError, match="not in the config catalogue"):
        node.get_int("no.such.key")


def test_voters() -> None:
    assert parse_voters("1@a:1, 2@[::1]:2", "controller.quorum.voters") == {
        1: ("a", 1), 2: ("::1", 2)}
    for bad, says in (("", "k is required"), ("1@a:1,1@b:2", "k: node 1 listed twice"),
                      ("x@a:1", "k: 'x@a:1' is not id@host:port")):
        with pytest.raises(ConfigError) as info:
            parse_voters(bad, "k")
        assert str(info.value) == says
