"""``ketch dlq list|replay TOPIC``: the dead letters of a topic consumed with retry topics.

A ``RetryingConsumer`` (clients/aio/retry.py) writes a record whose handler failed on
every attempt to ``<topic>.dlq``, with Ketch's headers: the attempts, the last error,
and where it was first consumed (clients/_core/retry.py). TOPIC is the main topic
(``orders``) or its dead-letter topic (``orders.dlq``).

``list`` prints the dead letters (partition, offset, original position, attempts, last
error, key and value) from the start of the dead-letter topic to its end.

``replay`` re-drives them: each dead letter is written to the topic it came from (or
``--to``), to its original partition, with its key, value and the application's headers
(Ketch's retry headers removed, so it starts over with a full set of attempts); then the
dead-letter topic's offsets are committed for ``--group`` (default ``ketch-dlq-replay``),
so a second replay only re-drives what arrived since. Records are acknowledged by the
target topic before the offsets move (a crash in between replays some twice, never
none). ``--dry-run`` prints what would be replayed and commits nothing.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch dlq list orders
  ketch dlq list orders.dlq --output json
  ketch dlq replay orders --dry-run
  ketch dlq replay orders
  ketch dlq replay orders --to orders-reprocess --group ops-replay
"""

REPLAY_GROUP = "ketch-dlq-replay"
_POLL_MS = 300
_PREVIEW = 60


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "dlq", "list and replay the dead letters of retry-topic consumers",
                                 __doc__, EXAMPLES)
    a = action("list", "print the dead letters of TOPIC", list_)
    a.add_argument("topic", metavar="TOPIC")
    a = action("replay", "write the dead letters back to their topic (and commit them as replayed)", replay)
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("--to", metavar="TOPIC", help="write them here instead of where they came from")
    a.add_argument("--group", default=REPLAY_GROUP, help=f"whose offsets mark what was replayed "
                   f"(default {REPLAY_GROUP})")
    a.add_argument("--dry-run", action="store_true", help="print what would be replayed; change nothing")


def _dlq_name(topic: str) -> str:
    from clients._core.retry import DLQ_SUFFIX, dlq_topic
    return topic if topic.endswith(DLQ_SUFFIX) else dlq_topic(topic)


def _text(b: object, limit: int | None = None) -> str | None:
    if b is None:
        return None
    s = b.decode("utf-8", "backslashreplace") if isinstance(b, bytes) else str(b)
    return s if limit is None or len(s) <= limit else s[:limit - 1] + "…"


def _dead_letters(args: argparse.Namespace, topic: str, group: str | None, ends_out: dict) -> list:
    """Every record of ``topic`` from the group's committed offsets (or the start) to the
    end offsets taken now."""
    from clients.consumer import Consumer
    from clients.types import TopicPartition
    with c.admin(args) as admin:
        partitions = [p.partition for p in admin.describe_topics([topic])[topic].partitions]
    tps = [TopicPartition(topic, p) for p in partitions]
    props = c.client_props(args, **{"enable.auto.commit": False, "auto.offset.reset": "earliest",
                                    "fetch.max.wait.ms": 100})
    if group:
        props["group.id"] = group
    consumer = Consumer(props)
    out = []
    try:
        consumer.assign(tps)
        starts = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
        committed = consumer.committed(tps) if group else {}
        for tp in tps:
            done = committed.get(tp)
            consumer.seek(tp, max(starts[tp], done.offset) if done is not None else starts[tp])
        ends_out.update(ends)
        left = {tp for tp in tps if consumer.position(tp) < ends[tp]}
        while left:
            for r in consumer.poll(_POLL_MS):
                if r.offset < ends[r.topic_partition]:
                    out.append(r)
            left = {tp for tp in left if consumer.position(tp) < ends[tp]}
    finally:
        consumer.close()
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


def _describe(r) -> dict:
    from clients._core import retry
    return {"partition": r.partition, "offset": r.offset,
            "original_topic": retry.header_text(r.headers, retry.ORIGINAL_TOPIC),
            "original_partition": retry.header_int(r.headers, retry.ORIGINAL_PARTITION),
            "original_offset": retry.header_int(r.headers, retry.ORIGINAL_OFFSET),
            "attempts": retry.header_int(r.headers, retry.ATTEMPT),
            "error": retry.header_text(r.headers, retry.ERROR),
            "key": _text(r.key), "value": _text(r.value), "timestamp": r.timestamp}


def list_(args: argparse.Namespace) -> int:
    topic = _dlq_name(args.topic)
    letters = [_describe(r) for r in _dead_letters(args, topic, None, {})]
    rows = [{**d, "original": f"{d['original_topic']}-{d['original_partition']}@{d['original_offset']}",
             "error": _text(d["error"], _PREVIEW), "value": _text(d["value"], _PREVIEW)} for d in letters]
    c.emit(args, letters, ["partition", "offset", "original", "attempts", "error", "key", "value"], rows)
    return 0


def replay(args: argparse.Namespace) -> int:
    from clients._core.retry import ORIGINAL_PARTITION, ORIGINAL_TOPIC, header_int, header_text, replay_headers
    from clients.consumer import Consumer
    from clients.producer import Producer
    from clients.types import OffsetAndMetadata
    topic = _dlq_name(args.topic)
    ends: dict = {}
    letters = _dead_letters(args, topic, args.group, ends)
    plan = []
    for r in letters:
        target = args.to or header_text(r.headers, ORIGINAL_TOPIC)
        if not target:
            raise c.CliError(f"{topic}-{r.partition}@{r.offset} names no original topic "
                             f"(no {ORIGINAL_TOPIC} header): give --to")
        plan.append((r, target, header_int(r.headers, ORIGINAL_PARTITION)))
    summary = {"dead_letter_topic": topic, "group": args.group, "replayed": len(plan),
               "dry_run": bool(args.dry_run),
               "to": sorted({t for _, t, _ in plan})}
    if args.dry_run or not plan:
        c.emit(args, summary, ["dead_letter_topic", "replayed", "to", "dry_run"], [summary])
        return 0
    with c.admin(args) as admin:
        counts = {t: len(admin.describe_topics([t])[t].partitions) for t in summary["to"]}
    with Producer(c.client_props(args, acks="all", **{"enable.idempotence": True})) as producer:
        futures = [producer.send(target, r.value, key=r.key,
                                 partition=p if p is not None and 0 <= p < counts[target] else None,
                                 headers=list(replay_headers(r.headers)))
                   for r, target, p in plan]
        producer.flush()
        for f in futures:
            f.get()                # every record acknowledged before the offsets move
    consumer = Consumer(c.client_props(args, **{"group.id": args.group, "enable.auto.commit": False}))
    try:
        consumer.commit({tp: OffsetAndMetadata(end) for tp, end in ends.items()})
    finally:
        consumer.close()
    c.emit(args, summary, ["dead_letter_topic", "replayed", "to", "dry_run"], [summary])
    return 0
