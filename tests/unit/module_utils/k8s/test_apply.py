"""The pure decisions behind apply_manifests: hashing, subset compare, skip rule, prune plan, redaction."""

import base64

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.render import objects


def cm(name="demo-slurm-conf", data=None, ns="slurm", labels=None, annotations=None):
    md = {"name": name, "namespace": ns}
    if labels is not None:
        md["labels"] = labels
    if annotations is not None:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"slurm.conf": "x"}}


def live_of(desired, **extra_md):
    """A live copy as the apiserver returns it after our apply."""
    live = objects.with_applied_hash(desired)
    live["metadata"].update({"uid": "u", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z",
                             "managedFields": [{"manager": "soperator.slurm", "operation": "Apply"}]})
    live["metadata"].update(extra_md)
    return live


# --- hash ------------------------------------------------------------------------------------------------

def test_hash_is_independent_of_key_order_and_of_its_own_annotation():
    a = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "namespace": "n"}, "data": {"x": "1"}}
    b = {"data": {"x": "1"}, "metadata": {"namespace": "n", "name": "a"}, "apiVersion": "v1", "kind": "ConfigMap"}
    assert objects.manifest_hash(a) == objects.manifest_hash(b)
    assert objects.manifest_hash(objects.with_applied_hash(a)) == objects.manifest_hash(a)
    assert len(objects.manifest_hash(a)) == 64


def test_hash_changes_with_content():
    assert objects.manifest_hash(cm(data={"a": "1"})) != objects.manifest_hash(cm(data={"a": "2"}))


def test_with_applied_hash_does_not_touch_the_input():
    desired = cm(annotations={"keep": "me"})
    out = objects.with_applied_hash(desired)
    assert out["metadata"]["annotations"] == {"keep": "me", objects.APPLIED_HASH: objects.manifest_hash(desired)}
    assert desired["metadata"]["annotations"] == {"keep": "me"}


def test_without_applied_hash_drops_an_emptied_annotations_map():
    out = objects.without_applied_hash(cm(annotations={objects.APPLIED_HASH: "x"}))
    assert "annotations" not in out["metadata"]


# --- subset ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("desired,live,expected", [
    ({"a": 1}, {"a": 1, "b": 2}, True),
    ({"a": 1, "b": 2}, {"a": 1}, False),
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, True),
    ({"a": {"b": 1}}, {"a": {"b": 2}}, False),
    ({"a": [1, 2]}, {"a": [1, 2]}, True),
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": [1]}, {"a": [1, 2]}, False),
    ({"a": [{"n": "x"}]}, {"a": [{"n": "x", "protocol": "TCP"}]}, True),
    ({"a": {}}, {}, True),
    ({"a": []}, {}, True),
    ({"a": None}, {}, True),
    ({"a": True}, {"a": 1}, False),
    ({"a": 1}, {"a": True}, False),
    ({"a": "1"}, {"a": 1}, False),
    ({"a": 1}, {"a": 1.0}, True),
    ({"a": {"b": 1}}, {"a": "s"}, False),
])
def test_is_subset(desired, live, expected):
    assert objects.is_subset(desired, live) is expected


def test_comparable_turns_string_data_into_data():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
              "data": {"a": "YQ=="}, "stringData": {"b": "bee"}}
    out = objects.comparable(secret)
    assert "stringData" not in out
    assert out["data"] == {"a": "YQ==", "b": base64.b64encode(b"bee").decode()}
    assert "stringData" in secret


# --- the skip rule and the plan ----------------------------------------------------------------------------

def test_in_sync_after_our_own_apply():
    desired = cm()
    assert objects.in_sync(desired, live_of(desired))


def test_not_in_sync_without_our_hash():
    desired = cm()
    live = live_of(desired)
    del live["metadata"]["annotations"]
    assert not objects.in_sync(desired, live)


def test_not_in_sync_after_a_hand_edit_of_an_owned_field():
    desired = cm(data={"slurm.conf": "good"})
    live = live_of(desired)
    live["data"]["slurm.conf"] = "edited"
    assert not objects.in_sync(desired, live)


def test_not_in_sync_when_a_field_was_removed_from_the_desired_manifest():
    before = cm(data={"a": "1", "b": "2"})
    live = live_of(before)
    assert not objects.in_sync(cm(data={"a": "1"}), live)  # still a subset, but the hash tells


def test_in_sync_with_fields_added_by_the_server():
    desired = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"},
               "spec": {"ports": [{"port": 22}]}}
    live = live_of(desired)
    live["spec"]["ports"][0].update({"protocol": "TCP", "targetPort": 22})
    live["spec"]["clusterIP"] = "10.96.0.10"
    live["status"] = {"loadBalancer": {}}
    assert objects.in_sync(desired, live)


def test_secret_with_string_data_is_in_sync_with_its_stored_form():
    desired = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
               "stringData": {"k": "v"}}
    live = live_of(desired)
    del live["stringData"]
    live["data"] = {"k": base64.b64encode(b"v").decode()}
    assert objects.in_sync(desired, live)


def test_plan_object():
    desired = cm()
    create_only = cm(annotations={objects.CREATE_ONLY: "true"})
    assert objects.plan_object(desired, None) == objects.APPLY
    assert objects.plan_object(desired, live_of(desired)) == objects.SKIP
    assert objects.plan_object(desired, live_of(cm(data={"other": "y"}))) == objects.APPLY
    assert objects.plan_object(create_only, None) == objects.CREATE
    # present: kept whatever its content
    assert objects.plan_object(create_only, live_of(cm(data={"other": "y"}))) == objects.KEEP


def test_plan_prune():
    keep = cm("keep")
    gone = cm("gone")
    exempt = cm("exempt", annotations={objects.PRUNE: "false"})
    deleting = cm("deleting")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "munge", "namespace": "slurm"}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "jail", "namespace": "slurm"}}
    listed = [keep, gone, exempt, deleting, secret, pvc]
    pruned = objects.plan_prune(listed, {objects.object_key(keep)})
    assert [o["metadata"]["name"] for o in pruned] == ["gone"]
    pruned = objects.plan_prune(listed, {objects.object_key(keep)}, protect_kinds=())
    assert [o["metadata"]["name"] for o in pruned] == ["gone", "munge", "jail"]


def test_object_key_ignores_the_version():
    a = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x", "namespace": "n"}}
    b = dict(a, apiVersion="apps/v1beta2")
    assert objects.object_key(a) == objects.object_key(b) == ("apps", "StatefulSet", "n", "x")
    assert objects.object_key(cm())[0] == ""


@pytest.mark.parametrize("text,expected", [
    ("v1/ConfigMap", ("v1", "ConfigMap")),
    ("apps/v1/StatefulSet", ("apps", "v1", "StatefulSet")),
    ("slurm.soperator.dev/v1alpha1/NodeSet", ("slurm.soperator.dev", "v1alpha1", "NodeSet")),
])
def test_parse_kind(text, expected):
    api_version, kind = objects.parse_kind(text)
    assert tuple(api_version.split("/")) + (kind,) == expected


@pytest.mark.parametrize("text", ["ConfigMap", "v1/configmap", "", "v1/"])
def test_parse_kind_rejects(text):
    with pytest.raises(ValueError):
        objects.parse_kind(text)


# --- selectors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("selector,labels,expected", [
    ("a=b", {"a": "b"}, True),
    ("a==b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a=b", {}, False),
    ("a!=b", {}, True),
    ("a!=b", {"a": "b"}, False),
    ("a", {"a": ""}, True),
    ("a", {}, False),
    ("!a", {}, True),
    ("!a", {"a": "x"}, False),
    ("a in (x, y)", {"a": "y"}, True),
    ("a in (x,y)", {"a": "z"}, False),
    ("a notin (x,y)", {"a": "z"}, True),
    ("a notin (x,y)", {}, True),
    ("a notin (x,y)", {"a": "x"}, False),
    ("slurm.soperator.dev/cluster=demo,app.kubernetes.io/part-of in (slurm)",
     {"slurm.soperator.dev/cluster": "demo", "app.kubernetes.io/part-of": "slurm"}, True),
    ("", {"anything": "x"}, True),
])
def test_selector_matches(selector, labels, expected):
    assert objects.selector_matches(selector, labels) is expected


def test_selector_rejects_garbage():
    with pytest.raises(ValueError):
        objects.selector_matches("a b c", {})


# --- diff and redaction -----------------------------------------------------------------------------------

def test_normalize_drops_server_fields_and_our_hash():
    live = live_of(cm())
    live["metadata"]["generation"] = 3
    live["status"] = {"x": 1}
    out = objects.normalize(live)
    assert out == cm()
    assert "uid" in live["metadata"]  # input untouched


def test_normalize_hides_secret_values_but_keeps_keys():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
              "data": {"munge.key": "c2VjcmV0"}, "stringData": {"pw": "hunter2"}, "type": "Opaque"}
    out = objects.normalize(secret)
    assert out["data"] == {"munge.key": objects.HIDDEN}
    assert out["stringData"] == {"pw": objects.HIDDEN}
    assert "c2VjcmV0" not in repr(out) and "hunter2" not in repr(out)
    assert secret["data"]["munge.key"] == "c2VjcmV0"


def test_same_object_sees_secret_value_changes():
    a = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "YQ=="}}
    b = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "resourceVersion": "2"},
         "data": {"k": "Yg=="}}
    assert not objects.same_object(a, b)
    assert objects.same_object(a, dict(a, status={}))


def test_secret_values_collects_what_could_be_echoed():
    manifests = [cm(data={"not": "secret"}),
                 {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                  "data": {"a": "c2VjcmV0", "empty": ""}, "stringData": {"b": "hunter2"}}]
    assert objects.secret_values(manifests) == {"c2VjcmV0", "hunter2"}


# --- conflicts ---------------------------------------------------------------------------------------------

def test_parse_conflict_one_field():
    msg = 'Apply failed with 1 conflict: conflict with "other" using v1: .data.slurm.conf'
    assert objects.parse_conflict(msg) == (["other"], [".data.slurm.conf"])


def test_parse_conflict_several_fields():
    msg = ('Apply failed with 2 conflicts: conflicts with "kubectl-edit" using apps/v1:\n'
           '- .spec.replicas\n- .spec.template.spec.containers[name="slurmd"].image')
    managers, fields = objects.parse_conflict(msg)
    assert managers == ["kubectl-edit"]
    assert fields == [".spec.replicas", '.spec.template.spec.containers[name="slurmd"].image']


def test_imperative_only():
    live = {"metadata": {"managedFields": [
        {"manager": "soperator.slurm", "operation": "Apply"},
        {"manager": "kubectl-edit", "operation": "Update"},
        {"manager": "other-operator", "operation": "Apply"},
        {"manager": "other-operator", "operation": "Update"},
    ]}}
    assert objects.imperative_only(["kubectl-edit"], live)
    assert not objects.imperative_only(["other-operator"], live)
    assert not objects.imperative_only(["kubectl-edit", "other-operator"], live)
    assert not objects.imperative_only(["unknown"], live)
    assert not objects.imperative_only([], live)


def test_last_written_is_the_managers_newest_entry():
    live = {"metadata": {"managedFields": [
        {"manager": "soperator.slurm", "operation": "Apply", "time": "2026-11-27T03:21:37Z"},
        {"manager": "soperator.slurm", "operation": "Update", "time": "2026-11-27T03:21:40Z"},
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-27T03:30:00Z"},
        {"manager": "other", "operation": "Update"},
    ]}}
    assert objects.last_written(live, "soperator.slurm") == 1795749700  # 03:21:40 UTC
    assert objects.last_written(live, "other") is None
    assert objects.last_written(live, "nobody") is None and objects.last_written(None, "soperator.slurm") is None


def test_applied_by_names_the_one_manager_whose_apply_owns_a_field():
    replicas = {"f:spec": {"f:replicas": {}, "f:template": {}}}
    entries = [{"manager": "soperator.slurm", "operation": "Apply", "fieldsV1": replicas},
               {"manager": "kubectl-scale", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
               {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
                "fieldsV1": {"f:status": {"f:replicas": {}}}}]
    live = {"metadata": {"managedFields": entries}}
    assert objects.applied_by(live, ("spec", "replicas")) == "soperator.slurm"
    assert objects.applied_by(live, ("status", "replicas")) is None  # a subresource's update, not an apply
    assert objects.applied_by(live, ("spec", "selector")) is None
    two = {"metadata": {"managedFields": entries + [{"manager": "hpa-ish", "operation": "Apply",
                                                      "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}}
    assert objects.applied_by(two, ("spec", "replicas")) is None
    assert objects.applied_by({"metadata": {}}, ("spec", "replicas")) is None


# --- input checks ------------------------------------------------------------------------------------------

def test_check_manifests():
    munge = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "m", "namespace": "n", "annotations": {
        objects.CREATE_ONLY: "true", objects.GENERATE: "munge-key"}}}
    assert objects.check_manifests([cm(), munge]) == []
    problems = objects.check_manifests([
        cm(), cm(),
        {"kind": "ConfigMap", "metadata": {}},
        "nope",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "annotations": {
            objects.GENERATE: "munge-key"}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "y", "annotations": {
            objects.CREATE_ONLY: "true", objects.GENERATE: "tls"}}},
    ])
    assert problems == [
        "manifests[1]: ConfigMap slurm/demo-slurm-conf is also manifests[0]",
        "manifests[2]: missing apiVersion, metadata.name",
        "manifests[3]: must be a mapping",
        'manifests[4]: slurm.soperator.dev/generate needs a create-only Secret '
        '(slurm.soperator.dev/create-only: "true")',
        "manifests[5]: unknown slurm.soperator.dev/generate 'tls' (known: munge-key, ssh-host-keys, db-password, "
        "jwt-key)",
    ]


def test_a_switch_away_from_rolling_update_clears_the_defaulted_parameters_first():
    live = {"kind": "StatefulSet", "spec": {"updateStrategy": {"type": "RollingUpdate",
                                                                "rollingUpdate": {"partition": 0}}}}
    desired = {"kind": "StatefulSet", "spec": {"updateStrategy": {"type": "OnDelete"}}}
    assert objects.strategy_switch_patch(desired, live) == {
        "spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}
    deployment = {"kind": "Deployment", "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {}}}}
    assert objects.strategy_switch_patch({"kind": "Deployment", "spec": {"strategy": {"type": "Recreate"}}},
                                         deployment) == {"spec": {"strategy": {"type": "Recreate",
                                                                               "rollingUpdate": None}}}
    # Nothing to clear: already switched, staying RollingUpdate, a new object, another kind.
    switched = {"kind": "StatefulSet", "spec": {"updateStrategy": {"type": "OnDelete"}}}
    assert objects.strategy_switch_patch(desired, switched) is None
    assert objects.strategy_switch_patch(live, live) is None
    assert objects.strategy_switch_patch(desired, None) is None
    assert objects.strategy_switch_patch({"kind": "ConfigMap"}, {"kind": "ConfigMap"}) is None
