"""Kafka error codes: the table, the enum and the generated exception classes agree."""

from __future__ import annotations

import pytest

from clients.protocol import errors
from clients.protocol.errors import (
    ERROR_INFO,
    ErrorCode,
    KafkaApiError,
    for_code,
    raise_for_code,
)


def test_codes_are_unique_and_names_are_unique() -> None:
    # IntEnum would silently turn a repeated value into an alias; __members__ shows aliases.
    assert len(ErrorCode.__members__) == len(ErrorCode)
    codes = [int(c) for c in ErrorCode]
    assert len(codes) == len(set(codes))


def test_codes_are_contiguous_from_minus_one_to_the_newest() -> None:
    # Kafka allocates codes densely; a gap would mean a forgotten error.
    codes = sorted(int(c) for c in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 133  # SHARE_SESSION_LIMIT_REACHED, Kafka 4.1


def test_table_has_one_row_per_code_in_code_order() -> None:
    table_codes = [row[0] for row in errors._ERROR_TABLE]
    assert table_codes == sorted(ErrorCode, key=int)
    assert set(ERROR_INFO) == set(ErrorCode)


def test_every_error_code_has_its_own_class() -> None:
    seen: set[type[KafkaApiError]] = set()
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        cls = for_code(code)
        assert issubclass(cls, KafkaApiError)
        assert cls.code is code
        assert cls.retriable == ERROR_INFO[code].retriable
        assert cls.invalid_metadata == ERROR_INFO[code].invalid_metadata
        assert getattr(errors, cls.__name__) is cls  # importable by name
        assert cls.__name__ in errors.__all__
        seen.add(cls)
    assert len(seen) == len(ErrorCode) - 1


def test_for_code_round_trips_through_the_class() -> None:
    for code in ErrorCode:
        if code is not ErrorCode.NONE:
            assert for_code(int(code)).code == code


def test_invalid_metadata_implies_retriable() -> None:
    # Kafka's InvalidMetadataException extends RetriableException.
    for info in ERROR_INFO.values():
        assert not info.invalid_metadata or info.retriable, info


@pytest.mark.parametrize("code", [-2, 134, 999, 32767, -32768])
def test_unknown_code_falls_back_to_unknown_server_error(code: int) -> None:
    assert for_code(code) is errors.UnknownServerError
    with pytest.raises(errors.UnknownServerError) as info:
        raise_for_code(code, "from a newer broker")
    assert info.value.error_code == code
    assert info.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert not info.value.retriable
    assert str(code) in str(info.value)


def test_none_is_success_not_an_error() -> None:
    raise_for_code(0)  # no exception
    raise_for_code(ErrorCode.NONE, "ignored")
    with pytest.raises(ValueError):
        for_code(0)


def test_raise_for_code_carries_the_message_and_code() -> None:
    with pytest.raises(errors.NotLeaderOrFollowerError) as info:
        raise_for_code(6, "partition t-0 moved")
    assert info.value.error_code == 6
    assert info.value.message == "partition t-0 moved"
    assert "NOT_LEADER_OR_FOLLOWER" in str(info.value)
    # Without a message, the table's description is used.
    with pytest.raises(errors.TopicAlreadyExistsError) as info2:
        raise_for_code(ErrorCode.TOPIC_ALREADY_EXISTS)
    assert info2.value.message == ERROR_INFO[ErrorCode.TOPIC_ALREADY_EXISTS].message
    assert info2.value.message


# Values and flags as documented by Kafka (protocol guide "Error Codes" table, and the
# Java exception hierarchy for invalid_metadata).
@pytest.mark.parametrize(
    ("name", "code", "retriable", "invalid_metadata", "class_name"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False, False, "UnknownServerError"),
        ("OFFSET_OUT_OF_RANGE", 1, False, False, "OffsetOutOfRangeError"),
        ("CORRUPT_MESSAGE", 2, True, False, "CorruptMessageError"),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True, True, "UnknownTopicOrPartitionError"),
        ("LEADER_NOT_AVAILABLE", 5, True, True, "LeaderNotAvailableError"),
        ("NOT_LEADER_OR_FOLLOWER", 6, True, True, "NotLeaderOrFollowerError"),
        ("REQUEST_TIMED_OUT", 7, True, False, "RequestTimedOutError"),
        ("REPLICA_NOT_AVAILABLE", 9, True, True, "ReplicaNotAvailableError"),
        ("MESSAGE_TOO_LARGE", 10, False, False, "MessageTooLargeError"),
        ("NETWORK_EXCEPTION", 13, True, True, "NetworkError"),
        ("COORDINATOR_LOAD_IN_PROGRESS", 14, True, False, "CoordinatorLoadInProgressError"),
        ("NOT_COORDINATOR", 16, True, False, "NotCoordinatorError"),
        ("INVALID_TOPIC_EXCEPTION", 17, False, False, "InvalidTopicError"),
        ("NOT_ENOUGH_REPLICAS", 19, True, False, "NotEnoughReplicasError"),
        ("ILLEGAL_GENERATION", 22, False, False, "IllegalGenerationError"),
        ("REBALANCE_IN_PROGRESS", 27, False, False, "RebalanceInProgressError"),
        ("UNSUPPORTED_VERSION", 35, False, False, "UnsupportedVersionError"),
        ("TOPIC_ALREADY_EXISTS", 36, False, False, "TopicAlreadyExistsError"),
        ("NOT_CONTROLLER", 41, True, False, "NotControllerError"),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False, False, "OutOfOrderSequenceNumberError"),
        ("INVALID_PRODUCER_EPOCH", 47, False, False, "InvalidProducerEpochError"),
        ("KAFKA_STORAGE_ERROR", 56, True, True, "KafkaStorageError"),
        ("UNKNOWN_PRODUCER_ID", 59, False, False, "UnknownProducerIdError"),
        ("FETCH_SESSION_ID_NOT_FOUND", 70, True, False, "FetchSessionIdNotFoundError"),
        ("FENCED_LEADER_EPOCH", 74, True, True, "FencedLeaderEpochError"),
        ("UNKNOWN_LEADER_EPOCH", 75, True, False, "UnknownLeaderEpochError"),
        ("OFFSET_NOT_AVAILABLE", 78, True, False, "OffsetNotAvailableError"),
        ("MEMBER_ID_REQUIRED", 79, False, False, "MemberIdRequiredError"),
        ("PRODUCER_FENCED", 90, False, False, "ProducerFencedError"),
        ("UNKNOWN_TOPIC_ID", 100, True, True, "UnknownTopicIdError"),
        ("INCONSISTENT_TOPIC_ID", 103, True, True, "InconsistentTopicIdError"),
        ("TRANSACTION_ABORTABLE", 120, False, False, "TransactionAbortableError"),
        ("VOTER_NOT_FOUND", 127, False, False, "VoterNotFoundError"),
        ("REBOOTSTRAP_REQUIRED", 129, False, False, "RebootstrapRequiredError"),
    ],
)
def test_spot_checks_against_kafka(
    name: str, code: int, retriable: bool, invalid_metadata: bool, class_name: str
) -> None:
    assert ErrorCode[name] == code
    cls = for_code(code)
    assert cls.__name__ == class_name
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata


def test_the_metadata_refresh_family_is_exactly_kafkas() -> None:
    # Subclasses of InvalidMetadataException in apache/kafka clients/.../common/errors.
    family = {c.name for c, info in ERROR_INFO.items() if info.invalid_metadata}
    assert family == {
        "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
        "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "KAFKA_STORAGE_ERROR",
        "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH", "PREFERRED_LEADER_NOT_AVAILABLE",
        "ELIGIBLE_LEADERS_NOT_AVAILABLE", "ELECTION_NOT_NEEDED", "UNKNOWN_TOPIC_ID",
        "INCONSISTENT_TOPIC_ID",
    }


def test_agrees_with_kafka_python_on_codes_it_knows() -> None:
    # kafka-python 3.0.12 is an independent transcription of the same table: every code it
    # knows must exist here with the same meaning (names differ where Kafka renamed them).
    kafka_errors = pytest.importorskip("kafka.errors")
    theirs = {
        cls.errno: cls
        for cls in vars(kafka_errors).values()
        if isinstance(cls, type)
        and issubclass(cls, kafka_errors.BrokerResponseError)
        and getattr(cls, "errno", None) is not None
    }
    assert theirs, "kafka-python exposes no broker errors?"
    renamed = {"UNKNOWN": "UNKNOWN_SERVER_ERROR", "NO_ERROR": "NONE",
               "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
               "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE", "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
               "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT"}
    for errno, cls in theirs.items():
        assert ErrorCode(errno).name == renamed.get(cls.message, cls.message), (errno, cls)
