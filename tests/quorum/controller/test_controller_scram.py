"""AlterUserScramCredentials in the controller (quorum/controller/scram_control.py), the
records' replay into the image and snapshots, and the brokers' DescribeUserScramCredentials."""
from __future__ import annotations

from broker.scram_describe import describe_user_scram_credentials
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.security import scram
from metadata_log.image import Provenance
from metadata_log.snapshot import image_to_records, records_to_image
from tests.quorum.controller.harness import Harness

A = messages.AlterUserScramCredentialsRequest
D = messages.DescribeUserScramCredentialsRequest
SHA256, SHA512 = scram.SCRAM_SHA_256, scram.SCRAM_SHA_512


def upsert(name: str, mechanism=SHA512, password: str = "pw", iterations: int = 4096, salt: bytes = b"salt"):
    return A.ScramCredentialUpsertion(
        name=name, mechanism=getattr(mechanism, "wire_type", mechanism), iterations=iterations, salt=salt,
        salted_password=scram.salted_password(mechanism if not isinstance(mechanism, int) else SHA512,
                                              password, salt, max(iterations, 1)))


def alter(h: Harness, upsertions=(), deletions=()):
    return h.commit(h.controller.handle_alter_user_scram_credentials(
        A(deletions=list(deletions), upsertions=list(upsertions)), h.now_ms))


def test_upsert_replays_the_verifier_the_server_checks_and_delete_removes_it() -> None:
    h = Harness()
    resp = alter(h, [upsert("alice", SHA512, "alice-pw", 8192), upsert("alice", SHA256, "alice-pw")])
    assert [(r.user, r.error_code) for r in resp.results] == [("alice", ErrorCode.NONE)]
    stored = h.image.scram.get("alice", SHA512.wire_type)
    assert stored == scram.credential_from_password(SHA512, "alice-pw", b"salt", 8192)
    assert h.image.scram.get("alice", SHA256.wire_type) is not None
    # A snapshot carries the credentials.
    again = records_to_image(image_to_records(h.image), Provenance(offset=h.image.provenance.offset,
                                                                   epoch=h.image.provenance.epoch))
    assert again.scram == h.image.scram
    alter(h, deletions=[A.ScramCredentialDeletion(name="alice", mechanism=SHA256.wire_type)])
    assert h.image.scram.get("alice", SHA256.wire_type) is None
    assert h.image.scram.get("alice", SHA512.wire_type) == stored


def test_bad_alterations_fail_per_user_and_write_nothing_for_that_user() -> None:
    h = Harness()
    before = h.next_offset
    resp = alter(h, [upsert("few", iterations=100), upsert("many", iterations=20000), upsert("", SHA256),
                     upsert("twice"), upsert("twice"), upsert("odd", mechanism=7)],
                 deletions=[A.ScramCredentialDeletion(name="ghost", mechanism=SHA256.wire_type)])
    codes = {r.user: r.error_code for r in resp.results}
    assert codes == {"few": ErrorCode.UNACCEPTABLE_CREDENTIAL, "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
                     "": ErrorCode.UNACCEPTABLE_CREDENTIAL, "twice": ErrorCode.DUPLICATE_RESOURCE,
                     "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "ghost": ErrorCode.RESOURCE_NOT_FOUND}
    assert h.next_offset == before and not h.image.scram.credentials
    # One good user among bad ones is written alone.
    resp = alter(h, [upsert("good"), upsert("bad", iterations=1)])
    assert {r.user: r.error_code for r in resp.results} == {"good": 0, "bad": ErrorCode.UNACCEPTABLE_CREDENTIAL}
    assert set(h.image.scram.credentials) == {("good", SHA512.wire_type)}


def test_describe_lists_mechanisms_and_iterations_never_keys() -> None:
    h = Harness()
    alter(h, [upsert("alice", SHA512, iterations=8192), upsert("bob", SHA256)])
    every = describe_user_scram_credentials(h.image, D(users=None))
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in every.results] == [
        ("alice", [(2, 8192)]), ("bob", [(1, 4096)])]
    named = describe_user_scram_credentials(h.image, D(users=[D.UserName(name="bob"), D.UserName(name="carol"),
                                                             D.UserName(name="bob")]))
    assert {r.user: r.error_code for r in named.results} == {"bob": ErrorCode.DUPLICATE_RESOURCE,
                                                             "carol": ErrorCode.RESOURCE_NOT_FOUND}
