"""A field of a rendered object maps back to the SlurmCluster or NodeSet field it was rendered from."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api import fieldmap, spec
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

CLUSTER = make_cluster({
    "jail": {"storageClassName": "standard", "size": "10Gi", "subMounts": [
        {"name": "home", "mountPath": "/home", "claimName": "homes"},
        {"name": "data", "mountPath": "/data", "hostPath": "/data"}]},
    "controller": {"resources": {"limits": {"memory": "1Gi"}}, "placement": {"nodeSelector": {"pool": "ctl"}}},
    "login": {"service": {"type": "NodePort", "nodePort": 30022}, "resources": {"requests": {"cpu": "1"}}},
    "placement": {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "wide", "operator": "Exists"}],
                  "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                      {"topologyKey": "zone"}]}}},
})
NODESETS = [
    make_nodeset("cpu", {"resources": {"limits": {"cpu": "2"}}, "placement": {
        "tolerations": [{"key": "wide", "operator": "Exists"}, {"key": "own", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}}}}),
    make_nodeset("gpu", {"gpu": {"count": 8, "type": "h100"}, "image": "mine/worker:1"}),
]


@pytest.fixture(scope="module")
def rendered():
    cluster, nodesets = spec.validate_cluster_with_nodesets(CLUSTER, NODESETS)
    objects = dict(((o["kind"], o["metadata"]["name"]), o) for o in render.render_cluster(CLUSTER, NODESETS))
    return cluster, nodesets, objects


@pytest.mark.parametrize("kind,name,field,expected", [
    ("StatefulSet", "demo-cpu", "spec.template.spec.containers[0].resources.requests", "nodesets[cpu].spec.resources"
                                                                                      ".requests"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.containers[0].resources.limits[cpu]",
     "nodesets[cpu].spec.resources.limits[cpu]"),
    ("StatefulSet", "demo-gpu", "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
     "nodesets[gpu].spec.gpu.count"),
    ("StatefulSet", "demo-gpu", "spec.template.spec.containers[0].image", "nodesets[gpu].spec.image"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.initContainers[0].image", "spec.images.worker"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.tolerations[0].key", "spec.placement.tolerations[0].key"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.tolerations[1].operator",
     "nodesets[cpu].spec.placement.tolerations[1].operator"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                "Execution.nodeSelectorTerms[0]",
     "nodesets[cpu].spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms[0]"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.affinity.podAffinity", "spec.placement.affinity.podAffinity"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.nodeSelector", "spec.placement.nodeSelector"),
    ("StatefulSet", "demo-controller", "spec.template.spec.nodeSelector[pool]",
     "spec.controller.placement.nodeSelector[pool]"),
    ("StatefulSet", "demo-controller", "spec.template.spec.nodeSelector[zone]", "spec.placement.nodeSelector[zone]"),
    ("StatefulSet", "demo-controller", "spec.template.spec.containers[0].resources.limits",
     "spec.controller.resources.limits"),
    ("StatefulSet", "demo-controller", "spec.volumeClaimTemplates", "spec.controller.spool"),
    ("StatefulSet", "demo-controller", "spec.volumeClaimTemplates[0].spec.resources.requests[storage]",
     "spec.controller.spool.size"),
    ("StatefulSet", "demo-login", "spec.template.spec.containers[0].resources.requests", "spec.login.resources"
                                                                                        ".requests"),
    ("StatefulSet", "demo-login", "spec.template.spec.containers[0].image", "spec.images.login"),
    ("StatefulSet", "demo-login", "spec.replicas", "spec.login.replicas"),
    ("StatefulSet", "demo-cpu", "spec.replicas", "nodesets[cpu].spec.replicas"),
    ("StatefulSet", "demo-cpu", "spec.template.spec.terminationGracePeriodSeconds", "spec.slurm.killWait"),
    ("Service", "demo-login", "spec.ports[0].nodePort", "spec.login.service.nodePort"),
    ("Service", "demo-login", "spec.type", "spec.login.service.type"),
    ("PersistentVolumeClaim", "demo-jail", "spec.resources[storage]", "spec.jail.size"),
    ("ConfigMap", "demo-slurm-config", "data", "spec.slurm"),
    ("ConfigMap", "demo-sshd-config", "data", "spec.login.sshdConfig"),
    ("PodDisruptionBudget", "demo-cpu", "spec.selector", "nodesets[cpu].spec"),
    ("StatefulSet", "demo-cpu", "metadata.labels", "nodesets[cpu].spec"),
    ("Secret", "demo-munge-key", "data", "spec"),
])
def test_fields_map_back_to_what_the_user_wrote(rendered, kind, name, field, expected):
    cluster, nodesets, objects = rendered
    assert fieldmap.user_field(cluster, nodesets, objects[(kind, name)], field) == expected


def test_volumes_and_mounts_map_to_their_sub_mount(rendered):
    cluster, nodesets, objects = rendered
    worker = objects[("StatefulSet", "demo-cpu")]
    pod = worker["spec"]["template"]["spec"]
    volume = [v["name"] for v in pod["volumes"]].index("submount-data")
    mount = [m["name"] for m in pod["containers"][0]["volumeMounts"]].index("submount-home")
    assert fieldmap.user_field(cluster, nodesets, worker, "spec.template.spec.volumes[%d].hostPath" % volume) == \
        "spec.jail.subMounts[1]"
    assert fieldmap.user_field(cluster, nodesets, worker, "spec.template.spec.containers[0].volumeMounts[%d]"
                                                          ".mountPath" % mount) == "spec.jail.subMounts[0]"


def test_the_populate_jobs_images(rendered):
    cluster, nodesets, objects = rendered
    job = next(o for (kind, _name), o in objects.items() if kind == "Job")
    assert fieldmap.user_field(cluster, nodesets, job, "spec.template.spec.containers[0].image") == "spec.images.jail"
    assert fieldmap.user_field(cluster, nodesets, job, "spec.template.spec.initContainers[0].image") == \
        "spec.images.populateJail"


def test_refusals_become_errors_naming_the_field_the_object_and_the_api_servers_words(rendered):
    cluster, nodesets, objects = rendered
    refusal = {"object": objects[("StatefulSet", "demo-cpu")], "status": 422, "message": "invalid", "causes": [
        {"field": "spec.template.spec.containers[0].resources.requests", "message": "Invalid value: \"4\": must be "
         "less than or equal to cpu limit of 2", "reason": "FieldValueInvalid"}]}
    [error] = fieldmap.refusal_errors(cluster, nodesets, [refusal])
    assert error.path == "nodesets[cpu].spec.resources.requests"
    assert "StatefulSet demo-cpu" in error.message and "cpu limit of 2" in error.message
    assert "nothing was applied" in error.message
    # Without causes: the object's part of the spec, with the API server's message.
    [error] = fieldmap.refusal_errors(cluster, nodesets, [dict(refusal, causes=[], message="denied by a webhook")])
    assert error.path == "nodesets[cpu].spec" and "denied by a webhook" in error.message


# --- accounting, the REST API, the exporter and the NCCL check ------------------------------------------------
FULL = make_cluster({
    "jail": {"storageClassName": "standard", "size": "10Gi"},
    "placement": {"nodeSelector": {"zone": "a"}},
    "accounting": {"enabled": True, "database": {"storage": {"size": "20Gi"}, "resources": {"limits": {"cpu": "1"}},
                                                 "placement": {"nodeSelector": {"disk": "ssd"}}},
                   "slurmdbd": {"resources": {"requests": {"memory": "256Mi"}}, "config": {"PurgeJobAfter": "12"}}},
    "restApi": {"enabled": True, "service": {"type": "NodePort"}, "resources": {"limits": {"memory": "128Mi"}}},
    "exporter": {"enabled": True, "placement": {"tolerations": [{"key": "mon", "operator": "Exists"}]}},
    "healthChecks": {"nccl": {"schedule": "0 3 * * 0"}},
    "networkPolicies": {"restApiFrom": [{"ipBlock": {"cidr": "203.0.113.0/24"}}], "exporterFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]},
})
FULL_SETS = [make_nodeset("gpu", {"gpu": {"count": 8, "type": "h100"},
                                   "healthChecks": {"ncclMinBusBandwidthGBps": 300}})]


@pytest.fixture(scope="module")
def full():
    cluster, nodesets = spec.validate_cluster_with_nodesets(FULL, FULL_SETS)
    objects = dict(((o["kind"], o["metadata"]["name"]), o)
                   for o in render.render_cluster(FULL, FULL_SETS, served=("ServiceMonitor",)))
    return cluster, nodesets, objects


@pytest.mark.parametrize("kind,name,field,expected", [
    ("StatefulSet", "demo-accounting", "spec.template.spec.containers[0].resources.requests",
     "spec.accounting.slurmdbd.resources.requests"),
    ("StatefulSet", "demo-accounting", "spec.template.spec.containers[0].image", "spec.images.slurmdbd"),
    ("StatefulSet", "demo-accounting", "spec.template.spec.initContainers[0].image", "spec.images.slurmdbd"),
    ("StatefulSet", "demo-accounting", "spec.template.spec.nodeSelector[zone]", "spec.placement.nodeSelector[zone]"),
    ("ConfigMap", "demo-slurmdbd-config", "data", "spec.accounting.slurmdbd.config"),
    ("StatefulSet", "demo-accounting-db", "spec.template.spec.containers[0].resources.limits[cpu]",
     "spec.accounting.database.resources.limits[cpu]"),
    ("StatefulSet", "demo-accounting-db", "spec.template.spec.containers[0].image", "spec.images.mariadb"),
    ("StatefulSet", "demo-accounting-db", "spec.template.spec.nodeSelector[disk]",
     "spec.accounting.database.placement.nodeSelector[disk]"),
    ("StatefulSet", "demo-accounting-db", "spec.volumeClaimTemplates", "spec.accounting.database.storage"),
    ("StatefulSet", "demo-accounting-db", "spec.volumeClaimTemplates[0].spec.resources.requests[storage]",
     "spec.accounting.database.storage.size"),
    ("Secret", "demo-accounting-db-password", "data", "spec.accounting.database"),
    ("StatefulSet", "demo-rest", "spec.replicas", "spec.restApi.replicas"),
    ("StatefulSet", "demo-rest", "spec.template.spec.containers[0].resources.limits", "spec.restApi.resources.limits"),
    ("StatefulSet", "demo-rest", "spec.template.spec.containers[0].image", "spec.images.slurmrestd"),
    ("Service", "demo-rest", "spec.type", "spec.restApi.service.type"),
    ("Service", "demo-rest", "spec.ports[0].port", "spec.restApi.service.port"),
    ("Secret", "demo-jwt-key", "data", "spec.restApi"),
    ("StatefulSet", "demo-exporter", "spec.template.spec.tolerations[0].key",
     "spec.exporter.placement.tolerations[0].key"),
    ("StatefulSet", "demo-exporter", "spec.template.spec.containers[0].image", "spec.images.exporter"),
    ("ServiceMonitor", "demo-exporter", "metadata.labels", "spec.exporter.serviceMonitor.labels"),
    ("ServiceMonitor", "demo-exporter", "spec.endpoints[0].interval", "spec.exporter.serviceMonitor.interval"),
    ("CronJob", "demo-nccl-check", "spec.schedule", "spec.healthChecks.nccl.schedule"),
    ("CronJob", "demo-nccl-check", "spec.jobTemplate.spec.template.spec.containers[0].image", "spec.images.worker"),
    ("CronJob", "demo-nccl-check", "spec.jobTemplate.spec.template.spec.nodeSelector[zone]",
     "spec.placement.nodeSelector[zone]"),
    ("CronJob", "demo-nccl-check", "spec.jobTemplate.spec.template.spec.volumes[0]", "spec.jail"),
    ("CronJob", "demo-nccl-check", "spec.concurrencyPolicy", "spec.healthChecks.nccl"),
    ("Service", "demo-nccl-check", "spec.clusterIP", "spec.healthChecks.nccl"),
    ("ConfigMap", "demo-health-checks", "data", "spec.healthChecks"),
    ("NetworkPolicy", "demo-rest", "spec.ingress[0].from[1].ipBlock.cidr",
     "spec.networkPolicies.restApiFrom[0].ipBlock.cidr"),
    ("NetworkPolicy", "demo-rest", "spec.ingress[0].from[0].podSelector", "spec.networkPolicies"),
    ("NetworkPolicy", "demo-exporter", "spec.ingress[0].from[0].namespaceSelector.matchLabels",
     "spec.networkPolicies.exporterFrom[0].namespaceSelector.matchLabels"),
    ("NetworkPolicy", "demo-accounting", "spec.podSelector", "spec.networkPolicies"),
    ("NetworkPolicy", "demo-accounting-db", "spec.ingress[0].ports[0].port", "spec.networkPolicies"),
])
def test_fields_of_the_optional_components_map_back(full, kind, name, field, expected):
    cluster, nodesets, objects = full
    assert fieldmap.user_field(cluster, nodesets, objects[(kind, name)], field) == expected
