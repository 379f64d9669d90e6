"""metadata_log.cluster_links: a link's configs parsed, shown and turned into the client
settings that reach the source."""
from __future__ import annotations

from clients.protocol.errors import ErrorCode
from clients.security.client_auth import ClientSecurity
from clients.security.listeners import SecurityProtocol
from metadata_log.cluster_links import (
    CLUSTER_LINK_CONFIGS, link_config_entries, parse_link, source_client_properties,
)

BASE = {"bootstrap.servers": "a:9092, b:9093", "topics": "orders, audit-.*"}


def test_defaults_and_parsed_values() -> None:
    link, problem = parse_link("east", BASE)
    assert problem is None and link is not None
    assert link.bootstrap_servers == ("a:9092", "b:9093")
    assert (link.consumer_offset_sync_enable, link.consumer_offset_sync_ms,
            link.topic_config_sync_ms, link.metadata_max_age_ms) == (False, 5000, 5000, 5000)


def test_topics_match_in_full_and_never_internal_topics() -> None:
    link, _ = parse_link("east", {**BASE, "topics": "orders,audit-.*,.*"})
    assert link is not None
    assert link.mirrors_topic("orders") and link.mirrors_topic("audit-eu")
    assert not link.mirrors_topic("__consumer_offsets")
    assert not link.mirrors_topic("__transaction_state")
    only, _ = parse_link("east", {**BASE, "topics": "orders"})
    assert only is not None
    assert only.mirrors_topic("orders") and not only.mirrors_topic("orders2")
    assert not only.mirrors_topic("xorders")
    none, _ = parse_link("east", {"bootstrap.servers": "a:1"})
    assert none is not None and not none.mirrors_topic("orders")


def test_group_sync_needs_the_switch_and_a_matching_pattern() -> None:
    off, _ = parse_link("e", {**BASE, "consumer.offset.sync.groups": "app-.*"})
    assert off is not None and not off.syncs_group("app-1")
    on, _ = parse_link("e", {**BASE, "consumer.offset.sync.groups": "app-.*",
                             "consumer.offset.sync.enable": "TRUE"})
    assert on is not None and on.syncs_group("app-1") and not on.syncs_group("other")


def test_empty_name_is_invalid_request() -> None:
    assert parse_link("", BASE)[1] == (ErrorCode.INVALID_REQUEST, "Cluster link name can't be empty")


def test_secrets_are_hidden_and_defaults_shown() -> None:
    entries = {e.name: e for e in link_config_entries({
        **BASE, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "s3cret"})}
    assert entries["sasl.password"].value is None and entries["sasl.password"].sensitive
    assert entries["sasl.username"].value == "alice" and not entries["sasl.username"].is_default
    assert entries["metadata.max.age.ms"].value == "5000" and entries["metadata.max.age.ms"].is_default
    assert "ssl.key.password" not in entries        # no default, not set: not shown
    assert all(CLUSTER_LINK_CONFIGS[n].sensitive for n in ("sasl.jaas.config", "ssl.keystore.key",
                                                            "ssl.key.password"))


def test_client_settings_for_the_source() -> None:
    props = source_client_properties({
        **BASE, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": "s3cret", "metadata.max.age.ms": "100"})
    # Only what the client takes: the link's own scheduling keys stay behind.
    assert props == {"bootstrap.servers": "a:9092, b:9093", "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                     "sasl.password": "s3cret"}
    security = ClientSecurity.from_config(props.get)
    assert security.protocol == SecurityProtocol.SASL_PLAINTEXT
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-256", "alice", "s3cret")
