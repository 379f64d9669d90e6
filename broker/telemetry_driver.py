"""The shell around client telemetry (KIP-714): requests in, metric series out.

``ClientTelemetryManager`` (broker/client_telemetry.py) decides every answer; this driver
hands it the current subscriptions (parsed once per metadata image that changes the
configs), unpacks an accepted push (decompression with the record codecs, then the OTLP
reader) into ``ClientMetricsExport``, drops the series of instances the manager removed,
and runs the manager's expiry on its own deadline. A push whose payload cannot be
decompressed or decoded is answered INVALID_RECORD, as Kafka answers a push its receiver
plugin fails on; the instance's push time still counts.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from broker.client_metrics_export import ClientMetricsExport
from broker.client_telemetry import (
    ClientAttributes, ClientTelemetryManager, format_client_instance_id,
)
from broker.otlp import OtlpDecodeError, decode_metrics_data
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.records.compression import decompress
from clients.records.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError
from metadata_log.client_metrics import Subscription, subscriptions_of
from metadata_log.image import ConfigsImage

log = logging.getLogger(__name__)

__all__ = ["ClientTelemetryDriver"]

# A push decompresses to at most this many times telemetry.max.bytes (OTLP compresses
# ~10x; the bound stops a small zip bomb).
DECOMPRESSED_RATIO_MAX = 32
POINTS_PER_PUSH_MAX = 50_000
POLL_MS_MIN = 1_000


class ClientTelemetryDriver:
    def __init__(self, manager: ClientTelemetryManager, export: ClientMetricsExport,
                 configs: Callable[[], ConfigsImage], now_ms: Callable[[], int]) -> None:
        self.manager = manager
        self.export = export
        self.configs = configs
        self.now_ms = now_ms
        self._parsed: tuple[ConfigsImage | None, tuple[Subscription, ...]] = (None, ())
        self._stopped = asyncio.Event()

    def subscriptions(self) -> tuple[Subscription, ...]:
        configs = self.configs()
        if self._parsed[0] is not configs:
            self._parsed = (configs, subscriptions_of(configs))
        return self._parsed[1]

    def get_subscriptions(self, request: messages.GetTelemetrySubscriptionsRequest,
                          client: ClientAttributes) -> messages.GetTelemetrySubscriptionsResponse:
        response = self.manager.handle_get_telemetry_subscriptions_request(
            request, client, self.subscriptions(), self.now_ms())
        self._drop_removed()
        return response

    def push(self, request: messages.PushTelemetryRequest,
             client: ClientAttributes) -> messages.PushTelemetryResponse:
        outcome = self.manager.handle_push_telemetry_request(
            request, client, self.subscriptions(), self.now_ms())
        if outcome.metrics is not None and not request.terminating:
            assert outcome.instance is not None
            try:
                payload = decompress(outcome.compression_type, outcome.metrics,
                                     decompressed_bytes_max=DECOMPRESSED_RATIO_MAX
                                     * self.manager.telemetry_max_bytes)
                points = decode_metrics_data(payload, POINTS_PER_PUSH_MAX)
            except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError,
                    OtlpDecodeError) as e:
                log.info("telemetry push from %s: %s", request.client_instance_id, e)
                return messages.PushTelemetryResponse(error_code=ErrorCode.INVALID_RECORD)
            self.export.update(format_client_instance_id(request.client_instance_id),
                               outcome.instance.attributes.client_id, points)
        self._drop_removed()
        return outcome.response

    def _drop_removed(self) -> None:
        for instance_id in self.manager.take_removed():
            self.export.drop(format_client_instance_id(instance_id))

    async def run(self) -> None:
        """Expire idle instances (and their series) on the manager's deadline."""
        while not self._stopped.is_set():
            wait_ms = max(POLL_MS_MIN, self.manager.poll(self.now_ms()))
            self._drop_removed()
            try:
                await asyncio.wait_for(self._stopped.wait(), wait_ms / 1000)
            except asyncio.TimeoutError:
                pass

    def stop(self) -> None:
        self._stopped.set()
