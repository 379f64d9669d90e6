"""Client telemetry (KIP-714): GetTelemetrySubscriptions and PushTelemetry, per client
instance, as Kafka's ClientMetricsManager serves them. Pure: time is ``now_ms``, new ids
come from the ``random.Random`` passed in, the subscriptions are passed with each request.

Theory of operation
-------------------
A client starts with the zero uuid and asks GetTelemetrySubscriptions; the broker assigns
it a client instance id and answers what to push: the metric name prefixes of every
subscription whose ``match`` the client's attributes satisfy (``*`` alone if one of them
asks for all; none at all if no subscription matches, and the client then pushes
nothing), the lowest of their intervals (default 5 minutes), the accepted compression
types, ``telemetry.max.bytes``, delta temporality, and a subscription id: a hash of the
metrics, the interval and the instance id. The client then pushes every interval with
that id.

Per instance the broker keeps (``ClientInstance``): the client's attributes, the
subscription set it was evaluated against and the answer derived from it, the times of
its last Get and Push, its last error and whether it said it is terminating.

- When the cluster's subscriptions change, the next request of each instance re-derives
  its answer and resets its times (Kafka's subscriptionUpdateVersion); a push carrying
  the old id is then UNKNOWN_SUBSCRIPTION_ID and the client asks again at once.
- A Get sooner than one interval after the last Get or Push is THROTTLING_QUOTA_EXCEEDED,
  unless the instance's last push failed with UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE (the client was told to ask again; Kafka means this
  exception but its condition is always true, so it throttles those re-asks too).
- A Push is refused, in this order: after a terminating push (INVALID_REQUEST); sooner
  than one interval after the last push unless the instance asked Get since, or the push
  is terminating (THROTTLING_QUOTA_EXCEEDED); with another subscription id
  (UNKNOWN_SUBSCRIPTION_ID); with a compression type that is not one
  (UNSUPPORTED_COMPRESSION_TYPE); with more than ``telemetry.max.bytes``
  (TELEMETRY_TOO_LARGE). A terminating push marks the instance terminating even when it
  is refused, as Kafka does.
- A push for an instance this broker does not know (the client pushes to another broker
  than it asked, or this broker restarted) creates the instance from the client's
  attributes: its subscription id is a function of the subscriptions and the id, so the
  push is accepted when nothing changed, as in Kafka.

Bounds: at most ``instances_max`` instances (the least recently seen is evicted); an
instance not heard from for max(``expiry_ms_min``, 3 x its interval) expires (``poll``).
Removed instances (expired, evicted) and terminated ones are reported by
``take_removed`` so that the shell drops their metric series.
"""
from __future__ import annotations

import base64
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

import crc32c

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.records.compression import CompressionType
from metadata_log.client_metrics import ALL_METRICS, INTERVAL_MS_DEFAULT, Subscription

__all__ = [
    "ACCEPTED_COMPRESSION_TYPES", "ClientAttributes", "ClientInstance", "ClientTelemetryManager",
    "PushOutcome", "format_client_instance_id",
]

ZERO_UUID = uuid.UUID(int=0)
# Kafka's Uuid.RESERVED: the zero id and the metadata topic's id (0, 1).
_RESERVED = frozenset({ZERO_UUID, uuid.UUID(int=1)})
# Kafka's order of preference (ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES).
ACCEPTED_COMPRESSION_TYPES = (CompressionType.ZSTD, CompressionType.LZ4, CompressionType.GZIP,
                              CompressionType.SNAPPY)
INSTANCES_MAX = 16_384            # Kafka's CACHE_MAX_SIZE
INSTANCE_EXPIRY_MS_MIN = 60_000   # Kafka's DEFAULT_CACHE_EXPIRY_MS
NEVER = -(1 << 62)                # a time before any now_ms
# Get may be asked again at once after the broker told the client its push was stale.
_ASK_AGAIN = frozenset({ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE})


def format_client_instance_id(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (how tools show the id)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class ClientAttributes:
    """What a ``match`` selects on, besides the instance id (ClientMetricsInstanceMetadata)."""
    client_id: str | None
    client_software_name: str | None
    client_software_version: str | None
    client_source_address: str | None
    client_source_port: int | None

    def selectable(self, client_instance_id: uuid.UUID) -> dict[str, str | None]:
        return {
            "client_instance_id": format_client_instance_id(client_instance_id),
            "client_id": self.client_id,
            "client_software_name": self.client_software_name,
            "client_software_version": self.client_software_version,
            "client_source_address": self.client_source_address,
            "client_source_port": None if self.client_source_port is None else str(self.client_source_port),
        }


@dataclass(slots=True)
class ClientInstance:
    client_instance_id: uuid.UUID
    attributes: ClientAttributes
    subscriptions: tuple[Subscription, ...]    # the set this answer was derived from
    subscription_id: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_seen_ms: int
    last_get_ms: int = NEVER
    last_push_ms: int = NEVER
    last_error: ErrorCode = ErrorCode.NONE
    terminating: bool = False

    def expires_at_ms(self, expiry_ms_min: int) -> int:
        return self.last_seen_ms + max(expiry_ms_min, 3 * self.push_interval_ms)


@dataclass(frozen=True, slots=True)
class PushOutcome:
    response: messages.PushTelemetryResponse
    # Invariant: metrics is not None only when the push was accepted and carries bytes.
    metrics: bytes | None
    compression_type: int
    instance: ClientInstance | None = field(default=None)


def _subscription_id(metrics: tuple[str, ...], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """A hash of what the instance is asked for, mixed with its id (Kafka: crc32c of the
    metrics and interval xor the Uuid's hashCode); int32."""
    crc = crc32c.crc32c((",".join(metrics) + "|" + str(push_interval_ms)).encode())
    most, least = instance_id.int >> 64, instance_id.int & ((1 << 64) - 1)
    h = most ^ least
    mixed = (crc ^ (h >> 32) ^ h) & 0xFFFFFFFF
    return mixed - (1 << 32) if mixed >> 31 else mixed


class ClientTelemetryManager:
    def __init__(self, telemetry_max_bytes: int, rng: random.Random,
                 instances_max: int = INSTANCES_MAX,
                 expiry_ms_min: int = INSTANCE_EXPIRY_MS_MIN) -> None:
        assert telemetry_max_bytes > 0, telemetry_max_bytes
        assert instances_max > 0, instances_max
        self.telemetry_max_bytes = telemetry_max_bytes
        self.rng = rng
        self.instances_max = instances_max
        self.expiry_ms_min = expiry_ms_min
        # Least recently seen first.
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._removed: list[uuid.UUID] = []

    # ------------------------------------------------------------ requests

    def handle_get_telemetry_subscriptions_request(
            self, request: messages.GetTelemetrySubscriptionsRequest, client: ClientAttributes,
            subscriptions: tuple[Subscription, ...], now_ms: int
    ) -> messages.GetTelemetrySubscriptionsResponse:
        cls = messages.GetTelemetrySubscriptionsResponse
        instance_id = request.client_instance_id
        if instance_id in _RESERVED:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, client, subscriptions, now_ms)
        since = now_ms - max(instance.last_get_ms, instance.last_push_ms)
        if since < instance.push_interval_ms and instance.last_error not in _ASK_AGAIN:
            return cls(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED, client_instance_id=ZERO_UUID)
        instance.last_get_ms = now_ms
        instance.last_error = ErrorCode.NONE
        return cls(error_code=ErrorCode.NONE, client_instance_id=instance_id,
                   subscription_id=instance.subscription_id,
                   accepted_compression_types=[int(c) for c in ACCEPTED_COMPRESSION_TYPES],
                   push_interval_ms=instance.push_interval_ms,
                   telemetry_max_bytes=self.telemetry_max_bytes, delta_temporality=True,
                   requested_metrics=list(instance.metrics))

    def handle_push_telemetry_request(
            self, request: messages.PushTelemetryRequest, client: ClientAttributes,
            subscriptions: tuple[Subscription, ...], now_ms: int) -> PushOutcome:
        cls = messages.PushTelemetryResponse
        instance_id = request.client_instance_id
        if instance_id in _RESERVED:
            return PushOutcome(cls(error_code=ErrorCode.INVALID_REQUEST), None, request.compression_type)
        instance = self._instance(instance_id, client, subscriptions, now_ms)
        code = self._push_error(request, instance, now_ms)
        instance.terminating = instance.terminating or request.terminating
        if request.terminating:
            self._removed.append(instance_id)     # its series go; the instance stays refusing
        instance.last_error = code
        if code != ErrorCode.NONE:
            return PushOutcome(cls(error_code=code), None, request.compression_type, instance)
        return PushOutcome(cls(error_code=ErrorCode.NONE),
                           bytes(request.metrics) if request.metrics else None,
                           request.compression_type, instance)

    def _push_error(self, request: messages.PushTelemetryRequest, instance: ClientInstance,
                    now_ms: int) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        # The first push after a Get is always in time (the client pushes between 0.5 and
        # 1.5 intervals after it); later ones one interval apart, except the last one.
        in_time = (instance.last_get_ms > instance.last_push_ms
                   or now_ms - instance.last_push_ms >= instance.push_interval_ms)
        if not in_time and not request.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        instance.last_push_ms = now_ms
        if request.subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in tuple(int(c) for c in CompressionType):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    # ------------------------------------------------------------ instances

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if candidate not in self.instances and candidate not in _RESERVED:
                return candidate

    def _instance(self, instance_id: uuid.UUID, client: ClientAttributes,
                  subscriptions: tuple[Subscription, ...], now_ms: int) -> ClientInstance:
        """The instance, created or re-derived if the subscriptions changed since; marked
        seen now."""
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscriptions != subscriptions:
            attributes = client if instance is None else instance.attributes
            instance = self._derive(instance_id, attributes, subscriptions, now_ms)
            self.instances[instance_id] = instance
        instance.last_seen_ms = now_ms
        self.instances.move_to_end(instance_id)
        while len(self.instances) > self.instances_max:
            evicted, _ = self.instances.popitem(last=False)
            self._removed.append(evicted)
        return instance

    @staticmethod
    def _derive(instance_id: uuid.UUID, attributes: ClientAttributes,
                subscriptions: tuple[Subscription, ...], now_ms: int) -> ClientInstance:
        selectable = attributes.selectable(instance_id)
        interval_ms = INTERVAL_MS_DEFAULT
        metrics: set[str] = set()
        for s in subscriptions:
            if s.matches(selectable):
                metrics.update(s.metrics)
                interval_ms = min(interval_ms, s.interval_ms)
        # "*" alone says every metric; Kafka sends just "*".
        wanted = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
        return ClientInstance(instance_id, attributes, subscriptions,
                              _subscription_id(wanted, interval_ms, instance_id), wanted,
                              interval_ms, now_ms)

    def poll(self, now_ms: int) -> int:
        """Expire idle instances; ms until the next one may expire."""
        next_ms = self.expiry_ms_min
        for instance_id, instance in list(self.instances.items()):
            due = instance.expires_at_ms(self.expiry_ms_min)
            if due <= now_ms:
                del self.instances[instance_id]
                self._removed.append(instance_id)
            else:
                next_ms = min(next_ms, due - now_ms)
        return next_ms

    def take_removed(self) -> list[uuid.UUID]:
        """Instances whose metric series should go (expired, evicted, terminated), once."""
        removed, self._removed = self._removed, []
        return removed
