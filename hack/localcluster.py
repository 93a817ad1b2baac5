#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, for development, tests and the demo.

    hack/localcluster.py up [--nodes N] [--gpu-nodes M] [--real-node]
                                                           build (once, cached) and start everything
    hack/localcluster.py down                              stop exactly the recorded PIDs, remove the state
    hack/localcluster.py status                            what runs, and whether the API answers
    hack/localcluster.py kubeconfig                        print the kubeconfig path
    hack/localcluster.py env                               shell lines: the pinned kubectl on PATH, KUBECONFIG
    hack/localcluster.py nodes N [--gpu-nodes M]           (re)size the fake kwok node pool
    hack/localcluster.py import-image TAR                  load a docker-archive/OCI tar into the real node

Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (all built from the pinned
``k8s.io/kubernetes`` module by hack/build-binaries.sh, cached under ~/.cache/soperator) and kwok, which
plays kubelet for fake nodes so StatefulSet pods get scheduled and become Running/Ready.

``--real-node`` adds one real node, ``real-node-0`` (root only; one per host): kubelet and kube-proxy from the
same module, containerd + runc from Debian, the CNI bridge plugin on a bridge the tool creates, CoreDNS as a
host process, and a locally built pause image. Its pods run real containers from images imported with
``import-image`` (there is no registry). ``down`` stops its containers and undoes every host change (mounts,
bridge, iptables chains, cgroups, sysctls). Details: hack/realnode/.

With ``SOPERATOR_KUBECONFIG=/path`` (or ``--use-kubeconfig``) nothing is started: the given cluster (kind,
a real one) is used as is, so the same tests run against it.

Stdlib only: it must run before the venv exists.
"""

import argparse
import base64
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
DEFAULT_STATE = os.path.expanduser("~/.local/state/soperator/localcluster")
STATE = os.environ.get("SOPERATOR_LOCALCLUSTER_DIR", DEFAULT_STATE)
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
# kwok only manages nodes carrying this annotation, so it never touches a real kubelet's node.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
sys.path.insert(0, HERE)
from realnode import host as rnhost  # noqa: E402  (stdlib helpers of this tool)
from realnode import image as rnimage  # noqa: E402


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


def node_binpaths():
    """What a real node adds: hack/build-binaries.sh node builds these."""
    v = versions()
    k8s = os.path.join(CACHE, "kubernetes-" + v["KUBERNETES_VERSION"], "bin")

    def keyed(name, src):
        with open(os.path.join(HERE, "realnode", src), "rb") as f:
            key = hashlib.sha256(f.read()).hexdigest()[:12]
        return os.path.join(CACHE, "%s-%s" % (name, key), name)

    return {
        "kubelet": os.path.join(k8s, "kubelet"), "kube-proxy": os.path.join(k8s, "kube-proxy"),
        "coredns": os.path.join(CACHE, "coredns-" + v["COREDNS_VERSION"], "bin", "coredns"),
        "pause": keyed("pause", "pause.c"), "kubeget": keyed("kubeget", "kubeget/main.go"),
    }


def ensure_node_binaries():
    missing = [p for p in node_binpaths().values() if not os.access(p, os.X_OK)]
    if missing:
        print("building (cached afterwards): %s" % ", ".join(os.path.basename(m) for m in missing), flush=True)
        subprocess.run([os.path.join(HERE, "build-binaries.sh"), "node"], check=True)
    return node_binpaths()


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


def make_pki(pki, real_node=None):
    os.makedirs(pki, exist_ok=True)
    os.chmod(pki, 0o700)
    ca_key, ca_crt = os.path.join(pki, "ca.key"), os.path.join(pki, "ca.crt")
    # Certificates as kubeadm issues them, so that strict verifiers (Python >= 3.13 sets VERIFY_X509_STRICT)
    # accept them: the CA carries basicConstraints and keyUsage (both critical) and a subject key identifier;
    # every leaf names its issuer's key, its usages and, for servers, its SANs.
    openssl("genrsa", "-out", ca_key, "2048")
    openssl("req", "-x509", "-new", "-key", ca_key, "-subj", "/CN=soperator-localcluster-ca", "-days", "3650",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign",
            "-addext", "subjectKeyIdentifier=hash", "-out", ca_crt)

    def issue(name, subj, sans=None, server=False):
        key, csr, crt = (os.path.join(pki, name + ext) for ext in (".key", ".csr", ".crt"))
        ext = os.path.join(pki, name + ".ext")
        openssl("genrsa", "-out", key, "2048")
        openssl("req", "-new", "-key", key, "-subj", subj, "-out", csr)
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth,clientAuth" if server else "clientAuth"))
            f.write("authorityKeyIdentifier=keyid:always\n")
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(sans))
        openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "3650",
                "-extfile", ext, "-out", crt)
        os.remove(csr)
        os.remove(ext)

    extra_ips = ["IP:" + real_node["gateway"]] if real_node else []
    issue("apiserver", "/CN=kube-apiserver", server=True, sans=extra_ips + [
        "IP:127.0.0.1", "IP:" + SERVICE_IP, "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    issue("admin", "/O=system:masters/CN=localcluster-admin")
    issue("controller-manager", "/CN=system:kube-controller-manager")
    issue("scheduler", "/CN=system:kube-scheduler")
    issue("kwok", "/O=system:masters/CN=kwok")
    issue("provisioner", "/O=system:masters/CN=localcluster-provisioner")
    # apiserver -> kubelet (logs, exec); bound to system:kubelet-api-admin when a real node exists.
    issue("apiserver-kubelet-client", "/CN=kube-apiserver-kubelet-client")
    if real_node:
        issue("kubelet", "/O=system:nodes/CN=system:node:" + REAL_NODE)
        issue("kube-proxy", "/CN=system:kube-proxy")
        issue("coredns", "/CN=system:coredns")
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

# --- the real node --------------------------------------------------------------------------------
# One kubelet beside the kwok nodes, for what kwok cannot show: containers that run, Services that route,
# DNS, exec/logs, volumes. Host-level by nature (root, iptables, a bridge, cgroups), so `up` records what it
# changes and `down` undoes exactly that. One real node per host: kube-proxy owns the host's KUBE-* chains.
#
# Addresses: pods get POD_SUBNET on a bridge the tool creates; the host's address on it (the gateway) is
# the node IP, the kubelet's listen address, the API server's advertised address (the `kubernetes`
# Service endpoint) and CoreDNS's. The API server itself keeps listening on 127.0.0.1 only: a small
# forwarder (`apiserver-forward`) listens on gateway:port, so nothing listens on the VM's own interfaces.
REAL_NODE = "real-node-0"
POD_SUBNET, POD_GATEWAY = "10.85.0.0/24", "10.85.0.1"
DNS_SERVICE_IP = "10.96.0.10"
REAL_NODE_PORTS = ("kubelet", "kubelet_healthz", "kube_proxy_healthz", "kube_proxy_metrics",
                   "coredns_health", "coredns_ready")
REAL_NODE_USERS = ("kubelet", "kube-proxy", "coredns")
REAL_NODE_LABEL = ("soperator.dev/localcluster", "real")
PAUSE_IMAGE = "soperator.local/pause:1"
TEST_IMAGE = "soperator.local/realnode-test:1"
CNI_BIN_DIR = "/usr/lib/cni"
# Host paths the node's components write outside the state dir (not configurable in containerd 1.6 or the
# kubelet). `down` removes what it left there, and the directory itself when `up` created it.
# Which instance holds this host's real node (one per host: kube-proxy's chains and the kubelet's paths are global).
# In /run: it lives exactly as long as the iptables rules and links it accounts for (a reboot clears both).
REAL_NODE_OWNER = "/run/soperator-localcluster-real-node"
HOST_DIRS = ("/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd", "/var/lib/kubelet")
# The kubelet's device-plugin socket ignores --root-dir.
KUBELET_DEVICE_PLUGIN_SOCKET = "/var/lib/kubelet/device-plugins/kubelet.sock"


def read_text(path):
    with open(path) as f:
        return f.read()


def run(*argv, check=True, input_data=None, env=None):
    res = subprocess.run(list(argv), capture_output=True, text=True, input=input_data, env=env)
    if check and res.returncode != 0:
        raise SystemExit("localcluster: %s failed (%d): %s" % (" ".join(argv[:3]), res.returncode,
                                                              (res.stderr or res.stdout).strip()))
    return res


def instance_id(state_dir=None):
    """Short, stable per state dir: names the bridge, the CNI network and the cgroup root."""
    return hashlib.sha256(os.path.realpath(state_dir or STATE).encode()).hexdigest()[:6]


def real_node_plan():
    inst = instance_id()
    return {"name": REAL_NODE, "id": inst, "bridge": "slc" + inst, "network": "soperator-" + inst,
            "subnet": POD_SUBNET, "gateway": POD_GATEWAY, "cgroup_root": "/soperator-" + inst,
            "dns_ip": DNS_SERVICE_IP, "socket": containerd_socket(inst)}


# containerd refuses a socket path longer than 104 bytes (its ttrpc socket adds ".ttrpc"): a deep state dir
# (pytest's numbered temp dirs) gets its sockets in a short per-instance directory in /run, removed by `down`.
SOCKET_PATH_MAX = 104 - len(".ttrpc")


def containerd_socket(inst):
    path = state_path("node", "containerd", "containerd.sock")
    if len(path) <= SOCKET_PATH_MAX:
        return path
    return os.path.join("/run", "soperator-localcluster-" + inst, "containerd.sock")


def real_node_preflight(real):
    if os.geteuid() != 0:
        raise SystemExit("localcluster: --real-node needs root (containers, a bridge, iptables)")
    need = ["containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "iptables-save",
            "iptables-restore", "ip6tables-save", "ip6tables-restore", "nft", "ip", "umount", "busybox"]
    missing = [t for t in need if not shutil.which(t)]
    missing += [os.path.join(CNI_BIN_DIR, p) for p in ("bridge", "host-local", "loopback", "portmap")
                if not os.access(os.path.join(CNI_BIN_DIR, p), os.X_OK)]
    if missing:
        raise SystemExit("localcluster: --real-node needs %s (run: hack/install-deps.sh)" % ", ".join(missing))
    clean_dead_owner()
    if "KUBE-SERVICES" in rnhost.chains(run("iptables-save", "-t", "nat").stdout).get("nat", ()):
        raise SystemExit("localcluster: iptables already has KUBE-SERVICES: another kube-proxy (another "
                         "--real-node instance?) runs on this host; one real node per host")
    if run("ip", "-o", "-4", "route", "show", "to", "match", POD_GATEWAY).stdout.strip().count("\n") > 0 or \
            run("ip", "-o", "-4", "addr", "show", "to", POD_SUBNET).stdout.strip():
        raise SystemExit("localcluster: %s is already in use on this host" % POD_SUBNET)


def clean_dead_owner():
    """The real node's owner died without `down` (its processes killed, e.g. with the session that started it):
    its host state (chains, bridge, mounts, cgroups) would block every new real node. `down` on it cleans up."""
    owner = read_text(REAL_NODE_OWNER).strip() if os.path.exists(REAL_NODE_OWNER) else DEFAULT_STATE
    if os.path.abspath(owner) == os.path.abspath(STATE) or \
            '"real_node"' not in (read_text(os.path.join(owner, "state.json")) if os.path.exists(
                os.path.join(owner, "state.json")) else ""):
        return
    env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=owner)
    env.pop("SOPERATOR_KUBECONFIG", None)
    if run(sys.executable, os.path.abspath(__file__), "status", env=env, check=False).returncode == 0:
        return  # alive: a second real node must wait for its `down`
    log("the real node of %s is dead (its processes are gone): cleaning it up first" % owner)
    run(sys.executable, os.path.abspath(__file__), "down", env=env)


def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def read_sysctls():
    out = {}
    for name in rnhost.SYSCTLS:
        try:
            out[name] = read_text(sysctl_path(name)).strip()
        except OSError:
            pass
    return out


def write_sysctl(name, value):
    with open(sysctl_path(name), "w") as f:
        f.write(value)


def nft_tables():
    """["ip nat", "ip6 mangle", ...]: iptables-nft makes a table on first use and never deletes it."""
    return [" ".join(line.split()[1:3]) for line in run("nft", "list", "tables").stdout.splitlines()
            if line.startswith("table ")]


def iptables_save(family):
    return run("iptables-save" if family == 4 else "ip6tables-save").stdout


def real_node_host_setup(state):
    """Record the host as it is, then create the bridge. Saved at once: a failed `up` is cleaned by `down`."""
    real = state["real_node"]
    real["before"] = {
        "sysctls": read_sysctls(),
        "chains": {str(f): {t: sorted(c) for t, c in rnhost.chains(iptables_save(f)).items()} for f in (4, 6)},
        "host_dirs": [d for d in HOST_DIRS if os.path.exists(d)],
        "nft_tables": nft_tables(),
    }
    real["cgroups"] = []
    save_state(state)
    with open(REAL_NODE_OWNER, "w") as f:
        f.write(STATE + "\n")
    br = real["bridge"]
    run("ip", "link", "add", "name", br, "type", "bridge")
    real["bridge_created"] = True
    save_state(state)
    run("ip", "addr", "add", real["gateway"] + "/" + real["subnet"].split("/")[1], "dev", br)
    run("ip", "link", "set", br, "up")
    # Route between pods (a ClusterIP DNATed to a pod on the same bridge) on this bridge only: the global
    # net.ipv4.ip_forward stays as it is, so nothing is forwarded from the VM's own interfaces.
    write_sysctl("net.ipv4.conf.%s.forwarding" % br, "1")
    # kube-proxy needs bridged traffic to pass iptables (the reply of a pod-to-pod ClusterIP connection).
    write_sysctl("net.bridge.bridge-nf-call-iptables", "1")


def cgroup_v1_mounts():
    out = []
    for line in read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup"]:
            out.append(rnhost.unescape_mount_path(left.split()[4]))
    return out


def cgroup2_mounts():
    out = []
    for line in read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            out.append(rnhost.unescape_mount_path(left.split()[4]))
    return out


def make_cgroup_root(state):
    """The kubelet's cgroupRoot must exist in every v1 hierarchy; cpuset needs its parent's cpus/mems."""
    real = state["real_node"]
    for mnt in cgroup_v1_mounts():
        path = mnt + real["cgroup_root"]
        if not os.path.isdir(path):
            os.mkdir(path)
            real["cgroups"].append(path)
            save_state(state)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if os.path.exists(os.path.join(mnt, knob)):
                with open(os.path.join(path, knob), "w") as f:
                    f.write(read_text(os.path.join(mnt, knob)).strip() or "0")


def cached_images(bins):
    """The pause and test image tarballs, assembled once per input (binaries and this code) and cached."""
    d = os.path.join(CACHE, "realnode-images")
    os.makedirs(d, exist_ok=True)
    busybox = os.path.realpath(shutil.which("busybox"))
    h = hashlib.sha256()
    for path in (bins["pause"], bins["kubeget"], busybox, os.path.join(HERE, "realnode", "image.py")):
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    key = h.hexdigest()[:12]
    pause_tar, test_tar = os.path.join(d, "pause-%s.tar" % key), os.path.join(d, "test-%s.tar" % key)
    if not os.path.exists(pause_tar):
        rnimage.pause_image(pause_tar, PAUSE_IMAGE, bins["pause"])
    if not os.path.exists(test_tar):
        applets = run(busybox, "--list").stdout.split()
        rnimage.busybox_image(test_tar, TEST_IMAGE, busybox, applets, extra_bins=[bins["kubeget"]])
    return [pause_tar, test_tar]


def ctr(state, *args, check=True):
    return run("ctr", "--address", state["real_node"]["socket"], "--namespace", "k8s.io", *args, check=check)


def import_images(state, tarballs):
    names = []
    for tar in tarballs:
        out = ctr(state, "images", "import", "--all-platforms", tar).stdout
        names += [line.split()[1] for line in out.splitlines() if line.startswith("unpacking ")]
    return names


def real_node_objects(real):
    """RBAC for the node's components, and the kube-dns Service pointing at CoreDNS on the bridge."""
    crb = lambda name, role, user: {  # noqa: E731
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}
    return [
        crb("localcluster:apiserver-kubelet-client", "system:kubelet-api-admin", "kube-apiserver-kubelet-client"),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        crb("system:coredns", "system:coredns", "system:coredns"),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
         "spec": {"clusterIP": real["dns_ip"], "ports": [
             {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
             {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "kube-dns-host", "namespace": "kube-system", "labels": {
             "kubernetes.io/service-name": "kube-dns", "endpointslice.kubernetes.io/managed-by": "localcluster"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": [real["gateway"]], "conditions": {"ready": True}}],
         "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]},
    ]


def real_node_ready(state):
    out = kubectl(state, "get", "node", REAL_NODE, "-o",
                  "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}", check=False).stdout
    return out.strip() == "True"


def start_real_node(state, bins, procs):
    real, p = state["real_node"], state["ports"]
    node = state_path("node")
    cd = os.path.join(node, "containerd")
    for d in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"):
        os.makedirs(os.path.join(node, d), exist_ok=True)
    os.makedirs(os.path.dirname(real["socket"]), mode=0o711, exist_ok=True)
    make_cgroup_root(state)
    procs.append(("apiserver-forward", spawn(state, "apiserver-forward", [
        sys.executable, os.path.abspath(__file__), "apiserver-forward"])))

    with open(os.path.join(cd, "config.toml"), "w") as f:
        f.write(rnhost.containerd_config(
            root=os.path.join(cd, "root"), state=os.path.join(cd, "state"), socket=real["socket"],
            opt=os.path.join(cd, "opt"), cni_conf_dir=os.path.join(node, "cni", "net.d"),
            cni_bin_dir=CNI_BIN_DIR, sandbox_image=PAUSE_IMAGE, runc=shutil.which("runc"),
            runc_root=os.path.join(cd, "runc")))
    with open(os.path.join(node, "cni", "net.d", "10-localcluster.conflist"), "w") as f:
        f.write(rnhost.cni_conflist(real["network"], real["bridge"], real["subnet"], real["gateway"],
                                    os.path.join(node, "cni", "ipam")))
    procs.append(("containerd", spawn(state, "containerd", [
        shutil.which("containerd"), "--config", os.path.join(cd, "config.toml")])))
    wait_for("containerd", lambda: ctr(state, "version").returncode == 0, 30, procs)
    real["images"] = import_images(state, cached_images(bins))
    save_state(state)

    objects = {"apiVersion": "v1", "kind": "List", "items": real_node_objects(real)}
    kubectl(state, "apply", "--server-side", "--field-manager=localcluster", "-f", "-",
            input_data=json.dumps(objects))
    with open(os.path.join(node, "Corefile"), "w") as f:
        f.write(rnhost.corefile(real["gateway"], p["coredns_health"], p["coredns_ready"],
                                state_path("coredns.kubeconfig")))
    procs.append(("coredns", spawn(state, "coredns", [bins["coredns"], "-conf", os.path.join(node, "Corefile")])))

    with open(os.path.join(node, "kube-proxy.yaml"), "w") as f:
        json.dump(rnhost.kube_proxy_config(state_path("kube-proxy.kubeconfig"), REAL_NODE, real["subnet"],
                                           real["gateway"] + "/32", p["kube_proxy_healthz"],
                                           p["kube_proxy_metrics"]), f, indent=2)
    procs.append(("kube-proxy", spawn(state, "kube-proxy", [
        bins["kube-proxy"], "--config=" + os.path.join(node, "kube-proxy.yaml"), "--v=1"])))

    with open(os.path.join(node, "kubelet.yaml"), "w") as f:
        json.dump(rnhost.kubelet_config(
            address=real["gateway"], port=p["kubelet"], healthz_port=p["kubelet_healthz"],
            ca_file=state_path("pki", "ca.crt"), runtime_socket=real["socket"], cgroup_root=real["cgroup_root"],
            cluster_dns=real["dns_ip"], pod_logs_dir=os.path.join(node, "pod-logs"),
            volume_plugin_dir=os.path.join(node, "volume-plugins"), resolv_conf="/etc/resolv.conf"), f, indent=2)
    procs.append(("kubelet", spawn(state, "kubelet", [
        bins["kubelet"], "--config=" + os.path.join(node, "kubelet.yaml"),
        "--kubeconfig=" + state_path("kubelet.kubeconfig"), "--root-dir=" + os.path.join(node, "kubelet"),
        "--cert-dir=" + os.path.join(node, "kubelet", "pki"), "--hostname-override=" + REAL_NODE,
        "--node-ip=" + real["gateway"], "--node-labels=%s=%s" % REAL_NODE_LABEL, "--v=1"])))
    wait_for("node %s Ready" % REAL_NODE, lambda: real_node_ready(state), 120, procs)
    # The pod CIDR the CNI config hands out, for tools that read it from the Node (immutable once set).
    kubectl(state, "patch", "node", REAL_NODE, "--type=merge", "-p",
            json.dumps({"spec": {"podCIDR": real["subnet"], "podCIDRs": [real["subnet"]]}}), check=False)
    wait_for("CoreDNS ready", lambda: urllib.request.urlopen(
        "http://127.0.0.1:%d/ready" % p["coredns_ready"], timeout=1).status == 200, 60, procs)


def shim_pids(socket):
    """containerd-shim processes of this instance's containerd (they outlive it: reparented to init)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode(errors="replace")).startswith("containerd-shim") and \
                socket.encode() in argv:
            out.append(int(pid))
    return out


def stop_real_node_workloads(state):
    """kubelet first (it would restart what we kill), then every container, while containerd still runs."""
    procs = state["processes"]
    if "kubelet" in procs:
        stop_pid(procs["kubelet"]["pid"], procs["kubelet"]["exe"])
    if "containerd" in procs and pid_alive(procs["containerd"]["pid"]):
        tasks = ctr(state, "tasks", "ls", "-q", check=False).stdout.split()
        for task in tasks:
            ctr(state, "tasks", "kill", "--all", "--signal", "SIGKILL", task, check=False)
        for task in tasks:
            ctr(state, "tasks", "delete", "--force", task, check=False)
        containers = ctr(state, "containers", "ls", "-q", check=False).stdout.split()
        for container in containers:
            ctr(state, "containers", "delete", container, check=False)
        # Their libcni cache entries (loopback network) are named after them: removed by the host cleanup.
        state["real_node"]["containers"] = containers
        save_state(state)


def real_node_host_cleanup(state):
    """After every process is gone: leave the host as `up` found it."""
    real = state["real_node"]
    before = real.get("before", {})
    for pid in shim_pids(real["socket"]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    kube_proxy = node_binpaths()["kube-proxy"]
    if os.access(kube_proxy, os.X_OK) and "chains" in before:
        run(kube_proxy, "--cleanup", check=False)
    for family, restore in ((4, "iptables-restore"), (6, "ip6tables-restore")):
        if str(family) in before.get("chains", {}):
            script = rnhost.cleanup_script(iptables_save(family), before["chains"][str(family)])
            if script:
                run(restore, "--noflush", input_data=script)
    for point in rnhost.mounts_under(read_text("/proc/self/mountinfo"), STATE):
        if run("umount", point, check=False).returncode != 0:
            run("umount", "--lazy", point, check=False)
    br = real["bridge"]
    if real.get("bridge_created") and os.path.exists("/sys/class/net/" + br):
        for port in os.listdir("/sys/class/net/%s/brif" % br):
            run("ip", "link", "del", port, check=False)
        run("ip", "link", "del", br)
    for table in sorted(set(nft_tables()) - set(before.get("nft_tables", nft_tables()))):
        if rnhost.nft_table_is_empty(run("nft", "list", "table", *table.split(), check=False).stdout):
            run("nft", "delete", "table", *table.split(), check=False)
    # The kubelet and runc create the cgroup root in every hierarchy (cgroup2's too on a hybrid host).
    mounts = cgroup_v1_mounts() + cgroup2_mounts()
    for path in [m + real["cgroup_root"] for m in mounts if os.path.isdir(m + real["cgroup_root"])]:
        for d, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
            deadline = time.monotonic() + 10
            while os.path.isdir(d):
                try:
                    os.rmdir(d)
                except OSError:
                    # A container outlived its shim (containerd had died): its processes are in our cgroup.
                    for pid in read_text(os.path.join(d, "cgroup.procs")).split() if os.path.exists(
                            os.path.join(d, "cgroup.procs")) else ():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    if time.monotonic() > deadline:
                        raise SystemExit("localcluster: cannot remove cgroup %s (processes left?)" % d)
                    time.sleep(0.1)
    for name, value in before.get("sysctls", {}).items():
        try:
            if read_text(sysctl_path(name)).strip() != value:
                write_sysctl(name, value)
        except OSError:
            pass
    cleanup_host_dirs(state, before.get("host_dirs"))
    sockdir = os.path.dirname(real.get("socket", ""))
    if not sockdir.startswith(STATE + "/") and os.path.basename(sockdir) == "soperator-localcluster-" + real["id"]:
        shutil.rmtree(sockdir, ignore_errors=True)
    if os.path.exists(REAL_NODE_OWNER) and read_text(REAL_NODE_OWNER).strip() == STATE:
        os.unlink(REAL_NODE_OWNER)


def cleanup_host_dirs(state, existed):
    """The kubelet's /var/log/containers links, libcni's result cache and the shims' socket dir."""
    real = state["real_node"]
    if os.path.exists(KUBELET_DEVICE_PLUGIN_SOCKET):
        os.remove(KUBELET_DEVICE_PLUGIN_SOCKET)
    logs = "/var/log/containers"
    if os.path.isdir(logs):
        for name in os.listdir(logs):
            link = os.path.join(logs, name)
            if os.path.islink(link) and os.readlink(link).startswith(STATE + "/"):
                os.remove(link)
    results = "/var/lib/cni/results"
    if os.path.isdir(results):
        for name in os.listdir(results):
            if name.startswith(real["network"] + "-") or any(c in name for c in real.get("containers", ())):
                os.remove(os.path.join(results, name))
    if existed is None:
        return
    for d in HOST_DIRS:
        if d not in existed and os.path.isdir(d):
            # Only empty directories: another tool may have started using them meanwhile.
            for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass


def cmd_import_image(args):
    state = load_state()
    if not running(state) or not state.get("real_node"):
        raise SystemExit("localcluster: no real node running (hack/localcluster.py up --real-node)")
    for name in import_images(state, [os.path.abspath(t) for t in args.tarball]):
        print(name)
    return 0


def cmd_apiserver_forward(args):
    """Long-running: gateway:port -> 127.0.0.1:port, so pods reach the API server through the `kubernetes`
    Service while the API server listens on loopback only. TLS passes through untouched."""
    import threading

    state = load_state()
    port = state["ports"]["apiserver"]
    srv = socket.create_server((state["real_node"]["gateway"], port), reuse_port=False)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # Wake the other direction up; each pump closes the socket it reads from.
            for s in (dst, src):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            src.close()

    while True:
        conn, _ = srv.accept()
        try:
            up = socket.create_connection(("127.0.0.1", port), timeout=5)
            up.settimeout(None)
        except OSError:
            conn.close()
            continue
        threading.Thread(target=pump, args=(conn, up), daemon=True).start()
        threading.Thread(target=pump, args=(up, conn), daemon=True).start()


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
        if args.real_node and not state.get("real_node"):
            raise SystemExit("localcluster: running without --real-node; run `down` first (the API server "
                             "must start with the node's settings)")
        log("already up (%s)" % state_path("kubeconfig"))
        if args.nodes is not None:
            set_nodes(state, args.nodes, args.gpu_nodes if args.gpu_nodes is not None else min(1, args.nodes))
        return 0
    if state is not None:
        log("stale state from a previous run: cleaning up first")
        cmd_down(args)
    bins = ensure_binaries()
    real = None
    if args.real_node:
        bins.update(ensure_node_binaries())
        real = real_node_plan()
        real_node_preflight(real)
    t0 = time.monotonic()
    os.makedirs(state_path("logs"), exist_ok=True)
    state = {"version": versions()["KUBERNETES_VERSION"], "processes": {}, "started": time.time(),
             "ports": {k: free_port() for k in ("etcd", "etcd_peer", "apiserver", "controller_manager",
                                                "scheduler", "kwok")}}
    if real:
        state["ports"].update({k: free_port() for k in REAL_NODE_PORTS})
        state["real_node"] = real
    save_state(state)
    pki = state_path("pki")
    make_pki(pki, real)
    server = "https://127.0.0.1:%d" % state["ports"]["apiserver"]
    write_kubeconfig(state_path("kubeconfig"), server, pki, "admin")
    for user in ("controller-manager", "scheduler", "kwok", "provisioner") + (REAL_NODE_USERS if real else ()):
        write_kubeconfig(state_path(user + ".kubeconfig"), server, pki, user)
    with open(state_path("audit-policy.yaml"), "w") as f:
        # Metadata level: enough to count requests per verb/resource for benchmarks, cheap to write.
        f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n- level: Metadata\n")

    p = state["ports"]
    if real:
        # Before the API server: its advertised address (the `kubernetes` Service endpoint) lives on the bridge.
        real_node_host_setup(state)
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
        "--bind-address=127.0.0.1", "--secure-port=%d" % p["apiserver"],
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--advertise-address=" + (real["gateway"] if real else "127.0.0.1"),
        "--kubelet-client-certificate=" + os.path.join(pki, "apiserver-kubelet-client.crt"),
        "--kubelet-client-key=" + os.path.join(pki, "apiserver-kubelet-client.key"),
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
    state["timings"] = {"api_ready_s": round(t_api, 2)}
    if real:
        t_node = time.monotonic()
        start_real_node(state, bins, procs)
        state["timings"]["real_node_ready_s"] = round(time.monotonic() - t_node, 2)
    state["timings"]["up_s"] = round(time.monotonic() - t0, 2)
    save_state(state)
    log("up in %.1fs (API ready in %.1fs), %d kwok nodes (%d with GPUs)%s" % (
        time.monotonic() - t0, t_api, nodes, gpu, ", real node %s" % REAL_NODE if real else ""))
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
    if state.get("real_node"):
        stop_real_node_workloads(state)
    # Reverse start order: clients first, etcd last, so nothing logs spurious connection errors.
    for name in reversed(list(state["processes"])):
        proc = state["processes"][name]
        stop_pid(proc["pid"], proc["exe"])
    if state.get("real_node"):
        real_node_host_cleanup(state)
    left = rnhost.mounts_under(read_text("/proc/self/mountinfo"), STATE)
    if left:  # never delete through a mount (a bind of a host directory would lose its content)
        raise SystemExit("localcluster: still mounted under %s: %s" % (STATE, ", ".join(left)))
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


def shell_env(path_now, kubectl, kubeconfig):
    """Shell lines that put ``kubectl``'s directory on PATH (first, unless it is there already) and export
    KUBECONFIG (when known)."""
    bindir = os.path.dirname(kubectl)
    lines = []
    if bindir not in path_now.split(os.pathsep):
        lines.append("export PATH=%s" % shlex.quote(os.pathsep.join([bindir] + ([path_now] if path_now else []))))
    if kubeconfig:
        lines.append("export KUBECONFIG=%s" % shlex.quote(kubeconfig))
    return "".join(line + "\n" for line in lines)


def cmd_env(args):
    """For eval in a shell (hack/env.sh): the pinned kubectl on PATH, KUBECONFIG of the running cluster."""
    kubeconfig = external_kubeconfig(args)
    if not kubeconfig:
        if running(load_state()):
            kubeconfig = state_path("kubeconfig")
        else:
            print("localcluster: not running: KUBECONFIG not set (make demo, or hack/localcluster.py up)",
                  file=sys.stderr)
    path_now = os.environ.get("PATH", "") if args.path is None else args.path
    sys.stdout.write(shell_env(path_now, binpaths()["kubectl"], kubeconfig))
    return 0


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
    up.add_argument("--real-node", action="store_true",
                    help="also run one real node (kubelet, containerd, kube-proxy, CoreDNS; root only)")
    sub.add_parser("down", help="stop the local cluster and remove its state")
    sub.add_parser("status", help="show processes and API health")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    env = sub.add_parser("env", help="shell lines: the pinned kubectl on PATH, KUBECONFIG (for eval; hack/env.sh)")
    env.add_argument("--path", help="the shell's PATH (default: this process's, which a python3 shim may change)")
    nodes = sub.add_parser("nodes", help="resize the kwok node pool")
    nodes.add_argument("count", type=int)
    nodes.add_argument("--gpu-nodes", type=int)
    imp = sub.add_parser("import-image", help="import a docker-archive/OCI tarball into the real node")
    imp.add_argument("tarball", nargs="+")
    sub.add_parser("provisioner", help=argparse.SUPPRESS)
    sub.add_parser("apiserver-forward", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "kubeconfig": cmd_kubeconfig, "env": cmd_env,
            "nodes": cmd_nodes, "import-image": cmd_import_image, "provisioner": cmd_provisioner,
            "apiserver-forward": cmd_apiserver_forward}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
