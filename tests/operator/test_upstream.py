"""operator-sdk's upstream ansible-operator (v1.37.1, built from its Go module) with operator/watches.yaml unchanged.

Its API proxy injects owner references into every object a run creates, by default. The munge key, the SSH host
keys and the jail claim are created without one on purpose (they must outlive the SlurmCluster); with the
injection they become owned by the resource the run was for, and garbage collection deletes users' data with
it. The first test shows that with upstream's default; the second, that `--inject-owner-ref=false` (what the
shipped upstream Dockerfile passes) keeps the data through a deletion.
"""

import fcntl
import os
import signal
import socket
import subprocess

import pytest
from operator_harness import ROOT, Cluster, kill_processes_mentioning, wait_for

pytestmark = pytest.mark.cluster


def versions():
    with open(os.path.join(ROOT, "hack", "versions.env")) as handle:
        return dict(line.strip().split("=", 1) for line in handle if "=" in line and not line.startswith("#"))


@pytest.fixture(scope="module")
def ansible_operator():
    subprocess.run([os.path.join(ROOT, "hack", "build-binaries.sh"), "ansible-operator"], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    cache = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
    return os.path.join(cache, "ansible-operator-" + versions()["ANSIBLE_OPERATOR_VERSION"], "bin",
                        "ansible-operator")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream:
    def __init__(self, binary, tmp_path, kubeconfig, collections_path, namespace, inject_owner_ref):
        self.log_path = str(tmp_path / "ansible-operator.log")
        self.home = str(tmp_path / "home")
        os.makedirs(self.home, exist_ok=True)
        bindir = os.path.join(ROOT, ".venv", "bin")
        env = dict(os.environ, KUBECONFIG=kubeconfig, ANSIBLE_COLLECTIONS_PATH=collections_path, HOME=self.home,
                   PATH=bindir + os.pathsep + os.environ["PATH"], ANSIBLE_GATHERING="explicit",
                   ANSIBLE_PYTHON_INTERPRETER=os.path.join(bindir, "python"), ANSIBLE_LOCAL_TEMP=self.home)
        cmd = [binary, "run", "--watches-file", os.path.join(ROOT, "operator", "watches.yaml"),
               "--inject-owner-ref=%s" % ("true" if inject_owner_ref else "false"),
               "--metrics-bind-address", "127.0.0.1:%d" % free_port(),
               "--health-probe-bind-address", "127.0.0.1:%d" % free_port()]
        # The API proxy stays on its default port 8888: v1.37.1's generated kubeconfig names 8888 whatever
        # --proxy-port says.
        env["WATCH_NAMESPACE"] = namespace
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.home,
                                     start_new_session=True, stdin=subprocess.DEVNULL)

    def logs(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        kill_processes_mentioning(self.home)
        self._log.close()


PROXY_PORT = 8888
# Held while an upstream operator runs: its proxy port is fixed, so two test runs on one host (two checkouts)
# take turns instead of one failing to bind and waiting out its timeout.
PROXY_LOCK = "/tmp/soperator-upstream-proxy-%d.lock" % PROXY_PORT


@pytest.fixture
def proxy_port():
    with open(PROXY_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # SO_REUSEADDR as Go's listener sets it: the previous test's proxy leaves its connections in TIME_WAIT,
        # which only a bind without it refuses. A listener still there is given a moment to go.
        errors = []

        def bindable():
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", PROXY_PORT))
                except OSError as e:
                    errors.append(e)
                    return False
            return True

        try:
            wait_for(bindable, 30, 0.5, what="port %d free" % PROXY_PORT)
        except AssertionError:
            pytest.fail("port %d, which upstream's API proxy needs, is taken by another program: %s"
                        % (PROXY_PORT, errors[-1]))
        yield PROXY_PORT


@pytest.fixture
def upstream(ansible_operator, tmp_path, kubeconfig, collections_path, namespace, k8s, kubectl, proxy_port):
    crd_dir = os.path.join(ROOT, "roles", "crds", "files")
    kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "soperator-tests", "-f", crd_dir)
    started = []

    def start(inject_owner_ref):
        op = Upstream(ansible_operator, tmp_path, kubeconfig, collections_path, namespace, inject_owner_ref)
        started.append(op)
        return op

    yield start
    for op in started:
        op.stop()
    Cluster(k8s, namespace).release_finalizers()


def owners(cluster, kind, name):
    reader = {"Secret": cluster.core.read_namespaced_secret,
              "PersistentVolumeClaim": cluster.core.read_namespaced_persistent_volume_claim}[kind]
    refs = reader(name, cluster.ns).metadata.owner_references or []
    return [(r.kind, r.name) for r in refs]


DATA = [("Secret", "demo-munge-key"), ("Secret", "demo-ssh-host-keys"), ("PersistentVolumeClaim", "demo-jail")]


def converged_children(cluster):
    return cluster.names("statefulsets") == ["demo-controller", "demo-cpu", "demo-login"] and \
        cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"] and "demo-jail" in cluster.names("pvcs")


def converged(op, cluster):
    try:
        wait_for(lambda: converged_children(cluster), 240, what="upstream converged the cluster")
    except AssertionError as exc:
        raise AssertionError("%s\n%s" % (exc, op.logs()[-4000:])) from None


def test_upstream_default_injects_owner_references_into_the_data(upstream, k8s, namespace):
    cluster = Cluster(k8s, namespace)
    op = upstream(inject_owner_ref=True)
    for doc in cluster.example():
        cluster.create(doc)
    converged(op, cluster)
    # The danger the shipped flag removes: the data is now owned by a custom resource.
    injected = {obj: owners(cluster, *obj) for obj in DATA}
    assert all(injected.values()), (injected, op.logs()[-3000:])


def test_upstream_with_inject_owner_ref_false_keeps_the_data(upstream, k8s, namespace):
    cluster = Cluster(k8s, namespace)
    op = upstream(inject_owner_ref=False)
    # No login pod: none holds the SSH host keys, so the Secret deleted below may be made anew (a key Secret a
    # running pod mounts is not: SecretMissing, tests/integration/test_converge_guards.py).
    docs = cluster.example()
    docs[0]["spec"]["login"]["replicas"] = 0
    for doc in docs:
        cluster.create(doc)
    converged(op, cluster)
    assert {obj: owners(cluster, *obj) for obj in DATA} == {obj: [] for obj in DATA}
    # A NodeSet run (upstream reconciles each NodeSet with the cluster role) must not take the data either.
    cluster.scale("cpu", 3)
    wait_for(lambda: cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 3, 120,
             what="upstream applied the scale")
    assert {obj: owners(cluster, *obj) for obj in DATA} == {obj: [] for obj in DATA}
    # A Secret created by a NodeSet run (deleted by hand, then the NodeSet scaled): still nobody's.
    cluster.core.delete_namespaced_secret("demo-ssh-host-keys", cluster.ns)
    cluster.scale("cpu", 2)
    wait_for(lambda: "demo-ssh-host-keys" in cluster.names("secrets"), 120, what="the Secret made again")
    assert owners(cluster, "Secret", "demo-ssh-host-keys") == []
    # The NodeSet deleted while its cluster lives: its objects go with it, the cluster's data stays. (kwok runs no
    # Slurm to drain its nodes first, so its finalizer is released by hand once the deletion is under way.)
    cluster.delete("NodeSet", "cpu")
    wait_for(lambda: (cluster.get("NodeSet", "cpu") or {}).get("metadata", {}).get("deletionTimestamp"), 60,
             what="the NodeSet being deleted")
    cluster.patch("NodeSet", "cpu", {"metadata": {"finalizers": None}})
    wait_for(lambda: cluster.get("NodeSet", "cpu") is None and "demo-cpu" not in cluster.names("statefulsets"), 120,
             what="the NodeSet and its workers gone")
    assert cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"], op.logs()[-3000:]
    assert "demo-jail" in cluster.names("pvcs")
    # Deleting the SlurmCluster runs the teardown role as the finalizer: workloads go, the data stays.
    cluster.delete("SlurmCluster", "demo")
    wait_for(lambda: cluster.get("SlurmCluster", "demo") is None, 240, what="upstream finalized the cluster",
             )
    wait_for(lambda: cluster.names("statefulsets") == [], 120, what="workloads deleted")
    assert cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"], op.logs()[-3000:]
    assert "demo-jail" in cluster.names("pvcs")


def test_the_shipped_upstream_image_passes_the_flag_and_the_tested_version():
    """operator/Containerfile.upstream is what users build: the flag tested above, the version built above."""
    with open(os.path.join(ROOT, "operator", "Containerfile.upstream")) as handle:
        text = handle.read()
    assert "FROM quay.io/operator-framework/ansible-operator:%s\n" % versions()["ANSIBLE_OPERATOR_VERSION"] in text
    entrypoint = [line for line in text.replace("\\\n", " ").splitlines() if line.startswith("ENTRYPOINT")]
    assert len(entrypoint) == 1 and '"--inject-owner-ref=false"' in entrypoint[0]
