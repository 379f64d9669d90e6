"""The broker's HTTP admin API (aiohttp): Prometheus metrics and a read-only view.

    GET /metrics            Prometheus text format (the broker's own registry)
    GET /v1/broker          id, cluster id, broker epoch, fenced, metadata offset
    GET /v1/partitions      hosted partitions: role, leader, epochs, LEO, HW, ISR
    GET /v1/partitions/{topic}/{partition}

Errors are JSON ``{"error": "..."}`` with a 4xx status. Bound to the broker's listener
host, port ``ketch.http.port`` (0: any free port, logged; -1: off).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from broker.replica_manager import ReplicaManager
from clients.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["AdminHttpServer"]


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


class AdminHttpServer:
    def __init__(self, broker_id: int, replicas: ReplicaManager, registry: CollectorRegistry,
                 broker_info: Callable[[], dict[str, Any]], host: str, port: int) -> None:
        """``broker_info()``: the broker's identity and lifecycle state for /v1/broker."""
        self.broker_id = broker_id
        self.replicas = replicas
        self.registry = registry
        self.broker_info_of = broker_info
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/v1/broker", self.broker_info)
        app.router.add_get("/v1/partitions", self.partitions)
        app.router.add_get("/v1/partitions/{topic}/{partition}", self.partition)
        self.app = app

    async def start(self) -> int:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]   # the bound port (0 asks for any free one)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def broker_info(self, request: web.Request) -> web.Response:
        return _json({"broker_id": self.broker_id, **self.broker_info_of(),
                      "metadata_offset": self.replicas.image.provenance.offset,
                      "partitions_hosted": len(self.replicas.partitions)})

    def _describe(self, tp: TopicPartition) -> dict:
        hosted = self.replicas.partitions[tp]
        r = hosted.replica
        return {"topic": tp.topic, "partition": tp.partition, "role": r.role.value,
                "leader": r.leader_id, "leader_epoch": r.leader_epoch,
                "partition_epoch": r.partition_epoch, "replicas": list(r.replicas),
                "isr": list(r.isr), "log_start_offset": hosted.log.log_start_offset,
                "log_end_offset": hosted.log.log_end_offset, "high_watermark": r.high_watermark,
                "size_bytes": hosted.log.size_bytes}

    async def partitions(self, request: web.Request) -> web.Response:
        return _json([self._describe(tp) for tp in sorted(self.replicas.partitions)])

    async def partition(self, request: web.Request) -> web.Response:
        raw = request.match_info["partition"]
        if not raw.isdigit():
            return _json({"error": f"partition must be a number, got {raw!r}"}, 400)
        tp = TopicPartition(request.match_info["topic"], int(raw))
        if tp not in self.replicas.partitions:
            return _json({"error": f"{tp} is not hosted on broker {self.broker_id}"}, 404)
        return _json(self._describe(tp))
