"""``ketch group list|describe|reset-offsets|delete`` (kafka-consumer-groups, rpk group).

``describe`` shows the group's state, protocol and members with their assignments, and per
partition the committed offset, the log end (high watermark) and the lag (log end minus
committed; a partition without a committed offset lags by everything above the log start):
Ketch's admin ``describe_consumer_groups`` and ``consumer_group_lag``.

``reset-offsets`` moves committed offsets ``--to-earliest|--to-latest|--to-datetime|
--shift-by|--to-offset`` for ``--topic`` (all its partitions) or ``--all-topics`` (those
the group has offsets for). It prints the plan and changes nothing unless ``--execute``
(``--dry-run`` is the default, as in Kafka). The admin client refuses it while the group
has members, as Kafka does.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch group list
  ketch group describe billing --output json
  ketch group reset-offsets billing --topic orders --to-earliest            # the plan only
  ketch group reset-offsets billing --topic orders --shift-by -100 --execute
  ketch group delete billing
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "group", "list, describe (lag), reset and delete consumer groups",
                                 __doc__, EXAMPLES)

    action("list", "list groups", list_)
    a = action("describe", "state, members, committed offsets and lag", describe)
    a.add_argument("groups", nargs="+", metavar="GROUP")

    a = action("reset-offsets", "move a group's committed offsets (dry run unless --execute)", reset)
    a.add_argument("group", metavar="GROUP")
    which = a.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions; repeatable")
    which.add_argument("--all-topics", action="store_true",
                       help="every partition the group has offsets for")
    to = a.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time "
                    "(UTC unless a zone is given)")
    to.add_argument("--shift-by", type=int, metavar="N", help="move by N (negative: back)")
    to.add_argument("--to-offset", type=int, metavar="N")
    run_mode = a.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    run_mode.add_argument("--execute", action="store_true", help="apply the plan")

    a = action("delete", "delete groups (they must have no members)", delete)
    a.add_argument("groups", nargs="+", metavar="GROUP")


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        groups = admin.list_consumer_groups()
    rows = [{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type, "type": g.type}
            for g in sorted(groups, key=lambda g: g.group_id)]
    c.emit(args, rows, ["group", "state", "protocol_type"])
    return 0


def describe_view(admin, group_id: str, desc) -> dict:
    lags = admin.consumer_group_lag(group_id)
    owner = {tp: m for m in desc.members for tp in m.assignment}
    partitions = []
    for tp in sorted(set(lags) | set(owner)):
        lag = lags.get(tp)
        m = owner.get(tp)
        partitions.append({
            "topic": tp.topic, "partition": tp.partition,
            "committed_offset": None if lag is None else lag.committed,
            "log_start_offset": None if lag is None else lag.log_start_offset,
            "log_end_offset": None if lag is None else lag.log_end_offset,
            "lag": None if lag is None else lag.lag,
            "member_id": None if m is None else m.member_id,
            "client_id": None if m is None else m.client_id,
            "host": None if m is None else m.host,
        })
    return {
        "group": group_id, "state": desc.state, "protocol_type": desc.protocol_type,
        "protocol": desc.protocol, "coordinator": desc.coordinator,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "host": m.host,
                     "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment]}
                    for m in desc.members],
        "partitions": partitions,
        "total_lag": sum(p["lag"] or 0 for p in partitions),
    }


def describe(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        descs = admin.describe_consumer_groups(args.groups)
        views = []
        for g in args.groups:
            d = descs[g]
            if d.state == "Dead":
                raise c.CliError(f"group {g!r} does not exist")
            views.append(describe_view(admin, g, d))
    if args.output == "json":
        c.print_json(views)
        return 0
    for i, v in enumerate(views):
        if i:
            print()
        print(f"group {v['group']}  state {v['state']}  protocol {v['protocol'] or '-'}  "
              f"members {len(v['members'])}  coordinator {v['coordinator']}  "
              f"total lag {v['total_lag']}")
        c.print_table(["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER", "CLIENT", "HOST"],
                      [[p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"],
                        p["lag"], p["member_id"], p["client_id"], p["host"]]
                       for p in v["partitions"]])
    return 0


def _targets(args: argparse.Namespace):
    from clients.types import TopicPartition
    if args.all_topics:
        return None, None
    topics, parts = [], []
    for item in args.topic:
        name, sep, rest = item.partition(":")
        if not sep:
            topics.append(name)
            continue
        try:
            parts += [TopicPartition(name, int(p)) for p in rest.split(",") if p]
        except ValueError:
            raise c.CliError(f"--topic {item!r}: partitions are numbers, as orders:0,1") from None
    if topics and parts:
        raise c.CliError("give whole topics or topic:partitions, not both")
    return (topics or None), (parts or None)


def _spec(args: argparse.Namespace):
    from clients.admin import OffsetReset
    if args.to_earliest:
        return OffsetReset.to_earliest()
    if args.to_latest:
        return OffsetReset.to_latest()
    if args.to_datetime is not None:
        try:
            when = datetime.datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise c.CliError(f"--to-datetime {args.to_datetime!r}: use an ISO date-time like "
                             f"2026-01-01T12:00:00") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return OffsetReset.to_timestamp(int(when.timestamp() * 1000))
    if args.shift_by is not None:
        return OffsetReset.shift_by(args.shift_by)
    return OffsetReset.to_offset(args.to_offset)


def reset(args: argparse.Namespace) -> int:
    spec = _spec(args)
    topics, parts = _targets(args)
    with c.admin(args) as admin:
        if topics:
            admin.describe_topics(topics)    # an unknown topic is named, before anything
        before = admin.list_consumer_group_offsets(args.group)
        plan = admin.reset_consumer_group_offsets(args.group, spec, partitions=parts,
                                                  topics=topics, dry_run=not args.execute)
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "current_offset": before[tp].offset if tp in before else None,
             "new_offset": off} for tp, off in sorted(plan.items())]
    if args.output == "json":
        c.print_json({"group": args.group, "executed": bool(args.execute), "partitions": rows})
    else:
        c.print_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                      [[r["topic"], r["partition"], r["current_offset"], r["new_offset"]] for r in rows])
        if not args.execute:
            print("(dry run: nothing changed; add --execute to apply)", file=sys.stderr)
    return 0


def delete(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        admin.delete_consumer_groups(args.groups)
    c.emit(args, [{"group": g, "deleted": True} for g in args.groups])
    return 0
