"""Producer id blocks for idempotent and transactional producers (KIP-730).

Brokers hand out producer ids from blocks the controller allocates. Each allocation writes
a ProducerIdsRecord whose NextProducerId is the first id of the *next* block, so the
image always knows where the next block starts and a replayed log never hands out a block
twice (replay refuses a NextProducerId that does not grow). Blocks are 1000 ids long, as
Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
"""
from __future__ import annotations

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import MetadataImage
from quorum.controller.result import ControllerResult

__all__ = ["allocate_producer_ids"]

PRODUCER_ID_MAX = (1 << 63) - 1


def allocate_producer_ids(image: MetadataImage, broker_id: int, broker_epoch: int,
                          block_size: int
                          ) -> ControllerResult[messages.AllocateProducerIdsResponse]:
    Response = messages.AllocateProducerIdsResponse
    b = image.cluster.get(broker_id)
    if b is None or (broker_epoch != -1 and broker_epoch != b.broker_epoch):
        return ControllerResult((), Response(error_code=int(ErrorCode.STALE_BROKER_EPOCH)))
    start = max(image.producer_ids.next_producer_id, 0)
    if start > PRODUCER_ID_MAX - block_size:
        # Kafka: UnknownServerException("Exhausted all producerIds as the next block's end
        # producerId is has exceeded the int64 type limit").
        return ControllerResult((), Response(error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR)))
    record = messages.ProducerIdsRecord(broker_id=broker_id, broker_epoch=b.broker_epoch,
                                        next_producer_id=start + block_size)
    return ControllerResult((record,), Response(
        error_code=0, producer_id_start=start, producer_id_len=block_size))
