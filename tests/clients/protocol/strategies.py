"""Hypothesis strategies that build any Kafka message at any version from the schema tables."""
from __future__ import annotations

import random
import uuid
from typing import Any

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


# ------------------------------------------------------------------ seeded random instances
# The same shapes as the strategies above, drawn from a random.Random: cheap enough to build
# several instances of every schema at every version in one test (no Hypothesis engine).

def _random_primitive(ftype: str, nullable: bool, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.2:
        return None
    if ftype in _INT_RANGES:
        bits = _INT_RANGES[ftype]
        return rng.choice([0, -1, 1, rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)])
    if ftype == "uint16":
        return rng.randint(0, 0xFFFF)
    if ftype == "uint32":
        return rng.randint(0, 0xFFFFFFFF)
    if ftype == "float64":
        return rng.uniform(-1e9, 1e9)
    if ftype == "bool":
        return rng.random() < 0.5
    if ftype == "string":
        # lengths about 127 now and then: a compact length at the edge of one varint byte
        size = rng.choice([0, 1, 5, 126, 127, 130])
        alphabet = "ab-_." if size > 100 else "ab\u00e9\u4e2d-_."  # long: exact byte sizes
        return "".join(rng.choice(alphabet) for _ in range(size))
    if ftype in ("bytes", "records"):
        return rng.randbytes(rng.choice([0, 3, 127, 200]))
    if ftype == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(ftype)


def random_struct(spec: StructSpec, version: int, flexible: bool, rng: random.Random,
                  depth: int = 0) -> Any:
    kwargs: dict[str, Any] = {}
    for f in spec.fields:
        if not _in(f.versions, version):
            continue
        nullable = _in(f.nullable, version)
        if nullable and (f.is_array or f.sub_fields is not None) and rng.random() < 0.2:
            kwargs[f.name] = None
        elif f.sub_fields is not None:
            child = spec.children[f.name]
            if f.is_array:
                count = rng.randint(0, 3 if depth < 2 else 1)
                kwargs[f.name] = [random_struct(child, version, flexible, rng, depth + 1)
                                  for _ in range(count)]
            else:
                kwargs[f.name] = random_struct(child, version, flexible, rng, depth + 1)
        elif f.is_array:
            kwargs[f.name] = [_random_primitive(f.element_type, False, rng)
                              for _ in range(rng.randint(0, 4))]
        else:
            kwargs[f.name] = _random_primitive(f.type, nullable, rng)
    if flexible and rng.random() < 0.3:
        # tags no schema knows, in order: kept and written back
        kwargs["unknown_tagged_fields"] = ((1000, rng.randbytes(2)), (1001 + rng.randint(0, 200), b""))
    return spec.cls(**kwargs)


def random_message(name: str, version: int, rng: random.Random) -> Any:
    spec = _codec.spec_for(name)
    return random_struct(spec, version, spec.is_flexible(version), rng)
