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
from typing import TYPE_CHECKING

import orjson
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from broker.replica.partition import TopicPartition

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger(__name__)

__all__ = ["AdminHttpServer"]


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


class AdminHttpServer:
    def __init__(self, broker: "Broker", host: str, port: int) -> None:
        self.broker = broker
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
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.broker.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def broker_info(self, request: web.Request) -> web.Response:
        b = self.broker
        return _json({"broker_id": b.config.node_id, "cluster_id": b.cluster_id,
                      "broker_epoch": b.broker_epoch, "fenced": b.fenced,
                      "metadata_offset": b.replicas.image.provenance.offset,
                      "partitions_hosted": len(b.replicas.partitions)})

    def _describe(self, tp: TopicPartition) -> dict:
        hosted = self.broker.replicas.partitions[tp]
        r = hosted.replica
        return {"topic": tp.topic, "partition": tp.partition, "role": r.role.value,
                "leader": r.leader_id, "leader_epoch": r.leader_epoch,
                "partition_epoch": r.partition_epoch, "replicas": list(r.replicas),
                "isr": list(r.isr), "log_start_offset": hosted.log.log_start_offset,
                "log_end_offset": hosted.log.log_end_offset, "high_watermark": r.high_watermark,
                "size_bytes": hosted.log.size_bytes}

    async def partitions(self, request: web.Request) -> web.Response:
        return _json([self._describe(tp) for tp in sorted(self.broker.replicas.partitions)])

    async def partition(self, request: web.Request) -> web.Response:
        raw = request.match_info["partition"]
        if not raw.isdigit():
            return _json({"error": f"partition must be a number, got {raw!r}"}, 400)
        tp = TopicPartition(request.match_info["topic"], int(raw))
        if tp not in self.broker.replicas.partitions:
            return _json({"error": f"{tp} is not hosted on broker {self.broker.config.node_id}"}, 404)
        return _json(self._describe(tp))
