"""The broker's lifecycle with the controller: registration, heartbeats, controlled shutdown.

Kafka's ``BrokerLifecycleManager``: register (incarnation id, listener, rack) and get a
broker epoch; heartbeat every ``broker.heartbeat.interval.ms`` with the metadata offset
reached (the controller unfences a broker once it has caught up and fences it when
heartbeats stop); register again when the controller no longer knows our epoch; on
SIGTERM heartbeat ``want_shut_down`` until the controller has moved every leadership away.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from broker.controller_channel import ControllerChannel, ControllerUnavailableError
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.security.listeners import ListenerSpec
from metadata_log.features import SUPPORTED_FEATURES

log = logging.getLogger(__name__)

__all__ = ["BrokerLifecycleManager", "Registration"]

@dataclass(frozen=True, slots=True)
class Registration:
    broker_id: int
    cluster_id: str
    listeners: tuple[ListenerSpec, ...]      # each advertised with its security protocol
    rack: str | None
    heartbeat_interval_ms: int
    # The directory.id of each log dir (KIP-858's BrokerRegistration LogDirs; the
    # controller records them, nothing assigns replicas to them yet).
    log_dirs: tuple[uuid.UUID, ...] = ()


class BrokerLifecycleManager:
    def __init__(self, registration: Registration, controller: ControllerChannel,
                 metadata_offset: Callable[[], int], on_registered: Callable[[], None],
                 previous_broker_epoch: int = -1) -> None:
        """``on_registered()``: called each time the controller gives a new broker epoch;
        ``previous_broker_epoch``: the epoch a clean shutdown left (-1: none; KIP-966)."""
        self.registration = registration
        self.controller = controller
        self.metadata_offset = metadata_offset
        self.on_registered = on_registered
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.previous_broker_epoch = previous_broker_epoch
        self.fenced = True
        self._stopping = False
        self._heartbeat_now = asyncio.Event()

    async def _register(self) -> None:
        r = self.registration
        cls = messages.BrokerRegistrationRequest
        req = cls(broker_id=r.broker_id, cluster_id=r.cluster_id, incarnation_id=self.incarnation_id,
                  listeners=[cls.Listener(name=spec.name, host=spec.advertised_host,
                                          port=spec.advertised_port,
                                          security_protocol=int(spec.security_protocol))
                             for spec in r.listeners],
                  features=[cls.Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                            for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items())],
                  rack=r.rack, previous_broker_epoch=(self.broker_epoch if self.broker_epoch != -1
                                                      else self.previous_broker_epoch),
                  log_dirs=list(r.log_dirs))
        while not self._stopping:
            try:
                _, resp = await self.controller.request(ApiKey.BROKER_REGISTRATION, (0, 4), req, timeout_s=10)
            except ControllerUnavailableError as e:
                log.warning("registration: %s", e)
                continue
            if resp.error_code == ErrorCode.NONE:
                self.broker_epoch = resp.broker_epoch
                log.info("registered as broker %d with epoch %d", r.broker_id, self.broker_epoch)
                self.on_registered()
                return
            log.warning("registration refused: %s", ErrorCode(resp.error_code).name)
            await asyncio.sleep(1)

    async def _heartbeat(self, want_shut_down: bool) -> Any:
        req = messages.BrokerHeartbeatRequest(
            broker_id=self.registration.broker_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(), want_fence=False,
            want_shut_down=want_shut_down)
        _, resp = await self.controller.request(
            ApiKey.BROKER_HEARTBEAT, (0, 1), req,
            timeout_s=self.registration.heartbeat_interval_ms / 1000 * 2)
        return resp

    def connection_lost(self) -> None:
        """The heartbeat connection ended: heartbeat again now, on a new one, before the
        controller takes the closed connection for a dead broker."""
        self._heartbeat_now.set()

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._heartbeat_now.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._heartbeat_now.clear()

    async def run(self) -> None:
        await self._register()
        interval = self.registration.heartbeat_interval_ms / 1000
        while not self._stopping:
            try:
                resp = await self._heartbeat(want_shut_down=False)
                if resp.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                    await self._register()
                    continue
                if resp.error_code == ErrorCode.NONE and resp.is_fenced != self.fenced:
                    self.fenced = resp.is_fenced
                    log.info("broker %d is now %s", self.registration.broker_id,
                             "fenced" if self.fenced else "unfenced")
            except ControllerUnavailableError as e:
                log.warning("heartbeat: %s", e)
                # Again soon: a heartbeat that timed out dropped its connection, and the
                # controller fences a broker whose connection stays gone
                # (ketch.broker.disconnect.fence.ms) unless it heartbeats again.
                await asyncio.sleep(min(interval, 0.05))
                continue
            await self._pause(interval if not self.fenced else min(interval, 0.2))

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Ask the controller to move leadership away; return once it lets us go (or the
        time is up, or no controller answers)."""
        self._stopping = True
        if self.broker_epoch < 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                resp = await self._heartbeat(want_shut_down=True)
                if resp.error_code == ErrorCode.NONE and resp.should_shut_down:
                    log.info("controlled shutdown: controller released broker %d",
                             self.registration.broker_id)
                    return
            except ControllerUnavailableError as e:
                log.warning("controlled shutdown heartbeat: %s", e)
                return
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        self._stopping = True
