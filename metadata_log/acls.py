"""ACLs in the metadata log (Kafka's StandardAcl, AclControlManager's replay, KIP-801).

Theory of operation
-------------------
An ACL is one AccessControlEntryRecord, known by its id (a Uuid the controller draws when
it creates the ACL); RemoveAccessControlEntryRecord drops it by that id. The image keeps
them in ``AclsImage``:

    by_id        acl id -> StandardAcl                         what the log says
    by_resource  (resource type, pattern type, name) -> {id: StandardAcl}
                 the same ACLs grouped by resource pattern, so that the authorizer finds
                 the ACLs of one resource without scanning all of them

A decision about resource (TOPIC, "orders-eu") needs the ACLs whose pattern covers it: the
literal ones on "orders-eu", the literal ones on the wildcard "*", and the prefixed ones on
every prefix of the name ("o", "or", ..., "orders-eu"). That is ``len(name) + 2`` lookups
in ``by_resource`` however many ACLs exist (Kafka keeps a sorted set and walks it
backwards; the lookups here do the same job with plain dicts).

Like every part of the image, an ``AclsImage`` never changes; ``with_changes`` returns a
new one that shares every untouched group with the old.

``AclBindingFilter`` (clients/protocol/acls.py, shared with the admin client) selects ACLs
for DescribeAcls and DeleteAcls.

Not here: deciding who may do what (authorizer.py), validating new ACLs
(quorum/controller/acl_control.py).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clients.protocol import messages
from clients.protocol.acls import (
    WILDCARD_RESOURCE, AclBinding, AclBindingFilter, AclKey, AclOperation, AclPatternType,
    AclPermissionType, AclResourceType, enum_or_unknown,
)

__all__ = ["AclBindingFilter", "AclKey", "AclsImage", "StandardAcl", "acl_from_record",
           "acl_record", "enum_or_unknown"]

_EMPTY: Mapping = MappingProxyType({})


# Kafka's StandardAcl is the client's AclBinding, stored: one class for both.
StandardAcl = AclBinding


def acl_record(acl: StandardAcl, acl_id: uuid.UUID) -> Any:
    return messages.AccessControlEntryRecord(
        id=acl_id, resource_type=int(acl.resource_type), resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type), principal=acl.principal, host=acl.host,
        operation=int(acl.operation), permission_type=int(acl.permission_type))


def acl_from_record(r: Any) -> StandardAcl:
    """The ACL an AccessControlEntryRecord holds; ValueError for values no controller writes
    (an unknown enum value, a filter-only one such as ANY, an empty name)."""
    acl = StandardAcl(AclResourceType(r.resource_type), r.resource_name,
                      AclPatternType(r.pattern_type), r.principal, r.host,
                      AclOperation(r.operation), AclPermissionType(r.permission_type))
    if (acl.resource_type in (AclResourceType.ANY, AclResourceType.UNKNOWN)
            or acl.pattern_type not in (AclPatternType.LITERAL, AclPatternType.PREFIXED)
            or acl.operation in (AclOperation.ANY, AclOperation.UNKNOWN)
            or acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY)
            or not acl.resource_name or not acl.principal or not acl.host):
        raise ValueError(f"not a storable ACL: {acl}")
    return acl


@dataclass(frozen=True, slots=True)
class AclsImage:
    by_id: Mapping[uuid.UUID, StandardAcl] = field(default_factory=lambda: _EMPTY)
    # Invariant: exactly the ACLs of by_id, each under its own key; no key maps to an
    # empty group.
    by_resource: Mapping[AclKey, Mapping[uuid.UUID, StandardAcl]] = field(
        default_factory=lambda: _EMPTY)

    def __len__(self) -> int:
        return len(self.by_id)

    def find(self, acl: StandardAcl) -> uuid.UUID | None:
        """The id of an ACL equal to ``acl``, if one exists (CreateAcls makes no duplicate)."""
        for acl_id, other in self.by_resource.get(acl.key, _EMPTY).items():
            if other == acl:
                return acl_id
        return None

    def covering(self, resource_type: AclResourceType, name: str) -> Iterator[StandardAcl]:
        """Every ACL whose pattern covers resource (``resource_type``, ``name``): literal on
        the name or on "*", prefixed on any prefix of the name (see the module docstring)."""
        groups = self.by_resource
        if not groups:
            return
        literal, prefixed = AclPatternType.LITERAL, AclPatternType.PREFIXED
        for key_name in (name, WILDCARD_RESOURCE) if name != WILDCARD_RESOURCE else (name,):
            yield from groups.get((resource_type, literal, key_name), _EMPTY).values()
        for end in range(1, len(name) + 1):
            yield from groups.get((resource_type, prefixed, name[:end]), _EMPTY).values()

    def with_changes(self, changes: Mapping[uuid.UUID, StandardAcl | None]) -> "AclsImage":
        """A new image with ``changes`` applied (None: the ACL of that id was removed)."""
        if not changes:
            return self
        by_id = dict(self.by_id)
        touched: dict[AclKey, dict[uuid.UUID, StandardAcl]] = {}

        def group(key: AclKey) -> dict[uuid.UUID, StandardAcl]:
            g = touched.get(key)
            if g is None:
                g = touched[key] = dict(self.by_resource.get(key, _EMPTY))
            return g
        for acl_id, acl in changes.items():
            old = by_id.pop(acl_id, None)
            if old is not None:
                del group(old.key)[acl_id]
            if acl is not None:
                by_id[acl_id] = acl
                group(acl.key)[acl_id] = acl
        by_resource = dict(self.by_resource)
        for key, g in touched.items():
            if g:
                by_resource[key] = MappingProxyType(g)
            else:
                by_resource.pop(key, None)
        return AclsImage(MappingProxyType(by_id), MappingProxyType(by_resource))
