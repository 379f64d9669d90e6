"""``ketch acl add|remove|list``: ACLs with kafka-acls.sh's options.

A resource is ``--topic NAME``, ``--group NAME``, ``--transactional-id ID`` (each may be
given more than once) or ``--cluster``; ``--resource-pattern-type`` is ``literal`` (the
default: exactly that name, ``*`` for all of them), ``prefixed`` (every name starting with
it), and for ``list`` / ``remove`` also ``any`` or ``match`` (every pattern that covers the
name). ``add`` makes one ACL per resource, principal (``--allow-principal`` /
``--deny-principal User:alice``), host (``--allow-host`` / ``--deny-host``, default ``*``)
and ``--operation`` (default All). ``remove`` deletes what the same options select (without
principals: every ACL of the resources); ``list`` shows ACLs, of the named resources or all,
optionally only those of one ``--principal``. As kafka-acls.sh, an operation the resource
type does not support is refused before anything is sent. Brokers enforce the ACLs when
they run with ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``.
"""
from __future__ import annotations

import argparse
from typing import Any

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch acl add --allow-principal User:alice --operation Write --operation Describe --topic orders
  ketch acl add --allow-principal User:bob --operation Read --topic orders- --resource-pattern-type prefixed
  ketch acl add --deny-principal User:mallory --deny-host 10.0.0.7 --operation All --topic '*'
  ketch acl add --allow-principal User:bob --operation Read --group billing
  ketch acl add --allow-principal User:carol --consumer --topic orders --group billing
  ketch acl list --topic orders --resource-pattern-type match
  ketch acl remove --allow-principal User:alice --operation Write --topic orders
"""

_PATTERNS = {"literal": "LITERAL", "prefixed": "PREFIXED", "any": "ANY", "match": "MATCH"}


def _resource_args(a: argparse.ArgumentParser) -> None:
    g = a.add_argument_group("resource")
    g.add_argument("--topic", action="append", default=[], metavar="NAME")
    g.add_argument("--group", action="append", default=[], metavar="NAME")
    g.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    g.add_argument("--cluster", action="store_true", help="the cluster resource")
    g.add_argument("--resource-pattern-type", default="literal", choices=sorted(_PATTERNS),
                   type=str.lower, help="how the names match (any/match: list and remove)")


def _entry_args(a: argparse.ArgumentParser) -> None:
    g = a.add_argument_group("who and what")
    g.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    g.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    g.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="default: * when an --allow-principal is given")
    g.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="default: * when a --deny-principal is given")
    g.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default: All)")
    g.add_argument("--producer", action="store_true",
                   help="kafka-acls.sh's shortcut: WRITE, DESCRIBE and CREATE on the topics")
    g.add_argument("--consumer", action="store_true",
                   help="kafka-acls.sh's shortcut: READ and DESCRIBE on the topics, READ on "
                        "the groups (name both)")


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "acl", "add, remove and list ACLs (kafka-acls.sh)",
                                 __doc__, EXAMPLES, common=_resource_args)
    a = action("add", "create ACLs (CreateAcls)", add)
    _entry_args(a)
    a = action("remove", "delete ACLs (DeleteAcls)", remove)
    _entry_args(a)
    a.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh's sake; "
                   "ketch never asks")
    a = action("list", "show ACLs (DescribeAcls)", list_)
    a.add_argument("--principal", metavar="TYPE:NAME", help="only this principal's ACLs")


def _operation(name: str) -> Any:
    from clients.admin import AclOperation
    key = "".join(ch for ch in name.upper() if ch.isalnum())
    for op in AclOperation:
        if op.name.replace("_", "") == key and op not in (AclOperation.ANY, AclOperation.UNKNOWN):
            return op
    raise c.CliError(f"--operation {name!r}: not one of Kafka's operations")


def _resources(args: argparse.Namespace, *, required: bool) -> list[tuple[Any, str]]:
    from clients.admin import AclResourceType as R
    from clients.protocol.acls import CLUSTER_NAME
    out = [(R.TOPIC, n) for n in args.topic] + [(R.GROUP, n) for n in args.group]
    out += [(R.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        out.append((R.CLUSTER, CLUSTER_NAME))
    if required and not out:
        raise c.CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    return out


def _pattern(args: argparse.Namespace, *, filters: bool) -> Any:
    from clients.admin import AclPatternType
    pattern = AclPatternType[_PATTERNS[args.resource_pattern_type]]
    if not filters and pattern not in (AclPatternType.LITERAL, AclPatternType.PREFIXED):
        raise c.CliError(f"--resource-pattern-type {args.resource_pattern_type}: add takes "
                         "literal or prefixed")
    return pattern


def _entries(args: argparse.Namespace, *, required: bool,
             ops: list[Any] | None = None) -> list[tuple[str, str, Any, Any]]:
    """(principal, host, permission, operation) for every combination asked for."""
    from clients.admin import AclOperation, AclPermissionType
    from clients.protocol.acls import KafkaPrincipal
    if ops is None:
        ops = [_operation(o) for o in args.operation] or [AclOperation.ALL]
    out = []
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for p in principals:
            try:
                KafkaPrincipal.parse(p)
            except ValueError as e:
                raise c.CliError(str(e)) from None
            out += [(p, h, perm, op) for h in (hosts or ["*"]) for op in ops]
    if required and not out:
        raise c.CliError("name who: --allow-principal and/or --deny-principal")
    return out


def _check_supported(resources: list[tuple[Any, str]], entries: list) -> None:
    from clients.admin import AclOperation
    from clients.protocol.acls import SUPPORTED_OPERATIONS
    for rtype, _ in resources:
        bad = sorted({op.name for *_, op in entries
                      if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS[rtype]})
        if bad:
            allowed = ", ".join(sorted(o.name for o in SUPPORTED_OPERATIONS[rtype]))
            raise c.CliError(f"ResourceType {rtype.name} only supports operations {allowed} "
                             f"(not {', '.join(bad)})")


def _rows(bindings: list) -> list[dict[str, Any]]:
    return [{"resource_type": b.resource_type.name, "name": b.resource_name,
             "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
             "operation": b.operation.name, "permission": b.permission_type.name}
            for b in bindings]


_HEADERS = ["resource_type", "name", "pattern_type", "principal", "host", "operation", "permission"]


def _shortcut_bindings(args: argparse.Namespace, pattern: Any) -> list[Any]:
    """kafka-acls.sh's --producer / --consumer: the operations each resource type needs."""
    from clients.admin import AclBinding, AclOperation as Op, AclResourceType as R
    if args.operation:
        raise c.CliError("--producer / --consumer choose the operations: drop --operation")
    if args.deny_principal:
        raise c.CliError("--producer / --consumer grant: use --allow-principal")
    wanted: dict[Any, list[Any]] = {R.TOPIC: [], R.GROUP: []}
    if args.producer:
        wanted[R.TOPIC] += [Op.WRITE, Op.DESCRIBE, Op.CREATE]
    if args.consumer:
        if not args.group:
            raise c.CliError("--consumer needs --group")
        wanted[R.TOPIC] += [Op.READ, Op.DESCRIBE]
        wanted[R.GROUP] += [Op.READ]
    if not args.topic:
        raise c.CliError("--producer / --consumer need --topic")
    out = []
    for rtype, name in _resources(args, required=True):
        ops = list(dict.fromkeys(wanted.get(rtype, [])))
        out += [AclBinding(rtype, name, pattern, p, h, op, perm)
                for p, h, perm, op in _entries(args, required=True, ops=ops)]
    return out


def add(args: argparse.Namespace) -> int:
    from clients.admin import AclBinding
    pattern = _pattern(args, filters=False)
    if args.producer or args.consumer:
        bindings = _shortcut_bindings(args, pattern)
    else:
        resources = _resources(args, required=True)
        entries = _entries(args, required=True)
        _check_supported(resources, entries)
        bindings = [AclBinding(rtype, name, pattern, p, h, op, perm)
                    for rtype, name in resources for p, h, perm, op in entries]
    with c.admin(args) as admin:
        admin.create_acls(bindings)
    c.emit(args, _rows(bindings), _HEADERS)
    return 0


def remove(args: argparse.Namespace) -> int:
    from clients.admin import AclBindingFilter
    if args.producer or args.consumer:
        raise c.CliError("--producer / --consumer are for add; remove names operations")
    resources = _resources(args, required=True)
    entries = _entries(args, required=False)
    pattern = _pattern(args, filters=True)
    if entries:
        filters = [AclBindingFilter(rtype, name, pattern, p, h, op, perm)
                   for rtype, name in resources for p, h, perm, op in entries]
    else:
        filters = [AclBindingFilter(rtype, name, pattern) for rtype, name in resources]
    with c.admin(args) as admin:
        deleted = admin.delete_acls(filters)
    c.emit(args, _rows([b for bs in deleted.values() for b in bs]), _HEADERS)
    return 0


def list_(args: argparse.Namespace) -> int:
    from clients.admin import AclBindingFilter, AclPatternType
    resources = _resources(args, required=False)
    pattern = _pattern(args, filters=True) if resources else AclPatternType.ANY
    filters = ([AclBindingFilter(rtype, name, pattern, args.principal) for rtype, name in resources]
               or [AclBindingFilter(principal=args.principal)])
    found: dict[Any, None] = {}
    with c.admin(args) as admin:
        for f in filters:
            found.update(dict.fromkeys(admin.describe_acls(f)))
    c.emit(args, _rows(list(found)), _HEADERS)
    return 0
