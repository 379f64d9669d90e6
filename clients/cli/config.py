"""``ketch config get|set|delete`` for topics, brokers and client-metrics subscriptions
(kafka-configs).

``get`` is DescribeConfigs: every config with its value and source (default, topic,
broker, static_broker, ...); ``--name`` picks some. ``set`` and ``delete`` are
IncrementalAlterConfigs (SET / DELETE), validated by the controller: a bad value is
refused with Kafka's error code and changes nothing. A broker is ``--broker ID``, or
``--broker-defaults`` for the cluster-wide dynamic default (Kafka's ``--entity-default``).
A client-metrics subscription (KIP-714) is ``--client-metrics NAME``, with Kafka's keys
``metrics`` (prefixes, ``*`` for all), ``interval.ms`` and ``match``; deleting every key
deletes the subscription. (Brokers list every subscription with ListClientMetricsResources,
``Admin.list_client_metrics_resources``; this CLI has no verb for it yet.)
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c
from clients.cli.topic import SOURCE_NAMES

EXAMPLES = """examples:
  ketch config get --topic orders
  ketch config set --topic orders retention.ms=3600000 cleanup.policy=compact
  ketch config delete --topic orders retention.ms
  ketch config get --broker 1 --name log.retention.ms --output json
  ketch config set --broker-defaults log.retention.ms=86400000
  ketch config set --client-metrics producers metrics=org.apache.kafka.producer. interval.ms=60000
  ketch config get --client-metrics producers
"""


def _resource_args(a: argparse.ArgumentParser) -> None:
    which = a.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", "-t", metavar="TOPIC")
    which.add_argument("--broker", metavar="ID", type=int)
    which.add_argument("--broker-defaults", action="store_true",
                       help="the dynamic default of every broker")
    which.add_argument("--client-metrics", metavar="NAME",
                       help="a client-metrics subscription (KIP-714)")


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "config", "get, set and delete topic and broker configs",
                                 __doc__, EXAMPLES, common=_resource_args)

    a = action("get", "configs with value and source", get)
    a.add_argument("--name", action="append", metavar="KEY", help="only this key, repeatable")
    a = action("set", "set configs (IncrementalAlterConfigs SET)", set_)
    a.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    a = action("delete", "remove configs: back to the default", delete)
    a.add_argument("keys", nargs="+", metavar="KEY")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")


def _resource(args: argparse.Namespace):
    from clients.admin import ConfigResource
    if args.topic is not None:
        return ConfigResource.topic(args.topic)
    if args.client_metrics is not None:
        return ConfigResource.client_metrics(args.client_metrics)
    return ConfigResource.broker("" if args.broker_defaults else args.broker)


def _check_exists(admin, args: argparse.Namespace) -> None:
    """An unknown topic or broker is one line at once (a broker's configs are asked of
    that broker, so an unknown id would otherwise wait out the whole timeout)."""
    if args.topic is not None:
        admin.describe_topics([args.topic])
    elif args.broker is not None:
        ids = sorted(b.node_id for b in admin.describe_cluster().brokers)
        if args.broker not in ids:
            raise c.CliError(f"no live broker {args.broker} (live brokers: "
                             f"{', '.join(map(str, ids))})")


def get(args: argparse.Namespace) -> int:
    res = _resource(args)
    with c.admin(args) as admin:
        _check_exists(admin, args)
        entries = admin.describe_configs([res])[res]
    if args.name:
        unknown = [n for n in args.name if n not in entries]
        if unknown:
            raise c.CliError(f"no config named {unknown[0]!r} on {res.type.name.lower()} {res.name or '(defaults)'}")
    rows = [{"name": e.name, "value": e.value, "source": SOURCE_NAMES.get(int(e.source), str(e.source)),
             "is_default": e.is_default, "read_only": e.read_only, "sensitive": e.sensitive}
            for e in sorted(entries.values(), key=lambda e: e.name)
            if not args.name or e.name in args.name]
    if args.client_metrics is not None and not entries:
        raise c.CliError(f"no client-metrics subscription {args.client_metrics!r}")
    c.emit(args, rows, ["name", "value", "source", "read_only"])
    return 0


def _alter(args: argparse.Namespace, ops: list) -> int:
    res = _resource(args)
    with c.admin(args) as admin:
        _check_exists(admin, args)
        admin.incremental_alter_configs({res: ops}, validate_only=args.dry_run)
    c.emit(args, [{"resource": res.type.name.lower(), "resource_name": res.name, "name": o.name,
                   "value": o.value, "op": o.op.name.lower(), "applied": not args.dry_run}
                  for o in ops], ["resource", "resource_name", "name", "value", "op", "applied"])
    return 0


def set_(args: argparse.Namespace) -> int:
    from clients.admin import AlterConfigOp, AlterConfigOpType
    pairs = c.parse_kv(args.pairs, "set")
    return _alter(args, [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in pairs.items()])


def delete(args: argparse.Namespace) -> int:
    from clients.admin import AlterConfigOp, AlterConfigOpType
    return _alter(args, [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in args.keys])
