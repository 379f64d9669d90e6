"""``ketch quota get|set|delete`` for client quotas (kafka-configs --entity-type users/clients).

An entity is a user, a client id, or both (``--user alice --client-id app``); ``--user-default``
and ``--client-id-default`` name a type's default (Kafka's ``--entity-default``). ``set`` takes
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` or
``controller_mutation_rate`` values; brokers enforce the two byte rates (a client over its
rate gets its responses delayed by throttle_time_ms). ``get`` without an entity lists every
quota. The controller validates: a bad key or value is refused with Kafka's error code and
changes nothing.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch quota set --client-id batch-loader producer_byte_rate=1048576
  ketch quota set --user-default consumer_byte_rate=10485760
  ketch quota get
  ketch quota get --client-id batch-loader --output json
  ketch quota delete --client-id batch-loader producer_byte_rate
"""


def _entity_args(a: argparse.ArgumentParser) -> None:
    user = a.add_mutually_exclusive_group()
    user.add_argument("--user", metavar="NAME")
    user.add_argument("--user-default", action="store_true", help="the default of every user")
    client = a.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="ID")
    client.add_argument("--client-id-default", action="store_true",
                        help="the default of every client id")


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "quota", "get, set and delete client quotas",
                                 __doc__, EXAMPLES, common=_entity_args)
    action("get", "quota values by entity", get)
    a = action("set", "set quota values (AlterClientQuotas)", set_)
    a.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    a = action("delete", "remove quota values", delete)
    a.add_argument("keys", nargs="+", metavar="KEY")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        entity["user"] = args.user
    if args.client_id is not None or args.client_id_default:
        entity["client-id"] = args.client_id
    return entity


def _show(entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def get(args: argparse.Namespace) -> int:
    entity = _entity(args)
    with c.admin(args) as admin:
        found = admin.describe_client_quotas(entity or None, strict=bool(entity))
    rows = [{"entity": _show(e), "key": k, "value": v}
            for e, values in sorted(found.items(), key=lambda kv: repr(kv[0]))
            for k, v in sorted(values.items())]
    c.emit(args, rows, ["entity", "key", "value"])
    return 0


def _alter(args: argparse.Namespace, values: dict[str, float | None]) -> int:
    from clients.admin import client_quota_entity
    entity = _entity(args)
    if not entity:
        raise c.CliError("name an entity: --user/--user-default and/or --client-id/--client-id-default")
    with c.admin(args) as admin:
        admin.alter_client_quotas({client_quota_entity(entity): values}, validate_only=args.dry_run)
    c.emit(args, [{"entity": _show(client_quota_entity(entity)), "key": k, "value": v,
                   "applied": not args.dry_run} for k, v in values.items()],
           ["entity", "key", "value", "applied"])
    return 0


def set_(args: argparse.Namespace) -> int:
    values: dict[str, float | None] = {}
    for key, raw in c.parse_kv(args.pairs, "set").items():
        try:
            values[key] = float(raw)
        except ValueError:
            raise c.CliError(f"{key}: {raw!r} is not a number") from None
    return _alter(args, values)


def delete(args: argparse.Namespace) -> int:
    return _alter(args, {k: None for k in args.keys})
