"""Partition reassignment plans and leader elections, as values (pure: no I/O).

Theory of operation
-------------------
``kafka-reassign-partitions`` works on two JSON documents, and so does ``ketch reassign``:

- *topics to move* (``--topics-to-move-json-file``)::

      {"version": 1, "topics": [{"topic": "orders"}]}

- a *plan* (``--reassignment-json-file``; ``generate`` prints the current assignment and
  a proposed one in this form, ``execute`` and ``verify`` read it)::

      {"version": 1, "partitions": [
          {"topic": "orders", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}

``parse_plan`` checks a plan the way Kafka's tool does before anything is sent (version 1,
no partition twice, replicas non-empty and without duplicates, ``log_dirs`` absent or one
entry per replica, each ``"any"`` or an absolute path) and raises ``PlanError`` with one
readable line otherwise. ``plan_log_dirs`` gives the replicas a plan places in a named log
directory of their broker (JBOD): ``execute`` moves them there with AlterReplicaLogDirs,
``verify`` checks where their logs are (``log_dir_status``).

``propose_assignment`` is the ``generate`` step: for each partition of the chosen topics,
replicas drawn from the given brokers, keeping the replication factor, spreading leaders
and replicas round-robin from a start that depends on the partition (Kafka's
``AdminUtils.assignReplicasToBrokers`` without racks: a random start index and a shift
per wrap-around, here from a seeded ``random.Random`` so a plan can be reproduced).

``verify_status`` compares a plan with the cluster: per partition, ``complete`` (the
replicas are the target and no reassignment is running), ``in_progress`` (a reassignment
is listed for it), or ``failed`` (neither: cancelled, or overridden by another plan).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence

from clients.types import TopicPartition, TopicPartitionReplica

__all__ = [
    "ElectionType", "PartitionReassignment", "PlanError", "ReassignmentState", "format_plan",
    "log_dir_status", "parse_plan", "parse_topics_to_move", "plan_decommission", "plan_log_dirs",
    "propose_assignment", "verify_status",
]

PLAN_VERSION = 1
ANY_LOG_DIR = "any"


class ElectionType(Enum):
    PREFERRED = 0       # Kafka's ElectionType.PREFERRED
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (ListPartitionReassignments)."""
    replicas: tuple[int, ...]               # target first, then the replicas being removed
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


class ReassignmentState(Enum):
    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"
    FAILED = "failed"


class PlanError(ValueError):
    """A plan or topics file that cannot be used; the message is one readable line."""


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"{what} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(b, int) and not isinstance(b, bool)
                                              for b in value):
        raise PlanError(f"{what} must be a list of broker ids")
    return tuple(value)


def parse_plan(text: str) -> dict[TopicPartition, tuple[int, ...]]:
    return _parse_plan(text)[0]


def plan_log_dirs(text: str) -> dict[TopicPartitionReplica, str]:
    """The replicas a (valid) plan puts in a named log directory, with that directory."""
    return _parse_plan(text)[1]


def _parse_plan(text: str) -> tuple[dict[TopicPartition, tuple[int, ...]],
                                    dict[TopicPartitionReplica, str]]:
    data = _load(text, "the reassignment plan")
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise PlanError('the reassignment plan must be {"version": 1, "partitions": [...]}')
    if data.get("version", PLAN_VERSION) != PLAN_VERSION:
        raise PlanError(f"unsupported plan version {data.get('version')!r} (only 1 is known)")
    plan: dict[TopicPartition, tuple[int, ...]] = {}
    log_dirs: dict[TopicPartitionReplica, str] = {}
    for i, entry in enumerate(data["partitions"]):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise PlanError(f"{where} must be an object with topic, partition and replicas")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not topic:
            raise PlanError(f"{where}: 'topic' must be a non-empty string")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise PlanError(f"{where}: 'partition' must be a non-negative integer")
        where = f"{topic}-{partition}"
        replicas = _int_list(entry.get("replicas"), f"{where}: 'replicas'")
        if not replicas:
            raise PlanError(f"{where}: the replica list is empty")
        if len(set(replicas)) != len(replicas):
            raise PlanError(f"{where}: the replica list {list(replicas)} names a broker twice")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise PlanError(f"{where}: 'log_dirs' must have one entry per replica")
            if not all(isinstance(d, str) and (d == ANY_LOG_DIR or d.startswith("/")) for d in dirs):
                raise PlanError(f"{where}: each of 'log_dirs' must be \"any\" or an absolute path")
            log_dirs.update({TopicPartitionReplica(topic, partition, b): d
                             for b, d in zip(replicas, dirs) if d != ANY_LOG_DIR})
        tp = TopicPartition(topic, partition)
        if tp in plan:
            raise PlanError(f"{where} appears twice in the plan")
        plan[tp] = replicas
    if not plan:
        raise PlanError("the reassignment plan names no partition")
    return plan, log_dirs


def log_dir_status(wanted: Mapping[TopicPartitionReplica, str],
                   current_dirs: Mapping[TopicPartitionReplica, str | None],
                   future_dirs: Mapping[TopicPartitionReplica, str | None],
                   moving: Iterable[TopicPartition]) -> dict[TopicPartitionReplica, ReassignmentState]:
    """Per replica the plan places in a log dir: ``complete`` (its log is there and no move
    is under way), ``in_progress`` (a future log is being copied there, or its partition
    is still being reassigned, so the broker creates the replica there when it gets it),
    or ``failed`` (neither: the log is elsewhere and nothing moves it)."""
    moving = set(moving)
    out = {}
    for r, target in wanted.items():
        if current_dirs.get(r) == target and future_dirs.get(r) is None:
            out[r] = ReassignmentState.COMPLETE
        elif future_dirs.get(r) == target or TopicPartition(r.topic, r.partition) in moving:
            out[r] = ReassignmentState.IN_PROGRESS
        else:
            out[r] = ReassignmentState.FAILED
    return out


def format_plan(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """The plan document for ``assignment``, one line as Kafka's tool prints it."""
    entries = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r),
                "log_dirs": [ANY_LOG_DIR] * len(r)}
               for tp, r in sorted(assignment.items(), key=lambda kv: (kv[0].topic, kv[0].partition))]
    return json.dumps({"version": PLAN_VERSION, "partitions": entries}, separators=(",", ":"))


def parse_topics_to_move(text: str) -> list[str]:
    data = _load(text, "the topics-to-move file")
    topics = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(topics, list) or not topics:
        raise PlanError('the topics-to-move file must be {"version": 1, "topics": [{"topic": "name"}, ...]}')
    names = []
    for i, t in enumerate(topics):
        name = t.get("topic") if isinstance(t, dict) else None
        if not isinstance(name, str) or not name:
            raise PlanError(f"topics[{i}]: 'topic' must be a non-empty string")
        names.append(name)
    return list(dict.fromkeys(names))


def propose_assignment(current: Mapping[TopicPartition, Sequence[int]], brokers: Iterable[int],
                       rng: random.Random) -> dict[TopicPartition, tuple[int, ...]]:
    """A new assignment of ``current``'s partitions over ``brokers`` (module docstring)."""
    ids = sorted(set(brokers))
    if not ids:
        raise PlanError("no brokers to assign replicas to")
    out: dict[TopicPartition, tuple[int, ...]] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in current:
        by_topic.setdefault(tp.topic, []).append(tp)
    n = len(ids)
    for topic in sorted(by_topic):
        tps = sorted(by_topic[topic], key=lambda tp: tp.partition)
        rf = len(current[tps[0]])
        if rf > n:
            raise PlanError(f"topic {topic!r} has replication factor {rf}, more than the "
                            f"{n} broker(s) given ({','.join(map(str, ids))})")
        start = rng.randrange(n)
        shift = rng.randrange(n)
        for tp in tps:
            p = tp.partition
            if p > 0 and p % n == 0:
                shift += 1
            first = (p + start) % n
            replicas = [ids[first]]
            for j in range(rf - 1):
                # Kafka's replicaIndex: followers at a shift from the leader, never on it.
                replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n] if n > 1 else ids[0])
            out[tp] = tuple(replicas)
    return out


def plan_decommission(current: Mapping[TopicPartition, Sequence[int]], broker_id: int,
                      brokers: Iterable[int]) -> dict[TopicPartition, tuple[int, ...]]:
    """Move every replica off ``broker_id`` (decommissioning it): each such replica goes,
    in its place in the replica list (a preferred leader is replaced by a preferred
    leader), to the broker of ``brokers`` that holds no replica of the partition and the
    fewest replicas so far, the lower id on a tie. Partitions without a replica on the
    broker are left out of the plan."""
    targets = sorted(set(brokers) - {broker_id})
    load = {b: 0 for b in targets}
    for replicas in current.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in sorted(current):
        replicas = tuple(current[tp])
        if broker_id not in replicas:
            continue
        candidates = [b for b in targets if b not in replicas]
        if not candidates:
            raise PlanError(f"{tp.topic}-{tp.partition} has replicas on {list(replicas)}: no other "
                            f"broker is left to take broker {broker_id}'s replica")
        chosen = min(candidates, key=lambda b: (load[b], b))
        load[chosen] += 1
        out[tp] = tuple(chosen if b == broker_id else b for b in replicas)
    return out


def verify_status(plan: Mapping[TopicPartition, Sequence[int]],
                  current: Mapping[TopicPartition, Sequence[int]],
                  ongoing: Mapping[TopicPartition, PartitionReassignment]
                  ) -> dict[TopicPartition, ReassignmentState]:
    out = {}
    for tp, target in plan.items():
        if tp in ongoing:
            moving = ongoing[tp]
            out[tp] = (ReassignmentState.IN_PROGRESS if moving.target_replicas == tuple(target)
                       else ReassignmentState.FAILED)
        elif tuple(current.get(tp, ())) == tuple(target):
            out[tp] = ReassignmentState.COMPLETE
        else:
            out[tp] = ReassignmentState.FAILED
    return out
