"""A controller's metadata image rebuilt offline from its data directory, read-only: what
``ketch metadata-shell DIR`` browses (Kafka's kafka-metadata-shell).

Theory of operation
-------------------
A controller's data directory holds pysyncobj's ``raft.dump`` (its log compaction: the
``ReplicatedLogState`` at some Raft index, i.e. a metadata snapshot plus the committed
batches after it), ``raft.journal`` (the Raft entries since, in ``quorum/journal.py``'s
format) and ``raft.journal.meta`` (term, vote and the commit index last saved). The image
is rebuilt exactly as a controller rebuilds it when it starts:

1. the dump's state (``ReplicatedLogState.decode``), if there is a dump;
2. every journal entry after the dump's last Raft index and at or below the saved commit
   index, applied with ``ReplicatedLogState.apply_encoded`` (the same compare-and-set the
   quorum runs: duplicates, stale epochs and misplaced offsets are dropped as they were
   live). An entry is pysyncobj's: a type byte (0: a replicated call) and a pickle of
   ``(function id, (payload,))``. It is unpickled by an Unpickler that builds nothing but
   ints, tuples and bytes, so a damaged or hostile file cannot run code;
3. the state's snapshot (``records_to_image``) and then its batches (``replay_batch``),
   decoded by ``metadata_log.records``.

Nothing is written: the journal is read with ``open(..., "rb")`` and a torn tail (an
entry being written by a running controller) ends the read, as recovery would cut it.
Entries past the saved commit index may not be committed and are left out (the count is
reported): the image is the one the controller had committed when it last saved its
commit index (about once a second while it runs).

``image_tree(image)`` turns the image into the nested dict the shell browses:
``/features``, ``/brokers/<id>``, ``/topics/<name>/<partition>``, ``/configs/<type>/<name>``
and ``/provenance``. ``python -m quorum.offline_image DIR [COMMAND]`` runs the shell.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import shlex
import struct
import sys
from dataclasses import dataclass
from typing import Any

import crc32c

from metadata_log.delta import replay_batch
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from metadata_log.records import decode_record
from metadata_log.snapshot import records_to_image
from quorum.journal import MAGIC as JOURNAL_MAGIC, decode_commit_index
from quorum.raft import DUMP_FILE, _decode_dump
from quorum.replicated_log import CorruptCommandError, ReplicatedLogState

__all__ = ["OfflineImage", "load", "image_tree", "main"]

JOURNAL_FILE = "raft.journal"
_HEAD = struct.Struct(">II")        # quorum/journal.py: length, crc32c
_ENTRY = struct.Struct(">QQ")       # index, term
_REGULAR = 0                        # pysyncobj's _COMMAND_TYPE.REGULAR


class OfflineError(Exception):
    """The directory is not a controller's, or its files cannot be read."""


@dataclass(frozen=True)
class OfflineImage:
    image: MetadataImage
    dump_index: int                 # the Raft index the dump covers; 0: no dump
    journal_entries: int            # entries read from the journal
    applied_entries: int            # of those, applied (after the dump, committed)
    uncommitted_entries: int        # past the saved commit index: left out
    commit_index: int
    torn_tail_bytes: int


class _PayloadUnpickler(pickle.Unpickler):
    """Builds only what pysyncobj's command pickle holds: ints, tuples, bytes (protocol 2
    pickles bytes as ``_codecs.encode(str, 'latin1')``)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            import _codecs
            return _codecs.encode
        raise pickle.UnpicklingError(f"unexpected {module}.{name} in a journal entry")


def _payload(command: bytes) -> bytes | None:
    if not command or command[0] != _REGULAR:
        return None                 # pysyncobj's no-op / membership / version entries
    try:
        obj = _PayloadUnpickler(io.BytesIO(command[1:])).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
        raise OfflineError(f"undecodable journal entry: {e}") from None
    if (isinstance(obj, tuple) and len(obj) >= 2 and isinstance(obj[1], tuple)
            and len(obj[1]) == 1 and isinstance(obj[1][0], bytes)):
        return obj[1][0]
    raise OfflineError("a journal entry that is not a metadata log command")


def _read_journal(path: str) -> tuple[list[tuple[int, int, bytes]], int]:
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        return [], 0
    if not data.startswith(JOURNAL_MAGIC):
        raise OfflineError(f"{path} is not a Ketch Raft journal")
    out, pos = [], len(JOURNAL_MAGIC)
    while pos + _HEAD.size <= len(data):
        length, crc = _HEAD.unpack_from(data, pos)
        body = data[pos + _HEAD.size: pos + _HEAD.size + length]
        if length < _ENTRY.size or len(body) != length or crc32c.crc32c(body) != crc:
            break
        index, term = _ENTRY.unpack_from(body, 0)
        out.append((index, term, body[_ENTRY.size:]))
        pos += _HEAD.size + length
    return out, len(data) - pos


def load(data_dir: str) -> OfflineImage:
    journal = os.path.join(data_dir, JOURNAL_FILE)
    dump = os.path.join(data_dir, DUMP_FILE)
    if not os.path.isdir(data_dir):
        raise OfflineError(f"{data_dir} is not a directory")
    if not os.path.exists(journal) and not os.path.exists(dump):
        raise OfflineError(f"{data_dir} is not a controller's data directory (no {JOURNAL_FILE} "
                           f"or {DUMP_FILE}; with `ketch up` it is DIR/controller-ID/data)")
    try:
        with open(journal + ".meta", "rb") as f:
            commit_index = int(json.loads(f.read()).get("commit_index", 0))
    except FileNotFoundError:
        commit_index = 0
    except (OSError, ValueError) as e:
        raise OfflineError(f"cannot read {journal}.meta: {e}") from None
    try:
        with open(journal + ".commit", "rb") as f:
            stored = decode_commit_index(f.read())
    except FileNotFoundError:
        stored = None
    if stored is not None:          # newer than the meta file's, when written (quorum/journal.py)
        commit_index = max(commit_index, stored)
    state = ReplicatedLogState()
    dump_index = 0
    try:
        if os.path.exists(dump):
            with open(dump, "rb") as f:
                (last, _before), _members, state_bytes = _decode_dump(f.read())
            state = ReplicatedLogState.decode(state_bytes)
            dump_index = last[1]
        entries, torn = _read_journal(journal) if os.path.exists(journal) else ([], 0)
    except CorruptCommandError as e:
        raise OfflineError(f"{dump}: {e}") from None
    except OSError as e:
        raise OfflineError(f"cannot read {data_dir}: {e.strerror}") from None
    applied = uncommitted = 0
    for index, _term, command in entries:
        if index <= dump_index:
            continue
        if index > commit_index:
            uncommitted += 1
            continue
        payload = _payload(command)
        if payload is not None:
            state.apply_encoded(payload)
        applied += 1
    image = EMPTY_IMAGE
    snap = state.snapshot
    if snap is not None and snap.records:
        image = records_to_image((decode_record(r) for r in snap.records),
                                 Provenance(snap.end_offset - 1, snap.epoch))
    for batch in state.batches:
        image = replay_batch(image, [decode_record(r) for r in batch.records],
                             Provenance(batch.last_offset, batch.epoch)).image
    return OfflineImage(image, dump_index, len(entries), applied, uncommitted, commit_index, torn)


# ------------------------------------------------------------------ the tree

def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "name") and hasattr(v, "value") and type(v).__module__ != "builtins" and isinstance(v.value, int):
        return v.name
    if hasattr(v, "__dataclass_fields__"):
        return {k: _plain(getattr(v, k)) for k in v.__dataclass_fields__}
    return str(v)


def image_tree(image: MetadataImage) -> dict[str, Any]:
    configs: dict[str, dict[str, Any]] = {}
    for res, values in image.configs.resources.items():
        kind = getattr(res.type, "name", str(res.type)).lower()
        configs.setdefault(kind, {})[res.name or "(default)"] = dict(sorted(values.items()))
    return {
        "provenance": _plain(image.provenance),
        "features": dict(sorted(image.features.levels.items())),
        "brokers": {str(b): _plain(reg) for b, reg in sorted(image.cluster.brokers.items())},
        "topics": {name: {"topic_id": str(t.topic_id),
                          **{str(p): _plain(reg) for p, reg in sorted(t.partitions.items())}}
                   for name, t in sorted(image.topics.by_name.items())},
        "configs": configs,
        "producerIds": _plain(getattr(image, "producer_ids", None)),
    }


def _at(tree: Any, path: str) -> Any:
    node = tree
    for part in [p for p in path.split("/") if p]:
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def _norm(cwd: str, arg: str) -> str:
    parts = [] if arg.startswith("/") else [p for p in cwd.split("/") if p]
    for p in arg.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if parts:
                parts.pop()
        else:
            parts.append(p)
    return "/" + "/".join(parts)


def run_command(tree: dict, cwd: str, line: str, out=sys.stdout) -> str:
    """One shell command (ls, cd, cat, tree, pwd, find); returns the new working path."""
    words = shlex.split(line)
    if not words:
        return cwd
    cmd, args = words[0], words[1:]
    path = _norm(cwd, args[0]) if args else cwd
    try:
        node = _at(tree, path)
    except KeyError:
        print(f"{cmd}: {path}: no such node", file=out)
        return cwd
    if cmd == "pwd":
        print(cwd, file=out)
    elif cmd == "cd":
        if isinstance(node, dict):
            return path
        print(f"cd: {path}: not a directory", file=out)
    elif cmd == "ls":
        if isinstance(node, dict):
            for k in node:
                print(k + ("/" if isinstance(node[k], dict) else ""), file=out)
        else:
            print(path.rsplit("/", 1)[-1], file=out)
    elif cmd in ("cat", "tree"):
        print(json.dumps(node, indent=2), file=out)
    elif cmd == "find":
        def walk(n: Any, p: str) -> None:
            print(p or "/", file=out)
            if isinstance(n, dict):
                for k, v in n.items():
                    walk(v, f"{p}/{k}")
        walk(node, "" if path == "/" else path)
    elif cmd == "help":
        print("ls [PATH], cd PATH, cat PATH, tree [PATH], find [PATH], pwd, exit", file=out)
    else:
        print(f"unknown command {cmd!r} (help lists them)", file=out)
    return cwd


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="ketch metadata-shell")
    ap.add_argument("dir")
    ap.add_argument("command", nargs="*")
    ap.add_argument("--output", "-o", choices=("table", "json"), default="table")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_intermixed_args(argv)
    try:
        loaded = load(args.dir)
    except OfflineError as e:
        if args.debug:
            raise
        print(f"ketch metadata-shell: {e}", file=sys.stderr)
        return 1
    tree = image_tree(loaded.image)
    summary = {"dump_index": loaded.dump_index, "journal_entries": loaded.journal_entries,
               "applied_entries": loaded.applied_entries, "commit_index": loaded.commit_index,
               "uncommitted_entries_left_out": loaded.uncommitted_entries,
               "torn_tail_bytes": loaded.torn_tail_bytes}
    if args.output == "json":
        try:
            node = tree if not args.command else _at(tree, _norm("/", args.command[-1]))
        except KeyError:
            print(f"ketch metadata-shell: {args.command[-1]}: no such node", file=sys.stderr)
            return 1
        print(json.dumps({"source": summary, "path": args.command[-1] if args.command else "/",
                          "image": node}, indent=2))
        return 0
    if args.command:
        run_command(tree, "/", " ".join(shlex.quote(w) for w in args.command))
        return 0
    print(f"metadata image at offset {loaded.image.provenance.offset} (epoch "
          f"{loaded.image.provenance.epoch}); {loaded.applied_entries} journal entries after the "
          f"dump; {loaded.uncommitted_entries} uncommitted left out. help lists the commands.",
          file=sys.stderr)
    cwd = "/"
    while True:
        try:
            line = input(f"{cwd}> " if sys.stdin.isatty() else "")
        except EOFError:
            return 0
        except KeyboardInterrupt:
            print(file=sys.stderr)
            return 0
        if line.strip() in ("exit", "quit"):
            return 0
        cwd = run_command(tree, cwd, line)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `... | head`: the reader left.
        sys.stdout = open(os.devnull, "w")
        sys.exit(0)
