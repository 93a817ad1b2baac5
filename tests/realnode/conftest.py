"""A local cluster with one real node (``hack/localcluster.py up --real-node``) for this test session.

Reuses the instance in ``SOPERATOR_LOCALCLUSTER_DIR`` if it runs with a real node (and then leaves it up);
otherwise starts a private instance in a temporary directory and stops it at the end. Root only: skipped
without it, failed under CI=true (tests/prerequisites.py).
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from kubernetes import client, config
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "hack", "localcluster.py")
sys.path.insert(0, os.path.join(ROOT, "hack"))
import localcluster  # noqa: E402
from polling import wait_until  # noqa: E402
from realnode import host as rnhost  # noqa: E402

pytestmark = pytest.mark.cluster


class Instance:
    def __init__(self, state_dir, private):
        self.dir, self.private = state_dir, private
        self.env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state_dir)
        self.env.pop("SOPERATOR_KUBECONFIG", None)
        self.kubeconfig = os.path.join(state_dir, "kubeconfig")

    @property
    def state(self):
        with open(os.path.join(self.dir, "state.json")) as f:
            return json.load(f)

    def tool(self, *args, check=True):
        res = subprocess.run([sys.executable, TOOL] + list(args), env=self.env, capture_output=True, text=True)
        if check and res.returncode:
            pytest.fail("localcluster %s failed (%d):\n%s%s" % (" ".join(args), res.returncode, res.stdout, res.stderr))
        return res

    def kubectl(self, *args, check=True, timeout=60):
        res = subprocess.run([localcluster.binpaths()["kubectl"], "--kubeconfig", self.kubeconfig] + list(args),
                             capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("kubectl %s: %s" % (" ".join(args), res.stderr))
        return res


def host_snapshot(state_dir, real):
    """What the real node may change on the host, reduced to the parts that belong to this instance."""
    def save(cmd):
        return subprocess.run([cmd], capture_output=True, text=True, check=True).stdout

    chains = {f: {t: sorted(c for c in cs if c.startswith(rnhost.CHAIN_PREFIXES))
                  for t, cs in rnhost.chains(save(cmd)).items()}
              for f, cmd in (("4", "iptables-save"), ("6", "ip6tables-save"))}
    with open("/proc/self/mountinfo") as f:
        mounts = rnhost.mounts_under(f.read(), state_dir)
    cgroups = sorted(d for d in (os.path.join("/sys/fs/cgroup", c) + real["cgroup_root"]
                                 for c in os.listdir("/sys/fs/cgroup")) if os.path.exists(d))
    # Other tools (dockerd) add and remove their own links meanwhile: only the tool's bridges count here.
    links = sorted(n for n in os.listdir("/sys/class/net") if n.startswith("slc"))
    sysctls = localcluster.read_sysctls()
    dirs = sorted(d for d in localcluster.HOST_DIRS if os.path.exists(d) and d != "/run/containerd")
    return {"chains": chains, "mounts": mounts, "cgroups": cgroups, "links": links, "sysctls": sysctls,
            "dirs": dirs}


@pytest.fixture(scope="session")
def realnode(tmp_path_factory):
    require_root("the real node: kubelet, containerd, network namespaces")
    # One real node per host: a running one (make demo's, or SOPERATOR_LOCALCLUSTER_DIR's) is reused.
    existing = (os.environ.get("SOPERATOR_LOCALCLUSTER_DIR")
                or os.path.expanduser("~/.local/state/soperator/localcluster"))
    if os.path.exists(os.path.join(existing, "state.json")):
        inst = Instance(existing, private=False)
        if inst.state.get("real_node") and subprocess.run(
                [sys.executable, TOOL, "status"], env=inst.env, capture_output=True).returncode == 0:
            yield inst
            return
    # A dead real node (processes killed without `down`) is what `up` cleans first; done here so that the snapshot
    # below is of the host without it.
    owner = open(localcluster.REAL_NODE_OWNER).read().strip() if os.path.exists(localcluster.REAL_NODE_OWNER) else ""
    for stale in {existing, owner} - {""}:
        if os.path.exists(os.path.join(stale, "state.json")):
            Instance(stale, private=False).tool("down")
    inst = Instance(str(tmp_path_factory.mktemp("realnode") / "lc"), private=True)
    inst.before = host_snapshot(inst.dir, {"cgroup_root": "/soperator-" + localcluster.instance_id(inst.dir)})
    t0 = time.monotonic()
    out = inst.tool("up", "--real-node", "--nodes", "1", "--gpu-nodes", "0")
    inst.up_seconds = time.monotonic() - t0
    print(out.stdout)
    try:
        yield inst
    finally:
        if os.path.exists(os.path.join(inst.dir, "state.json")):
            inst.tool("down")


@pytest.fixture(scope="session")
def api(realnode):
    return config.new_client_from_config(realnode.kubeconfig)


@pytest.fixture()
def ns(api):
    core = client.CoreV1Api(api)
    name = "rn-" + uuid.uuid4().hex[:8]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    # Pods need the namespace's default ServiceAccount (made by the controller-manager).
    wait_until(lambda: core.list_namespaced_service_account(name).items, 30, "default ServiceAccount")
    yield name
    core.delete_namespace(name, grace_period_seconds=0)


