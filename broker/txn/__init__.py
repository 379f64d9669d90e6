"""The transaction coordinator (KIP-98): transactional ids, their producer ids and epochs,
and the two-phase end of each transaction.

Lives here: ``records`` (the ``__transaction_state`` record formats,
``TRANSACTION_STATE_TOPIC``, ``partition_for_transactional_id``, ``TransactionLogLoader``),
``state`` (``TransactionState``, its transition table ``VALID_PREVIOUS_STATES``,
``TransactionMetadata`` and its pending transitions), ``coordinator`` (the pure
``TransactionCoordinator`` and its effects), ``markers`` (each round of sending a
transaction's markers, decided purely), ``verification`` (KIP-890's guards on the leader
side), ``channel`` (requests to other brokers) and ``driver`` (the asyncio shell).

Not here: FindCoordinator (``broker/find_coordinator.py``, shared with groups), the
partition side of transactions (markers appended by leaders, producer state, the last
stable offset: ``broker/log``, ``broker/producer_state.py``), TxnOffsetCommit (the group
coordinator's), and transaction.version 2 (KIP-890 part 2).
"""
from broker.txn.coordinator import (
    AllocateProducerId, Append, Completion, Effect, SendMarkers, TransactionConfig,
    TransactionCoordinator,
)
from broker.txn.records import (
    TRANSACTION_STATE_TOPIC, TransactionLogImage, TransactionLogLoader, TransactionLogRecord,
    TransactionLogRecordError, TransactionLogValue, partition_for_transactional_id,
)
from broker.txn.state import (
    TransactionMetadata, TransactionState, TxnTransit, VALID_PREVIOUS_STATES,
)
from broker.txn.verification import VerificationState

__all__ = [
    "AllocateProducerId", "Append", "Completion", "Effect", "SendMarkers",
    "TRANSACTION_STATE_TOPIC", "TransactionConfig", "TransactionCoordinator",
    "TransactionLogImage", "TransactionLogLoader", "TransactionLogRecord",
    "TransactionLogRecordError", "TransactionLogValue", "TransactionMetadata",
    "TransactionState", "TxnTransit", "VALID_PREVIOUS_STATES", "VerificationState",
    "partition_for_transactional_id",
]
