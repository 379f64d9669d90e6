"""``ketch acl``'s options turned into ACLs and filters, before anything is sent
(kafka-acls.sh's combinations, shortcuts and refusals); the process test
tests/integration/test_acls.py runs list and remove against a cluster."""
from __future__ import annotations

import pytest

from clients.admin import AclOperation as Op, AclPatternType as P, AclPermissionType as Perm
from clients.admin import AclResourceType as R
from clients.cli import acl
from clients.cli._common import CliError
from clients.cli._main import build_parser


def parse(*argv: str):
    return build_parser().parse_args(["acl", *argv])


def test_add_makes_one_acl_per_resource_principal_host_and_operation() -> None:
    args = parse("add", "--allow-principal", "User:alice", "--deny-principal", "User:eve",
                 "--deny-host", "10.0.0.7", "--operation", "Write", "--operation", "describe",
                 "--topic", "orders", "--resource-pattern-type", "PREFIXED")
    entries = acl._entries(args, required=True)
    assert entries == [("User:alice", "*", Perm.ALLOW, Op.WRITE),
                       ("User:alice", "*", Perm.ALLOW, Op.DESCRIBE),
                       ("User:eve", "10.0.0.7", Perm.DENY, Op.WRITE),
                       ("User:eve", "10.0.0.7", Perm.DENY, Op.DESCRIBE)]
    assert acl._resources(args, required=True) == [(R.TOPIC, "orders")]
    assert acl._pattern(args, filters=False) == P.PREFIXED


def test_consumer_and_producer_shortcuts() -> None:
    args = parse("add", "--allow-principal", "User:carol", "--consumer", "--producer",
                 "--topic", "orders", "--group", "billing")
    got = {(b.resource_type, b.operation) for b in acl._shortcut_bindings(args, P.LITERAL)}
    assert got == {(R.TOPIC, Op.WRITE), (R.TOPIC, Op.DESCRIBE), (R.TOPIC, Op.CREATE),
                   (R.TOPIC, Op.READ), (R.GROUP, Op.READ)}


@pytest.mark.parametrize("argv, why", [
    (["add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"], "supports"),
    (["add", "--allow-principal", "alice", "--topic", "t"], "TYPE:NAME"),
    (["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "operations"),
    (["add", "--topic", "t"], "name who"),
    (["add", "--allow-principal", "User:a"], "name a resource"),
    (["add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "literal or prefixed"),
    (["add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--group"),
])
def test_refused_before_anything_is_sent(argv: list[str], why: str) -> None:
    args = parse(*argv)
    with pytest.raises(CliError, match=why):
        pattern = acl._pattern(args, filters=False)
        if args.consumer or args.producer:
            acl._shortcut_bindings(args, pattern)
        acl._check_supported(acl._resources(args, required=True), acl._entries(args, required=True))
