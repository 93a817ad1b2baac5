"""apply_manifests' main(): options reach the adapter, errors come back as fail_json, secrets are masked."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.modules import apply_manifests as module

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "slurm"},
          "stringData": {"password": "correct-horse-battery"}}


def run(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        module.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def adapter(monkeypatch):
    calls = {}
    monkeypatch.setattr(module, "dynamic_client", lambda params: ("client", params["kubeconfig"]))

    def fake_apply(client, manifests, field_manager, **kwargs):
        calls.update(client=client, manifests=manifests, field_manager=field_manager, **kwargs)
        if "raise" in calls:
            raise calls["raise"]
        return {"changed": True, "objects": [], "counts": {"created": 1, "updated": 0, "unchanged": 0,
                                                           "pruned": 0}}

    monkeypatch.setattr(module, "apply_manifests", fake_apply)
    return calls


def test_options_reach_the_adapter(capsys, adapter):
    prune = {"selector": "a=b", "kinds": ["v1/ConfigMap"]}
    rc, out = run(capsys, {"manifests": [SECRET], "kubeconfig": "/k", "prune": prune})
    assert rc == 0 and out["changed"] is True and out["counts"]["created"] == 1
    assert adapter["client"] == ("client", "/k")
    assert adapter["field_manager"] == "soperator.slurm"
    assert adapter["prune_selector"] == "a=b" and adapter["prune_kinds"] == ["v1/ConfigMap"]
    assert adapter["protect"] == ["Secret", "PersistentVolumeClaim"]
    assert adapter["check_mode"] is False and adapter["force_conflicts"] is False


def test_empty_protect_list_is_respected(capsys, adapter):
    run(capsys, {"manifests": [], "prune": {"selector": "a=b", "protect_kinds": []}})
    assert adapter["protect"] == []


def test_no_prune_by_default(capsys, adapter):
    run(capsys, {"manifests": []})
    assert adapter["prune_selector"] is None


def test_check_mode_and_diff_are_passed(capsys, adapter):
    run(capsys, {"manifests": [], "_ansible_check_mode": True, "_ansible_diff": True})
    assert adapter["check_mode"] is True and adapter["diff"] is True


def test_adapter_error_fails_with_details_and_masked_secrets(capsys, adapter):
    adapter["raise"] = KubernetesError("apply Secret slurm/db: invalid value correct-horse-battery",
                                       object="Secret slurm/db", status=422)
    rc, out = run(capsys, {"manifests": [SECRET]})
    assert rc == 1 and out["failed"] is True
    assert out["object"] == "Secret slurm/db" and out["status"] == 422
    assert "correct-horse-battery" not in json.dumps(out)


def test_generated_secrets_are_masked(capsys, adapter, monkeypatch):
    def leaky(client, manifests, field_manager, on_secret=None, **kwargs):
        on_secret("R0VORVJBVEVE")
        return {"changed": True, "objects": [{"note": "R0VORVJBVEVE"}], "counts": {}}

    monkeypatch.setattr(module, "apply_manifests", leaky)
    rc, out = run(capsys, {"manifests": []})
    assert rc == 0 and "R0VORVJBVEVE" not in json.dumps(out)


def test_manifests_are_required(capsys, adapter):
    rc, out = run(capsys, {})
    assert rc == 1 and "manifests" in out["msg"]


# --- the action plugin's validation (plugin_utils/local_module.py) ------------------------------------------------
class _Task(object):
    def __init__(self, args):
        self.args, self.action = args, "soperator.slurm.apply_manifests"


def _action(args):
    from ansible_collections.soperator.slurm.plugins.action.apply_manifests import ActionModule

    action = ActionModule.__new__(ActionModule)  # only what validation reads: the task's args and the module name
    action._task, action._load_name = _Task(args), "soperator.slurm.apply_manifests"
    return action


def test_the_action_validates_the_manifests_without_copying_them_deeply_and_as_before():
    manifests = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"},
                  "data": {"k": "v"}}]
    args = {"manifests": manifests, "force_conflicts": True}
    action = _action(args)
    validation, params = action.validate(module.argument_spec())
    _, reference = _action(dict(args)).validate_argument_spec(argument_spec=module.argument_spec())
    assert params == reference and validation.error_messages == []
    assert params["manifests"] == manifests and params["manifests"][0] is not manifests[0]  # a copy for the work
    assert action._task.args is args and args["manifests"] is manifests  # the task's own args left as they were


def test_the_action_refuses_what_it_refused_before():
    from ansible.errors import AnsibleActionFail

    for bad in ({"manifests": [{"kind": "ConfigMap"}], "force_conflicts": "maybe"}, {"manifests": [{}], "nope": 1}):
        with pytest.raises(AnsibleActionFail) as ours:
            _action(bad).validate(module.argument_spec())
        with pytest.raises(AnsibleActionFail) as before:
            _action(bad).validate_argument_spec(argument_spec=module.argument_spec())
        assert str(ours.value).splitlines()[0] == str(before.value).splitlines()[0]


# --- src: files read on the controller, never templated -------------------------------------------------------------
CONFIGMAP_YAML = """---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: n}
data: {k: "{{ not templated }}"}
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: n}
"""


def test_src_files_reach_the_adapter_as_their_documents_in_order(capsys, adapter, tmp_path):
    (tmp_path / "one.yaml").write_text(CONFIGMAP_YAML)
    (tmp_path / "two.yaml").write_text("kind: Namespace\napiVersion: v1\nmetadata: {name: n}\n")
    rc, out = run(capsys, {"src": [str(tmp_path / "one.yaml"), str(tmp_path / "two.yaml")]})
    assert rc == 0, out
    assert [m["metadata"]["name"] for m in adapter["manifests"]] == ["a", "b", "n"]
    assert adapter["manifests"][0]["data"]["k"] == "{{ not templated }}"


def test_src_and_manifests_are_one_source(capsys, adapter, tmp_path):
    (tmp_path / "one.yaml").write_text(CONFIGMAP_YAML)
    rc, out = run(capsys, {"src": [str(tmp_path / "one.yaml")], "manifests": []})
    assert rc == 1 and "mutually exclusive" in out["msg"] and "src" in out["msg"]
    assert adapter == {}


@pytest.mark.parametrize("text, error", [("a: [", "is not YAML"), ("- 1\n- 2\n", "document 1 is not a mapping"),
                                         ("kind: A\n---\nplain\n", "document 2 is not a mapping")])
def test_a_bad_src_file_is_named_and_nothing_is_applied(capsys, adapter, tmp_path, text, error):
    (tmp_path / "bad.yaml").write_text(text)
    rc, out = run(capsys, {"src": [str(tmp_path / "bad.yaml")]})
    assert rc == 1 and out["msg"].startswith("src: %s" % (tmp_path / "bad.yaml")) and error in out["msg"]
    assert adapter == {}


def test_a_missing_src_file_fails_before_anything_is_applied(capsys, adapter, tmp_path):
    rc, out = run(capsys, {"src": [str(tmp_path / "absent.yaml")]})
    assert rc == 1 and "absent.yaml" in out["msg"] and adapter == {}


def test_the_action_finds_src_as_a_role_file_and_hands_on_its_documents(monkeypatch, tmp_path):
    from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction

    (tmp_path / "crd.yaml").write_text(CONFIGMAP_YAML)
    seen = {}
    monkeypatch.setattr(LocalModuleAction, "run", lambda self, tmp=None, task_vars=None: seen.update(
        args=self._task.args) or {"changed": False})
    action = _action({"src": ["crd.yaml"], "force_conflicts": True})
    action._find_needle = lambda dirname, needle: str(tmp_path / needle) if dirname == "files" else None
    assert action.run(task_vars={}) == {"changed": False}
    assert "src" not in seen["args"] and seen["args"]["force_conflicts"] is True
    assert [m["metadata"]["name"] for m in seen["args"]["manifests"]] == ["a", "b"]


def test_the_action_fails_on_a_src_file_it_cannot_find(monkeypatch):
    from ansible.errors import AnsibleError

    from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction

    monkeypatch.setattr(LocalModuleAction, "run", lambda *a, **k: pytest.fail("ran without its files"))
    action = _action({"src": ["nope.yaml"]})

    def find(dirname, needle):
        raise AnsibleError("Could not find or access '%s'" % needle)

    action._find_needle = find
    result = action.run(task_vars={})
    assert result["failed"] is True and "nope.yaml" in result["msg"] and result["msg"].startswith("src: ")


def test_the_action_takes_one_src_path_as_a_list_and_refuses_what_is_no_path(monkeypatch, tmp_path):
    from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction

    (tmp_path / "crd.yaml").write_text(CONFIGMAP_YAML)
    seen = {}
    monkeypatch.setattr(LocalModuleAction, "run", lambda self, tmp=None, task_vars=None: seen.update(
        args=self._task.args) or {"changed": False})
    action = _action({"src": "crd.yaml"})
    action._find_needle = lambda dirname, needle: str(tmp_path / needle)
    assert action.run(task_vars={}) == {"changed": False}
    assert [m["metadata"]["name"] for m in seen["args"]["manifests"]] == ["a", "b"]
    seen.clear()
    for bad in ({"a": 1}, ["crd.yaml", 3]):
        action = _action({"src": bad})
        action._find_needle = lambda dirname, needle: str(tmp_path / needle)
        result = action.run(task_vars={})
        assert result["failed"] is True and result["msg"].startswith("src: a list of paths") and seen == {}
