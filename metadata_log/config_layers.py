"""Which value a config has, and where it comes from: Kafka's config layers.

Theory of operation
-------------------
A broker key resolves through four layers, first hit wins (Kafka's DynamicBrokerConfig):

    DYNAMIC_BROKER_CONFIG (2)          ConfigRecord on the BROKER resource "<this broker id>"
    DYNAMIC_DEFAULT_BROKER_CONFIG (3)  ConfigRecord on the BROKER resource "" (cluster default)
    STATIC_BROKER_CONFIG (4)           this broker's server.properties
    DEFAULT_CONFIG (5)                 Kafka's default in the definition table

A topic config first looks at the topic's own ConfigRecords (DYNAMIC_TOPIC_CONFIG, 1) and
then at its broker synonyms (``retention.ms`` <- ``log.retention.ms``,
``log.retention.minutes``, ``log.retention.hours``) through the same layers, layer by
layer and within a layer in synonym order, exactly the order Kafka lists as DescribeConfigs'
synonyms. So a dynamic cluster-wide ``log.retention.hours`` beats a static
``log.retention.ms``, as in Kafka. Values in hours or minutes are converted to the topic's
milliseconds.

``ConfigLayers`` is a plain value over a ``ConfigsImage`` and the static properties: the
broker builds one per metadata image, the controller one with no static layer. Every
consumer of configs (log application, acks=all checks, DescribeConfigs) reads through it,
so there is one answer to "what is segment.bytes for this topic here".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from clients.protocol.configs import ConfigSource
from metadata_log.config_defs import (
    BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, DynamicScope, broker_config_def, listener_base_key,
)
from metadata_log.image import ConfigResourceType, ConfigsImage

__all__ = ["ConfigEntry", "ConfigLayers", "ConfigSource", "ConfigSynonymEntry"]


@dataclass(frozen=True, slots=True)
class ConfigSynonymEntry:
    name: str
    value: str | None        # None for a sensitive value (never shown) or a null default
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of DescribeConfigs: the winning value and every synonym that has one."""
    name: str
    value: str | None
    source: ConfigSource
    definition: ConfigDef
    read_only: bool
    synonyms: tuple[ConfigSynonymEntry, ...]

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG

    @property
    def sensitive(self) -> bool:
        return self.definition.sensitive


def _convert(value: str, unit_ms: int) -> str:
    if unit_ms == 1:
        return value
    try:
        n = int(value.strip())
    except ValueError:
        return value        # left for validation to name the key
    return "-1" if n < 0 else str(n * unit_ms)     # any negative means "no limit", as in Kafka


class ConfigLayers:
    def __init__(self, configs: ConfigsImage, broker_id: int | None = None,
                 static: Mapping[str, str] | None = None) -> None:
        self.configs = configs
        self.broker_id = broker_id
        self.static = dict(static or {})
        layers: list[tuple[Mapping[str, str], ConfigSource]] = []
        if broker_id is not None:
            layers.append((configs.get(ConfigResourceType.BROKER, str(broker_id)),
                           ConfigSource.DYNAMIC_BROKER_CONFIG))
        layers.append((configs.cluster_default(), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        layers.append((self.static, ConfigSource.STATIC_BROKER_CONFIG))
        self._broker_layers = tuple(layers)
        self._topic_configs: dict[str, dict[str, str]] = {}     # a value: safe to memoize

    # ------------------------------------------------------------ broker keys

    def _broker_synonyms(self, names: Iterable[tuple[str, int]], sensitive: bool
                         ) -> list[tuple[ConfigSynonymEntry, int]]:
        """(synonym, unit) in Kafka's order: layer by layer, synonym order within a layer,
        Kafka's defaults last."""
        names = tuple(names)
        out = []
        for mapping, source in self._broker_layers:
            for name, unit in names:
                if name in mapping:
                    out.append((ConfigSynonymEntry(name, None if sensitive else mapping[name],
                                                   source), unit))
        for name, unit in names:
            defn = BROKER_CONFIGS.get(name)
            if defn is not None and defn.default is not None:
                out.append((ConfigSynonymEntry(name, defn.default, ConfigSource.DEFAULT_CONFIG),
                            unit))
        return out

    def broker_value(self, name: str) -> str | None:
        """The effective value of a broker key (None: unset with a null default)."""
        for mapping, _ in self._broker_layers:
            if name in mapping:
                return mapping[name]
        defn = broker_config_def(name)
        return None if defn is None else defn.default

    def broker_entry(self, name: str) -> ConfigEntry | None:
        defn = broker_config_def(name)
        if defn is None:
            return None
        names = [(name, 1)]
        base = listener_base_key(name)
        if base is not None and broker_config_def(base) is not None:
            names.append((base, 1))     # the listener's value, then the key's for all listeners
        synonyms = [s for s, _ in self._broker_synonyms(names, defn.sensitive)]
        if base is not None:
            # Kafka lists the prefixed key's layers first, then the base key's.
            synonyms.sort(key=lambda s: s.name != name)
        first = synonyms[0] if synonyms else ConfigSynonymEntry(name, None,
                                                                ConfigSource.DEFAULT_CONFIG)
        return ConfigEntry(name, first.value, first.source, defn,
                           read_only=defn.dynamic is DynamicScope.READ_ONLY,
                           synonyms=tuple(synonyms))

    def broker_entries(self) -> list[ConfigEntry]:
        """Every known broker key, plus listener-prefixed keys set in some layer."""
        names = set(BROKER_CONFIGS)
        for mapping, _ in self._broker_layers:
            names.update(n for n in mapping if broker_config_def(n) is not None)
        return [e for e in (self.broker_entry(n) for n in sorted(names)) if e is not None]

    # ------------------------------------------------------------ topic configs

    def topic_entry(self, topic: str, name: str) -> ConfigEntry | None:
        defn = TOPIC_CONFIGS.get(name)
        if defn is None:
            return None
        own = self.configs.topic(topic)
        synonyms: list[ConfigSynonymEntry] = []
        value: str | None = None
        source = ConfigSource.DEFAULT_CONFIG
        if name in own:
            synonyms.append(ConfigSynonymEntry(name, None if defn.sensitive else own[name],
                                               ConfigSource.DYNAMIC_TOPIC_CONFIG))
            value, source = own[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        broker = self._broker_synonyms(((s.name, s.unit_ms) for s in defn.synonyms),
                                       defn.sensitive)
        synonyms += [s for s, _ in broker]
        if source is ConfigSource.DEFAULT_CONFIG:
            # The topic's value is its first broker synonym's, converted to the topic's
            # unit; Kafka reports a value from a static or dynamic broker key with that
            # key's source, and the plain default as DEFAULT_CONFIG.
            hit = next(((s, u) for s, u in broker if s.source != ConfigSource.DEFAULT_CONFIG),
                       None)
            if hit is not None:
                value, source = _convert(hit[0].value or "", hit[1]), hit[0].source
            else:
                value = defn.default
        return ConfigEntry(name, value, source, defn, read_only=False, synonyms=tuple(synonyms))

    def topic_entries(self, topic: str) -> list[ConfigEntry]:
        return [e for e in (self.topic_entry(topic, n) for n in sorted(TOPIC_CONFIGS))
                if e is not None]

    def topic_config(self, topic: str) -> dict[str, str]:
        """Effective value of every topic config for ``topic`` (what the log applies)."""
        config = self._topic_configs.get(topic)
        if config is None:
            config = {e.name: e.value for e in self.topic_entries(topic) if e.value is not None}
            self._topic_configs[topic] = config
        return dict(config)

    def topic_value(self, topic: str, name: str) -> str | None:
        entry = self.topic_entry(topic, name)
        return None if entry is None else entry.value

