"""A node's server.properties, read through the config catalogue: one parser for controllers
and brokers.

Theory of operation
-------------------
Both process kinds start from Kafka's ``server.properties`` keys. ``read_node_properties``
checks the whole file once against the catalogue (``config_defs``), which already knows
every key's type, Kafka's default and validator, so the two process configs
(``broker/config.py``, ``quorum/config.py``) only say which keys they use and what the
keys mean together (a node id among the voters, a listener among the listeners):

- a key the catalogue knows is validated with Kafka's wording, which names the key
  ("Invalid value abc for configuration log.retention.ms: Not a number of type LONG");
  a bad value is a ``ConfigError`` and the process refuses to start, never a traceback
  from deep inside the broker when the value is first used;
- a key the catalogue does not know is *not* an error (Kafka only logs "was supplied but
  isn't a known config"): it is listed in ``unknown``, with the nearest known key when
  one is close, so the process can log one warning line per key;
- Kafka's synonyms are keys of their own in the catalogue (``log.retention.hours``,
  ``log.retention.minutes``, ``log.roll.hours``, ...), so they are validated here too;
  ``config_layers`` turns them into the topic configs' milliseconds, in Kafka's order.

Typed reads (``get_int``, ``get_bool``, ``get_str``) return the catalogue's default for an unset key,
so a default lives in one place. Pure: no I/O, no logging; the caller reports ``warnings``.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Mapping

from metadata_log.config_defs import (
    BROKER_CONFIGS, ConfigDef, ConfigType, broker_config_def, parse_value, validate_value,
)

__all__ = ["ConfigError", "NodeProperties", "parse_voters", "read_node_properties"]


class ConfigError(ValueError):
    """A node configuration that cannot work; the message names the key."""


@dataclass(frozen=True, slots=True)
class NodeProperties:
    """server.properties checked against the catalogue; typed reads with Kafka's defaults."""
    raw: Mapping[str, str]
    unknown: tuple[tuple[str, str | None], ...] = ()   # (key, nearest known key or None)

    @property
    def warnings(self) -> list[str]:
        """One line per unknown key, for the process log."""
        out = []
        for key, near in self.unknown:
            hint = f" (did you mean {near}?)" if near else ""
            out.append(f"{key} is not a known configuration key and is ignored{hint}")
        return out

    def is_set(self, key: str) -> bool:
        return key in self.raw

    def _value(self, key: str, kinds: tuple[ConfigType, ...], default: object) -> object:
        defn = _definition(key)
        if defn.type not in kinds:      # a programming error in a caller, not bad input
            raise TypeError(f"{key} is a {defn.type.label}, not a {kinds[0].label}")
        text = self.raw.get(key)
        if text is None:
            if default is not None:
                return default
            if defn.default is None:
                raise ConfigError(f"{key} is required")
            text = defn.default
        parsed, error = parse_value(defn, text)
        if error is not None:           # only a catalogue default could get here unchecked
            raise ConfigError(f"Invalid value {text} for configuration {key}: {error}")
        return parsed

    def get_int(self, key: str, default: int | None = None) -> int:
        """``key`` as an integer; unset: ``default`` if given, else Kafka's default, else
        ConfigError (required)."""
        return self._value(key, (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT),
                           default)  # type: ignore[return-value]

    def get_bool(self, key: str, default: bool | None = None) -> bool:
        return self._value(key, (ConfigType.BOOLEAN,), default)  # type: ignore[return-value]

    def get_str(self, key: str, default: str | None = None) -> str | None:
        """``key`` as text; unset: ``default``, else Kafka's default (None if it has none)."""
        defn = _definition(key)
        text = self.raw.get(key)
        if text is None:
            return default if default is not None else defn.default
        return text.strip()


def _definition(key: str) -> ConfigDef:
    defn = broker_config_def(key)
    if defn is None:                    # a caller asked for a key the catalogue lacks
        raise KeyError(f"{key} is not in the config catalogue (metadata_log/_broker_configs.py)")
    return defn


def read_node_properties(props: Mapping[str, str]) -> NodeProperties:
    """Check every key of a server.properties; ConfigError for the first bad value (keys in
    file order), unknown keys collected for a warning."""
    unknown: list[tuple[str, str | None]] = []
    for key, value in props.items():
        defn = broker_config_def(key)
        if defn is None:
            near = difflib.get_close_matches(key, BROKER_CONFIGS.keys(), n=1, cutoff=0.8)
            unknown.append((key, near[0] if near else None))
            continue
        error = validate_value(defn, value)
        if error is not None:
            raise ConfigError(error)
    return NodeProperties(dict(props), tuple(unknown))


def parse_voters(value: str, key: str) -> dict[int, tuple[str, int]]:
    """``1@host:port,2@host:port`` -> {1: (host, port), 2: ...} (Kafka's voters format)."""
    voters: dict[int, tuple[str, int]] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, sep, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.strip().isdigit() or not port.isdigit() or not host:
            raise ConfigError(f"{key}: {item!r} is not id@host:port")
        node_id = int(node)
        if node_id in voters:
            raise ConfigError(f"{key}: node {node_id} listed twice")
        voters[node_id] = (host.strip("[]"), int(port))
    if not voters:
        raise ConfigError(f"{key} is required")
    return voters
