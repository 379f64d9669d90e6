"""Client-metrics subscriptions (KIP-714): the configs of resource type CLIENT_METRICS, the
one home of their keys, limits and validation, and their parsed form.

A subscription is a named config resource (ConfigRecord with resource type 16, the name
chosen by the operator) holding Kafka's three keys (``ClientMetricsConfigs``):

- ``metrics``: comma-separated metric name prefixes a matching client should push; ``*``
  means every metric, an empty list none;
- ``interval.ms``: how often a matching client pushes, 100 ms .. 1 hour, default 5 minutes;
- ``match``: comma-separated ``selector=regex`` pairs, every one of which a client must
  match in full (a Java ``Pattern.matches``, so Python's ``fullmatch``); selectors are
  Kafka's six client attributes. No ``match``: every client matches.

The controller checks a resource's resulting key set with ``validate_subscription`` before
it writes any ConfigRecord; brokers turn the image's resources into ``Subscription``s with
``subscriptions_of`` and match clients against them (``broker/client_telemetry.py``).
Errors are worded and coded as Kafka's: an unknown key or an interval out of range is
INVALID_REQUEST (InvalidRequestException in ClientMetricsConfigs.validate), a malformed
``match`` pattern INVALID_CONFIG (InvalidConfigurationException).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from clients.protocol.configs import ConfigResourceType
from clients.protocol.errors import ErrorCode
from metadata_log._config_types import ConfigDef, ConfigType
from metadata_log.image import ConfigsImage

__all__ = [
    "ALL_METRICS", "CLIENT_METRICS_CONFIGS", "INTERVAL_MS_DEFAULT", "MATCH_SELECTORS",
    "Subscription", "parse_subscription", "subscriptions_of", "validate_subscription",
]

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
INTERVAL_MS_MIN = 100
INTERVAL_MS_MAX = 3_600_000

# The client attributes a ``match`` may select on (ClientMetricsConfigs.ALLOWED_MATCH_PARAMS).
MATCH_SELECTORS = frozenset({
    "client_instance_id", "client_id", "client_software_name", "client_software_version",
    "client_source_address", "client_source_port",
})

# Each key's type and default (ClientMetricsConfigs.CONFIG): the controller checks single
# values and applies APPEND/SUBTRACT (LIST keys) with these, then the whole resource with
# ``validate_subscription``.
CLIENT_METRICS_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    ConfigDef(METRICS, ConfigType.LIST, "",
              doc="Metric name prefixes matching clients push; * for all"),
    ConfigDef(INTERVAL_MS, ConfigType.INT, str(INTERVAL_MS_DEFAULT),
              doc=f"Push interval in milliseconds, {INTERVAL_MS_MIN} to {INTERVAL_MS_MAX}"),
    ConfigDef(MATCH, ConfigType.LIST, "",
              doc="selector=regex pairs a client must all match (client_id, "
                  "client_software_name, ...); none: every client"),
)}

Problem = tuple[ErrorCode, str]


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]          # prefixes as configured; "*" for all
    interval_ms: int
    match: tuple[tuple[str, "re.Pattern[str]"], ...]   # (selector, pattern), sorted by selector

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every pattern matches its attribute in full; an absent attribute never matches."""
        for selector, pattern in self.match:
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _parse_match(patterns: list[str]) -> tuple[tuple[tuple[str, "re.Pattern[str]"], ...], Problem | None]:
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        # As Kafka: exactly one '=', a known selector, a regex that compiles.
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            return (), (ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            return (), (ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
    return tuple(sorted(parsed.items())), None


def parse_subscription(name: str, configs: Mapping[str, str]) -> tuple[Subscription | None, Problem | None]:
    """The subscription ``configs`` describe, or Kafka's error for the first thing wrong."""
    if not name:
        return None, (ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in sorted(configs):
        if key not in CLIENT_METRICS_CONFIGS:
            return None, (ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval_ms = INTERVAL_MS_DEFAULT
    if INTERVAL_MS in configs:
        raw = configs[INTERVAL_MS]
        try:
            interval_ms = int(raw.strip())
        except ValueError:
            return None, (ErrorCode.INVALID_CONFIG,
                          f"Invalid value {raw} for configuration {INTERVAL_MS}: "
                          "Not a number of type INT")
        if not INTERVAL_MS_MIN <= interval_ms <= INTERVAL_MS_MAX:
            return None, (ErrorCode.INVALID_REQUEST,
                          f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be "
                          f"between {INTERVAL_MS_MIN} and {INTERVAL_MS_MAX} (1 hour)")
    match, problem = _parse_match(_items(configs.get(MATCH, "")))
    if problem is not None:
        return None, problem
    return Subscription(name, tuple(_items(configs.get(METRICS, ""))), interval_ms, match), None


def validate_subscription(name: str, configs: Mapping[str, str]) -> Problem | None:
    """Why a CLIENT_METRICS resource may not hold ``configs``, or None. An empty set is
    valid: it deletes the subscription."""
    return parse_subscription(name, configs)[1]


def subscriptions_of(configs: ConfigsImage) -> tuple[Subscription, ...]:
    """Every subscription in the image, by name. A resource the controller should not have
    accepted (an older build's) is skipped rather than trusted."""
    found = []
    for resource, values in configs.resources.items():
        if resource.type != ConfigResourceType.CLIENT_METRICS:
            continue
        subscription, _ = parse_subscription(resource.name, values)
        if subscription is not None:
            found.append(subscription)
    return tuple(sorted(found, key=lambda s: s.name))
