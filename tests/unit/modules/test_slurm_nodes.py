"""slurm_nodes: documentation agrees with the argument spec and renders; main() over recorded scontrol output."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from test_module_docs import from_doc, from_spec, full_doc

from ansible_collections.soperator.slurm.plugins.modules import slurm_nodes as module

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "scontrol")
SHOW = ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "node", "-o"]
ARGS = {"namespace": "slurm", "controller_pod": "demo-controller-0", "statefulset": "demo-cpu",
        "current_replicas": 3, "replicas": 1}


def recorded(name):
    with open(os.path.join(FIXTURES, name + ".yaml")) as handle:
        rec = yaml.safe_load(handle)
    return rec["rc"], rec["stdout"], rec["stderr"]


def test_documentation_matches_argument_spec():
    assert from_doc(full_doc(module)["options"]) == from_spec(module.argument_spec())


def test_documentation_is_complete():
    doc = full_doc(module)
    assert doc["module"] == "slurm_nodes" and doc["short_description"] and doc["author"]
    for attr in ("check_mode", "diff_mode", "idempotent"):
        assert doc["attributes"][attr]["support"] == "full" and doc["attributes"][attr]["description"]
    assert all(opt.get("description") for opt in doc["options"].values())
    assert all(any(k.startswith("soperator.slurm.") or k.startswith("ansible.builtin.") for k in task)
               for task in yaml.safe_load(module.EXAMPLES))
    for key, ret in yaml.safe_load(module.RETURN).items():
        assert ret.get("description") and ret.get("returned") and ret.get("type"), key
    assert module.argument_spec()["api_key"]["no_log"] is True


def test_ansible_doc_renders(collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, "-t", "module", "soperator.slurm.slurm_nodes"], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "soperator.slurm.slurm_nodes" in out.stdout and "[WARNING]" not in out.stderr, out.stderr


class Replay(object):
    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.replies.pop(0)


@pytest.fixture
def replay(monkeypatch):
    holder = {}

    def install(*replies):
        holder["t"] = Replay(*replies)
        return holder["t"]

    monkeypatch.setattr(module, "transport", lambda params: holder["t"])
    return install


def run(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        module.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_scaled_in_drains_and_reports(capsys, replay):
    t = replay(recorded("idle-and-busy"), (0, "", ""), recorded("draining"))
    rc, out = run(capsys, dict(ARGS, _ansible_diff=True))
    assert rc == 0 and out["changed"] and out["removable"] == 0 and out["replicas"] == 3
    assert out["drained"] == ["demo-cpu-2", "demo-cpu-1"] and out["waiting"] == ["demo-cpu-2"]
    assert t.calls[1] == ["scontrol", "update", "nodename=demo-cpu-2,demo-cpu-1", "state=drain",
                          "reason=soperator: scale-in"]
    assert out["diff"]["after"]["demo-cpu-1"]["state"] == "IDLE+DRAIN+DYNAMIC_NORM"


def test_check_mode_runs_only_show(capsys, replay):
    t = replay(recorded("idle-and-busy"))
    rc, out = run(capsys, dict(ARGS, _ansible_check_mode=True))
    assert rc == 0 and out["changed"] and "diff" not in out and t.calls == [SHOW]


def test_absent_deletes_records(capsys, replay):
    t = replay(recorded("drained"), (0, "", ""))
    rc, out = run(capsys, dict(ARGS, state="absent", current_replicas=None))
    assert rc == 0 and out["deleted"] == ["demo-cpu-2", "demo-cpu-1"]
    assert t.calls[1] == ["scontrol", "delete", "nodename=demo-cpu-2,demo-cpu-1"]


def test_absent_with_node_list_only(capsys, replay):
    replay(recorded("after-delete"))
    rc, out = run(capsys, {"state": "absent", "namespace": "slurm", "controller_pod": "c-0",
                           "nodes": ["demo-cpu-2"]})
    assert rc == 0 and not out["changed"] and out["absent"] == ["demo-cpu-2"]


def test_slurm_failure_names_the_command(capsys, replay):
    replay(recorded("unknown-node"))
    rc, out = run(capsys, ARGS)
    assert rc == 1 and out["command"] == SHOW and out["rc"] == 1 and "not found" in out["msg"]


@pytest.mark.parametrize("args, message", [
    (dict(ARGS, reason="maintenance"), "must start with"),
    (dict(ARGS, state="absent", nodes=["a,b"]), "invalid Slurm node names"),
])
def test_bad_input_fails_cleanly(capsys, replay, args, message):
    replay(recorded("drained"))
    rc, out = run(capsys, args)
    assert rc == 1 and message in out["msg"]


def test_scaled_in_needs_replicas(capsys, replay):
    rc, out = run(capsys, {"namespace": "slurm", "controller_pod": "c-0", "statefulset": "demo-cpu"})
    assert rc == 1 and "current_replicas" in out["msg"]


def test_kubernetes_transport_is_built_from_auth_options(monkeypatch):
    monkeypatch.undo()
    t = module.transport(dict(ARGS, container="slurmctld", kubeconfig=None, context=None,
                              host="https://127.0.0.1:1", api_key="x", validate_certs=False, ca_cert=None,
                              client_cert=None, client_key=None))
    assert (t.namespace, t.pod, t.container) == ("slurm", "demo-controller-0", "slurmctld")
