"""``ketch topic create|list|describe|alter|add-partitions|delete`` (kafka-topics, rpk topic).

Every operation goes through Ketch's admin client. ``describe`` shows, per partition, the
replicas, leader, leader epoch, ISR, offline replicas, and the log start offset and high
watermark (ListOffsets earliest/latest at the leader, read_uncommitted: what a consumer
can read). Kafka's protocol has no call for a leader's log end offset; when the cluster
comes from a ``ketch up`` directory, ``log_end_offset`` is read from the leader's HTTP
admin API (``/v1/node``), else it is null (``?`` in the table).
Configs are listed with their source (default, topic, broker: DescribeConfigs).
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch topic create orders -p 6 -r 3 -c retention.ms=86400000
  ketch topic list
  ketch topic describe orders --output json
  ketch topic alter orders -c retention.ms=3600000
  ketch topic add-partitions orders --total 12
  ketch topic delete orders
"""

# DescribeConfigs' ConfigSource, in the words kafka-configs and rpk use.
SOURCE_NAMES = {
    0: "unknown", 1: "topic", 2: "broker", 3: "broker_default", 4: "static_broker",
    5: "default", 6: "broker_logger", 7: "client_metrics", 8: "group",
}


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "topic", "create, list, describe, alter, grow and delete topics",
                                 __doc__, EXAMPLES)

    a = action("create", "create topics", create)
    a.add_argument("topics", nargs="+", metavar="TOPIC")
    a.add_argument("--partitions", "-p", type=int, default=-1,
                   help="partitions (default: the brokers' num.partitions)")
    a.add_argument("--replication-factor", "-r", type=int, default=-1,
                   help="replicas (default: the brokers' default.replication.factor)")
    a.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config, repeatable")
    a.add_argument("--if-not-exists", action="store_true", help="an existing topic is not an error")
    a.add_argument("--dry-run", action="store_true", help="validate only, create nothing")

    a = action("list", "list topics", list_)
    a.add_argument("--internal", action="store_true", help="include internal topics")

    a = action("describe", "partitions, replicas, leader, ISR, offsets and configs", describe)
    a.add_argument("topics", nargs="+", metavar="TOPIC")
    a.add_argument("--all-configs", action="store_true",
                   help="list every config, not only those set on the topic or brokers")

    a = action("alter", "set or remove topic configs (IncrementalAlterConfigs)", alter)
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config, repeatable")
    a.add_argument("--delete-config", "-d", action="append", default=[], metavar="KEY",
                   help="remove a config (back to its default), repeatable")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")

    a = action("add-partitions", "grow a topic to --total partitions", add_partitions)
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("--total", type=int, required=True, help="the new partition count")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")

    a = action("delete", "delete topics", delete)
    a.add_argument("topics", nargs="+", metavar="TOPIC")
    a.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")


def create(args: argparse.Namespace) -> int:
    from clients.admin import NewTopic
    configs = c.parse_kv(args.config, "--config")
    with c.admin(args) as admin:
        existing = admin.list_topics(include_internal=True) if args.if_not_exists else {}
        wanted = [t for t in args.topics if t not in existing]
        rows = []
        if wanted:
            results = admin.create_topics(
                [NewTopic(t, args.partitions, args.replication_factor, configs=configs)
                 for t in wanted], validate_only=args.dry_run)
            for t in wanted:
                r = results[t]
                rows.append({"topic": t, "topic_id": str(r.topic_id), "partitions": r.num_partitions,
                             "replication_factor": r.replication_factor,
                             "created": not args.dry_run})
        rows += [{"topic": t, "topic_id": str(existing[t].topic_id), "partitions": None,
                  "replication_factor": None, "created": False} for t in args.topics if t in existing]
    c.emit(args, rows, ["topic", "partitions", "replication_factor", "created"])
    return 0


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        listing = admin.list_topics(include_internal=args.internal)
        described = admin.describe_topics(sorted(listing)) if listing else {}
    rows = [{"topic": name, "topic_id": str(d.topic_id), "partitions": len(d.partitions),
             "replication_factor": max((len(p.replicas) for p in d.partitions), default=0),
             "internal": d.is_internal} for name, d in sorted(described.items())]
    c.emit(args, rows, ["topic", "partitions", "replication_factor", "internal"])
    return 0


def _log_end_offsets(http: dict[int, c.HttpNode], described: dict) -> dict[tuple[str, int], int]:
    """Each leader's log end offset, from its HTTP admin API (``_common.broker_http``):
    ``/v1/node`` lists the replicas a broker hosts."""
    leaders = {p.leader for d in described.values() for p in d.partitions}
    out = {}
    for broker_id in sorted(leaders & set(http)):
        got = http[broker_id].get_json("/v1/node")
        for r in (got or {}).get("replicas", ()):
            if r.get("role") == "LEADER" and r.get("topic") in described:
                out[(r["topic"], r["partition"])] = r["log_end_offset"]
    return out


def describe_view(admin, topics: list[str], all_configs: bool,
                  http: dict[int, c.HttpNode] | None = None) -> list[dict]:
    http = http or {}
    from clients.admin import ConfigResource, ConfigResourceType, OffsetSpec, TopicPartition
    described = admin.describe_topics(topics)
    tps = [TopicPartition(t, p.partition) for t in topics for p in described[t].partitions]
    start = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}) if tps else {}
    end = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}) if tps else {}
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    leo = _log_end_offsets(http, described)
    out = []
    for t in topics:
        d = described[t]
        entries = configs[ConfigResource(ConfigResourceType.TOPIC, t)]
        out.append({
            "topic": t, "topic_id": str(d.topic_id), "internal": d.is_internal,
            "partitions": [{
                "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas), "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
                "log_start_offset": start[TopicPartition(t, p.partition)].offset,
                "high_watermark": end[TopicPartition(t, p.partition)].offset,
                "log_end_offset": leo.get((t, p.partition)),
            } for p in d.partitions],
            "configs": [{"name": e.name, "value": e.value,
                         "source": SOURCE_NAMES.get(int(e.source), str(e.source)),
                         "read_only": e.read_only, "sensitive": e.sensitive}
                        for e in sorted(entries.values(), key=lambda e: e.name)
                        if all_configs or not e.is_default],
        })
    return out


def describe(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        view = describe_view(admin, args.topics, args.all_configs, c.broker_http(args))
    if args.output == "json":
        c.print_json(view)
        return 0
    for i, t in enumerate(view):
        if i:
            print()
        print(f"topic {t['topic']}  id {t['topic_id']}  partitions {len(t['partitions'])}"
              + ("  (internal)" if t["internal"] else ""))
        c.print_table(["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE",
                       "LOG-START", "HIGH-WATERMARK", "LOG-END"],
                      [[p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"],
                        p["offline_replicas"], p["log_start_offset"], p["high_watermark"],
                        "?" if p["log_end_offset"] is None else p["log_end_offset"]]
                       for p in t["partitions"]])
        if t["configs"]:
            print()
            c.print_table(["CONFIG", "VALUE", "SOURCE"],
                          [[e["name"], "(sensitive)" if e["sensitive"] else e["value"], e["source"]]
                           for e in t["configs"]])
    return 0


def alter(args: argparse.Namespace) -> int:
    from clients.admin import AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType
    sets = c.parse_kv(args.config, "--config")
    if not sets and not args.delete_config:
        raise c.CliError("nothing to change: give --config KEY=VALUE or --delete-config KEY")
    ops = [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in args.delete_config]
    with c.admin(args) as admin:
        admin.describe_topics([args.topic])  # an unknown topic is named as such
        admin.incremental_alter_configs(
            {ConfigResource(ConfigResourceType.TOPIC, args.topic): ops}, validate_only=args.dry_run)
    rows = [{"topic": args.topic, "name": o.name, "value": o.value, "op": o.op.name.lower(),
             "applied": not args.dry_run} for o in ops]
    c.emit(args, rows, ["topic", "name", "value", "op", "applied"])
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    from clients.admin import NewPartitions
    with c.admin(args) as admin:
        before = len(admin.describe_topics([args.topic])[args.topic].partitions)
        if args.total <= before:
            raise c.CliError(f"topic {args.topic!r} has {before} partitions: --total must be "
                             f"more (partitions cannot be removed)")
        admin.create_partitions({args.topic: NewPartitions(args.total)}, validate_only=args.dry_run)
    c.emit(args, [{"topic": args.topic, "partitions_before": before, "partitions": args.total,
                   "applied": not args.dry_run}])
    return 0


def delete(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        if args.if_exists:
            existing = admin.list_topics(include_internal=True)
            wanted = [t for t in args.topics if t in existing]
        else:
            wanted = list(args.topics)
            admin.describe_topics(wanted)   # refuse before deleting any if one is unknown
        if wanted:
            admin.delete_topics(wanted)
    c.emit(args, [{"topic": t, "deleted": t in wanted} for t in args.topics])
    return 0

