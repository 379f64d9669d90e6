"""DescribeUserScramCredentials, answered by a broker from its metadata image (KIP-554):
each user's mechanisms and iteration counts, never a salt or a key."""
from __future__ import annotations

from collections import Counter
from typing import Any

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import MetadataImage

__all__ = ["describe_user_scram_credentials"]


def describe_user_scram_credentials(image: MetadataImage, request: messages.DescribeUserScramCredentialsRequest
                                    ) -> messages.DescribeUserScramCredentialsResponse:
    """Every user with a credential when ``users`` is null or empty; a named user without
    one: RESOURCE_NOT_FOUND; a user named twice: DUPLICATE_RESOURCE (Kafka's answers)."""
    R = messages.DescribeUserScramCredentialsResponse
    by_user: dict[str, list] = {}
    for (user, mechanism), c in sorted(image.scram.credentials.items()):
        by_user.setdefault(user, []).append(R.CredentialInfo(mechanism=mechanism, iterations=c.iterations))
    if not request.users:
        results = [R.DescribeUserScramCredentialsResult(user=u, error_code=ErrorCode.NONE,
                                                        error_message=None, credential_infos=infos)
                   for u, infos in by_user.items()]
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
    counts = Counter(u.name for u in request.users)
    results = []
    for name in counts:
        infos: list[Any]
        if counts[name] > 1:
            code, message, infos = ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}", []
        elif name not in by_user:
            code, message, infos = ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {name}", []
        else:
            code, message, infos = ErrorCode.NONE, None, by_user[name]
        results.append(R.DescribeUserScramCredentialsResult(user=name, error_code=code,
                                                            error_message=message, credential_infos=infos))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
