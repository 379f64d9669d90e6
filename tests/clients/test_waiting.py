"""clients/waiting.py: wait_until returns the probe's first truthy value, treats the
listed errors as "not yet", and names what it waited for when time runs out."""
from __future__ import annotations

import pytest

from clients.waiting import WaitTimeout, wait_until


def test_returns_the_first_truthy_value_after_retriable_errors() -> None:
    answers = iter([ConnectionRefusedError("restarting"), ValueError("half a frame"), 0, [], "up"])

    def probe():
        a = next(answers)
        if isinstance(a, BaseException):
            raise a
        return a

    assert wait_until(probe, 30, "the node", interval_s=0.001) == "up"


def test_timeout_names_the_condition_and_the_last_error() -> None:
    def probe():
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(WaitTimeout, match=r"waiting for broker 3.*nobody home") as info:
        wait_until(probe, 0, "broker 3", interval_s=0.001)
    assert isinstance(info.value, AssertionError)      # a timed-out test fails, not errors


def test_other_errors_are_not_swallowed() -> None:
    def probe():
        raise KeyError("a bug in the probe")

    with pytest.raises(KeyError):
        wait_until(probe, 30, "anything", interval_s=0.001)
    # ... unless the caller says they mean "not yet" (the chaos harness does for KeyError).
    with pytest.raises(WaitTimeout, match="KeyError"):
        wait_until(probe, 0, "anything", interval_s=0.001, retry_on=(KeyError,))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        wait_until(lambda: True, 1, "x", interval_s=0)
