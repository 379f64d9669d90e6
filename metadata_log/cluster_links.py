"""Cluster links (issue 21): the configs of resource type CLUSTER_LINK, the one home of
their keys, defaults and validation, their parsed form, and the client properties a
destination broker uses to reach the source cluster.

A link is a named config resource (ConfigRecords with Ketch's resource type 64, the name
chosen by the operator), as KIP-714 made client-metrics subscriptions config resources:
created and changed with IncrementalAlterConfigs, described with DescribeConfigs, kept in
snapshots like every ConfigRecord, and deleted by deleting all of its keys. Its keys:

- ``bootstrap.servers`` (required): the source cluster, ``host:port`` list;
- the source's security, with the names Ketch's own client takes (clients/_core/config.py,
  clients/security/client_auth.py): ``security.protocol``, ``sasl.mechanism``,
  ``sasl.username``, ``sasl.password``, ``sasl.jaas.config``, ``ssl.ca.location``, ...;
  secrets are PASSWORD-typed, so DescribeConfigs hides them as Kafka does;
- ``topics``: comma-separated regexes a source topic name must match in full (a Java
  ``Pattern.matches``, Python's ``fullmatch``); a literal name is a regex; empty: none.
  Internal topics (``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata``)
  are never mirrored, whatever the patterns say;
- ``consumer.offset.sync.enable`` / ``consumer.offset.sync.groups`` (regexes) /
  ``consumer.offset.sync.ms``: consumer group offset sync;
- ``topic.config.sync.ms`` and ``metadata.max.age.ms`` (how often the source's topic
  configs are copied and its topic list read).

The controller checks each key's value against ``CLUSTER_LINK_CONFIGS`` and the
resulting set as a whole with ``validate_link`` before it writes a ConfigRecord, and
refuses to delete a link that a mirror topic still uses (``link_in_use``). Brokers read
links with ``cluster_link`` / ``cluster_links`` and parse them with ``parse_link``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from clients.protocol.configs import ConfigResourceType
from clients.protocol.errors import ErrorCode
from metadata_log._config_types import ConfigDef, ConfigType, at_least, one_of
from metadata_log.config_defs import list_items, parse_bool, validate_value
from metadata_log.image import MetadataImage
from metadata_log.mirror_topics import MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE, MirrorState

__all__ = [
    "BOOTSTRAP_SERVERS", "CLUSTER_LINK_CONFIGS", "CONSUMER_OFFSET_SYNC_ENABLE",
    "CONSUMER_OFFSET_SYNC_GROUPS", "CONSUMER_OFFSET_SYNC_MS", "INTERNAL_TOPICS",
    "METADATA_MAX_AGE_MS", "MIRROR_LINK", "MIRROR_SOURCE_TOPIC", "MIRROR_STATE",
    "MIRROR_STATE_ACTIVE", "MIRROR_STATE_PROMOTED", "MIRROR_STATE_STOPPED", "TOPICS",
    "TOPIC_CONFIG_SYNC_MS", "ClusterLink", "LinkConfigEntry", "cluster_link", "cluster_links",
    "link_config_entries", "link_in_use", "mirror_topics_of", "parse_link", "source_client_properties", "validate_link",
]

BOOTSTRAP_SERVERS = "bootstrap.servers"
TOPICS = "topics"
CONSUMER_OFFSET_SYNC_ENABLE = "consumer.offset.sync.enable"
CONSUMER_OFFSET_SYNC_GROUPS = "consumer.offset.sync.groups"
CONSUMER_OFFSET_SYNC_MS = "consumer.offset.sync.ms"
TOPIC_CONFIG_SYNC_MS = "topic.config.sync.ms"
METADATA_MAX_AGE_MS = "metadata.max.age.ms"

# The mirror topic configs' names and states have their home in ``mirror_topics``; these
# spellings are for the link side (a link's deletion and its manager read them).
MIRROR_STATE_ACTIVE = MirrorState.ACTIVE.value
MIRROR_STATE_STOPPED = MirrorState.STOPPED.value
MIRROR_STATE_PROMOTED = MirrorState.PROMOTED.value

# Never mirrored: each cluster's own bookkeeping (offsets are synced by the link manager
# through OffsetCommit, not by copying __consumer_offsets).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})

SYNC_MS_MIN = 100
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# The client keys a link passes to the client that reaches the source, as they are named
# for Ketch's own client; PASSWORD-typed ones are secrets.
_SECURITY_DEFS = (
    ConfigDef("security.protocol", ConfigType.STRING, "PLAINTEXT", one_of(*_SECURITY_PROTOCOLS),
              doc="How to reach the source: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    ConfigDef("sasl.mechanism", ConfigType.STRING, None, one_of(*_SASL_MECHANISMS),
              doc="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ConfigDef("sasl.username", ConfigType.STRING, None, doc="The SASL user on the source"),
    ConfigDef("sasl.password", ConfigType.PASSWORD, None, doc="The SASL user's password"),
    ConfigDef("sasl.jaas.config", ConfigType.PASSWORD, None,
              doc="Kafka's login options (instead of sasl.username / sasl.password)"),
    ConfigDef("ssl.ca.location", ConfigType.STRING, None,
              doc="PEM file of the CAs the source's certificates chain to"),
    ConfigDef("ssl.truststore.location", ConfigType.STRING, None,
              doc="Kafka's name for ssl.ca.location"),
    ConfigDef("ssl.ca.pem", ConfigType.STRING, None, doc="Those CAs as PEM text"),
    ConfigDef("ssl.truststore.certificates", ConfigType.STRING, None,
              doc="Kafka's name for ssl.ca.pem"),
    ConfigDef("ssl.certificate.location", ConfigType.STRING, None,
              doc="PEM file with this cluster's client certificate (mutual TLS)"),
    ConfigDef("ssl.key.location", ConfigType.STRING, None, doc="PEM file with its private key"),
    ConfigDef("ssl.keystore.location", ConfigType.STRING, None,
              doc="PEM file with the client certificate chain and key"),
    ConfigDef("ssl.keystore.certificate.chain", ConfigType.STRING, None,
              doc="The client certificate chain as PEM text"),
    ConfigDef("ssl.keystore.key", ConfigType.PASSWORD, None, doc="The client's private key as PEM text"),
    ConfigDef("ssl.key.password", ConfigType.PASSWORD, None, doc="The private key's password"),
    ConfigDef("ssl.endpoint.identification.algorithm", ConfigType.STRING, "https",
              one_of("https", ""), doc="https: check the source's host name; empty: do not"),
)

# Each key's type, default and single-value check: the controller checks values and
# applies APPEND/SUBTRACT (LIST keys) with these, then the whole link with
# ``validate_link``. DescribeConfigs types and hides values by them.
CLUSTER_LINK_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    ConfigDef(BOOTSTRAP_SERVERS, ConfigType.LIST, None,
              doc="The source cluster's bootstrap servers, host:port list (required)"),
    *_SECURITY_DEFS,
    ConfigDef(TOPICS, ConfigType.LIST, "",
              doc="Regexes a source topic's name must match in full to be mirrored; "
                  "a literal name is a regex; empty: no topic"),
    ConfigDef(CONSUMER_OFFSET_SYNC_ENABLE, ConfigType.BOOLEAN, "false",
              doc="Copy matching consumer groups' committed offsets from the source"),
    ConfigDef(CONSUMER_OFFSET_SYNC_GROUPS, ConfigType.LIST, "",
              doc="Regexes a group id must match in full for its offsets to be synced"),
    ConfigDef(CONSUMER_OFFSET_SYNC_MS, ConfigType.INT, "5000", at_least(SYNC_MS_MIN),
              doc="How often consumer group offsets are synced, in milliseconds"),
    ConfigDef(TOPIC_CONFIG_SYNC_MS, ConfigType.INT, "5000", at_least(SYNC_MS_MIN),
              doc="How often mirror topics' configs are copied from the source, in milliseconds"),
    ConfigDef(METADATA_MAX_AGE_MS, ConfigType.INT, "5000", at_least(SYNC_MS_MIN),
              doc="How often the source's topics are listed (new topics, partitions, "
                  "deletions), in milliseconds"),
)}

Problem = tuple[ErrorCode, str]


@dataclass(frozen=True, slots=True)
class ClusterLink:
    """A link's configs, parsed. ``configs`` keeps what was set, for the source client."""
    name: str
    configs: Mapping[str, str]
    bootstrap_servers: tuple[str, ...]
    topics: tuple["re.Pattern[str]", ...]
    consumer_offset_sync_enable: bool
    consumer_offset_sync_groups: tuple["re.Pattern[str]", ...]
    consumer_offset_sync_ms: int
    topic_config_sync_ms: int
    metadata_max_age_ms: int

    def mirrors_topic(self, name: str) -> bool:
        """A source topic this link mirrors: matched in full by one of ``topics``."""
        return name not in INTERNAL_TOPICS and any(p.fullmatch(name) for p in self.topics)

    def syncs_group(self, group_id: str) -> bool:
        return self.consumer_offset_sync_enable and any(
            p.fullmatch(group_id) for p in self.consumer_offset_sync_groups)


def _value(configs: Mapping[str, str], key: str) -> str:
    value = configs.get(key, CLUSTER_LINK_CONFIGS[key].default)
    assert value is not None
    return value


def _patterns(configs: Mapping[str, str], key: str) -> tuple[tuple["re.Pattern[str]", ...], Problem | None]:
    patterns = []
    for item in list_items(configs.get(key, "")):
        try:
            patterns.append(re.compile(item))
        except re.error as e:
            return (), (ErrorCode.INVALID_CONFIG,
                        f"Invalid value {item} for configuration {key}: not a regex ({e})")
    return tuple(patterns), None


def parse_link(name: str, configs: Mapping[str, str]) -> tuple[ClusterLink | None, Problem | None]:
    """The link ``configs`` describe, or the first thing wrong with them."""
    if not name:
        return None, (ErrorCode.INVALID_REQUEST, "Cluster link name can't be empty")
    for key in sorted(configs):
        defn = CLUSTER_LINK_CONFIGS.get(key)
        if defn is None:
            return None, (ErrorCode.INVALID_CONFIG, f"Unknown cluster link config name: {key}")
        error = validate_value(defn, configs[key])
        if error is not None:
            return None, (ErrorCode.INVALID_CONFIG, error)
    servers = tuple(list_items(configs.get(BOOTSTRAP_SERVERS, "")))
    if not servers:
        return None, (ErrorCode.INVALID_CONFIG,
                      f"Cluster link {name} needs {BOOTSTRAP_SERVERS} (the source cluster)")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            return None, (ErrorCode.INVALID_CONFIG,
                          f"Invalid value {server} for configuration {BOOTSTRAP_SERVERS}: "
                          "expected host:port")
    protocol = _value(configs, "security.protocol")
    if protocol.startswith("SASL_"):
        if "sasl.mechanism" not in configs:
            return None, (ErrorCode.INVALID_CONFIG,
                          f"security.protocol={protocol} needs sasl.mechanism")
        if "sasl.jaas.config" not in configs and not (
                "sasl.username" in configs and "sasl.password" in configs):
            return None, (ErrorCode.INVALID_CONFIG,
                          f"security.protocol={protocol} needs sasl.username and sasl.password "
                          "(or sasl.jaas.config)")
    topics, problem = _patterns(configs, TOPICS)
    if problem is not None:
        return None, problem
    groups, problem = _patterns(configs, CONSUMER_OFFSET_SYNC_GROUPS)
    if problem is not None:
        return None, problem
    return ClusterLink(
        name=name, configs=dict(configs), bootstrap_servers=servers, topics=topics,
        consumer_offset_sync_enable=parse_bool(_value(configs, CONSUMER_OFFSET_SYNC_ENABLE)) is True,
        consumer_offset_sync_groups=groups,
        consumer_offset_sync_ms=int(_value(configs, CONSUMER_OFFSET_SYNC_MS)),
        topic_config_sync_ms=int(_value(configs, TOPIC_CONFIG_SYNC_MS)),
        metadata_max_age_ms=int(_value(configs, METADATA_MAX_AGE_MS))), None


def mirror_topics_of(image: MetadataImage, link_name: str, *, states: tuple[str, ...] = (
        MIRROR_STATE_ACTIVE, MIRROR_STATE_STOPPED)) -> tuple[str, ...]:
    """The destination topics naming ``link_name`` in ``ketch.mirror.link`` whose state is
    one of ``states`` (a state not set is ``active``), sorted."""
    found = []
    for topic in image.topics.by_name:
        configs = image.configs.topic(topic)
        if configs.get(MIRROR_LINK) == link_name and \
                configs.get(MIRROR_STATE, MIRROR_STATE_ACTIVE) in states:
            found.append(topic)
    return tuple(sorted(found))


def link_in_use(image: MetadataImage, link_name: str) -> Problem | None:
    """Why the link may not be deleted now (a mirror topic active or stopped on it), or None."""
    users = mirror_topics_of(image, link_name)
    if not users:
        return None
    shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
    return (ErrorCode.INVALID_REQUEST,
            f"Cluster link {link_name} is used by mirror topics ({shown}): promote them "
            f"(ketch mirror promote TOPIC) or delete them first")


def validate_link(image: MetadataImage, name: str, configs: Mapping[str, str]) -> Problem | None:
    """Why a CLUSTER_LINK resource may not hold ``configs`` in ``image``, or None. An empty
    set deletes the link, which is refused while a mirror topic uses it."""
    if not configs:
        return None if not name else link_in_use(image, name)
    return parse_link(name, configs)[1]


def cluster_link(image: MetadataImage, name: str) -> Mapping[str, str] | None:
    """The configs of link ``name``, or None when there is no such link."""
    configs = image.configs.get(ConfigResourceType.CLUSTER_LINK, name)
    return configs if configs else None


def cluster_links(image: MetadataImage) -> Mapping[str, Mapping[str, str]]:
    """Every link's configs, by name."""
    return {resource.name: values for resource, values in sorted(
        image.configs.resources.items(), key=lambda item: item[0].name)
        if resource.type == ConfigResourceType.CLUSTER_LINK}


def source_client_properties(configs: Mapping[str, str]) -> dict[str, str]:
    """The client properties (Ketch's client's names) that reach the link's source:
    ``bootstrap.servers`` and the security keys that were set. ``Admin(props)`` takes them
    as they are; ``ClientSecurity.from_config(props.get)`` makes a broker's connection
    settings from them (clients/security/client_auth.py)."""
    keys = {BOOTSTRAP_SERVERS, *(d.name for d in _SECURITY_DEFS)}
    return {k: v for k, v in configs.items() if k in keys}


@dataclass(frozen=True, slots=True)
class LinkConfigEntry:
    """One line of a link's DescribeConfigs answer. ``value`` is None for a secret, as
    Kafka hides PASSWORD-typed values; a key never set shows its default, if it has one."""
    definition: ConfigDef
    value: str | None
    is_default: bool

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def sensitive(self) -> bool:
        return self.definition.sensitive


def link_config_entries(configs: Mapping[str, str]) -> tuple[LinkConfigEntry, ...]:
    """A link's configs as DescribeConfigs shows them, by name: every key that was set
    (secrets hidden) and every default."""
    entries = []
    for name, defn in sorted(CLUSTER_LINK_CONFIGS.items()):
        if name in configs:
            entries.append(LinkConfigEntry(defn, None if defn.sensitive else configs[name], False))
        elif defn.default is not None:
            entries.append(LinkConfigEntry(defn, defn.default, True))
    return tuple(entries)
