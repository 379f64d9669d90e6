"""``ketch transactions list|describe|describe-producers|abort`` (kafka-transactions.sh).

``list`` shows every transactional id the brokers' transaction coordinators hold, with its
producer id and state; ``describe`` one id's state on its coordinator (producer epoch,
timeout, when the open transaction started and how long it has run, its partitions);
``describe-producers`` the producers a partition's leader remembers, with the first offset
of each one's open transaction. ``abort`` ends a hanging transaction on one partition (its
coordinator forgot it, so the last stable offset is stuck): the leader writes an ABORT
marker; name the transaction by ``--start-offset`` (from ``describe-producers``) or by
``--producer-id/--producer-epoch/--coordinator-epoch``, as Kafka's tool does.
"""
from __future__ import annotations

import argparse
import time

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch transactions list
  ketch transactions describe payments-tx --output json
  ketch transactions describe-producers orders 0
  ketch transactions abort orders 0 --start-offset 1234
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "transactions", "list and describe transactions, "
                                 "describe producers, abort a hanging transaction",
                                 __doc__, EXAMPLES)
    a = action("list", "transactional ids of every coordinator", list_)
    a.add_argument("--state", action="append", metavar="STATE",
                   help="only these states (Ongoing, PrepareCommit, CompleteAbort, ...); repeatable")
    a.add_argument("--producer-id", action="append", type=int, metavar="ID",
                   help="only these producer ids; repeatable")
    a = action("describe", "one transactional id on its coordinator", describe)
    a.add_argument("transactional_id", metavar="TRANSACTIONAL_ID")
    a = action("describe-producers", "the producers a partition's leader remembers",
               describe_producers)
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("partition", type=int, metavar="PARTITION")
    a = action("abort", "write an ABORT marker for a hanging transaction on one partition", abort)
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("partition", type=int, metavar="PARTITION")
    a.add_argument("--start-offset", type=int, metavar="OFFSET",
                   help="the first offset of the transaction (describe-producers shows it)")
    a.add_argument("--producer-id", type=int, metavar="ID")
    a.add_argument("--producer-epoch", type=int, metavar="EPOCH")
    a.add_argument("--coordinator-epoch", type=int, metavar="EPOCH")


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        listed = admin.list_transactions(states=args.state, producer_ids=args.producer_id)
    rows = [{"transactional_id": t.transactional_id, "coordinator": t.coordinator_id,
             "producer_id": t.producer_id, "state": t.state} for t in listed]
    c.emit(args, rows, ["transactional_id", "coordinator", "producer_id", "state"])
    return 0


def describe(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    now_ms = int(time.time() * 1000)
    row = {"coordinator": d.coordinator_id, "transactional_id": args.transactional_id,
           "producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "state": d.state,
           "timeout_ms": d.transaction_timeout_ms,
           "start_time_ms": None if d.transaction_start_time_ms < 0 else d.transaction_start_time_ms,
           "duration_ms": None if d.transaction_start_time_ms < 0
           else now_ms - d.transaction_start_time_ms,
           "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions)}
    if args.output == "json":
        c.print_json(row)
        return 0
    c.emit(args, [row], rows=[{**row, "partitions": ",".join(row["partitions"]) or "-"}],
           headers=list(row))
    return 0


def _producers(args: argparse.Namespace, admin):
    from clients.types import TopicPartition
    tp = TopicPartition(args.topic, args.partition)
    return tp, admin.describe_producers([tp])[tp]


def describe_producers(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        _, producers = _producers(args, admin)
    rows = [{"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
             "coordinator_epoch": p.coordinator_epoch, "last_sequence": p.last_sequence,
             "last_timestamp_ms": p.last_timestamp_ms,
             "current_transaction_start_offset": p.current_transaction_start_offset}
            for p in producers]
    c.emit(args, rows, ["producer_id", "producer_epoch", "coordinator_epoch", "last_sequence",
                        "last_timestamp_ms", "current_transaction_start_offset"])
    return 0


def abort(args: argparse.Namespace) -> int:
    from clients.admin import AbortTransactionSpec
    explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if (args.start_offset is None) == all(v is None for v in explicit):
        raise c.CliError("give --start-offset, or --producer-id, --producer-epoch and "
                         "--coordinator-epoch")
    with c.admin(args) as admin:
        if args.start_offset is not None:
            tp, producers = _producers(args, admin)
            found = [p for p in producers if p.current_transaction_start_offset == args.start_offset]
            if not found:
                raise c.CliError(f"no open transaction starts at offset {args.start_offset} "
                                 f"of {args.topic}-{args.partition}")
            p = found[0]
            spec = AbortTransactionSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch)
        else:
            if any(v is None for v in explicit):
                raise c.CliError("--producer-id, --producer-epoch and --coordinator-epoch go together")
            from clients.types import TopicPartition
            spec = AbortTransactionSpec(TopicPartition(args.topic, args.partition),
                                        *explicit)  # type: ignore[arg-type]
        admin.abort_transaction(spec)
    c.emit(args, {"topic": args.topic, "partition": args.partition,
                  "producer_id": spec.producer_id, "producer_epoch": spec.producer_epoch,
                  "aborted": True}, rows=[{"topic": args.topic, "partition": args.partition,
                                           "producer_id": spec.producer_id, "aborted": True}])
    return 0
