"""SCRAM credentials in the metadata log (KIP-554, Kafka's ScramControlManager).

AlterUserScramCredentials carries, per user and mechanism, either a deletion or an upsertion
with the salt and the *salted* password the Admin computed; the controller derives the
verifier (StoredKey, ServerKey) and writes a UserScramCredentialRecord, or a
RemoveUserScramCredentialRecord for a deletion. Results are per user: a user and mechanism
named twice in one request (DUPLICATE_RESOURCE), an empty name or a bad iteration count
(UNACCEPTABLE_CREDENTIAL), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), or deleting
a credential that does not exist (RESOURCE_NOT_FOUND) fails that user only, and nothing of
that user is written. Brokers answer DescribeUserScramCredentials from their image
(broker/scram_describe.py), as Kafka's do.
"""
from __future__ import annotations

from collections import Counter

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.security import scram
from metadata_log.image import MetadataImage
from quorum.controller.result import ControllerResult

__all__ = ["alter_user_scram_credentials"]


def alter_user_scram_credentials(image: MetadataImage, request: messages.AlterUserScramCredentialsRequest
                                 ) -> ControllerResult[messages.AlterUserScramCredentialsResponse]:
    R = messages.AlterUserScramCredentialsResponse
    entries = [(d.name, d.mechanism, d) for d in request.deletions] + \
              [(u.name, u.mechanism, u) for u in request.upsertions]
    pairs = Counter((name, mechanism) for name, mechanism, _ in entries)
    problems: dict[str, tuple[int, str]] = {}
    records_by_user: dict[str, list] = {}
    for name, mechanism_type, entry in entries:
        if name in problems:
            continue
        problem = _problem(image, name, mechanism_type, entry, pairs[(name, mechanism_type)])
        if problem is not None:
            problems[name] = problem
            continue
        if isinstance(entry, messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion):
            records_by_user.setdefault(name, []).append(messages.RemoveUserScramCredentialRecord(
                name=name, mechanism=mechanism_type))
        else:
            c = scram.credential_from_salted(scram.BY_WIRE_TYPE[mechanism_type], bytes(entry.salted_password),
                                             bytes(entry.salt), entry.iterations)
            records_by_user.setdefault(name, []).append(messages.UserScramCredentialRecord(
                name=name, mechanism=mechanism_type, salt=c.salt, stored_key=c.stored_key,
                server_key=c.server_key, iterations=c.iterations))
    results = []
    records: list = []
    for name in dict.fromkeys(name for name, _, _ in entries):     # request order, one result per user
        code, message = problems.get(name, (ErrorCode.NONE, None))
        if code == ErrorCode.NONE:
            records.extend(records_by_user[name])
        results.append(R.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message))
    return ControllerResult(tuple(records), R(throttle_time_ms=0, results=results))


def _problem(image: MetadataImage, name: str, mechanism_type: int, entry: object,
             count: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if count > 1:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    if mechanism_type not in scram.BY_WIRE_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if isinstance(entry, messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion):
        if image.scram.get(name, mechanism_type) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    assert isinstance(entry, messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion)
    if entry.iterations < scram.MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if entry.iterations > scram.MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not entry.salt or not entry.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password are required"
    return None
