"""What Ketch's client does on a secured listener: TLS (clients/security/tls.py) and a SASL
login, from Kafka's client keys or librdkafka's names for them:

    security.protocol=SASL_SSL           sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required
        username="alice" password="alice-secret";     (or sasl.username / sasl.password)
    ssl.truststore.location=ca.pem       (or ssl.ca.location)

Brokers use it too, to reach other brokers on the inter-broker listener
(``listener_client_properties``).
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

__all__ = ["ClientSecurity", "PLAINTEXT_SECURITY", "listener_client_properties"]

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


# The client keys a node's own connections to a listener take from that listener's settings.
_LISTENER_CLIENT_KEYS = ("ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.type",
                         "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password",
                         "ssl.keystore.certificate.chain", "ssl.keystore.key",
                         "ssl.endpoint.identification.algorithm")


def listener_client_properties(props: Mapping[str, str], listener: str, protocol: SecurityProtocol,
                               mechanism_key: str) -> dict[str, str]:
    """The client properties with which a node logs in to ``listener`` of another node (a
    broker to the inter-broker listener): the listener's own TLS keys (its key store is
    this node's client certificate too) and, for SASL, the mechanism named by
    ``mechanism_key`` (``sasl.mechanism.inter.broker.protocol``) with the
    ``username``/``password`` options of that mechanism's JAAS config on the listener
    (``listener.name.<l>.<mechanism>.sasl.jaas.config``), as Kafka's brokers do."""
    out = {"security.protocol": protocol.name}
    for key in _LISTENER_CLIENT_KEYS:
        value = listener_value(props, listener, key)
        if value is not None:
            out[key] = value
    if protocol.uses_sasl:
        mechanism = (props.get(mechanism_key) or "").upper()
        out["sasl.mechanism"] = mechanism
        jaas = listener_value(props, listener, "sasl.jaas.config", mechanism=mechanism or None)
        if jaas is not None:
            out["sasl.jaas.config"] = jaas
    return out


PLAINTEXT_SECURITY = ClientSecurity()
