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

Stdlib only: it must run before the venv exists. A package of small modules (this file: paths, binaries,
the state dir and processes; ``pki``, ``fakenodes``, ``storage``, ``node`` and ``node_runtime``, ``commands``),
run as ``python3 hack/localcluster.py`` (the thin entry beside it) and imported by the tests as ``localcluster``:
every name of its modules is one of the package's. The modules read each other through the package
(``lc.state_path``), so a test that sets ``localcluster.STATE`` moves all of them.
"""

import hashlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # hack/
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
DEFAULT_STATE = os.path.expanduser("~/.local/state/soperator/localcluster")
STATE = os.environ.get("SOPERATOR_LOCALCLUSTER_DIR", DEFAULT_STATE)
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
# kwok only manages nodes carrying this annotation, so it never touches a real kubelet's node.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# The entry run as a program (``python3 hack/localcluster.py``): the children it starts run it again.
SCRIPT = os.path.join(HERE, "localcluster.py")

sys.path.insert(0, HERE)
from realnode import host as rnhost  # noqa: E402,F401  (stdlib helpers of this tool)
from realnode import image as rnimage  # noqa: E402,F401


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


def read_text(path):
    with open(path) as f:
        return f.read()


def run(*argv, check=True, input_data=None, env=None):
    res = subprocess.run(list(argv), capture_output=True, text=True, input=input_data, env=env)
    if check and res.returncode != 0:
        raise SystemExit("localcluster: %s failed (%d): %s" % (" ".join(argv[:3]), res.returncode,
                                                              (res.stderr or res.stdout).strip()))
    return res


# Every name of the modules is one of the package's (tests and the benchmarks use them as localcluster.<name>).
from .commands import (  # noqa: E402,F401
    cmd_down,
    cmd_env,
    cmd_kubeconfig,
    cmd_nodes,
    cmd_status,
    cmd_up,
    external_kubeconfig,
    main,
    running,
    shell_env,
    stop_pid,
)
from .fakenodes import node_manifest, nodes_ready, set_nodes  # noqa: E402,F401
from .node import (  # noqa: E402,F401
    CNI_BIN_DIR,
    DNS_SERVICE_IP,
    HOST_DIRS,
    KUBELET_DEVICE_PLUGIN_SOCKET,
    PAUSE_IMAGE,
    POD_GATEWAY,
    POD_SUBNET,
    REAL_NODE,
    REAL_NODE_LABEL,
    REAL_NODE_OWNER,
    REAL_NODE_PORTS,
    REAL_NODE_USERS,
    SOCKET_PATH_MAX,
    TEST_IMAGE,
    cgroup2_mounts,
    cgroup_v1_mounts,
    clean_dead_owner,
    containerd_socket,
    instance_id,
    iptables_save,
    make_cgroup_root,
    nft_tables,
    read_sysctls,
    real_node_host_setup,
    real_node_plan,
    real_node_preflight,
    sysctl_path,
    write_sysctl,
)
from .node_runtime import (  # noqa: E402,F401
    cached_images,
    cleanup_host_dirs,
    cmd_apiserver_forward,
    cmd_import_image,
    ctr,
    import_images,
    real_node_host_cleanup,
    real_node_objects,
    real_node_ready,
    shim_pids,
    start_real_node,
    stop_real_node_workloads,
)
from .pki import make_pki, openssl, write_kubeconfig  # noqa: E402,F401
from .storage import PROVISIONER, STORAGE_CLASS, Api, cmd_provisioner, provision_once  # noqa: E402,F401
