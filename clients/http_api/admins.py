"""Where a node's HTTP API gets its admin clients (``AdminSource``).

A broker asks through its own Kafka listener: the same path a Kafka tool pointed at that
broker takes (reads answered there, writes forwarded to the active controller). A
controller asks the quorum itself for DescribeQuorum (``ControllerAdmin``, KIP-919), and
for everything that needs brokers (topics' offsets, groups) the brokers its metadata image
names, re-bootstrapping when that set changes.
"""
from __future__ import annotations

from typing import Callable, Mapping

from clients.aio.admin import Admin
from clients.aio.controller_admin import ControllerAdmin

__all__ = ["BrokerAdmins", "ControllerAdmins", "NoBrokersError"]


class NoBrokersError(ConnectionError):
    """No broker is registered and unfenced: calls that need brokers cannot run."""


def _config(client_id: str, bootstrap: str, extra: Mapping[str, object] | None = None) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "client.id": client_id,
            "request.timeout.ms": 10_000, "default.api.timeout.ms": 15_000, **(extra or {})}


class BrokerAdmins:
    def __init__(self, bootstrap: Callable[[], str], client_id: str,
                 client_properties: Mapping[str, object] | None = None) -> None:
        """``bootstrap()``: this broker's own HOST:PORT (known once its listener is bound);
        ``client_properties``: how to log in there (security.protocol, sasl.*, ssl.*)."""
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.client_properties = dict(client_properties or {})
        self.admin: Admin | None = None

    async def cluster_admin(self) -> Admin:
        if self.admin is None:
            self.admin = Admin(_config(self.client_id, self.bootstrap(), self.client_properties))
        return await self.admin.start()

    async def quorum_admin(self) -> Admin:
        return await self.cluster_admin()

    async def close(self) -> None:
        if self.admin is not None:
            await self.admin.close()


class ControllerAdmins:
    def __init__(self, controllers: str, brokers: Callable[[], list[str]], client_id: str,
                 broker_client: Mapping[str, object] | None = None,
                 controller_client: Mapping[str, object] | None = None) -> None:
        """``controllers``: the quorum's listeners (HOST:PORT,...); ``brokers()``: the
        HOST:PORT of every live broker this controller's image names; ``broker_client`` /
        ``controller_client``: how to log in there (security.protocol, sasl.*, ssl.*)."""
        self.client_id = client_id
        self.broker_client = dict(broker_client or {})
        self.brokers_of = brokers
        self.quorum = ControllerAdmin(controllers, {"client.id": client_id,
                                                    "request.timeout.ms": 5_000,
                                                    **(controller_client or {})})
        self._admin: Admin | None = None
        self._bootstrap: str | None = None

    async def cluster_admin(self) -> Admin:
        brokers = sorted(self.brokers_of())
        if not brokers:
            raise NoBrokersError("no broker is registered and unfenced: this call needs brokers")
        bootstrap = ",".join(brokers)
        if self._admin is None or bootstrap != self._bootstrap:
            if self._admin is not None:
                await self._admin.close()
            self._admin = Admin(_config(self.client_id, bootstrap, self.broker_client))
            self._bootstrap = bootstrap
        return await self._admin.start()

    async def quorum_admin(self) -> Admin:
        return await self.quorum.start()

    async def close(self) -> None:
        await self.quorum.close()
        if self._admin is not None:
            await self._admin.close()
