"""End to end: real pods on the local cluster's real node, running the project's images and real Slurm.

One real-node cluster serves every end-to-end suite of a session: the local cluster ``make demo`` (or
``make test``) started, when it has a real node; else ``SOPERATOR_E2E_DIR``; else a private instance started
here and stopped at the end. The project's images are built (cached) and imported once. Each suite works in
namespaces of its own, so a demo cluster living in namespace ``slurm`` is never touched. Needs root: skipped
without it, failed under CI=true (tests/prerequisites.py).
"""

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

import pytest
import yaml
from polling import wait_until  # noqa: E402
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "cpu-cluster-local.yaml")
STANDIN_GPU = os.path.join(ROOT, "tests", "e2e", "standin_gpu")
STANDIN_GPU_IMAGE = "soperator/slurm-worker-standin-gpu:0.1.0"
NAMESPACE = "e2e-site"
TOOL = os.path.join(ROOT, "hack", "localcluster.py")


def held_job(suite, node, name):
    """A job on ``node`` that runs until the test lets it finish (``/root/<name>.go`` in the shared jail), so that it
    ends only if its pod outlived whatever the test waited for meanwhile (a drain): (job id, release). Its output,
    ``finished-on-<node>``, is in ``/root/<name>.out``. ``suite``: anything with ``jail(command)``."""
    suite.jail("rm -f /root/%s.go /root/%s.out" % (name, name))
    submit = suite.jail("cd /root && sbatch --parsable -w %s -o /root/%s.out --wrap 'while [ ! -e /root/%s.go ]; "
                        "do sleep 1; done; echo finished-on-$(hostname)'" % (node, name, name))
    assert submit.returncode == 0, submit.stderr

    def release():  # retried: the login pod it goes through may be being replaced (an upgrade)
        wait_until(lambda: suite.jail("touch /root/%s.go" % name).returncode == 0, 120, "the job of %s released" % name)
    return submit.stdout.strip(), release


def versions():
    with open(os.path.join(ROOT, "hack", "versions.env")) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))


class E2E:
    def __init__(self, state_dir, namespace=NAMESPACE):
        self.state_dir = state_dir
        self.namespace = namespace
        self.worker_image = None
        self.kubeconfig = os.path.join(state_dir, "kubeconfig")
        cache = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
        self.kubectl_bin = os.path.join(cache, "kubernetes-" + versions()["KUBERNETES_VERSION"], "bin", "kubectl")
        self.env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state_dir, K8S_AUTH_KUBECONFIG=self.kubeconfig,
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
                        ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
                        PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
        self.env.pop("SOPERATOR_KUBECONFIG", None)

    # --- Kubernetes -------------------------------------------------------------------------------------
    def kubectl(self, *args, check=True, timeout=120, input=None):
        res = subprocess.run([self.kubectl_bin, "--kubeconfig", self.kubeconfig] + list(args), capture_output=True,
                             text=True, timeout=timeout, input=input,
                             stdin=None if input is not None else subprocess.DEVNULL)
        if check and res.returncode:
            raise AssertionError("kubectl %s: %s" % (" ".join(args), res.stderr))
        return res

    def get(self, *args):
        res = self.kubectl("get", "-n", self.namespace, "-o", "json", *args, check=False)
        return json.loads(res.stdout) if res.returncode == 0 else None

    def get_in(self, namespace, *args):
        res = self.kubectl("get", "-n", namespace, "-o", "json", *args, check=False)
        return json.loads(res.stdout) if res.returncode == 0 else None

    def explain_in(self, namespace):
        return self.kubectl("get", "all", "-n", namespace, "-o", "wide", check=False).stdout

    def exec(self, pod, container, command, timeout=120):
        return self.kubectl("exec", "-n", self.namespace, pod, "-c", container, "--", "sh", "-c", command,
                            check=False, timeout=timeout)

    # --- Slurm ------------------------------------------------------------------------------------------
    def slurm(self, command, timeout=120):
        """A Slurm command on the controller (slurmctld's own pod)."""
        return self.exec("demo-controller-0", "slurmctld", command, timeout=timeout)

    def jail(self, command, timeout=180):
        """A shell command as root inside the jail, from the login pod (what a logged-in user's shell sees)."""
        return self.exec("demo-login-0", "sshd", "chroot /mnt/jail sh -c %s" % shlex.quote(command), timeout)

    def slurmctld_uids(self):
        """slurmctld's real, effective, saved and filesystem uids, from its own pod ([] while it is not running)."""
        found = self.slurm("for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = slurmctld ] && "
                           "grep ^Uid: $p/status; done").stdout.split()
        return found[1:] if found[:1] == ["Uid:"] else found

    def sinfo(self):
        """{node: state} from the controller, {} while it does not answer."""
        res = self.slurm("sinfo -h -N -o '%N %T'")
        if res.returncode:
            return {}
        return dict(line.split() for line in res.stdout.splitlines() if line.strip())

    def nodeset_counts(self, name="cpu"):
        """The Slurm node counts a NodeSet's status shows, and the same counted from sinfo (state -> nodes)."""
        status = (self.get("nodeset", name) or {}).get("status") or {}
        shown = dict((k, status.get(k, 0)) for k in ("idle", "allocated", "mixed", "drained", "down"))
        counted = dict((k, 0) for k in shown)
        for state in self.sinfo().values():
            state = state.rstrip("*~#!%$@^-")
            key = {"drained": "drained", "draining": "drained", "down": "down"}.get(state, state)
            if key in counted:
                counted[key] += 1
        return shown, counted

    def slurm_condition(self, pod):
        """A worker pod's SlurmNodeReady condition."""
        conds = ((self.get("pod", pod) or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "SlurmNodeReady"), None)

    def node(self, name):
        res = self.slurm("scontrol show node %s -o" % name)
        return res.stdout if res.returncode == 0 else ""

    def explain(self):
        out = [self.kubectl("get", "pods", "-n", self.namespace, "-o", "wide", check=False).stdout,
               self.slurm("sinfo -N -o '%N %T %E'; squeue").stdout]
        # The daemons' own words: why a node does not respond is in their logs, not in sinfo.
        for pod, container in (("demo-controller-0", "slurmctld"), ("demo-cpu-0", "slurmd"), ("demo-cpu-1", "slurmd")):
            out.append("--- %s/%s (last 25 lines) ---\n%s" % (pod, container, self.kubectl(
                "logs", "-n", self.namespace, pod, "-c", container, "--tail=25", check=False).stdout))
        return "\n".join(out)

    # --- the collection ---------------------------------------------------------------------------------
    def definition(self, replicas=None, slurm=None, extra_nodeset=None, login=None, health_checks=None, nodeset=None):
        """The local example, in this suite's namespace (workers on ``self.worker_image`` when set), ``slurm``
        merged into its spec.slurm, ``nodeset`` into its NodeSet's spec; with ``extra_nodeset``, a second NodeSet
        of that name and one worker."""
        with open(EXAMPLE) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = self.namespace
        if replicas is not None:
            docs[1]["spec"]["replicas"] = replicas
        if slurm:
            docs[0]["spec"]["slurm"].update(slurm)  # the example's own settings (root jobs allowed) stay
        if login:
            docs[0]["spec"]["login"].update(login)
        if health_checks:
            docs[0]["spec"]["healthChecks"] = health_checks
        if nodeset:
            docs[1]["spec"].update(nodeset)
        if self.worker_image:
            docs[1]["spec"]["image"] = self.worker_image
        if extra_nodeset:
            extra = json.loads(json.dumps(docs[1]))
            extra["metadata"]["name"] = extra_nodeset
            extra["spec"]["replicas"] = 1
            docs.append(extra)
        return docs

    def retag_image(self, image, tag):
        """Tag an image of the real node's containerd anew (what a rebuilt image pushed under a new tag is to the
        node: a reference the pods have not used); returns the new reference."""
        with open(os.path.join(self.state_dir, "state.json")) as f:
            socket = json.load(f)["real_node"]["socket"]
        ctr = ["ctr", "--address", socket, "--namespace", "k8s.io", "images"]
        source = "docker.io/" + image if image.count("/") == 1 else image
        target = source.rsplit(":", 1)[0] + ":" + tag
        subprocess.run(ctr + ["tag", "--force", source, target], check=True, capture_output=True,
                       stdin=subprocess.DEVNULL)
        return target

    def site(self, docs, wait=True, background=False, extra=None, check=True, playbook=None):
        """site.yml (this checkout's, or ``playbook``) on ``docs``."""
        handle, varfile = tempfile.mkstemp(prefix="site-", suffix=".json")
        with os.fdopen(handle, "w") as f:
            json.dump(dict({"soperator_clusters": [{"resources": docs, "wait": wait}]}, **(extra or {})), f)
        argv = ["ansible-playbook", playbook or os.path.join(ROOT, "playbooks", "site.yml"), "-e", "@" + varfile]
        if background:
            return subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    stdin=subprocess.DEVNULL)
        res = subprocess.run(argv, env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert res.returncode == 0 or not check, res.stdout[-5000:] + res.stderr[-2000:]
        return res

    def playbook(self, name, *extra_vars, check=True):
        """ansible-playbook playbooks/<name> with JSON extra vars, from the checkout's collection."""
        argv = ["ansible-playbook", os.path.join(ROOT, "playbooks", name)]
        for item in extra_vars:
            argv += ["-e", json.dumps(item)]
        res = subprocess.run(argv, env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if check:
            assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-2000:]
        return res

    def events(self, name, reason):
        """The Events on object ``name`` of this suite's namespace with ``reason``."""
        found = self.kubectl("get", "events", "-n", self.namespace, "-o", "json", "--field-selector",
                             "involvedObject.name=%s,reason=%s" % (name, reason)).stdout
        return json.loads(found)["items"]

    def audit_offset(self):
        """Where the API server's audit log ends now (hack/localcluster.py writes one: Metadata level)."""
        return os.path.getsize(os.path.join(self.state_dir, "logs", "audit.log"))

    def exec_commands(self, pod, since_offset):
        """The argv of every exec into ``pod`` (this suite's namespace) that the audit log recorded since
        ``since_offset``: an exec's argv is in its request URI, which every audit level records."""
        path = "/api/v1/namespaces/%s/pods/%s/exec?" % (self.namespace, pod)
        commands = {}
        with open(os.path.join(self.state_dir, "logs", "audit.log")) as f:
            f.seek(since_offset)
            for line in f:
                if path not in line:
                    continue
                event = json.loads(line)
                uri = event.get("requestURI") or ""
                if uri.startswith(path):
                    query = urllib.parse.parse_qs(uri.split("?", 1)[1], keep_blank_values=True)
                    commands[event["auditID"]] = query.get("command", [])
        return list(commands.values())

    @contextlib.contextmanager
    def advertised_gpus(self, count):
        """The real node advertises ``count`` nvidia.com/gpu, as the NVIDIA device plugin's registration makes it do
        (a status patch of its capacity; the kubelet keeps an extended resource it does not manage, and admits pods
        asking for it); removed afterwards."""
        node = self.kubectl("get", "nodes", "-l", "soperator.dev/localcluster=real", "-o",
                            "jsonpath={.items[0].metadata.name}").stdout.strip()

        def patch(value):
            self.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(
                {"status": {"capacity": {"nvidia.com/gpu": value}, "allocatable": {"nvidia.com/gpu": value}}}))
        patch(str(count))
        try:
            yield node
        finally:
            patch(None)

    def wait_idle(self, nodes, timeout=240):
        return wait_until(lambda: all(self.sinfo().get(n) == "idle" for n in nodes) and self.sinfo(), timeout,
                          "%s idle in sinfo" % ", ".join(nodes), self.explain)


def _tool(env, *args):
    subprocess.run([sys.executable, TOOL] + list(args), env=env, check=True, stdin=subprocess.DEVNULL)


def _has_real_node(env):
    state_dir = env.get("SOPERATOR_LOCALCLUSTER_DIR") or os.path.expanduser("~/.local/state/soperator/localcluster")
    if subprocess.run([sys.executable, TOOL, "status"], env=env, capture_output=True,
                      stdin=subprocess.DEVNULL).returncode != 0:
        return False
    with open(os.path.join(state_dir, "state.json")) as f:
        return bool(json.load(f).get("real_node"))


@pytest.fixture(scope="session")
def real_node_cluster(tmp_path_factory):
    """The state dir of a local cluster with a real node, the project's images imported into it."""
    require_root("end to end: kubelet, containerd, the images' dockerd")
    env = dict(os.environ)
    env.pop("SOPERATOR_KUBECONFIG", None)
    candidates = [os.environ.get("SOPERATOR_LOCALCLUSTER_DIR") or os.path.expanduser(
        "~/.local/state/soperator/localcluster")]
    if os.environ.get("SOPERATOR_E2E_DIR"):
        candidates.insert(0, os.environ["SOPERATOR_E2E_DIR"])
    state_dir, started = None, False
    for candidate in candidates:
        if _has_real_node(dict(env, SOPERATOR_LOCALCLUSTER_DIR=candidate)):
            state_dir = candidate
            break
    if state_dir is None:
        state_dir = os.environ.get("SOPERATOR_E2E_DIR") or str(tmp_path_factory.mktemp("e2e") / "lc")
        _tool(dict(env, SOPERATOR_LOCALCLUSTER_DIR=state_dir), "up", "--real-node", "--nodes", "1", "--gpu-nodes", "0")
        started = True
    env["SOPERATOR_LOCALCLUSTER_DIR"] = state_dir
    subprocess.run([os.path.join(ROOT, "hack", "images.sh"), "build", "save"], check=True, stdin=subprocess.DEVNULL)
    archives = subprocess.run([os.path.join(ROOT, "hack", "images.sh"), "archives"], check=True, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL).stdout.split()
    _tool(env, "import-image", *archives)
    try:
        yield state_dir
    finally:
        if started and os.environ.get("SOPERATOR_KEEP_E2E") != "1":
            _tool(env, "down")


@pytest.fixture(scope="session")
def e2e(real_node_cluster):
    """The local example converged by playbooks/site.yml in its own namespace, workers idle in sinfo."""
    cluster = E2E(real_node_cluster)
    t_apply = time.monotonic()
    cluster.site(cluster.definition())
    cluster.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    print("\ne2e: example applied -> all nodes idle in sinfo %.1f s" % (time.monotonic() - t_apply))
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "namespace", cluster.namespace, "--wait=false", check=False)


@pytest.fixture(scope="session")
def standin_gpu_image(real_node_cluster, tmp_path_factory):
    """The worker image with a stand-in for one GPU (tests/e2e/standin_gpu: the stand-in driver libraries of
    tests/standin_driver.py, its nvidia-smi program answering with a recorded H100 output, the driver's procfs
    entry), built FROM the project's worker image with its engine and imported into the real node."""
    import standin_driver  # tests/

    ctx = tmp_path_factory.mktemp("standin-gpu")
    for name in ("Containerfile", "standin-gpu-entrypoint"):
        shutil.copy2(os.path.join(STANDIN_GPU, name), str(ctx / name))
    standin_driver.build_libraries(str(ctx / "lib"))
    with open(os.path.join(ROOT, "tests", "unit", "fixtures", "gpu", "h100-query-gpu.yaml")) as f:
        recording = yaml.safe_load(f)["stdout"]
    # nvidia-smi is a program, as the driver's: the worker shows the jail only programs (a script is skipped). Its
    # answers: the queries of this suite and of the worker's health program.
    sys.path.insert(0, os.path.join(ROOT, "images", "worker"))
    import soperator_health  # the worker image's program

    fields = soperator_health.QUERY_FIELDS
    standin_driver.build_smi(str(ctx / "nvidia-smi"), {
        "-L": "GPU 0: %s (UUID: GPU-00000000-0000-0000-0000-000000000000)\n" % standin_driver.MODEL,
        "--query-gpu=name,persistence_mode --format=csv,noheader": standin_driver.columns(
            recording, ["name", "persistence_mode"], False),
        "--query-gpu=%s --format=csv" % ",".join(fields): standin_driver.columns(recording, fields, True),
    }, str(ctx / "lib"))
    (ctx / "information").write_text(standin_driver.information("0000:00:09.0", 0))
    build_test_image(real_node_cluster, str(ctx), STANDIN_GPU_IMAGE, str(ctx / "standin-gpu.tar"))
    return STANDIN_GPU_IMAGE


def build_test_image(state_dir, context, tag, archive, build_args=()):
    """An image of a test (``context``'s Containerfile, FROM one of the project's), built with the project's engine
    and imported into the real node of the local cluster in ``state_dir``."""
    images = os.path.join(ROOT, "hack", "images.sh")
    subprocess.run([images, "start"], check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        host = subprocess.run([images, "env"], check=True, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL).stdout.split("=", 1)[1].strip()
        docker = ["/usr/bin/docker", "-H", host]
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        build = ["build", "-q"] + [a for arg in build_args for a in ("--build-arg", arg)] + [
            "-f", os.path.join(context, "Containerfile"), "-t", tag, context]
        for argv in (build, ["save", "-o", archive, tag]):
            res = subprocess.run(docker + argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    finally:
        subprocess.run([images, "stop"], check=False, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _tool(dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state_dir), "import-image", archive)
