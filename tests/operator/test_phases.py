"""Where a role run's time goes: phases from the monotonic stamps the child and the callback write. Pure."""

import pytest

from soperator_operator.runner import PHASES, run_phases

EVENTS = [
    {"event": "child", "t": 10.05},
    {"event": "play", "t": 10.45},
    {"event": "task", "task": "Exactly one source of definition is given", "t": 10.50},
    {"event": "task", "task": "Read the definition", "t": 10.60},
    {"event": "task", "task": "Converge the cluster", "t": 10.70},
    {"event": "ok", "task": "Converge the cluster", "t": 11.30,
     "res": {"ready": False, "timings": {"observe": 0.1, "render": 0.05, "apply": 0.2, "status": 0.05}}},
    {"event": "stats", "stats": {"changed": 0}, "t": 11.32},
]


def test_phases_add_up_to_the_run():
    phases = run_phases(EVENTS, started=10.0, ended=11.4)
    assert set(phases) == set(PHASES)
    assert phases["fork"] == pytest.approx(0.05)
    assert phases["play start"] == pytest.approx(0.4)
    assert phases["preflight tasks"] == pytest.approx(0.25)
    assert phases["task worker"] == pytest.approx(0.2)   # 0.6 s for the task, 0.4 s of it inside the converge
    assert phases["apply"] == pytest.approx(0.2)
    assert phases["play end"] == pytest.approx(0.1)
    assert sum(phases.values()) == pytest.approx(1.4)


def test_no_converge_no_phases():
    """A failed run, or a role without the converge module: nothing to decompose."""
    assert run_phases([e for e in EVENTS if e["event"] != "ok"], 10.0, 11.4) == {}
