"""``ketch consume TOPIC``: print records (kafka-console-consumer, ``kcat -C``), through
Ketch's consumer.

Two modes. ``--group G``: subscribe as a member of G; positions come from G's committed
offsets, else ``--offset beginning|end``; what was printed is committed (auto-commit, and
a final commit when the command ends, Ctrl-C included). Without a group: assign
``--partition`` (repeatable; default every partition) and start at ``--offset``:
``beginning``, ``end``, ``N`` (an offset), ``-N`` (N before the end), or a time:
``@MS`` (ms since the epoch) or an ISO 8601 date-time (UTC unless it names a zone).

It stops after ``--num`` records, or, without ``--follow``, when it has read up to the end
offsets taken once the partitions were assigned (as ``kcat -e``); ``--follow`` waits for
new records until Ctrl-C. Ctrl-C is caught as a flag checked between polls, so the
consumer always closes in order: final commit, LeaveGroup, connections closed.

Output: the value per line by default; ``--format`` with kcat's tokens (``%t`` topic,
``%p`` partition, ``%o`` offset, ``%T`` timestamp, ``%k`` key, ``%s`` value, ``%h``
headers, ``%K``/``%S`` key/value length, ``\\n \\t \\\\``); ``--json`` one JSON object
per line (topic, partition, offset, timestamp, key, value, headers; bytes that are not
UTF-8 are shown with backslash escapes).
"""
from __future__ import annotations

import argparse
import datetime
import json
import signal
import sys
from typing import Any, Callable

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch consume orders --offset beginning -n 10
  ketch consume orders --group billing --follow
  ketch consume orders -p 0 --offset -5 --format '%p:%o %k=%s\\n'
  ketch consume orders --offset 2026-01-01T00:00:00 --json
"""

_POLL_MS = 500


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consume", help="print records, in a group or from given offsets",
                       description=__doc__.split("\n\n")[0].replace("``", ""), epilog=EXAMPLES)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--group", "-g", metavar="GROUP", help="consume as a member of this group")
    p.add_argument("--partition", "-p", type=int, action="append", metavar="N",
                   help="only this partition, repeatable (not with --group)")
    p.add_argument("--offset", "-o", default="beginning",
                   help="beginning, end, N, -N, @MS or an ISO date-time "
                        "(with --group: beginning or end, where the group has no offset)")
    p.add_argument("--num", "-n", type=int, metavar="N", help="stop after N records")
    p.add_argument("--follow", "-F", action="store_true", help="wait for new records (until Ctrl-C)")
    p.add_argument("--format", "-f", dest="fmt", metavar="FORMAT",
                   help="kcat-like output format (%%t %%p %%o %%T %%k %%s %%h %%K %%S)")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    c.add_cluster_args(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(run=c.guarded(run))


# ------------------------------------------------------------------ formatting

def _text(b: Any) -> str | None:
    if b is None:
        return None
    if isinstance(b, bytes):
        return b.decode("utf-8", "backslashreplace")
    return str(b)


def _bytes(b: Any) -> bytes:
    if b is None:
        return b""
    return b if isinstance(b, bytes) else str(b).encode()


def record_json(r) -> dict[str, Any]:
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp, "key": _text(r.key), "value": _text(r.value),
            "headers": [[k, _text(v)] for k, v in r.headers]}


def compile_output(fmt: str) -> Callable[[Any], bytes]:
    """kcat's -f: a list of pieces, each a literal or a field of the record."""
    pieces: list[Callable[[Any], bytes] | bytes] = []
    lit = bytearray()
    escapes = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}
    fields: dict[str, Callable[[Any], bytes]] = {
        "t": lambda r: r.topic.encode(), "p": lambda r: b"%d" % r.partition,
        "o": lambda r: b"%d" % r.offset, "T": lambda r: b"%d" % r.timestamp,
        "k": lambda r: _bytes(r.key), "s": lambda r: _bytes(r.value),
        "K": lambda r: b"%d" % (-1 if r.key is None else len(_bytes(r.key))),
        "S": lambda r: b"%d" % (-1 if r.value is None else len(_bytes(r.value))),
        "h": lambda r: b",".join(k.encode() + b"=" + _bytes(v) for k, v in r.headers),
    }
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch in "%\\" and i + 1 < len(fmt):
            tok = fmt[i + 1]
            i += 2
            if ch == "\\":
                lit += escapes.get(tok, ("\\" + tok).encode())
            elif tok == "%":
                lit += b"%"
            elif tok in fields:
                if lit:
                    pieces.append(bytes(lit))
                    lit = bytearray()
                pieces.append(fields[tok])
            else:
                raise c.CliError(f"--format: unknown token %{tok} (use %t %p %o %T %k %s %h %K %S)")
            continue
        lit += ch.encode()
        i += 1
    if lit:
        pieces.append(bytes(lit))
    parts = tuple(pieces)
    return lambda r: b"".join(p if isinstance(p, bytes) else p(r) for p in parts)


def parse_time(text: str) -> int:
    if text.startswith("@"):
        try:
            return int(text[1:])
        except ValueError:
            raise c.CliError(f"--offset {text!r}: @ takes a time in ms since the epoch") from None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise c.CliError(f"--offset {text!r}: use beginning, end, N, -N, @MS or an ISO "
                         f"date-time like 2026-01-01T12:00:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


# ------------------------------------------------------------------ the loop

def run(args: argparse.Namespace) -> int:
    from clients.consumer import Consumer
    from clients.types import TopicPartition
    if args.group and args.partition:
        raise c.CliError("--partition assigns partitions itself: not with --group")
    if args.num is not None and args.num < 0:
        raise c.CliError("--num must be >= 0")
    if args.json and args.fmt:
        raise c.CliError("give --json or --format, not both")
    offset = args.offset
    if args.group and offset not in ("beginning", "end"):
        raise c.CliError("with --group, --offset is beginning or end (where the group has no "
                         "committed offset); reset a group with `ketch group reset-offsets`")
    render = compile_output(args.fmt) if args.fmt else None
    props = c.client_props(args, **{"auto.offset.reset": "latest" if offset == "end" else "earliest",
                                    "fetch.max.wait.ms": 200})
    if args.group:
        props.setdefault("group.id", args.group)
        props.setdefault("enable.auto.commit", True)
    else:
        props.setdefault("enable.auto.commit", False)
    # The topic's partitions (and an unknown topic as one line) from the admin client:
    # Ketch's consumer learns partitions only for what it subscribes to.
    with c.admin(args) as admin:
        found = {p.partition for p in admin.describe_topics([args.topic])[args.topic].partitions}
    try:
        consumer = Consumer(props)
    except (ValueError, TypeError) as e:
        raise c.CliError(str(e)) from None

    stopping = []
    old_handler = signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    out = sys.stdout.buffer
    count = 0
    try:
        ends: dict[TopicPartition, int] | None = None
        if args.group:
            consumer.subscribe([args.topic])
        else:
            tps = _partitions(args, found)
            consumer.assign(tps)
            _seek(consumer, tps, offset)
            if not args.follow:
                ends = consumer.end_offsets(tps)
        remaining = args.num
        if ends is not None and _at_end(consumer, ends, []):
            remaining = 0               # nothing to read: no poll to wait out
        while not stopping and (remaining is None or remaining > 0):
            recs = consumer.poll(_POLL_MS, max_records=remaining)
            if recs:
                count += len(recs)
                if remaining is not None:
                    remaining -= len(recs)
                _write(out, recs, args.json, render)
            if ends is None and args.group and not args.follow:
                assigned = consumer.assignment()
                if assigned:
                    ends = consumer.end_offsets(assigned)
            if ends is not None and not args.follow and _at_end(consumer, ends, recs):
                break
        out.flush()
    finally:
        signal.signal(signal.SIGINT, old_handler)
        consumer.close()
    if stopping:
        print(f"ketch consume: interrupted after {count} records"
              + (f" (group {args.group} committed)" if args.group else ""), file=sys.stderr)
    return 0


def _partitions(args: argparse.Namespace, found: set[int]) -> list:
    from clients.types import TopicPartition
    if args.partition:
        missing = [p for p in args.partition if p not in found]
        if missing:
            raise c.CliError(f"topic {args.topic!r} has no partition {missing[0]} "
                             f"(it has {len(found)})")
        return [TopicPartition(args.topic, p) for p in sorted(set(args.partition))]
    return [TopicPartition(args.topic, p) for p in sorted(found)]


def _seek(consumer, tps: list, offset: str) -> None:
    if offset == "beginning":
        consumer.seek_to_beginning(tps)
    elif offset == "end":
        consumer.seek_to_end(tps)
    elif offset.lstrip("-").isdigit():
        n = int(offset)
        start = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
        if n >= 0:
            for tp in tps:
                if not start[tp] <= n <= end[tp]:
                    # Else the consumer would reset to --offset's policy without a word.
                    raise c.CliError(f"offset {n} is outside {tp.topic}-{tp.partition}, which "
                                     f"holds offsets {start[tp]} to {end[tp]} (end)")
                consumer.seek(tp, n)
        else:
            for tp in tps:
                consumer.seek(tp, max(start[tp], end[tp] + n))
    else:
        ts = parse_time(offset)
        found = consumer.offsets_for_times({tp: ts for tp in tps})
        end = consumer.end_offsets(tps)
        for tp in tps:
            hit = found.get(tp)
            consumer.seek(tp, hit.offset if hit is not None else end[tp])


def _at_end(consumer, ends: dict, recs: list) -> bool:
    last: dict = {}
    for r in recs:
        last[r.partition] = r.offset
    for tp, end in ends.items():
        got = last.get(tp.partition)
        if got is not None and got + 1 >= end:
            continue
        if consumer.position(tp) < end:
            return False
    return True


def _write(out, recs: list, as_json: bool, render) -> None:
    if as_json:
        out.write("".join(json.dumps(record_json(r)) + "\n" for r in recs).encode())
    elif render is not None:
        out.write(b"".join(render(r) for r in recs))
    else:
        out.write(b"\n".join(_bytes(r.value) for r in recs) + b"\n")
