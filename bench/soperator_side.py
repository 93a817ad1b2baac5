"""Soperator (nebius/soperator's Go operator) beside ours, for bench_operator.py.

Nothing of Soperator is in this repository. Its manager binary and its CRDs come from a build made outside the
project (see COMMIT and ``locate``): the workplace's rules forbid committing another project's code or a recipe
that builds it. What is here is ours: the objects of an equivalent cluster (written from reading Soperator's CRDs
and Helm charts at COMMIT), a CRD for the one OpenKruise kind Soperator writes (its schema left open: no Kruise
controller runs, only the API type must exist), and a marker that plays the Kruise controller's status writes.
"""

import os
import socket
import subprocess
import threading
import time

COMMIT = "c238d993"  # nebius/soperator, the version compared
GROUP, CLUSTER_VERSION, NODESET_VERSION = "slurm.nebius.ai", "v1", "v1alpha1"
KRUISE = ("apps.kruise.io", "v1beta1", "statefulsets")
AGENT = "manager/"
# A root key for the login pods (Soperator requires one; no login happens here).
ROOT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBenchBenchBenchBenchBenchBenchBenchBen bench"
# What is not the same on the two sides (printed with the table).
NOT_EQUIVALENT = [
    "Soperator renders controller, login and workers as OpenKruise StatefulSets; no Kruise controller runs, so no "
    "pod of Soperator's exists and the bench writes their status (replicas available): ours has real kwok pods, "
    "whose events it watches and whose readiness its status reports.",
    "Soperator runs only its cluster and nodeset controllers (--controllers=cluster,nodeset; the others need "
    "Slurm's REST API), webhooks off; ours runs everything it ships.",
    "Soperator's login Service is a LoadBalancer (it refuses ClusterIP); it stays pending here.",
    "Soperator's workers take the jail claim by name (created by the bench, as its Helm chart does); ours creates "
    "its jail claim itself. Both generate the munge key and SSH host keys (Soperator: RSA 2048, ECDSA P-521 and "
    "Ed25519, in Go; ours: Ed25519 and RSA 3072, OpenSSH's default size, 0.1-0.4 CPU-s of a create).",
    "Soperator has no periodic check of its own (controller-runtime's cache resync is 10 h): its 'no-op resync' "
    "is a forced reconcile, an annotation on the SlurmCluster, which its NodeSet controller reconciles (it reacts "
    "to any SlurmCluster update; its SlurmCluster controller to generation changes only). Ours is the periodic "
    "in-memory check, with GETs of the Secrets and the jail claim by name (not cached: never listed).",
    "Ours checks Slurm before applying (scontrol parses a changed slurm.conf, drains before a shrink); on kwok no "
    "Slurm answers, so neither side talks to Slurm here.",
]


def locate():
    """(manager binary, CRD directory) of the Soperator build, or None: $SOPERATOR_MANAGER and $SOPERATOR_CRDS,
    else ~/.cache/soperator/soperator-<COMMIT>/{bin/manager,src/config/crd/bases}."""
    base = os.path.join(os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator")),
                        "soperator-" + COMMIT)
    manager = os.environ.get("SOPERATOR_MANAGER") or os.path.join(base, "bin", "manager")
    crds = os.environ.get("SOPERATOR_CRDS") or os.path.join(base, "src", "config", "crd", "bases")
    if os.access(manager, os.X_OK) and os.path.isdir(crds):
        return manager, crds
    return None


def kruise_statefulset_crd():
    group, version, plural = KRUISE
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, group)},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": "statefulset", "kind": "StatefulSet",
                           "listKind": "StatefulSetList"},
                 "versions": [{"name": version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}},
                               "subresources": {"status": {}, "scale": {
                                   "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                   "labelSelectorPath": ".status.labelSelector"}}}]}}


def _resources(cpu="100m", memory="256Mi"):
    return {"cpu": cpu, "memory": memory, "ephemeral-storage": "1Gi"}


def cluster(name, namespace, workers, nodeset="w", image_tag="24.11"):
    """The jail claim, the SlurmCluster and one NodeSet of ``workers``: the shape of examples/cpu-cluster.yaml
    (a controller, one login pod, one worker set), on kwok nodes."""
    def image(what):
        return "example.invalid/soperator/%s:%s" % (what, image_tag)

    node_filter = "kwok"
    spool = {"volumeClaimTemplateSpec": {"accessModes": ["ReadWriteOnce"],
                                         "resources": {"requests": {"storage": "1Gi"}}}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": name + "-jail", "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}}
    slurm_cluster = {
        "apiVersion": "%s/%s" % (GROUP, CLUSTER_VERSION), "kind": "SlurmCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "k8sNodeFilters": [{"name": node_filter, "nodeSelector": {"soperator.dev/localcluster": "kwok"}}],
            "volumeSources": [{"name": "jail", "persistentVolumeClaim": {"claimName": name + "-jail"}}],
            "secrets": {},
            "populateJail": {"image": image("populate_jail"), "k8sNodeFilterName": node_filter},
            "partitionConfiguration": {"configType": "default"},
            "slurmNodes": {
                "accounting": {"enabled": False, "k8sNodeFilterName": node_filter},
                "controller": {
                    "k8sNodeFilterName": node_filter,
                    "slurmctld": {"image": image("controller_slurmctld"), "port": 6817, "resources": _resources()},
                    "munge": {"image": image("munge"), "resources": _resources()},
                    "volumes": {"spool": spool, "jail": {"volumeSourceName": "jail"}}},
                "exporter": {"enabled": False, "size": 0, "k8sNodeFilterName": node_filter},
                "login": {
                    "size": 1, "k8sNodeFilterName": node_filter,
                    "sshd": {"image": image("login_sshd"), "port": 22, "resources": _resources()},
                    "munge": {"image": image("munge"), "resources": _resources()},
                    "sshRootPublicKeys": [ROOT_KEY],
                    "sshdServiceType": "LoadBalancer",
                    "volumes": {"jail": {"volumeSourceName": "jail"}}},
                "rest": {"enabled": False, "size": 0, "k8sNodeFilterName": node_filter},
            },
            # Soperator's config reloader: a Deployment (native: the kube-controller-manager runs its pod).
            "sConfigController": {"node": {"size": 1, "k8sNodeFilterName": node_filter},
                                  "container": {"image": image("sconfigcontroller"), "resources": _resources()},
                                  "serviceAccountName": name + "-sconfigcontroller"},
        },
    }
    node_set = {
        "apiVersion": "%s/%s" % (GROUP, NODESET_VERSION), "kind": "NodeSet",
        "metadata": {"name": nodeset, "namespace": namespace},
        "spec": {
            "clusterName": name, "replicas": workers,
            "nodeSelector": {"soperator.dev/localcluster": "kwok"},
            "slurmd": {"image": {"repository": "example.invalid/soperator/worker_slurmd", "tag": image_tag},
                       "port": 6818, "resources": _resources(),
                       "volumes": {"spool": spool, "jail": {"persistentVolumeClaim": {"claimName": name + "-jail"}}}},
            "munge": {"image": {"repository": "example.invalid/soperator/munge", "tag": image_tag},
                      "resources": _resources()},
        },
    }
    return [claim, slurm_cluster, node_set]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Manager:
    """Soperator's manager as a host process against the local apiserver, namespaced like ours."""

    def __init__(self, binary, kubeconfig, namespace, log_path):
        self.metrics_port, self.probe_port = _free_port(), _free_port()
        env = dict(os.environ, KUBECONFIG=kubeconfig, ENABLE_WEBHOOKS="false",
                   SLURM_OPERATOR_WATCH_NAMESPACES=namespace)
        self._log = open(log_path, "wb")
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [binary, "--controllers=cluster,nodeset", "--log-format=plain",
             "--metrics-bind-address=127.0.0.1:%d" % self.metrics_port,
             "--health-probe-bind-address=127.0.0.1:%d" % self.probe_port,
             "--operator-namespace=" + namespace, "--leader-elect=true"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True, stdin=subprocess.DEVNULL)

    def logs(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class KruiseStatus:
    """Plays the Kruise controller's status writes: every Kruise StatefulSet in ``namespace`` is marked as having
    all its replicas up to date and available, at its current generation. Without it Soperator requeues every
    10 s forever. Its requests carry the bench's user agent (not counted for either operator)."""

    def __init__(self, custom, namespace, interval=0.05):
        self.custom, self.namespace, self.interval = custom, namespace, interval
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="kruise-status")
        self.thread.start()

    def _run(self):
        group, version, plural = KRUISE
        while not self.stopping.wait(self.interval):
            try:
                items = self.custom.list_namespaced_custom_object(group, version, self.namespace, plural)["items"]
            except Exception:  # noqa: BLE001  the CRD or namespace may be going away
                continue
            for sts in items:
                want = int((sts.get("spec") or {}).get("replicas", 1))
                gen = sts["metadata"].get("generation")
                status = {"observedGeneration": gen, "replicas": want, "readyReplicas": want,
                          "availableReplicas": want, "updatedReplicas": want, "updatedReadyReplicas": want,
                          "currentReplicas": want, "currentRevision": "r%s" % gen, "updateRevision": "r%s" % gen,
                          "labelSelector": ",".join("%s=%s" % kv for kv in sorted(
                              ((sts["spec"].get("selector") or {}).get("matchLabels") or {}).items()))}
                if all((sts.get("status") or {}).get(k) == v for k, v in status.items()):
                    continue
                try:
                    self.custom.patch_namespaced_custom_object_status(group, version, self.namespace, plural,
                                                                      sts["metadata"]["name"], {"status": status})
                except Exception:  # noqa: BLE001  deleted meanwhile, or a conflict: the next pass retries
                    continue

    def stop(self):
        self.stopping.set()
        self.thread.join(5)


def wait_established(apiext, name, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = apiext.read_custom_resource_definition(name)
        if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])):
            return
        time.sleep(0.2)
    raise RuntimeError("CRD %s not established" % name)
