"""Ketch's asyncio clients: `from clients.aio import Producer, Consumer, Admin`.

Each is a thin shell over the pure pieces in `clients._core`, reaching brokers through one
`Cluster` (`_cluster.py`: connections, metadata, coordinators). The blocking facades in
`clients.producer`, `clients.consumer` and `clients.admin` run these on a shared event
loop thread.
"""
from clients.aio._cluster import Cluster
from clients.aio.admin import Admin
from clients.aio.consumer import Consumer, ConsumerRebalanceListener
from clients.aio.producer import Producer, RecordFuture
from clients.aio.retry import RetryingConsumer
from clients._core.retry import RetryPolicy

__all__ = ["Admin", "Cluster", "Consumer", "ConsumerRebalanceListener", "Producer", "RecordFuture",
           "RetryPolicy", "RetryingConsumer"]
