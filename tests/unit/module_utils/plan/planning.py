"""Inputs for the per-concern planners: a validated cluster and NodeSets in a model.Context, Slurm's node table as
`scontrol show node -o` lines (read by the real parser), StatefulSets and pods as the API server shows them."""

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

NOW = 1_700_000_000
REV = "rev-1"


def line(name, state="IDLE", reason=None, when=NOW - 60, cpus_alloc=0):
    text = "NodeName=%s CPUAlloc=%d CPUTot=2 State=%s+DYNAMIC_NORM" % (name, cpus_alloc, state)
    if reason:
        text += " Reason=%s [root@%d]" % (reason, when)
    return text


def slurm(*lines):
    return scontrol.parse_show_node("\n".join(lines))


def sts(name, replicas, revision=REV, ready=None, template_hash="h", annotations=None):
    md = {"name": name, "generation": 1, "annotations": dict({names.ANNOTATION_TEMPLATE_HASH: template_hash},
                                                              **(annotations or {}))}
    return {"metadata": md, "spec": {"replicas": replicas, "template": {"metadata": {}}},
            "status": {"replicas": replicas, "readyReplicas": replicas if ready is None else ready,
                       "updateRevision": revision, "observedGeneration": 1}}


def pod(name, revision=REV, ready=True, deleting=False):
    md = {"name": name, "uid": "uid-" + name, "labels": {model.REVISION_LABEL: revision}}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def context(cluster_spec=None, nodesets=(("cpu", {}),), leaving=(), observed=None, now=NOW):
    """A Context of SlurmCluster ``demo`` with NodeSets ``(name, spec)`` (``leaving``: names being deleted)."""
    cluster = specs.validate_cluster(make_cluster(cluster_spec or {}, uid="c-uid"))
    valid, gone = [], []
    for set_name, set_spec in nodesets:
        checked = specs.validate_nodeset(make_nodeset(set_name, set_spec, uid="n-uid-" + set_name))
        (gone if set_name in leaving else valid).append(checked)
    return model.Context(cluster, valid, gone, {}, dict({"statefulsets": {}, "pods": {}, "slurm": None},
                                                        **(observed or {})), now)


def workers(count, nodeset="cpu", ready=True, revision=REV):
    """The StatefulSet and pods of ``count`` workers of ``nodeset``."""
    name = names.worker_name("demo", nodeset)
    return ({name: sts(name, count, revision=revision)},
            dict((names.pod_name(name, i), pod(names.pod_name(name, i), revision, ready)) for i in range(count)))
