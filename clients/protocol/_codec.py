"""One generic, schema-driven codec for every Kafka message.

Theory of operation
-------------------
``_schemas.SCHEMAS`` (generated from Kafka's JSON specs) describes each message as a tree of
fields with version ranges. For one (struct, version) pair this module *generates* Python
source once, on first use, and execs it into a reader and a writer that already know, for
that version, which fields exist, which are nullable, which travel in the tagged-field
section and whether strings, bytes and arrays use the classic (int16/int32 length) or
compact (unsigned varint length+1) encoding, as Kafka generates its *Data classes' read and
write methods (see "code generation" below; ``StructSpec.source`` shows the text). Fixed-size
fields in a row are one ``struct`` call; there are no per-field calls and no version checks
at run time.

Every schema, and every struct inside it, becomes one slotted dataclass whose fields are
the union over all versions (like Kafka's generated ``*Data`` classes): a field absent from
the version on the wire keeps its schema default. Unknown tagged fields are kept in
``unknown_tagged_fields`` and written back, so a decoded message re-encodes byte for byte.

Decoding never trusts a length: every string, bytes and array length is checked against
the bytes that remain before anything is allocated, and any malformed input surfaces as
``CorruptFrameError`` (see ``decode_body``), never as IndexError or struct.error.

``records`` fields decode to a ``memoryview`` into the frame (no copy of the record data;
mutable when the frame is a bytearray, as ``framing.ServerConnection`` hands it over). When encoding, a ``records`` value may also be any
object that is not bytes-like but has ``__len__`` (a file region for ``os.sendfile``):
``encode_parts`` then returns the frame as a list of byte chunks and those objects, so a
broker can send log data without copying it through Python.
"""
from __future__ import annotations

import dataclasses
import linecache
import struct
import uuid
from typing import Any, Callable, TypeVar

from clients.frozen import slot_init
from clients.protocol import _schemas
from clients.protocol.types import ZERO_UUID, CorruptFrameError, read_uvarint, write_uvarint

# A frame being decoded: bytes, or the connection's own bytearray (decoded in place).
Frame = bytes | bytearray
Reader = Callable[[Frame, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]
_M = TypeVar("_M")  # a message class from clients.protocol.messages (typed by messages.pyi)

_TYPE_DEFAULT = {"bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0,
                 "int64": 0, "float64": 0.0, "string": "", "bytes": b"", "uuid": ZERO_UUID,
                 "records": None}


def _in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class _Out(bytearray):
    """Output buffer that can also carry non-bytes ``records`` values (file regions)."""
    __slots__ = ("regions",)

    def __init__(self) -> None:
        super().__init__()
        self.regions: list[tuple[int, Any]] = []


# ---------------------------------------------------------------- struct classes

@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: str            # "int32", "[]string", "[]TopicData", "LeaderIdAndEpoch", ...
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    default: Any
    sub_fields: tuple | None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


class StructSpec:
    """A struct (or a whole message body): its class and fields, and compiled codecs."""

    def __init__(self, name: str, fields: tuple, message: "StructSpec | None") -> None:
        self.name = name
        self.message = message or self  # the top-level message this struct belongs to
        self.fields = tuple(FieldSpec(*f) for f in fields)
        self.children: dict[str, StructSpec] = {}
        for f in self.fields:
            if f.sub_fields is not None:
                self.children[f.name] = StructSpec(f.element_type, f.sub_fields, self.message)
        self.cls = self._make_class()
        self._compiled: dict[tuple[int, bool], tuple[Reader, Writer]] = {}

    def _default_for(self, f: FieldSpec) -> Any:   # a dataclasses.field(...)
        if f.is_array:
            if f.default == "null":
                return dataclasses.field(default=None)
            return dataclasses.field(default_factory=list)
        if f.sub_fields is not None:
            if f.default == "null":
                return dataclasses.field(default=None)
            return dataclasses.field(default_factory=self.children[f.name].cls)
        if f.default == "null":
            return dataclasses.field(default=None)
        if f.default is None:
            return dataclasses.field(default=_TYPE_DEFAULT[f.type])
        return dataclasses.field(default=f.default)

    def _make_class(self) -> Any:   # a message class, typed by messages.pyi
        spec: list[tuple[str, Any, Any]] = [(f.name, Any, self._default_for(f))
                                            for f in self.fields]
        spec.append(("unknown_tagged_fields", tuple,
                     dataclasses.field(default=(), repr=False)))
        # Frozen: a message is built once (issue 11), as Kafka treats its generated *Data
        # classes; assigning a field raises FrozenInstanceError (dataclasses.replace makes a
        # changed copy). No hash: list fields would make hash() fail anyway.
        cls: Any = dataclasses.make_dataclass(self.name, spec, slots=True, eq=True, repr=True,
                                              frozen=True)
        cls.__hash__ = None
        # Built for every message and struct decoded: fields stored through their slots.
        cls.__init__ = slot_init(cls)
        cls.__module__ = "clients.protocol.messages"
        for child in self.children.values():
            setattr(cls, child.name, child.cls)
            # grandchildren are reachable from the top-level class too:
            # messages.FetchResponse.PartitionData as well as ...FetchableTopicResponse.PartitionData
            for gname, gcls in _descendants(child):
                if not hasattr(cls, gname):
                    setattr(cls, gname, gcls)
        return cls

    def default_of(self, f: FieldSpec) -> Any:
        d = self._default_for(f)
        if d.default_factory is not dataclasses.MISSING:
            return d.default_factory()
        return d.default

    def codec(self, version: int, flexible: bool) -> tuple[Reader, Writer]:
        key = (version, flexible)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(version, flexible)
        return compiled

    def source(self, version: int, flexible: bool) -> str:
        """The generated reader and writer of this struct at ``version`` (for debugging)."""
        return "\n".join(_generate(self, version, flexible).lines) + "\n"

    def _compile(self, version: int, flexible: bool) -> tuple[Reader, Writer]:
        src = _generate(self, version, flexible)
        text = "\n".join(src.lines) + "\n"
        filename = f"<codec {self.message.name}.{self.name} v{version}{' flexible' if flexible else ''}>"
        # In linecache, tracebacks and profilers show the generated lines.
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), src.env)  # noqa: S102 - from the schema tables only
        return src.env[f"read_{self.name}"], src.env[f"write_{self.name}"]


def _descendants(spec: StructSpec):
    for child in spec.children.values():
        yield child.name, child.cls
        yield from _descendants(child)


# ---------------------------------------------------------------- code generation
#
# For one (struct, version, flexible) the codec writes the Python source of a reader and a
# writer specialised to that version and execs it once, on first use, as Kafka generates
# the read/write methods of its *Data classes: version checks, nullability and the compact-
# or-classic choice are settled while writing the source, not per field of every message.
# - Consecutive fixed-size fields (ints, bool, uuid), and a classic length prefix that ends
#   them, are one precompiled struct.Struct call, which also checks the bounds of the run
#   (struct.error and IndexError become CorruptFrameError in decode_body).
# - Compact lengths, counts and tag counts are read inline when they fit in one byte
#   (below 128: nearly all of them); read_uvarint is the fallback.
# - Sub-structs and arrays of them call the element struct's generated reader or writer.
# - A decoded object is made with object.__new__ and filled through its slot descriptors
#   (messages are frozen dataclasses), fields absent from the version at their defaults.
# StructSpec.source(version, flexible) returns the generated text, for debugging; the text
# is also in linecache, so tracebacks and profilers show the generated lines.

_UUID_CACHE: dict[bytes, uuid.UUID] = {}


def _uuid_of(raw: bytes) -> uuid.UUID:
    """uuid.UUID(bytes=raw), shared: requests name the same few topic ids over and over,
    building a UUID costs about a microsecond, and a UUID is immutable. Bounded by
    clearing it when full."""
    value = _UUID_CACHE.get(raw)
    if value is None:
        if len(_UUID_CACHE) >= 4096:
            _UUID_CACHE.clear()
        value = _UUID_CACHE[raw] = uuid.UUID(bytes=raw)
    return value


def _write_tags(out: bytearray, present: list[tuple[int, bytes]]) -> None:
    """A tagged-field section: count, then (tag, size, data) in tag order."""
    write_uvarint(out, len(present))
    for tag, data in present:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


_STRUCTS: dict[str, struct.Struct] = {}
# Fixed-size fields, joined into runs: format codes (bool: any non-zero byte is True).
_FIXED_CODE = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "float64": "d", "bool": "?", "uuid": "16s"}
# Arrays of these are one unpack/pack of "n" of them.
_ARRAY_CODE = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "float64": "d"}
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _struct(fmt: str) -> struct.Struct:
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct(">" + fmt)
    return s


@dataclasses.dataclass(frozen=True, slots=True)
class _Wire:
    """A field as it travels in one version: what the generator decides on."""
    name: str
    type: str                    # the element type for arrays
    array: bool
    nullable: bool               # the field itself (array elements never are)
    child: StructSpec | None     # the struct of a struct field or of its elements

    @property
    def fixed(self) -> str | None:
        return None if self.array or self.child is not None else _FIXED_CODE.get(self.type)

    def element(self) -> _Wire:
        return _Wire(self.name, self.type, False, False, self.child)


class _Source:
    """The lines of one generated module and the constants its code refers to."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "_Corrupt": CorruptFrameError, "_new": object.__new__, "_Out": _Out,
            "_read_uvarint": read_uvarint, "_write_uvarint": write_uvarint,
            "_write_tags": _write_tags, "_memoryview": memoryview, "_uuid_of": _uuid_of,
            "_unpack_from": struct.unpack_from, "_pack": struct.pack, "_BYTES_LIKE": _BYTES_LIKE,
        }
        self._consts: dict[int, str] = {}
        self._vars = 0

    def const(self, hint: str, value: Any) -> str:
        name = self._consts.get(id(value))
        if name is None:
            name = self._consts[id(value)] = f"_{hint}{len(self._consts)}"
            self.env[name] = value
        return name

    def var(self, hint: str) -> str:
        self._vars += 1
        return f"{hint}{self._vars}"

    def emit(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)

    def child_codec(self, child: StructSpec) -> tuple[Reader, Writer]:
        return child.codec(self.version, self.flexible)


class _Run:
    """Pending fixed-size fields: read with one unpack_from, or written with one pack."""

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.items: list[str] = []   # read: target names; write: value expressions
        self.after: list[str] = []   # read: conversions once unpacked (uuid bytes -> UUID)

    def add(self, code: str, item: str) -> None:
        self.codes.append(code)
        self.items.append(item)

    def flush_read(self, src: _Source, indent: int) -> None:
        if self.codes:
            s = _struct("".join(self.codes))
            unpack = src.const("unpack", s.unpack_from)
            src.emit(indent, f"{', '.join(self.items)}, = {unpack}(buf, pos)",
                     f"pos += {s.size}", *self.after)
            self.codes, self.items, self.after = [], [], []

    def flush_write(self, src: _Source, indent: int, out: str) -> None:
        if self.codes:
            pack = src.const("pack", _struct("".join(self.codes)).pack)
            src.emit(indent, f"{out} += {pack}({', '.join(self.items)})")
            self.codes, self.items = [], []


# ---- reading

def _read_length(src: _Source, indent: int, f: _Wire, n: str, run: _Run) -> None:
    """A length or count into ``n`` (-1: null). Compact: an unsigned varint of n + 1, one
    byte read inline; classic (int16 for strings, int32 otherwise) ends the fixed run."""
    if not src.flexible:
        run.add("h" if f.type == "string" and not f.array else "i", n)
        run.flush_read(src, indent)
        return
    run.flush_read(src, indent)
    src.emit(indent, f"{n} = buf[pos]",
             f"if {n} < 128:",
             "    pos += 1",
             "else:",
             f"    {n}, pos = _read_uvarint(buf, pos)",
             f"{n} -= 1")


def _read_null(src: _Source, indent: int, f: _Wire, n: str, target: str, what: str) -> None:
    src.emit(indent, f"if {n} < 0:")
    if f.nullable:
        src.emit(indent + 1, f"if {n} != -1:",
                 f"    raise _Corrupt('negative {what} length')",
                 f"{target} = None")
    else:
        src.emit(indent + 1, f"raise _Corrupt('null or negative-length {what} where not allowed')")


def _read_field(src: _Source, indent: int, f: _Wire, target: str, run: _Run) -> None:
    """Code reading ``f`` into ``target`` at ``pos``. A fixed-size field only joins ``run``;
    anything else flushes it first."""
    code = f.fixed
    if code is not None:
        run.add(code, target)
        if f.type == "uuid":
            run.after.append(f"{target} = _uuid_of({target})")
        return
    if f.child is not None and not f.array:
        run.flush_read(src, indent)
        reader = src.const("read", src.child_codec(f.child)[0])
        if f.nullable:  # an int8 marker: -1 null, 1 present
            src.emit(indent, "if pos >= len(buf):",
                     "    raise _Corrupt('truncated struct marker')",
                     "if buf[pos] >= 128:",
                     f"    {target} = None",
                     "    pos += 1",
                     "else:",
                     f"    {target}, pos = {reader}(buf, pos + 1)")
        else:
            src.emit(indent, f"{target}, pos = {reader}(buf, pos)")
        return
    n = src.var("n")
    _read_length(src, indent, f, n, run)
    if not f.array:
        what = "string" if f.type == "string" else "bytes"
        _read_null(src, indent, f, n, target, what)
        end = src.var("end")
        if f.type == "string":
            value = f"str(buf[pos:{end}], 'utf-8')"
        elif f.type == "records":
            # Zero-copy: a view into the frame. Over a bytearray frame (ServerConnection)
            # the broker can stamp offsets into it in place before writing it to the log.
            value = f"_memoryview(buf)[pos:{end}]"
        else:
            value = f"bytes(buf[pos:{end}])"
        src.emit(indent, "else:",
                 f"    {end} = pos + {n}",
                 f"    if {end} > len(buf):",
                 f"        raise _Corrupt('{what} runs past the end of the frame')",
                 f"    {target} = {value}",
                 f"    pos = {end}")
        return
    _read_null(src, indent, f, n, target, "array")
    src.emit(indent, f"elif {n} > len(buf) - pos:  # every element takes at least one byte",
             "    raise _Corrupt('array count larger than the frame')",
             "else:")
    indent += 1
    code = _ARRAY_CODE.get(f.type) if f.child is None else None
    if code is not None:
        size = struct.calcsize(">" + code)
        src.emit(indent, f"if pos + {n} * {size} > len(buf):",
                 "    raise _Corrupt('array runs past the end of the frame')",
                 f"{target} = list(_unpack_from('>%d{code}' % {n}, buf, pos))",
                 f"pos += {n} * {size}")
        return
    append, item = src.var("append"), src.var("item")
    src.emit(indent, f"{target} = []", f"{append} = {target}.append", f"for _ in range({n}):")
    if f.child is not None:
        reader = src.const("read", src.child_codec(f.child)[0])
        src.emit(indent + 1, f"{item}, pos = {reader}(buf, pos)")
    else:
        item_run = _Run()
        _read_field(src, indent + 1, f.element(), item, item_run)
        item_run.flush_read(src, indent + 1)
    src.emit(indent + 1, f"{append}({item})")


# ---- writing

def _write_length(src: _Source, indent: int, f: _Wire, n: str, run: _Run, out: str) -> None:
    if not src.flexible:  # a classic length prefix ends the fixed run
        run.add("h" if f.type == "string" and not f.array else "i", n)
        run.flush_write(src, indent, out)
        return
    run.flush_write(src, indent, out)
    src.emit(indent, f"if {n} < 127:",
             f"    {out}.append({n} + 1)",
             "else:",
             f"    _write_uvarint({out}, {n} + 1)")


def _write_field(src: _Source, indent: int, f: _Wire, value: str, run: _Run, out: str) -> None:
    """Code writing ``value`` (an expression without side effects) as ``f`` to ``out``;
    fixed-size fields only join ``run``."""
    code = f.fixed
    if code is not None:
        run.add(code, f"{value}.bytes" if f.type == "uuid" else value)
        return
    if f.child is not None and not f.array:
        run.flush_write(src, indent, out)
        writer = src.const("write", src.child_codec(f.child)[1])
        if f.nullable:  # an int8 marker: -1 null, 1 present
            v = src.var("v")
            src.emit(indent, f"{v} = {value}",
                     f"if {v} is None:",
                     f"    {out}.append(255)",
                     "else:",
                     f"    {out}.append(1)",
                     f"    {writer}({out}, {v})")
        else:
            src.emit(indent, f"{writer}({out}, {value})")
        return
    v, n = src.var("v"), src.var("n")
    what = "array" if f.array else "string" if f.type == "string" else "bytes"
    src.emit(indent, f"{v} = {value}", f"if {v} is None:")
    if f.nullable:
        src.emit(indent + 1, f"{n} = -1")
    elif f.type == "records" and not f.array:  # Kafka writes an absent record set as empty
        src.emit(indent + 1, f"{n} = 0")
    else:
        src.emit(indent + 1, f"raise ValueError('null {what} in a non-nullable field')")
    src.emit(indent, "else:")
    if f.type == "string" and not f.array:
        src.emit(indent + 1, f"{v} = {v}.encode('utf-8')",
                 f"{n} = len({v})",
                 f"if {n} > 0x7FFF:",
                 "    raise ValueError('string longer than 32767 bytes')")
    else:
        src.emit(indent + 1, f"{n} = len({v})")
    _write_length(src, indent, f, n, run, out)
    if not f.array:
        if f.type == "records":
            src.emit(indent, f"if {v} is None:",
                     "    pass",
                     f"elif isinstance({v}, _BYTES_LIKE):",
                     f"    {out} += {v}",
                     "else:  # a file region: encode_parts splices it in",
                     f"    assert isinstance({out}, _Out), 'records region outside encode_parts'",
                     f"    {out}.regions.append((len({out}), {v}))")
        else:
            src.emit(indent, f"if {v} is not None:", f"    {out} += {v}")
        return
    src.emit(indent, f"if {n} > 0:")
    code = _ARRAY_CODE.get(f.type) if f.child is None else None
    if code is not None:
        src.emit(indent + 1, f"{out} += _pack('>%d{code}' % {n}, *{v})")
        return
    item = src.var("item")
    src.emit(indent + 1, f"for {item} in {v}:")
    if f.child is not None:
        writer = src.const("write", src.child_codec(f.child)[1])
        src.emit(indent + 2, f"{writer}({out}, {item})")
    else:
        item_run = _Run()
        _write_field(src, indent + 2, f.element(), item, item_run, out)
        item_run.flush_write(src, indent + 2, out)


# ---- one struct at one version

def _generate(spec: StructSpec, version: int, flexible: bool) -> _Source:
    src = _Source(version, flexible)
    cls = spec.cls
    regular: list[tuple[int, FieldSpec, _Wire]] = []
    tagged: list[tuple[int, FieldSpec, _Wire]] = []
    for i, f in enumerate(spec.fields):
        if _in(f.versions, version):
            wire = _Wire(f.name, f.element_type, f.is_array, _in(f.nullable, version),
                         spec.children.get(f.name))
            (tagged if flexible and _in(f.tagged, version) else regular).append((i, f, wire))
    tagged.sort(key=lambda t: t[1].tag or 0)  # every tagged field has its tag
    on_wire = {i for i, _, _ in regular + tagged}
    func = spec.name

    # reader
    src.emit(0, f"def read_{func}(buf, pos):")
    run = _Run()
    for i, _, wire in regular:
        _read_field(src, 1, wire, f"f{i}", run)
    run.flush_read(src, 1)
    if flexible:
        for i, f, _ in tagged:
            src.emit(1, f"f{i} = {_default_expr(src, spec, f)}")
        src.emit(1, "count = buf[pos]",
                 "if count < 128:",
                 "    pos += 1",
                 "else:",
                 "    count, pos = _read_uvarint(buf, pos)",
                 "unknown = ()",
                 "if count:",
                 "    unknown_list = []",
                 "    last_tag = -1",
                 "    for _ in range(count):",
                 "        tag, pos = _read_uvarint(buf, pos)",
                 "        size, pos = _read_uvarint(buf, pos)",
                 "        tag_end = pos + size",
                 "        if tag <= last_tag or tag_end > len(buf):",
                 "            raise _Corrupt('tagged fields out of order or past the frame end')",
                 "        last_tag = tag")
        keyword = "if"
        for i, f, wire in tagged:
            src.emit(3, f"{keyword} tag == {f.tag}:")
            run = _Run()
            _read_field(src, 4, wire, f"f{i}", run)
            run.flush_read(src, 4)
            src.emit(4, "if pos != tag_end:",
                     "    raise _Corrupt('tagged field size does not match its value')")
            keyword = "elif"
        if tagged:
            src.emit(3, "else:", "    unknown_list.append((tag, bytes(buf[pos:tag_end])))")
        else:
            src.emit(3, "unknown_list.append((tag, bytes(buf[pos:tag_end])))")
        src.emit(3, "pos = tag_end")
        src.emit(2, "if unknown_list:", "    unknown = tuple(unknown_list)")
    src.emit(1, f"obj = _new({src.const('cls', cls)})")
    for i, f in enumerate(spec.fields):
        set_ = src.const("set", getattr(cls, f.name).__set__)
        value = f"f{i}" if i in on_wire else _default_expr(src, spec, f)
        src.emit(1, f"{set_}(obj, {value})")
    set_unknown = src.const("set", getattr(cls, "unknown_tagged_fields").__set__)
    src.emit(1, f"{set_unknown}(obj, {'unknown' if flexible else '()'})", "return obj, pos")
    src.emit(0, "")

    # writer
    src.emit(0, f"def write_{func}(out, obj):")
    header = len(src.lines)
    run = _Run()
    for _, f, wire in regular:
        _write_field(src, 1, wire, f"obj.{f.name}", run, "out")
    run.flush_write(src, 1, "out")
    if flexible:
        if tagged:
            src.emit(1, "present = []")
        for i, f, wire in tagged:
            src.emit(1, f"f{i} = obj.{f.name}",
                     f"if not {_equals_default(src, f'f{i}', spec.default_of(f))}:",
                     "    tmp = bytearray()")
            run = _Run()
            _write_field(src, 2, wire, f"f{i}", run, "tmp")
            run.flush_write(src, 2, "tmp")
            src.emit(2, f"present.append(({f.tag}, bytes(tmp)))")
        src.emit(1, "unknown = obj.unknown_tagged_fields")
        if tagged:
            src.emit(1, "if unknown:",
                     "    present.extend(unknown)",
                     "    present.sort()",
                     "if present:",
                     "    _write_tags(out, present)",
                     "else:",
                     "    out.append(0)")
        else:
            src.emit(1, "if unknown:",
                     "    _write_tags(out, sorted(unknown))",
                     "else:",
                     "    out.append(0)")
    if len(src.lines) == header:
        src.emit(1, "pass")  # no field in this version
    return src


def _default_expr(src: _Source, spec: StructSpec, f: FieldSpec) -> str:
    """A field's default as generated code: a constant, or a call making a fresh one. A
    default struct holding no list anywhere is immutable (frozen all the way down), so one
    shared instance stands for it: decoding a Fetch response then builds no three default
    structs per partition for its tagged fields."""
    d = spec._default_for(f)
    if d.default_factory is not dataclasses.MISSING:
        value = spec.default_of(f)
        if _immutable(value):
            return src.const("default", value)
        return f"{src.const('make', d.default_factory)}()"
    return src.const("default", d.default)


def _immutable(value: Any) -> bool:
    if isinstance(value, (list, bytearray, memoryview)):
        return False
    if dataclasses.is_dataclass(value):
        return all(_immutable(getattr(value, fld.name)) for fld in dataclasses.fields(value))
    return True


def _equals_default(src: _Source, value: str, default: Any) -> str:
    """An expression true when ``value`` == ``default``, for the tagged-field test of the
    writers: a default struct is compared field by field inline (its dataclass __eq__ is a
    Python call, three per partition of a Fetch response)."""
    if default is None:
        return f"{value} is None"
    if dataclasses.is_dataclass(default):
        cls = src.const("cls", type(default))
        tests = [_equals_default(src, f"{value}.{fld.name}", getattr(default, fld.name))
                 for fld in dataclasses.fields(default)]
        return f"(type({value}) is {cls} and {' and '.join(tests)})"
    return f"{value} == {src.const('default', default)}"


class MessageSpec(StructSpec):
    """A top-level schema: a request, a response, a metadata record or a data struct."""

    def __init__(self, name: str, table: tuple) -> None:
        api_key, kind, valid, flexible_min, unstable, listeners, fields = table
        self.api_key: int = api_key
        self.kind: str = kind
        self.min_version, self.max_version = valid
        self.flexible_min: int | None = flexible_min
        self.latest_version_unstable: bool = unstable
        self.listeners: tuple[str, ...] = listeners
        super().__init__(name, fields, None)
        self.cls.SCHEMA = self
        # by version alone: one dict lookup per message on the request path
        self._readers: dict[int, Reader] = {}
        self._writers: dict[int, Writer] = {}

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise ValueError(f"{self.name} has no version {version} "
                             f"(valid {self.min_version}-{self.max_version})")

    def reader(self, version: int) -> Reader:
        reader = self._readers.get(version)
        if reader is None:
            reader = self._readers[version] = self.codec(version, self.is_flexible(version))[0]
        return reader

    def writer(self, version: int) -> Writer:
        writer = self._writers.get(version)
        if writer is None:
            writer = self._writers[version] = self.codec(version, self.is_flexible(version))[1]
        return writer


_SPECS: dict[str, MessageSpec] = {}


def spec_for(name: str) -> MessageSpec:
    spec = _SPECS.get(name)
    if spec is None:
        table = _schemas.SCHEMAS.get(name)
        if table is None:
            raise AttributeError(name)
        spec = _SPECS[name] = MessageSpec(name, table)
    return spec


def schema_names() -> list[str]:
    return sorted(_schemas.SCHEMAS)


def decode_body(spec: MessageSpec, version: int, buf: Frame, pos: int = 0,
                exact: bool = True) -> tuple[Any, int]:
    """Decode one body; ``exact`` refuses trailing bytes. Malformed -> CorruptFrameError."""
    try:
        obj, end = spec.reader(version)(buf, pos)
    except CorruptFrameError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError, TypeError) as e:
        raise CorruptFrameError(f"malformed {spec.name} v{version}: {e}") from None
    if exact and end != len(buf):
        raise CorruptFrameError(f"{len(buf) - end} trailing bytes after {spec.name} v{version}")
    return obj, end


def encode_message(obj: Any, version: int) -> bytes:
    """Encode a bare body (a data schema, a metadata record, or a message without header)."""
    spec: MessageSpec = type(obj).SCHEMA
    spec.check_version(version)
    out = bytearray()
    spec.writer(version)(out, obj)
    return bytes(out)


def decode_message(cls: type[_M], version: int, data: bytes, exact: bool = True, pos: int = 0) -> _M:
    """Decode a bare body starting at ``pos`` (read in place); ``exact`` refuses trailing
    bytes. Malformed -> CorruptFrameError."""
    spec: MessageSpec = cls.SCHEMA  # type: ignore[attr-defined]
    if not spec.min_version <= version <= spec.max_version:
        raise CorruptFrameError(f"{spec.name} has no version {version}")
    return decode_body(spec, version, data, pos, exact)[0]
