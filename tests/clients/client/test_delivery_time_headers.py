"""``send(..., deliver_at=, deliver_after=)``: the delayed-delivery header it adds (issue 18)."""
from __future__ import annotations

import pytest

from clients._core.delayed import DELIVER_AFTER, DELIVER_AT, with_delivery_time


@pytest.mark.parametrize("headers, at, after, out", [
    (None, None, None, None),
    ([("a", b"1")], None, None, [("a", b"1")]),
    (None, 1_700_000_000_123, None, [(DELIVER_AT, b"1700000000123")]),
    ([("a", None)], None, 0, [("a", None), (DELIVER_AFTER, b"0")]),
    ((), None, 900_000, [(DELIVER_AFTER, b"900000")]),
])
def test_the_header_added(headers, at, after, out) -> None:
    assert with_delivery_time(headers, at, after) == out


@pytest.mark.parametrize("at, after", [(1, 1), (-1, None), (None, -5), (1.5, None), (True, None),
                                       ("10", None)])
def test_bad_arguments_raise(at, after) -> None:
    with pytest.raises(ValueError):
        with_delivery_time(None, at, after)
