"""Named listeners and their security protocols, from Kafka's keys:

    listeners=INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9192
    advertised.listeners=INTERNAL://127.0.0.1:9092,EXTERNAL://kafka.example.com:9192
    listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL
    listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-512
    listener.name.external.ssl.keystore.location=/etc/ketch/broker.pem

A listener named after a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
needs no map entry, as in Kafka's default map. Per-listener settings are Kafka's
``listener.name.<lower-case name>.<key>`` (for SASL settings also
``listener.name.<l>.<mechanism>.<key>``), falling back to the plain key.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

__all__ = ["ListenerError", "ListenerSpec", "SecurityProtocol", "controller_listener",
           "listener_value", "parse_listener_specs"]


class ListenerError(ValueError):
    pass


class SecurityProtocol(enum.IntEnum):
    """Kafka's SecurityProtocol ids (BrokerRegistrationRequest.Listener.SecurityProtocol)."""
    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, text: str) -> "SecurityProtocol":
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ListenerError(f"{text!r} is not a security protocol (PLAINTEXT, SSL, "
                                "SASL_PLAINTEXT, SASL_SSL)") from None


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str
    host: str                   # bind address
    port: int
    security_protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int


def _parse_addresses(value: str, key: str) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, address = item.partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not name or not port.isdigit():
            raise ListenerError(f"{key}: {item!r} is not NAME://host:port")
        name = name.upper()
        if name in out:
            raise ListenerError(f"{key}: listener {name} is named twice")
        out[name] = (host.strip("[]") or "0.0.0.0", int(port))
    return out


def parse_listener_specs(props: Mapping[str, str], default_listeners: str,
                         plaintext_unless_mapped: frozenset[str] = frozenset()) -> list[ListenerSpec]:
    """Every listener in ``listeners`` order, with its protocol and advertised address.
    ``plaintext_unless_mapped``: names that default to PLAINTEXT (a controller listener,
    as Kafka defaults it)."""
    listeners = _parse_addresses(props.get("listeners") or default_listeners, "listeners")
    if not listeners:
        raise ListenerError("listeners is required, e.g. PLAINTEXT://127.0.0.1:9092")
    advertised = _parse_addresses(props.get("advertised.listeners", ""), "advertised.listeners")
    for name in advertised:
        if name not in listeners:
            raise ListenerError(f"advertised.listeners names {name}, which is not in listeners")
    protocols: dict[str, SecurityProtocol] = {}
    for item in filter(None, (v.strip() for v in props.get("listener.security.protocol.map", "").split(","))):
        name, sep, protocol_name = item.partition(":")
        if not sep:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        protocols[name.strip().upper()] = SecurityProtocol.parse(protocol_name)
    specs = []
    for name, (host, port) in listeners.items():
        protocol = protocols.get(name)
        if protocol is None:
            if name in plaintext_unless_mapped:
                protocol = SecurityProtocol.PLAINTEXT
            elif name not in SecurityProtocol.__members__:
                raise ListenerError(f"listener {name} has no entry in listener.security.protocol.map")
            else:
                protocol = SecurityProtocol[name]
        adv_host, adv_port = advertised.get(name, (host, port))
        if adv_host in ("0.0.0.0", "::", ""):
            raise ListenerError(f"advertised.listeners must name a host clients can reach for {name} "
                                f"(it binds {host})")
        specs.append(ListenerSpec(name, host, port, protocol, adv_host, adv_port))
    return specs


def listener_value(props: Mapping[str, str], listener: str, key: str,
                   mechanism: str | None = None) -> str | None:
    """A setting for one listener: ``listener.name.<l>.<mechanism>.<key>`` (SASL keys),
    ``listener.name.<l>.<key>``, then ``<key>``."""
    prefix = f"listener.name.{listener.lower()}."
    if mechanism is not None:
        value = props.get(f"{prefix}{mechanism.lower()}.{key}")
        if value is not None:
            return value
    value = props.get(prefix + key)
    return value if value is not None else props.get(key)


def controller_listener(props: Mapping[str, str]) -> tuple[str, SecurityProtocol]:
    """The controllers' listener as a broker dials it: the first of
    ``controller.listener.names`` (CONTROLLER by default) and its protocol from
    ``listener.security.protocol.map`` (PLAINTEXT when unmapped, as Kafka defaults it)."""
    names = [n.strip().upper() for n in (props.get("controller.listener.names") or "").split(",")
             if n.strip()]
    name = names[0] if names else "CONTROLLER"
    for item in (props.get("listener.security.protocol.map") or "").split(","):
        key, sep, protocol = item.partition(":")
        if sep and key.strip().upper() == name:
            return name, SecurityProtocol.parse(protocol)
    return name, SecurityProtocol.PLAINTEXT
