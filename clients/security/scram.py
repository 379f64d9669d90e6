"""SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), as Kafka's ScramFormatter does it.

A server keeps, per user and mechanism, a *verifier*: salt, iteration count, StoredKey and
ServerKey, never the password. Kafka's Admin computes the verifier client-side (the salted
password is all that crosses the wire in AlterUserScramCredentials), and the controller
writes it to the metadata log as a UserScramCredentialRecord.

Checking a client's proof costs two HMACs and a hash: the expensive PBKDF2 runs only where
a password is known (the client, or the Admin creating a credential), so a failed login
costs the broker a bounded, small amount of work (issue 16's brute-force requirement).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

__all__ = ["MECHANISMS", "ScramCredential", "ScramError", "ScramMechanism", "MIN_ITERATIONS",
           "MAX_ITERATIONS", "client_final_message", "client_first_message", "credential_from_password",
           "parse_attributes", "salted_password", "server_signature", "verify_client_proof"]

# Kafka's limits for a credential's iteration count (ScramMechanism.minIterations, and the
# 16384 maximum AlterUserScramCredentials accepts).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(ValueError):
    """A malformed or failed SCRAM exchange; the text never holds a password."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str           # the SASL mechanism name
    wire_type: int      # Kafka's ScramMechanism type (UserScramCredentialRecord.Mechanism)
    hash_name: str

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_WIRE_TYPE: dict[int, ScramMechanism] = {m.wire_type: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """The server's verifier for one user and mechanism."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    # Hi() of RFC 5802 is PBKDF2 with the HMAC and one block of output. Kafka does not
    # SASLprep the password (nor do librdkafka and the Java client): neither does Ketch.
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, salt: bytes,
                             iterations: int) -> ScramCredential:
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations),
                                  salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """The verifier from a salted password (what AlterUserScramCredentials carries)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(salt, mechanism.h(client_key), mechanism.hmac(salted, b"Server Key"),
                           iterations)


def parse_attributes(message: str) -> dict[str, str]:
    """``a=1,b=2`` into a dict; a repeated or malformed attribute is an error."""
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or part[0] in out:
            raise ScramError(f"invalid SCRAM attribute {part[:16]!r}")
        out[part[0]] = part[2:]
    return out


def encode_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_username(saslname: str) -> str:
    # "=" may only start =2C or =3D (RFC 5802 section 5.1).
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid username encoding")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def client_first_message(username: str, client_nonce: str) -> tuple[str, str]:
    """(the whole message, its bare part without the GS2 header)."""
    bare = f"n={encode_username(username)},r={client_nonce}"
    return "n,," + bare, bare


def client_final_message(mechanism: ScramMechanism, salted: bytes, client_first_bare: str,
                         server_first: str, nonce: str) -> tuple[str, bytes]:
    """(client-final-message, the ServerSignature the server must answer with)."""
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = mechanism.hmac(salted, b"Client Key")
    signature = mechanism.hmac(mechanism.h(client_key), auth_message)
    proof = base64.b64encode(_xor(client_key, signature)).decode()
    server_key = mechanism.hmac(salted, b"Server Key")
    return f"{without_proof},p={proof}", mechanism.hmac(server_key, auth_message)


def verify_client_proof(mechanism: ScramMechanism, credential: ScramCredential,
                        auth_message: bytes, proof: bytes) -> bool:
    """Whether ``proof`` shows the client knows the password (RFC 5802 section 3)."""
    signature = mechanism.hmac(credential.stored_key, auth_message)
    if len(proof) != len(signature):
        return False
    client_key = _xor(proof, signature)
    return hmac.compare_digest(mechanism.h(client_key), credential.stored_key)


def server_signature(mechanism: ScramMechanism, credential: ScramCredential, auth_message: bytes) -> bytes:
    return mechanism.hmac(credential.server_key, auth_message)
