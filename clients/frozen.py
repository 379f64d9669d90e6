"""Frozen dataclasses built at an unfrozen one's cost.

A ``@dataclass(frozen=True)``'s generated ``__init__`` stores each field through
``object.__setattr__`` (its own ``__setattr__`` raises), which makes building one 2.5-5x
slower than an unfrozen class: a few microseconds for a ten-field result. On the broker's
request path some are built per partition per request (a read's result, a follower's
fetch position), so a leader's follower fetches paid that for every idle partition of
their sessions. ``slot_init`` writes an ``__init__`` that stores each field through its
slot's descriptor instead, with the same parameters and defaults; the class stays frozen
(assigning a field still raises ``FrozenInstanceError``), hashable or not as before.
``fast_init`` is the decorator form, under ``@dataclass(frozen=True, slots=True)``.
The generated protocol messages use it too (clients/protocol/_codec.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

__all__ = ["fast_init", "slot_init"]

T = TypeVar("T")


def slot_init(cls: Any) -> Callable[..., None]:
    """An ``__init__`` for the frozen, slotted dataclass ``cls`` that stores each field
    through its slot descriptor. Only plain fields: no ``__post_init__``, ``InitVar``,
    ``init=False`` or keyword-only fields (asserted)."""
    assert "__slots__" in cls.__dict__ and cls.__dataclass_params__.frozen, cls
    assert not hasattr(cls, "__post_init__"), cls
    env: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    params, body = [], []
    for f in dataclasses.fields(cls):
        assert f.init and not f.kw_only, (cls, f.name)
        name = f.name
        env[f"_set_{name}"] = cls.__dict__[name].__set__
        if f.default_factory is not dataclasses.MISSING:
            env[f"_make_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f"    _set_{name}(self, _make_{name}() if {name} is _MISSING else {name})")
        elif f.default is not dataclasses.MISSING:
            env[f"_default_{name}"] = f.default
            params.append(f"{name}=_default_{name}")
            body.append(f"    _set_{name}(self, {name})")
        else:
            params.append(name)
            body.append(f"    _set_{name}(self, {name})")
    source = (f"def __init__(self, {', '.join(params)}) -> None:\n"
              + ("\n".join(body) if body else "    pass") + "\n")
    exec(source, env)  # noqa: S102 - generated from the class's field names only
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def fast_init(cls: type[T]) -> type[T]:
    """Class decorator: ``cls.__init__ = slot_init(cls)`` (see the module docstring)."""
    cls.__init__ = slot_init(cls)  # type: ignore[misc]
    return cls
