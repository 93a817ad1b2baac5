"""Scale-in parser, planner and the Slurm adapter, table-driven from real `scontrol` recordings.

The fixtures under fixtures/scontrol/ were recorded from Slurm 24.11 by tests/slurm/test_scale_in.py
(SOPERATOR_RECORD_FIXTURES=1): each holds the exact command, its rc, stdout and stderr.
"""

import os

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import slurm_exec as _slurm
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains
from ansible_collections.soperator.slurm.plugins.module_utils.plan.drains import BLOCKED, DRAIN, READY, WAIT
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

FIXTURES = os.path.join(os.path.abspath(__file__).rsplit(os.sep, 3)[0], "fixtures", "scontrol")
STS = "demo-cpu"
N0, N1, N2 = "demo-cpu-0", "demo-cpu-1", "demo-cpu-2"
REASON = "soperator: scale-in"
ADMIN = "bad DIMM, ticket=42 [hw]"
SHOW = ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "node", "-o"]


def recording(name):
    with open(os.path.join(FIXTURES, name + ".yaml")) as handle:
        return yaml.safe_load(handle)


def nodes(name):
    rec = recording(name)
    assert rec["rc"] == 0
    return scontrol.parse_show_node(rec["stdout"])


# ---- parser ------------------------------------------------------------------------------------------------
# fixture -> {node: (state, drain, down, busy, cpus_alloc, reason)}
PARSED = {
    "no-nodes": {},
    "idle-and-busy": {N0: ("IDLE", False, False, False, 0, None), N1: ("IDLE", False, False, False, 0, None),
                      N2: ("MIXED", False, False, True, 1, None)},
    "draining": {N0: ("IDLE", False, False, False, 0, None), N1: ("IDLE", True, False, False, 0, REASON),
                 N2: ("MIXED", True, False, True, 1, REASON)},
    "drained": {N0: ("IDLE", False, False, False, 0, None), N1: ("IDLE", True, False, False, 0, REASON),
                N2: ("IDLE", True, False, False, 0, REASON)},
    "after-delete": {N0: ("IDLE", False, False, False, 0, None)},
    "admin-drained": {N0: ("MIXED", False, False, True, 1, None), N1: ("IDLE", True, False, False, 0, REASON),
                      N2: ("IDLE", True, False, False, 0, ADMIN)},
    # Slurm 24.11 keeps the last reason on a resumed node (demo-cpu-1).
    "resumed": {N0: ("MIXED", False, False, True, 1, None), N1: ("IDLE", False, False, False, 0, REASON),
                N2: ("IDLE", True, False, False, 0, ADMIN)},
    "down-and-draining": {N0: ("IDLE", False, False, False, 0, None),
                          N1: ("DOWN", False, True, False, 0, "pod evicted"),
                          N2: ("MIXED", True, False, True, 1, REASON)},
}


@pytest.mark.parametrize("fixture", sorted(PARSED))
def test_parse_recorded_output(fixture):
    rec = recording(fixture)
    assert rec["command"] == SHOW
    parsed = scontrol.parse_show_node(rec["stdout"])
    got = dict((n, (v["state"], v["drain"], v["down"], v["busy"], v["cpus_alloc"], v["reason"]))
               for n, v in parsed.items())
    assert got == PARSED[fixture]
    for node in parsed.values():
        assert "DYNAMIC_NORM" in node["flags"]
        if node["reason"]:
            assert node["reason_user"] == "root" and isinstance(node["reason_time"], int)


@pytest.mark.parametrize("line, expect", [
    ("NodeName=a State=IDLE+DRAIN Reason=x=y [z] [slurm@2024-05-01T10:00:00]",
     {"reason": "x=y [z]", "reason_user": "slurm", "reason_time": "2024-05-01T10:00:00", "drain": True}),
    ("NodeName=a State=ALLOCATED+COMPLETING CPUAlloc=0", {"busy": True, "reason": None}),
    ("NodeName=a State=IDLE+FAIL Reason=(null)", {"drain": True, "reason": None}),
    ("NodeName=a State=IDLE Reason=no suffix", {"reason": "no suffix", "reason_user": None}),
    ("NodeName=a State=IDLE CPUAlloc=junk", {"cpus_alloc": 0, "busy": False}),
])
def test_parse_edge_cases(line, expect):
    node = scontrol.parse_show_node(line)["a"]
    assert dict((k, node[k]) for k in expect) == expect


@pytest.mark.parametrize("text", ["Reason=only a reason", "garbage", "State=IDLE"])
def test_parse_rejects_other_output(text):
    with pytest.raises(scontrol.ScontrolParseError):
        scontrol.parse_show_node(text)


# ---- planner -----------------------------------------------------------------------------------------------
NOW = nodes("down-and-draining")[N2]["reason_time"] + 3600  # an hour after that recorded drain
# (fixture, victims, planner kwargs, expected actions, removable count)
PLANS = [
    ("idle-and-busy", [N2, N1], {}, [DRAIN, DRAIN], 0),
    ("draining", [N2, N1], {}, [WAIT, READY], 0),
    ("draining", [N1], {}, [READY], 1),
    ("drained", [N2, N1], {}, [READY, READY], 2),
    ("after-delete", [N2, N1], {}, [READY, READY], 2),  # absent: nothing to lose
    ("admin-drained", [N2, N1], {}, [BLOCKED, READY], 2),
    ("admin-drained", [N2, N1], {"remove_admin_drained": False}, [BLOCKED, READY], 0),
    ("admin-drained", [N0], {}, [DRAIN], 0),
    ("resumed", [N1], {}, [DRAIN], 0),  # a stale reason holds nothing
    ("down-and-draining", [N2, N1], {}, [WAIT, READY], 0),
    ("down-and-draining", [N2, N1], {"now": NOW, "drain_timeout": 3599}, [READY, READY], 2),
    ("down-and-draining", [N2, N1], {"now": NOW, "drain_timeout": 3601}, [WAIT, READY], 0),
    ("down-and-draining", [N2, N1], {"drain_timeout": 1}, [WAIT, READY], 0),  # no clock, no expiry
    ("no-nodes", [], {}, [], 0),
]


@pytest.mark.parametrize("fixture, victims, kwargs, actions, removable", PLANS)
def test_plan_scale_in(fixture, victims, kwargs, actions, removable):
    entries = drains.plan_scale_in(nodes(fixture), victims, **kwargs)
    assert [e["name"] for e in entries] == victims
    assert [e["action"] for e in entries] == actions
    assert drains.removable_replicas(entries) == removable


def test_admin_node_with_jobs_blocks_and_never_expires():
    node = dict(nodes("admin-drained")[N2], busy=True)
    assert drains.plan_node(node, now=NOW, drain_timeout=0) == (BLOCKED, False, False)


def test_down_node_with_completing_jobs_waits():
    node = dict(nodes("down-and-draining")[N1], busy=True)
    assert drains.plan_node(node) == (WAIT, False, False)


def test_removable_counts_from_the_top_only():
    entries = [{"removable": False}, {"removable": True}]
    assert drains.removable_replicas(entries) == 0
    assert drains.removable_replicas([{"removable": True}, {"removable": False}]) == 1


def test_simulate_drain_predicts_the_recorded_result():
    simulated = scontrol.simulate_drain(nodes("idle-and-busy"), [N2, N1, "gone"], REASON)
    real = nodes("draining")
    for name in (N1, N2):
        assert drains.plan_node(simulated[name]) == drains.plan_node(real[name])
    assert "gone" not in simulated


@pytest.mark.parametrize("name, expect", [
    ("demo-cpu-0", 0), ("demo-cpu-12", 12), ("demo-cpu-012", None), ("demo-cpu-1-0", None),
    ("demo-gpu-1", None), ("demo-cpu-", None), ("demo-cpu", None),
])
def test_ordinal(name, expect):
    assert names.ordinal(name, STS) == expect


def test_statefulset_nodes_and_resume_candidates():
    assert drains.statefulset_nodes(nodes("drained"), STS) == [N2, N1, N0]
    assert drains.statefulset_nodes(nodes("drained"), STS, 1) == [N2, N1]
    assert drains.statefulset_nodes(nodes("drained"), STS, 0, 2) == [N1, N0]
    assert drains.resume_candidates(nodes("drained"), STS, 3, REASON) == [N2, N1]
    assert drains.resume_candidates(nodes("drained"), STS, 2, REASON + " ") == [N1]
    assert drains.resume_candidates(nodes("admin-drained"), STS, 3, REASON) == [N1]  # never the admin's
    assert drains.resume_candidates(nodes("drained"), STS, 3, "soperator: health") == []
    assert drains.resume_candidates(nodes("resumed"), STS, 3, REASON) == []  # not drained any more


def test_plan_delete():
    assert drains.plan_delete(nodes("down-and-draining"), [N2, N1, "demo-cpu-7"]) == {
        "delete": [N1], "busy": [N2], "absent": ["demo-cpu-7"]}


@pytest.mark.parametrize("bad", ["a,b", "n[1-3]", "x state=resume", "", "A", "-a", None])
def test_validate_node_names(bad):
    with pytest.raises(ValueError):
        scontrol.validate_node_names(["ok-1", bad])


# ---- adapter flow, replaying the recordings ----------------------------------------------------------------
class Replay(object):
    """A transport answering each expected argv with a recorded (or plain-success) reply, in order."""

    def __init__(self, *script):
        self.script = list(script)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        assert self.script, "unexpected command %s" % argv
        expected, reply = self.script.pop(0)
        assert list(argv) == expected
        if isinstance(reply, str):
            rec = recording(reply)
            return rec["rc"], rec["stdout"], rec["stderr"]
        return reply

    def done(self):
        assert not self.script, "commands not run: %s" % self.script


DRAIN_CMD = ["scontrol", "update", "nodename=%s,%s" % (N2, N1), "state=drain", "reason=" + REASON]


def test_resume_skips_a_node_an_admin_drained_meanwhile():
    t = Replay((SHOW, "admin-drained"))
    assert _slurm.Slurm(t).resume([N2]) == []
    assert _slurm.Slurm(Replay()).resume([]) == []


def test_failed_command_carries_command_rc_and_stderr():
    t = Replay((DRAIN_CMD[:2] + ["nodename=%s" % N2] + DRAIN_CMD[3:], "update-unknown-node"))
    with pytest.raises(_slurm.SlurmError) as err:
        _slurm.Slurm(t).drain([N2], REASON)
    rec = recording("update-unknown-node")
    assert err.value.details == {"command": rec["command"], "rc": rec["rc"], "stdout": rec["stdout"],
                                 "stderr": rec["stderr"]}
    assert "exited 1" in err.value.msg and "Invalid node name" in err.value.msg


def test_unknown_node_recording_is_an_error():
    rec = recording("unknown-node")
    assert rec["rc"] == 1 and "not found" in rec["stdout"] + rec["stderr"]
    with pytest.raises(_slurm.SlurmError):
        _slurm.Slurm(lambda argv: (rec["rc"], rec["stdout"], rec["stderr"])).show_nodes()


def test_unparsable_output_is_a_slurm_error():
    with pytest.raises(_slurm.SlurmError) as err:
        _slurm.Slurm(lambda argv: (0, "something else\n", "")).show_nodes()
    assert err.value.details["stdout"] == "something else\n"


def test_local_transport(tmp_path):
    assert _slurm.LocalTransport(["sh", "-c"])(["echo out; echo err >&2; exit 3"]) == (3, "out\n", "err\n")
    assert _slurm.LocalTransport([], timeout=0.2)(["sleep", "5"])[0] == 124
    assert _slurm.LocalTransport()([str(tmp_path / "missing")])[0] == 127
    assert _slurm.LocalTransport(["sh", "-c"])(["read -r a; echo got $a"], "line\n") == (0, "got line\n", "")
    assert _slurm.LocalTransport(["sh", "-c"])(["cat"]) == (0, "", "")  # no stdin: an empty one, never the caller's


def test_the_jobs_on_nodes_come_from_squeue_per_node(tmp_path):
    """The script under a real shell, squeue stubbed with what it prints for `-h -w <node> -o '<node> %i'`."""
    (tmp_path / "squeue").write_text('#!/bin/sh\ncase "$3" in\n  demo-cpu-1) echo "demo-cpu-1 41"; echo "demo-cpu-1 '
                                     '42_3" ;;\n  demo-cpu-9) echo "squeue: error: Invalid node name specified" >&2; '
                                     'exit 1 ;;\nesac\n')
    (tmp_path / "squeue").chmod(0o755)
    transport = _slurm.LocalTransport(["env", "PATH=%s:/usr/bin:/bin" % tmp_path])
    jobs = _slurm.Slurm(transport).jobs_on(["demo-cpu-0", "demo-cpu-1", "demo-cpu-9"])
    assert jobs == {"demo-cpu-0": [], "demo-cpu-1": ["41", "42_3"]}  # demo-cpu-9: not known, left out
    assert _slurm.Slurm(lambda argv: (127, "", "sh: not found")).jobs_on(["demo-cpu-0"]) == {}
    assert _slurm.Slurm(lambda argv: (0, "", "")).jobs_on([]) == {}
    with pytest.raises(ValueError):
        _slurm.Slurm(transport).jobs_on(["demo-cpu-[0-9]"])


def test_parse_jobs_takes_only_job_ids_of_the_nodes_asked_for():
    text = "demo-cpu-1 41\ndemo-cpu-1 41\ndemo-cpu-2 7\ndemo-cpu-1 $(x)\ndemo-cpu-3 ?\ndemo-cpu-3 8\nnoise\n"
    assert scontrol.parse_jobs(text, ["demo-cpu-1", "demo-cpu-3", "demo-cpu-4"]) == {
        "demo-cpu-1": ["41"], "demo-cpu-4": []}


# ---- the Kubernetes exec transport, with the websocket faked ----------------------------------------------
class FakeWs(object):
    def __init__(self, out="", err="", rc=0, stays_open=False):
        self.out, self.err, self.returncode, self.stays_open, self.closed = out, err, rc, stays_open, False

    def run_forever(self, timeout):
        self.timeout = timeout

    def is_open(self):
        return self.stays_open

    def read_stdout(self):
        return self.out

    def read_stderr(self):
        return self.err

    def write_stdin(self, data):
        self.stdin = getattr(self, "stdin", "") + data

    def close(self):
        self.closed = True


class FakeCore(object):
    def connect_get_namespaced_pod_exec(self):  # only passed to stream(), never called here
        raise AssertionError


def exec_transport(monkeypatch, ws=None, error=None):
    seen = {}

    def fake_stream(fn, pod, namespace, **kwargs):
        seen.update(pod=pod, namespace=namespace, **kwargs)
        if error:
            raise error
        return ws

    monkeypatch.setattr(access, "stream", fake_stream)  # the access layer's one exec path
    return _slurm.KubernetesExecTransport(access.Rest(FakeCore()), "slurm", "demo-controller-0"), seen


def test_exec_transport_runs_argv_without_shell(monkeypatch):
    rec = recording("drained")
    ws = FakeWs(rec["stdout"])
    t, seen = exec_transport(monkeypatch, ws)
    assert _slurm.Slurm(t).show_nodes()[N2]["reason"] == REASON
    assert seen["command"] == SHOW and seen["container"] == "slurmctld" and seen["tty"] is False
    assert (seen["pod"], seen["namespace"]) == ("demo-controller-0", "slurm") and ws.closed


def test_exec_transport_sends_stdin_on_the_stream_not_in_the_command(monkeypatch):
    ws = FakeWs("ok")
    t, seen = exec_transport(monkeypatch, ws)
    assert t(["sh", "-c", "read -r x"], "secret-candidate\n") == (0, "ok", "")
    assert seen["stdin"] is True and ws.stdin == "secret-candidate\n"
    assert seen["command"] == ["sh", "-c", "read -r x"]
    ws = FakeWs("ok")
    t, seen = exec_transport(monkeypatch, ws)
    t(["true"])
    assert seen["stdin"] is False and not hasattr(ws, "stdin")


@pytest.mark.parametrize("ws, expect", [
    (FakeWs("", "boom", rc=2), (2, "", "boom")),
    (FakeWs("", "", rc=None), (1, "", "")),
    (FakeWs("part", "", stays_open=True), (124, "part", "timed out after 60s")),
])
def test_exec_transport_results(monkeypatch, ws, expect):
    t, _ = exec_transport(monkeypatch, ws)
    assert t(["true"]) == expect


@pytest.mark.parametrize("error", [ApiException(status=403, reason="Forbidden"), OSError("refused")])
def test_exec_transport_errors(monkeypatch, error):
    t, _ = exec_transport(monkeypatch, error=error)
    with pytest.raises(_slurm.SlurmError) as err:
        t(["scontrol", "ping"])
    assert "demo-controller-0" in err.value.msg and err.value.details["command"] == ["scontrol", "ping"]


def test_scale_in_victims_are_the_top_ordinals_highest_first():
    assert drains.scale_in_victims(5, 3, "demo-cpu") == ["demo-cpu-4", "demo-cpu-3"]
    assert drains.scale_in_victims(2, 0, "demo-cpu") == ["demo-cpu-1", "demo-cpu-0"]
    assert drains.scale_in_victims(2, -1, "demo-cpu") == ["demo-cpu-1", "demo-cpu-0"]
    assert drains.scale_in_victims(2, 2, "demo-cpu") == []
    assert drains.scale_in_victims(2, 4, "demo-cpu") == []
    assert names.REASON_SCALE_IN == "soperator: scale-in"
