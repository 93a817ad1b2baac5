"""Pure parts of the real node: config files rendered from a few facts, and parsers of host state.

No subprocess, no file access: hack/localcluster.py reads the host, calls these, and acts on the result.
"""

import json

# Kernel settings kubelet, kube-proxy or the CNI plugins may change; `up` records them, `down` restores them.
SYSCTLS = (
    "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
    "net.ipv4.conf.all.route_localnet", "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables", "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established", "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
)
# iptables chains made by kube-proxy, kubelet and the CNI plugins (portmap, bridge): the ones `down` removes,
# and only if they did not exist before `up`.
CHAIN_PREFIXES = ("KUBE-", "CNI-")


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def containerd_config(root, state, socket, opt, cni_conf_dir, cni_bin_dir, sandbox_image, runc, runc_root):
    """containerd 1.6/1.7 (config version 2): everything under the instance's state dir, runc, cgroupfs."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        "root = %s" % toml_str(root),
        "state = %s" % toml_str(state),
        # Plugins that would touch the host or need kernel features we do not use.
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", '
        '"io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]',
        "[grpc]", "  address = %s" % toml_str(socket),
        "[ttrpc]", '  address = ""',
        "[debug]", '  address = ""', '  level = "info"',
        "[metrics]", '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]', "  path = %s" % toml_str(opt),
        "[%s]" % cri,
        "  sandbox_image = %s" % toml_str(sandbox_image),
        # Network namespaces under the state dir, not /var/run/netns: `down` finds every mount there.
        "  netns_mounts_under_state_dir = true",
        "  enable_selinux = false",
        # These VMs' root lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (the kubelet asks -998 for
        # sandboxes). Clamp to containerd's own score instead of failing every pod.
        "  restrict_oom_score_adj = true",
        "  disable_apparmor = true",
        "[%s.containerd]" % cri,
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        "[%s.containerd.runtimes.runc]" % cri,
        '  runtime_type = "io.containerd.runc.v2"',
        "[%s.containerd.runtimes.runc.options]" % cri,
        "  BinaryName = %s" % toml_str(runc),
        "  Root = %s" % toml_str(runc_root),  # runc's state; default /run/containerd/runc is shared
        "  SystemdCgroup = false",
        "[%s.cni]" % cri,
        "  bin_dir = %s" % toml_str(cni_bin_dir),
        "  conf_dir = %s" % toml_str(cni_conf_dir),
        "  max_conf_num = 1",
        "",
    ])


def cni_conflist(name, bridge, subnet, gateway, ipam_dir):
    """bridge + host-local (+ portmap for hostPort); containerd adds loopback itself.

    isGateway is off so the bridge plugin does not switch on forwarding for the whole host; the tool gives
    the bridge its gateway address and enables forwarding on the bridge alone. No ipMasq: pods have
    nowhere to go beyond this host.
    """
    return json.dumps({
        "cniVersion": "0.4.0", "name": name,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": False, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": ipam_dir,
                      "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                      "routes": [{"dst": "0.0.0.0/0", "gw": gateway}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2)


def kubelet_config(address, port, healthz_port, ca_file, runtime_socket, cgroup_root, cluster_dns,
                   pod_logs_dir, volume_plugin_dir, resolv_conf):
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": address, "port": port, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": healthz_port,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": ca_file}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": "unix://" + runtime_socket,
        "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root, "cgroupsPerQOS": True,
        "clusterDNS": [cluster_dns], "clusterDomain": "cluster.local", "resolvConf": resolv_conf,
        "podLogsDir": pod_logs_dir, "volumePluginDir": volume_plugin_dir,
        "failSwapOn": False, "protectKernelDefaults": False,
        # A shared developer VM: never evict or garbage-collect images because its disk is busy.
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "rotateCertificates": False, "serverTLSBootstrap": False,
        "staticPodPath": "", "maxPods": 110,
        # A changed Secret or ConfigMap reaches a pod's volume at the kubelet's next sync of that pod (default 1m,
        # plus jitter): the suites that change one and wait for a component to notice wait less.
        "syncFrequency": "10s",
    }


def kube_proxy_config(kubeconfig, hostname, cluster_cidr, node_port_cidr, healthz_port, metrics_port):
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "hostnameOverride": hostname, "clusterCIDR": cluster_cidr,
        "clientConnection": {"kubeconfig": kubeconfig},
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": "127.0.0.1:%d" % healthz_port,
        "metricsBindAddress": "127.0.0.1:%d" % metrics_port,
        # NodePorts only on the node's bridge address, never on the VM's own interfaces.
        "nodePortAddresses": [node_port_cidr],
        # Leave the host's conntrack sysctls and route_localnet alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False},
    }


def corefile(bind, health_port, ready_port, kubeconfig):
    return """.:53 {
    bind %s
    errors
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s localcluster
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}
""" % (bind, health_port, ready_port, kubeconfig)


def unescape_mount_path(s):
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) + 0 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mounts_under(mountinfo_text, root):
    """Mount points at or below `root`, in the order to unmount them: newest mount first."""
    root = root.rstrip("/")
    found = []
    for line in mountinfo_text.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = unescape_mount_path(fields[4])
        if point == root or point.startswith(root + "/"):
            found.append((int(fields[0]), point))
    return [p for _, p in sorted(found, reverse=True)]


def chains(save_text):
    """{table: set(chain names)} from iptables-save output."""
    out, table = {}, None
    for line in save_text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            out.setdefault(table, set())
        elif line.startswith(":") and table:
            out[table].add(line[1:].split()[0])
    return out


def cleanup_script(save_text, before):
    """An `iptables-restore --noflush` script removing the chains with CHAIN_PREFIXES that are not in
    `before` ({table: [chains]}), and every rule that jumps to one of them. Empty if nothing to remove."""
    out, table, body = [], None, []

    def flush():
        if table is not None and body:
            out.append("*" + table)
            out.extend(body)
            out.append("COMMIT")

    current = chains(save_text)
    for line in save_text.splitlines():
        if line.startswith("*"):
            flush()
            table, body = line[1:].strip(), []
            ours = sorted(c for c in current.get(table, ()) if c.startswith(CHAIN_PREFIXES)
                          and c not in set(before.get(table, ())))
            ours_set = set(ours)
            # Rules in chains we keep that jump to ours: delete them one by one (same spec, -D).
            pending_deletes = []
        elif line.startswith("-A ") and table is not None:
            parts = line.split()
            chain = parts[1]
            target = None
            for flag in ("-j", "-g"):
                if flag in parts:
                    target = parts[parts.index(flag) + 1]
            if chain not in ours_set and target in ours_set:
                pending_deletes.append("-D" + line[2:])
        elif line.startswith("COMMIT") and table is not None:
            body.extend(pending_deletes)
            body.extend("-F " + c for c in ours)
            body.extend("-X " + c for c in ours)
    flush()
    return "\n".join(out) + "\n" if out else ""


def nft_table_is_empty(listing):
    """True if `nft list table` shows only chains without rules (what iptables-nft leaves behind)."""
    for line in listing.splitlines():
        line = line.strip()
        if not line or line.startswith(("table ", "chain ", "type ", "}", "#")):
            continue
        return False
    return True
