"""The generated type stub (clients/protocol/messages.pyi) and the run-time classes agree.

The stub is what a type checker reads instead of messages.py, whose classes are built at
run time from the schema tables. These tests read the stub with ``ast`` and hold it to the
run time, both ways:

- the same message classes, nested classes and reachable aliases; the same fields in the
  same order; the constructor's parameters are the fields, each with a default;
- every value a class really holds (its defaults, what hypothesis builds from the schema
  at every version, and what decoding those bytes gives back) has the field's stub type,
  and a field admits None in the stub exactly where the codec may hold None in it.

(Freshness, stub against the JSON schemas, is test_codec's ``--check`` test.)
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.protocol import _codec, decode_message, encode_message, messages
from tests.clients.protocol.strategies import message_strategy

STUB = pathlib.Path(messages.__file__).with_suffix(".pyi")


@dataclasses.dataclass
class StubClass:
    name: str
    path: str                                  # dotted name inside the module
    fields: dict[str, ast.expr]                # in declaration order
    init: list[tuple[str, ast.expr, bool]]     # (name, annotation, has a default)
    nested: dict[str, StubClass]
    aliases: dict[str, str]                    # name -> dotted path below this class
                                               # (``X: TypeAlias = A.X``, usable as a type)
    has_schema: bool


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    assert isinstance(node, ast.Attribute), ast.dump(node)
    return f"{_dotted(node.value)}.{node.attr}"


def _read_class(node: ast.ClassDef, prefix: str) -> StubClass:
    path = prefix + node.name
    c = StubClass(node.name, path, {}, [], {}, {}, False)
    for item in node.body:
        if isinstance(item, ast.AnnAssign):
            name = item.target.id  # type: ignore[attr-defined]
            if isinstance(item.annotation, ast.Name) and item.annotation.id == "TypeAlias":
                assert item.value is not None
                c.aliases[name] = _dotted(item.value)
            elif name == "SCHEMA":
                c.has_schema = True
            elif name != "__dataclass_fields__":
                c.fields[name] = item.annotation
        elif isinstance(item, ast.FunctionDef):
            assert item.name == "__init__", f"{path}.{item.name}"
            args = item.args
            assert not args.posonlyargs and not args.kwonlyargs and not args.vararg
            defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
            assert args.args[0].arg == "self"
            c.init = [(a.arg, a.annotation, d is not None)
                      for a, d in zip(args.args[1:], defaults[1:])]
        elif isinstance(item, ast.ClassDef):
            c.nested[item.name] = _read_class(item, path + ".")
        else:
            raise AssertionError(f"unexpected statement in {path}: {ast.dump(item)}")
    return c


def _read_stub() -> dict[str, StubClass]:
    tree = ast.parse(STUB.read_text(), str(STUB))
    return {n.name: _read_class(n, "") for n in tree.body
            if isinstance(n, ast.ClassDef) and not n.name.startswith("_")}


STUB_CLASSES = _read_stub()


def _resolve(path: str) -> StubClass:
    """A dotted path (``FetchResponse.FetchableTopicResponse``) -> its stub class."""
    head, *rest = path.split(".")
    c = STUB_CLASSES[head]
    for part in rest:
        c = c.nested[part] if part in c.nested else _resolve(f"{c.path}.{c.aliases[part]}")
    return c


def _nested_classes(cls: type) -> dict[str, type]:
    return {k: v for k, v in vars(cls).items()
            if isinstance(v, type) and dataclasses.is_dataclass(v)}


# ------------------------------------------------------------------ shape: both ways

def test_the_stub_declares_every_message_class_and_no_other() -> None:
    assert sorted(STUB_CLASSES) == _codec.schema_names() == sorted(dir(messages))
    # the coordinator record layouts are among them (broker/group/records.py uses them)
    for name in ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey",
                 "GroupMetadataValue", "TransactionLogValue"):
        assert name in STUB_CLASSES


def _agree(stub: StubClass, cls: type, top: bool) -> None:
    where = stub.path
    assert cls.__name__ == stub.name, where
    runtime_fields = [f.name for f in dataclasses.fields(cls)]
    assert runtime_fields == list(stub.fields), where
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [name for name, _, _ in stub.init], where
    assert all(p.default is not inspect.Parameter.empty for p in params), where
    assert all(has_default for _, _, has_default in stub.init), where
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params), where
    for name, annotation, _ in stub.init:        # the constructor takes what the field holds
        assert ast.dump(annotation) == ast.dump(stub.fields[name]), f"{where}.{name}"
    assert ("SCHEMA" in vars(cls)) == top == stub.has_schema, where
    nested = _nested_classes(cls)
    assert sorted(nested) == sorted([*stub.nested, *stub.aliases]), where
    for name, child in stub.nested.items():
        _agree(child, nested[name], top=False)
    for name, target in stub.aliases.items():
        _agree(_resolve(f"{stub.path}.{target}"), nested[name], top=False)


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_stub_class_matches_the_runtime_class(name: str) -> None:
    _agree(STUB_CLASSES[name], getattr(messages, name), top=True)


def _holds_none(ann: ast.expr) -> bool:
    if isinstance(ann, ast.BinOp):
        return _holds_none(ann.left) or _holds_none(ann.right)
    return isinstance(ann, ast.Constant) and ann.value is None


def _none_agrees(stub: StubClass, spec: _codec.StructSpec) -> None:
    """``X | None`` exactly where the codec reads or defaults a field to None: a version
    makes it nullable, its default is null, or it is a record set (default: none)."""
    for f in spec.fields:
        may_be_none = (f.nullable is not None or f.default == "null"
                       or f.type == "records")
        assert _holds_none(stub.fields[f.name]) == may_be_none, f"{stub.path}.{f.name}"
    for child in spec.children.values():
        _none_agrees(stub.nested[child.name], child)


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_none_is_allowed_exactly_where_the_codec_allows_it(name: str) -> None:
    _none_agrees(STUB_CLASSES[name], _codec.spec_for(name))


def test_a_nested_alias_is_the_class_the_runtime_sets() -> None:
    assert STUB_CLASSES["FetchResponse"].aliases["PartitionData"] == \
        "FetchableTopicResponse.PartitionData"
    assert messages.FetchResponse.PartitionData is \
        messages.FetchResponse.FetchableTopicResponse.PartitionData


# ------------------------------------------------------------------ types: values conform

_EXACT = {"int": int, "float": float, "str": str, "bytes": bytes, "bool": bool}


def _conforms(value: Any, ann: ast.expr) -> bool:
    """Does ``value`` have the stub type ``ann``? Exact types: an int field holds no bool."""
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _conforms(value, ann.left) or _conforms(value, ann.right)
    if isinstance(ann, ast.Constant) and ann.value is None:
        return value is None
    if isinstance(ann, ast.Subscript):
        assert _dotted(ann.value) == "list", ast.dump(ann)
        return isinstance(value, list) and all(_conforms(v, ann.slice) for v in value)
    name = _dotted(ann)
    if name in _EXACT:
        return type(value) is _EXACT[name]
    if name == "uuid.UUID":
        return isinstance(value, uuid.UUID)
    if name == "_Records":
        return isinstance(value, (bytes, bytearray, memoryview))
    stub = _resolve(name)
    if type(value).__name__ != stub.name or not dataclasses.is_dataclass(value):
        return False
    _check_values(value, stub)
    return True


def _check_values(obj: Any, stub: StubClass) -> None:
    for name, ann in stub.fields.items():
        value = getattr(obj, name)
        if name == "unknown_tagged_fields":
            assert isinstance(value, tuple) and all(
                type(t) is int and type(b) is bytes for t, b in value), stub.path
            continue
        assert _conforms(value, ann), \
            f"{stub.path}.{name} = {value!r} is not {ast.unparse(ann)}"


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_defaults_have_the_stub_types(name: str) -> None:
    _check_values(getattr(messages, name)(), STUB_CLASSES[name])


def _any_version(name: str) -> st.SearchStrategy:
    spec = _codec.spec_for(name)
    return st.integers(spec.min_version, spec.max_version).flatmap(
        lambda v: st.tuples(st.just(v), message_strategy(name, v)))


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_built_and_decoded_values_have_the_stub_types(name: str, data: st.DataObject) -> None:
    version, obj = data.draw(_any_version(name))
    stub = STUB_CLASSES[name]
    _check_values(obj, stub)
    decoded = decode_message(type(obj), version, encode_message(obj, version))
    _check_values(decoded, stub)


def test_the_type_check_can_fail() -> None:
    """The checks above are not vacuous: a wrong value type or a missing field is caught."""
    stub = STUB_CLASSES["ProduceRequest"]
    bad = messages.ProduceRequest(acks="all")  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="acks"):
        _check_values(bad, stub)
    wrong_nested = messages.ProduceRequest(topic_data=[messages.FetchRequest.FetchTopic()])
    with pytest.raises(AssertionError, match="topic_data"):
        _check_values(wrong_nested, stub)
    nullable = messages.ProduceRequest(transactional_id=None)
    _check_values(nullable, stub)
    not_nullable = messages.ProduceRequest(acks=None)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="acks"):
        _check_values(not_nullable, stub)
    fewer = dataclasses.replace(stub, fields=dict(list(stub.fields.items())[1:]))
    with pytest.raises(AssertionError):
        _agree(fewer, messages.ProduceRequest, top=True)


def test_the_api_key_stub_names_the_runtime_members() -> None:
    # api_keys.pyi is what a type checker sees of the ApiKey enum built at run time.
    from clients.protocol import api_keys
    tree = ast.parse(pathlib.Path(api_keys.__file__).with_suffix(".pyi").read_text())
    enum_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ApiKey")
    stub = {a.targets[0].id: a.value.value for a in enum_class.body   # type: ignore[attr-defined]
            if isinstance(a, ast.Assign)}
    assert stub == {k.name: k.value for k in api_keys.ApiKey}
