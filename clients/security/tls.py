"""TLS contexts from Kafka's ``ssl.*`` keys, PEM only (Ketch reads no JKS or PKCS#12
stores), and the principal Kafka's default builder gives a client certificate.

Server (a listener's keys, ``listener.name.<l>.ssl.*`` first):
    ssl.keystore.location      a PEM file holding the certificate chain and the private key
    ssl.key.password           the private key's password, if it is encrypted
    ssl.keystore.certificate.chain + ssl.keystore.key     the same, inline PEM text
    ssl.truststore.location / ssl.truststore.certificates the CAs client certificates must chain to
    ssl.client.auth            none | requested | required
Client (Kafka's Java names, or librdkafka's):
    ssl.truststore.location | ssl.ca.location,  ssl.truststore.certificates | ssl.ca.pem
    ssl.keystore.location | ssl.certificate.location + ssl.key.location,  ssl.key.password
    ssl.endpoint.identification.algorithm  https (the default: check the host name) or empty
"""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import Callable

__all__ = ["TlsConfigError", "client_ssl_context", "principal_name", "server_ssl_context"]

Lookup = Callable[[str], "str | None"]


class TlsConfigError(ValueError):
    pass


def _check_pem_type(get: Lookup, key: str) -> None:
    kind = (get(key) or "PEM").upper()
    # Kafka's default type is JKS; a user who sets a PEM file without the type still gets PEM.
    if kind not in ("PEM", "JKS"):
        raise TlsConfigError(f"{key}={kind}: Ketch reads PEM files only")


def _load_chain(context: ssl.SSLContext, get: Lookup, location_keys: tuple[str, ...],
                required: bool) -> None:
    password = get("ssl.key.password") or None
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        if chain and key:
            # ssl loads chains from files only: a private temporary file, removed at once.
            fd, path = tempfile.mkstemp(prefix="ketch-keystore-", suffix=".pem")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(chain.strip() + "\n" + key.strip() + "\n")
                context.load_cert_chain(path, password=password)
            finally:
                os.unlink(path)
            return
        location = next((get(k) for k in location_keys if get(k)), None)
        if location:
            key_location = get("ssl.key.location")
            context.load_cert_chain(location, keyfile=key_location or None, password=password)
        elif required:
            raise TlsConfigError("a TLS listener needs ssl.keystore.location (a PEM file with the "
                                 "certificate chain and key) or ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key")
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(f"cannot load the key store: {e}") from None


def _load_trust(context: ssl.SSLContext, get: Lookup, location_keys: tuple[str, ...],
                pem_keys: tuple[str, ...]) -> bool:
    try:
        pem = next((get(k) for k in pem_keys if get(k)), None)
        if pem:
            context.load_verify_locations(cadata=pem)
            return True
        location = next((get(k) for k in location_keys if get(k)), None)
        if location:
            context.load_verify_locations(cafile=location)
            return True
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(f"cannot load the trust store: {e}") from None
    return False


def server_ssl_context(get: Lookup) -> ssl.SSLContext:
    _check_pem_type(get, "ssl.keystore.type")
    _check_pem_type(get, "ssl.truststore.type")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, get, ("ssl.keystore.location",), required=True)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in ("none", "requested", "required"):
        raise TlsConfigError(f"ssl.client.auth={client_auth}: none, requested or required")
    has_trust = _load_trust(context, get, ("ssl.truststore.location",), ("ssl.truststore.certificates",))
    if client_auth != "none" and not has_trust:
        raise TlsConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location or "
                             "ssl.truststore.certificates (the CAs client certificates chain to)")
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[client_auth]
    return context


def client_ssl_context(get: Lookup) -> ssl.SSLContext:
    """Ketch's client side: verifies the broker against the configured CAs (the system's
    when none), and presents a certificate when one is configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_trust(context, get, ("ssl.truststore.location", "ssl.ca.location"),
                       ("ssl.truststore.certificates", "ssl.ca.pem")):
        context.load_default_certs()
    check_host = (get("ssl.endpoint.identification.algorithm") or "https").strip().lower()
    context.check_hostname = check_host == "https"
    _load_chain(context, get, ("ssl.keystore.location", "ssl.certificate.location"), required=False)
    return context


def principal_name(der_certificate: bytes) -> str:
    """The certificate subject as Kafka's default principal builder names it: the
    distinguished name in RFC 2253 order (``CN=alice,OU=eng,O=Example,C=US``)."""
    # Imported here: only a broker with mutual TLS needs it, and it costs every client
    # process (every `ketch` command) ~50 ms at start-up.
    from cryptography import x509
    return x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()
