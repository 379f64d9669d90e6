"""Java ``.properties`` files, as Kafka's ``server.properties`` uses them.

``key=value`` or ``key: value`` lines, ``#``/``!`` comments, backslash line continuation.
Ketch's controllers and brokers read their configuration in this format with Kafka's own
key names (``node.id``, ``process.roles``, ``controller.quorum.voters``, ``listeners``,
``log.dirs``, ...), so an existing Kafka config carries over.
"""
from __future__ import annotations

import pathlib

__all__ = ["parse_properties", "load_properties", "format_properties", "parse_listeners"]


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        props[key] = value
    return props


def _split(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), line[i + 1:].strip()
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return line[:i], rest
    return line, ""


def load_properties(path: str | pathlib.Path) -> dict[str, str]:
    return parse_properties(pathlib.Path(path).read_text())


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def parse_listeners(value: str) -> dict[str, tuple[str, int]]:
    """``PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093`` -> {name: (host, port)}."""
    listeners: dict[str, tuple[str, int]] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, address = item.partition("://")
        if not sep:
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"listener {item!r} has no numeric port")
        listeners[name.upper()] = (host.strip("[]") or "0.0.0.0", int(port))
    return listeners
