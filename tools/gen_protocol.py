#!/usr/bin/env python3
"""Turn Kafka's JSON message schemas into compact Python tables and their type stub.

Reads ../shared/kafka-protocol/{messages,metadata,coordinators}/*.json (Kafka's own schema
files) and writes two committed files:

- clients/protocol/_schemas.py: for every schema its name, API key, kind, valid and
  flexible versions, and the field tree (names snake_cased, types, version ranges,
  nullability, tags, defaults). Prose ("about") is dropped. One codec
  (clients/protocol/_codec.py) generates a reader and a writer per struct and version from
  the tables on first use, and builds the message classes from them at run time
  (clients/protocol/messages.py).
- clients/protocol/messages.pyi: what those run-time classes look like to a type checker:
  every message class, its nested struct classes, each field with its Python type (the
  union over all versions, as the classes hold it) and the constructor signature.
  tests/clients/protocol/test_stub.py checks that the stub and the run-time classes agree.

The coordinators/ folder holds the record layouts of Kafka's internal topics
(``__consumer_offsets``: OffsetCommitKey/Value, GroupMetadataKey/Value, ...); they are
"data" schemas, encoded and decoded like any other by version (broker/group/records.py).

    python tools/gen_protocol.py            # regenerate both
    python tools/gen_protocol.py --check    # exit 1 if either committed file is stale

The schemas are not part of a clone (they sit beside it, in the shared reference
material). Without them, or with a folder that holds no schema, the tool prints one line
naming the missing directory and exits 2 before writing anything; the outputs are only
written once every input was read and rendered, each atomically (a temporary file renamed
over it), so an interrupted run leaves the old file or the new one.
"""
from __future__ import annotations

import argparse
import json
import keyword
import os
import pathlib
import pprint
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_SHARED = ROOT.parent / "shared" / "kafka-protocol"
OUTPUT = ROOT / "clients" / "protocol" / "_schemas.py"
STUB_OUTPUT = ROOT / "clients" / "protocol" / "messages.pyi"
API_KEYS_STUB_OUTPUT = ROOT / "clients" / "protocol" / "api_keys.pyi"
FOLDERS = ("messages", "metadata", "coordinators")
VERSION_MAX = 0x7FFF  # "N+" means every version from N up

_SNAKE_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SNAKE_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    s = _SNAKE_2.sub("_", _SNAKE_1.sub("_", name)).lower()
    return s + "_" if keyword.iskeyword(s) else s


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """'3+' -> (3, MAX); '0-7' -> (0, 7); '5' -> (5, 5); 'none' / None -> None."""
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), VERSION_MAX)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def load_json(path: pathlib.Path) -> dict:
    # Kafka's schema files carry // comments, each on a line of its own.
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.lstrip().startswith("//"))
    return json.loads(text)


PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "uuid", "records"}


def parse_default(ftype: str, raw: str | None, nullable: bool):
    """None: the type's own default (0, "", empty array, ...); "null": the null value."""
    if raw is None:
        return None
    if raw == "null":
        return "null"
    if ftype.startswith("[]") or ftype.lstrip("[]") not in PRIMITIVES:
        raise ValueError(f"unsupported default {raw!r} for {ftype}")
    if not isinstance(raw, str):  # a few schemas write defaults as JSON numbers/booleans
        raw = str(raw).lower()
    if ftype == "bool":
        return raw == "true"
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(raw, 0)
    if ftype == "float64":
        return float(raw)
    if ftype == "string":
        return raw
    raise ValueError(f"unsupported default {raw!r} for {ftype}")


def convert_fields(fields: list[dict], common: dict[str, list[dict]]) -> tuple:
    out = []
    for f in fields:
        ftype = f["type"].strip()
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        sub = None
        if elem not in PRIMITIVES:
            body = f.get("fields")
            if body is None:
                body = common[elem]
            sub = convert_fields(body, common)
        # Kafka's generator lets a tagged-only field omit "versions": it exists exactly
        # in its tagged versions (TransactionLogValue's PreviousProducerId, ...).
        versions = parse_versions(f.get("versions") or f.get("taggedVersions"))
        assert versions is not None, f
        nullable = parse_versions(f.get("nullableVersions"))
        tagged = parse_versions(f.get("taggedVersions"))
        tag = None if f.get("tag") is None else int(f["tag"])  # a few specs quote it
        flexible = parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit"
        assert flexible == "inherit", f"field-level flexibleVersions only in headers: {f['name']}"
        default = parse_default(ftype, f.get("default"), nullable is not None)
        out.append((snake_case(f["name"]), ftype, versions, nullable, tagged, tag, default, sub))
    return tuple(out)


class InputError(Exception):
    """The schema directory is missing, empty or holds an unreadable file."""


def schema_files(shared: pathlib.Path) -> list[pathlib.Path]:
    """Every schema file to read; InputError unless each folder exists and holds some."""
    if not shared.is_dir():
        raise InputError(f"schema directory {shared} does not exist (Kafka's kafka-protocol "
                         "folder of the shared reference material; pass --shared DIR)")
    files = []
    for folder in FOLDERS:
        found = sorted((shared / folder).glob("*.json"))
        if not found:
            raise InputError(f"schema directory {shared / folder} is missing or holds no "
                             "*.json schema (pass --shared DIR: Kafka's kafka-protocol folder)")
        files += found
    return files


def build(shared: pathlib.Path) -> dict:
    schemas = {}
    for path in schema_files(shared):
        try:
            spec = load_json(path)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise InputError(f"cannot read schema {path}: {e}") from None
        if spec["type"] == "header":
            continue  # request/response headers are hand-written in _codec.py
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        valid = parse_versions(spec["validVersions"])
        flexible = parse_versions(spec.get("flexibleVersions", "none"))
        assert spec["name"] not in schemas, f"{spec['name']} defined twice"
        schemas[spec["name"]] = (
            spec.get("apiKey", -1),
            spec["type"],
            valid,
            flexible[0] if flexible else None,
            bool(spec.get("latestVersionUnstable", False)),
            tuple(spec.get("listeners", ())),
            convert_fields(spec["fields"], common),
        )
    return schemas


HEADER = '''"""Generated by tools/gen_protocol.py from Kafka's JSON schemas. Do not edit.

SCHEMAS: name -> (api_key, kind, (min_version, max_version), first_flexible_version or None,
                  latest_version_unstable, listeners, fields)
field:   (name, type, versions, nullable_versions, tagged_versions, tag, default, sub_fields)
         default None = the type's own default (0, "", b"", False, zero UUID, empty array,
         a default struct); "null" = null.
A version range is (lo, hi) inclusive; hi == 0x7FFF means "and every later version".
"""
# fmt: off
'''


def render(schemas: dict) -> str:
    body = pprint.pformat(schemas, width=110, sort_dicts=True)
    return HEADER + "SCHEMAS = " + body + "\n"


# ---------------------------------------------------------------- the type stub

STUB_HEADER = '''"""Generated by tools/gen_protocol.py from Kafka's JSON schemas. Do not edit.

Types of the message classes that clients/protocol/messages.py builds at run time from
_schemas.py. Each class holds the union of its fields over every version of its schema
(like Kafka's generated *Data classes): a field absent from a version keeps its default.
A field is ``X | None`` when some version makes it nullable or its default is null.
Nested structs are classes inside their message (``ProduceRequest.TopicProduceData``);
deeper ones are also reachable from the message class itself, as at run time.
"""
import uuid
from dataclasses import Field
from typing import Any, ClassVar, Protocol, TypeAlias

from clients.protocol._codec import MessageSpec

class _FileRegion(Protocol):
    """A slice of a log file sent with os.sendfile (quorum.network.FileRegion): the encoder
    leaves its place in the frame and encode_response_parts hands it over uncopied."""
    fd: int
    position: int
    length: int
    def __len__(self) -> int: ...

# A decoded records field is a memoryview into the frame; an encoded one may be any of these.
_Records: TypeAlias = bytes | bytearray | memoryview | _FileRegion
_TaggedFields: TypeAlias = tuple[tuple[int, bytes], ...]

def __dir__() -> list[str]: ...
'''

_PY_TYPES = {"bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int",
             "uint32": "int", "int64": "int", "float64": "float", "string": "str",
             "bytes": "bytes", "uuid": "uuid.UUID", "records": "_Records"}
_LINE_MAX = 100


def _child_name(field: tuple) -> str:
    return field[1][2:] if field[1].startswith("[]") else field[1]


def field_annotation(field: tuple, struct_path: str) -> str:
    """The Python type a field holds at run time, over every version of its schema."""
    name, ftype, versions, nullable, tagged, tag, default, sub = field
    is_array = ftype.startswith("[]")
    elem = _child_name(field)
    py = f"{struct_path}.{elem}" if sub is not None else _PY_TYPES[elem]
    if is_array:
        py = f"list[{py}]"
    # A records field defaults to None (no record set) in every spec: _codec._TYPE_DEFAULT.
    if nullable is not None or default == "null" or elem == "records":
        py += " | None"
    return py


def _descendants(fields: tuple, prefix: str):
    """(struct name, dotted path below the struct) for every struct below, depth first."""
    for f in fields:
        if f[7] is not None:
            here = prefix + _child_name(f)
            yield _child_name(f), here
            yield from _descendants(f[7], here + ".")


def _nested(fields: tuple) -> tuple[dict[str, tuple], dict[str, str]]:
    """The classes _codec.StructSpec sets on a struct's class: each child struct under its
    name, then each child's descendants the class does not have yet (the first one found
    wins), so ``messages.FetchResponse.PartitionData`` works as well as the full path.
    Returns (child name -> its fields, deeper name -> dotted path of the class it names)."""
    children: dict[str, tuple] = {}
    for f in fields:
        if f[7] is not None:
            # A common struct used by two fields is two run-time classes of one name and
            # shape (the later one is set on the parent); the stub names the shape once.
            children.setdefault(_child_name(f), f[7])
    aliases: dict[str, str] = {}
    for f in fields:
        if f[7] is not None:
            for name, path in _descendants(f[7], _child_name(f) + "."):
                if name not in children and name not in aliases:
                    aliases[name] = path
    return children, aliases


def _wrap_signature(head: str, params: list[str], indent: str) -> list[str]:
    """``def __init__(self, a: int = ..., ...) -> None: ...`` wrapped under _LINE_MAX."""
    lines: list[str] = []
    line = head + "self, "
    for i, p in enumerate(params):
        piece = p + (", " if i < len(params) - 1 else ") -> None: ...")
        if len(line) + len(piece.rstrip()) > _LINE_MAX and i > 0:
            lines.append(line.rstrip())
            line = indent + " " * 8
        line += piece
    lines.append(line)
    return lines


# Names an annotation in the stub uses: a field or nested class of that name would shadow
# it inside its class body, so the generator refuses (renaming would break the run time).
_STUB_NAMES = {"uuid", "list", "tuple", "dict", "str", "int", "bytes", "float", "bool", "Any",
               "Field", "ClassVar", "MessageSpec", "_Records", "_TaggedFields", "SCHEMA"}


def _render_struct(name: str, fields: tuple, path: str, indent: str, top: bool,
                   out: list[str]) -> None:
    """One class: its fields, its constructor, its nested classes, then the aliases of
    deeper classes. ``path`` is the class's dotted name in the module."""
    inner = indent + "    "
    out.append(f"{indent}class {name}:")
    if top:
        out.append(f"{inner}SCHEMA: ClassVar[MessageSpec]")
    out.append(f"{inner}__dataclass_fields__: ClassVar[dict[str, Field[Any]]]")
    params = []
    for f in fields:
        assert f[0] not in _STUB_NAMES, f"{path}.{f[0]} shadows a name the stub uses"
        annotation = field_annotation(f, path)
        out.append(f"{inner}{f[0]}: {annotation}")
        params.append(f"{f[0]}: {annotation} = ...")
    out.append(f"{inner}unknown_tagged_fields: _TaggedFields")
    params.append("unknown_tagged_fields: _TaggedFields = ...")
    out.extend(_wrap_signature(f"{inner}def __init__(", params, inner))
    children, aliases = _nested(fields)
    for nested in (*children, *aliases):
        assert nested not in _STUB_NAMES and nested != path.split(".")[0], \
            f"{path}.{nested} shadows a name the stub uses"
    for child, sub in children.items():
        _render_struct(child, sub, f"{path}.{child}", inner, False, out)
    for alias, target in aliases.items():
        out.append(f"{inner}{alias}: TypeAlias = {target}")


def render_stub(schemas: dict) -> str:
    out: list[str] = []
    for name in sorted(schemas):
        out.append("")
        _render_struct(name, schemas[name][6], name, "", True, out)
    return STUB_HEADER + "\n".join(out) + "\n"


API_KEYS_STUB_HEADER = '''"""Generated by tools/gen_protocol.py from Kafka's JSON schemas. Do not edit.

Types of clients/protocol/api_keys.py, whose ApiKey enum is built at run time from
_schemas.py: a type checker sees its members here.
"""
import enum

class ApiKey(enum.IntEnum):
'''


def render_api_keys_stub(schemas: dict) -> str:
    keys = sorted((table[0], name[: -len("Request")]) for name, table in schemas.items()
                  if table[1] == "request")
    members = [f"    {_SNAKE_2.sub('_', _SNAKE_1.sub('_', base)).upper()} = {key}"
               for key, base in keys]
    tail = ["", "REQUEST_NAMES: dict[int, str]", "RESPONSE_NAMES: dict[int, str]"]
    return API_KEYS_STUB_HEADER + "\n".join(members + tail) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=pathlib.Path, default=DEFAULT_SHARED)
    ap.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = ap.parse_args()
    try:
        schemas = build(args.shared)
    except InputError as e:
        print(f"gen_protocol: {e}", file=sys.stderr)
        return 2
    # Both rendered before either is written: a failure leaves both files as they were.
    outputs = {OUTPUT: render(schemas), STUB_OUTPUT: render_stub(schemas),
               API_KEYS_STUB_OUTPUT: render_api_keys_stub(schemas)}
    if args.check:
        stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"{p} is stale: run tools/gen_protocol.py", file=sys.stderr)
        return 1 if stale else 0
    for p, text in outputs.items():
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, p)
        print(f"wrote {p} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
