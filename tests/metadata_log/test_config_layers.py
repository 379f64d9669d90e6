"""Which value a config has and where it comes from (Kafka's layers and synonyms)."""
from __future__ import annotations

from clients.protocol import messages as M
from metadata_log import EMPTY_IMAGE, MetadataDelta, Provenance
from metadata_log.config_layers import ConfigLayers, ConfigSource as S
from metadata_log.image import ConfigResourceType

BROKER, TOPIC = int(ConfigResourceType.BROKER), int(ConfigResourceType.TOPIC)


def configs(*records: tuple[int, str, str, str | None]):
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(M.TopicRecord(name="t", topic_id=__import__("uuid").UUID(int=7)))
    for rtype, rname, key, value in records:
        delta.replay(M.ConfigRecord(resource_type=rtype, resource_name=rname, name=key, value=value))
    return delta.apply(Provenance(1, 1)).configs


def test_topic_config_beats_every_broker_layer() -> None:
    layers = ConfigLayers(configs((TOPIC, "t", "retention.ms", "5"), (BROKER, "1", "log.retention.ms", "6"),
                                  (BROKER, "", "log.retention.ms", "7")), 1, {"log.retention.ms": "8"})
    entry = layers.topic_entry("t", "retention.ms")
    assert (entry.value, entry.source) == ("5", S.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", "5", S.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "6", S.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "7", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "8", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG)]


def test_layer_order_is_per_broker_then_cluster_default_then_static_then_default() -> None:
    c = configs((BROKER, "1", "message.max.bytes", "100"), (BROKER, "", "message.max.bytes", "200"))
    assert ConfigLayers(c, 1, {"message.max.bytes": "300"}).topic_value("t", "max.message.bytes") == "100"
    assert ConfigLayers(c, 2, {"message.max.bytes": "300"}).topic_value("t", "max.message.bytes") == "200"
    only_static = ConfigLayers(configs(), 2, {"message.max.bytes": "300"})
    assert only_static.topic_entry("t", "max.message.bytes").source == S.STATIC_BROKER_CONFIG
    default = ConfigLayers(configs(), 2, {}).topic_entry("t", "max.message.bytes")
    assert (default.value, default.source, default.is_default) == ("1048588", S.DEFAULT_CONFIG, True)


def test_a_dynamic_hours_key_beats_a_static_ms_key_and_is_converted() -> None:
    # Kafka lists synonyms layer by layer: a dynamic cluster-wide log.retention.hours comes
    # before a static log.retention.ms, so it wins.
    layers = ConfigLayers(configs((BROKER, "", "log.retention.hours", "2")), 1,
                          {"log.retention.ms": "1000"})
    entry = layers.topic_entry("t", "retention.ms")
    assert (entry.value, entry.source) == (str(2 * 3_600_000), S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert layers.topic_config("t")["retention.ms"] == "7200000"


def test_within_a_layer_the_finer_unit_wins() -> None:
    layers = ConfigLayers(configs(), 1, {"log.retention.hours": "1", "log.retention.minutes": "3"})
    assert layers.topic_value("t", "retention.ms") == str(3 * 60_000)


def test_broker_entries_show_read_only_and_dynamic_keys_with_sources() -> None:
    layers = ConfigLayers(configs((BROKER, "1", "log.cleaner.backoff.ms", "10")), 1, {"node.id": "1"})
    node = layers.broker_entry("node.id")
    assert (node.value, node.source, node.read_only) == ("1", S.STATIC_BROKER_CONFIG, True)
    backoff = layers.broker_entry("log.cleaner.backoff.ms")
    assert (backoff.value, backoff.source, backoff.read_only) == ("10", S.DYNAMIC_BROKER_CONFIG, False)
    assert layers.broker_entry("no.such.key") is None
    assert layers.broker_value("log.cleaner.backoff.ms") == "10"


def test_sensitive_values_are_never_shown() -> None:
    layers = ConfigLayers(configs(), 1, {"ketch.cluster.secret": "s3cret"})
    entry = layers.broker_entry("ketch.cluster.secret")
    assert entry.sensitive and entry.value is None
    assert all(s.value is None for s in entry.synonyms)


def test_a_negative_hours_value_means_no_limit() -> None:
    layers = ConfigLayers(configs(), 1, {"log.retention.hours": "-1"})
    assert layers.topic_value("t", "retention.ms") == "-1"


def test_a_listener_prefixed_key_lists_its_base_key_after_it() -> None:
    prefixed = "listener.name.plaintext.max.connections"
    layers = ConfigLayers(configs((BROKER, "1", prefixed, "100"), (BROKER, "", "max.connections", "1000")), 1, {})
    entry = layers.broker_entry(prefixed)
    assert (entry.value, entry.source) == ("100", S.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        (prefixed, "100", S.DYNAMIC_BROKER_CONFIG),
        ("max.connections", "1000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("max.connections", "2147483647", S.DEFAULT_CONFIG)]
