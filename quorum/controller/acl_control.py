"""CreateAcls and DeleteAcls on the controller (Kafka's AclControlManager, KIP-801).

Each creation of a CreateAcls request is decided on its own: Kafka's ``validateNewAcl``
refuses a resource type, pattern type, operation or permission that only filters may use
(ANY, MATCH) or that is UNKNOWN, an empty resource name, a principal without ``TYPE:`` and
an empty host, with INVALID_REQUEST, and Kafka's broker-side rule that the one CLUSTER
resource is named ``kafka-cluster``. A valid ACL that already exists (or appears twice in
the request) is answered NONE and written once; a new one becomes an
AccessControlEntryRecord with a fresh id drawn from the controller's random source.

Each filter of a DeleteAcls request selects the ACLs it matches (metadata_log/acls.py,
``AclBindingFilter``); a filter with an UNKNOWN element is refused with INVALID_REQUEST.
Every matching ACL becomes one RemoveAccessControlEntryRecord and is listed under the
first filter that matched it. All records of a request go in one batch, so brokers never
see half of it.

DescribeAcls is a read, answered by brokers from their own image (broker/apis.py).
"""
from __future__ import annotations

import random
import uuid
from typing import Any

from clients.protocol import messages
from clients.protocol.acls import (
    CLUSTER_NAME, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
)
from clients.protocol.errors import ErrorCode
from metadata_log.acls import AclBindingFilter, StandardAcl, acl_record, enum_or_unknown
from metadata_log.image import MetadataImage
from quorum.controller.result import ControllerResult

__all__ = ["create_acls", "delete_acls", "new_acl_problem"]


def new_acl_problem(c: Any) -> tuple[StandardAcl | None, str | None]:
    """An AclCreation as a StandardAcl, or why it cannot be one (Kafka's validateNewAcl)."""
    rtype = enum_or_unknown(AclResourceType, c.resource_type)
    ptype = enum_or_unknown(AclPatternType, c.resource_pattern_type)
    op = enum_or_unknown(AclOperation, c.operation)
    perm = enum_or_unknown(AclPermissionType, c.permission_type)
    if rtype in (AclResourceType.ANY, AclResourceType.UNKNOWN):
        return None, f"Invalid resourceType {c.resource_type}"
    if ptype not in (AclPatternType.LITERAL, AclPatternType.PREFIXED):
        return None, f"Invalid patternType {c.resource_pattern_type}"
    if op in (AclOperation.ANY, AclOperation.UNKNOWN):
        return None, f"Invalid operation {c.operation}"
    if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return None, f"Invalid permissionType {c.permission_type}"
    if not c.resource_name:
        return None, "Resource name should not be empty"
    if rtype == AclResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return None, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, colon, name = c.principal.partition(":")
    if not colon or not kind or not name:
        return None, (f"Could not parse principal from `{c.principal}` (no colon is present "
                      "separating the principal type from the principal name)")
    if not c.host:
        return None, "Invalid empty host"
    return StandardAcl(rtype, c.resource_name, ptype, c.principal, c.host, op, perm), None


def _new_id(rng: random.Random, taken: set[uuid.UUID]) -> uuid.UUID:
    while True:
        acl_id = uuid.UUID(int=rng.getrandbits(128))
        if acl_id.int != 0 and acl_id not in taken:
            taken.add(acl_id)
            return acl_id


def create_acls(image: MetadataImage, request: messages.CreateAclsRequest, rng: random.Random
                ) -> ControllerResult[messages.CreateAclsResponse]:
    R = messages.CreateAclsResponse
    records: list[Any] = []
    results = []
    made: set[StandardAcl] = set()
    taken = set(image.acls.by_id)
    for c in request.creations:
        acl, problem = new_acl_problem(c)
        if problem is not None:
            results.append(R.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                                               error_message=problem))
            continue
        assert acl is not None
        if acl not in made and image.acls.find(acl) is None:
            made.add(acl)
            records.append(acl_record(acl, _new_id(rng, taken)))
        results.append(R.AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
    return ControllerResult(tuple(records), R(results=results))


def delete_acls(image: MetadataImage, request: messages.DeleteAclsRequest
                ) -> ControllerResult[messages.DeleteAclsResponse]:
    R = messages.DeleteAclsResponse
    records: list[Any] = []
    results = []
    deleted: set[uuid.UUID] = set()
    for f in request.filters:
        acl_filter = AclBindingFilter.from_wire(f)
        if acl_filter.unknown_element():
            results.append(R.DeleteAclsFilterResult(
                error_code=ErrorCode.INVALID_REQUEST, matching_acls=[],
                error_message="Filter contains UNKNOWN elements"))
            continue
        matching = []
        for acl_id in sorted(image.acls.by_id):
            acl = image.acls.by_id[acl_id]
            if acl_id in deleted or not acl_filter.matches(acl):
                continue
            deleted.add(acl_id)
            records.append(messages.RemoveAccessControlEntryRecord(id=acl_id))
            matching.append(R.DeleteAclsMatchingAcl(
                error_code=ErrorCode.NONE, resource_type=int(acl.resource_type),
                resource_name=acl.resource_name, pattern_type=int(acl.pattern_type),
                principal=acl.principal, host=acl.host, operation=int(acl.operation),
                permission_type=int(acl.permission_type)))
        results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.NONE,
                                                matching_acls=matching))
    return ControllerResult(tuple(records), R(filter_results=results))
