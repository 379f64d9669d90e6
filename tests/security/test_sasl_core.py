"""The pure SASL and SCRAM cores: RFC test vectors, the server's state machine driven by
Ketch's client mechanisms, and every refusal the issue names."""
from __future__ import annotations

import base64
import random

import pytest

from clients.protocol import messages
from clients.protocol.api_keys import ApiKey
from clients.protocol.errors import ErrorCode
from clients.security import scram
from clients.security.jaas import JaasError, parse_jaas_config
from clients.security.sasl import (
    AuthenticatorState, PlainClient, PlainServer, SaslAuthenticationError, SaslServerAuthenticator,
    ScramClient, ScramServer,
)
from clients.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramMechanism


# ------------------------------------------------------------------ RFC vectors

def test_rfc7677_scram_sha_256_vector() -> None:
    """RFC 7677 section 3: the whole exchange for user "user", password "pencil"."""
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    salted = scram.salted_password(SCRAM_SHA_256, "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    final, server_sig = scram.client_final_message(
        SCRAM_SHA_256, salted, client_first_bare, server_first,
        "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert final == ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert base64.b64encode(server_sig).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc5802_vector_through_the_server() -> None:
    """RFC 5802 section 5 (SHA-1): the server mechanism, given the verifier and the RFC's
    server nonce, answers the RFC's server-first and server-final messages."""
    sha1 = ScramMechanism("SCRAM-SHA-1", 0, "sha1")
    salt = base64.b64decode("QSXCR+Q6sek8bf92")
    credential = scram.credential_from_password(sha1, "pencil", salt, 4096)
    suffix = "3rfcNHYJY1ZVvWVs7j"
    # Our server appends base64 of random bytes to the client's nonce.
    server = ScramServer(sha1, {"user": credential}.get, lambda n: base64.b64decode(suffix + "=="))
    first = server.evaluate(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").decode()
    nonce = scram.parse_attributes(first)["r"]
    assert first.endswith(",s=QSXCR+Q6sek8bf92,i=4096")
    salted = scram.salted_password(sha1, "pencil", salt, 4096)
    final, expected_sig = scram.client_final_message(sha1, salted, "n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                                                     first, nonce)
    answer = server.evaluate(final.encode())
    assert server.complete and server.authorization_id == "user"
    assert answer == b"v=" + base64.b64encode(expected_sig)
    # And the RFC's own numbers for the RFC's own nonce.
    rfc_first = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    rfc_final, sig = scram.client_final_message(sha1, salted, "n=user,r=fyko+d2lbbFgONRv9qkxdawL", rfc_first,
                                                "fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j")
    assert rfc_final.endswith(",p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert base64.b64encode(sig).decode() == "rmF9pqV8S7suAoZWja4dJRkFsKQ="


# ------------------------------------------------------------------ the state machine

def _scram_authenticator(mechanism: ScramMechanism, users: dict[str, str]) -> SaslServerAuthenticator:
    rng = random.Random(7)
    creds = {u: scram.credential_from_password(mechanism, p, rng.randbytes(16), 4096) for u, p in users.items()}
    return SaslServerAuthenticator({
        mechanism.name: lambda: ScramServer(mechanism, creds.get, rng.randbytes),
        "PLAIN": lambda: PlainServer(users),
    })


def _handshake(auth: SaslServerAuthenticator, mechanism: str, version: int = 1):
    return auth.handshake(messages.SaslHandshakeRequest(mechanism=mechanism), version)


def _authenticate(auth: SaslServerAuthenticator, token: bytes):
    return auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=token), 2)


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_exchange_authenticates(mechanism: ScramMechanism) -> None:
    auth = _scram_authenticator(mechanism, {"alice": "alice-secret"})
    assert auth.allows(ApiKey.API_VERSIONS) and not auth.allows(ApiKey.METADATA)
    assert _handshake(auth, mechanism.name).response.error_code == ErrorCode.NONE
    client = ScramClient(mechanism, "alice", "alice-secret", "clientnonce123")
    first = _authenticate(auth, client.initial_response())
    assert first.response.error_code == ErrorCode.NONE and not first.close
    final = _authenticate(auth, client.evaluate(first.response.auth_bytes))
    assert final.response.error_code == ErrorCode.NONE and not final.close
    assert client.evaluate(final.response.auth_bytes) is None and client.complete
    assert auth.complete and auth.authorization_id == "alice"


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_scram_wrong_password_or_unknown_user_fails_and_closes(user: str, password: str) -> None:
    auth = _scram_authenticator(SCRAM_SHA_512, {"alice": "alice-secret"})
    _handshake(auth, "SCRAM-SHA-512")
    client = ScramClient(SCRAM_SHA_512, user, password, "n0nce")
    first = _authenticate(auth, client.initial_response())
    if first.response.error_code == ErrorCode.NONE:
        answer = _authenticate(auth, client.evaluate(first.response.auth_bytes))
    else:
        answer = first
    assert answer.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close
    assert auth.state is AuthenticatorState.FAILED
    assert password not in auth.failure and password not in answer.response.error_message


def test_scram_server_refuses_replayed_or_foreign_nonce() -> None:
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "SCRAM-SHA-256")
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "abc")
    _authenticate(auth, client.initial_response())
    forged = b"c=biws,r=abcOTHER,p=" + base64.b64encode(b"x" * 32)
    answer = _authenticate(auth, forged)
    assert answer.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close


def test_client_detects_a_server_without_the_verifier() -> None:
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "abc")
    client.initial_response()
    final = client.evaluate(b"r=abcdef,s=" + base64.b64encode(b"salt") + b",i=4096")
    assert final is not None
    with pytest.raises(SaslAuthenticationError):
        client.evaluate(b"v=" + base64.b64encode(b"\0" * 32))


def test_plain_right_and_wrong() -> None:
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "PLAIN")
    answer = _authenticate(auth, PlainClient("alice", "pw").initial_response())
    assert answer.response.error_code == ErrorCode.NONE and auth.authorization_id == "alice"
    for token in (PlainClient("alice", "bad").initial_response(), PlainClient("bob", "pw").initial_response(),
                  b"alice\0pw", b"other\0alice\0pw"):
        auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
        _handshake(auth, "PLAIN")
        answer = _authenticate(auth, token)
        assert answer.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes() -> None:
    auth = _scram_authenticator(SCRAM_SHA_256, {})
    answer = _handshake(auth, "GSSAPI")
    assert answer.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and answer.close
    assert set(answer.response.mechanisms) == {"SCRAM-SHA-256", "PLAIN"}


def test_requests_out_of_order_are_refused() -> None:
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    answer = _authenticate(auth, b"x")        # SaslAuthenticate before the handshake
    assert answer.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and answer.close
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    assert auth.refuse(ApiKey.PRODUCE).close and auth.state is AuthenticatorState.FAILED
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "PLAIN")
    assert not auth.allows(ApiKey.API_VERSIONS)     # only before the handshake
    assert _handshake(auth, "PLAIN").close          # a second handshake


def test_legacy_v0_token_path() -> None:
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "SCRAM-SHA-256", version=0)
    assert auth.expects_legacy_token
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "legacy")
    first = auth.legacy_token(client.initial_response())
    final = auth.legacy_token(client.evaluate(first.response))
    assert client.evaluate(final.response) is None and auth.complete
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "PLAIN", version=0)
    assert auth.legacy_token(b"\0alice\0nope").close
    auth = _scram_authenticator(SCRAM_SHA_256, {"alice": "pw"})
    _handshake(auth, "PLAIN", version=0)
    answer = auth.legacy_token(b"\0alice\0pw")
    assert answer.response == b"" and not answer.close and auth.complete   # an empty frame, as Kafka sends


def test_username_encoding_round_trip() -> None:
    assert scram.decode_username(scram.encode_username("a=b,c")) == "a=b,c"
    with pytest.raises(scram.ScramError):
        scram.decode_username("a=b")


def test_jaas_options() -> None:
    cfg = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret" user_admin="admin-secret" '
                            'user_alice="a\\"lice";')
    assert cfg.users == {"admin": "admin-secret", "alice": 'a"lice'}
    assert (cfg.username, cfg.password) == ("admin", "admin-secret")
    with pytest.raises(JaasError) as e:
        parse_jaas_config('PlainLoginModule required password="s3cret" broken')
    assert "s3cret" not in str(e.value)
    with pytest.raises(JaasError):
        parse_jaas_config('username="x";')


# ------------------------------------------------------------------ KIP-368 re-authentication

def _plain_session(lifetime_ms: int) -> SaslServerAuthenticator:
    return SaslServerAuthenticator({"PLAIN": lambda: PlainServer({"alice": "pw", "bob": "pw2"}),
                                    "SCRAM-SHA-256": lambda: ScramServer(SCRAM_SHA_256, {}.get, bytes)},
                                   session_lifetime_ms=lifetime_ms)


def test_session_lifetime_is_given_and_ends() -> None:
    auth = _plain_session(1000)
    _handshake(auth, "PLAIN")
    answer = auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), 2, now_ms=5000)
    assert answer.response.session_lifetime_ms == 1000
    assert not auth.expired(5999) and auth.expired(6000)


def test_reauthentication_renews_the_session_for_the_same_principal_only() -> None:
    auth = _plain_session(1000)
    _handshake(auth, "PLAIN")
    auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), 2, now_ms=0)
    assert _handshake(auth, "PLAIN").response.error_code == ErrorCode.NONE       # a re-login
    answer = auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), 2, now_ms=900)
    assert answer.response.error_code == ErrorCode.NONE and auth.complete
    assert not auth.expired(1500) and auth.expired(1900)
    # Another principal on the same connection: refused and closed.
    _handshake(auth, "PLAIN")
    answer = auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw2"), 2, now_ms=1000)
    assert answer.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close
    # Another mechanism: refused too.
    auth = _plain_session(1000)
    _handshake(auth, "PLAIN")
    auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), 2, now_ms=0)
    assert _handshake(auth, "SCRAM-SHA-256").close


def test_without_a_lifetime_a_session_never_ends_and_no_relogin_is_taken() -> None:
    auth = _plain_session(0)
    _handshake(auth, "PLAIN")
    answer = auth.authenticate(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), 2, now_ms=0)
    assert answer.response.session_lifetime_ms == 0 and not auth.expired(10**12)
    assert not auth.reauthenticates
