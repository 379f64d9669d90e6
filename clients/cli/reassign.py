"""``ketch reassign generate|execute|verify|cancel``: move partition replicas between
brokers, with ``kafka-reassign-partitions``' JSON plans (clients/_core/reassignment.py).

- ``generate --topics-to-move-json-file F --broker-list 1,2,3`` prints the current
  assignment of those topics and a proposed one over the given brokers; nothing changes.
- ``execute --reassignment-json-file PLAN [--throttle BYTES_PER_S]`` starts the moves
  (AlterPartitionReassignments on the controller) after printing the current assignment
  (keep it: it is the plan to roll back with). A partition already moving is refused
  unless ``--additional``. ``--throttle`` sets Kafka's replication throttle first:
  ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` on every
  broker involved, and the topics' ``leader.replication.throttled.replicas`` (the current
  replicas) / ``follower.replication.throttled.replicas`` (the new ones), through
  IncrementalAlterConfigs.
  A plan's ``log_dirs`` may name, per replica, an absolute log directory of its broker
  (JBOD) instead of ``"any"``: those replicas are moved there first (AlterReplicaLogDirs;
  a replica the broker does not have yet is created there when the reassignment adds it).
- ``verify --reassignment-json-file PLAN`` says, per partition, whether the move is
  complete, in progress or failed, and the same for each replica the plan puts in a log
  directory; once all are complete it removes the throttle configs (unless
  ``--preserve-throttles``). Exit code 1 if a partition or a replica's move failed.
- ``cancel --reassignment-json-file PLAN`` stops the moves still in progress and returns
  those partitions to their original replicas.

Each step needs the brokers (topic metadata, configs); the controller calls go through
them, or straight to the controllers with ``--bootstrap-controller`` (or ``--dir``).
"""
from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any, Mapping, Sequence

from clients.cli import _admin_cli as cli
from clients._core.admin import AlterConfigOp, AlterConfigOpType, ConfigResource
from clients._core.reassignment import (
    ReassignmentState, format_plan, log_dir_status, parse_plan, parse_topics_to_move,
    plan_log_dirs, propose_assignment, verify_status,
)
from clients.aio.admin import Admin
from clients.errors import ErrorCode, KafkaApiError
from clients.types import TopicPartition, TopicPartitionReplica

EXAMPLES = """examples:
  echo '{"version":1,"topics":[{"topic":"orders"}]}' > move.json
  ketch reassign generate --topics-to-move-json-file move.json --broker-list 2,3 --dir ./ketch-data
  ketch reassign execute --reassignment-json-file plan.json --throttle 10000000 --dir ./ketch-data
  ketch reassign verify --reassignment-json-file plan.json --dir ./ketch-data
"""

BROKER_THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLED_REPLICAS = ("leader.replication.throttled.replicas",
                            "follower.replication.throttled.replicas")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise cli.CliError(f"cannot read {path}: {e.strerror or e}") from None


async def current_assignment(admin: Admin, topics: Sequence[str]
                             ) -> dict[TopicPartition, tuple[int, ...]]:
    described = await admin.describe_topics(list(dict.fromkeys(topics)))
    return {TopicPartition(name, p.partition): tuple(p.replicas)
            for name, d in described.items() for p in d.partitions}


def throttle_configs(plan: Mapping[TopicPartition, Sequence[int]],
                     current: Mapping[TopicPartition, Sequence[int]]
                     ) -> tuple[set[int], dict[str, dict[str, str]]]:
    """(brokers involved, topic -> throttled-replicas configs) for the moving partitions,
    as kafka-reassign-partitions computes them: leaders throttle what the current
    replicas send, followers what the new replicas fetch."""
    brokers: set[int] = set()
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for tp, target in sorted(plan.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        cur = tuple(current.get(tp, ()))
        if tuple(target) == cur:
            continue
        brokers |= set(cur) | set(target)
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in cur)
        follower.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in target if b not in cur)
    topics = {t: {TOPIC_THROTTLED_REPLICAS[0]: ",".join(leader[t]),
                  TOPIC_THROTTLED_REPLICAS[1]: ",".join(follower.get(t, []))} for t in leader}
    return brokers, topics


# ---------------------------------------------------------------- generate

async def _generate(args: argparse.Namespace) -> dict[str, Any]:
    topics = parse_topics_to_move(_read(args.topics_to_move_json_file))
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise cli.CliError(f"--broker-list takes broker ids like 1,2,3, not {args.broker_list!r}") from None
    async with cli.broker_admin(args) as admin:
        known = {b.node_id for b in (await admin.describe_cluster()).brokers}
        unknown = sorted(set(brokers) - known)
        if unknown:
            raise cli.CliError(f"--broker-list names broker(s) {unknown} that are not in the "
                               f"cluster (brokers: {sorted(known)})")
        current = await current_assignment(admin, topics)
    rng = random.Random(args.seed) if args.seed is not None else random.Random()
    proposed = propose_assignment(current, brokers, rng)
    return {"current": current, "proposed": proposed}


def run_generate(args: argparse.Namespace) -> int:
    out = asyncio.run(_generate(args))
    if args.output == "json":
        import json
        cli.print_json({"current": json.loads(format_plan(out["current"])),
                        "proposed": json.loads(format_plan(out["proposed"]))})
    else:
        print("Current partition replica assignment")
        print(format_plan(out["current"]))
        print()
        print("Proposed partition reassignment configuration")
        print(format_plan(out["proposed"]))
    return 0


# ---------------------------------------------------------------- execute

async def _move_log_dirs(admin: Admin, log_dirs: dict[TopicPartitionReplica, str]) -> None:
    """AlterReplicaLogDirs for the plan's placed replicas, before the reassignment starts.
    REPLICA_NOT_AVAILABLE is expected for a replica the reassignment will add: its broker
    remembers the directory and creates the replica there (Kafka's tool retries instead)."""
    if not log_dirs:
        return
    try:
        await admin.alter_replica_log_dirs(log_dirs)
    except KafkaApiError as e:
        outcomes = getattr(e, "results", None) or {r: e for r in log_dirs}
        refused = [f"{r}: {err}" for r, err in outcomes.items()
                   if err is not None and getattr(err, "error_code", None) != ErrorCode.REPLICA_NOT_AVAILABLE]
        if refused:
            raise cli.CliError("log dir moves refused: " + "; ".join(refused)) from None


async def _execute(args: argparse.Namespace) -> dict[str, Any]:
    text = _read(args.reassignment_json_file)
    plan, log_dirs = parse_plan(text), plan_log_dirs(text)
    if args.throttle is not None and args.throttle < 0:
        raise cli.CliError("--throttle takes bytes per second, 0 or more")
    async with cli.broker_admin(args) as admin, cli.quorum_admin(args) as controller:
        current = await current_assignment(admin, sorted({tp.topic for tp in plan}))
        missing = sorted(f"{tp.topic}-{tp.partition}" for tp in plan if tp not in current)
        if missing:
            raise cli.CliError(f"the plan names partitions that do not exist: {', '.join(missing)}")
        known = {b.node_id for b in (await admin.describe_cluster()).brokers}
        unknown = sorted({b for r in plan.values() for b in r} - known)
        if unknown:
            raise cli.CliError(f"the plan names broker(s) {unknown} that are not in the "
                               f"cluster (brokers: {sorted(known)})")
        ongoing = await controller.list_partition_reassignments(list(plan))
        if ongoing and not args.additional:
            moving = ", ".join(sorted(f"{tp.topic}-{tp.partition}" for tp in ongoing))
            raise cli.CliError(f"partitions {moving} are being reassigned already: wait "
                               f"(verify), cancel, or pass --additional")
        throttle: dict[str, Any] | None = None
        if args.throttle is not None:
            brokers, topics = throttle_configs(plan, current)
            rate = str(args.throttle)
            changes: dict[ConfigResource, list[AlterConfigOp]] = {
                ConfigResource.broker(b): [AlterConfigOp(k, rate) for k in BROKER_THROTTLE_RATES]
                for b in sorted(brokers)}
            for topic, configs in topics.items():
                changes[ConfigResource.topic(topic)] = [
                    AlterConfigOp(k, v) if v else AlterConfigOp(k, None, AlterConfigOpType.DELETE)
                    for k, v in configs.items()]
            if changes:
                await admin.incremental_alter_configs(changes)
            throttle = {"rate": args.throttle, "brokers": sorted(brokers), "topics": topics}
        await _move_log_dirs(admin, log_dirs)
        await controller.alter_partition_reassignments(dict(plan))
    return {"current": {tp: current[tp] for tp in plan}, "started": sorted(plan, key=lambda tp: (tp.topic, tp.partition)),
            "throttle": throttle}


def run_execute(args: argparse.Namespace) -> int:
    out = asyncio.run(_execute(args))
    started = [f"{tp.topic}-{tp.partition}" for tp in out["started"]]
    if args.output == "json":
        import json
        cli.print_json({"current": json.loads(format_plan(out["current"])),
                        "started": [{"topic": tp.topic, "partition": tp.partition} for tp in out["started"]],
                        "throttle": out["throttle"]})
        return 0
    print("Current partition replica assignment")
    print()
    print(format_plan(out["current"]))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if out["throttle"] is not None:
        t = out["throttle"]
        print(f"Warning: You must run --verify periodically, until the reassignment completes, "
              f"to ensure the throttle is removed.")
        print(f"The inter-broker throttle limit was set to {t['rate']} B/s on brokers "
              f"{','.join(map(str, t['brokers']))}")
    print(f"Successfully started partition reassignments for {', '.join(started)}")
    return 0


# ---------------------------------------------------------------- verify, cancel

async def _verify(args: argparse.Namespace) -> dict[str, Any]:
    text = _read(args.reassignment_json_file)
    plan, log_dirs = parse_plan(text), plan_log_dirs(text)
    async with cli.broker_admin(args) as admin, cli.quorum_admin(args) as controller:
        ongoing = await controller.list_partition_reassignments(list(plan))
        current = await current_assignment(admin, sorted({tp.topic for tp in plan}))
        states = verify_status(plan, current, ongoing)
        dir_states: dict[TopicPartitionReplica, ReassignmentState] = {}
        if log_dirs:
            where = await admin.describe_replica_log_dirs(list(log_dirs))
            dir_states = log_dir_status(
                log_dirs, {r: i.current_replica_log_dir for r, i in where.items()},
                {r: i.future_replica_log_dir for r, i in where.items()},
                [tp for tp, s in states.items() if s is not ReassignmentState.COMPLETE])
        cleared: dict[str, Any] | None = None
        if (all(s is ReassignmentState.COMPLETE for s in (*states.values(), *dir_states.values()))
                and not args.preserve_throttles):
            # Kafka's verify clears the throttle of every broker and of the plan's topics.
            brokers = sorted(b.node_id for b in (await admin.describe_cluster()).brokers)
            topics = sorted({tp.topic for tp in plan})
            changes = {ConfigResource.broker(b): [AlterConfigOp(k, None, AlterConfigOpType.DELETE)
                                                  for k in BROKER_THROTTLE_RATES] for b in brokers}
            changes.update({ConfigResource.topic(t): [AlterConfigOp(k, None, AlterConfigOpType.DELETE)
                                                      for k in TOPIC_THROTTLED_REPLICAS] for t in topics})
            await admin.incremental_alter_configs(changes)
            cleared = {"brokers": brokers, "topics": topics}
    return {"states": states, "dir_states": dir_states, "throttle_cleared": cleared}


def run_verify(args: argparse.Namespace) -> int:
    out = asyncio.run(_verify(args))
    states = sorted(out["states"].items(), key=lambda kv: (kv[0].topic, kv[0].partition))
    dir_states = sorted(out["dir_states"].items())
    every = [s for _, s in (*states, *dir_states)]
    if args.output == "json":
        cli.print_json({"partitions": [{"topic": tp.topic, "partition": tp.partition,
                                        "state": s.value} for tp, s in states],
                        "replicas": [{"topic": r.topic, "partition": r.partition,
                                      "broker": r.broker_id, "state": s.value} for r, s in dir_states],
                        "complete": all(s is ReassignmentState.COMPLETE for s in every),
                        "throttle_cleared": out["throttle_cleared"]})
    else:
        print("Status of partition reassignment:")
        words = {ReassignmentState.COMPLETE: "is completed.",
                 ReassignmentState.IN_PROGRESS: "is still in progress.",
                 ReassignmentState.FAILED: "failed (not moving, and not at the plan's replicas)."}
        for tp, s in states:
            print(f"Reassignment of partition {tp.topic}-{tp.partition} {words[s]}")
        dir_words = {**words, ReassignmentState.FAILED: "failed (its log is elsewhere, not moving)."}
        for r, s in dir_states:
            print(f"Reassignment of replica {r.topic}-{r.partition} on broker {r.broker_id} "
                  f"to its log dir {dir_words[s]}")
        cleared = out["throttle_cleared"]
        if cleared is not None:
            print(f"Clearing broker-level throttles on brokers {','.join(map(str, cleared['brokers']))}")
            for t in cleared["topics"]:
                print(f"Clearing topic-level throttles on topic {t}")
    return 1 if any(s is ReassignmentState.FAILED for s in every) else 0


async def _cancel(args: argparse.Namespace) -> list[TopicPartition]:
    plan = parse_plan(_read(args.reassignment_json_file))
    async with cli.quorum_admin(args) as controller:
        ongoing = await controller.list_partition_reassignments(list(plan))
        if ongoing:
            await controller.alter_partition_reassignments({tp: None for tp in ongoing})
    return sorted(ongoing, key=lambda tp: (tp.topic, tp.partition))


def run_cancel(args: argparse.Namespace) -> int:
    cancelled = asyncio.run(_cancel(args))
    if args.output == "json":
        cli.print_json({"cancelled": [{"topic": tp.topic, "partition": tp.partition}
                                      for tp in cancelled]})
    elif cancelled:
        print("Successfully cancelled partition reassignments for "
              + ", ".join(f"{tp.topic}-{tp.partition}" for tp in cancelled))
    else:
        print("None of the plan's partitions is being reassigned")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reassign", help="move partition replicas between brokers (JSON plans)",
                       description=__doc__.split("\n\n")[0], epilog=EXAMPLES)
    verbs = p.add_subparsers(dest="reassign_command", required=True)

    def verb(name: str, fn: Any, text: str) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=text, description=text, epilog=EXAMPLES)
        cli.add_connection_args(v, controllers=True)
        v.set_defaults(run=cli.guarded(fn))
        return v

    g = verb("generate", run_generate, "propose a plan moving topics onto brokers (changes nothing)")
    g.add_argument("--topics-to-move-json-file", required=True, metavar="FILE",
                   help='{"version":1,"topics":[{"topic":"name"}]}')
    g.add_argument("--broker-list", required=True, metavar="IDS", help="broker ids, e.g. 1,2,3")
    g.add_argument("--seed", type=int, help="seed of the placement (the same seed, the same plan)")
    e = verb("execute", run_execute, "start the moves of a plan")
    e.add_argument("--reassignment-json-file", required=True, metavar="PLAN")
    e.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                   help="replication throttle while moving (Kafka's throttled.rate configs)")
    e.add_argument("--additional", action="store_true",
                   help="allow moving partitions that are being reassigned already")
    v = verb("verify", run_verify, "say whether a plan's moves are done; clear the throttle when they are")
    v.add_argument("--reassignment-json-file", required=True, metavar="PLAN")
    v.add_argument("--preserve-throttles", action="store_true",
                   help="leave the throttle configs in place")
    c = verb("cancel", run_cancel, "stop a plan's moves still in progress (back to the original replicas)")
    c.add_argument("--reassignment-json-file", required=True, metavar="PLAN")
