"""The real node's plan and host setup: names, sockets, sysctls, iptables/nft, cgroups (``up --real-node``)."""

import hashlib
import os
import shutil
import sys

from realnode import host as rnhost

import localcluster as lc

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


def instance_id(state_dir=None):
    """Short, stable per state dir: names the bridge, the CNI network and the cgroup root."""
    return hashlib.sha256(os.path.realpath(state_dir or lc.STATE).encode()).hexdigest()[:6]


def real_node_plan():
    inst = instance_id()
    return {"name": REAL_NODE, "id": inst, "bridge": "slc" + inst, "network": "soperator-" + inst,
            "subnet": POD_SUBNET, "gateway": POD_GATEWAY, "cgroup_root": "/soperator-" + inst,
            "dns_ip": DNS_SERVICE_IP, "socket": containerd_socket(inst)}


# containerd refuses a socket path longer than 104 bytes (its ttrpc socket adds ".ttrpc"): a deep state dir
# (pytest's numbered temp dirs) gets its sockets in a short per-instance directory in /run, removed by `down`.
SOCKET_PATH_MAX = 104 - len(".ttrpc")


def containerd_socket(inst):
    path = lc.state_path("node", "containerd", "containerd.sock")
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
    if "KUBE-SERVICES" in rnhost.chains(lc.run("iptables-save", "-t", "nat").stdout).get("nat", ()):
        raise SystemExit("localcluster: iptables already has KUBE-SERVICES: another kube-proxy (another "
                         "--real-node instance?) runs on this host; one real node per host")
    if lc.run("ip", "-o", "-4", "route", "show", "to", "match", POD_GATEWAY).stdout.strip().count("\n") > 0 or \
            lc.run("ip", "-o", "-4", "addr", "show", "to", POD_SUBNET).stdout.strip():
        raise SystemExit("localcluster: %s is already in use on this host" % POD_SUBNET)


def clean_dead_owner():
    """The real node's owner died without `down` (its processes killed, e.g. with the session that started it):
    its host state (chains, bridge, mounts, cgroups) would block every new real node. `down` on it cleans up."""
    owner = lc.read_text(REAL_NODE_OWNER).strip() if os.path.exists(REAL_NODE_OWNER) else lc.DEFAULT_STATE
    if os.path.abspath(owner) == os.path.abspath(lc.STATE) or \
            '"real_node"' not in (lc.read_text(os.path.join(owner, "state.json")) if os.path.exists(
                os.path.join(owner, "state.json")) else ""):
        return
    env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=owner)
    env.pop("SOPERATOR_KUBECONFIG", None)
    if lc.run(sys.executable, lc.SCRIPT, "status", env=env, check=False).returncode == 0:
        return  # alive: a second real node must wait for its `down`
    lc.log("the real node of %s is dead (its processes are gone): cleaning it up first" % owner)
    lc.run(sys.executable, lc.SCRIPT, "down", env=env)


def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def read_sysctls():
    out = {}
    for name in rnhost.SYSCTLS:
        try:
            out[name] = lc.read_text(sysctl_path(name)).strip()
        except OSError:
            pass
    return out


def write_sysctl(name, value):
    with open(sysctl_path(name), "w") as f:
        f.write(value)


def nft_tables():
    """["ip nat", "ip6 mangle", ...]: iptables-nft makes a table on first use and never deletes it."""
    return [" ".join(line.split()[1:3]) for line in lc.run("nft", "list", "tables").stdout.splitlines()
            if line.startswith("table ")]


def iptables_save(family):
    return lc.run("iptables-save" if family == 4 else "ip6tables-save").stdout


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
    lc.save_state(state)
    with open(REAL_NODE_OWNER, "w") as f:
        f.write(lc.STATE + "\n")
    br = real["bridge"]
    lc.run("ip", "link", "add", "name", br, "type", "bridge")
    real["bridge_created"] = True
    lc.save_state(state)
    lc.run("ip", "addr", "add", real["gateway"] + "/" + real["subnet"].split("/")[1], "dev", br)
    lc.run("ip", "link", "set", br, "up")
    # Route between pods (a ClusterIP DNATed to a pod on the same bridge) on this bridge only: the global
    # net.ipv4.ip_forward stays as it is, so nothing is forwarded from the VM's own interfaces.
    write_sysctl("net.ipv4.conf.%s.forwarding" % br, "1")
    # kube-proxy needs bridged traffic to pass iptables (the reply of a pod-to-pod ClusterIP connection).
    write_sysctl("net.bridge.bridge-nf-call-iptables", "1")


def cgroup_v1_mounts():
    out = []
    for line in lc.read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup"]:
            out.append(rnhost.unescape_mount_path(left.split()[4]))
    return out


def cgroup2_mounts():
    out = []
    for line in lc.read_text("/proc/self/mountinfo").splitlines():
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
            lc.save_state(state)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if os.path.exists(os.path.join(mnt, knob)):
                with open(os.path.join(path, knob), "w") as f:
                    f.write(lc.read_text(os.path.join(mnt, knob)).strip() or "0")
