"""The group coordinator's effects and the answers both of its halves build (the
classic protocol in coordinator.py, KIP-848 in consumer_coordinator.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Union

from clients.protocol import messages
from clients.protocol.errors import ERROR_INFO, ErrorCode
from clients.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

from broker.group.records import CoordinatorRecord, encode_batch
from broker.group.state import UNKNOWN_GENERATION_ID, UNKNOWN_MEMBER_ID

__all__ = ["Append", "Completion", "Effect", "OnDone", "group_append_error", "join_response"]

E = ErrorCode


@dataclass(frozen=True, slots=True)
class Completion:
    """Effect: answer the request the shell holds under ``token`` with ``response``."""
    token: Hashable
    response: Any


@dataclass(frozen=True, slots=True)
class Append:
    """Effect: append ``records`` to ``__consumer_offsets-<partition>`` (acks=all), then
    report with ``on_append_result(append_id, error_code, now_ms)``."""
    append_id: int
    partition: int
    records: tuple[CoordinatorRecord, ...]
    timestamp_ms: int
    # A TxnOffsetCommit's: the batch is transactional, under the producer's id and epoch.
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH

    def batch(self) -> bytes:
        return encode_batch(self.records, self.timestamp_ms, self.producer_id,
                            self.producer_epoch)


Effect = Union[Completion, Append]
OnDone = Callable[[ErrorCode, int, list], None]   # (append error, now_ms, effects)


def group_append_error(append_error: int) -> ErrorCode:
    """What members hear when a group snapshot could not be written (Kafka storeGroup)."""
    e = ErrorCode(append_error) if append_error in ERROR_INFO \
        else E.UNKNOWN_SERVER_ERROR
    if e in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
             E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if e in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if e in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return e


def join_response(version: int, error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID,
                  generation_id: int = UNKNOWN_GENERATION_ID, protocol_type: str | None = None,
                  protocol_name: str | None = None, leader: str = "",
                  skip_assignment: bool = False, members: list | None = None
                  ) -> "messages.JoinGroupResponse":
    R = messages.JoinGroupResponse
    if version < 7 and protocol_name is None:
        protocol_name = ""      # nullable only from v7
    return R(error_code=int(error), generation_id=generation_id, protocol_type=protocol_type,
             protocol_name=protocol_name, leader=leader,
             skip_assignment=skip_assignment and version >= 9, member_id=member_id,
             members=members or [])
