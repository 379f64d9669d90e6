"""What Ketch's client does on a secured listener: TLS (clients/security/tls.py) and a SASL
login, from Kafka's client keys or librdkafka's names for them:

    security.protocol=SASL_SSL           sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required
        username="alice" password="alice-secret";     (or sasl.username / sasl.password)
    ssl.truststore.location=ca.pem       (or ssl.ca.location)

Brokers use it too, to reach other brokers on the inter-broker listener
(``ClientSecurity.for_listener``).
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from typing import Callable, Mapping

from clients.errors import ConfigError
from clients.security import scram
from clients.security.jaas import JaasError, parse_jaas_config
from clients.security.listeners import SecurityProtocol, listener_value
from clients.security.sasl import PLAIN, PlainClient, ScramClient
from clients.security.tls import TlsConfigError, client_ssl_context

__all__ = ["ClientSecurity", "PLAINTEXT_SECURITY"]

Lookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)

    def sasl_client(self) -> PlainClient | ScramClient:
        """A fresh client mechanism for one connection's login."""
        assert self.sasl_mechanism is not None
        if self.sasl_mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        nonce = os.urandom(24).hex()
        return ScramClient(scram.MECHANISMS[self.sasl_mechanism], self.username, self.password, nonce)

    @classmethod
    def from_config(cls, get: Lookup) -> "ClientSecurity":
        """From a client's configuration (``get(key)``: the value, or None when unset)."""
        protocol = SecurityProtocol.parse(get("security.protocol") or "PLAINTEXT")
        context = None
        if protocol.uses_tls:
            try:
                context = client_ssl_context(get)
            except TlsConfigError as e:
                raise ConfigError("ssl.truststore.location", str(e)) from None
        if not protocol.uses_sasl:
            return cls(protocol, context)
        mechanism = (get("sasl.mechanism") or "").upper()
        if mechanism != PLAIN and mechanism not in scram.MECHANISMS:
            raise ConfigError("sasl.mechanism", f"{mechanism or 'unset'}: use PLAIN, SCRAM-SHA-256 "
                                                "or SCRAM-SHA-512")
        username, password = get("sasl.username"), get("sasl.password")
        jaas_text = get("sasl.jaas.config")
        if jaas_text:
            try:
                jaas = parse_jaas_config(jaas_text)
            except JaasError as e:
                raise ConfigError("sasl.jaas.config", str(e)) from None
            username, password = jaas.username, jaas.password
        if not username or password is None:
            raise ConfigError("sasl.jaas.config", "SASL needs a username and a password")
        return cls(protocol, context, mechanism, username, password)

    @classmethod
    def for_listener(cls, props: Mapping[str, str], listener: str, protocol: SecurityProtocol,
                     mechanism_key: str) -> "ClientSecurity":
        """How a broker logs in to ``listener`` of another node: the listener's own TLS
        keys (its key store is this node's client certificate) and, for SASL, the
        mechanism in ``mechanism_key`` (``sasl.mechanism.inter.broker.protocol``) with the
        ``username``/``password`` of that mechanism's JAAS config on the listener."""
        mechanism = (props.get(mechanism_key) or "").upper() if protocol.uses_sasl else ""

        def get(key: str) -> str | None:
            if key == "security.protocol":
                return protocol.name
            if key == "sasl.mechanism":
                return mechanism
            if key == "sasl.jaas.config":
                return listener_value(props, listener, key, mechanism=mechanism or None)
            if key in ("sasl.username", "sasl.password"):
                return None
            return listener_value(props, listener, key)
        return cls.from_config(get)


PLAINTEXT_SECURITY = ClientSecurity()
