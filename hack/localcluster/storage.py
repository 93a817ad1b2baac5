"""The hostPath provisioner: a StorageClass whose claims get a directory of the state dir (a child process)."""

import json
import os
import shutil
import signal
import ssl
import time
import urllib.error
import urllib.request

import localcluster as lc

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
        self.ctx = ssl.create_default_context(cafile=lc.state_path("pki", "ca.crt"))
        self.ctx.load_cert_chain(lc.state_path("pki", user + ".crt"), lc.state_path("pki", user + ".key"))

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
    state = lc.load_state()
    api = Api(state, "provisioner")
    root = lc.state_path("volumes")
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
