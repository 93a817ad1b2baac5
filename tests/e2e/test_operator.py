"""The operator as users run it, exactly as the README's operator section says: its image built and imported,
installed by playbooks/operator.yml (namespaced, for a namespace that does not exist yet), its two replicas on the
real node under their own ServiceAccount and the RBAC the role installs, drains on. From then on only kubectl.

The README's lines are read from README.md and run one by one, each in a new login shell that inherits nothing from
pytest but HOME (no PATH, ANSIBLE_*, KUBECONFIG: only what the section's first line, ``. hack/env.sh``, sets up), as
a user's new shell after ``make demo``; each is claimed by what this suite expects it to be, so the README and the
suite cannot drift apart.

Figures (seconds) are printed for the closing note: apply -> Ready, scale-out -> idle, scale-in with a running
job -> node gone, leader deleted -> converged. ``SOPERATOR_E2E_OPERATOR_RUNS=3`` replays the cluster's lifecycle
three times and prints min/median/max.
"""

import datetime
import json
import os
import re
import statistics
import subprocess
import threading
import time
import uuid

import pytest
import yaml
from conftest import E2E, ROOT, held_job, wait_until

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path

OPERATOR_NS = "soperator-system"
WATCHED = "hpc"
CLUSTER_WIDE_NS = "hpc-cw"  # in no watch list: only a cluster-wide install sees it
IMAGE = "soperator/operator:0.1.0"
REAL = {"soperator.dev/localcluster": "real"}


def install_params(**extra):
    params = {"operator_image": IMAGE, "operator_namespace": OPERATOR_NS, "operator_watch_namespaces": [WATCHED],
              "operator_node_selector": REAL}
    params.update(extra)
    return params


def readme_steps():
    """The command lines of the README's operator section, continuation lines joined."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("### Hand clusters to the operator"):]
    body = section[section.index("```sh\n") + 6:]
    body = body[:body.index("```")]
    return [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def login_env(state_dir=None):
    """A new login shell's environment: HOME only (and which local cluster, when not the default one)."""
    env = {"HOME": os.environ["HOME"]}
    for name in ("SOPERATOR_CACHE",):
        if name in os.environ:
            env[name] = os.environ[name]
    default = os.path.expanduser("~/.local/state/soperator/localcluster")
    if state_dir and os.path.realpath(state_dir) != os.path.realpath(default):
        env["SOPERATOR_LOCALCLUSTER_DIR"] = state_dir
    return env


def login_shell(script, env, timeout=900):
    """``script`` in a new bash login shell in the checkout (errors stop it), with ``env`` only."""
    return subprocess.run(["/bin/bash", "-l", "-c", "set -euo pipefail\n" + script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


class Readme:
    """The README's lines by name (each checked against what this suite expects it to be, in order), each run in a
    new login shell in the checkout after the section's first line (the shell's setup), nothing else inherited."""

    def __init__(self, e=None):
        steps = readme_steps()
        assert len(steps) == len(SEQUENCE), "README lines %s; this suite runs %d" % (steps, len(SEQUENCE))
        for (name, expected), line in zip(SEQUENCE, steps):
            assert re.search(expected, line), "README line %r is not the expected %s (%r)" % (line, name, expected)
        self.line = dict(zip([name for name, _ in SEQUENCE], steps))
        self.env = login_env(e.state_dir if e is not None else None)

    def run(self, name, timeout=900, then=None):
        """The line ``name`` (after the setup line), then the shell code ``then`` in the same shell."""
        script = "\n".join([self.line["env"]] + ([self.line[name]] if name != "env" else []) + ([then] if then else []))
        res = login_shell(script, self.env, timeout)
        assert res.returncode == 0, "README line %r: %s" % (self.line[name], (res.stdout + res.stderr)[-4000:])
        return res


def test_the_readme_operator_section_is_what_this_suite_runs():
    """Every line of the README's operator section, in order, is one this suite runs and checks."""
    Readme()


def test_the_readme_lines_run_in_a_shell_that_inherits_nothing():
    """The shell the README's lines run in has none of pytest's PATH, ANSIBLE_* or KUBECONFIG (else the section
    could pass here and fail in a user's new shell)."""
    env = dict(line.split("=", 1) for line in login_shell("env", login_env()).stdout.splitlines() if "=" in line)
    assert not [name for name in env if name.startswith(("ANSIBLE_", "K8S_AUTH_")) or name == "KUBECONFIG"], env
    assert os.path.join(ROOT, ".venv", "bin") not in env["PATH"].split(os.pathsep), env["PATH"]


@pytest.fixture(scope="module")
def op(real_node_cluster):
    e = E2E(real_node_cluster, WATCHED)
    # Left over by an interrupted run (or a developer's manual run of the README): removed first.
    e.playbook("operator.yml", install_params(operator_state="absent", operator_cluster_wide=True), check=False)
    e.playbook("operator.yml", install_params(operator_state="absent"), check=False)
    for ns in (WATCHED, CLUSTER_WIDE_NS, OPERATOR_NS):
        e.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", timeout=300)
    e.readme = Readme(e)
    # the setup line: the venv's ansible-playbook, the pinned kubectl, this checkout as the collection, the cluster
    shell = e.readme.run("env", then='for t in ansible-playbook kubectl; do command -v $t; done; echo "$KUBECONFIG"; '
                                     'readlink -f "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/soperator/slurm"')
    assert shell.stdout.split() == [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), e.kubectl_bin,
                                    e.kubeconfig, os.path.realpath(ROOT)], shell.stdout
    e.readme.run("build")
    e.readme.run("import")
    assert e.kubectl("get", "namespace", WATCHED, check=False).returncode != 0  # namespaced mode creates it
    e.readme.run("install")
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
        e.kubectl("delete", "namespace", WATCHED, CLUSTER_WIDE_NS, "--ignore-not-found", "--wait=false",
                  check=False)


def operator_pods(e):
    return (e.get_in(OPERATOR_NS, "pods", "-l", "app.kubernetes.io/name=soperator-operator") or {}).get("items", [])


def leader(e):
    lease = e.get_in(OPERATOR_NS, "lease", "soperator-operator") or {}
    return (lease.get("spec") or {}).get("holderIdentity")


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


# The README's operator section, line by line: (name, what the line must be).
SEQUENCE = (
    ("env", r"^\. hack/env\.sh\b"),
    ("build", r"^hack/build-operator-image\.sh\b"),
    ("import", r"^python3 hack/localcluster\.py import-image .*operator-0\.1\.0\.tar$"),
    ("install", r"^ansible-playbook playbooks/operator\.yml .*operator_watch_namespaces.*\"%s\"" % WATCHED),
    ("apply", r"examples/cpu-cluster-local\.yaml \| kubectl apply -f -"),
    ("srun", r"^kubectl exec -n %s demo-login-0 -c sshd -- chroot /mnt/jail srun -N2 hostname" % WATCHED),
    ("scale 3", r"^kubectl scale nodeset cpu -n %s --replicas=3" % WATCHED),
    ("scale 1", r"^kubectl scale nodeset cpu -n %s --replicas=1" % WATCHED),
    ("killWait", r"^kubectl patch slurmcluster demo -n %s .*\"killWait\":45" % WATCHED),
    ("scale 2", r"^kubectl scale nodeset cpu -n %s --replicas=2" % WATCHED),
    ("delete leader", r"^kubectl delete pod -n %s .*get lease -n %s soperator-operator" % (OPERATOR_NS, OPERATOR_NS)),
    ("maintenance on", r"^kubectl patch slurmcluster demo -n %s .*\"maintenance\":true" % WATCHED),
    ("maintenance off", r"^kubectl patch slurmcluster demo -n %s .*\"maintenance\":false" % WATCHED),
    ("delete cluster", r"^kubectl delete slurmcluster demo -n %s" % WATCHED),
    ("uninstall", r"^ansible-playbook playbooks/operator\.yml .*\"%s\".* -e operator_state=absent$" % WATCHED),
)


def _job(op, command):
    submit = op.jail("cd /root && sbatch --parsable " + command)
    assert submit.returncode == 0, submit.stderr
    return submit.stdout.strip()


def lifecycle(op):
    """One pass of the README's cluster lines with the checks each comment promises; returns the figures."""
    figures = {}

    # apply -> Ready only once every pod is ready and every Slurm node is up
    t0 = time.monotonic()
    op.readme.run("apply")
    wait_until(lambda: ready(op), 300, "SlurmCluster Ready", op.explain)
    figures["apply -> Ready"] = time.monotonic() - t0
    assert set(op.sinfo().items()) == {("demo-cpu-0", "idle"), ("demo-cpu-1", "idle")}
    nodeset = op.get("nodeset", "cpu")
    assert (nodeset["status"]["readyReplicas"], nodeset["status"]["idle"]) == (2, 2)
    assert sorted(op.readme.run("srun", timeout=180).stdout.split()) == ["demo-cpu-0", "demo-cpu-1"]

    # scale out: kubectl scale is all it takes
    t0 = time.monotonic()
    op.readme.run("scale 3")
    op.wait_idle(["demo-cpu-0", "demo-cpu-1", "demo-cpu-2"])
    figures["scale-out -> idle"] = time.monotonic() - t0
    wait_until(lambda: ready(op, "nodeset", "cpu") and op.get("nodeset", "cpu")["status"].get("idle") == 3, 60,
               "NodeSet status: 3 idle")

    # scale in while a job runs on a node that goes: drained with our reason, the job completes, no ghost
    # The job runs until the test has seen the drain: it ends only if its pod outlived the drain.
    job, release = held_job(op, "demo-cpu-2", "scale-in")
    wait_until(lambda: "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout, 60, "the job running")
    t0 = time.monotonic()
    op.readme.run("scale 1")
    try:
        drained = wait_until(lambda: (lambda n: "DRAIN" in n and n)(op.node("demo-cpu-2")), 60,
                             "demo-cpu-2 draining", op.explain)
        assert "Reason=soperator: scale-in" in drained
        assert "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout
        assert op.get("pod", "demo-cpu-2") is not None
    finally:
        release()
    wait_until(lambda: set(op.sinfo()) == {"demo-cpu-0"} and op.get("pod", "demo-cpu-2") is None
               and op.get("pod", "demo-cpu-1") is None, 240, "scale-in done, no ghost", op.explain)
    figures["scale-in with a running job -> node gone"] = time.monotonic() - t0
    assert op.jail("cat /root/scale-in.out").stdout.strip() == "finished-on-demo-cpu-2"
    assert "JobState=COMPLETED" in op.slurm("scontrol show job %s" % job).stdout
    wait_until(lambda: ready(op), 120, "Ready at 1 replica", op.explain)

    # a Slurm setting through kubectl: applied (the worker rolls by drain), the queue kept
    held = _job(op, "--hold --wrap true")
    op.readme.run("killWait")
    wait_until(lambda: "KillWait                = 45 sec" in op.slurm("scontrol show config").stdout, 240,
               "KillWait applied", op.explain)
    assert "JobState=PENDING" in op.slurm("scontrol show job %s" % held).stdout
    wait_until(lambda: ready(op), 180, "Ready after the setting change", op.explain)

    # the leader is deleted in the middle of a reconcile (it scaled the StatefulSet; the new node is not up yet):
    # the standby takes the Lease over and finishes the job
    first = leader(op)
    op.readme.run("scale 2")
    wait_until(lambda: op.get("statefulset", "demo-cpu")["spec"]["replicas"] == 2, 60, "the leader at work")
    t0 = time.monotonic()
    op.readme.run("delete leader", timeout=300)
    assert op.get_in(OPERATOR_NS, "pod", first) is None
    wait_until(lambda: leader(op) not in (None, first), 120, "another replica leading")
    figures["leader deleted -> lease taken over"] = time.monotonic() - t0
    op.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    wait_until(lambda: ready(op) and op.get("nodeset", "cpu")["status"].get("idle") == 2, 180,
               "Ready after the leader was deleted", op.explain)
    figures["leader deleted -> converged"] = time.monotonic() - t0

    # maintenance: drained first (a running job finishes), everything scaled to zero; then back to the same state
    op.jail("rm -f /root/maintenance.go /root/maintenance.out")
    job = _job(op, "-w demo-cpu-1 -o /root/maintenance.out "
                   "--wrap 'while [ ! -e /root/maintenance.go ]; do sleep 1; done; echo finished'")
    wait_until(lambda: "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout, 60, "the job running")
    op.readme.run("maintenance on")
    try:
        wait_until(lambda: "Reason=soperator: maintenance" in op.node("demo-cpu-1"), 60, "drained for maintenance",
                   op.explain)
        assert op.get("pod", "demo-cpu-1") is not None
        assert op.get("statefulset", "demo-cpu")["spec"]["replicas"] == 2
        assert (op.get("slurmcluster", "demo").get("status") or {}).get("phase") != "Maintenance"
    finally:
        op.jail("touch /root/maintenance.go")
    wait_until(lambda: (op.get("slurmcluster", "demo").get("status") or {}).get("phase") == "Maintenance"
               and ready(op), 300, "maintenance reached", op.explain)
    assert all(s["spec"]["replicas"] == 0 for s in op.get("statefulset")["items"])
    wait_until(lambda: not [p for p in op.get("pod")["items"] if not p["metadata"]["name"].startswith(
        "demo-populate")], 180, "every Slurm pod gone")
    op.readme.run("maintenance off")
    wait_until(lambda: ready(op) and op.get("slurmcluster", "demo")["status"]["phase"] == "Ready", 300,
               "back from maintenance", op.explain)
    assert set(op.sinfo().items()) == {("demo-cpu-0", "idle"), ("demo-cpu-1", "idle")}
    assert "JobState=PENDING" in op.slurm("scontrol show job %s" % held).stdout
    assert "JobState=COMPLETED" in op.slurm("scontrol show job %s" % job).stdout
    assert op.jail("cat /root/maintenance.out").stdout.strip() == "finished"

    # delete the SlurmCluster: its finalizer tears it down, the jail and the secrets stay
    op.readme.run("delete cluster", timeout=300)
    assert op.get("slurmcluster", "demo") is None and not op.get("statefulset")["items"]
    assert op.get("pvc", "demo-jail") is not None
    assert op.get("secret", "demo-munge-key") is not None and op.get("secret", "demo-ssh-host-keys") is not None
    op.kubectl("delete", "nodeset", "--all", "-n", WATCHED, "--wait=true", timeout=300)
    return figures


def test_lifecycle_through_kubectl_only(op):
    runs = int(os.environ.get("SOPERATOR_E2E_OPERATOR_RUNS", "1"))
    samples = {}
    for _ in range(runs):
        for name, seconds in lifecycle(op).items():
            samples.setdefault(name, []).append(seconds)
    for name, values in samples.items():
        print("e2e-operator: %s %s" % (name, " ".join("%.1f" % v for v in values)) + (
            " (min %.1f, median %.1f, max %.1f s over %d runs)" % (
                min(values), statistics.median(values), max(values), len(values)) if len(values) > 1 else " s"))


# What a user might write to have the operator run a command: the same pipe lookup as a Jinja expression and as a
# statement. %s: the sentinel's name, "soperator-pwned-<id>", a file in /tmp of the operator pod that evaluated it.
PAYLOADS = {"expr": "{{lookup('pipe','id>/tmp/%s')}}", "stmt": "{%% set x = lookup('pipe','id>/tmp/%s') %%}"}
PAYLOAD = PAYLOADS["expr"] % "soperator-pwned-%s"


def sentinel(tag, form):
    return "soperator-pwned-%s-%s" % (tag, form)


def sentinels(op):
    """{operator pod: the sentinel files in its /tmp}."""
    found = {}
    for pod in operator_pods(op):
        listing = op.kubectl("exec", "-n", OPERATOR_NS, pod["metadata"]["name"], "--", "ls", "/tmp").stdout.split()
        found[pod["metadata"]["name"]] = sorted(n for n in listing if n.startswith("soperator-pwned-"))
    return found


@pytest.fixture(scope="module")
def evaluation_shows(op):
    """The positive control of the injection tests: the same payloads, given to Ansible in an operator pod as a
    trusted variable (an extra var, as the installer's watch vars are), fire, and the sentinel check sees it. So a
    payload from a resource that were evaluated would be seen too. Returns the sentinel check."""
    tag = uuid.uuid4().hex[:8]
    pod = operator_pods(op)[0]["metadata"]["name"]
    for form, payload in PAYLOADS.items():
        trusted = {"trusted": payload % sentinel(tag, form)}
        res = op.kubectl("exec", "-n", OPERATOR_NS, pod, "--", "ansible", "localhost", "-c", "local", "-i",
                         "localhost,", "-m", "ansible.builtin.debug", "-a", "msg={{ trusted }}", "-e",
                         json.dumps(trusted), check=False)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    fired = sentinels(op)[pod]
    assert [sentinel(tag, form) for form in PAYLOADS] == [n for n in fired if tag in n], fired
    print("e2e-operator: positive control: %s fired as a trusted variable in %s" % (sorted(PAYLOADS), pod))
    return sentinels


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


def _verdict(op, kind, name):
    """The operator's Successful or Failure condition (True) for the object's current generation, else None."""
    obj = op.get(kind, name) or {}
    generation = (obj.get("metadata") or {}).get("generation")
    found = [c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] in ("Successful", "Failure")
             and c["status"] == "True" and c.get("observedGeneration") == generation]
    return found and found[0]


def _leaf(path):
    return [p for p in path if isinstance(p, str)][-1]


def test_template_payloads_in_a_resource_are_never_evaluated(op, evaluation_shows):
    """Every string field the API server accepts carries a template; annotations too; labels are refused by the
    API server. The operator either refuses a value naming its field, or keeps it literally: the refused ones are
    put back one verdict at a time until a run succeeds with the rest, rendered and applied. Nothing is ever
    evaluated (the sentinel file never appears in any operator pod)."""
    tag = uuid.uuid4().hex[:8]
    payload = PAYLOAD % tag
    docs = op.definition()
    for doc in docs:
        doc["metadata"]["name"] = "evil" if doc["kind"] == "SlurmCluster" else "evilnodes"
        if doc["kind"] == "NodeSet":
            doc["spec"]["clusterRef"]["name"] = "evil"
            # optional string fields too, so that the API server can accept (or refuse) each of them
            doc["spec"].update(features=["x"], placement={"nodeSelector": {"k": "v"}})
    cluster_spec = docs[0]["spec"]
    cluster_spec.setdefault("slurm", {})["slurmConf"] = {"MinJobAge": "300"}
    cluster_spec["login"]["sshdConfig"] = {"ClientAliveInterval": "60"}
    cluster_spec["maintenance"] = True  # nothing needs to run: the verdicts are about rendering and applying
    originals = json.loads(json.dumps(docs))
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
                kept.append(path)
        accepted[doc["kind"]] = kept
    assert accepted["SlurmCluster"], "the API server accepted no templated spec string"
    refusals = []
    for _ in range(len(accepted["SlurmCluster"]) + len(accepted["NodeSet"]) + 1):
        kubectl_apply(op, docs)
        verdict = wait_until(lambda: _verdict(op, "slurmcluster", "evil"), 180,
                             "the operator's verdict on the templated cluster", op.explain)
        if verdict["type"] == "Successful":
            break
        message = verdict["message"]
        field = message.split(":", 1)[0]
        assert field.startswith(("spec.", "nodesets[")), message
        index = 1 if field.startswith("nodesets[") else 0
        culprits = [p for p in accepted[docs[index]["kind"]] if _leaf(p) in field.rsplit(".", 1)[-1]]
        assert culprits, "refused a field that carries no payload: %s" % message
        for path in culprits:
            original = originals[index]["spec"]
            for key in path[:-1]:
                original = original[key]
            _set(docs[index]["spec"], path, original[path[-1]])
            accepted[docs[index]["kind"]].remove(path)
        refusals.append(field)
    else:
        raise AssertionError("no successful run: %s" % refusals)
    # Nothing was evaluated, in any operator pod.
    fired = evaluation_shows(op)
    assert not [n for names in fired.values() for n in names if tag in n], fired
    assert op.get("slurmcluster", "evil")["metadata"]["annotations"]["note"] == payload
    # What stayed was kept literally: rendered into the cluster's objects as the user wrote it.
    rendered = json.dumps([op.get(kind, "-l", "slurm.soperator.dev/cluster=evil")
                           for kind in ("configmap", "statefulset", "service", "job")])
    if any(p[0] in ("slurm", "login") for p in accepted["SlurmCluster"]):  # config text: rendered as written
        assert payload in rendered, rendered[:3000]
    # The NodeSet got its verdict too (its status, written by the converge).
    nodeset = wait_until(lambda: (lambda n: n.get("status", {}).get("observedGeneration") == n["metadata"][
        "generation"] and n)(op.get("nodeset", "evilnodes")), 120, "the NodeSet's status")
    print("e2e-operator: templated fields kept literally: %s; refused naming the field: %s; NodeSet: %s" % (
        dict((k, [".".join(map(str, p)) for p in v]) for k, v in accepted.items()), refusals,
        [(c["type"], c["status"]) for c in nodeset["status"].get("conditions", [])]))
    op.kubectl("delete", "slurmcluster", "evil", "-n", WATCHED, "--wait=true", timeout=180)
    op.kubectl("delete", "nodeset", "evilnodes", "-n", WATCHED, "--wait=true", timeout=180)


def _crd_schema(kind):
    with open(os.path.join(ROOT, "roles", "crds", "files", "%ss.slurm.soperator.dev.yaml" % kind.lower())) as f:
        return yaml.safe_load(f)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _maps(node, path=()):
    """Every map of a schema (an object whose keys the user chooses): its path (0 for an array's item)."""
    if isinstance(node.get("additionalProperties"), dict):
        yield path
    for key, sub in (node.get("properties") or {}).items():
        yield from _maps(sub, path + (key,))
    if isinstance(node.get("items"), dict):
        yield from _maps(node["items"], path + (0,))


def _minimal(node):
    """The least value of a schema node: its required properties only."""
    if "properties" in node or "additionalProperties" in node:
        return {key: _minimal(node["properties"][key]) for key in node.get("required", [])}
    if node.get("type") == "array":
        return [_minimal(node["items"])]
    if node.get("type") == "integer":
        return node.get("minimum", 1)
    return node["enum"][0] if "enum" in node else "x"


# Parents whose required fields alone are not valid (a pattern, a one-of rule): the least valid value, written out.
# The backup's password Secret is made, marked for the cluster, by the test that uses these.
BACKUP_SECRET = "evilkeys-backup"
VALID_PARENTS = {("spec", "jail", "backup"): {"schedule": "@daily", "repository": {"claim": {"claimName": "backups"}},
                                              "passwordSecretRef": {"name": BACKUP_SECRET}}}


def _map_at(doc, schema, path):
    """The map at ``path`` in ``doc``, its parents made (from the schema's required fields, or VALID_PARENTS) where
    missing."""
    if path[0] == "metadata":
        return doc["metadata"].setdefault(path[1], {})
    here, node = doc, schema
    for depth, step in enumerate(path):
        node = node["items"] if isinstance(step, int) else node["properties"][step]
        if isinstance(step, int):
            if not here:
                here.append(_minimal(node))
        elif step not in here:
            valid = VALID_PARENTS.get(tuple(path[:depth + 1]))
            here[step] = json.loads(json.dumps(valid)) if valid is not None else _minimal(node)
        here = here[step]
    return here


def _dotted(path):
    return "".join("[%d]" % p if isinstance(p, int) else ("." if i else "") + p for i, p in enumerate(path))


def _find_key(value, key, wanted):
    """Whether some map below ``value`` holds ``key: wanted``."""
    if isinstance(value, dict):
        return value.get(key) == wanted or any(_find_key(v, key, wanted) for v in value.values())
    return isinstance(value, list) and any(_find_key(v, key, wanted) for v in value)


def _key_verdict(op):
    """(the kind refused, its message), ("", "") when both the SlurmCluster and the NodeSet were taken; None while
    a verdict on their current generations is missing."""
    cluster = _verdict(op, "slurmcluster", "evilkeys")
    if cluster and cluster["type"] == "Failure":
        return "SlurmCluster", cluster["message"]
    nodeset = op.get("nodeset", "evilkeysnodes") or {}
    status = nodeset.get("status") or {}
    if not cluster or status.get("observedGeneration") != nodeset["metadata"]["generation"]:
        return None
    degraded = [c for c in status.get("conditions", []) if c["type"] == "Degraded" and c["status"] == "True"]
    return ("NodeSet", degraded[0]["message"]) if degraded else ("", "")


def _names(message, kind, path, key):
    """Whether the operator's refusal names the field of ``key`` in the map at ``path`` of the ``kind``."""
    field = re.escape(child_path(_dotted(path), key)) + ": "
    return re.search((r"(?<![\].])" if kind == "SlurmCluster" else r"nodesets\[[^]]*\]\.") + field, message)


# Keys a user may write that a renderer could mangle (upper case, dots, dashes, underscores; operator-sdk snake_cases
# the keys of a resource's variables): accepted, they must arrive as written. (kind, path, key, value)
VERBATIM = (("SlurmCluster", ("metadata", "labels"), "example.com/Team-Name_X", "a"),
            ("SlurmCluster", ("metadata", "annotations"), "example.com/Note.Key_X", "{{ not a template }}"),
            ("SlurmCluster", ("spec", "controller", "placement", "nodeSelector"), "example.com/Zone-Name_X", "b"),
            ("NodeSet", ("spec", "placement", "nodeSelector"), "example.com/Rack.ID-x_Y", "c"),
            ("NodeSet", ("spec", "placement", "affinity", "podAntiAffinity",
                         "requiredDuringSchedulingIgnoredDuringExecution", 0, "labelSelector", "matchLabels"),
             "app.example.com/Role_Name", "w"))


def test_template_payloads_in_keys_are_never_evaluated(op, evaluation_shows):
    """Every map a SlurmCluster or NodeSet carries (every additionalProperties of the CRDs: slurmConf, sshdConfig,
    partition and slurmdbd config, nodeSelector, matchLabels, resources, ServiceMonitor labels) and the metadata's
    labels and annotations get payload keys, as an expression and as a statement. Each is refused naming its field,
    by the API server or by the operator before anything of the cluster is written; keys that are accepted arrive as
    written; nothing is ever evaluated. Each map is first shown to take a plain key (so that a refusal is the key's)."""
    tag = uuid.uuid4().hex[:8]
    keys = dict((form, payload % sentinel(tag, form)) for form, payload in PAYLOADS.items())
    base = op.definition()
    for doc in base:
        doc["metadata"]["name"] = "evilkeys" if doc["kind"] == "SlurmCluster" else "evilkeysnodes"
    base[1]["spec"]["clusterRef"]["name"] = "evilkeys"
    base[0]["spec"]["maintenance"] = True  # nothing needs to run: the verdicts are about rendering and applying
    base[0]["spec"]["partitions"] = [{"name": "main", "default": True}]  # the default, written: partitions[0] exists
    op.kubectl("create", "secret", "generic", BACKUP_SECRET, "-n", WATCHED, "--from-literal=password=unused")
    op.kubectl("label", "secret", BACKUP_SECRET, "-n", WATCHED, "%s=evilkeys" % names.LABEL_BACKUP_SECRET)
    schemas = dict((doc["kind"], _crd_schema(doc["kind"])) for doc in base)
    maps = [(doc["kind"], path) for doc in base for path in [("metadata", "labels"), ("metadata", "annotations")]
            + [("spec",) + p for p in _maps(schemas[doc["kind"]]["properties"]["spec"])]]
    kinds = {kind for kind, _ in maps}
    assert len(maps) > 20 and {"slurmConf", "sshdConfig", "nodeSelector", "matchLabels"} <= {
        p[-1] for _, p in maps}, maps

    # The API server first: one server-side dry run of every trial, a plain key and each payload key in each map.
    trials = []
    for kind, path in maps:
        for form, key in [("plain", "example.com/ok")] + sorted(keys.items()):
            doc = json.loads(json.dumps(base[0 if kind == "SlurmCluster" else 1]))
            doc["metadata"]["name"] += "-t%d" % len(trials)  # (a NodeSet's name may not end in -<digits>)
            _map_at(doc, schemas[kind], path)[key] = "1"
            trials.append((kind, path, form, key, doc))
    res = op.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all([t[-1] for t in trials]),
                     check=False, timeout=600)
    created = set(re.findall(r"/(evilkeys\S*-t\d+) (?:created|configured) \(server dry run\)", res.stdout))
    refusals = dict((name, line) for line in res.stderr.splitlines() for name in re.findall(r'"(evilkeys\S*-t\d+)"',
                                                                                              line))
    accepted, by_api_server = [], []
    for kind, path, form, key, doc in trials:
        name = doc["metadata"]["name"]
        if form == "plain":
            assert name in created, "the plain key was refused in %s %s: %s" % (kind, _dotted(path),
                                                                                 refusals.get(name))
        elif name in created:
            accepted.append((kind, path, key))
        else:
            assert _dotted(path) in refusals.get(name, ""), "%s %s: refused without naming the field: %s" % (
                kind, _dotted(path), refusals.get(name))
            by_api_server.append(_dotted(path))

    # Then the operator, with every payload key the API server took and the keys that must arrive verbatim.
    docs = json.loads(json.dumps(base))
    for kind, path, key in accepted:
        _map_at(docs[0 if kind == "SlurmCluster" else 1], schemas[kind], path)[key] = "1"
    for kind, path, key, value in VERBATIM:
        _map_at(docs[0 if kind == "SlurmCluster" else 1], schemas[kind], path)[key] = value
    pending, by_operator = list(accepted), []
    for _ in range(len(accepted) + 1):
        kubectl_apply(op, docs)
        # the cluster's verdict; a cluster that is valid converges without a NodeSet that is not, which is refused
        # on its own status
        refused, message = wait_until(lambda: _key_verdict(op), 180, "the operator's verdicts on the resources with "
                                      "payload keys", op.explain)
        if not refused:
            break
        named = [t for t in pending if _names(message, *t)]
        assert named, "refused, naming no payload key: %s" % message[:3000]
        selector = "slurm.soperator.dev/%s" % ("cluster=evilkeys" if refused == "SlurmCluster" else
                                               "nodeset=evilkeysnodes")
        written = [o["metadata"]["name"] for kind in ("statefulset", "configmap", "service", "secret")
                   for o in op.get(kind, "-l", selector)["items"]]
        assert written == [], "%s written before its refusal: %s" % (refused, written)
        for kind, path, key in named:
            del _map_at(docs[0 if kind == "SlurmCluster" else 1], schemas[kind], path)[key]
            pending.remove((kind, path, key))
            by_operator.append(child_path(_dotted(path), key))
    else:
        raise AssertionError("no successful run: refused %s" % by_operator)
    assert pending == [], "payload keys the operator took: %s" % pending

    # What was accepted arrived as written: on the resources, and in the objects rendered from them (a run that
    # succeeds may leave work for the next one: the workers' StatefulSet may come a run later).
    stored = dict((kind, op.get(kind.lower(), name)) for kind, name in (("SlurmCluster", "evilkeys"),
                                                                        ("NodeSet", "evilkeysnodes")))
    for kind, path, key, value in VERBATIM:
        assert _find_key(stored[kind][path[0]], key, value), (kind, path, key)

    def rendered():
        return op.get("statefulset", "-l", "slurm.soperator.dev/cluster=evilkeys")["items"]

    def missing():
        found = rendered()
        return [(kind, _dotted(path), key) for kind, path, key, value in VERBATIM
                if path[0] == "spec" and not _find_key(found, key, value)]

    wait_until(lambda: not missing(), 180, "the accepted keys rendered as written", lambda: "%s not in %s" % (
        missing(), [(o["metadata"]["name"], o["spec"]["template"]["spec"].get("nodeSelector"),
                     o["spec"]["template"]["spec"].get("affinity")) for o in rendered()]))
    fired = evaluation_shows(op)
    assert not [n for names in fired.values() for n in names if tag in n], fired
    def leaves(fields):
        return sorted({re.sub(r"\[\d+\]", "", f.split("[{")[0]).rsplit(".", 1)[-1] for f in fields})

    print("e2e-operator: payload keys in %d maps of %s: %d refused by the API server naming the field (%s), %d by "
          "the operator naming the field (%s), none evaluated; %d accepted keys arrived as written" % (
              len(maps), sorted(kinds), len(by_api_server), ", ".join(leaves(by_api_server)), len(by_operator),
              ", ".join(leaves(by_operator)), len(VERBATIM)))
    op.kubectl("delete", "slurmcluster", "evilkeys", "-n", WATCHED, "--wait=true", timeout=180)
    op.kubectl("delete", "nodeset", "evilkeysnodes", "-n", WATCHED, "--wait=true", timeout=180)
    op.kubectl("delete", "secret", BACKUP_SECRET, "-n", WATCHED)


def test_a_deletion_policy_the_operator_may_not_honour_is_refused_and_deletion_does_not_hang(op):
    """Installed without operator_allow_data_deletion, the operator refuses spec.deletionPolicy: Delete at
    reconcile (naming the field); deleting such a SlurmCluster completes, keeping the data."""
    docs = op.definition()
    docs[0]["metadata"]["name"] = "nodelete"
    docs[0]["spec"]["deletionPolicy"] = {"jail": "Delete"}
    docs[0]["spec"]["maintenance"] = True
    kubectl_apply(op, docs[:1])
    degraded = wait_until(lambda: [c for c in (op.get("slurmcluster", "nodelete").get("status") or {}).get(
        "conditions", []) if c["type"] == "Degraded" and c["status"] == "True"], 120, "Degraded", op.explain)
    assert degraded[0]["message"].startswith("spec.deletionPolicy.jail: Delete is not allowed"), degraded
    assert op.get("statefulset", "-l", "slurm.soperator.dev/cluster=nodelete")["items"] == []
    op.kubectl("delete", "slurmcluster", "nodelete", "-n", WATCHED, "--wait=true", timeout=120)


def test_upgrading_the_operator_in_place_keeps_clusters_and_jobs(op):
    """A new operator image (the same build under the next tag, as a release would push it) installed over the
    running one: the Deployment rolls, a new replica leads, and the cluster it took over is left as it was (same
    pods, the running job finishes, still Ready)."""
    kubectl_apply(op, op.definition())
    wait_until(lambda: ready(op), 300, "SlurmCluster Ready", op.explain)
    pods = dict((p["metadata"]["name"], p["metadata"]["uid"]) for p in op.get("pod")["items"]
                if not p["metadata"]["name"].startswith("demo-populate"))
    job = _job(op, "-w demo-cpu-0 -o /root/upgrade.out --wrap 'sleep 30; echo finished'")
    wait_until(lambda: "JobState=RUNNING" in op.slurm("scontrol show job %s" % job).stdout, 60, "the job running")
    before = {p["metadata"]["name"] for p in operator_pods(op)}
    image = op.retag_image(IMAGE, "0.1.0-next")
    t0 = time.monotonic()
    op.playbook("operator.yml", install_params(operator_image=image))

    def upgraded():
        current = operator_pods(op)
        return (len(current) == 2 and not {p["metadata"]["name"] for p in current} & before
                and all(p["spec"]["containers"][0]["image"] == image for p in current)
                and all(any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                        for p in current) and leader(op) in {p["metadata"]["name"] for p in current})
    wait_until(upgraded, 300, "the new operator replicas leading", lambda: op.explain_in(OPERATOR_NS))
    print("\ne2e-operator: operator upgraded in place in %.1f s" % (time.monotonic() - t0))
    wait_until(lambda: "JobState=COMPLETED" in op.slurm("scontrol show job %s" % job).stdout, 120, "the job done")
    assert op.jail("cat /root/upgrade.out").stdout.strip() == "finished"
    assert ready(op)
    assert dict((p["metadata"]["name"], p["metadata"]["uid"]) for p in op.get("pod")["items"]
                if not p["metadata"]["name"].startswith("demo-populate")) == pods
    op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=300)
    op.kubectl("delete", "nodeset", "--all", "-n", WATCHED, "--wait=true", timeout=300)


def test_removing_the_operator_strands_no_finalizer(op):
    """The README's last line, with a SlurmCluster and a NodeSet still there: the operator's pods go first, then
    its finalizers; both resources stay, and delete at once without an operator."""
    docs = op.definition()
    docs[0]["spec"]["maintenance"] = True
    kubectl_apply(op, docs)
    finalizer = "slurm.soperator.dev/finalizer"
    wait_until(lambda: all(finalizer in (op.get(*k) or {}).get("metadata", {}).get("finalizers", [])
                           for k in (("slurmcluster", "demo"), ("nodeset", "cpu"))), 120, "both finalizers added",
               op.explain)
    op.readme.run("uninstall")
    assert operator_pods(op) == []
    assert op.get_in(OPERATOR_NS, "deployment", "soperator-operator") is None
    assert op.get_in(WATCHED, "role", "soperator-operator") is None
    for kind in (("slurmcluster", "demo"), ("nodeset", "cpu")):
        assert finalizer not in op.get(*kind)["metadata"].get("finalizers", []), kind
    op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=60)
    op.kubectl("delete", "nodeset", "cpu", "-n", WATCHED, "--wait=true", timeout=60)


# --- Node-aware under the operator (operator_read_nodes): Slurm state, cordon, features and topology from the real
# node's labels (issue 25's must-show on the real node). One cluster, one behaviour per step.
LABELS = "e2e.soperator.dev/"  # this class's own label keys on the shared real node: removed in its fixture's finally
FEATURE_PREFIX = LABELS + "feature-"
FEATURE = "ib"  # the label FEATURE_PREFIX + "ib=true" gives the Slurm feature "ib"
LEAF, SPINE = LABELS + "leaf", LABELS + "spine"
WORKERS = ["demo-cpu-0", "demo-cpu-1"]  # both on the real node (the example's node selector)
ADMIN_FEATURE = "rack7"  # an administrator's (scontrol update): never touched by the labels
RECONFIGURE_LOGGED = "Attempting to reconfigure"  # slurmctld 24.11, once per reconfigure (findings C.4)
FEATURE_BOUND_S = 10  # issue 25: a feature label shows in scontrol show node within 10 s


class NodeAware:
    """The cluster of the node-aware steps: the operator (``op``), the real node (``host``)."""

    def __init__(self, op, host):
        self.op = op
        self.host = host

    def explain(self):
        return self.op.explain() + "\n--- operator (last 60 lines) ---\n" + self.op.kubectl(
            "logs", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/name=soperator-operator", "--tail=60", "--prefix",
            check=False).stdout

    def label(self, *changes):
        """``kubectl label node <real node>`` with ``key=value`` / ``key-`` changes: one update of the Node."""
        self.op.kubectl("label", "node", self.host, "--overwrite", *changes)

    def features(self, node):
        """A Slurm node's AvailableFeatures, in Slurm's order ([] when it does not answer)."""
        shown = dict(item.split("=", 1) for item in self.op.node(node).split() if "=" in item)
        available = shown.get("AvailableFeatures", "")
        return [] if available in ("", "(null)") else available.split(",")

    def label_features(self):
        return (op_status(self.op, "cpu").get("labelFeatures") or {})

    def switches(self, node):
        """The switches above ``node`` as Slurm places it, leaf first (``scontrol show topology <node>``)."""
        out = self.op.slurm("scontrol show topology %s" % node).stdout
        return [line.split()[0].split("=", 1)[1] for line in out.splitlines() if line.startswith("SwitchName=")]

    def live_topology(self):
        """topology.conf as the operator last wrote it (the cluster's ConfigMap)."""
        return ((self.op.get("configmap", names.slurm_config_name("demo")) or {}).get("data") or {}).get(
            "topology.conf", "")

    def reconfigures(self):
        """How many reconfigures slurmctld has logged (its container's output: one process, re-executed in place)."""
        logs = self.op.kubectl("logs", "-n", WATCHED, "demo-controller-0", "-c", "slurmctld", timeout=60).stdout
        return logs.count(RECONFIGURE_LOGGED)

    def controller(self):
        """(the controller pod's UID, slurmctld's restart count)."""
        pod = self.op.get("pod", "demo-controller-0")
        return pod["metadata"]["uid"], next(c["restartCount"] for c in pod["status"]["containerStatuses"]
                                            if c["name"] == "slurmctld")

    def job(self, job_id):
        shown = self.op.slurm("SLURM_TIME_FORMAT=%s scontrol show job -o " + job_id).stdout
        return dict(item.split("=", 1) for item in shown.split() if "=" in item)


@pytest.fixture(scope="class")
def node_aware(op):
    """The operator reinstalled with operator_read_nodes (a ClusterRole on Nodes, the runtime watching them); the
    real node labelled leaf1/spine1; the example with drainCordoned, its NodeSet's featureLabelPrefix and the
    cluster's spec.topology (tree: LEAF, SPINE), Ready, both workers placed on leaf1. Afterwards: the labels removed
    from the real node, the cluster deleted, the operator back without the Node grant."""
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
    host = op.kubectl("get", "nodes", "-l", "soperator.dev/localcluster=real", "-o",
                      "jsonpath={.items[0].metadata.name}").stdout.strip()
    state = NodeAware(op, host)
    try:
        state.label(LEAF + "=leaf1", SPINE + "=spine1")
        docs = op.definition(health_checks={"kubernetesNodes": {"drainCordoned": True}},
                             nodeset={"featureLabelPrefix": FEATURE_PREFIX})
        docs[0]["spec"]["topology"] = {"plugin": "tree", "levels": [LEAF, SPINE]}
        kubectl_apply(op, docs)
        wait_until(lambda: ready(op), 300, "SlurmCluster Ready", state.explain)
        assert {op.get("pod", w)["spec"]["nodeName"] for w in WORKERS} == {host}
        wait_until(lambda: all(state.switches(w) == ["leaf1", "spine1"] for w in WORKERS), 240,
                   "both workers placed on leaf1 under spine1", state.explain)
        yield state
    finally:
        op.kubectl("label", "node", host, LEAF + "-", SPINE + "-", FEATURE_PREFIX + FEATURE + "-", check=False)
        op.kubectl("uncordon", host, check=False)
        op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=300, check=False)
        op.kubectl("delete", "nodeset", "--all", "-n", WATCHED, "--wait=true", timeout=300, check=False)
        op.playbook("operator.yml", install_params())
    assert op.kubectl("get", "clusterrole", "soperator-operator-nodes", check=False).returncode != 0
    assert not [k for k in op.get_in("default", "node", host)["metadata"].get("labels", {}) if k.startswith(LABELS)]


class TestNodeAwareUnderTheOperator:
    """Under the operator only (its image, its RBAC with operator_read_nodes), no role run: Slurm state reaches
    Kubernetes, a cordon drains, and the real node's labels become Slurm features and topology with no user action
    (the operator's Node watch runs the converge). Figures printed for the closing note of issue 25."""

    def test_slurm_state_reaches_kubernetes_and_a_cordon_drains_without_site_yml(self, node_aware):
        """NodeSet counts and pod conditions follow Slurm within one --status-period (30 s) with no role run, and
        `kubectl cordon` of the real node drains the Slurm nodes of its worker pods at once; uncordon resumes them."""
        op, host = node_aware.op, node_aware.host
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
        op.wait_idle(WORKERS)

        op.kubectl("cordon", host)
        try:
            t0 = time.monotonic()
            wait_until(lambda: all("Reason=soperator: node cordoned" in op.node(n) for n in WORKERS),
                       120, "both Slurm nodes drained for the cordon", op.explain)
            print("e2e-operator: cordon -> Slurm nodes drained in %.1f s" % (time.monotonic() - t0))
        finally:
            op.kubectl("uncordon", host)
        wait_until(lambda: not any("DRAIN" in op.node(n) for n in WORKERS), 120, "resumed after uncordon",
                   op.explain)

    def test_a_feature_label_is_a_slurm_feature_within_10s_and_a_constraint_lands_there(self, node_aware):
        """`kubectl label node` of the real node: the feature shows in `scontrol show node` of both its workers
        within 10 s (no user action: the Node watch), beside the NodeSet's own and an administrator's; the NodeSet
        records it as its own (status.labelFeatures); a job asking for it, refused before, runs there."""
        state = node_aware
        op = state.op
        op.slurm("scontrol update nodename=demo-cpu-0 availablefeatures=cpu,{0} activefeatures=cpu,{0}".format(
            ADMIN_FEATURE))
        before = dict((w, state.features(w)) for w in WORKERS)
        assert before == {"demo-cpu-0": ["cpu", ADMIN_FEATURE], "demo-cpu-1": ["cpu"]}, before
        refused = op.jail("cd /root && sbatch --parsable -o /dev/null --constraint=%s --wrap true" % FEATURE)
        assert refused.returncode != 0, refused.stdout  # no node has it yet
        t0 = time.monotonic()
        state.label(FEATURE_PREFIX + FEATURE + "=true")
        wait_until(lambda: all(state.features(w) == before[w] + [FEATURE] for w in WORKERS), FEATURE_BOUND_S,
                   "%s in scontrol show node of both workers within %d s" % (FEATURE, FEATURE_BOUND_S), state.explain)
        print("\ne2e-operator: node label -> Slurm feature seen (scontrol show node, both workers) %.1f s"
              % (time.monotonic() - t0))
        wait_until(lambda: state.label_features() == dict((w, [FEATURE]) for w in WORKERS), 60,
                   "the NodeSet's status.labelFeatures", state.explain)
        job = _job(op, "-o /dev/null --constraint=%s --wrap true" % FEATURE)
        wait_until(lambda: state.job(job).get("JobState") == "COMPLETED", 60, "the --constraint job completed",
                   state.explain)
        record = state.job(job)
        assert record["Features"] == FEATURE and record["NodeList"] in WORKERS, record
        assert op.get("pod", record["NodeList"])["spec"]["nodeName"] == state.host
        state.before = before

    def test_removing_the_feature_label_removes_only_that_feature(self, node_aware):
        """The label removed: exactly its feature goes from both workers (the NodeSet's `cpu` and the
        administrator's stay), the NodeSet records none, a job asking for it is refused again."""
        state = node_aware
        before = state.before
        t0 = time.monotonic()
        state.label(FEATURE_PREFIX + FEATURE + "-")
        wait_until(lambda: all(state.features(w) == before[w] for w in WORKERS), 60,
                   "only %s gone from both workers" % FEATURE, state.explain)
        print("e2e-operator: node label removed -> Slurm feature gone %.1f s" % (time.monotonic() - t0))
        wait_until(lambda: state.label_features() == {}, 60, "status.labelFeatures empty", state.explain)
        refused = state.op.jail("cd /root && sbatch --parsable -o /dev/null --constraint=%s --wrap true" % FEATURE)
        assert refused.returncode != 0, refused.stdout

    def test_a_topology_relabel_burst_is_one_reconfigure_and_a_running_job_goes_on(self, node_aware):
        """Three label changes of the real node in quick succession (leaf1 -> leaf2, spine1 -> spine2, leaf2 ->
        leaf3), each its own update of the Node and each rendered by the operator into the ConfigMap before the next,
        while a job runs on one of its workers: `scontrol show topology` becomes leaf3 under spine2 by exactly one
        reconfigure (slurmctld's log), the controller pod is neither replaced nor restarted, no worker pod is
        replaced, and the job runs on and ends normally."""
        state = node_aware
        op = state.op
        controller = state.controller()
        workers = dict((w, op.get("pod", w)["metadata"]["uid"]) for w in WORKERS)
        go = "/root/relabel-%s.go" % uuid.uuid4().hex[:8]
        job = _job(op, "-w demo-cpu-0 -o /dev/null --wrap 'while [ ! -e %s ]; do sleep 1; done'" % go)
        wait_until(lambda: state.job(job).get("JobState") == "RUNNING", 60, "the job running", state.explain)
        reconfigures = state.reconfigures()
        t0 = time.monotonic()
        rendered = []
        for change, line in ((LEAF + "=leaf2", "SwitchName=leaf2 "), (SPINE + "=spine2", "SwitchName=spine2 "),
                             (LEAF + "=leaf3", "SwitchName=leaf3 ")):
            state.label(change)
            # Each change rendered into the ConfigMap before the next: the burst is three files, not one.
            rendered.append(wait_until(lambda line=line: (lambda text: line in text and text)(
                state.live_topology()), 30, "the operator's topology.conf with %s" % line.strip(), state.explain))
        assert len(set(rendered)) == 3, rendered
        burst = time.monotonic() - t0
        wait_until(lambda: all(state.switches(w) == ["leaf3", "spine2"] for w in WORKERS), 300,
                   "both workers on leaf3 under spine2 in scontrol show topology", state.explain)
        applied = time.monotonic() - t0
        shown = op.slurm("scontrol show topology").stdout
        assert [line.split()[0] for line in shown.splitlines()] == ["SwitchName=leaf3", "SwitchName=spine2"], shown
        assert state.job(job)["JobState"] == "RUNNING"
        op.jail("touch " + go)
        record = wait_until(lambda: (lambda r: r.get("JobState") not in ("RUNNING", "COMPLETING") and r)(
            state.job(job)), 60, "the job to end", state.explain)
        assert (record["JobState"], record["ExitCode"], record["Restarts"]) == ("COMPLETED", "0:0", "0"), record
        counted = state.reconfigures() - reconfigures
        print("e2e-operator: topology relabel burst (3 label changes over %.1f s, each rendered: 3 topology.conf "
              "versions) -> applied in scontrol show topology %.1f s, %d reconfigure(s) in slurmctld's log"
              % (burst, applied, counted))
        assert counted == 1, counted
        assert state.controller() == controller
        assert dict((w, op.get("pod", w)["metadata"]["uid"]) for w in WORKERS) == workers
        op.jail("rm -f " + go)


# --- Elastic NodeSets (issue 24's "must show", in-cluster): one cluster, one behaviour per step -----------------
ELASTIC_SET, STATIC_SET = "burst", "cpu"
ELASTIC_NODES = ["demo-%s-%d" % (ELASTIC_SET, i) for i in range(3)]
STATIC_NODE = "demo-%s-0" % STATIC_SET
POWER_SAVING = {"suspendTime": 10, "suspendTimeout": 10, "resumeTimeout": 60}


class PodSampler(threading.Thread):
    """The worker pods of both NodeSets, listed every second for the whole class: ``(epoch, {name: (uid,
    deleting)})`` per look (the time the answer came)."""

    def __init__(self, e):
        super().__init__(daemon=True)
        self.e = e
        self.samples = []
        self.failures = 0
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            began = time.time()
            listed = self.e.get("pod", "-l", "slurm.soperator.dev/nodeset in (%s,%s)" % (ELASTIC_SET, STATIC_SET))
            if listed is None:
                self.failures += 1
            else:
                self.samples.append((time.time(), dict(
                    (p["metadata"]["name"], (p["metadata"]["uid"], bool(p["metadata"].get("deletionTimestamp"))))
                    for p in listed["items"])))
            self.stopped.wait(max(0.0, 1.0 - (time.time() - began)))

    def elastic(self, since=0.0, until=None):
        """The samples of [since, until]: ``(epoch, {elastic pod name: (uid, deleting)})``."""
        return [(t, dict((n, v) for n, v in live.items() if n.startswith("demo-%s-" % ELASTIC_SET)))
                for t, live in self.samples if t >= since and (until is None or t <= until)]


class Elastic:
    """The cluster of the elastic steps: the operator (``op``), the pod sampler, every sinfo look, the jobs run."""

    def __init__(self, op):
        self.op = op
        self.sampler = PodSampler(op)
        self.looks = []  # (epoch, {node: sinfo state})
        self.jobs = {}   # job id -> its scontrol record (epoch times)
        self.audit_from = op.audit_offset()

    def explain(self):
        return self.op.explain() + "\n--- operator (last 60 lines) ---\n" + self.op.kubectl(
            "logs", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/name=soperator-operator", "--tail=60", "--prefix",
            check=False).stdout

    def sinfo(self):
        states = self.op.sinfo()
        if states:
            self.looks.append((time.time(), states))
        return states

    def powered_down(self):
        """Every elastic node powered down in sinfo and no elastic pod (the latest sample after this look)."""
        states = self.sinfo()
        listed = self.op.get("pod", "-l", "slurm.soperator.dev/nodeset=" + ELASTIC_SET)
        return all(states.get(n) == "idle~" for n in ELASTIC_NODES) and listed is not None and not listed["items"]

    def job(self, job_id):
        shown = self.op.slurm("SLURM_TIME_FORMAT=%s scontrol show job -o " + job_id).stdout
        record = dict(item.split("=", 1) for item in shown.split() if "=" in item)
        self.jobs[job_id] = record
        return record

    def hostnames(self, hostlist):
        return self.op.slurm("scontrol show hostnames " + hostlist).stdout.split()

    def state(self, job_id):
        return self.op.slurm("squeue -h -j %s -o %%T" % job_id).stdout.strip() or self.job(job_id)["JobState"]

    def run_from_zero(self, nodes, out):
        """``sbatch -N<nodes> -C burst`` from zero, each task printing its node; returns (job id, nodes Slurm gave
        it, submit -> running seconds, the nodes the tasks printed)."""
        wait_until(self.powered_down, 120, "3 powered-down elastic nodes and no elastic pod", self.explain)
        t0 = time.monotonic()
        job = _job(self.op, "-N%d -C %s -o /root/%s --wrap 'srun printenv SLURMD_NODENAME; sleep 5'"
                   % (nodes, ELASTIC_SET, out))
        wait_until(lambda: self.state(job) in ("RUNNING", "COMPLETING", "COMPLETED"), 240,
                   "job %s running" % job, self.explain)
        to_running = time.monotonic() - t0
        wait_until(lambda: self.job(job)["JobState"] == "COMPLETED", 120, "job %s completed" % job, self.explain)
        allocated = self.hostnames(self.jobs[job]["NodeList"])
        printed = sorted(self.op.jail("cat /root/" + out).stdout.split())
        return job, allocated, to_running, printed

    def pod_deletions(self):
        """``(epoch, pod name)`` of every DELETE of a pod of this namespace since the class began (audit log)."""
        found = []
        with open(os.path.join(self.op.state_dir, "logs", "audit.log")) as f:
            f.seek(self.audit_from)
            for line in f:
                if '"delete"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:  # the line the offset cut
                    continue
                ref = event.get("objectRef") or {}
                if (event.get("verb") == "delete" and ref.get("resource") == "pods" and not ref.get("subresource")
                        and ref.get("namespace") == WATCHED and event.get("stage") == "ResponseComplete"):
                    when = datetime.datetime.strptime(event["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
                    found.append((when.replace(tzinfo=datetime.timezone.utc).timestamp(), ref["name"]))
        return found


@pytest.fixture(scope="class")
def elastic(op):
    """A SlurmCluster with a static NodeSet (cpu, 1 worker) and an elastic one (burst, maxNodes 3, minNodes 0), both
    in the default partition; SuspendTime shortened to 10 s. Pods sampled every second from before the apply."""
    op.kubectl("delete", "nodeset", "--all", "-n", WATCHED, "--wait=true", timeout=300)
    docs = op.definition(replicas=1, slurm={"powerSaving": POWER_SAVING})
    burst = json.loads(json.dumps(docs[1]))
    burst["metadata"]["name"] = ELASTIC_SET
    burst["spec"].pop("replicas")
    burst["spec"]["elastic"] = {"maxNodes": 3, "minNodes": 0}
    state = Elastic(op)
    state.sampler.start()
    kubectl_apply(op, docs + [burst])
    try:
        wait_until(lambda: ready(op), 300, "SlurmCluster Ready", state.explain)
        yield state
    finally:
        state.sampler.stopped.set()
        state.sampler.join(30)
        op.kubectl("delete", "slurmcluster", "demo", "-n", WATCHED, "--wait=true", timeout=300, check=False)
        op.kubectl("delete", "nodeset", "--all", "-n", WATCHED, "--wait=true", timeout=300, check=False)


class TestElasticNodeSet:
    """An elastic NodeSet (maxNodes 3, minNodes 0) beside a static one in one partition, under the operator as
    installed (its image, its RBAC, drains on), one behaviour per step on one cluster (issue 24's must-show). Jobs
    ask for the elastic nodes by their feature (``-C burst``). SuspendTime and ResumeTimeout are shortened; the
    figures go to docs/slurm-24.11-findings.md (D)."""

    def test_elastic_nodes_start_powered_down_with_no_pod(self, elastic):
        wait_until(elastic.powered_down, 120, "3 powered-down elastic nodes and no elastic pod", elastic.explain)
        assert elastic.sinfo().get(STATIC_NODE) == "idle"
        status = wait_until(lambda: (lambda s: s.get("poweredDown") == 3 and s)(
            op_status(elastic.op, ELASTIC_SET)), 60, "NodeSet status: 3 powered down", elastic.explain)
        assert (status.get("poweredUp"), status.get("poweringUp"), status.get("failed")) == (0, 0, 0), status

    def test_elastic_two_node_job_gets_exactly_two_pods(self, elastic):
        since = time.time()
        job, allocated, to_running, printed = elastic.run_from_zero(2, "elastic-n2.out")
        print("\ne2e-operator: elastic -N2 from zero: submit -> running %.1f s (Slurm: SubmitTime %s, StartTime %s)"
              % (to_running, elastic.jobs[job]["SubmitTime"], elastic.jobs[job]["StartTime"]))
        assert len(set(allocated)) == 2 and set(allocated) <= set(ELASTIC_NODES), allocated
        assert printed == sorted(allocated), printed  # one task ran on each of the two nodes
        seen = elastic.sampler.elastic(since)
        assert max(len(live) for _t, live in seen) == 2, seen  # sampled every second: never a third
        assert {n for _t, live in seen for n in live} == set(allocated), seen
        assert elastic.op.events(ELASTIC_SET, "PoweredUp"), "no PoweredUp Event on the NodeSet"
        elastic.n2 = (since, job, allocated)

    def test_elastic_idle_nodes_lose_their_pods_and_no_pod_went_while_its_job_ran(self, elastic):
        since, job, allocated = elastic.n2
        end = int(elastic.jobs[job]["EndTime"])
        t0 = time.monotonic()
        wait_until(elastic.powered_down, 120, "the idle nodes' pods gone, 3 powered down", elastic.explain)
        print("e2e-operator: elastic -N2 done -> pods gone, 3 powered down %.1f s (SuspendTime %d s)"
              % (time.monotonic() - t0, POWER_SAVING["suspendTime"]))
        assert elastic.op.events(ELASTIC_SET, "PoweredDown"), "no PoweredDown Event on the NodeSet"
        seen = elastic.sampler.elastic(since)
        assert max(len(live) for _t, live in seen) == 2 and {n for _t, live in seen for n in live} == set(
            allocated), seen  # from the submission to the power-down: only the two allocated nodes had pods
        check_no_pod_went_while_its_job_ran(elastic, [job])
        # both pods were deleted, each only after the job's end
        deleted = {n for t, n in elastic.pod_deletions() if t >= since}
        assert deleted >= set(allocated), deleted
        assert min(t for t, n in elastic.pod_deletions() if t >= since and n in allocated) >= end

    def test_elastic_three_nodes_from_zero_and_a_fourth_is_refused(self, elastic):
        wait_until(elastic.powered_down, 120, "3 powered-down elastic nodes and no elastic pod", elastic.explain)
        since = time.time()
        over = elastic.op.jail("cd /root && sbatch --parsable -N4 -C %s --wrap true" % ELASTIC_SET)
        assert over.returncode != 0 and "Requested node configuration is not available" in over.stderr, (
            over.stdout, over.stderr)
        print("e2e-operator: elastic -N4 over maxNodes 3: %s" % over.stderr.strip())
        assert elastic.powered_down()  # nothing powered up for it
        job, allocated, to_running, printed = elastic.run_from_zero(3, "elastic-n3.out")
        print("e2e-operator: elastic -N3 from zero: submit -> running %.1f s" % to_running)
        assert sorted(allocated) == ELASTIC_NODES and printed == ELASTIC_NODES, (allocated, printed)
        seen = elastic.sampler.elastic(since)
        assert max(len(live) for _t, live in seen) == 3 and {n for _t, live in seen for n in live} == set(
            ELASTIC_NODES), seen
        wait_until(elastic.powered_down, 120, "the idle nodes' pods gone, 3 powered down", elastic.explain)
        check_no_pod_went_while_its_job_ran(elastic, list(elastic.jobs))

    def test_elastic_beside_static_the_static_node_is_never_powered_down(self, elastic):
        """The static worker was idle in the same partition all along, longer than SuspendTime, while the elastic
        nodes were powered down twice: always idle, never a power state, one pod for the whole time."""
        looks = [(t, states.get(STATIC_NODE)) for t, states in elastic.looks]
        assert looks and all(state == "idle" for _t, state in looks), looks
        assert looks[-1][0] - looks[0][0] > POWER_SAVING["suspendTime"] * 3, looks
        shown = dict(item.split("=", 1) for item in elastic.op.node(STATIC_NODE).split() if "=" in item)
        assert "POWER" not in shown["State"] and "CLOUD" not in shown["State"], shown
        uids = {live[STATIC_NODE] for _t, live in elastic.sampler.samples if STATIC_NODE in live}
        assert len(uids) == 1 and not next(iter(uids))[1], uids
        assert all(STATIC_NODE in live for t, live in elastic.sampler.samples if t >= looks[0][0]), "pod gone"
        print("e2e-operator: elastic: %d pod samples (every second), %d failed lists"
              % (len(elastic.sampler.samples), elastic.sampler.failures))

    def test_elastic_resume_that_cannot_succeed_leaves_no_pod_and_requeues_the_job(self, elastic):
        """A node selector no Kubernetes node matches: the pod Slurm's resume asked for stays Pending; after
        ResumeTimeout the node is down, its pod removed, the node handed back (powered down, usable) and the job
        requeued; with the selector gone the requeued job runs."""
        op = elastic.op
        wait_until(elastic.powered_down, 120, "3 powered-down elastic nodes and no elastic pod", elastic.explain)
        nowhere = {"spec": {"placement": {"nodeSelector": {"soperator.dev/elastic-e2e": "nowhere"}}}}
        op.kubectl("patch", "nodeset", ELASTIC_SET, "-n", WATCHED, "--type=merge", "-p", json.dumps(nowhere))
        wait_until(lambda: (lambda ns: ns["status"].get("observedGeneration") == ns["metadata"]["generation"])(
            op.get("nodeset", ELASTIC_SET)), 120, "the NodeSet's new placement observed", elastic.explain)
        since = time.time()
        job = _job(op, "-N1 -C %s -o /dev/null --wrap true" % ELASTIC_SET)
        pending = wait_until(lambda: [p for p in (op.get("pod", "-l", "slurm.soperator.dev/nodeset=" + ELASTIC_SET)
                                                  or {}).get("items", []) if p["status"].get("phase") == "Pending"],
                             60, "the resumed node's pod Pending", elastic.explain)
        node = pending[0]["metadata"]["name"]
        t0 = time.monotonic()
        wait_until(lambda: int(elastic.job(job).get("Restarts", "0")) >= 1, POWER_SAVING["resumeTimeout"] + 60,
                   "the job requeued after ResumeTimeout", elastic.explain)
        print("e2e-operator: elastic resume that cannot succeed: pod Pending -> job requeued %.1f s (ResumeTimeout "
              "%d s)" % (time.monotonic() - t0, POWER_SAVING["resumeTimeout"]))
        wait_until(elastic.powered_down, 60, "the node handed back: powered down, no pod", elastic.explain)
        assert op.events(ELASTIC_SET, "ResumeFailed"), "no ResumeFailed Event on the NodeSet"
        record = elastic.job(job)
        assert record["JobState"] == "PENDING", record
        print("e2e-operator: elastic: the requeued job pending, Reason=%s" % record.get("Reason"))
        assert {n for _t, live in elastic.sampler.elastic(since) for n in live} == {node}
        # The cause fixed: the requeued job (made eligible at once) runs on a fresh pod.
        op.kubectl("patch", "nodeset", ELASTIC_SET, "-n", WATCHED, "--type=merge", "-p", json.dumps(
            {"spec": {"placement": {"nodeSelector": {"soperator.dev/elastic-e2e": None}}}}))
        op.slurm("scontrol update jobid=%s StartTime=now" % job)
        wait_until(lambda: elastic.job(job)["JobState"] == "COMPLETED", POWER_SAVING["resumeTimeout"],
                   "the requeued job to complete", elastic.explain)
        assert elastic.jobs[job]["Restarts"] == "1"

    def test_elastic_operator_killed_at_a_resume_converges_within_30s(self, elastic):
        """The operator gone between Slurm's resume and the pod's creation, as a killed leader leaves it: no replica
        and the Lease still held by the dead leader, renewed at its death (a clean exit would have released it).
        Slurm powers the node up, no pod appears; from a new replica's start the pod is made within 30 s (the dead
        leader's Lease runs out first: 15 s) and the job runs without a requeue."""
        op = elastic.op
        wait_until(elastic.powered_down, 120, "3 powered-down elastic nodes and no elastic pod", elastic.explain)
        dead = leader(op)
        assert dead, "no operator leader"
        duration = op.get_in(OPERATOR_NS, "lease", "soperator-operator")["spec"]["leaseDurationSeconds"]
        op.kubectl("scale", "deployment", "soperator-operator", "-n", OPERATOR_NS, "--replicas=0")
        try:
            wait_until(lambda: not operator_pods(op), 120, "no operator pod")
            job = _job(op, "-N1 -C %s -o /dev/null --wrap true" % ELASTIC_SET)
            up = wait_until(lambda: [n for n in ELASTIC_NODES if "POWERING_UP" in op.node(n)], 60,
                            "Slurm powering a node up")
            assert op.get("pod", "-l", "slurm.soperator.dev/nodeset=" + ELASTIC_SET)["items"] == []
            killed = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            op.kubectl("patch", "lease", "soperator-operator", "-n", OPERATOR_NS, "--type=merge", "-p", json.dumps(
                {"spec": {"holderIdentity": dead, "leaseDurationSeconds": duration, "renewTime": killed}}))
        finally:
            op.kubectl("scale", "deployment", "soperator-operator", "-n", OPERATOR_NS, "--replicas=2")
        wait_until(lambda: [p for p in operator_pods(op) if any(
            s.get("state", {}).get("running") for s in p["status"].get("containerStatuses") or [])], 120,
            "an operator replica running")
        t0 = time.monotonic()
        wait_until(lambda: op.get("pod", up[0]) is not None, 30, "the pod of %s within 30 s of a new replica's "
                   "start" % up[0], elastic.explain)
        print("e2e-operator: elastic: operator killed at a resume (Lease held %ss): new replica running -> pod of "
              "the powered-up node %.1f s" % (duration, time.monotonic() - t0))
        assert leader(op) not in (None, dead) and leader(op) in {p["metadata"]["name"] for p in operator_pods(op)}
        wait_until(lambda: elastic.job(job)["JobState"] == "COMPLETED", POWER_SAVING["resumeTimeout"],
                   "the job to complete", elastic.explain)
        assert elastic.jobs[job]["Restarts"] == "0"
        wait_until(lambda: len(operator_pods(op)) == 2 and all(any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            for p in operator_pods(op)), 180, "both operator replicas back")


def op_status(op, name):
    return (op.get("nodeset", name) or {}).get("status") or {}


def check_no_pod_went_while_its_job_ran(elastic, jobs):
    """For every job: each of its nodes had one pod (one UID, not being deleted) in every sample while the job ran,
    and no DELETE of that pod was received between the job's start and end (the API server's audit log)."""
    deletions = elastic.pod_deletions()
    for job in jobs:
        record = elastic.jobs[job]
        start, end = int(record["StartTime"]), int(record["EndTime"])
        nodes = elastic.hostnames(record["NodeList"])
        during = [live for t, live in elastic.sampler.elastic(start, end)]
        for node in nodes:
            pods = {live[node] for live in during if node in live}
            assert len(pods) == 1 and not next(iter(pods))[1], (job, node, pods)
            assert not [t for t, n in deletions if n == node and start <= t < end], (job, node, deletions)


def test_cluster_wide_install_watches_every_namespace(op):
    """The same image, installed namespaced and then reinstalled with operator_cluster_wide: a ClusterRole (the
    namespaced Role pruned), and a namespace nobody listed.

    Cluster-wide means every SlurmCluster of the local cluster, make demo's too: converged by the same collection,
    it is in sync (nothing applied), gets the NodeSet finalizer while the operator runs, and loses it again when the
    operator is removed.
    """
    op.playbook("operator.yml", install_params())
    assert op.get_in(WATCHED, "role", "soperator-operator") is not None
    op.playbook("operator.yml", install_params(operator_cluster_wide=True, operator_watch_namespaces=[]))
    assert op.kubectl("get", "clusterrole", "soperator-operator", check=False).returncode == 0
    assert op.get_in(WATCHED, "role", "soperator-operator") is None, "the namespaced grant outlived its install"
    assert op.get_in(WATCHED, "rolebinding", "soperator-operator") is None

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
    # No SlurmCluster or NodeSet anywhere (make demo's included) keeps a finalizer of the removed operator.
    for kind in ("slurmclusters", "nodesets"):
        items = json.loads(op.kubectl("get", kind, "-A", "-o", "json").stdout)["items"]
        assert not [i["metadata"]["name"] for i in items
                    if "slurm.soperator.dev/finalizer" in i["metadata"].get("finalizers", [])], kind
