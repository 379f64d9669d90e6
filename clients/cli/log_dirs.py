"""``ketch log-dirs describe|alter``: the log directories of brokers (JBOD), as
``kafka-log-dirs --describe`` shows them, and moving a replica between the log
directories of its broker (AlterReplicaLogDirs, KIP-113).

- ``describe [--broker-list 1,2] [--topic-list a,b]`` lists, per broker, every log dir
  (an offline one with its error), the logs in it with their size and offset lag, and the
  *future* logs of moves under way (``FUTURE``: the copy's lag behind the current log).
  ``--output json`` prints Kafka's tool format (``{"version":1,"brokers":[...]}``).
- ``alter --topic T --partition P [--partition P2] --broker B --log-dir PATH`` starts moving
  those replicas of broker B to its log dir PATH; the broker copies each log in the
  background and swaps it in once caught up (``describe`` shows the progress). Exit code 1
  if a replica was refused (LOG_DIR_NOT_FOUND: not a log dir of that broker;
  KAFKA_STORAGE_ERROR: the dir is offline; REPLICA_NOT_AVAILABLE: the broker has no such
  replica yet, and creates it in PATH if it gets one).
"""
from __future__ import annotations

import argparse
from typing import Any

from clients.cli import _common as c
from clients.errors import ErrorCode, KafkaApiError
from clients.types import TopicPartitionReplica

EXAMPLES = """examples:
  ketch log-dirs describe --dir ./ketch-data
  ketch log-dirs describe --broker-list 1 --topic-list orders --output json
  ketch log-dirs alter --topic orders --partition 0 --broker 1 --log-dir /var/ketch/broker-1-b
"""


def _ids(text: str | None, what: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise c.CliError(f"{what} takes broker ids like 1,2,3, not {text!r}") from None


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def describe(args: argparse.Namespace) -> int:
    topics = None if not args.topic_list else {t.strip() for t in args.topic_list.split(",") if t.strip()}
    with c.admin(args) as admin:
        brokers = _ids(args.broker_list, "--broker-list") or sorted(
            b.node_id for b in admin.describe_cluster().brokers)
        described = admin.describe_broker_log_dirs(brokers)
    view: dict[str, Any] = {"version": 1, "brokers": []}
    rows = []
    for broker in sorted(described):
        dirs = []
        for d in described[broker]:
            error = None if d.error_code == ErrorCode.NONE else _code_name(d.error_code)
            partitions = [{"partition": str(tp), "size": info.size_bytes, "offsetLag": info.offset_lag,
                           "isFuture": info.is_future}
                          for tp, info in d.replicas if topics is None or tp.topic in topics]
            dirs.append({"logDir": d.log_dir, "error": error, "partitions": partitions,
                         "totalBytes": d.total_bytes, "usableBytes": d.usable_bytes})
            if error is not None or not partitions:
                rows.append({"broker": broker, "log_dir": d.log_dir, "partition": "",
                             "size": "", "offset_lag": "", "future": "", "error": error or ""})
            for p in partitions:
                rows.append({"broker": broker, "log_dir": d.log_dir, "partition": p["partition"],
                             "size": p["size"], "offset_lag": p["offsetLag"],
                             "future": "yes" if p["isFuture"] else "", "error": ""})
        view["brokers"].append({"broker": broker, "logDirs": dirs})
    c.emit(args, view, ["broker", "log_dir", "partition", "size", "offset_lag", "future", "error"], rows)
    return 0


def alter(args: argparse.Namespace) -> int:
    if not args.partition or any(p < 0 for p in args.partition):
        raise c.CliError("name the partitions with --partition P (0 or more, repeatable)")
    replicas = {TopicPartitionReplica(args.topic, p, args.broker): args.log_dir
                for p in dict.fromkeys(args.partition)}
    with c.admin(args) as admin:
        try:
            admin.alter_replica_log_dirs(replicas)
            outcomes: dict[TopicPartitionReplica, Any] = {r: None for r in replicas}
        except KafkaApiError as e:
            outcomes = getattr(e, "results", None) or {r: e for r in replicas}
    view = [{"topic": r.topic, "partition": r.partition, "broker": r.broker_id, "log_dir": replicas[r],
             "error": "" if err is None else _code_name(getattr(err, "error_code", -1))}
            for r, err in sorted(outcomes.items())]
    c.emit(args, view, ["topic", "partition", "broker", "log_dir", "error"])
    return 1 if any(v["error"] for v in view) else 0


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "log-dirs", "describe brokers' log dirs; move replicas between them",
                                 __doc__, EXAMPLES)
    d = action("describe", "every log dir of the brokers, with its logs (kafka-log-dirs --describe)",
               describe)
    d.add_argument("--broker-list", metavar="IDS", help="broker ids, e.g. 1,2 (default: every broker)")
    d.add_argument("--topic-list", metavar="TOPICS", help="only these topics' logs, e.g. a,b")
    a = action("alter", "move replicas of a broker to another of its log dirs (AlterReplicaLogDirs)",
               alter)
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, action="append", default=[], help="repeatable")
    a.add_argument("--broker", type=int, required=True, help="the broker whose replicas move")
    a.add_argument("--log-dir", required=True, metavar="PATH", help="one of that broker's log.dirs")
