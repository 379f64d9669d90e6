"""Every exception a Ketch client raises.

Two families, kept apart as STYLE.md section 4 asks:

* **Kafka outcomes**: the typed `KafkaApiError` classes generated from Kafka's error table
  in `clients/protocol/errors.py` (`NotLeaderOrFollowerError`, `RecordTooLargeError`,
  `UnknownTopicOrPartitionError`, ...), re-exported here unchanged. Each has `retriable`
  and `invalid_metadata`, and `for_code(code)` / `raise_for_code(code)` build them.
* **Client-side failures** that no broker reported: a bad configuration key
  (`ConfigError`, naming the key), a deadline that passed (`KafkaTimeoutError`), a client
  used after `close()` (`ClientClosedError`), a broker that cannot be reached
  (`KafkaConnectionError` and subclasses, which are `ConnectionError`s so callers can
  treat them like any broken socket), a serializer that failed (`SerializationError`).

Where a Kafka error and a client-side one share a name in other libraries (a record too
large for `max.request.size` is refused before sending), Ketch raises the Kafka class
(`RecordTooLargeError`) with a message that says which limit was hit, as the Java client
does.
"""
from __future__ import annotations

from clients.protocol import errors as _protocol_errors
from clients.protocol.errors import *  # noqa: F401,F403  (the generated classes)
from clients.protocol.errors import ErrorCode, KafkaApiError, for_code, raise_for_code

__all__ = [
    *_protocol_errors.__all__,
    "KafkaClientError", "ConfigError", "KafkaTimeoutError", "ClientClosedError",
    "KafkaConnectionError", "NodeNotReadyError", "RequestTimeoutError", "ConnectionClosedError",
    "NoBrokersAvailableError", "SerializationError", "IllegalStateError", "CommitFailedError",
    "RecordTooLargeError", "TransactionAbortedError",
]


class KafkaClientError(Exception):
    """Base of the failures the client detects itself (no broker error code)."""


class ConfigError(KafkaClientError, ValueError):
    """An unknown or invalid configuration key; `key` names it (Kafka's ConfigException)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"config {key!r}: {message}")


class KafkaTimeoutError(KafkaClientError, TimeoutError):
    """A client deadline passed: `delivery.timeout.ms`, `max.block.ms`,
    `default.api.timeout.ms`, or a blocking call's own timeout (Kafka's TimeoutException)."""


class ClientClosedError(KafkaClientError, RuntimeError):
    """The client was closed; nothing more can be sent or received with it."""


class IllegalStateError(KafkaClientError, RuntimeError):
    """A call that the client's current state does not allow (Kafka's IllegalStateException)."""


class SerializationError(KafkaClientError, ValueError):
    """A key or value serializer (or deserializer) failed or returned something not bytes."""


class ConnectionClosedError(ConnectionError):
    """The connection closed (or failed) before the response arrived."""


class KafkaConnectionError(ConnectionError):
    """A broker could not be reached or its connection broke. Retriable by nature."""

    retriable = True


class SaslAuthenticationError(KafkaConnectionError):
    """The broker refused our SASL credentials or mechanism (SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM) and closed the connection. Not retriable: the same
    credentials fail again."""

    retriable = False


class NodeNotReadyError(KafkaConnectionError):
    """Connecting to the node failed, or it is in its reconnect backoff."""


class NoBrokersAvailableError(KafkaConnectionError):
    """No bootstrap server or known broker accepted a connection."""


class RequestTimeoutError(KafkaConnectionError, TimeoutError):
    """No response within `request.timeout.ms`; the connection was closed (as the Java
    client does: a late response can no longer be matched in order)."""


class CommitFailedError(KafkaClientError, RuntimeError):
    """An offset commit the group refused because this member is no longer in the
    generation that owns the partitions (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION /
    FENCED_INSTANCE_ID on commit): the partitions may already belong to another member
    (Kafka's CommitFailedException). Not retriable: rejoin, then commit what you own."""


class TransactionAbortedError(KafkaClientError, RuntimeError):
    """A record queued in a transaction that was aborted before it was sent (Kafka's
    TransactionAbortedException)."""


# Kafka's Java client names code 10 (MESSAGE_TOO_LARGE) RecordTooLargeException; the issue
# and users say RECORD_TOO_LARGE. One class, two names.
RecordTooLargeError = MessageTooLargeError  # noqa: F405
