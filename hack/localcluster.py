#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, for development, tests and the demo.

    hack/localcluster.py up [--nodes N] [--gpu-nodes M]   build (once, cached) and start everything
    hack/localcluster.py down                              stop exactly the recorded PIDs, remove the state
    hack/localcluster.py status                            what runs, and whether the API answers
    hack/localcluster.py kubeconfig                        print the kubeconfig path
    hack/localcluster.py nodes N [--gpu-nodes M]           (re)size the fake kwok node pool

Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (all built from the pinned
``k8s.io/kubernetes`` module by hack/build-binaries.sh, cached under ~/.cache/soperator) and kwok, which
plays kubelet for fake nodes so StatefulSet pods get scheduled and become Running/Ready.

With ``SOPERATOR_KUBECONFIG=/path`` (or ``--use-kubeconfig``) nothing is started: the given cluster (kind,
a real one) is used as is, so the same tests run against it.

Stdlib only: it must run before the venv exists.
"""

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
STATE = os.environ.get(
    "SOPERATOR_LOCALCLUSTER_DIR", os.path.expanduser("~/.local/state/soperator/localcluster")
)
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
# kwok only manages nodes carrying this annotation, so it never touches a real kubelet's node.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


def versions():
    out = {}
    with open(os.path.join(HERE, "versions.env")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k] = v
    return out


def binpaths():
    v = versions()
    k8s = os.path.join(CACHE, "kubernetes-" + v["KUBERNETES_VERSION"], "bin")
    return {
        "kube-apiserver": os.path.join(k8s, "kube-apiserver"),
        "kube-controller-manager": os.path.join(k8s, "kube-controller-manager"),
        "kube-scheduler": os.path.join(k8s, "kube-scheduler"),
        "kubectl": os.path.join(k8s, "kubectl"),
        "etcd": os.path.join(CACHE, "etcd-" + v["ETCD_VERSION"], "bin", "etcd"),
        "kwok": os.path.join(CACHE, "kwok-" + v["KWOK_VERSION"], "bin", "kwok"),
    }


def ensure_binaries():
    missing = [p for p in binpaths().values() if not os.access(p, os.X_OK)]
    if missing:
        print("building (cached afterwards): %s" % ", ".join(os.path.basename(m) for m in missing), flush=True)
        subprocess.run([os.path.join(HERE, "build-binaries.sh"), "control-plane"], check=True)
    return binpaths()


def log(msg):
    print("localcluster: " + msg, flush=True)


# --- state -------------------------------------------------------------------------------------


def state_path(*parts):
    return os.path.join(STATE, *parts)


def load_state():
    try:
        with open(state_path("state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save_state(state):
    tmp = state_path("state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2, sort_keys=True)
    os.replace(tmp, state_path("state.json"))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_matches(pid, exe):
    """The PID still runs the binary we started (guards against PID reuse before we kill it)."""
    try:
        return os.readlink("/proc/%d/exe" % pid) == os.path.realpath(exe)
    except OSError:
        return False


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- PKI -----------------------------------------------------------------------------------------


def openssl(*args, **kw):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def make_pki(pki):
    os.makedirs(pki, exist_ok=True)
    os.chmod(pki, 0o700)
    ca_key, ca_crt = os.path.join(pki, "ca.key"), os.path.join(pki, "ca.crt")
    openssl("genrsa", "-out", ca_key, "2048")
    openssl("req", "-x509", "-new", "-key", ca_key, "-subj", "/CN=soperator-localcluster-ca", "-days", "3650",
            "-out", ca_crt)

    def issue(name, subj, sans=None, server=False):
        key, csr, crt = (os.path.join(pki, name + ext) for ext in (".key", ".csr", ".crt"))
        ext = os.path.join(pki, name + ".ext")
        openssl("genrsa", "-out", key, "2048")
        openssl("req", "-new", "-key", key, "-subj", subj, "-out", csr)
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth,clientAuth" if server else "clientAuth"))
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(sans))
        openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "3650",
                "-extfile", ext, "-out", crt)
        os.remove(csr)
        os.remove(ext)

    issue("apiserver", "/CN=kube-apiserver", server=True, sans=[
        "IP:127.0.0.1", "IP:" + SERVICE_IP, "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    issue("admin", "/O=system:masters/CN=localcluster-admin")
    issue("controller-manager", "/CN=system:kube-controller-manager")
    issue("scheduler", "/CN=system:kube-scheduler")
    issue("kwok", "/O=system:masters/CN=kwok")
    issue("provisioner", "/O=system:masters/CN=localcluster-provisioner")
    openssl("genrsa", "-out", os.path.join(pki, "sa.key"), "2048")
    openssl("rsa", "-in", os.path.join(pki, "sa.key"), "-pubout", "-out", os.path.join(pki, "sa.pub"))


def write_kubeconfig(path, server, pki, user):
    def b64(name):
        with open(os.path.join(pki, name), "rb") as f:
            return base64.b64encode(f.read()).decode()

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "localcluster", "cluster": {
            "server": server, "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(user + ".crt"), "client-key-data": b64(user + ".key")}}],
        "contexts": [{"name": "localcluster", "context": {"cluster": "localcluster", "user": user}}],
        "current-context": "localcluster",
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)  # JSON is valid YAML; keeps this file stdlib-only
    os.chmod(path, 0o600)


# --- processes -----------------------------------------------------------------------------------


def spawn(state, name, argv):
    logf = open(state_path("logs", name + ".log"), "ab")
    proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=STATE)
    logf.close()
    state["processes"][name] = {"pid": proc.pid, "exe": os.path.realpath(argv[0]), "argv": argv}
    save_state(state)
    return proc


def api_get(state, path, timeout=2.0):
    ctx = ssl.create_default_context(cafile=state_path("pki", "ca.crt"))
    ctx.load_cert_chain(state_path("pki", "admin.crt"), state_path("pki", "admin.key"))
    url = "https://127.0.0.1:%d%s" % (state["ports"]["apiserver"], path)
    with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
        return r.status, r.read()


def wait_for(what, predicate, timeout, procs=()):
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        for name, p in procs:
            if p.poll() is not None:
                raise SystemExit("localcluster: %s exited (%s) while waiting for %s; see %s" % (
                    name, p.returncode, what, state_path("logs", name + ".log")))
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - anything short of success means "not yet"
            pass
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise SystemExit("localcluster: timed out after %ss waiting for %s" % (timeout, what))


def kubectl(state, *args, input_data=None, check=True):
    res = subprocess.run([binpaths()["kubectl"], "--kubeconfig", state_path("kubeconfig")] + list(args),
                         input=input_data, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemExit("localcluster: kubectl %s failed: %s" % (" ".join(args[:2]), res.stderr.strip()))
    return res


# --- fake nodes ----------------------------------------------------------------------------------


def node_manifest(name, gpu):
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "kwok", "soperator.dev/localcluster": "kwok",
    }
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    if gpu:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPU_PRODUCT,
                       "nvidia.com/gpu.count": "8"})
        capacity["nvidia.com/gpu"] = "8"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1]}},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def set_nodes(state, count, gpu_count):
    """Make the kwok pool exactly `count` nodes named kwok-node-<i>, the first `gpu_count` with GPUs."""
    if gpu_count > count:
        raise SystemExit("localcluster: --gpu-nodes (%d) cannot exceed the node count (%d)" % (gpu_count, count))
    want = {"kwok-node-%d" % i: i < gpu_count for i in range(count)}
    out = kubectl(state, "get", "nodes", "-l", "type=kwok", "-o", "jsonpath={.items[*].metadata.name}").stdout
    have = set(out.split())
    extra = sorted(have - set(want))
    if extra:
        kubectl(state, "delete", "node", "--wait=false", *extra)
    items = [node_manifest(n, gpu) for n, gpu in want.items()]
    for i in range(0, len(items), 250):
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items[i:i + 250]})
        kubectl(state, "apply", "--server-side", "--field-manager=localcluster", "-f", "-", input_data=body)
    # Status in an apply only counts when the object is created: nodes that already existed get their
    # capacity through the status subresource (a CPU node may have become a GPU node, or the reverse).
    for item in items:
        name = item["metadata"]["name"]
        if name in have:
            capacity = dict(item["status"]["capacity"])
            capacity.setdefault("nvidia.com/gpu", None)  # merge patch: null removes GPUs from a CPU node
            kubectl(state, "patch", "node", name, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": capacity, "allocatable": capacity}}))
    state["nodes"] = {"count": count, "gpu": gpu_count}
    save_state(state)


def nodes_ready(state, count):
    out = kubectl(state, "get", "nodes", "-l", "type=kwok", "-o",
                  "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
                  check=False).stdout.split()
    return len(out) >= count and all(s == "True" for s in out)



# --- storage ---------------------------------------------------------------------------------------
# A minimal external provisioner for the StorageClass `standard`: hostPath-backed PersistentVolumes of any
# access mode (the jail needs ReadWriteMany), deleted with their directory when released. It is a test
# stand-in for NFS/CephFS/cloud filestores: one machine, no isolation, no capacity accounting.
PROVISIONER = "soperator.dev/localcluster-hostpath"
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}


class Api:
    """Just enough of a Kubernetes client for the provisioner (stdlib: runs without the venv)."""

    def __init__(self, state, user):
        self.base = "https://127.0.0.1:%d" % state["ports"]["apiserver"]
        self.ctx = ssl.create_default_context(cafile=state_path("pki", "ca.crt"))
        self.ctx.load_cert_chain(state_path("pki", user + ".crt"), state_path("pki", user + ".key"))

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            if e.code in (404, 409):
                return None
            raise


def provision_once(api, root):
    pvs = api.call("GET", "/api/v1/persistentvolumes")["items"]
    bound = {(pv["spec"].get("claimRef") or {}).get("uid") for pv in pvs}
    for pvc in api.call("GET", "/api/v1/persistentvolumeclaims")["items"]:
        spec, meta = pvc["spec"], pvc["metadata"]
        if spec.get("storageClassName") != "standard" or spec.get("volumeName") or meta["uid"] in bound:
            continue
        if meta.get("deletionTimestamp"):
            continue
        name = "pvc-" + meta["uid"]
        path = os.path.join(root, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o777)
        api.call("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                "volumeMode": spec.get("volumeMode", "Filesystem"),
                "hostPath": {"path": path, "type": "DirectoryOrCreate"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                             "name": meta["name"], "uid": meta["uid"]},
            }})
    for pv in pvs:
        ann = pv["metadata"].get("annotations", {})
        if ann.get("pv.kubernetes.io/provisioned-by") == PROVISIONER and pv.get("status", {}).get("phase") in (
                "Released", "Failed") and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            shutil.rmtree(os.path.join(root, pv["metadata"]["name"]), ignore_errors=True)
            api.call("DELETE", "/api/v1/persistentvolumes/" + pv["metadata"]["name"])


def cmd_provisioner(args):
    """Long-running: started by `up` as one of the recorded processes."""
    state = load_state()
    api = Api(state, "provisioner")
    root = state_path("volumes")
    os.makedirs(root, exist_ok=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        try:
            provision_once(api, root)
        except Exception as e:  # noqa: BLE001 - keep serving; the API may be restarting
            print("provisioner: %s" % e, flush=True)
        time.sleep(1.0)
    return 0

# --- commands ------------------------------------------------------------------------------------


def external_kubeconfig(args):
    path = getattr(args, "use_kubeconfig", None) or os.environ.get("SOPERATOR_KUBECONFIG")
    if path:
        return os.path.abspath(os.path.expanduser(path))
    return None


def running(state):
    return state is not None and all(pid_alive(p["pid"]) for p in state["processes"].values())


def cmd_up(args):
    ext = external_kubeconfig(args)
    if ext:
        log("using existing cluster from %s (nothing started)" % ext)
        return 0
    state = load_state()
    if running(state):
        log("already up (%s)" % state_path("kubeconfig"))
        if args.nodes is not None:
            set_nodes(state, args.nodes, args.gpu_nodes if args.gpu_nodes is not None else min(1, args.nodes))
        return 0
    if state is not None:
        log("stale state from a previous run: cleaning up first")
        cmd_down(args)
    bins = ensure_binaries()
    t0 = time.monotonic()
    os.makedirs(state_path("logs"), exist_ok=True)
    state = {"version": versions()["KUBERNETES_VERSION"], "processes": {}, "started": time.time(),
             "ports": {k: free_port() for k in ("etcd", "etcd_peer", "apiserver", "controller_manager",
                                                "scheduler", "kwok")}}
    save_state(state)
    pki = state_path("pki")
    make_pki(pki)
    server = "https://127.0.0.1:%d" % state["ports"]["apiserver"]
    write_kubeconfig(state_path("kubeconfig"), server, pki, "admin")
    for user in ("controller-manager", "scheduler", "kwok", "provisioner"):
        write_kubeconfig(state_path(user + ".kubeconfig"), server, pki, user)
    with open(state_path("audit-policy.yaml"), "w") as f:
        # Metadata level: enough to count requests per verb/resource for benchmarks, cheap to write.
        f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n- level: Metadata\n")

    p = state["ports"]
    etcd_url = "http://127.0.0.1:%d" % p["etcd"]
    procs = []
    procs.append(("etcd", spawn(state, "etcd", [
        bins["etcd"], "--name=localcluster", "--data-dir=" + state_path("etcd"),
        "--listen-client-urls=" + etcd_url, "--advertise-client-urls=" + etcd_url,
        "--listen-peer-urls=http://127.0.0.1:%d" % p["etcd_peer"],
        "--initial-advertise-peer-urls=http://127.0.0.1:%d" % p["etcd_peer"],
        "--initial-cluster=localcluster=http://127.0.0.1:%d" % p["etcd_peer"],
        "--listen-metrics-urls=", "--log-level=warn",
        # Throwaway test data: skipping fsync makes every write ~10x cheaper on this VM's disk.
        "--unsafe-no-fsync", "--quota-backend-bytes=4294967296",
    ])))
    procs.append(("kube-apiserver", spawn(state, "kube-apiserver", [
        bins["kube-apiserver"], "--etcd-servers=" + etcd_url,
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=%d" % p["apiserver"],
        "--tls-cert-file=" + os.path.join(pki, "apiserver.crt"),
        "--tls-private-key-file=" + os.path.join(pki, "apiserver.key"),
        "--client-ca-file=" + os.path.join(pki, "ca.crt"),
        "--service-account-key-file=" + os.path.join(pki, "sa.pub"),
        "--service-account-signing-key-file=" + os.path.join(pki, "sa.key"),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=" + SERVICE_CIDR,
        "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        "--audit-policy-file=" + state_path("audit-policy.yaml"),
        "--audit-log-path=" + state_path("logs", "audit.log"), "--audit-log-maxsize=200",
        "--audit-log-maxbackup=1", "--profiling=false", "--v=0",
    ])))
    wait_for("etcd", lambda: urllib.request.urlopen(etcd_url + "/health", timeout=1).status == 200, 30, procs)
    wait_for("kube-apiserver /readyz", lambda: api_get(state, "/readyz")[0] == 200, 90, procs)
    t_api = time.monotonic() - t0
    pki_file = lambda n: os.path.join(pki, n)  # noqa: E731
    procs.append(("kube-controller-manager", spawn(state, "kube-controller-manager", [
        bins["kube-controller-manager"], "--kubeconfig=" + state_path("controller-manager.kubeconfig"),
        "--authentication-kubeconfig=" + state_path("controller-manager.kubeconfig"),
        "--authorization-kubeconfig=" + state_path("controller-manager.kubeconfig"),
        "--bind-address=127.0.0.1", "--secure-port=%d" % p["controller_manager"],
        "--service-account-private-key-file=" + pki_file("sa.key"), "--root-ca-file=" + pki_file("ca.crt"),
        "--cluster-signing-cert-file=" + pki_file("ca.crt"), "--cluster-signing-key-file=" + pki_file("ca.key"),
        "--use-service-account-credentials=true", "--leader-elect=false",
        "--service-cluster-ip-range=" + SERVICE_CIDR, "--profiling=false",
    ])))
    procs.append(("kube-scheduler", spawn(state, "kube-scheduler", [
        bins["kube-scheduler"], "--kubeconfig=" + state_path("scheduler.kubeconfig"),
        "--authentication-kubeconfig=" + state_path("scheduler.kubeconfig"),
        "--authorization-kubeconfig=" + state_path("scheduler.kubeconfig"),
        "--bind-address=127.0.0.1", "--secure-port=%d" % p["scheduler"], "--leader-elect=false",
        "--profiling=false",
    ])))
    procs.append(("kwok", spawn(state, "kwok", [
        bins["kwok"], "--kubeconfig=" + state_path("kwok.kubeconfig"),
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=%s=%s" % KWOK_ANNOTATION,
        "--server-address=127.0.0.1:%d" % p["kwok"], "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16", "--node-ip=10.244.0.1",
    ])))
    procs.append(("provisioner", spawn(state, "provisioner", [
        sys.executable, os.path.abspath(__file__), "provisioner"])))
    Api(state, "admin").call("POST", "/apis/storage.k8s.io/v1/storageclasses", STORAGE_CLASS)
    # Namespaced objects need the default ServiceAccount; it is made by the controller-manager.
    wait_for("default ServiceAccount", lambda: api_get(
        state, "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60, procs)
    nodes = 3 if args.nodes is None else args.nodes
    gpu = args.gpu_nodes if args.gpu_nodes is not None else min(1, nodes)
    set_nodes(state, nodes, gpu)
    wait_for("%d kwok nodes Ready" % nodes, lambda: nodes_ready(state, nodes), 120, procs)
    state["timings"] = {"api_ready_s": round(t_api, 2), "up_s": round(time.monotonic() - t0, 2)}
    save_state(state)
    log("up in %.1fs (API ready in %.1fs), %d kwok nodes (%d with GPUs)" % (
        time.monotonic() - t0, t_api, nodes, gpu))
    log("export KUBECONFIG=%s" % state_path("kubeconfig"))
    return 0


def stop_pid(pid, exe, grace=10.0):
    if not pid_alive(pid) or not pid_matches(pid, exe):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)
    raise SystemExit("localcluster: PID %d (%s) did not stop" % (pid, exe))


def cmd_down(args):
    if external_kubeconfig(args):
        log("external cluster: nothing to stop")
        return 0
    state = load_state()
    if state is None:
        log("not running")
        shutil.rmtree(STATE, ignore_errors=True)
        return 0
    # Reverse start order: clients first, etcd last, so nothing logs spurious connection errors.
    for name in reversed(list(state["processes"])):
        proc = state["processes"][name]
        stop_pid(proc["pid"], proc["exe"])
    shutil.rmtree(STATE, ignore_errors=True)
    log("down: stopped %s" % ", ".join(state["processes"]))
    return 0


def cmd_status(args):
    ext = external_kubeconfig(args)
    if ext:
        print("external kubeconfig: %s" % ext)
        return 0
    state = load_state()
    if state is None:
        print("not running")
        return 1
    ok = True
    for name, proc in state["processes"].items():
        alive = pid_alive(proc["pid"])
        ok &= alive
        print("%-24s pid %-7d %s" % (name, proc["pid"], "running" if alive else "DEAD"))
    try:
        code, _ = api_get(state, "/readyz")
        print("api: https://127.0.0.1:%d readyz=%d" % (state["ports"]["apiserver"], code))
    except Exception as e:  # noqa: BLE001
        print("api: not answering (%s)" % e)
        ok = False
    print("kubeconfig: %s" % state_path("kubeconfig"))
    return 0 if ok else 1


def cmd_kubeconfig(args):
    ext = external_kubeconfig(args)
    if ext:
        print(ext)
        return 0
    if load_state() is None:
        print("localcluster: not running (run: hack/localcluster.py up)", file=sys.stderr)
        return 1
    print(state_path("kubeconfig"))
    return 0


def cmd_nodes(args):
    state = load_state()
    if not running(state):
        raise SystemExit("localcluster: not running")
    gpu = args.gpu_nodes if args.gpu_nodes is not None else min(1, args.count)
    set_nodes(state, args.count, gpu)
    wait_for("%d kwok nodes Ready" % args.count, lambda: nodes_ready(state, args.count), 300)
    log("%d kwok nodes (%d with GPUs)" % (args.count, gpu))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--use-kubeconfig", help="use this existing cluster instead of starting one "
                                             "(also: SOPERATOR_KUBECONFIG)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start (or reuse) the local cluster")
    up.add_argument("--nodes", type=int, help="number of kwok nodes (default 3)")
    up.add_argument("--gpu-nodes", type=int, help="how many of them have GPUs (default 1)")
    sub.add_parser("down", help="stop the local cluster and remove its state")
    sub.add_parser("status", help="show processes and API health")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    nodes = sub.add_parser("nodes", help="resize the kwok node pool")
    nodes.add_argument("count", type=int)
    nodes.add_argument("--gpu-nodes", type=int)
    sub.add_parser("provisioner", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "kubeconfig": cmd_kubeconfig,
            "nodes": cmd_nodes, "provisioner": cmd_provisioner}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
