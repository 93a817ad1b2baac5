"""kind from local parts (docs/kind.md): the pure parts of the node image's programs and of the kind engine's runc,
and hack/molecule-kind.sh's one skip.

- soperator-kind-node (the node's pod network and hostPath provisioner): facts from a NodeList, the CNI
  configuration, the routes to other nodes and their changes, the volumes to create and to delete;
- hack/kind/runc-bounded: capabilities outside the host's bounding set leave a container's spec and an exec's process,
  everything else reaches runc unchanged;
- hack/kind/images.py: Debian dependency fields and merged-/usr paths (kube-proxy's iptables);
- hack/molecule-kind.sh: no engine and not root is a skip that says why, and a failure under CI=true.
"""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name, *path):
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(ROOT, *path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


node = load("soperator_kind_node", "hack", "kind", "node", "usr", "local", "bin", "soperator-kind-node")
runc = load("soperator_runc_bounded", "hack", "kind", "runc-bounded")
sys.path.insert(0, os.path.join(ROOT, "hack", "kind"))
import images  # noqa: E402


def a_node(name, ip, cidrs, ipv6=None):
    addresses = [{"type": "Hostname", "address": name}]
    if ip:
        addresses.append({"type": "InternalIP", "address": ip})
    if ipv6:
        addresses.append({"type": "InternalIP", "address": ipv6})
    spec = {"podCIDR": cidrs[0], "podCIDRs": cidrs} if cidrs else {}
    return {"metadata": {"name": name}, "spec": spec, "status": {"addresses": addresses}}


NODES = {"items": [
    a_node("k-control-plane", "172.30.0.2", ["10.244.0.0/24"], ipv6="fc00::2"),
    a_node("k-worker", "172.30.0.3", ["10.244.1.0/24", "fd00:10:244:1::/64"]),
    a_node("k-worker2", "172.30.0.4", []),        # registered, no pod CIDR yet
    a_node("k-worker3", None, ["10.244.3.0/24"]),  # no address yet
]}


def test_node_facts_take_the_ipv4_address_and_pod_cidrs():
    facts = node.node_facts(NODES)
    assert facts["k-control-plane"] == ("172.30.0.2", ["10.244.0.0/24"])
    assert facts["k-worker"] == ("172.30.0.3", ["10.244.1.0/24"])
    assert facts["k-worker2"] == ("172.30.0.4", [])
    assert facts["k-worker3"] == (None, ["10.244.3.0/24"])


def test_routes_lead_to_every_other_node_that_has_an_address_and_a_pod_cidr():
    facts = node.node_facts(NODES)
    assert node.wanted_routes(facts, "k-worker") == {"10.244.0.0/24": "172.30.0.2"}
    assert node.wanted_routes(facts, "k-worker2") == {"10.244.0.0/24": "172.30.0.2", "10.244.1.0/24": "172.30.0.3"}


def test_route_changes_replace_moved_routes_and_remove_routes_of_nodes_gone():
    wanted = {"10.244.0.0/24": "172.30.0.2", "10.244.1.0/24": "172.30.0.3"}
    present = {"10.244.1.0/24": "172.30.0.9", "10.244.5.0/24": "172.30.0.5"}
    assert node.route_changes(wanted, present) == (wanted, ["10.244.5.0/24"])
    assert node.route_changes(wanted, wanted) == ({}, [])


def test_the_cni_configuration_is_a_bridge_of_the_node_pod_cidr_without_masquerading():
    conf = json.loads(node.conflist("10.244.1.0/24"))
    bridge, portmap = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["isGateway"] and not bridge["ipMasq"]
    assert bridge["ipam"] == {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]],
                              "routes": [{"dst": "0.0.0.0/0"}]}
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}}


def claim(name, uid, cls="standard", modes=("ReadWriteMany",), size="2Gi", **extra):
    spec = {"storageClassName": cls, "accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    spec.update(extra.pop("spec", {}))
    meta = {"name": name, "namespace": "slurm", "uid": uid}
    meta.update(extra)
    return {"metadata": meta, "spec": spec}


def volume(name, phase, claim_uid=None, provisioner=node.PROVISIONER, policy="Delete"):
    return {"metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
            "spec": {"persistentVolumeReclaimPolicy": policy, "claimRef": {"uid": claim_uid} if claim_uid else None},
            "status": {"phase": phase}}


def test_an_unbound_claim_of_the_class_gets_a_shared_hostpath_volume_of_its_size_and_modes():
    create, delete = node.storage_plan([claim("demo-jail", "u1")], [])
    assert delete == []
    (pv,) = create
    assert pv["metadata"]["name"] == "pvc-u1"
    assert pv["spec"]["hostPath"] == {"path": "/soperator-shared/volumes/pvc-u1", "type": "DirectoryOrCreate"}
    assert pv["spec"]["capacity"] == {"storage": "2Gi"} and pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "slurm",
                                      "name": "demo-jail", "uid": "u1"}
    assert pv["spec"]["storageClassName"] == "standard" and pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


def test_claims_of_other_classes_bound_named_or_being_deleted_get_nothing():
    claims = [claim("other", "u1", cls="fast"), claim("named", "u2", spec={"volumeName": "x"}),
              claim("bound", "u3"), claim("going", "u4", deletionTimestamp="2026-01-01T00:00:00Z")]
    assert node.storage_plan(claims, [volume("pvc-u3", "Bound", claim_uid="u3")]) == ([], [])


def test_only_our_released_volumes_with_delete_go():
    volumes = [volume("pvc-a", "Released"), volume("pvc-b", "Failed"), volume("pvc-c", "Bound", claim_uid="c"),
               volume("pvc-d", "Released", provisioner="other"), volume("pvc-e", "Released", policy="Retain")]
    assert node.storage_plan([], volumes) == ([], ["pvc-a", "pvc-b"])


STATUS = "Name:\tx\nCapInh:\t0000000000000000\nCapBnd:\t000001fffeffffff\n"


def test_the_bounding_set_of_these_vms_lacks_sys_resource_only():
    allowed = runc.bounding_set(STATUS)
    assert "CAP_SYS_RESOURCE" not in allowed
    assert len(allowed) == 40 and {"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_CHECKPOINT_RESTORE"} <= allowed


def test_runc_create_gets_a_spec_without_the_missing_capabilities(tmp_path, monkeypatch):
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    spec = {"ociVersion": "1.0.2", "process": {"args": ["/sbin/init"], "capabilities": {
        k: list(caps) for k in ("bounding", "effective", "permitted", "inheritable")}}}
    (tmp_path / "config.json").write_text(json.dumps(spec))
    ran = []
    monkeypatch.setattr(runc.os, "execv", lambda path, argv: ran.append(argv))
    monkeypatch.setattr(runc, "bounding_set", lambda _text, parse=runc.bounding_set: parse(STATUS))
    argv = [runc.RUNC, "--root", "/run/r", "--log-format", "json", "create", "--bundle", str(tmp_path), "id1"]
    runc.main(["runc-bounded"] + argv[1:])
    written = json.loads((tmp_path / "config.json").read_text())
    assert all(v == ["CAP_CHOWN", "CAP_SYS_ADMIN"] for v in written["process"]["capabilities"].values())
    assert written["process"]["args"] == ["/sbin/init"] and written["ociVersion"] == "1.0.2"
    assert ran == [argv]


def test_runc_exec_gets_a_process_without_the_missing_capabilities_and_other_commands_pass(tmp_path, monkeypatch):
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["cat"], "capabilities": {"effective": ["CAP_SYS_RESOURCE", "CAP_KILL"]}}))
    ran = []
    monkeypatch.setattr(runc.os, "execv", lambda path, argv: ran.append(argv))
    monkeypatch.setattr(runc, "bounding_set", lambda _text, parse=runc.bounding_set: parse(STATUS))
    runc.main(["runc-bounded", "exec", "--process", str(process), "--detach", "id1"])
    assert json.loads(process.read_text())["capabilities"] == {"effective": ["CAP_KILL"]}
    runc.main(["runc-bounded", "--root", "/run/r", "delete", "--force", "id1"])
    assert ran[-1] == [runc.RUNC, "--root", "/run/r", "delete", "--force", "id1"]


def test_debian_dependency_fields_give_the_first_alternative_without_versions_or_arches():
    field = "libc6 (>= 2.34), libip4tc2 (= 1.8.9-2) | libfoo, debconf:any, , libnftnl11 (>= 1.1.6)"
    assert images.depends(field) == ["libc6", "libip4tc2", "debconf", "libnftnl11"]
    assert images.depends(",") == []


def test_dpkg_paths_land_under_usr_where_the_root_is_merged(tmp_path):
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    os.symlink("usr/lib", tmp_path / "lib")
    (tmp_path / "etc").mkdir()
    assert images.usr_path(str(tmp_path), "/lib/x86_64-linux-gnu/libc.so.6") == "usr/lib/x86_64-linux-gnu/libc.so.6"
    assert images.usr_path(str(tmp_path), "/etc/ethertypes") == "etc/ethertypes"
    assert images.usr_path(str(tmp_path), "/usr/sbin/xtables-nft-multi") == "usr/sbin/xtables-nft-multi"


@pytest.fixture
def no_docker_not_root(tmp_path):
    """A PATH where `docker info` fails and `id -u` says 1000; hack/images.sh env needs nothing more."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    for tool in ("docker", "id"):
        (bin_dir / tool).chmod(0o755)
    return {"PATH": "%s:/usr/bin:/bin" % bin_dir, "HOME": str(tmp_path), "SOPERATOR_CACHE": str(tmp_path / "c")}


# not a prerequisite: the test needs a host without Docker's socket (the script would use it)
@pytest.mark.skipif(os.path.exists("/var/run/docker.sock"), reason="this host has a system Docker socket")
def test_molecule_kind_skips_where_no_engine_answers_and_none_can_be_started_saying_why(no_docker_not_root):
    res = subprocess.run([os.path.join(ROOT, "hack", "molecule-kind.sh")], env=no_docker_not_root,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("molecule kind scenario SKIPPED: no Docker engine answers")
    assert "needs root" in res.stdout


# not a prerequisite: the test needs a host without Docker's socket (the script would use it)
@pytest.mark.skipif(os.path.exists("/var/run/docker.sock"), reason="this host has a system Docker socket")
def test_molecule_kind_skip_is_a_failure_under_ci(no_docker_not_root):
    res = subprocess.run([os.path.join(ROOT, "hack", "molecule-kind.sh")], env=dict(no_docker_not_root, CI="true"),
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert "prerequisite missing under CI=true (a skip is not a pass)" in res.stderr
