"""The shape of a config definition and the validators the catalogues use.

Kept apart from ``config_defs`` so the two catalogues (``_topic_configs``,
``_broker_configs``) can be plain data modules that import only this one.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Callable

__all__ = [
    "INT32_MAX", "INT64_MAX", "ConfigDef", "ConfigType", "DynamicScope", "Synonym", "Validator",
    "at_least", "between", "non_empty_list_of", "one_of", "list_of",
]

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


class ConfigType(Enum):
    """Kafka's ConfigDef.Type; ``wire`` is DescribeConfigs' ConfigType (v3+)."""
    BOOLEAN = ("boolean", 1)
    STRING = ("string", 2)
    INT = ("int", 3)
    SHORT = ("short", 4)
    LONG = ("long", 5)
    DOUBLE = ("double", 6)
    LIST = ("list", 7)
    CLASS = ("class", 8)
    PASSWORD = ("password", 9)

    @property
    def wire(self) -> int:
        return self.value[1]

    @property
    def label(self) -> str:
        return self.value[0]


class DynamicScope(IntEnum):
    """Where a broker config may be changed (Kafka's DynamicBrokerConfig).

    READ_ONLY: only in server.properties, a restart applies it; an alter is refused.
    PER_BROKER: dynamically, for one broker id only (e.g. a listener's keystore).
    CLUSTER_WIDE: dynamically, for one broker or as the cluster-wide default (name "").
    """
    READ_ONLY = 0
    PER_BROKER = 1
    CLUSTER_WIDE = 2


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker key that supplies a topic config's default. ``unit_ms`` converts broker
    values in hours or minutes (``log.retention.hours``) to the topic's milliseconds."""
    name: str
    unit_ms: int = 1


Validator = Callable[[object], "str | None"]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config Ketch knows, by Kafka's name.

    ``default`` is the string Kafka documents (None where Kafka's default is null).
    ``synonyms`` (topic configs) are the broker keys that give the topic default, in
    Kafka's precedence order. ``dynamic`` (broker configs) says where it may be altered.
    ``applied`` says whether Ketch acts on the value; a config Kafka has but that steers a
    part Ketch does not have (a thread pool, tiered storage) is accepted and shown but has
    no effect, and its doc says so.
    """
    name: str
    type: ConfigType
    default: str | None
    validator: Validator | None = None
    doc: str = ""
    synonyms: tuple[Synonym, ...] = ()
    dynamic: DynamicScope = DynamicScope.READ_ONLY
    applied: bool = True

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD


def at_least(low: float) -> Validator:
    def check(v: object) -> str | None:
        return None if v >= low else f"Value must be at least {low}"  # type: ignore[operator]
    return check


def between(low: float, high: float) -> Validator:
    def check(v: object) -> str | None:
        ok = low <= v <= high  # type: ignore[operator]
        return None if ok else f"Value must be no less than {low} and no more than {high}"
    return check


def one_of(*allowed: str) -> Validator:
    def check(v: object) -> str | None:
        items = v if isinstance(v, list) else [v]
        for item in items:
            if item not in allowed:
                return f"String must be one of: {', '.join(allowed)}"
        return None
    return check


def list_of(*allowed: str) -> Validator:
    """Each item of a (possibly empty) list is one of ``allowed``."""
    return one_of(*allowed)


def non_empty_list_of(*allowed: str) -> Validator:
    inner = one_of(*allowed)

    def check(v: object) -> str | None:
        if not v:
            return "Empty list is not allowed"
        return inner(v)
    return check
