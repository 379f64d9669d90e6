"""The StandardAuthorizer as tables: Kafka's own cases (StandardAuthorizerTest) plus host
matching, super users, the no-ACL default and authorizeByResourceType."""
from __future__ import annotations

import uuid

import pytest

from clients.protocol.acls import (
    AclOperation as Op, AclPatternType as P, AclPermissionType as Perm, AclResourceType as R,
    KafkaPrincipal,
)
from metadata_log.acls import AclsImage, StandardAcl
from metadata_log.authorizer import STANDARD_AUTHORIZER_CLASS, AuthorizerConfig, StandardAuthorizer

ALLOW, DENY = Perm.ALLOW, Perm.DENY
LIT, PRE = P.LITERAL, P.PREFIXED


def acls_of(*acls: StandardAcl) -> AclsImage:
    return AclsImage().with_changes({uuid.UUID(int=i + 1): a for i, a in enumerate(acls)})


def foo(op: Op, perm: Perm) -> StandardAcl:        # Kafka's newFooAcl
    return StandardAcl(R.TOPIC, "foo_", PRE, "User:bob", "*", op, perm)


def bar(op: Op, perm: Perm) -> StandardAcl:        # Kafka's newBarAcl
    return StandardAcl(R.GROUP, "bar", LIT, "User:*", "*", op, perm)


def decide(acls: AclsImage, user: str, op: Op, rtype: R, name: str, host: str = "10.0.0.1",
           super_users: frozenset[str] = frozenset(), allow_everyone: bool = False) -> bool:
    authorizer = StandardAuthorizer(AuthorizerConfig(super_users, allow_everyone))
    return authorizer.authorize(acls, KafkaPrincipal("User", user), host, op, rtype, name)


# (the ACL, the operation asked on TOPIC foo_bar by bob, allowed?) -- testFindResultImplication
# with the no-ACL default off, so Kafka's "null" (no rule) is a denial here.
IMPLICATION = [
    *[(foo(op, ALLOW), Op.DESCRIBE, True) for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)],
    (foo(Op.CREATE, ALLOW), Op.DESCRIBE, False),
    *[(foo(op, DENY), Op.DESCRIBE, False) for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)],
    (foo(Op.DESCRIBE, DENY), Op.DESCRIBE, False),
    (foo(Op.DESCRIBE_CONFIGS, ALLOW), Op.DESCRIBE_CONFIGS, True),
    (foo(Op.ALTER_CONFIGS, ALLOW), Op.DESCRIBE_CONFIGS, True),
    (foo(Op.ALTER_CONFIGS, DENY), Op.DESCRIBE_CONFIGS, False),
    (foo(Op.ALTER_CONFIGS, DENY), Op.ALTER_CONFIGS, False),
    (foo(Op.READ, ALLOW), Op.WRITE, False),            # READ implies only DESCRIBE
    (foo(Op.ALL, ALLOW), Op.ALTER_CONFIGS, True),
]


@pytest.mark.parametrize("acl, op, allowed", IMPLICATION, ids=str)
def test_kafka_implication_table(acl: StandardAcl, op: Op, allowed: bool) -> None:
    assert decide(acls_of(acl), "bob", op, R.TOPIC, "foo_bar") is allowed


def test_deny_acls_imply_nothing_so_the_implied_allow_decides() -> None:
    """A DENY READ does not deny DESCRIBE; with an ALLOW READ too, DESCRIBE is allowed."""
    acls = acls_of(foo(Op.READ, DENY), foo(Op.WRITE, ALLOW))
    assert decide(acls, "bob", Op.DESCRIBE, R.TOPIC, "foo_bar")
    assert not decide(acls, "bob", Op.READ, R.TOPIC, "foo_bar")


def test_kafka_principal_matching() -> None:
    assert decide(acls_of(foo(Op.READ, ALLOW)), "bob", Op.READ, R.TOPIC, "foo_bar")
    assert not decide(acls_of(foo(Op.READ, ALLOW)), "alice", Op.READ, R.TOPIC, "foo_bar")
    assert not decide(acls_of(bar(Op.READ, DENY)), "alice", Op.READ, R.GROUP, "bar",
                      allow_everyone=True)    # User:* matches alice; the DENY holds


def test_kafka_simple_authorizations() -> None:
    acls = acls_of(foo(Op.READ, ALLOW), foo(Op.WRITE, ALLOW), bar(Op.DESCRIBE_CONFIGS, ALLOW),
                   bar(Op.ALTER_CONFIGS, ALLOW))
    assert decide(acls, "bob", Op.READ, R.TOPIC, "foo_")
    assert decide(acls, "fred", Op.ALTER_CONFIGS, R.GROUP, "bar")


# testTopicAclWithOperationAll
ALL_ACLS = acls_of(StandardAcl(R.TOPIC, "foo", LIT, "User:*", "*", Op.ALL, ALLOW),
                   StandardAcl(R.TOPIC, "bar", PRE, "User:alice", "*", Op.ALL, ALLOW),
                   StandardAcl(R.TOPIC, "baz", LIT, "User:bob", "*", Op.ALL, ALLOW))


@pytest.mark.parametrize("user, op, name, allowed", [
    ("alice", Op.WRITE, "foo", True), ("alice", Op.DESCRIBE_CONFIGS, "bar", True),
    ("alice", Op.DESCRIBE, "baz", False),
    ("bob", Op.WRITE, "foo", True), ("bob", Op.READ, "bar", False), ("bob", Op.DESCRIBE, "baz", True),
    ("malory", Op.DESCRIBE, "foo", True), ("malory", Op.WRITE, "bar", False),
    ("malory", Op.READ, "baz", False),
])
def test_kafka_topic_acl_with_operation_all(user: str, op: Op, name: str, allowed: bool) -> None:
    assert decide(ALL_ACLS, user, op, R.TOPIC, name) is allowed


# createAuthorizerWithManyAcls / testAuthorizationWithManyAcls
MANY = acls_of(
    StandardAcl(R.TOPIC, "green2", LIT, "User:*", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "green", PRE, "User:bob", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "betamax4", LIT, "User:bob", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "betamax", LIT, "User:bob", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "beta", PRE, "User:*", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "alpha", PRE, "User:*", "*", Op.READ, ALLOW),
    StandardAcl(R.TOPIC, "alp", PRE, "User:bob", "*", Op.READ, DENY),
    StandardAcl(R.GROUP, "*", LIT, "User:bob", "*", Op.WRITE, ALLOW),
    StandardAcl(R.GROUP, "wheel", LIT, "User:*", "*", Op.WRITE, DENY),
)


@pytest.mark.parametrize("user, op, rtype, name, allowed", [
    ("bob", Op.READ, R.TOPIC, "green1", True),
    ("bob", Op.WRITE, R.GROUP, "wheel", False),         # a DENY beats the wildcard ALLOW
    ("bob", Op.READ, R.TOPIC, "alpha", False),          # the DENY prefix beats the ALLOW one
    ("bob", Op.WRITE, R.GROUP, "arbitrary", True),      # literal "*" covers every group
    ("bob", Op.READ, R.TOPIC, "ala", False),            # no ACL covers it, default off
    ("alice", Op.READ, R.TOPIC, "alpha", True),
    ("alice", Op.READ, R.TOPIC, "betamax", True),
    ("alice", Op.READ, R.TOPIC, "green1", False),
])
def test_kafka_authorization_with_many_acls(user: str, op: Op, rtype: R, name: str,
                                            allowed: bool) -> None:
    assert decide(MANY, user, op, rtype, name) is allowed


def test_host_must_match_or_be_the_wildcard() -> None:
    acls = acls_of(StandardAcl(R.TOPIC, "t", LIT, "User:bob", "10.0.0.1", Op.READ, ALLOW))
    assert decide(acls, "bob", Op.READ, R.TOPIC, "t", host="10.0.0.1")
    assert not decide(acls, "bob", Op.READ, R.TOPIC, "t", host="10.0.0.2")
    deny_one_host = acls_of(StandardAcl(R.TOPIC, "t", LIT, "User:bob", "*", Op.READ, ALLOW),
                            StandardAcl(R.TOPIC, "t", LIT, "User:bob", "10.0.0.9", Op.READ, DENY))
    assert decide(deny_one_host, "bob", Op.READ, R.TOPIC, "t", host="10.0.0.1")
    assert not decide(deny_one_host, "bob", Op.READ, R.TOPIC, "t", host="10.0.0.9")


def test_super_users_bypass_even_a_deny() -> None:
    acls = acls_of(StandardAcl(R.TOPIC, "*", LIT, "User:*", "*", Op.ALL, DENY))
    assert decide(acls, "root", Op.DELETE, R.TOPIC, "x", super_users=frozenset({"User:root"}))
    assert not decide(acls, "bob", Op.DELETE, R.TOPIC, "x", super_users=frozenset({"User:root"}))


def test_allow_everyone_only_where_the_resource_has_no_acl() -> None:
    acls = acls_of(StandardAcl(R.TOPIC, "t", LIT, "User:alice", "*", Op.READ, ALLOW))
    assert decide(acls, "bob", Op.READ, R.TOPIC, "other", allow_everyone=True)
    assert not decide(acls, "bob", Op.READ, R.TOPIC, "t", allow_everyone=True)
    assert not decide(acls, "bob", Op.READ, R.TOPIC, "other", allow_everyone=False)


def test_authorized_operations_bits() -> None:
    acls = acls_of(StandardAcl(R.TOPIC, "t", LIT, "User:bob", "*", Op.WRITE, ALLOW),
                   StandardAcl(R.TOPIC, "t", LIT, "User:bob", "*", Op.ALTER_CONFIGS, ALLOW))
    a = StandardAuthorizer(AuthorizerConfig(frozenset()))
    bits = a.authorized_operations(acls, KafkaPrincipal("User", "bob"), "h", R.TOPIC, "t")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)


@pytest.mark.parametrize("acls, allowed", [
    (acls_of(), False),
    (acls_of(StandardAcl(R.TOPIC, "a", LIT, "User:bob", "*", Op.WRITE, ALLOW)), True),
    (acls_of(StandardAcl(R.TOPIC, "a", LIT, "User:bob", "*", Op.WRITE, ALLOW),
             StandardAcl(R.TOPIC, "a", LIT, "User:bob", "*", Op.WRITE, DENY)), False),
    (acls_of(StandardAcl(R.TOPIC, "ab", PRE, "User:bob", "*", Op.WRITE, ALLOW),
             StandardAcl(R.TOPIC, "a", PRE, "User:*", "*", Op.ALL, DENY)), False),
    (acls_of(StandardAcl(R.TOPIC, "ab", PRE, "User:bob", "*", Op.WRITE, ALLOW),
             StandardAcl(R.TOPIC, "abc", PRE, "User:*", "*", Op.WRITE, DENY)), True),
    (acls_of(StandardAcl(R.TOPIC, "a", LIT, "User:bob", "*", Op.READ, ALLOW)), False),
    (acls_of(StandardAcl(R.TOPIC, "a", LIT, "User:bob", "*", Op.WRITE, ALLOW),
             StandardAcl(R.TOPIC, "*", LIT, "User:bob", "*", Op.WRITE, DENY)), False),
])
def test_authorize_by_resource_type(acls: AclsImage, allowed: bool) -> None:
    a = StandardAuthorizer(AuthorizerConfig(frozenset()))
    assert a.authorize_by_resource_type(acls, KafkaPrincipal("User", "bob"), "h", Op.WRITE,
                                        R.TOPIC) is allowed


def test_config_from_properties() -> None:
    assert AuthorizerConfig.from_properties({}) is None
    config = AuthorizerConfig.from_properties({
        "authorizer.class.name": STANDARD_AUTHORIZER_CLASS,
        "super.users": ";  User:bob  ;  User:alice ", "allow.everyone.if.no.acl.found": "true"})
    assert config == AuthorizerConfig(frozenset({"User:bob", "User:alice"}), True)
    with pytest.raises(ValueError):
        AuthorizerConfig.from_properties({"authorizer.class.name": STANDARD_AUTHORIZER_CLASS,
                                          "super.users": "bob;:alice"})
    with pytest.raises(ValueError):
        AuthorizerConfig.from_properties({"authorizer.class.name": "kafka.security.AclAuthorizer"})
