"""Run the operator as a local subprocess against the test cluster, and poll for outcomes (never sleep)."""

import os
import re
import signal
import subprocess
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP, VERSION = "slurm.soperator.dev", "v1alpha1"
# The Lease timing every operator test runs with (client-go's 15s/10s/2s, scaled down): duration, renew deadline,
# retry period, as the operator's flags take them.
LEASE = ("4s", "3s", "0.5s")


def wait_for(predicate, timeout=120.0, interval=0.25, what="condition"):
    """Poll ``predicate`` until it returns something truthy; return it, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001  API hiccups while polling
            last_error = exc
        time.sleep(interval)  # polling cadence, not synchronisation
    raise AssertionError("timed out after %.0fs waiting for %s (last error: %s)" % (timeout, what, last_error))


def holds_for(predicate, seconds, interval=0.25):
    """True if ``predicate`` stays true for the whole window (used to show something does NOT happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(interval)
    return True


def write_watches(path, reconcile_period="5s"):
    """The repository's watches file, unchanged but for the period (drains on, as shipped)."""
    with open(os.path.join(ROOT, "operator", "watches.yaml"), encoding="utf-8") as handle:
        entries = yaml.safe_load(handle)
    for entry in entries:
        entry["reconcilePeriod"] = reconcile_period
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(entries, handle)
    return path


class OperatorProcess:
    def __init__(self, tmp_path, kubeconfig, collections_path, namespace, identity, watches,
                 lease=LEASE, extra_args=()):
        self.identity = identity
        self.workdir = str(tmp_path / ("work-" + identity))
        self.log_path = str(tmp_path / ("%s.log" % identity))
        env = dict(os.environ)
        env.update(PYTHONPATH=os.path.join(ROOT, "operator"), ANSIBLE_COLLECTIONS_PATH=collections_path,
                   PYTHONUNBUFFERED="1")
        cmd = [sys.executable, "-m", "soperator_operator", "--watches", watches, "--namespace", namespace,
               "--lease-namespace", namespace, "--identity", identity, "--kubeconfig", kubeconfig,
               "--health-bind", "127.0.0.1:0", "--work-dir", self.workdir,
               "--lease-duration", lease[0], "--renew-deadline", lease[1], "--retry-period", lease[2],
               "--max-workers", "2", "--backoff-cap", "10s"] + list(extra_args)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path),
                                     start_new_session=True)
        self.port = None

    def logs(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def http_port(self):
        if self.port is None:
            match = wait_for(lambda: re.search(r"health and metrics on [\d.]+:(\d+)", self.logs()), 30,
                             what="%s to listen" % self.identity)
            self.port = int(match.group(1))
        return self.port

    def get(self, path):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http_port(), path), timeout=5) as resp:
            return resp.status, resp.read().decode()

    def metric(self, name, **labels):
        """Sum of a metric's samples matching ``labels``."""
        _, text = self.get("/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all('%s="%s"' % (k, v) in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def terminate(self, timeout=90):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.flush()

    def kill9(self):
        """SIGKILL the operator and every process of its runs, as a pod's death would."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        kill_processes_mentioning(self.workdir)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        kill_processes_mentioning(self.workdir)
        self._log.close()


def kill_processes_mentioning(text):
    """SIGKILL processes whose command line names ``text`` (our own per-test work dir: only ours match)."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


class Cluster:
    """Small API helpers over the test cluster, for one namespace."""

    def __init__(self, api, namespace):
        from kubernetes import client
        self.ns = namespace
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.coord = client.CoordinationV1Api(api)

    def example(self, cluster_spec=None, nodeset_spec=None):
        with open(os.path.join(ROOT, "examples", "cpu-cluster.yaml"), encoding="utf-8") as handle:
            docs = [d for d in yaml.safe_load_all(handle) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = self.ns
            if doc["kind"] == "SlurmCluster":  # kwok nodes only: a real node may be up too (make demo)
                doc["spec"]["placement"] = {"nodeSelector": {"soperator.dev/localcluster": "kwok"}}
            extra = cluster_spec if doc["kind"] == "SlurmCluster" else nodeset_spec
            for key, value in (extra or {}).items():
                doc["spec"][key] = value
        return docs

    def create(self, doc):
        plural = doc["kind"].lower() + "s"
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, doc)

    def get(self, kind, name):
        from kubernetes.client.rest import ApiException
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, kind.lower() + "s", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch(self, kind, name, body):
        return self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, kind.lower() + "s", name, body)

    def scale(self, name, replicas):
        return self.custom.patch_namespaced_custom_object_scale(GROUP, VERSION, self.ns, "nodesets", name,
                                                                {"spec": {"replicas": replicas}})

    def delete(self, kind, name):
        return self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, kind.lower() + "s", name)

    def release_finalizers(self):
        for kind in ("SlurmCluster", "NodeSet"):
            items = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, kind.lower() + "s")["items"]
            for item in items:
                if item["metadata"].get("finalizers"):
                    self.patch(kind, item["metadata"]["name"], {"metadata": {"finalizers": None}})

    def condition(self, kind, name, ctype):
        obj = self.get(kind, name) or {}
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == ctype:
                return cond
        return None

    def names(self, what, selector="slurm.soperator.dev/cluster=demo"):
        lister = {
            "statefulsets": self.apps.list_namespaced_stateful_set,
            "services": self.core.list_namespaced_service,
            "configmaps": self.core.list_namespaced_config_map,
            "secrets": self.core.list_namespaced_secret,
            "pvcs": self.core.list_namespaced_persistent_volume_claim,
            "jobs": self.batch.list_namespaced_job,
        }[what]
        return sorted(i.metadata.name for i in lister(self.ns, label_selector=selector).items)

    def lease_holder(self, name="soperator-operator"):
        from kubernetes.client.rest import ApiException
        try:
            return self.coord.read_namespaced_lease(name, self.ns).spec.holder_identity
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def events(self, name="demo"):
        items = self.core.list_namespaced_event(self.ns, field_selector="involvedObject.name=%s" % name).items
        return [(e.type, e.reason, e.message) for e in items if e.source and
                e.source.component == "soperator-operator"]
