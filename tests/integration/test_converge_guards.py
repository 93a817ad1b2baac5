"""The converge against a real API server: nothing is written unless all of it is accepted, and bad input is
refused naming the user's field.

- before the first write, every object is sent as a server-side dry run (dryRun=All): with a definition
  (site.yml) any refusal refuses the whole definition; a stored NodeSet whose own objects are refused is Degraded
  while the rest converges; the API server's paths are mapped back to the user's fields;
- names another cluster's objects (or NodeSets) already take are refused naming both owners; clusterRef is
  immutable;
- a deleted munge key is not generated anew under running pods;
- site.yml writes the status, so READY/PHASE show and the scale subresource serves its selector;
- an External database takes only Secrets marked for the cluster: an unmarked one is refused before any write,
  through site.yml and through a stored SlurmCluster alike;
- the NetworkPolicies of accounting, the REST API and the exporter are accepted by the API server, and a second
  converge leaves them as they are.

The module's work is called in this process (``k8s.slurm_cluster.execute``, as its action plugin does). kwok pods run
nothing: no slurmctld answers, which these tests do not need.
"""

import os
import time

import pytest
import yaml
from kubernetes import client, dynamic

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import errors, fieldmap, spec
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import slurm_cluster as _converge
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import Applier
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP, VERSION = "slurm.soperator.dev", "v1alpha1"
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("guards-test")


def docs(namespace, name="demo", nodesets=("cpu",), **cluster_spec):
    """A small cluster on the kwok nodes (the local cluster may also have a real node)."""
    body = {"jail": {"storageClassName": "standard", "size": "1Gi"}, "controller": {"spool": {"size": "1Gi"}},
            "placement": {"nodeSelector": {"soperator.dev/localcluster": "kwok"}}}
    body.update(cluster_spec)
    result = [{"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SlurmCluster",
               "metadata": {"name": name, "namespace": namespace}, "spec": body}]
    for ns in nodesets:
        ns_name, ns_spec = ns if isinstance(ns, tuple) else (ns, {})
        result.append({"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "NodeSet",
                       "metadata": {"name": ns_name, "namespace": namespace},
                       "spec": dict({"clusterRef": {"name": name}, "replicas": 1,
                                     "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}, **ns_spec)})
    return result


def converge(kubeconfig, **params):
    params = dict({"kubeconfig": kubeconfig, "wait_timeout": 0, "prune_nodesets": True}, **params)
    return _converge.execute(params)


def refused(kubeconfig, **params):
    with pytest.raises(_converge.Failure) as info:
        converge(kubeconfig, **params)
    return info.value


def custom(k8s):
    return client.CustomObjectsApi(k8s)


def status_of(k8s, namespace, plural, name):
    return custom(k8s).get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name).get("status") or {}


def condition(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)


def foreign_statefulset(k8s, namespace, name):
    """A StatefulSet someone else made, with a selector of its own (immutable)."""
    labels = {"app": "someone-else"}
    client.AppsV1Api(k8s).create_namespaced_stateful_set(namespace, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": 0, "serviceName": "someone-else", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "containers": [{"name": "c", "image": "registry.example.com/theirs:1"}]}}}})


def written(k8s, namespace):
    """What soperator wrote into the namespace: its SlurmClusters and the objects it labels."""
    core = client.CoreV1Api(k8s)
    selector = "app.kubernetes.io/managed-by=soperator.slurm"
    return (custom(k8s).list_namespaced_custom_object(GROUP, VERSION, namespace, "slurmclusters")["items"]
            + core.list_namespaced_config_map(namespace, label_selector=selector).items
            + core.list_namespaced_secret(namespace, label_selector=selector).items
            + core.list_namespaced_service(namespace, label_selector=selector).items)


# --- the whole render is dry-run before the first write ---------------------------------------------------------
def test_a_definition_whose_render_the_api_server_refuses_writes_nothing(kubeconfig, k8s, namespace, crds):
    foreign_statefulset(k8s, namespace, "demo-cpu")
    failure = refused(kubeconfig, definition=docs(namespace))
    assert failure.reason == errors.INVALID_SPEC
    assert failure.details["field"].startswith("nodesets[cpu]"), failure.msg
    assert "StatefulSet demo-cpu" in failure.msg and "nothing was applied" in failure.msg
    assert written(k8s, namespace) == []
    theirs = client.AppsV1Api(k8s).read_namespaced_stateful_set("demo-cpu", namespace)
    assert theirs.spec.selector.match_labels == {"app": "someone-else"}


def test_a_stored_nodeset_whose_objects_are_refused_is_degraded_and_the_rest_converges(kubeconfig, k8s, namespace,
                                                                                         crds):
    converge(kubeconfig, definition=docs(namespace, nodesets=("cpu",)))
    foreign_statefulset(k8s, namespace, "demo-gpu")
    # As the operator meets it: stored by kubectl, converged by name.
    gpu = docs(namespace, nodesets=("gpu",))[1]
    custom(k8s).create_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", gpu)
    result = converge(kubeconfig, name="demo", namespace=namespace)
    assert set(result["invalid"]) == {"gpu"} and "StatefulSet demo-gpu" in result["invalid"]["gpu"]
    nodeset = status_of(k8s, namespace, "nodesets", "gpu")
    assert condition(nodeset, "Degraded")["status"] == "True"
    assert condition(status_of(k8s, namespace, "slurmclusters", "demo"), "Degraded")["status"] == "True"
    apps = client.AppsV1Api(k8s)
    assert apps.read_namespaced_stateful_set("demo-cpu", namespace).spec.replicas == 1
    assert apps.read_namespaced_stateful_set("demo-gpu", namespace).spec.selector.match_labels == {
        "app": "someone-else"}


def test_the_api_servers_paths_on_rendered_objects_map_to_the_users_fields(kubeconfig, k8s, namespace, crds):
    definition = docs(namespace, nodesets=(("cpu", {"placement": {"tolerations": [
        {"key": "a", "operator": "Exists"}]}}),), login={"service": {"type": "NodePort", "nodePort": 30022}})
    cluster, nodesets = spec.validate_cluster_with_nodesets(definition[0], definition[1:])
    manifests = render.render_cluster(cluster, nodesets)
    by_name = dict(((m["kind"], m["metadata"]["name"]), m) for m in manifests)
    # What the validator refuses, forced into the rendered objects past it: the API server must refuse each, and
    # each refusal must come back as the field a user would fix.
    worker = by_name[("StatefulSet", "demo-cpu")]["spec"]["template"]["spec"]
    worker["containers"][0]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    worker["tolerations"][0]["value"] = "x"
    controller = by_name[("StatefulSet", "demo-controller")]["spec"]
    controller["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "0"
    by_name[("Service", "demo-login")]["spec"]["ports"][0]["port"] = 70000
    refusals = Applier(dynamic.DynamicClient(k8s), manifests, "guards-test").observe().preflight()
    fields = sorted(e.path for e in fieldmap.refusal_errors(cluster, nodesets, refusals))
    assert "nodesets[cpu].spec.resources.requests" in fields, fields
    assert "nodesets[cpu].spec.placement.tolerations[0].operator" in fields or \
        "nodesets[cpu].spec.placement.tolerations[0].value" in fields, fields
    assert "spec.controller.spool.size" in fields, fields
    assert "spec.login.service.port" in fields, fields
    assert written(k8s, namespace) == []


# --- names ------------------------------------------------------------------------------------------------------
def test_a_nodeset_name_another_cluster_has_is_refused_naming_both(kubeconfig, k8s, namespace, crds):
    converge(kubeconfig, definition=docs(namespace, name="alpha", nodesets=("cpu",)))
    failure = refused(kubeconfig, definition=docs(namespace, name="beta", nodesets=("cpu",)))
    assert failure.details["field"] == "nodesets[cpu].metadata.name"
    assert "belongs to SlurmCluster alpha" in failure.msg
    assert custom(k8s).get_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", "cpu")["spec"][
        "clusterRef"] == {"name": "alpha"}
    assert [c["metadata"]["name"] for c in custom(k8s).list_namespaced_custom_object(
        GROUP, VERSION, namespace, "slurmclusters")["items"]] == ["alpha"]


def test_cluster_ref_is_immutable(kubectl, kubeconfig, k8s, namespace, crds):
    converge(kubeconfig, definition=docs(namespace, nodesets=("cpu",)))
    res = kubectl("patch", "nodeset", "cpu", "-n", namespace, "--type=merge", "-p",
                  '{"spec": {"clusterRef": {"name": "other"}}}', check=False)
    assert res.returncode != 0 and "clusterRef is immutable" in res.stderr


def test_objects_of_two_clusters_that_would_share_names_are_refused_naming_both(kubeconfig, k8s, namespace, crds):
    converge(kubeconfig, definition=docs(namespace, name="x-y", nodesets=()))
    failure = refused(kubeconfig, definition=docs(namespace, name="x", nodesets=("y-controller",)))
    assert failure.details["field"] == "nodesets[y-controller].metadata.name"
    assert "SlurmCluster x-y" in failure.msg and "NodeSet y-controller (of SlurmCluster x)" in failure.msg
    names = [c["metadata"]["name"] for c in custom(k8s).list_namespaced_custom_object(
        GROUP, VERSION, namespace, "slurmclusters")["items"]]
    assert names == ["x-y"]


def test_the_spool_claim_template_is_immutable(kubeconfig, k8s, namespace, crds):
    converge(kubeconfig, definition=docs(namespace, nodesets=()))
    failure = refused(kubeconfig, definition=docs(namespace, nodesets=(), controller={"spool": {"size": "2Gi"}}))
    assert failure.details["field"] == "spec.controller.spool"
    claim = client.AppsV1Api(k8s).read_namespaced_stateful_set("demo-controller", namespace).spec.volume_claim_templates
    assert claim[0].spec.resources.requests["storage"] == "1Gi"


# --- the installer's policy -------------------------------------------------------------------------------------
def test_a_nodeset_asking_for_an_image_the_policy_refuses_is_degraded_alone(kubeconfig, k8s, namespace, crds):
    policy = {"allowed_registries": ["docker.io/soperator"]}
    converge(kubeconfig, definition=docs(namespace, nodesets=("cpu",)), policy=policy)
    bad = docs(namespace, nodesets=(("own", {"image": "evil.example.com/worker:1"}),))[1]
    custom(k8s).create_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", bad)
    result = converge(kubeconfig, name="demo", namespace=namespace, policy=policy)
    assert "nodesets[own].spec.image" in result["invalid"]["own"]
    assert condition(status_of(k8s, namespace, "nodesets", "own"), "Degraded")["status"] == "True"
    assert [s.metadata.name for s in client.AppsV1Api(k8s).list_namespaced_stateful_set(namespace).items
            if s.metadata.name.startswith("demo-own")] == []
    # The same definition through site.yml's path is refused as a whole.
    failure = refused(kubeconfig, definition=docs(namespace, nodesets=("cpu", ("own", {
        "image": "evil.example.com/worker:1"}))), policy=policy)
    assert failure.details["field"] == "nodesets[own].spec.image"


# --- keys -------------------------------------------------------------------------------------------------------
def wait_pods_running(k8s, namespace, count):
    core = client.CoreV1Api(k8s)
    deadline = time.monotonic() + 90
    while True:
        pods = [p for p in core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component in "
                                                                              "(controller,login,worker)").items]
        if len(pods) >= count and all(p.status.phase == "Running" for p in pods):
            return pods
        assert time.monotonic() < deadline, [(p.metadata.name, p.status.phase) for p in pods]
        time.sleep(0.5)


def test_a_deleted_munge_key_is_not_generated_anew_under_running_pods(kubeconfig, k8s, namespace, crds):
    converge(kubeconfig, definition=docs(namespace, nodesets=("cpu",)))
    wait_pods_running(k8s, namespace, 3)
    core = client.CoreV1Api(k8s)
    saved = core.read_namespaced_secret("demo-munge-key", namespace)
    core.delete_namespaced_secret("demo-munge-key", namespace)
    failure = refused(kubeconfig, name="demo", namespace=namespace)
    assert failure.reason == errors.DATA_MISSING and errors.retryable(failure.reason)
    assert "demo-munge-key" in failure.msg and "spec.maintenance" in failure.msg
    assert core.list_namespaced_secret(namespace, field_selector="metadata.name=demo-munge-key").items == []
    cond = condition(status_of(k8s, namespace, "slurmclusters", "demo"), "Degraded")
    assert cond["status"] == "True" and cond["reason"] == "SecretMissing"
    # Restored from a backup: the next converge goes on, with the old key.
    restored = {"apiVersion": "v1", "kind": "Secret", "type": saved.type, "data": saved.data,
                "metadata": {"name": saved.metadata.name, "labels": saved.metadata.labels,
                             "annotations": saved.metadata.annotations}}
    core.create_namespaced_secret(namespace, restored)
    converge(kubeconfig, name="demo", namespace=namespace)
    assert core.read_namespaced_secret("demo-munge-key", namespace).data == saved.data
    assert condition(status_of(k8s, namespace, "slurmclusters", "demo"), "Degraded")["status"] == "False"


# --- site.yml's status ------------------------------------------------------------------------------------------
def test_site_yml_status_fills_the_columns_and_serves_the_scale_subresource(kubectl, kubeconfig, k8s, namespace,
                                                                            crds):
    converge(kubeconfig, definition=docs(namespace, nodesets=("cpu",)))
    wait_pods_running(k8s, namespace, 3)
    # The NodeSet's replicas are its StatefulSet's: wait for the StatefulSet controller to count the pod (it lags
    # behind the pod itself on a busy host) before the converge that reads it.
    apps = client.AppsV1Api(k8s)
    deadline = time.monotonic() + 60
    while (apps.read_namespaced_stateful_set("demo-cpu", namespace).status.replicas or 0) != 1:
        assert time.monotonic() < deadline, "StatefulSet demo-cpu never counted its pod"
        time.sleep(0.2)
    converge(kubeconfig, name="demo", namespace=namespace)
    table = kubectl("get", "slurmcluster", "demo", "-n", namespace, "--no-headers").stdout.split()
    assert table[1] in ("True", "False") and table[2] in ("Ready", "Progressing"), table  # READY, PHASE
    scale = yaml.safe_load(kubectl("get", "--raw", "/apis/%s/%s/namespaces/%s/nodesets/cpu/scale"
                                   % (GROUP, VERSION, namespace)).stdout)
    assert scale["spec"]["replicas"] == 1 and scale["status"]["replicas"] == 1
    selector = scale["status"]["selector"]
    assert "slurm.soperator.dev/nodeset=cpu" in selector
    pods = client.CoreV1Api(k8s).list_namespaced_pod(namespace, label_selector=selector).items
    assert [p.metadata.name for p in pods] == ["demo-cpu-0"]



def test_a_definition_with_a_document_it_does_not_understand_writes_nothing(kubeconfig, k8s, namespace, crds):
    definition = docs(namespace, nodesets=("cpu",))
    definition[1]["kind"] = "Nodeset"  # a typo: silently ignored, it would leave the cluster without workers
    failure = refused(kubeconfig, definition=definition)
    assert failure.reason == errors.INVALID_SPEC and failure.details["field"] == "definition[1] (Nodeset cpu)"
    assert written(k8s, namespace) == []


# --- an External database's Secrets ------------------------------------------------------------------------------
EXTERNAL = {"enabled": True, "database": {"type": "External", "host": "db.example.org",
                                          "passwordSecretRef": {"name": "db-password", "key": "password"}}}


def everything_written(k8s, namespace):
    """written() and the workloads and NetworkPolicies: nothing of the cluster may exist."""
    return written(k8s, namespace) + client.AppsV1Api(k8s).list_namespaced_stateful_set(namespace).items + \
        client.NetworkingV1Api(k8s).list_namespaced_network_policy(namespace).items


def test_an_external_database_with_an_unmarked_secret_is_refused_before_any_write(kubeconfig, k8s, namespace,
                                                                                  crds):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "db-password"},
                                              "stringData": {"password": "an-apps-password"}})
    field = "spec.accounting.database.passwordSecretRef.name"
    # site.yml: the definition itself is not written.
    failure = refused(kubeconfig, definition=docs(namespace, accounting=EXTERNAL))
    assert failure.reason == errors.INVALID_SPEC and failure.details["field"] == field, failure.msg
    assert "not marked for SlurmCluster demo" in failure.msg and "an-apps-password" not in failure.msg
    assert everything_written(k8s, namespace) == []
    # As the operator meets it: stored by someone allowed to edit SlurmClusters, converged by name.
    for doc in docs(namespace, accounting=EXTERNAL):
        custom(k8s).create_namespaced_custom_object(GROUP, VERSION, namespace, doc["kind"].lower() + "s", doc)
    failure = refused(kubeconfig, name="demo", namespace=namespace)
    assert failure.details["field"] == field
    assert [o for o in everything_written(k8s, namespace) if not isinstance(o, dict)] == []  # only the CR itself
    assert "not marked" in condition(status_of(k8s, namespace, "slurmclusters", "demo"), "Ready")["message"]
    # Marked for another cluster: still refused. Marked for this one: slurmdbd gets it.
    core.patch_namespaced_secret("db-password", namespace,
                                 {"metadata": {"labels": {names.LABEL_DATABASE_SECRET: "someone-else"}}})
    assert refused(kubeconfig, name="demo", namespace=namespace).details["field"] == field
    core.patch_namespaced_secret("db-password", namespace, {"metadata": {"labels": {names.LABEL_DATABASE_SECRET:
                                                                                   "demo"}}})
    converge(kubeconfig, name="demo", namespace=namespace)
    slurmdbd = client.AppsV1Api(k8s).read_namespaced_stateful_set("demo-accounting", namespace)
    assert "db-password" in [v.secret.secret_name for v in slurmdbd.spec.template.spec.volumes if v.secret]


# --- NetworkPolicies ---------------------------------------------------------------------------------------------
def test_the_network_policies_are_accepted_and_a_second_converge_leaves_them(kubeconfig, k8s, namespace, crds):
    peers = {"restApiFrom": [{"ipBlock": {"cidr": "203.0.113.0/24", "except": ["203.0.113.8/29"]}}],
             "exporterFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                               "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]}
    definition = docs(namespace, accounting={"enabled": True}, restApi={"enabled": True},
                      exporter={"enabled": True}, networkPolicies=peers)
    converge(kubeconfig, definition=definition)
    stored = {p.metadata.name: p for p in client.NetworkingV1Api(k8s).list_namespaced_network_policy(namespace).items}
    assert sorted(stored) == ["demo-accounting", "demo-accounting-db", "demo-exporter", "demo-rest"]
    rest = stored["demo-rest"].spec.ingress[0]
    assert rest.ports[0].port == names.SLURMRESTD_PORT and rest._from[1].ip_block.cidr == "203.0.113.0/24"
    exporter = stored["demo-exporter"].spec.ingress[0]._from[0]
    assert exporter.namespace_selector.match_labels == {"kubernetes.io/metadata.name": "monitoring"}
    database = stored["demo-accounting-db"].spec.ingress[0]._from[0].pod_selector.match_expressions[0]
    assert database.values == ["accounting"]
    again = converge(kubeconfig, definition=definition)
    policies = [o for o in again["objects"] if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 4 and {o["action"] for o in policies} == {"unchanged"}, policies
    # Opting out removes them.
    definition[0]["spec"]["networkPolicies"] = {"enabled": False}
    converge(kubeconfig, definition=definition)
    assert client.NetworkingV1Api(k8s).list_namespaced_network_policy(namespace).items == []
