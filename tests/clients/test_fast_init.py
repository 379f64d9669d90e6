"""clients/frozen.py: a frozen dataclass with ``fast_init`` is the same class, built faster."""
from __future__ import annotations

import dataclasses

import pytest

from clients.frozen import fast_init


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: list = dataclasses.field(default_factory=list)


def test_the_same_parameters_defaults_and_values() -> None:
    assert Fast(1) == Fast(1, "b", []) and Fast(1).c is not Fast(1).c
    assert Fast(2, c=[3]).c == [3] and Fast(a=4, b="x").b == "x"
    assert repr(Fast(1)) == "Fast(a=1, b='b', c=[])"
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, "b", [], 4)  # type: ignore[call-arg]


def test_still_frozen() -> None:
    f = Fast(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.a = 2  # type: ignore[misc]
    assert dataclasses.replace(f, a=2) == Fast(2)


def test_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass
    with pytest.raises(AssertionError):
        fast_init(Post)
