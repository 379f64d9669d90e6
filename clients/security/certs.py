"""A private CA and the certificates a local cluster needs (``ketch up --secure``, tests),
written as PEM files: the CA's certificate (the clients' trust store), and for each name a
certificate with its key in one file (a listener's ``ssl.keystore.location``) and apart
(``ssl.certificate.location`` / ``ssl.key.location`` for librdkafka and kcat)."""
from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["IssuedCertificate", "LocalCA"]

_VALID_DAYS = 825


def _write(path: str, data: bytes, private: bool = False) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


class IssuedCertificate:
    def __init__(self, certificate: str, key: str, keystore: str) -> None:
        self.certificate = certificate      # PEM certificate
        self.key = key                      # PEM private key (unencrypted)
        self.keystore = keystore            # both, for ssl.keystore.location


class LocalCA:
    """A self-signed CA kept in ``directory`` (ca.pem, ca-key.pem), created on first use."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.ca_path = os.path.join(directory, "ca.pem")
        key_path = os.path.join(directory, "ca-key.pem")
        if os.path.exists(self.ca_path) and os.path.exists(key_path):
            with open(self.ca_path, "rb") as f:
                self._cert = x509.load_pem_x509_certificate(f.read())
            with open(key_path, "rb") as f:
                key = serialization.load_pem_private_key(f.read(), None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            self._key = key
            return
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Ketch local cluster"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "Ketch local CA")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                     critical=True)
                      .sign(self._key, hashes.SHA256()))
        _write(key_path, self._key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), private=True)
        _write(self.ca_path, self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_name: str, common_name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              organization: str | None = None) -> IssuedCertificate:
        """A server-and-client certificate for ``common_name``, valid for ``hosts``."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = []
        if organization:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(x509.Name(attrs))
                .issuer_name(self._cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(self._key, hashes.SHA256()))
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        base = os.path.join(self.directory, file_name)
        return IssuedCertificate(_write(base + ".crt", cert_pem), _write(base + ".key", key_pem, True),
                                 _write(base + ".pem", cert_pem + key_pem, True))
