"""``ketch produce TOPIC``: one record per line of stdin or a file (kafka-console-producer,
``kcat -P``), through Ketch's producer.

A line is the value; with ``--key-separator``/``-K SEP`` the text before the first SEP is
the key. ``-f FORMAT`` parses each line by a kcat-like format instead: ``%k`` key, ``%v``
value, ``%T`` timestamp (ms), with literal text between them as separators (``%%`` is a
percent sign), e.g. ``-f '%T|%k|%v'``. ``--header k=v`` adds headers to every record.

Lines are read as bytes and handed to ``Producer.send`` without decoding: the fast path of
the producer (bytes in, nothing to serialize) is what makes this competitive with kcat.
Input is read 1 MiB at a time and split into lines. Failures are counted by the producer
(``record-error-total``); the last record of each chunk keeps its future so that an error
can be named at the end. Exit 1 when any
record failed. On a TTY stderr a progress line shows records and records/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import BinaryIO, Callable

from clients.cli import _common as c

EXAMPLES = """examples:
  echo hello | ketch produce orders
  ketch produce orders -K : < keyed.txt           # key:value lines
  ketch produce orders -f '%k|%v' --header src=cli
  ketch produce orders --file big.txt --acks 1 --compression lz4
"""

_PROGRESS_EVERY_S = 0.5


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="write records from stdin or a file, one per line",
                       description=__doc__.split("\n\n")[0].replace("``", ""), epilog=EXAMPLES)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", "-F", metavar="PATH", help="read this file instead of stdin")
    p.add_argument("--key-separator", "-K", metavar="SEP",
                   help="split each line at the first SEP into key and value")
    p.add_argument("--format", "-f", dest="fmt", metavar="FORMAT",
                   help="parse lines by a format of %%k %%v %%T and literal separators")
    p.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE",
                   help="a header on every record, repeatable")
    p.add_argument("--partition", "-p", type=int, help="write to this partition only")
    p.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all",
                   help="acknowledgement the producer waits for")
    p.add_argument("--compression", "-z", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   default="none", help="batch compression")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress line on stderr (auto: when stderr is a terminal)")
    c.add_cluster_args(p)
    c.add_output_args(p)
    p.set_defaults(run=c.guarded(run))


def compile_format(fmt: str) -> Callable[[bytes], tuple[bytes | None, bytes, int | None]]:
    """A parser for one line by a kcat-like format: (key, value, timestamp or None)."""
    fields: list[str] = []
    seps: list[bytes] = []
    lead = b""
    literal = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            tok = fmt[i + 1]
            i += 2
            if tok == "%":
                literal += b"%"
                continue
            if tok not in "kvT":
                raise c.CliError(f"--format: unknown token %{tok} (use %k, %v, %T, %%)")
            if fields:
                if not literal:
                    raise c.CliError(f"--format {fmt!r}: fields need a separator between them")
                seps.append(bytes(literal))
            else:
                lead = bytes(literal)
            literal = bytearray()
            fields.append(tok)
            continue
        literal += ch.encode()
        i += 1
    if "v" not in fields:
        raise c.CliError(f"--format {fmt!r} has no %v")
    if len(set(fields)) != len(fields):
        raise c.CliError(f"--format {fmt!r} repeats a token")
    trail = bytes(literal)

    def parse(line: bytes) -> tuple[bytes | None, bytes, int | None]:
        if lead:
            if not line.startswith(lead):
                raise c.CliError(f"line does not match --format {fmt!r}: {line[:60]!r}")
            line = line[len(lead):]
        if trail and line.endswith(trail):
            line = line[:-len(trail)]
        parts = []
        for sep in seps:
            head, found, line = line.partition(sep)
            if not found:
                raise c.CliError(f"line does not match --format {fmt!r}: {head[:60]!r}")
            parts.append(head)
        parts.append(line)
        got = dict(zip(fields, parts))
        ts = None
        if "T" in got:
            try:
                ts = int(got["T"])
            except ValueError:
                raise c.CliError(f"--format: %T is a time in ms, got {got['T'][:30]!r}") from None
        return got.get("k"), got["v"], ts
    return parse


_CHUNK = 1 << 20


def _line_chunks(f: BinaryIO):
    """Lists of lines (without their newline; a trailing \r is dropped too), read 1 MiB at
    a time: splitting a chunk is several times cheaper than iterating a file by line."""
    tail = b""
    while True:
        chunk = f.read(_CHUNK) if hasattr(f, "read") else b""
        if not chunk:
            break
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines] if b"\r" in chunk else lines
    if tail:
        yield [tail[:-1] if tail.endswith(b"\r") else tail]


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.next = self.start + _PROGRESS_EVERY_S

    def tick(self, n: int) -> None:
        now = time.monotonic()
        if now >= self.next:
            self.next = now + _PROGRESS_EVERY_S
            rate = n / max(now - self.start, 1e-9)
            sys.stderr.write(f"\r{n:>12,} records  {rate:>10,.0f} records/s")
            sys.stderr.flush()

    def done(self, n: int) -> None:
        if self.enabled:
            rate = n / max(time.monotonic() - self.start, 1e-9)
            sys.stderr.write(f"\r{n:>12,} records  {rate:>10,.0f} records/s\n")


def run(args: argparse.Namespace) -> int:
    from clients.producer import Producer
    headers = [(k, v.encode()) for k, v in c.parse_kv(args.header, "--header").items()] or None
    parse = compile_format(args.fmt) if args.fmt else None
    sep = args.key_separator.encode() if args.key_separator else None
    if parse and sep:
        raise c.CliError("give --format or --key-separator, not both")
    props = c.client_props(args, **{"acks": args.acks, "compression.type": args.compression,
                                    "max.block.ms": 15_000, "linger.ms": 20,
                                    "batch.size": 262_144})
    # The topic must exist: the producer's metadata request would auto-create it on a
    # cluster that allows that, and a typo should not make a topic.
    with c.admin(args) as admin:
        partitions = [p.partition for p in admin.describe_topics([args.topic])[args.topic].partitions]
    if args.partition is not None and args.partition not in partitions:
        raise c.CliError(f"topic {args.topic!r} has no partition {args.partition} "
                         f"(it has {len(partitions)})")
    try:
        producer = Producer(props)
    except (ValueError, TypeError) as e:
        raise c.CliError(str(e)) from None
    src: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer
    n = 0
    sampled = []
    progress = _Progress(args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty()))
    try:
        send = producer.send
        topic, partition = args.topic, args.partition
        tick = progress.tick if progress.enabled else None
        for lines in _line_chunks(src):
            if parse is None and sep is None:
                # The common case, kept lean: value only (see the module docstring).
                for line in lines:
                    fut = send(topic, line, None, partition, None, headers)
                if lines:
                    sampled.append(fut)
            else:
                for line in lines:
                    key = ts = None
                    if parse is not None:
                        key, line, ts = parse(line)
                    else:
                        k, found, v = line.partition(sep)
                        if found:
                            key, line = k, v
                    fut = send(topic, line, key, partition, ts, headers)
                if lines:
                    sampled.append(fut)
            n += len(lines)
            if tick is not None:
                tick(n)
        producer.flush()
    finally:
        if src is not sys.stdin.buffer:
            src.close()
        producer.close()
    progress.done(n)
    failed = producer.metrics["record-error-total"]
    first_error = next((e for e in (f.exception(0) for f in sampled if f.done()) if e), None)
    result = {"topic": args.topic, "records": n, "failed": failed}
    if args.output == "json":
        c.print_json(result)
    if failed:
        why = c.one_line(first_error) if first_error else "see --debug"
        print(f"ketch produce: {failed} of {n} records failed: {why}", file=sys.stderr)
        return 1
    if args.output != "json" and sys.stderr.isatty() and not progress.enabled:
        print(f"{n} records written to {args.topic}", file=sys.stderr)
    return 0
