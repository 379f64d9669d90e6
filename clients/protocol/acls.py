"""ACL vocabulary on the wire: Kafka's AclOperation and resource type ids, which operations
apply to which resource type (Kafka's ``AclEntry.supportedOperations``), and the
``*_authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups.

With no ``authorizer.class.name`` set every principal may do every operation a resource
supports (``authorized_operations``); the authorizer itself is metadata_log/authorizer.py."""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["AclOperation", "AclPatternType", "AclPermissionType", "AclResourceType", "ANONYMOUS",
           "AUTHORIZED_OPERATIONS_OMITTED", "CLUSTER_NAME", "KafkaPrincipal", "SUPPORTED_OPERATIONS",
           "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "authorized_operations",
           "operations_bits"]

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
