"""The collection's one duration parser (drainTimeout, reconcilePeriod, the operator's flags)."""

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.api import durations


@pytest.mark.parametrize("value, seconds", [
    ("30m", 1800), ("1h30m", 5400), ("90s", 90), ("1800", 1800), (600, 600), ("1h0m0s", 3600), ("500ms", 0.5),
    ("250ms", 0.25), ("1.5h", 5400), (15, 15), ("10m", 600), ("45s", 45), ("30", 30), (2.5, 2.5), ("1us", 1e-6),
    ("2\u00b5s", 2e-6),
])
def test_go_durations_and_plain_seconds(value, seconds):
    assert durations.seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "30 m", "m30", "1d", "30m;", "-5s", "10x", "m", "5s3", -1, True, None])
def test_anything_else_is_refused(value):
    with pytest.raises(ValueError, match="duration"):
        durations.seconds(value)
