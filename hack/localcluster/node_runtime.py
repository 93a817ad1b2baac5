"""The real node's runtime: images, containerd, kubelet, kube-proxy, CoreDNS, the API forward; stopping its
workloads and undoing every host change."""

import hashlib
import json
import os
import shutil
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

from realnode import host as rnhost
from realnode import image as rnimage

import localcluster as lc


def cached_images(bins):
    """The pause and test image tarballs, assembled once per input (binaries and this code) and cached."""
    d = os.path.join(lc.CACHE, "realnode-images")
    os.makedirs(d, exist_ok=True)
    busybox = os.path.realpath(shutil.which("busybox"))
    h = hashlib.sha256()
    for path in (bins["pause"], bins["kubeget"], busybox, os.path.join(lc.HERE, "realnode", "image.py")):
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    key = h.hexdigest()[:12]
    pause_tar, test_tar = os.path.join(d, "pause-%s.tar" % key), os.path.join(d, "test-%s.tar" % key)
    if not os.path.exists(pause_tar):
        rnimage.pause_image(pause_tar, lc.PAUSE_IMAGE, bins["pause"])
    if not os.path.exists(test_tar):
        applets = lc.run(busybox, "--list").stdout.split()
        rnimage.busybox_image(test_tar, lc.TEST_IMAGE, busybox, applets, extra_bins=[bins["kubeget"]])
    return [pause_tar, test_tar]


def ctr(state, *args, check=True):
    return lc.run("ctr", "--address", state["real_node"]["socket"], "--namespace", "k8s.io", *args, check=check)


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
    out = lc.kubectl(state, "get", "node", lc.REAL_NODE, "-o",
                  "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}", check=False).stdout
    return out.strip() == "True"


def start_real_node(state, bins, procs):
    real, p = state["real_node"], state["ports"]
    node = lc.state_path("node")
    cd = os.path.join(node, "containerd")
    for d in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"):
        os.makedirs(os.path.join(node, d), exist_ok=True)
    os.makedirs(os.path.dirname(real["socket"]), mode=0o711, exist_ok=True)
    lc.make_cgroup_root(state)
    procs.append(("apiserver-forward", lc.spawn(state, "apiserver-forward", [
        sys.executable, lc.SCRIPT, "apiserver-forward"])))

    with open(os.path.join(cd, "config.toml"), "w") as f:
        f.write(rnhost.containerd_config(
            root=os.path.join(cd, "root"), state=os.path.join(cd, "state"), socket=real["socket"],
            opt=os.path.join(cd, "opt"), cni_conf_dir=os.path.join(node, "cni", "net.d"),
            cni_bin_dir=lc.CNI_BIN_DIR, sandbox_image=lc.PAUSE_IMAGE, runc=shutil.which("runc"),
            runc_root=os.path.join(cd, "runc")))
    with open(os.path.join(node, "cni", "net.d", "10-localcluster.conflist"), "w") as f:
        f.write(rnhost.cni_conflist(real["network"], real["bridge"], real["subnet"], real["gateway"],
                                    os.path.join(node, "cni", "ipam")))
    procs.append(("containerd", lc.spawn(state, "containerd", [
        shutil.which("containerd"), "--config", os.path.join(cd, "config.toml")])))
    lc.wait_for("containerd", lambda: ctr(state, "version").returncode == 0, 30, procs)
    real["images"] = import_images(state, cached_images(bins))
    lc.save_state(state)

    objects = {"apiVersion": "v1", "kind": "List", "items": real_node_objects(real)}
    lc.kubectl(state, "apply", "--server-side", "--field-manager=localcluster", "-f", "-",
            input_data=json.dumps(objects))
    with open(os.path.join(node, "Corefile"), "w") as f:
        f.write(rnhost.corefile(real["gateway"], p["coredns_health"], p["coredns_ready"],
                                lc.state_path("coredns.kubeconfig")))
    procs.append(("coredns", lc.spawn(state, "coredns", [bins["coredns"], "-conf", os.path.join(node, "Corefile")])))

    with open(os.path.join(node, "kube-proxy.yaml"), "w") as f:
        json.dump(rnhost.kube_proxy_config(lc.state_path("kube-proxy.kubeconfig"), lc.REAL_NODE, real["subnet"],
                                           real["gateway"] + "/32", p["kube_proxy_healthz"],
                                           p["kube_proxy_metrics"]), f, indent=2)
    procs.append(("kube-proxy", lc.spawn(state, "kube-proxy", [
        bins["kube-proxy"], "--config=" + os.path.join(node, "kube-proxy.yaml"), "--v=1"])))

    with open(os.path.join(node, "kubelet.yaml"), "w") as f:
        json.dump(rnhost.kubelet_config(
            address=real["gateway"], port=p["kubelet"], healthz_port=p["kubelet_healthz"],
            ca_file=lc.state_path("pki", "ca.crt"), runtime_socket=real["socket"], cgroup_root=real["cgroup_root"],
            cluster_dns=real["dns_ip"], pod_logs_dir=os.path.join(node, "pod-logs"),
            volume_plugin_dir=os.path.join(node, "volume-plugins"), resolv_conf="/etc/resolv.conf"), f, indent=2)
    procs.append(("kubelet", lc.spawn(state, "kubelet", [
        bins["kubelet"], "--config=" + os.path.join(node, "kubelet.yaml"),
        "--kubeconfig=" + lc.state_path("kubelet.kubeconfig"), "--root-dir=" + os.path.join(node, "kubelet"),
        "--cert-dir=" + os.path.join(node, "kubelet", "pki"), "--hostname-override=" + lc.REAL_NODE,
        "--node-ip=" + real["gateway"], "--node-labels=%s=%s" % lc.REAL_NODE_LABEL, "--v=1"])))
    lc.wait_for("node %s Ready" % lc.REAL_NODE, lambda: real_node_ready(state), 120, procs)
    # The pod CIDR the CNI config hands out, for tools that read it from the Node (immutable once set).
    lc.kubectl(state, "patch", "node", lc.REAL_NODE, "--type=merge", "-p",
            json.dumps({"spec": {"podCIDR": real["subnet"], "podCIDRs": [real["subnet"]]}}), check=False)
    # As long as the node's own wait: CoreDNS is ready once its kubernetes plugin has synced with the API server,
    # which a loaded 2-core host (the tests before this one) has been seen to take over a minute.
    lc.wait_for("CoreDNS ready", lambda: urllib.request.urlopen(
        "http://127.0.0.1:%d/ready" % p["coredns_ready"], timeout=1).status == 200, 120, procs)


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
        lc.stop_pid(procs["kubelet"]["pid"], procs["kubelet"]["exe"])
    if "containerd" in procs and lc.pid_alive(procs["containerd"]["pid"]):
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
        lc.save_state(state)


def real_node_host_cleanup(state):
    """After every process is gone: leave the host as `up` found it."""
    real = state["real_node"]
    before = real.get("before", {})
    for pid in shim_pids(real["socket"]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    kube_proxy = lc.node_binpaths()["kube-proxy"]
    if os.access(kube_proxy, os.X_OK) and "chains" in before:
        lc.run(kube_proxy, "--cleanup", check=False)
    for family, restore in ((4, "iptables-restore"), (6, "ip6tables-restore")):
        if str(family) in before.get("chains", {}):
            script = rnhost.cleanup_script(lc.iptables_save(family), before["chains"][str(family)])
            if script:
                lc.run(restore, "--noflush", input_data=script)
    for point in rnhost.mounts_under(lc.read_text("/proc/self/mountinfo"), lc.STATE):
        if lc.run("umount", point, check=False).returncode != 0:
            lc.run("umount", "--lazy", point, check=False)
    br = real["bridge"]
    if real.get("bridge_created") and os.path.exists("/sys/class/net/" + br):
        for port in os.listdir("/sys/class/net/%s/brif" % br):
            lc.run("ip", "link", "del", port, check=False)
        lc.run("ip", "link", "del", br)
    for table in sorted(set(lc.nft_tables()) - set(before.get("nft_tables", lc.nft_tables()))):
        if rnhost.nft_table_is_empty(lc.run("nft", "list", "table", *table.split(), check=False).stdout):
            lc.run("nft", "delete", "table", *table.split(), check=False)
    # The kubelet and runc create the cgroup root in every hierarchy (cgroup2's too on a hybrid host).
    mounts = lc.cgroup_v1_mounts() + lc.cgroup2_mounts()
    for path in [m + real["cgroup_root"] for m in mounts if os.path.isdir(m + real["cgroup_root"])]:
        for d, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
            deadline = time.monotonic() + 10
            while os.path.isdir(d):
                try:
                    os.rmdir(d)
                except OSError:
                    # A container outlived its shim (containerd had died): its processes are in our cgroup.
                    for pid in lc.read_text(os.path.join(d, "cgroup.procs")).split() if os.path.exists(
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
            if lc.read_text(lc.sysctl_path(name)).strip() != value:
                lc.write_sysctl(name, value)
        except OSError:
            pass
    cleanup_host_dirs(state, before.get("host_dirs"))
    sockdir = os.path.dirname(real.get("socket", ""))
    if not sockdir.startswith(lc.STATE + "/") and os.path.basename(sockdir) == "soperator-localcluster-" + real["id"]:
        shutil.rmtree(sockdir, ignore_errors=True)
    if os.path.exists(lc.REAL_NODE_OWNER) and lc.read_text(lc.REAL_NODE_OWNER).strip() == lc.STATE:
        os.unlink(lc.REAL_NODE_OWNER)


def cleanup_host_dirs(state, existed):
    """The kubelet's /var/log/containers links, libcni's result cache and the shims' socket dir."""
    real = state["real_node"]
    if os.path.exists(lc.KUBELET_DEVICE_PLUGIN_SOCKET):
        os.remove(lc.KUBELET_DEVICE_PLUGIN_SOCKET)
    logs = "/var/log/containers"
    if os.path.isdir(logs):
        for name in os.listdir(logs):
            link = os.path.join(logs, name)
            if os.path.islink(link) and os.readlink(link).startswith(lc.STATE + "/"):
                os.remove(link)
    results = "/var/lib/cni/results"
    if os.path.isdir(results):
        for name in os.listdir(results):
            if name.startswith(real["network"] + "-") or any(c in name for c in real.get("containers", ())):
                os.remove(os.path.join(results, name))
    if existed is None:
        return
    for d in lc.HOST_DIRS:
        if d not in existed and os.path.isdir(d):
            # Only empty directories: another tool may have started using them meanwhile.
            for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass


def cmd_import_image(args):
    state = lc.load_state()
    if not lc.running(state) or not state.get("real_node"):
        raise SystemExit("localcluster: no real node running (hack/localcluster.py up --real-node)")
    for name in import_images(state, [os.path.abspath(t) for t in args.tarball]):
        print(name)
    return 0


def cmd_apiserver_forward(args):
    """Long-running: gateway:port -> 127.0.0.1:port, so pods reach the API server through the `kubernetes`
    Service while the API server listens on loopback only. TLS passes through untouched."""
    import threading

    state = lc.load_state()
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
