"""Kafka's config wire enums, shared by the broker, the controller and the clients:
resource types (ConfigResource.Type), where a value comes from (DescribeConfigs'
ConfigSource), a config's data type (DescribeConfigs v3+ ConfigType) and the
IncrementalAlterConfigs operations (KIP-339)."""
from __future__ import annotations

from enum import IntEnum

__all__ = ["AlterConfigOpType", "ConfigResourceType", "ConfigSource", "ConfigType"]


class _WithUnknown(IntEnum):
    @classmethod
    def of(cls, value: int) -> "_WithUnknown":
        """The member for ``value``, or UNKNOWN for a code this version does not know."""
        try:
            return cls(value)
        except ValueError:
            return cls(0)


class ConfigResourceType(_WithUnknown):
    """Kafka's ConfigResource.Type ids (DescribeConfigs / AlterConfigs resource_type,
    ConfigRecord.ResourceType)."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32
    # Ketch's own: a cluster link (issue 21, metadata_log/cluster_links.py). Kafka's types
    # stop at GROUP; a Kafka client that does not know 64 still sends and prints it.
    CLUSTER_LINK = 64


class ConfigSource(_WithUnknown):
    """Where a config value comes from (DescribeConfigs v1+ ``config_source``)."""
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(_WithUnknown):
    """A config's data type (DescribeConfigs v3+ ``config_type``)."""
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs operations (KIP-339)."""
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
