"""Error answers built for a whole request (clients/protocol/error_responses.py)."""
from __future__ import annotations

from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.protocol.error_responses import error_response


def test_alter_user_scram_credentials_errors_name_every_user() -> None:
    """A standby controller's NOT_CONTROLLER must reach the broker per user: an answer with
    no results read as success, and the admin client as "the answer left this user out"
    (a secured chaos run's first SCRAM write hit a standby)."""
    A = messages.AlterUserScramCredentialsRequest
    request = A(deletions=[A.ScramCredentialDeletion(name="alice", mechanism=1)],
                upsertions=[A.ScramCredentialUpsertion(name=n, mechanism=2, iterations=4096,
                                                       salt=b"s", salted_password=b"p")
                            for n in ("alice", "bob")])
    resp = error_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request, ErrorCode.NOT_CONTROLLER, "standby")
    assert [(r.user, r.error_code) for r in resp.results] == [
        ("alice", ErrorCode.NOT_CONTROLLER), ("bob", ErrorCode.NOT_CONTROLLER)]
