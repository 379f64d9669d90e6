"""Hypothesis strategies that build any Kafka message at any version from the schema tables."""
from __future__ import annotations

import uuid

from hypothesis import strategies as st

from clients.protocol import _codec
from clients.protocol._codec import FieldSpec, StructSpec, _in

_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _primitive(ftype: str, nullable: bool) -> st.SearchStrategy:
    if ftype in _INT_RANGES:
        bits = _INT_RANGES[ftype]
        s = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif ftype == "uint16":
        s = st.integers(0, 0xFFFF)
    elif ftype == "uint32":
        s = st.integers(0, 0xFFFFFFFF)
    elif ftype == "float64":
        s = st.floats(allow_nan=False)
    elif ftype == "bool":
        s = st.booleans()
    elif ftype == "string":
        s = st.text(max_size=12)
    elif ftype in ("bytes", "records"):
        s = st.binary(max_size=24)
    elif ftype == "uuid":
        s = st.builds(lambda i: uuid.UUID(int=i), st.integers(0, (1 << 128) - 1))
    else:
        raise AssertionError(ftype)
    return st.one_of(st.none(), s) if nullable else s


def struct_strategy(spec: StructSpec, version: int, flexible: bool, depth: int = 0) -> st.SearchStrategy:
    kwargs = {}
    for f in spec.fields:
        if not _in(f.versions, version):
            continue
        kwargs[f.name] = _field_strategy(spec, f, version, flexible, depth)
    return st.builds(spec.cls, unknown_tagged_fields=st.just(()), **kwargs)


def _field_strategy(spec: StructSpec, f: FieldSpec, version: int, flexible: bool, depth: int) -> st.SearchStrategy:
    nullable = _in(f.nullable, version)
    if f.sub_fields is not None:
        elem = struct_strategy(spec.children[f.name], version, flexible, depth + 1)
        if f.is_array:
            s = st.lists(elem, max_size=2 if depth < 2 else 1)
        else:
            s = elem
    elif f.is_array:
        s = st.lists(_primitive(f.element_type, False), max_size=3)
    else:
        return _primitive(f.type, nullable)
    return st.one_of(st.none(), s) if nullable else s


def message_strategy(name: str, version: int) -> st.SearchStrategy:
    spec = _codec.spec_for(name)
    return struct_strategy(spec, version, spec.is_flexible(version))
