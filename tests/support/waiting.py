"""Waiting for a condition instead of sleeping blindly: a bounded poll that says what it waited for when it fails."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.5, done: Callable[[T], bool] = bool
) -> T:
    """condition() until done(its value) (by default: until the value is truthy), at most `timeout_s` seconds;
    returns that value. At the timeout, raises AssertionError naming `what` it waited for and the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if done(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what}; last value: {value!r}")
        time.sleep(interval_s)
