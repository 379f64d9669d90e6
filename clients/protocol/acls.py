"""ACL vocabulary on the wire: Kafka's AclOperation, resource, pattern and permission type
ids, an ACL (AclBinding) and the filter that selects ACLs (AclBindingFilter), which operations
apply to which resource type (Kafka's ``AclEntry.supportedOperations``), and the
``*_authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups.

With no ``authorizer.class.name`` set every principal may do every operation a resource
supports (``authorized_operations``); the authorizer itself is metadata_log/authorizer.py."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["AclBinding", "AclBindingFilter", "AclKey", "AclOperation", "AclPatternType",
           "AclPermissionType", "AclResourceType", "ANONYMOUS", "AUTHORIZED_OPERATIONS_OMITTED",
           "CLUSTER_NAME", "KafkaPrincipal", "STANDARD_AUTHORIZER_CLASS", "SUPPORTED_OPERATIONS",
           "WILDCARD_HOST",
           "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "authorized_operations", "enum_or_unknown",
           "operations_bits"]

# authorizer.class.name turns authorization on; Kafka's KRaft authorizer is the one Ketch has
# (metadata_log/authorizer.py). Here so that `ketch up --secure` can name it too.
STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# What the *_authorized_operations fields hold when the request did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a connection is, as Kafka writes it in ACLs: ``User:alice``. The listener's
    authentication decides it; a connection that has none is ``User:ANONYMOUS``."""
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"a principal is TYPE:NAME (e.g. User:alice), not {text!r}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPatternType(enum.IntEnum):
    """Kafka's PatternType: how an ACL's resource name matches. Only LITERAL and PREFIXED
    are stored; ANY and MATCH are for filters (DescribeAcls, DeleteAcls)."""
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1            # filters only
    DENY = 2
    ALLOW = 3


# Kafka's names: a literal ACL on "*" covers every resource of its type; "User:*" every
# principal of type User; host "*" every host; the one cluster resource is "kafka-cluster".
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class AclResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


AclKey = tuple[AclResourceType, AclPatternType, str]


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's AclBinding; the metadata image's StandardAcl): ``principal`` from
    ``host`` is ALLOWed / DENYed ``operation`` on the resources of ``resource_type`` that
    the pattern (``pattern_type``, ``resource_name``) covers."""
    resource_type: AclResourceType      # never ANY or UNKNOWN
    resource_name: str                  # "*" with LITERAL: every resource of the type
    pattern_type: AclPatternType        # LITERAL or PREFIXED
    principal: str                      # "User:alice", or "User:*" for every user
    host: str                           # an IP address, or "*" for every host
    operation: AclOperation             # ALL or one concrete operation
    permission_type: AclPermissionType  # ALLOW or DENY

    @property
    def key(self) -> AclKey:
        return (self.resource_type, self.pattern_type, self.resource_name)


def enum_or_unknown(cls: Any, value: int) -> Any:
    """Kafka's fromCode: a value outside the enum is its UNKNOWN."""
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None (or ANY) in a field matches every value. Its pattern
    type may be ANY (any pattern with exactly this name) or MATCH (every pattern that
    covers this name, as the authorizer looks them up)."""
    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: AclPatternType = AclPatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def from_wire(cls, f: Any) -> "AclBindingFilter":
        """A DeleteAclsFilter or a DescribeAclsRequest (the same fields) as a filter; a
        value outside Kafka's enums is UNKNOWN."""
        return cls(enum_or_unknown(AclResourceType, f.resource_type_filter), f.resource_name_filter,
                   enum_or_unknown(AclPatternType, f.pattern_type_filter), f.principal_filter,
                   f.host_filter, enum_or_unknown(AclOperation, f.operation),
                   enum_or_unknown(AclPermissionType, f.permission_type))

    def unknown_element(self) -> bool:
        """Kafka's ``isUnknown``: a filter with an UNKNOWN field matches nothing sensible
        and is refused (INVALID_REQUEST)."""
        return self.resource_type == AclResourceType.UNKNOWN or \
            self.pattern_type == AclPatternType.UNKNOWN or \
            self.operation == AclOperation.UNKNOWN or \
            self.permission_type == AclPermissionType.UNKNOWN

    def matches_pattern(self, acl: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != AclResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (AclPatternType.ANY, AclPatternType.MATCH) \
                and self.pattern_type != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (AclPatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: the patterns that cover `name`.
        if acl.pattern_type == AclPatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
        return name.startswith(acl.resource_name)

    def matches(self, acl: AclBinding) -> bool:
        """The pattern and Kafka's AccessControlEntryFilter.matches."""
        return (self.matches_pattern(acl)
                and (self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission_type in (AclPermissionType.ANY, acl.permission_type))


_O = AclOperation
SUPPORTED_OPERATIONS: dict[AclResourceType, frozenset[AclOperation]] = {
    AclResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                      _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    AclResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS,
                                      _O.ALTER_CONFIGS}),
    AclResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                        _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    AclResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT}),
    AclResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    AclResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def operations_bits(operations: "frozenset[AclOperation] | set[AclOperation]") -> int:
    """The bit field (bit n set: operation n allowed) of the *_authorized_operations fields."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


def authorized_operations(resource_type: AclResourceType, asked: bool) -> int:
    """The bit field a response carries for a resource with no authorizer configured:
    every supported operation; the "omitted" value unless asked. With an authorizer the
    broker asks it instead (metadata_log.authorizer)."""
    if not asked:
        return AUTHORIZED_OPERATIONS_OMITTED
    return operations_bits(SUPPORTED_OPERATIONS[resource_type])
