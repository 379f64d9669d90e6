"""Topic and broker configs Ketch knows, with Kafka's names, types, defaults and limits:
the one table that controller validation, broker application and DescribeConfigs share.

Theory of operation
-------------------
A config value travels and is stored as a string (ConfigRecord.Value). Each known name has
a ``ConfigDef`` (``_config_types``): its type, Kafka's default, a validator, its broker-key
synonyms (topic configs) or where it may be altered (broker configs), and a line of
documentation. ``validate_value`` turns a proposed string into an error message (or None),
worded as Kafka words it ("Invalid value x for configuration y: Value must be at least 1"),
so that an admin tool shows something a person can act on. Unknown names are refused rather
than stored: a typo such as ``retention.msec`` silently doing nothing is worse than an error.

Topic configs follow Kafka's ``TopicConfig``/``LogConfig``; broker configs the whole of
``KafkaConfig`` plus Ketch's ``ketch.*`` keys. A broker key may carry a listener prefix
(``listener.name.internal.ssl.keystore.location``): it is then the per-broker value of the
unprefixed key for that listener, as in Kafka.
"""
from __future__ import annotations

import re
from typing import Mapping

from metadata_log._broker_configs import BROKER_CONFIG_DEFS
from metadata_log._config_types import (
    INT32_MAX, INT64_MAX, ConfigDef, ConfigType, DynamicScope, Synonym,
)
from metadata_log._topic_configs import TOPIC_CONFIG_DEFS

__all__ = [
    "BROKER_CONFIGS", "ConfigDef", "ConfigType", "DynamicScope", "LISTENER_ONLY_SECURITY_CONFIGS",
    "Synonym", "TOPIC_CONFIGS", "broker_config_def", "list_items", "listener_base_key",
    "parse_bool", "parse_value", "tiered_storage_problem", "validate_value",
]

TOPIC_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}
BROKER_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in BROKER_CONFIG_DEFS}

_LISTENER_PREFIX = re.compile(r"^listener\.name\.([a-z0-9_-]+)\.(.+)$")
# Kafka allows a listener prefix on these families only (DynamicListenerConfig,
# DynamicBrokerConfig.ListenerConfigs and the SASL mechanism-prefixed keys).
_PER_LISTENER = re.compile(r"^(ssl\.|sasl\.|[a-z0-9-]+\.sasl\.|connections\.max\.reauth\.ms$|"
                           r"max\.connections$|max\.connection\.creation\.rate$|"
                           r"principal\.builder\.class$)")


_CLUSTER_WIDE_PER_LISTENER = {"max.connections", "max.connection.creation.rate"}
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamically settable only with a listener prefix.
LISTENER_ONLY_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
})


def listener_base_key(name: str) -> str | None:
    """``max.connections`` for ``listener.name.internal.max.connections``; None otherwise."""
    m = _LISTENER_PREFIX.match(name)
    return m.group(2) if m is not None else None


def broker_config_def(name: str) -> ConfigDef | None:
    """The definition of a broker key, listener-prefixed keys included (those may only be
    set per broker, as in Kafka). None for a name Kafka does not have."""
    defn = BROKER_CONFIGS.get(name)
    if defn is not None:
        return defn
    m = _LISTENER_PREFIX.match(name)
    if m is None or not _PER_LISTENER.match(m.group(2)):
        return None
    base = BROKER_CONFIGS.get(m.group(2))
    if base is None and m.group(2).endswith("sasl.jaas.config"):
        base = BROKER_CONFIGS.get("sasl.jaas.config")
    if base is None:
        return None
    # Connection limits may be set per listener cluster-wide too; the rest per broker.
    scope = (DynamicScope.CLUSTER_WIDE if m.group(2) in _CLUSTER_WIDE_PER_LISTENER
             else DynamicScope.PER_BROKER)
    return ConfigDef(name, base.type, None, base.validator, base.doc, dynamic=scope,
                     applied=base.applied)


def parse_bool(value: str) -> bool | None:
    """Kafka parses booleans case-insensitively, ignoring surrounding blanks."""
    v = value.strip().lower()
    return True if v == "true" else False if v == "false" else None


def list_items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_value(defn: ConfigDef, value: str) -> tuple[object, str | None]:
    """(parsed value, error) for one string value."""
    t = defn.type
    if t is ConfigType.BOOLEAN:
        b = parse_bool(value)
        return b, None if b is not None else "Expected value to be either true or false"
    if t in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
        try:
            n = int(value.strip())
        except ValueError:
            return None, f"Not a number of type {t.name}"
        limit = {ConfigType.SHORT: (1 << 15) - 1, ConfigType.INT: INT32_MAX}.get(t, INT64_MAX)
        if not -limit - 1 <= n <= limit:
            return None, f"Not a number of type {t.name}"
        return n, None
    if t is ConfigType.DOUBLE:
        try:
            return float(value.strip()), None
        except ValueError:
            return None, "Not a number of type DOUBLE"
    if t is ConfigType.LIST:
        return list_items(value), None
    return value.strip(), None


def validate_value(defn: ConfigDef, value: str) -> str | None:
    """None if ``value`` is acceptable for ``defn``, else Kafka's wording of why not."""
    parsed, error = parse_value(defn, value)
    if error is None and defn.validator is not None:
        error = defn.validator(parsed)
    if error is None:
        return None
    return f"Invalid value {value} for configuration {defn.name}: {error}"


def tiered_storage_problem(new: Mapping[str, str], current: Mapping[str, str] | None,
                           system_enable: bool) -> str | None:
    """Why a topic's configs ``new`` (its whole set; ``current``: its set before, None for a
    new topic) may not be, for tiered storage (KIP-405), as Kafka's LogConfig words it; None
    when they may. Judged by the controller with its own remote.log.storage.system.enable."""
    enabled = parse_bool(new.get("remote.storage.enable", "false")) is True
    was = current is not None and parse_bool(current.get("remote.storage.enable", "false")) is True
    if enabled and not was and not system_enable:
        return ("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage.")
    if was and not enabled:
        return ("It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "remote.storage.copy.disable=true. If you want to disable remote storage and "
                "delete all remote data, please set remote.storage.enable=false, "
                "remote.log.delete.on.disable=true.")
    if not enabled:
        return None
    for local_key, total_key in (("local.retention.ms", "retention.ms"),
                                 ("local.retention.bytes", "retention.bytes")):
        local = int(new.get(local_key, TOPIC_CONFIGS[local_key].default or "-2"))
        total = int(new.get(total_key, TOPIC_CONFIGS[total_key].default or "-1"))
        if local == -2 or total == -1:
            continue
        if local == -1:
            return (f"Value must not be -1 as {total_key} value is set as {total}.: "
                    f"{local_key} = {local}")
        if local > total:
            return (f"Value must not be more than {total_key} property value: {total}: "
                    f"{local_key} = {local}")
    return None
