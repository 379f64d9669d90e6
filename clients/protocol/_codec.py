"""One generic, schema-driven codec for every Kafka message.

Theory of operation
-------------------
``_schemas.SCHEMAS`` (generated from Kafka's JSON specs) describes each message as a tree of
fields with version ranges. For one (schema, version) pair this module *compiles* the tree
once into a reader and a writer: closures that already know, for that version, which fields
exist, which are nullable, which travel in the tagged-field section and whether strings,
bytes and arrays use the classic (int16/int32 length) or compact (unsigned varint length+1)
encoding. Compiled pairs are cached, so decoding a request costs one closure call per
field and no per-field version checks.

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
import struct
import uuid
from typing import Any, Callable, TypeVar

from clients.frozen import slot_init
from clients.protocol import _schemas
from clients.protocol.types import (
    FLOAT64, INT8, INT16, INT32, INT64, UINT16, UINT32, ZERO_UUID, CorruptFrameError,
    read_uvarint, write_uvarint,
)

# A frame being decoded: bytes, or the connection's own bytearray (decoded in place).
Frame = bytes | bytearray
Reader = Callable[[Frame, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]
_M = TypeVar("_M")  # a message class from clients.protocol.messages (typed by messages.pyi)

_FIXED = {
    "int8": INT8, "int16": INT16, "uint16": UINT16, "int32": INT32, "uint32": UINT32,
    "int64": INT64, "float64": FLOAT64,
}
_FIXED_CODE = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "float64": "d"}
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


# ---------------------------------------------------------------- primitive readers/writers

def _read_bool(buf: Frame, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise CorruptFrameError("truncated bool")
    return buf[pos] != 0, pos + 1


def _write_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


def _fixed_reader(s: struct.Struct) -> Reader:
    unpack_from = s.unpack_from
    size = s.size

    def read(buf: Frame, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size
    return read


def _fixed_writer(s: struct.Struct) -> Writer:
    pack = s.pack

    def write(out: bytearray, v: Any) -> None:
        out += pack(v)
    return write


def _read_uuid(buf: Frame, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise CorruptFrameError("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _write_uuid(out: bytearray, v: uuid.UUID) -> None:
    out += v.bytes


def _length_reader(compact: bool, short: bool) -> Callable[[Frame, int], tuple[int, int]]:
    """Length prefix: -1 means null. Classic strings use int16, bytes/arrays int32."""
    if compact:
        def read(buf: Frame, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos
        return read
    unpack_from = (INT16 if short else INT32).unpack_from
    size = 2 if short else 4

    def read_classic(buf: Frame, pos: int) -> tuple[int, int]:
        return unpack_from(buf, pos)[0], pos + size
    return read_classic


def _length_writer(compact: bool, short: bool) -> Writer:
    if compact:
        def write(out: bytearray, n: int) -> None:
            write_uvarint(out, n + 1)
        return write
    pack = (INT16 if short else INT32).pack

    def write_classic(out: bytearray, n: int) -> None:
        out += pack(n)
    return write_classic


def _string_codec(compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    read_len = _length_reader(compact, short=True)
    write_len = _length_writer(compact, short=True)

    def read(buf: Frame, pos: int) -> tuple[str | None, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise CorruptFrameError("null or negative-length string where not allowed")
        end = pos + n
        if end > len(buf):
            raise CorruptFrameError("string runs past the end of the frame")
        return str(buf[pos:end], "utf-8"), end

    def write(out: bytearray, v: str | None) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null string in a non-nullable field")
            write_len(out, -1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        write_len(out, len(data))
        out += data
    return read, write


def _bytes_codec(compact: bool, nullable: bool, records: bool) -> tuple[Reader, Writer]:
    read_len = _length_reader(compact, short=False)
    write_len = _length_writer(compact, short=False)

    def read(buf: Frame, pos: int) -> tuple[bytes | memoryview | None, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise CorruptFrameError("null or negative-length bytes where not allowed")
        end = pos + n
        if end > len(buf):
            raise CorruptFrameError("bytes run past the end of the frame")
        if records:
            # Zero-copy: a view into the frame. Over a bytearray frame (ServerConnection)
            # the broker can stamp offsets into it in place before writing it to the log.
            return memoryview(buf)[pos:end], end
        return bytes(buf[pos:end]), end

    def write(out: bytearray, v: Any) -> None:
        if v is None:
            if nullable:
                write_len(out, -1)
                return
            if records:  # Kafka writes an absent non-nullable record set as empty
                write_len(out, 0)
                return
            raise ValueError("null bytes in a non-nullable field")
        write_len(out, len(v))
        if records and not isinstance(v, (bytes, bytearray, memoryview)):
            # A file region: the caller splices it in (encode_parts).
            assert isinstance(out, _Out), "records region outside encode_parts"
            out.regions.append((len(out), v))
            return
        out += v
    return read, write


def _array_codec(elem_read: Reader, elem_write: Writer, compact: bool, nullable: bool,
                 fixed_code: str | None) -> tuple[Reader, Writer]:
    read_len = _length_reader(compact, short=False)
    write_len = _length_writer(compact, short=False)
    fixed_size = struct.calcsize(">" + fixed_code) if fixed_code else 0

    def read(buf: Frame, pos: int) -> tuple[list | None, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise CorruptFrameError("null or negative-length array where not allowed")
        if n > len(buf) - pos:  # every element takes at least one byte
            raise CorruptFrameError("array count larger than the frame")
        if fixed_code:
            end = pos + n * fixed_size
            if end > len(buf):
                raise CorruptFrameError("array runs past the end of the frame")
            return list(struct.unpack_from(">%d%s" % (n, fixed_code), buf, pos)), end
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            v, pos = elem_read(buf, pos)
            append(v)
        return items, pos

    def write(out: bytearray, v: list | None) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null array in a non-nullable field")
            write_len(out, -1)
            return
        write_len(out, len(v))
        if fixed_code:
            out += struct.pack(">%d%s" % (len(v), fixed_code), *v)
            return
        for item in v:
            elem_write(out, item)
    return read, write


def _primitive_codec(ftype: str, compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    if ftype in _FIXED:
        s = _FIXED[ftype]
        return _fixed_reader(s), _fixed_writer(s)
    if ftype == "bool":
        return _read_bool, _write_bool
    if ftype == "uuid":
        return _read_uuid, _write_uuid
    if ftype == "string":
        return _string_codec(compact, nullable)
    if ftype in ("bytes", "records"):
        return _bytes_codec(compact, nullable, records=(ftype == "records"))
    raise AssertionError(f"unknown primitive type {ftype}")


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

    def _field_codec(self, f: FieldSpec, version: int, flexible: bool) -> tuple[Reader, Writer]:
        nullable = _in(f.nullable, version)
        elem = f.element_type
        if f.sub_fields is not None:
            er, ew = self.children[f.name].codec(version, flexible)
            if not f.is_array and nullable:
                er, ew = _nullable_struct(er, ew)
        else:
            er, ew = _primitive_codec(elem, flexible, nullable and not f.is_array)
        if f.is_array:
            fixed = _FIXED_CODE.get(elem) if f.sub_fields is None else None
            return _array_codec(er, ew, flexible, nullable, fixed)
        return er, ew

    def _compile(self, version: int, flexible: bool) -> tuple[Reader, Writer]:
        cls = self.cls
        regular: list[tuple[str, Reader, Writer]] = []
        tagged: dict[int, tuple[str, Reader, Writer, Any]] = {}
        for f in self.fields:
            if not _in(f.versions, version):
                continue
            r, w = self._field_codec(f, version, flexible)
            if flexible and _in(f.tagged, version):
                assert f.tag is not None
                tagged[f.tag] = (f.name, r, w, self.default_of(f))
            else:
                regular.append((f.name, r, w))
        tag_order = sorted(tagged)
        # Decoding fills a new instance through the slot descriptors (the class is frozen),
        # without building keyword arguments: the regular fields in wire order, then every
        # other field (absent from this version, or tagged and not sent) at its default.
        new = object.__new__
        reads = tuple((getattr(cls, name).__set__, r) for name, r, _ in regular)
        tagged_reads = {tag: (getattr(cls, t[0]).__set__, t[1]) for tag, t in tagged.items()}
        read_names = {name for name, _, _ in regular}
        defaults, factories = [], []
        for f in self.fields:
            if f.name in read_names:
                continue
            d = self._default_for(f)
            if d.default_factory is not dataclasses.MISSING:
                factories.append((getattr(cls, f.name).__set__, d.default_factory))
            else:
                defaults.append((getattr(cls, f.name).__set__, d.default))
        defaults.append((getattr(cls, "unknown_tagged_fields").__set__, ()))
        set_unknown = defaults[-1][0]

        def fresh() -> Any:
            obj = new(cls)
            for set_, value in defaults:
                set_(obj, value)
            for set_, make in factories:
                set_(obj, make())
            return obj

        if not flexible:
            def read(buf: Frame, pos: int) -> tuple[Any, int]:
                obj = fresh()
                for set_, r in reads:
                    value, pos = r(buf, pos)
                    set_(obj, value)
                return obj, pos

            def write(out: bytearray, obj: Any) -> None:
                for name, _, w in regular:
                    w(out, getattr(obj, name))
            return read, write

        def read_flexible(buf: Frame, pos: int) -> tuple[Any, int]:
            obj = fresh()
            for set_, r in reads:
                value, pos = r(buf, pos)
                set_(obj, value)
            count, pos = read_uvarint(buf, pos)
            unknown = []
            last_tag = -1
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if tag <= last_tag or end > len(buf):
                    raise CorruptFrameError("tagged fields out of order or past the frame end")
                last_tag = tag
                known = tagged_reads.get(tag)
                if known is None:
                    unknown.append((tag, bytes(buf[pos:end])))
                else:
                    value, after = known[1](buf, pos)
                    if after != end:
                        raise CorruptFrameError("tagged field size does not match its value")
                    known[0](obj, value)
                pos = end
            if unknown:
                set_unknown(obj, tuple(unknown))
            return obj, pos

        def write_flexible(out: bytearray, obj: Any) -> None:
            for name, _, w in regular:
                w(out, getattr(obj, name))
            present: list[tuple[int, bytes]] = []
            for tag in tag_order:
                name, _, w, default = tagged[tag]
                v = getattr(obj, name)
                if v != default:
                    tmp = bytearray()
                    w(tmp, v)
                    present.append((tag, bytes(tmp)))
            if obj.unknown_tagged_fields:
                present.extend(obj.unknown_tagged_fields)
                present.sort()
            write_uvarint(out, len(present))
            for tag, data in present:
                write_uvarint(out, tag)
                write_uvarint(out, len(data))
                out += data
        return read_flexible, write_flexible


def _descendants(spec: StructSpec):
    for child in spec.children.values():
        yield child.name, child.cls
        yield from _descendants(child)


def _nullable_struct(er: Reader, ew: Writer) -> tuple[Reader, Writer]:
    """A nullable single struct is prefixed by an int8: -1 null, 1 present."""
    def read(buf: Frame, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise CorruptFrameError("truncated struct marker")
        marker = INT8.unpack_from(buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return er(buf, pos + 1)

    def write(out: bytearray, v: Any) -> None:
        if v is None:
            out += INT8.pack(-1)
            return
        out += INT8.pack(1)
        ew(out, v)
    return read, write


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

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise ValueError(f"{self.name} has no version {version} "
                             f"(valid {self.min_version}-{self.max_version})")

    def reader(self, version: int) -> Reader:
        return self.codec(version, self.is_flexible(version))[0]

    def writer(self, version: int) -> Writer:
        return self.codec(version, self.is_flexible(version))[1]


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
    except (struct.error, UnicodeDecodeError, ValueError, OverflowError, TypeError) as e:
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


def decode_message(cls: type[_M], version: int, data: bytes, exact: bool = True) -> _M:
    """Decode a bare body; ``exact`` refuses trailing bytes. Malformed -> CorruptFrameError."""
    spec: MessageSpec = cls.SCHEMA  # type: ignore[attr-defined]
    if not spec.min_version <= version <= spec.max_version:
        raise CorruptFrameError(f"{spec.name} has no version {version}")
    return decode_body(spec, version, data, exact=exact)[0]
