"""`StandardAuthorizer`: who may do what, decided over the image's ACLs (Kafka's
StandardAuthorizer and StandardAuthorizerData, KIP-801).

Theory of operation
-------------------
A decision is about one *action*: a principal (``User:alice``) connected from a host asks
to do an operation (READ) on a resource (TOPIC ``orders-eu``). It is pure: the same ACLs,
configuration and action always give the same answer; the ACLs are those of the metadata
image the broker serves from, passed in with every call, so a decision never sees half of
a committed batch.

The rules, in Kafka's order:

1. A principal listed in ``super.users`` (``User:admin;User:ops``) may do everything.
2. The ACLs whose resource pattern covers the resource are looked up through the image's
   index (metadata_log/acls.py: literal on the name, literal on ``*``, prefixed on any
   prefix of the name), never by scanning every ACL.
3. Of those, an ACL *applies* when its principal is the principal or ``<type>:*``, its host
   is the host or ``*``, and its operation is the operation or ALL. An ALLOW also applies
   through Kafka's implied operations: DESCRIBE is implied by READ, WRITE, DELETE and
   ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS. A DENY implies nothing (a DENY READ does not
   deny DESCRIBE).
4. A DENY that applies wins over any ALLOW. Otherwise an ALLOW that applies allows.
5. No ACL applies: if the resource has no ACL at all (for anybody), the answer is
   ``allow.everyone.if.no.acl.found``; otherwise denied.

``authorize_by_resource_type`` answers "may this principal do the operation on *some*
resource of this type?" (Kafka's Authorizer.authorizeByResourceType, which InitProducerId
uses for idempotent producers without IDEMPOTENT_WRITE on the cluster).

Not here: which operation each API needs (broker/auth_helper.py and broker/apis.py), or
where the principal comes from (the listener's authentication, quorum/network.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from clients.protocol.acls import (
    STANDARD_AUTHORIZER_CLASS, SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_RESOURCE, AclOperation,
    AclPatternType, AclPermissionType, AclResourceType, KafkaPrincipal, operations_bits,
)
from metadata_log.acls import AclsImage, StandardAcl

__all__ = ["STANDARD_AUTHORIZER_CLASS", "AuthorizerConfig", "StandardAuthorizer"]

_O = AclOperation
# Operations an ALLOW of the key operation also allows (Kafka's StandardAuthorizerData).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    super_users: frozenset[str]             # principals as "User:name"
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "AuthorizerConfig | None":
        """None when ``authorizer.class.name`` is unset: every request is allowed. Another
        class than Kafka's StandardAuthorizer is a configuration error (ValueError)."""
        name = (props.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name != STANDARD_AUTHORIZER_CLASS:
            raise ValueError(f"authorizer.class.name: {name!r} is not an authorizer Ketch has "
                             f"(use {STANDARD_AUTHORIZER_CLASS})")
        users = frozenset(u.strip() for u in (props.get("super.users") or "").split(";")
                          if u.strip())
        for u in users:
            KafkaPrincipal.parse(u)     # ValueError names a malformed entry
        allow = (props.get("allow.everyone.if.no.acl.found") or "false").strip().lower()
        return cls(users, allow == "true")


class StandardAuthorizer:
    """Decisions over an ``AclsImage`` (see the module docstring); holds no ACLs itself."""

    def __init__(self, config: AuthorizerConfig) -> None:
        self.config = config

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.config.super_users

    def authorize(self, acls: AclsImage, principal: KafkaPrincipal, host: str,
                  operation: AclOperation, resource_type: AclResourceType, name: str) -> bool:
        assert operation not in (_O.ANY, _O.UNKNOWN), operation
        assert resource_type not in (AclResourceType.ANY, AclResourceType.UNKNOWN), resource_type
        if self.is_super_user(principal):
            return True
        who = (str(principal), f"{principal.principal_type}:*")
        implied = _IMPLIED_BY.get(operation, frozenset({operation}))
        found_resource_acls = allowed = False
        for acl in acls.covering(resource_type, name):
            found_resource_acls = True
            if acl.principal not in who or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.operation in (_O.ALL, operation):
                    return False            # a DENY beats every ALLOW
            elif acl.operation == _O.ALL or acl.operation in implied:
                allowed = True
        if allowed:
            return True
        return not found_resource_acls and self.config.allow_everyone_if_no_acl_found

    def authorized_operations(self, acls: AclsImage, principal: KafkaPrincipal, host: str,
                              resource_type: AclResourceType, name: str) -> int:
        """The *_authorized_operations bit field of one resource: each operation its type
        supports, asked one by one (Kafka's AuthHelper.authorizedOperations)."""
        return operations_bits({op for op in SUPPORTED_OPERATIONS[resource_type]
                                if self.authorize(acls, principal, host, op, resource_type, name)})

    def authorize_by_resource_type(self, acls: AclsImage, principal: KafkaPrincipal, host: str,
                                   operation: AclOperation,
                                   resource_type: AclResourceType) -> bool:
        """Whether some resource of the type may be operated on: an ALLOW (of exactly the
        operation or ALL) on a literal name or a prefix that no DENY covers (Kafka's
        Authorizer.authorizeByResourceType; super users and the no-ACL default as usual,
        by asking about a resource no ACL names)."""
        if self.authorize(acls, principal, host, operation, resource_type, "hardcode"):
            return True
        who = (str(principal), f"{principal.principal_type}:*")
        allow: list[StandardAcl] = []
        deny_literal: set[str] = set()
        deny_prefixes: list[str] = []
        for (rtype, _, _), group in acls.by_resource.items():
            if rtype != resource_type:
                continue
            for acl in group.values():
                if (acl.principal not in who or acl.host not in (host, WILDCARD_HOST)
                        or acl.operation not in (_O.ALL, operation)):
                    continue
                if acl.permission_type == AclPermissionType.ALLOW:
                    allow.append(acl)
                elif acl.pattern_type == AclPatternType.LITERAL:
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixes.append(acl.resource_name)
        if WILDCARD_RESOURCE in deny_literal:
            return False
        for acl in allow:
            name = acl.resource_name
            literal = acl.pattern_type == AclPatternType.LITERAL
            if literal and name == WILDCARD_RESOURCE:
                return True             # every resource of the type, and no "*" DENY above
            if literal and name in deny_literal:
                continue
            if not any(name.startswith(p) for p in deny_prefixes):
                return True             # no DENY prefix dominates this name or prefix
        return False
