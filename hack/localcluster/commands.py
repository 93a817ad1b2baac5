"""The commands (up, down, status, kubeconfig, nodes) and the argument parser."""

import argparse
import os
import shlex
import shutil
import signal
import sys
import time
import urllib.error
import urllib.request

from realnode import host as rnhost

import localcluster as lc


def external_kubeconfig(args):
    path = getattr(args, "use_kubeconfig", None) or os.environ.get("SOPERATOR_KUBECONFIG")
    if path:
        return os.path.abspath(os.path.expanduser(path))
    return None


def running(state):
    return state is not None and all(lc.pid_alive(p["pid"]) for p in state["processes"].values())


def cmd_up(args):
    ext = external_kubeconfig(args)
    if ext:
        lc.log("using existing cluster from %s (nothing started)" % ext)
        return 0
    state = lc.load_state()
    if running(state):
        if args.real_node and not state.get("real_node"):
            raise SystemExit("localcluster: running without --real-node; run `down` first (the API server "
                             "must start with the node's settings)")
        lc.log("already up (%s)" % lc.state_path("kubeconfig"))
        if args.nodes is not None:
            lc.set_nodes(state, args.nodes, args.gpu_nodes if args.gpu_nodes is not None else min(1, args.nodes))
        return 0
    if state is not None:
        lc.log("stale state from a previous run: cleaning up first")
        cmd_down(args)
    bins = lc.ensure_binaries()
    real = None
    if args.real_node:
        bins.update(lc.ensure_node_binaries())
        real = lc.real_node_plan()
        lc.real_node_preflight(real)
    t0 = time.monotonic()
    os.makedirs(lc.state_path("logs"), exist_ok=True)
    state = {"version": lc.versions()["KUBERNETES_VERSION"], "processes": {}, "started": time.time(),
             "ports": {k: lc.free_port() for k in ("etcd", "etcd_peer", "apiserver", "controller_manager",
                                                "scheduler", "kwok")}}
    if real:
        state["ports"].update({k: lc.free_port() for k in lc.REAL_NODE_PORTS})
        state["real_node"] = real
    lc.save_state(state)
    pki = lc.state_path("pki")
    lc.make_pki(pki, real)
    server = "https://127.0.0.1:%d" % state["ports"]["apiserver"]
    lc.write_kubeconfig(lc.state_path("kubeconfig"), server, pki, "admin")
    for user in ("controller-manager", "scheduler", "kwok", "provisioner") + (lc.REAL_NODE_USERS if real else ()):
        lc.write_kubeconfig(lc.state_path(user + ".kubeconfig"), server, pki, user)
    with open(lc.state_path("audit-policy.yaml"), "w") as f:
        # Metadata level: enough to count requests per verb/resource for benchmarks, cheap to write.
        f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n- level: Metadata\n")

    p = state["ports"]
    if real:
        # Before the API server: its advertised address (the `kubernetes` Service endpoint) lives on the bridge.
        lc.real_node_host_setup(state)
    etcd_url = "http://127.0.0.1:%d" % p["etcd"]
    procs = []
    procs.append(("etcd", lc.spawn(state, "etcd", [
        bins["etcd"], "--name=localcluster", "--data-dir=" + lc.state_path("etcd"),
        "--listen-client-urls=" + etcd_url, "--advertise-client-urls=" + etcd_url,
        "--listen-peer-urls=http://127.0.0.1:%d" % p["etcd_peer"],
        "--initial-advertise-peer-urls=http://127.0.0.1:%d" % p["etcd_peer"],
        "--initial-cluster=localcluster=http://127.0.0.1:%d" % p["etcd_peer"],
        "--listen-metrics-urls=", "--log-level=warn",
        # Throwaway test data: skipping fsync makes every write ~10x cheaper on this VM's disk.
        "--unsafe-no-fsync", "--quota-backend-bytes=4294967296",
    ])))
    procs.append(("kube-apiserver", lc.spawn(state, "kube-apiserver", [
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
        "--service-cluster-ip-range=" + lc.SERVICE_CIDR,
        "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        "--audit-policy-file=" + lc.state_path("audit-policy.yaml"),
        "--audit-log-path=" + lc.state_path("logs", "audit.log"), "--audit-log-maxsize=200",
        "--audit-log-maxbackup=1", "--profiling=false", "--v=0",
    ])))
    lc.wait_for("etcd", lambda: urllib.request.urlopen(etcd_url + "/health", timeout=1).status == 200, 30, procs)
    lc.wait_for("kube-apiserver /readyz", lambda: lc.api_get(state, "/readyz")[0] == 200, 90, procs)
    t_api = time.monotonic() - t0
    pki_file = lambda n: os.path.join(pki, n)  # noqa: E731
    procs.append(("kube-controller-manager", lc.spawn(state, "kube-controller-manager", [
        bins["kube-controller-manager"], "--kubeconfig=" + lc.state_path("controller-manager.kubeconfig"),
        "--authentication-kubeconfig=" + lc.state_path("controller-manager.kubeconfig"),
        "--authorization-kubeconfig=" + lc.state_path("controller-manager.kubeconfig"),
        "--bind-address=127.0.0.1", "--secure-port=%d" % p["controller_manager"],
        "--service-account-private-key-file=" + pki_file("sa.key"), "--root-ca-file=" + pki_file("ca.crt"),
        "--cluster-signing-cert-file=" + pki_file("ca.crt"), "--cluster-signing-key-file=" + pki_file("ca.key"),
        "--use-service-account-credentials=true", "--leader-elect=false",
        "--service-cluster-ip-range=" + lc.SERVICE_CIDR, "--profiling=false",
    ])))
    procs.append(("kube-scheduler", lc.spawn(state, "kube-scheduler", [
        bins["kube-scheduler"], "--kubeconfig=" + lc.state_path("scheduler.kubeconfig"),
        "--authentication-kubeconfig=" + lc.state_path("scheduler.kubeconfig"),
        "--authorization-kubeconfig=" + lc.state_path("scheduler.kubeconfig"),
        "--bind-address=127.0.0.1", "--secure-port=%d" % p["scheduler"], "--leader-elect=false",
        "--profiling=false",
    ])))
    procs.append(("kwok", lc.spawn(state, "kwok", [
        bins["kwok"], "--kubeconfig=" + lc.state_path("kwok.kubeconfig"),
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=%s=%s" % lc.KWOK_ANNOTATION,
        "--server-address=127.0.0.1:%d" % p["kwok"], "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16", "--node-ip=10.244.0.1",
    ])))
    procs.append(("provisioner", lc.spawn(state, "provisioner", [
        sys.executable, lc.SCRIPT, "provisioner"])))
    lc.Api(state, "admin").call("POST", "/apis/storage.k8s.io/v1/storageclasses", lc.STORAGE_CLASS)
    # Namespaced objects need the default ServiceAccount; it is made by the controller-manager.
    lc.wait_for("default ServiceAccount", lambda: lc.api_get(
        state, "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60, procs)
    nodes = 3 if args.nodes is None else args.nodes
    gpu = args.gpu_nodes if args.gpu_nodes is not None else min(1, nodes)
    lc.set_nodes(state, nodes, gpu)
    lc.wait_for("%d kwok nodes Ready" % nodes, lambda: lc.nodes_ready(state, nodes), 120, procs)
    state["timings"] = {"api_ready_s": round(t_api, 2)}
    if real:
        t_node = time.monotonic()
        lc.start_real_node(state, bins, procs)
        state["timings"]["real_node_ready_s"] = round(time.monotonic() - t_node, 2)
    state["timings"]["up_s"] = round(time.monotonic() - t0, 2)
    lc.save_state(state)
    lc.log("up in %.1fs (API ready in %.1fs), %d kwok nodes (%d with GPUs)%s" % (
        time.monotonic() - t0, t_api, nodes, gpu, ", real node %s" % lc.REAL_NODE if real else ""))
    lc.log("export KUBECONFIG=%s" % lc.state_path("kubeconfig"))
    return 0


def stop_pid(pid, exe, grace=10.0):
    if not lc.pid_alive(pid) or not lc.pid_matches(pid, exe):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not lc.pid_alive(pid):
                return
            time.sleep(0.05)
    raise SystemExit("localcluster: PID %d (%s) did not stop" % (pid, exe))


def cmd_down(args):
    if external_kubeconfig(args):
        lc.log("external cluster: nothing to stop")
        return 0
    state = lc.load_state()
    if state is None:
        lc.log("not running")
        shutil.rmtree(lc.STATE, ignore_errors=True)
        return 0
    if state.get("real_node"):
        lc.stop_real_node_workloads(state)
    # Reverse start order: clients first, etcd last, so nothing logs spurious connection errors.
    for name in reversed(list(state["processes"])):
        proc = state["processes"][name]
        stop_pid(proc["pid"], proc["exe"])
    if state.get("real_node"):
        lc.real_node_host_cleanup(state)
    left = rnhost.mounts_under(lc.read_text("/proc/self/mountinfo"), lc.STATE)
    if left:  # never delete through a mount (a bind of a host directory would lose its content)
        raise SystemExit("localcluster: still mounted under %s: %s" % (lc.STATE, ", ".join(left)))
    shutil.rmtree(lc.STATE, ignore_errors=True)
    lc.log("down: stopped %s" % ", ".join(state["processes"]))
    return 0


def cmd_status(args):
    ext = external_kubeconfig(args)
    if ext:
        print("external kubeconfig: %s" % ext)
        return 0
    state = lc.load_state()
    if state is None:
        print("not running")
        return 1
    ok = True
    for name, proc in state["processes"].items():
        alive = lc.pid_alive(proc["pid"])
        ok &= alive
        print("%-24s pid %-7d %s" % (name, proc["pid"], "running" if alive else "DEAD"))
    try:
        code, _ = lc.api_get(state, "/readyz")
        print("api: https://127.0.0.1:%d readyz=%d" % (state["ports"]["apiserver"], code))
    except Exception as e:  # noqa: BLE001
        print("api: not answering (%s)" % e)
        ok = False
    print("kubeconfig: %s" % lc.state_path("kubeconfig"))
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
        if running(lc.load_state()):
            kubeconfig = lc.state_path("kubeconfig")
        else:
            print("localcluster: not running: KUBECONFIG not set (make demo, or hack/localcluster.py up)",
                  file=sys.stderr)
    path_now = os.environ.get("PATH", "") if args.path is None else args.path
    sys.stdout.write(shell_env(path_now, lc.binpaths()["kubectl"], kubeconfig))
    return 0


def cmd_kubeconfig(args):
    ext = external_kubeconfig(args)
    if ext:
        print(ext)
        return 0
    if lc.load_state() is None:
        print("localcluster: not running (run: hack/localcluster.py up)", file=sys.stderr)
        return 1
    print(lc.state_path("kubeconfig"))
    return 0


def cmd_nodes(args):
    state = lc.load_state()
    if not running(state):
        raise SystemExit("localcluster: not running")
    gpu = args.gpu_nodes if args.gpu_nodes is not None else min(1, args.count)
    lc.set_nodes(state, args.count, gpu)
    lc.wait_for("%d kwok nodes Ready" % args.count, lambda: lc.nodes_ready(state, args.count), 300)
    lc.log("%d kwok nodes (%d with GPUs)" % (args.count, gpu))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=lc.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
            "nodes": cmd_nodes, "import-image": lc.cmd_import_image, "provisioner": lc.cmd_provisioner,
            "apiserver-forward": lc.cmd_apiserver_forward}[args.cmd](args)
