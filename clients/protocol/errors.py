"""Kafka's error codes, as data, and the typed exceptions client shells raise for them.

Theory of operation
-------------------
Every Kafka response carries outcomes as int16 error codes (apache/kafka
`clients/.../common/protocol/Errors.java`). Ketch keeps three kinds of failure apart
(STYLE.md section 4): inside the broker's pure cores a Kafka outcome is *data*, an
`ErrorCode` placed in a response; only client shells turn a code into an exception, via
`raise_for_code` / `for_code`.

Everything here is generated from one table, `_ERROR_TABLE`: code, Kafka's name,
whether Kafka's Java client treats the error as retriable (its exception extends
`RetriableException`), whether it belongs to the metadata-refresh family (its exception
extends `InvalidMetadataException`: the client must refresh metadata before retrying),
and a short message in our own words. `ErrorCode` and one `KafkaApiError` subclass per
code are built from the table, so the enum, the flags and the classes cannot drift apart.

Rules worth knowing:

* `NONE` (0) is success and has no exception class; `raise_for_code(0)` does nothing.
* A code we do not know (a newer broker) maps to `UnknownServerError`, as Kafka's
  `Errors.forCode` does; the instance keeps the code it actually received.
* `invalid_metadata` implies `retriable`, because InvalidMetadataException is itself a
  RetriableException. A test checks this.
* `UNKNOWN_LEADER_EPOCH` is retriable but *not* invalid-metadata: the broker is behind the
  client, so the client retries without refreshing (Kafka's UnknownLeaderEpochException).
  `NOT_CONTROLLER` is likewise plain retriable; admin clients refresh on it by hand.
* Retriable flags follow the Java client of Kafka 4.x. Two changed over time and differ in
  older clients: `REPLICA_NOT_AVAILABLE` became retriable/invalid-metadata in 2.6 (KIP-392
  era), and `CONCURRENT_TRANSACTIONS` is retriable in 4.x.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NoReturn

__all__ = [
    "ErrorCode",
    "ErrorInfo",
    "ERROR_INFO",
    "KafkaApiError",
    "for_code",
    "raise_for_code",
    "error_class_name",
]


class ErrorCode(IntEnum):
    """Kafka's int16 wire error codes; 0 is success.

    Member names are Kafka's own (`Errors.java`), the vocabulary of logs and docs. A code
    never changes meaning once shipped; names have (NOT_LEADER_FOR_PARTITION became
    NOT_LEADER_OR_FOLLOWER in 2.6), and we use the current ones.
    """

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


# (code, retriable, invalid_metadata, short message): one row per ErrorCode member, in code
# order; tests check that the rows and the enum agree and the flag rules hold.
_R, _M = True, True  # readability: _R = retriable, _M = invalid_metadata
_ERROR_TABLE: tuple[tuple[ErrorCode, bool, bool, str], ...] = (
    (ErrorCode.UNKNOWN_SERVER_ERROR, False, False, "The server hit an unexpected error while processing the request."),
    (ErrorCode.NONE, False, False, "Success."),
    (ErrorCode.OFFSET_OUT_OF_RANGE, False, False, "The requested offset is outside the range the server holds."),
    (ErrorCode.CORRUPT_MESSAGE, _R, False, "The message failed its CRC check, is too large, or is otherwise corrupt."),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _R, _M, "This server does not host this topic-partition."),
    (ErrorCode.INVALID_FETCH_SIZE, False, False, "The requested fetch size is invalid."),
    (ErrorCode.LEADER_NOT_AVAILABLE, _R, _M, "The partition has no leader right now (an election is under way)."),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, _R, _M, "This broker is not the leader (or not a replica) of the partition."),
    (ErrorCode.REQUEST_TIMED_OUT, _R, False, "The request timed out."),
    (ErrorCode.BROKER_NOT_AVAILABLE, False, False, "The broker is not available."),
    (ErrorCode.REPLICA_NOT_AVAILABLE, _R, _M, "The replica is not available for the requested topic-partition."),
    (ErrorCode.MESSAGE_TOO_LARGE, False, False, "A message is larger than the largest the server accepts."),
    (ErrorCode.STALE_CONTROLLER_EPOCH, False, False, "The controller moved to another broker."),
    (ErrorCode.OFFSET_METADATA_TOO_LARGE, False, False, "The metadata string of the offset commit is too large."),
    (ErrorCode.NETWORK_EXCEPTION, _R, _M, "The server disconnected before a response was received."),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, _R, False, "The coordinator is still loading its state."),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, _R, False, "The coordinator is not available."),
    (ErrorCode.NOT_COORDINATOR, _R, False, "This broker is not the coordinator for that key."),
    (ErrorCode.INVALID_TOPIC_EXCEPTION, False, False, "The operation named an invalid topic."),
    (ErrorCode.RECORD_LIST_TOO_LARGE, False, False, "A record batch is larger than the segment size allows."),
    (ErrorCode.NOT_ENOUGH_REPLICAS, _R, False, "Fewer in-sync replicas than min.insync.replicas; write rejected."),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, _R, False, "Written, but to fewer in-sync replicas than required."),
    (ErrorCode.INVALID_REQUIRED_ACKS, False, False, "The produce request has an invalid acks value."),
    (ErrorCode.ILLEGAL_GENERATION, False, False, "The group generation id is not valid."),
    (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, False, False, "The member's protocols do not match the group's."),
    (ErrorCode.INVALID_GROUP_ID, False, False, "The group id is invalid."),
    (ErrorCode.UNKNOWN_MEMBER_ID, False, False, "The coordinator does not know this member."),
    (ErrorCode.INVALID_SESSION_TIMEOUT, False, False, "The session timeout is outside the broker's allowed range."),
    (ErrorCode.REBALANCE_IN_PROGRESS, False, False, "The group is rebalancing; the member must rejoin."),
    (ErrorCode.INVALID_COMMIT_OFFSET_SIZE, False, False, "The committed offset data size is not valid."),
    (ErrorCode.TOPIC_AUTHORIZATION_FAILED, False, False, "Not authorized to access the topic."),
    (ErrorCode.GROUP_AUTHORIZATION_FAILED, False, False, "Not authorized to access the group."),
    (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, False, False, "Not authorized for this cluster operation."),
    (ErrorCode.INVALID_TIMESTAMP, False, False, "A message timestamp is outside the acceptable range."),
    (ErrorCode.UNSUPPORTED_SASL_MECHANISM, False, False, "The broker does not support that SASL mechanism."),
    (ErrorCode.ILLEGAL_SASL_STATE, False, False, "The request is not valid in the current SASL state."),
    (ErrorCode.UNSUPPORTED_VERSION, False, False, "The API version is not supported."),
    (ErrorCode.TOPIC_ALREADY_EXISTS, False, False, "A topic with this name already exists."),
    (ErrorCode.INVALID_PARTITIONS, False, False, "The number of partitions is invalid."),
    (ErrorCode.INVALID_REPLICATION_FACTOR, False, False, "The replication factor is invalid."),
    (ErrorCode.INVALID_REPLICA_ASSIGNMENT, False, False, "The replica assignment is invalid."),
    (ErrorCode.INVALID_CONFIG, False, False, "The configuration is invalid."),
    (ErrorCode.NOT_CONTROLLER, _R, False, "This is not the active controller."),
    (ErrorCode.INVALID_REQUEST, False, False, "The request is malformed or was sent to an incompatible broker."),
    (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, False, False, "The message format on the broker does not support the request."),
    (ErrorCode.POLICY_VIOLATION, False, False, "The request violates the configured policy."),
    (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, False, "The broker received an out-of-order sequence number."),
    (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, False, False, "The broker received a duplicate sequence number."),
    (ErrorCode.INVALID_PRODUCER_EPOCH, False, False, "The producer epoch is older than the broker's (the producer was fenced)."),
    (ErrorCode.INVALID_TXN_STATE, False, False, "The transactional operation is invalid in the current state."),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, False, False, "The producer id is not assigned to this transactional id."),
    (ErrorCode.INVALID_TRANSACTION_TIMEOUT, False, False, "The transaction timeout exceeds transaction.max.timeout.ms."),
    (ErrorCode.CONCURRENT_TRANSACTIONS, _R, False, "Another operation on the same transaction is still in progress."),
    (ErrorCode.TRANSACTION_COORDINATOR_FENCED, False, False, "The transaction coordinator sending markers is no longer current."),
    (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, False, False, "Not authorized for this transactional id."),
    (ErrorCode.SECURITY_DISABLED, False, False, "Security features are disabled."),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, False, False, "The broker did not attempt this operation (another in the batch failed)."),
    (ErrorCode.KAFKA_STORAGE_ERROR, _R, _M, "A disk error occurred while accessing the log."),
    (ErrorCode.LOG_DIR_NOT_FOUND, False, False, "The log directory is not in the broker config."),
    (ErrorCode.SASL_AUTHENTICATION_FAILED, False, False, "SASL authentication failed."),
    (ErrorCode.UNKNOWN_PRODUCER_ID, False, False, "The broker has no state for this producer id."),
    (ErrorCode.REASSIGNMENT_IN_PROGRESS, False, False, "A partition reassignment is in progress."),
    (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, False, False, "Delegation tokens are not enabled."),
    (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, False, False, "The delegation token was not found."),
    (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, False, False, "The principal is not the token's owner or renewer."),
    (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, False, False, "Delegation token requests are not allowed on this channel."),
    (ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, False, False, "Delegation token authorization failed."),
    (ErrorCode.DELEGATION_TOKEN_EXPIRED, False, False, "The delegation token has expired."),
    (ErrorCode.INVALID_PRINCIPAL_TYPE, False, False, "The principal type is not supported."),
    (ErrorCode.NON_EMPTY_GROUP, False, False, "The group is not empty."),
    (ErrorCode.GROUP_ID_NOT_FOUND, False, False, "The group id does not exist."),
    (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, _R, False, "The fetch session id was not found."),
    (ErrorCode.INVALID_FETCH_SESSION_EPOCH, _R, False, "The fetch session epoch is invalid."),
    (ErrorCode.LISTENER_NOT_FOUND, _R, _M, "The leader has no listener matching the one the metadata came from."),
    (ErrorCode.TOPIC_DELETION_DISABLED, False, False, "Topic deletion is disabled."),
    (ErrorCode.FENCED_LEADER_EPOCH, _R, _M, "The leader epoch in the request is older than the broker's."),
    (ErrorCode.UNKNOWN_LEADER_EPOCH, _R, False, "The leader epoch in the request is newer than the broker's."),
    (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, False, False, "The client does not support the partition's compression type."),
    (ErrorCode.STALE_BROKER_EPOCH, False, False, "The broker epoch has changed."),
    (ErrorCode.OFFSET_NOT_AVAILABLE, _R, False, "The new leader's high watermark has not caught up yet."),
    (ErrorCode.MEMBER_ID_REQUIRED, False, False, "The member must rejoin with the member id it was given."),
    (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, _R, _M, "The preferred leader is not available."),
    (ErrorCode.GROUP_MAX_SIZE_REACHED, False, False, "The group has reached its maximum size."),
    (ErrorCode.FENCED_INSTANCE_ID, False, False, "Another member registered with the same group.instance.id."),
    (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, _R, _M, "No eligible leader is available for the partition."),
    (ErrorCode.ELECTION_NOT_NEEDED, _R, _M, "A leader election is not needed for the partition."),
    (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, False, False, "No partition reassignment is in progress."),
    (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, False, False, "The group is subscribed to the topic; its offsets cannot be deleted."),
    (ErrorCode.INVALID_RECORD, False, False, "The record failed validation on the broker."),
    (ErrorCode.UNSTABLE_OFFSET_COMMIT, _R, False, "Unstable (transactional) offsets must be cleared first."),
    (ErrorCode.THROTTLING_QUOTA_EXCEEDED, _R, False, "The throttling quota has been exceeded."),
    (ErrorCode.PRODUCER_FENCED, False, False, "A newer producer with the same transactional id fenced this one."),
    (ErrorCode.RESOURCE_NOT_FOUND, False, False, "The request referred to a resource that does not exist."),
    (ErrorCode.DUPLICATE_RESOURCE, False, False, "The request referred to the same resource twice."),
    (ErrorCode.UNACCEPTABLE_CREDENTIAL, False, False, "The credential does not meet the acceptability criteria."),
    (ErrorCode.INCONSISTENT_VOTER_SET, False, False, "The sender or receiver is not one of the expected voters."),
    (ErrorCode.INVALID_UPDATE_VERSION, False, False, "The update version is invalid."),
    (ErrorCode.FEATURE_UPDATE_FAILED, False, False, "Finalized features could not be updated."),
    (ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE, False, False, "The forwarded request principal could not be deserialized."),
    (ErrorCode.SNAPSHOT_NOT_FOUND, False, False, "The requested snapshot was not found."),
    (ErrorCode.POSITION_OUT_OF_RANGE, False, False, "The requested position is outside the snapshot."),
    (ErrorCode.UNKNOWN_TOPIC_ID, _R, _M, "This server does not host this topic id."),
    (ErrorCode.DUPLICATE_BROKER_REGISTRATION, False, False, "This broker id is already in use."),
    (ErrorCode.BROKER_ID_NOT_REGISTERED, False, False, "The broker id is not registered."),
    (ErrorCode.INCONSISTENT_TOPIC_ID, _R, _M, "The log's topic id does not match the request's."),
    (ErrorCode.INCONSISTENT_CLUSTER_ID, False, False, "The cluster id does not match the server's."),
    (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, False, False, "The transactional id was not found."),
    (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, _R, False, "The fetch session used topic ids inconsistently."),
    (ErrorCode.INELIGIBLE_REPLICA, False, False, "The new ISR contains an ineligible replica."),
    (ErrorCode.NEW_LEADER_ELECTED, False, False, "The ISR change was applied but the leader changed."),
    (ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, False, False, "The requested offset has moved to tiered storage."),
    (ErrorCode.FENCED_MEMBER_EPOCH, False, False, "The member epoch is fenced; the member must rejoin."),
    (ErrorCode.UNRELEASED_INSTANCE_ID, False, False, "The instance id is still held by another member."),
    (ErrorCode.UNSUPPORTED_ASSIGNOR, False, False, "The assignor or its version is not supported by the group."),
    (ErrorCode.STALE_MEMBER_EPOCH, False, False, "The member epoch is stale."),
    (ErrorCode.MISMATCHED_ENDPOINT_TYPE, False, False, "The request went to an endpoint of the wrong type."),
    (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, False, False, "This endpoint type is not supported."),
    (ErrorCode.UNKNOWN_CONTROLLER_ID, False, False, "This controller id is not known."),
    (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, False, False, "The telemetry subscription id is invalid or outdated."),
    (ErrorCode.TELEMETRY_TOO_LARGE, False, False, "The telemetry push is larger than the broker accepts."),
    (ErrorCode.INVALID_REGISTRATION, False, False, "The controller considers the broker registration invalid."),
    (ErrorCode.TRANSACTION_ABORTABLE, False, False, "The transaction hit an error; abort it to continue."),
    (ErrorCode.INVALID_RECORD_STATE, False, False, "The record state is invalid; the acknowledgement failed."),
    (ErrorCode.SHARE_SESSION_NOT_FOUND, _R, False, "The share session was not found."),
    (ErrorCode.INVALID_SHARE_SESSION_EPOCH, _R, False, "The share session epoch is invalid."),
    (ErrorCode.FENCED_STATE_EPOCH, False, False, "The share-group state epoch does not match."),
    (ErrorCode.INVALID_VOTER_KEY, False, False, "The voter key does not match the receiving replica's key."),
    (ErrorCode.DUPLICATE_VOTER, False, False, "The voter is already in the voter set."),
    (ErrorCode.VOTER_NOT_FOUND, False, False, "The voter is not in the voter set."),
    (ErrorCode.INVALID_REGULAR_EXPRESSION, False, False, "The regular expression is not valid."),
    (ErrorCode.REBOOTSTRAP_REQUIRED, False, False, "Client metadata is stale; the client should rebootstrap."),
    (ErrorCode.STREAMS_INVALID_TOPOLOGY, False, False, "The streams topology is invalid."),
    (ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH, False, False, "The streams topology epoch is invalid."),
    (ErrorCode.STREAMS_TOPOLOGY_FENCED, False, False, "The streams topology epoch is outdated."),
    (ErrorCode.SHARE_SESSION_LIMIT_REACHED, _R, False, "The broker's share-session limit has been reached."),
)
del _R, _M

@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What the table says about one code."""

    code: ErrorCode
    retriable: bool
    invalid_metadata: bool  # Invariant: invalid_metadata implies retriable
    message: str


ERROR_INFO: dict[ErrorCode, ErrorInfo] = {
    code: ErrorInfo(code, retriable, invalid_metadata, message)
    for code, retriable, invalid_metadata, message in _ERROR_TABLE
}


class KafkaApiError(Exception):
    """A Kafka error code returned by a broker, raised by a client shell.

    Subclasses are generated from the table, one per code. `error_code` on an instance is
    the code actually received: it differs from the class's `code` only for
    `UnknownServerError` standing in for a code this table does not know.
    """

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    invalid_metadata: bool = False
    description: str = ""

    def __init__(self, message: str | None = None, *, error_code: int | None = None) -> None:
        self.error_code: int = int(self.code) if error_code is None else error_code
        self.message: str = message if message is not None else self.description
        super().__init__(self.message)

    def __str__(self) -> str:
        name = self.code.name if self.error_code == self.code else f"code {self.error_code}"
        return f"[Error {self.error_code}] {name}: {self.message}"


def error_class_name(code: ErrorCode) -> str:
    """NOT_LEADER_OR_FOLLOWER -> NotLeaderOrFollowerError; KAFKA_STORAGE_ERROR -> KafkaStorageError."""
    name = code.name
    for suffix in ("_ERROR", "_EXCEPTION"):  # avoid KafkaStorageErrorError, InvalidTopicExceptionError
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


_CLASSES: dict[ErrorCode, type[KafkaApiError]] = {}
for _info in ERROR_INFO.values():
    if _info.code is ErrorCode.NONE:
        continue  # success is not an exception
    _cls = type(
        error_class_name(_info.code),
        (KafkaApiError,),
        {
            "code": _info.code,
            "retriable": _info.retriable,
            "invalid_metadata": _info.invalid_metadata,
            "description": _info.message,
            "__doc__": f"Kafka error {int(_info.code)} {_info.code.name}: {_info.message}",
            "__module__": __name__,
        },
    )
    _CLASSES[_info.code] = _cls
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
del _info, _cls

UnknownServerError: type[KafkaApiError] = _CLASSES[ErrorCode.UNKNOWN_SERVER_ERROR]


def for_code(code: int) -> type[KafkaApiError]:
    """The exception class for a wire code; unknown codes fall back to UnknownServerError.

    NONE (0) is success and has no class: asking for it is a caller bug (ValueError).
    """
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is success; it has no exception class")
    return _CLASSES.get(code, UnknownServerError)  # type: ignore[call-overload]


def raise_for_code(code: int, message: str | None = None) -> None:
    """Client shells only: do nothing for NONE, else raise the matching KafkaApiError."""
    if code == ErrorCode.NONE:
        return
    _raise(for_code(code), message, code)


def _raise(cls: type[KafkaApiError], message: str | None, code: int) -> NoReturn:
    raise cls(message, error_code=code)
