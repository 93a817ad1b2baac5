"""Waiting in tests: poll a condition until a deadline (backing off), never a fixed sleep."""

import time

import pytest


def wait_until(predicate, timeout=60.0, what="condition", explain=None):
    """The first truthy value of ``predicate()``; on timeout fail naming ``what`` (plus ``explain()``, if given)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    pytest.fail("timed out after %ss waiting for %s%s" % (timeout, what, ("\n" + explain()) if explain else ""))
