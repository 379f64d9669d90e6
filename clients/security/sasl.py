"""SASL on a Kafka connection, sans-I/O: the server's per-connection authenticator (Kafka's
SaslServerAuthenticator) with its PLAIN and SCRAM mechanisms, and the client mechanisms
Ketch's own connections use.

The network layer (quorum/network.py) feeds the authenticator every request that arrives
before the connection is authenticated and carries out what it answers: a response body to
send, and whether to close the connection afterwards. The order Kafka enforces:

    ApiVersions*  SaslHandshake(v1)  SaslAuthenticate+   -> authenticated (KIP-152 framing)
    ApiVersions*  SaslHandshake(v0)  raw token frames    -> authenticated (the legacy path:
                                                            length-prefixed tokens, no header)

Anything else before authentication completes is refused by closing the connection, as
Kafka does (IllegalSaslStateException).

KIP-368: with a session lifetime (``connections.max.reauth.ms``), the final
SaslAuthenticate response carries it; before it ends the client logs in again on the same
connection (SaslHandshake, SaslAuthenticate) with the same mechanism and principal, and a
connection whose session has ended is closed at its next request that is not a re-login. A failed authentication is answered
(SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM) and the connection closed; the
reason, never the password, goes to the log through ``failure``.
"""
from __future__ import annotations

import base64
import enum
import hmac
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from clients.protocol import messages
from clients.protocol.api_keys import ApiKey
from clients.protocol.errors import ErrorCode
from clients.security import scram
from clients.security.scram import ScramCredential, ScramError, ScramMechanism

__all__ = ["PLAIN", "AuthenticatorState", "PlainClient", "PlainServer", "SaslAnswer",
           "SaslAuthenticationError", "SaslServerAuthenticator", "ScramClient", "ScramServer"]

PLAIN = "PLAIN"
# A SCRAM nonce Kafka's server appends is 32 random bytes in base64; ours is the same size.
SERVER_NONCE_BYTES = 32


class SaslAuthenticationError(Exception):
    """Authentication failed; ``str()`` is what the client is told (never a password)."""


class SaslServerMechanism(Protocol):
    complete: bool
    authorization_id: str

    def evaluate(self, token: bytes) -> bytes:
        """The next challenge; raises SaslAuthenticationError."""


# -------------------------------------------------------------------- PLAIN (RFC 4616)

class PlainServer:
    """PLAIN against a fixed user table (Kafka's PlainServerCallbackHandler reading the
    JAAS ``user_<name>="<password>"`` options)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        expected = self._users.get(username)
        # compare_digest on both branches: an unknown user costs what a wrong password does.
        ok = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization "
                                          "id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self.complete = False

    def initial_response(self) -> bytes:
        return b"\0" + self.username.encode() + b"\0" + self.password.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None


# -------------------------------------------------------------------- SCRAM (RFC 5802)

class ScramServer:
    """One SCRAM exchange on the server: client-first -> server-first, client-final ->
    server-final. ``credentials(user)`` is the verifier for this mechanism, or None."""

    def __init__(self, mechanism: ScramMechanism,
                 credentials: Callable[[str], ScramCredential | None],
                 random_bytes: Callable[[int], bytes]) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._random_bytes = random_bytes
        self.complete = False
        self.authorization_id = ""
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        try:
            if self._credential is None:
                return self._client_first(text)
            return self._client_final(text)
        except ScramError as e:
            raise SaslAuthenticationError(f"Authentication failed: {e}") from None

    def _client_first(self, text: str) -> bytes:
        # gs2-header: no channel binding ("n"), an optional authzid, then the bare message.
        cb, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if cb != "n":
            raise ScramError("channel binding is not supported")
        attrs = scram.parse_attributes(bare)
        if "n" not in attrs or "r" not in attrs or "m" in attrs:
            raise ScramError("invalid client-first-message")
        username = scram.decode_username(attrs["n"])
        if authzid and authzid != "a=" + attrs["n"]:
            raise ScramError("authorization id differs from the user name")
        credential = self._credentials(username)
        if credential is None:
            raise ScramError("Invalid user credentials")
        self._credential = credential
        self.authorization_id = username
        self._client_first_bare = bare
        self._nonce = attrs["r"] + base64.b64encode(self._random_bytes(SERVER_NONCE_BYTES)).decode()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        if self.complete:
            raise ScramError("unexpected message after the final one")
        assert self._credential is not None
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attrs = scram.parse_attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("Invalid nonce")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise ScramError("invalid proof encoding") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        if not scram.verify_client_proof(self.mechanism, self._credential, auth_message, proof):
            raise ScramError("Invalid user credentials")
        self.complete = True
        signature = scram.server_signature(self.mechanism, self._credential, auth_message)
        return b"v=" + base64.b64encode(signature)


class ScramClient:
    """Ketch's client side of SCRAM: ``initial_response()``, then ``evaluate`` on the
    server-first (returns client-final) and on the server-final (checks the server knew
    the verifier; returns None)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str) -> None:
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._client_nonce = nonce
        self._client_first_bare = ""
        self._server_signature: bytes | None = None
        self.complete = False

    def initial_response(self) -> bytes:
        message, self._client_first_bare = scram.client_first_message(self.username, self._client_nonce)
        return message.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        text = challenge.decode()
        if self._server_signature is None:
            attrs = scram.parse_attributes(text)
            if "e" in attrs:
                raise SaslAuthenticationError(f"SCRAM server error: {attrs['e']}")
            nonce = attrs.get("r", "")
            if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
                raise SaslAuthenticationError("SCRAM server nonce does not extend ours")
            iterations = int(attrs["i"])
            if iterations < scram.MIN_ITERATIONS:
                raise SaslAuthenticationError(f"SCRAM iteration count {iterations} below "
                                              f"{scram.MIN_ITERATIONS}")
            salted = scram.salted_password(self.mechanism, self._password,
                                           base64.b64decode(attrs["s"]), iterations)
            final, self._server_signature = scram.client_final_message(
                self.mechanism, salted, self._client_first_bare, text, nonce)
            return final.encode()
        attrs = scram.parse_attributes(text)
        if "e" in attrs:
            raise SaslAuthenticationError(f"SCRAM server error: {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), self._server_signature):
            raise SaslAuthenticationError("SCRAM server signature does not match: not the "
                                          "server that holds our credential")
        self.complete = True
        return None


# -------------------------------------------------------------------- the server's state machine

class AuthenticatorState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"             # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "AUTHENTICATE"       # SaslAuthenticate requests (KIP-152)
    LEGACY_TOKEN = "LEGACY_TOKEN"       # raw token frames (after SaslHandshake v0)
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class SaslAnswer:
    """What the network layer does: send ``response`` (a response body, or for a legacy
    token the raw bytes; None: nothing), then close if ``close``."""
    response: object | None
    close: bool = False


class SaslServerAuthenticator:
    """One connection's SASL exchange on a SASL_PLAINTEXT / SASL_SSL listener.

    ``mechanisms``: the enabled mechanism names (``sasl.enabled.mechanisms``), each with a
    factory for a fresh server mechanism. ``failure`` holds why authentication failed,
    for the log."""

    def __init__(self, mechanisms: Mapping[str, Callable[[], SaslServerMechanism]],
                 session_lifetime_ms: int = 0) -> None:
        self._factories = mechanisms
        self.enabled: Sequence[str] = list(mechanisms)
        self.session_lifetime_ms = session_lifetime_ms      # 0: sessions never end
        self.state = AuthenticatorState.HANDSHAKE
        self.mechanism_name: str | None = None
        self._mechanism: SaslServerMechanism | None = None
        self.failure: str | None = None
        self.session_expires_ms: int | None = None
        # While re-authenticating (KIP-368): (mechanism, principal) of the session it renews.
        self._renewing: tuple[str, str] | None = None

    @property
    def reauthenticates(self) -> bool:
        """Whether a logged-in connection may (and must) log in again."""
        return self.session_lifetime_ms > 0

    def expired(self, now_ms: int) -> bool:
        """The session ended: anything but a re-login now closes the connection."""
        return (self.state is AuthenticatorState.COMPLETE and self.session_expires_ms is not None
                and now_ms >= self.session_expires_ms)

    @property
    def complete(self) -> bool:
        return self.state is AuthenticatorState.COMPLETE

    @property
    def expects_legacy_token(self) -> bool:
        return self.state is AuthenticatorState.LEGACY_TOKEN

    @property
    def authorization_id(self) -> str:
        assert self._mechanism is not None and self._mechanism.complete
        return self._mechanism.authorization_id

    def allows(self, api_key: int) -> bool:
        """Whether a request with this key may be served before authentication completes
        (by the handler: only ApiVersions, and only before the handshake)."""
        return api_key == ApiKey.API_VERSIONS and self.state is AuthenticatorState.HANDSHAKE

    def refuse(self, api_key: int) -> SaslAnswer:
        """A request that is not part of the exchange arrived before it completed."""
        try:
            name = ApiKey(api_key).name
        except ValueError:
            name = f"API key {api_key}"
        self._fail(f"unexpected {name} request in SASL state {self.state.name}")
        return SaslAnswer(None, close=True)

    def handshake(self, request: messages.SaslHandshakeRequest, version: int) -> SaslAnswer:
        cls = messages.SaslHandshakeResponse
        if self.state is AuthenticatorState.COMPLETE and self.reauthenticates and version >= 1:
            assert self.mechanism_name is not None
            self._renewing = (self.mechanism_name, self.authorization_id)
            self.state = AuthenticatorState.HANDSHAKE
        if self.state is not AuthenticatorState.HANDSHAKE:
            self._fail(f"SaslHandshake in state {self.state.name}")
            return SaslAnswer(cls(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=list(self.enabled)),
                              close=True)
        factory = self._factories.get(request.mechanism)
        if self._renewing is not None and request.mechanism != self._renewing[0]:
            self._fail(f"re-authentication with {request.mechanism}, not {self._renewing[0]}")
            return SaslAnswer(cls(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[self._renewing[0]]),
                              close=True)
        if factory is None:
            self._fail(f"unsupported SASL mechanism {request.mechanism!r}")
            return SaslAnswer(cls(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                  mechanisms=list(self.enabled)), close=True)
        self.mechanism_name = request.mechanism
        self._mechanism = factory()
        self.state = AuthenticatorState.LEGACY_TOKEN if version == 0 else AuthenticatorState.AUTHENTICATE
        return SaslAnswer(cls(error_code=ErrorCode.NONE, mechanisms=list(self.enabled)))

    def authenticate(self, request: messages.SaslAuthenticateRequest, version: int,
                     now_ms: int = 0) -> SaslAnswer:
        cls = messages.SaslAuthenticateResponse
        if self.state is not AuthenticatorState.AUTHENTICATE:
            self._fail(f"SaslAuthenticate in state {self.state.name}")
            return SaslAnswer(cls(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                  error_message="Unexpected SaslAuthenticate request",
                                  auth_bytes=b""), close=True)
        try:
            challenge = self._evaluate(request.auth_bytes)
        except SaslAuthenticationError as e:
            return SaslAnswer(cls(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                  error_message=str(e), auth_bytes=b""), close=True)
        lifetime = 0
        if self.complete:
            if self._renewing is not None and self.authorization_id != self._renewing[1]:
                message = "Cannot change principals during re-authentication"
                self._fail(f"re-authentication as {self.authorization_id}, not {self._renewing[1]}")
                return SaslAnswer(cls(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      error_message=message, auth_bytes=b""), close=True)
            self._renewing = None
            if self.reauthenticates:
                lifetime = self.session_lifetime_ms
                self.session_expires_ms = now_ms + lifetime
        return SaslAnswer(cls(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                              session_lifetime_ms=lifetime))

    def legacy_token(self, token: bytes, now_ms: int = 0) -> SaslAnswer:
        """A raw token after SaslHandshake v0; the answer's response is the raw challenge.
        A failure has no way to be reported on this path: the connection closes. Such a
        client cannot re-authenticate: with a session lifetime its connection closes when
        the session ends (KIP-368)."""
        assert self.state is AuthenticatorState.LEGACY_TOKEN
        try:
            challenge = self._evaluate(token)
        except SaslAuthenticationError:
            return SaslAnswer(None, close=True)
        if self.complete and self.reauthenticates:
            self.session_expires_ms = now_ms + self.session_lifetime_ms
        # Kafka sends every challenge, PLAIN's empty one too (a zero-length frame).
        return SaslAnswer(challenge)

    def _evaluate(self, token: bytes) -> bytes:
        assert self._mechanism is not None
        try:
            challenge = self._mechanism.evaluate(token)
        except SaslAuthenticationError as e:
            self._fail(f"{self.mechanism_name}: {e}")
            raise
        if self._mechanism.complete:
            self.state = AuthenticatorState.COMPLETE
        return challenge

    def _fail(self, reason: str) -> None:
        self.state = AuthenticatorState.FAILED
        self.failure = reason
