"""`AuthHelper`: the broker's questions to the authorizer (Kafka's AuthHelper).

Every request handler asks here whether the connection's principal (``client.principal``,
set by the listener's authentication; ``User:ANONYMOUS`` without one) from its host
(``client.host``) may do an operation on a resource. The answers come from the
``StandardAuthorizer`` (metadata_log/authorizer.py) over the ACLs of the metadata image
this broker serves from, read at the moment of the question.

With no ``authorizer.class.name`` configured there is no authorizer and every question is
answered yes, and the ``*_authorized_operations`` fields carry every supported operation:
what Kafka does, and what Ketch did before ACLs existed.

Which operation each API needs is decided where the API is served (broker/apis.py,
broker/group_authz.py), after Kafka's KafkaApis.
"""
from __future__ import annotations

from typing import Callable, Iterable, Protocol

from clients.protocol.acls import (
    CLUSTER_NAME, AclOperation, AclResourceType, KafkaPrincipal, authorized_operations,
)
from metadata_log.acls import AclsImage
from metadata_log.authorizer import StandardAuthorizer

__all__ = ["AuthHelper", "Client"]


class Client(Protocol):
    """What a decision needs of a connection (quorum.network.Client has it)."""
    @property
    def principal(self) -> KafkaPrincipal: ...
    @property
    def host(self) -> str: ...


class AuthHelper:
    def __init__(self, authorizer: StandardAuthorizer | None,
                 acls: Callable[[], AclsImage]) -> None:
        self.authorizer = authorizer
        self._acls = acls

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def authorize(self, client: Client, operation: AclOperation,
                  resource_type: AclResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self._acls(), client.principal, client.host,
                                         operation, resource_type, name)

    def authorize_cluster(self, client: Client, operation: AclOperation) -> bool:
        return self.authorize(client, operation, AclResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_topic(self, client: Client, operation: AclOperation, name: str) -> bool:
        return self.authorize(client, operation, AclResourceType.TOPIC, name)

    def authorize_group(self, client: Client, operation: AclOperation, name: str) -> bool:
        return self.authorize(client, operation, AclResourceType.GROUP, name)

    def filter_authorized(self, client: Client, operation: AclOperation,
                          resource_type: AclResourceType, names: Iterable[str]) -> set[str]:
        """The names of ``names`` the principal may operate on (each asked once)."""
        unique = set(names)
        if self.authorizer is None:
            return unique
        acls = self._acls()
        return {n for n in unique if self.authorizer.authorize(
            acls, client.principal, client.host, operation, resource_type, n)}

    def authorize_by_resource_type(self, client: Client, operation: AclOperation,
                                   resource_type: AclResourceType) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(
            self._acls(), client.principal, client.host, operation, resource_type)

    def authorized_operations(self, client: Client, resource_type: AclResourceType,
                              name: str, asked: bool) -> int:
        """A response's *_authorized_operations bit field for one resource."""
        if self.authorizer is None or not asked:
            return authorized_operations(resource_type, asked)
        return self.authorizer.authorized_operations(self._acls(), client.principal,
                                                     client.host, resource_type, name)
