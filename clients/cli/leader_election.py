"""``ketch leader-election``: move partition leadership, as ``kafka-leader-election`` does.

``--preferred`` makes each partition's first replica its leader again where it is in
sync; ``--unclean`` gives a partition without a leader one of its live replicas even
outside the ISR (records may be lost: Kafka's ``unclean.leader.election.enable`` for one
partition, once). Partitions are named with ``--topic T --partition P`` (repeatable as
``--partition``) or ``--all``.

The controller decides each partition (ElectLeaders, API 43): done, not needed (the
right leader leads already), or refused with Kafka's reason (PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, unknown partition). Exit code 1 if any was refused.
"""
from __future__ import annotations

import argparse
import asyncio
from typing import Any

from clients.cli import _admin_cli as cli
from clients._core.reassignment import ElectionType
from clients.errors import ErrorCode, KafkaApiError
from clients.types import TopicPartition

EXAMPLES = """examples:
  ketch leader-election --preferred --all --dir ./ketch-data
  ketch leader-election --preferred --topic orders --partition 0 --partition 1
  ketch leader-election --unclean --topic orders --partition 3 --output json
"""


def outcome_view(election: ElectionType,
                 results: dict[TopicPartition, KafkaApiError | None]) -> dict[str, Any]:
    elected, not_needed, failed = [], [], []
    for tp, error in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        item = {"topic": tp.topic, "partition": tp.partition}
        if error is None:
            elected.append(item)
        elif error.error_code == ErrorCode.ELECTION_NOT_NEEDED:
            not_needed.append(item)
        else:
            failed.append({**item, "error": ErrorCode(error.error_code).name
                           if error.error_code in ErrorCode._value2member_map_ else str(error.error_code),
                           "message": error.message})
    return {"election_type": election.name.lower(), "elected": elected,
            "not_needed": not_needed, "failed": failed}


async def _elect(args: argparse.Namespace, election: ElectionType,
                 partitions: list[TopicPartition] | None) -> dict[TopicPartition, Any]:
    async with cli.quorum_admin(args) as admin:
        return await admin.elect_leaders(election, partitions)


def run(args: argparse.Namespace) -> int:
    election = ElectionType.UNCLEAN if args.unclean else ElectionType.PREFERRED
    if args.all:
        if args.topic or args.partition:
            raise cli.CliError("--all elects every partition: leave out --topic and --partition")
        partitions = None
    else:
        if not args.topic or not args.partition:
            raise cli.CliError("name the partitions with --topic T --partition P, or use --all")
        if any(p < 0 for p in args.partition):
            raise cli.CliError("--partition must be 0 or more")
        partitions = [TopicPartition(args.topic, p) for p in dict.fromkeys(args.partition)]
    view = outcome_view(election, asyncio.run(_elect(args, election, partitions)))
    if args.output == "json":
        cli.print_json(view)
    else:
        def names(items: list[dict[str, Any]]) -> str:
            return ", ".join(f"{i['topic']}-{i['partition']}" for i in items)
        if view["elected"]:
            print(f"Successfully completed leader election ({view['election_type']}) for "
                  f"partitions {names(view['elected'])}")
        if view["not_needed"]:
            print(f"Valid replica already elected for partitions {names(view['not_needed'])}")
        if not any(view[k] for k in ("elected", "not_needed", "failed")):
            print("No partition needed an election")
        for f in view["failed"]:
            print(f"Election failed for partition {f['topic']}-{f['partition']}: "
                  f"{f['error']}: {f['message']}")
    return 1 if view["failed"] else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leader-election", help="preferred or unclean leader election",
                       description=__doc__.split("\n\n")[0], epilog=EXAMPLES)
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--preferred", action="store_true",
                      help="the first replica leads again where it is in sync")
    kind.add_argument("--unclean", action="store_true",
                      help="a leaderless partition gets a live replica, even outside the ISR")
    p.add_argument("--topic", help="the topic of the partitions to elect")
    p.add_argument("--partition", type=int, action="append", default=[],
                   help="a partition of --topic (repeatable)")
    p.add_argument("--all", action="store_true", help="every partition of every topic")
    cli.add_connection_args(p, controllers=True)
    p.set_defaults(run=cli.guarded(run))
