"""The operator as users run it: its image built and imported, installed by playbooks/operator.yml (namespaced,
for a namespace that does not exist yet), its two replicas on the real node under their own ServiceAccount and
the RBAC the role installs, drains on. From then on only kubectl: the README's operator section, step by step.

Figures (seconds) are printed for the closing note: apply -> Ready, scale-out -> idle, scale-in with a running
job -> node gone, leader killed -> converged.
"""

import json
import os
import subprocess
import time
import uuid

import pytest
import yaml
from conftest import E2E, ROOT, wait_until

OPERATOR_NS = "soperator-e2e"
WATCHED = "e2e-operator"
CLUSTER_WIDE_NS = "e2e-operator-cw"  # in no watch list: only a cluster-wide install sees it
IMAGE = "soperator/operator:0.1.0"
REAL = {"soperator.dev/localcluster": "real"}


def install_params(**extra):
    # A short period: the periodic in-memory check runs often enough to be seen doing nothing.
    params = {"operator_image": IMAGE, "operator_namespace": OPERATOR_NS, "operator_watch_namespaces": [WATCHED],
              "operator_node_selector": REAL, "operator_reconcile_period": "5s"}
    params.update(extra)
    return params


@pytest.fixture(scope="module")
def op(real_node_cluster):
    e = E2E(real_node_cluster, WATCHED)
    for ns in (WATCHED, OPERATOR_NS):  # left over by an interrupted run
        e.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", timeout=300)
    build = subprocess.run([os.path.join(ROOT, "hack", "build-operator-image.sh")], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    cache = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
    subprocess.run(["python3", os.path.join(ROOT, "hack", "localcluster.py"), "import-image",
                    os.path.join(cache, "images", "operator-0.1.0.tar")], env=e.env, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    assert e.kubectl("get", "namespace", WATCHED, check=False).returncode != 0  # namespaced mode creates it
    e.playbook("operator.yml", install_params())
    wait_until(lambda: (e.get_in(OPERATOR_NS, "deployment", "soperator-operator") or {}).get("status", {})
               .get("availableReplicas") == 2, 180, "both operator replicas available",
               lambda: e.explain_in(OPERATOR_NS))
    try:
        yield e
    finally:
        if os.environ.get("SOPERATOR_SHOW_OPERATOR_LOGS") == "1":
            print(e.kubectl("logs", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/name=soperator-operator",
                            "--tail=300", "--prefix", check=False).stdout)
        e.playbook("operator.yml", install_params(operator_state="absent", operator_cluster_wide=True), check=False)
        e.playbook("operator.yml", install_params(operator_state="absent"), check=False)
        e.kubectl("delete", "namespace", WATCHED, OPERATOR_NS, CLUSTER_WIDE_NS, "--ignore-not-found", "--wait=false",
                  check=False)


def operator_pods(e):
    return (e.get_in(OPERATOR_NS, "pods", "-l", "app.kubernetes.io/name=soperator-operator") or {}).get("items", [])


def leader(e):
    lease = e.get_in(OPERATOR_NS, "lease", "soperator-operator") or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def metric(e, name, **labels):
    """Sum of a metric's samples on the leading replica (read from inside its pod: nothing listens outside)."""
    script = ("import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080/metrics',timeout=5)"
              ".read().decode())")
    text = e.kubectl("exec", "-n", OPERATOR_NS, leader(e), "--", "python3", "-c", script).stdout
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and \
                all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def ready(e, kind="slurmcluster", name="demo"):
    obj = e.get(kind, name)
    if not obj:
        return False
    conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
    return (conds.get("Ready", {}).get("status") == "True"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"] and obj)


def kubectl_apply(e, docs):
    e.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def test_installed_as_shipped(op):
    """Pods on the real node, as the role's ServiceAccount, with namespaced RBAC only."""
    pods = operator_pods(op)
    assert len(pods) == 2 and {p["spec"]["nodeName"] for p in pods} == {"real-node-0"}
    assert {p["spec"]["serviceAccountName"] for p in pods} == {"soperator-operator"}
    assert all(p["spec"]["containers"][0]["image"].endswith(IMAGE) for p in pods)
    assert op.get_in(WATCHED, "role", "soperator-operator") is not None
    assert op.kubectl("get", "clusterrole", "soperator-operator", check=False).returncode != 0
    role = op.get_in(WATCHED, "role", "soperator-operator")
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert secrets and all("list" not in r["verbs"] and "delete" not in r["verbs"] for r in secrets)
    assert any("pods/exec" in r["resources"] for r in role["rules"])


def test_lifecycle_through_kubectl_only(op):
    figures = {}
    docs = op.definition()

    # apply -> Ready only once every pod is ready and every Slurm node is up
    t0 = time.monotonic()
    kubectl_apply(op, docs)
    wait_until(lambda: ready(op), 300, "SlurmCluster Ready", op.explain)
    figures["apply -> Ready"] = time.monotonic() - t0
    assert set(op.sinfo().items()) == {("demo-cpu-0", "idle"), ("demo-cpu-1", "idle")}
    nodeset = op.get("nodeset", "cpu")
    assert (nodeset["status"]["readyReplicas"], nodeset["status"]["idle"]) == (2, 2)
    step = op.jail("timeout 120 srun -N2 --immediate=60 cat /etc/soperator/jail-image | sort -u")
    assert step.stdout.strip() == "soperator/jail:0.1.0", step.stderr + op.explain()

    # settled: the periodic check (every 5 s here) compares the caches with the render and starts no run
    runs = metric(op, "soperator_operator_runs_total")
    skips = metric(op, "soperator_operator_drift_checks_total", result="skip")
    wait_until(lambda: metric(op, "soperator_operator_drift_checks_total", result="skip") >= skips + 3, 60,
               "three periodic checks")
    assert metric(op, "soperator_operator_runs_total") == runs

    # scale out: kubectl scale is all it takes
    t0 = time.monotonic()
    op.kubectl("scale", "nodeset", "cpu", "-n", WATCHED, "--replicas=3")
    op.wait_idle(["demo-cpu-0", "demo-cpu-1", "demo-cpu-2"])
    figures["scale-out -> idle"] = time.monotonic() - t0
    wait_until(lambda: ready(op, "nodeset", "cpu") and op.get("nodeset", "cpu")["status"].get("idle") == 3, 60,
               "NodeSet status: 3 idle")

    # scale in while a job runs on a node that goes: drained with our reason, the job completes, no ghost
    submit = op.jail("cd /root && sbatch --parsable -w demo-cpu-2 -o /root/scale-in.out "
                     "--wrap 'sleep 25; echo finished-on-$(hostname)'")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    wait_until(lambda: "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout, 60, "the job running")
    t0 = time.monotonic()
    op.kubectl("scale", "nodeset", "cpu", "-n", WATCHED, "--replicas=1")
    drained = wait_until(lambda: (lambda n: "DRAIN" in n and n)(op.node("demo-cpu-2")), 60, "demo-cpu-2 draining",
                         op.explain)
    assert "Reason=soperator: scale-in" in drained
    assert "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout
    assert op.get("pod", "demo-cpu-2") is not None
    wait_until(lambda: set(op.sinfo()) == {"demo-cpu-0"} and op.get("pod", "demo-cpu-2") is None
               and op.get("pod", "demo-cpu-1") is None, 240, "scale-in done, no ghost", op.explain)
    figures["scale-in with a running job -> node gone"] = time.monotonic() - t0
    assert op.jail("cat /root/scale-in.out").stdout.strip() == "finished-on-demo-cpu-2"
    assert "JobState=COMPLETED" in op.slurm("scontrol show job %s" % job).stdout
    wait_until(lambda: ready(op), 120, "Ready at 1 replica", op.explain)

    # a Slurm setting through kubectl: applied, the queue kept
    held = op.jail("cd /root && sbatch --parsable --hold --wrap true").stdout.strip()
    op.kubectl("patch", "slurmcluster", "demo", "-n", WATCHED, "--type=merge", "-p",
               json.dumps({"spec": {"slurm": {"killWait": 45}}}))
    wait_until(lambda: "KillWait                = 45 sec" in op.slurm("scontrol show config").stdout, 240,
               "KillWait applied", op.explain)
    assert "JobState=PENDING" in op.slurm("scontrol show job %s" % held).stdout
    wait_until(lambda: ready(op), 180, "Ready after the setting change", op.explain)

    # the leader is killed in the middle of a reconcile (it scaled the StatefulSet; the new node is not up yet):
    # another replica takes the Lease over and finishes the job
    first = leader(op)
    op.kubectl("scale", "nodeset", "cpu", "-n", WATCHED, "--replicas=2")
    wait_until(lambda: op.get("statefulset", "demo-cpu")["spec"]["replicas"] == 2, 60, "the leader at work")
    t0 = time.monotonic()
    op.kubectl("delete", "pod", "-n", OPERATOR_NS, first, "--wait=false", "--grace-period=0", "--force")
    wait_until(lambda: leader(op) not in (None, first), 120, "another replica leading")
    figures["leader killed -> lease taken over"] = time.monotonic() - t0
    op.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    wait_until(lambda: ready(op) and op.get("nodeset", "cpu")["status"].get("idle") == 2, 180,
               "Ready after the leader was killed", op.explain)
    figures["leader killed -> converged"] = time.monotonic() - t0

    # maintenance: drained first, everything scaled to zero; then back to the same state
    op.kubectl("patch", "slurmcluster", "demo", "-n", WATCHED, "--type=merge", "-p",
               json.dumps({"spec": {"maintenance": True}}))
    wait_until(lambda: (op.get("slurmcluster", "demo").get("status") or {}).get("phase") == "Maintenance"
               and ready(op), 300, "maintenance reached", op.explain)
    assert all(s["spec"]["replicas"] == 0 for s in op.get("statefulset")["items"])
    wait_until(lambda: not [p for p in op.get("pod")["items"] if not p["metadata"]["name"].startswith(
        "demo-populate")], 180, "every Slurm pod gone")
    op.kubectl("patch", "slurmcluster", "demo", "-n", WATCHED, "--type=merge", "-p",
               json.dumps({"spec": {"maintenance": False}}))
    wait_until(lambda: ready(op) and op.get("slurmcluster", "demo")["status"]["phase"] == "Ready", 300,
               "back from maintenance", op.explain)
    assert set(op.sinfo().items()) == {("demo-cpu-0", "idle"), ("demo-cpu-1", "idle")}
    assert "JobState=PENDING" in op.slurm("scontrol show job %s" % held).stdout

    # delete the SlurmCluster: its finalizer tears it down, the jail and the secrets stay
    op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=300)
    assert not op.get("statefulset")["items"]
    assert op.get("pvc", "demo-jail") is not None
    assert op.get("secret", "demo-munge-key") is not None and op.get("secret", "demo-ssh-host-keys") is not None
    for name, seconds in figures.items():
        print("e2e-operator: %s %.1f s" % (name, seconds))


PAYLOAD = "{{lookup('pipe','id>/tmp/soperator-pwned-%s')}}"


def _string_leaves(value, path=()):
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _string_leaves(sub, path + (key,))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _string_leaves(sub, path + (index,))
    elif isinstance(value, str):
        yield path


def _set(doc, path, value):
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def test_template_payloads_in_a_resource_are_never_evaluated(op):
    """Every string field the API server accepts carries a template; annotations too; labels are refused."""
    tag = uuid.uuid4().hex[:8]
    payload = PAYLOAD % tag
    docs = op.definition()
    for doc in docs:
        doc["metadata"]["name"] = "evil" if doc["kind"] == "SlurmCluster" else "evilnodes"
        if doc["kind"] == "NodeSet":
            doc["spec"]["clusterRef"]["name"] = "evil"
            # optional string fields too, so that the API server can accept (or refuse) each of them
            doc["spec"].update(image="x", features=["x"], placement={"nodeSelector": {"k": "v"}})
    cluster_spec = docs[0]["spec"]
    cluster_spec.setdefault("slurm", {})["slurmConf"] = {"MinJobAge": payload}
    cluster_spec["login"]["sshdConfig"] = {"Banner": payload}
    cluster_spec["images"] = dict((c, "x") for c in ("controller", "worker", "login", "jail", "populateJail"))
    accepted = {}
    for doc in docs:
        doc["metadata"]["annotations"] = {"note": payload}
        # labels cannot carry a template: the API server refuses them, naming the field
        bad = json.loads(json.dumps(doc))
        bad["metadata"]["labels"] = {"x": payload}
        refused = op.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(bad), check=False)
        assert refused.returncode != 0 and "metadata.labels" in refused.stderr, refused.stderr
        kept = []
        for path in list(_string_leaves(doc["spec"])):
            if path[-1:] == ("name",) and "clusterRef" in path:
                continue
            trial = json.loads(json.dumps(doc))
            _set(trial["spec"], path, payload)
            res = op.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(trial), check=False)
            if res.returncode == 0:
                _set(doc["spec"], path, payload)
                kept.append(".".join(map(str, path)))
        accepted[doc["kind"]] = kept
    assert accepted["SlurmCluster"], "the API server accepted no templated spec string"
    kubectl_apply(op, docs)
    # The operator has judged it: a run finished (Successful, or a Failure naming a field) ...
    verdict = wait_until(lambda: [c for c in (op.get("slurmcluster", "evil").get("status") or {}).get(
        "conditions", []) if c["type"] in ("Successful", "Failure") and c["status"] == "True"], 180,
        "the operator's verdict on the templated cluster", op.explain)
    status = op.get("slurmcluster", "evil")["status"]
    # ... and nothing was evaluated, in any operator pod
    for pod in operator_pods(op):
        listing = op.kubectl("exec", "-n", OPERATOR_NS, pod["metadata"]["name"], "--", "ls", "/tmp").stdout
        assert "soperator-pwned-" + tag not in listing, (pod["metadata"]["name"], listing)
    stored = op.get("slurmcluster", "evil")
    assert stored["metadata"]["annotations"]["note"] == payload
    # ... and each templated value was refused naming its field, or kept literally in what was rendered.
    if verdict[0]["type"] == "Failure":
        assert verdict[0]["message"].startswith(("spec.", "nodesets[")), verdict[0]["message"]
    else:
        config = op.get("configmap", "evil-slurm-config")["data"]["slurm.conf"]
        assert "MinJobAge=" + payload in config
    print("e2e-operator: templated fields accepted by the API server: %s; verdict: %s" % (
        accepted, [(c["type"], c["status"], c.get("message", "")[:120]) for c in status["conditions"]]))
    op.kubectl("delete", "slurmcluster", "evil", "-n", WATCHED, "--wait=true", timeout=180)
    op.kubectl("delete", "nodeset", "evilnodes", "-n", WATCHED, "--wait=false", check=False)


def test_slurm_state_reaches_kubernetes_and_a_cordon_drains_without_site_yml(op):
    """Under the operator only: NodeSet counts and pod conditions follow Slurm within one --status-period (30 s) with
    no role run, and (operator_read_nodes: a ClusterRole on Nodes, the runtime watching them) `kubectl cordon` of the
    real node drains the Slurm nodes of its worker pods at once; uncordon resumes them."""
    op.playbook("operator.yml", install_params(operator_read_nodes=True))
    assert op.kubectl("get", "clusterrole", "soperator-operator-nodes", check=False).returncode == 0

    def rolled_out():
        deploy = op.get_in(OPERATOR_NS, "deployment", "soperator-operator")
        st = deploy.get("status") or {}
        args = [p["spec"]["containers"][0]["args"] for p in operator_pods(op)]
        return (st.get("observedGeneration") == deploy["metadata"]["generation"] and st.get("updatedReplicas") == 2
                and st.get("availableReplicas") == 2 and st.get("replicas") == 2
                and all("--watch-nodes" in a for a in args))
    wait_until(rolled_out, 240, "the replicas watching Nodes rolled out")
    docs = op.definition(health_checks={"kubernetesNodes": {"drainCordoned": True}})
    kubectl_apply(op, docs)
    wait_until(lambda: ready(op), 300, "SlurmCluster Ready", op.explain)
    host = op.get("pod", "demo-cpu-0")["spec"]["nodeName"]

    submit = op.jail("cd /root && sbatch --parsable --exclusive -w demo-cpu-0 -o /dev/null --wrap 'sleep 300'")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    try:
        wait_until(lambda: op.sinfo().get("demo-cpu-0") == "allocated", 60, "demo-cpu-0 allocated", op.explain)
        t0 = time.monotonic()
        shown = wait_until(lambda: (lambda sc: sc[0] == sc[1] and sc[0]["allocated"] == 1 and sc[0])(
            op.nodeset_counts()), 90, "NodeSet counts matching sinfo", op.explain)
        print("e2e-operator: a job's start reached the NodeSet's counts in %.1f s" % (time.monotonic() - t0))
        assert shown["idle"] == 1
        cond = op.slurm_condition("demo-cpu-0")
        assert (cond["status"], cond["reason"]) == ("True", "Allocated"), cond
    finally:
        op.slurm("scancel %s" % job)
    op.wait_idle(["demo-cpu-0", "demo-cpu-1"])

    op.kubectl("cordon", host)
    try:
        t0 = time.monotonic()
        wait_until(lambda: all("Reason=soperator: node cordoned" in op.node(n) for n in ("demo-cpu-0", "demo-cpu-1")),
                   120, "both Slurm nodes drained for the cordon", op.explain)
        print("e2e-operator: cordon -> Slurm nodes drained in %.1f s" % (time.monotonic() - t0))
    finally:
        op.kubectl("uncordon", host)
    wait_until(lambda: not any("DRAIN" in op.node(n) for n in ("demo-cpu-0", "demo-cpu-1")), 120,
               "resumed after uncordon", op.explain)
    op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=300)
    op.playbook("operator.yml", install_params())
    assert op.kubectl("get", "clusterrole", "soperator-operator-nodes", check=False).returncode != 0


def test_cluster_wide_install_watches_every_namespace(op):
    """The same image, reinstalled with operator_cluster_wide: a ClusterRole, and a namespace nobody listed.

    Cluster-wide means every SlurmCluster of the local cluster, make demo's too: converged by the same collection,
    it is in sync (nothing applied), gets the NodeSet finalizer while the operator runs, and loses it again when the
    operator is removed.
    """
    op.playbook("operator.yml", install_params(operator_cluster_wide=True, operator_watch_namespaces=[]))
    assert op.kubectl("get", "clusterrole", "soperator-operator", check=False).returncode == 0
    def rolled_out():
        deploy = op.get_in(OPERATOR_NS, "deployment", "soperator-operator")
        st = deploy.get("status") or {}
        watch = [e.get("value", "") for p in operator_pods(op) for e in p["spec"]["containers"][0]["env"]
                 if e["name"] == "WATCH_NAMESPACE"]
        return (st.get("observedGeneration") == deploy["metadata"]["generation"] and st.get("updatedReplicas") == 2
                and st.get("availableReplicas") == 2 and st.get("replicas") == 2 and watch == ["", ""])
    wait_until(rolled_out, 240, "the cluster-wide replicas rolled out")
    other = E2E(op.state_dir, CLUSTER_WIDE_NS)
    other.kubectl("create", "namespace", CLUSTER_WIDE_NS)
    kubectl_apply(other, other.definition())
    wait_until(lambda: ready(other), 300, "a cluster in an unlisted namespace Ready", other.explain)
    assert set(other.sinfo().items()) == {("demo-cpu-0", "idle"), ("demo-cpu-1", "idle")}
    other.kubectl("delete", "slurmcluster", "demo", "-n", CLUSTER_WIDE_NS, "--wait=true", timeout=300)
    op.playbook("operator.yml", install_params(operator_state="absent", operator_cluster_wide=True))
    assert op.kubectl("get", "clusterrole", "soperator-operator", check=False).returncode != 0
