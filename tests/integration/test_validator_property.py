"""Property: the pure validator and the real API server agree on generated SlurmClusters and NodeSets.

For every generated definition, either

* the validator accepts it, and then the API server accepts the resources (their CRDs: schema and CEL rules,
  strict field validation) and every object rendered from them (a server-side dry run of each); or
* the validator refuses it, naming fields of the resources, and then it does not matter what the API server says
  about the rendered objects; when the API server refuses the resources themselves, the validator must too.

Definitions are drawn around a valid cluster, each part replaced by values from the classes of bad input the
validator must know (quantities, label keys and values, tolerations, affinity, node ports, sub-mounts, Slurm
names, images, raw values with control characters, the accounting database, the REST API, the exporter, node
health and the NCCL check's CronJob...), so that a good share is valid and every class is visited.
SOPERATOR_PROPERTY_EXAMPLES sets the number of examples (default 120). A second property holds the validator's
reading of cron schedules to the API server's (a CronJob's dry run).
"""

import copy
import os
import uuid

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from ansible_collections.soperator.slurm.plugins.module_utils.api import config_rules, fields, spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP, VERSION = "slurm.soperator.dev", "v1alpha1"
PLURAL = {"SlurmCluster": "slurmclusters", "NodeSet": "nodesets"}
EXAMPLES = int(os.environ.get("SOPERATOR_PROPERTY_EXAMPLES", "120"))
pytestmark = pytest.mark.cluster

# --- values of each class: valid ones and the ways they go wrong --------------------------------------------------
QUANTITIES = st.one_of(
    st.sampled_from(["1", "2", "500m", "2Gi", "0", "0.5", ".5", "5.", "1e3", "1E3", "1e-3", "1k", "1Ki", "1n", "1u",
                     "-1", "1e5000", "1e999999999", "1e19", "9Ei", "7Ei", " 1", "1 ", "1\n", "1Gb", "", "0.0001",
                     "1" * 40, "3.3333333333333333333333333333333m"]),
    st.integers(min_value=-2, max_value=2 ** 64),
    st.from_regex(r"[0-9]{1,4}(\.[0-9]{0,4})?([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?", fullmatch=True),
)
SMALL_QUANTITIES = st.sampled_from(["100m", "1", "2", "512Mi", "1Gi", "2Gi", "0", "4Mi", "2Mi", "1.5"])
RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/ib",
                                  "foo", "requests.cpu", "Example.com/x", "hugepages-3x", "kubernetes.io/x"])
RESOURCES = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(RESOURCE_NAMES, st.one_of(SMALL_QUANTITIES, QUANTITIES), max_size=3),
    "limits": st.dictionaries(RESOURCE_NAMES, st.one_of(SMALL_QUANTITIES, QUANTITIES), max_size=3),
})
SAFE_RESOURCES = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), SMALL_QUANTITIES, max_size=2),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), SMALL_QUANTITIES, max_size=2),
})
LABEL_KEYS = st.one_of(
    st.sampled_from(["zone", "kubernetes.io/hostname", "node.example.com/pool", "a/b/c", "bad key", "x" * 63,
                     "x" * 64, "a" * 253 + "/x", "a" * 254 + "/x", "Example.com/x", "-x", "x-", "zone\n", "", "/x",
                     "example.com/", "a..b/x", "a_b", "A.B-c"]),
    st.from_regex(r"([a-z0-9]{1,6}\.){0,2}[a-z]{1,6}/[A-Za-z0-9][-A-Za-z0-9_.]{0,8}", fullmatch=True),
)
LABEL_VALUES = st.one_of(
    st.sampled_from(["", "a", "slurm", "x" * 63, "x" * 64, "bad value!", "-a", "a-", "a\n", "a.b_c-d", "A1"]),
    st.text(alphabet="aZ09-_.\n /\x0b\u00a0", max_size=12),
)
TOLERATIONS = st.lists(st.fixed_dictionaries({}, optional={
    "key": st.one_of(st.just(""), LABEL_KEYS),
    "operator": st.sampled_from(["Exists", "Equal"]),
    "value": LABEL_VALUES,
    "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    "tolerationSeconds": st.integers(min_value=-5, max_value=3600),
}), max_size=2)
OPERATORS = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
NODE_REQUIREMENT = st.fixed_dictionaries({"key": LABEL_KEYS, "operator": OPERATORS}, optional={
    "values": st.lists(st.one_of(LABEL_VALUES, st.sampled_from(["1", "-3", "x"])), max_size=2)})
FIELD_REQUIREMENT = st.fixed_dictionaries({"key": st.sampled_from(["metadata.name", "spec.unschedulable"]),
                                           "operator": OPERATORS}, optional={
    "values": st.lists(st.sampled_from(["node-1", "Node_1", "a"]), max_size=2)})
TERM = st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(NODE_REQUIREMENT, max_size=2),
                                           "matchFields": st.lists(FIELD_REQUIREMENT, max_size=1)})
SELECTOR = st.fixed_dictionaries({}, optional={
    "matchLabels": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2),
    "matchExpressions": st.lists(st.fixed_dictionaries({
        "key": LABEL_KEYS, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"])}, optional={
        "values": st.lists(LABEL_VALUES, max_size=2)}), max_size=2)})
POD_TERM = st.fixed_dictionaries({"topologyKey": st.one_of(st.just("kubernetes.io/hostname"), LABEL_KEYS)}, optional={
    "labelSelector": SELECTOR, "namespaces": st.lists(st.sampled_from(["hpc", "Bad", "a-b"]), max_size=2),
    "matchLabelKeys": st.lists(st.sampled_from(["app", "pod-template-hash", "bad key"]), max_size=2),
    "mismatchLabelKeys": st.lists(st.sampled_from(["app", "team"]), max_size=1)})
WEIGHTS = st.integers(min_value=0, max_value=101)
AFFINITY = st.fixed_dictionaries({}, optional={
    "nodeAffinity": st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries({
            "nodeSelectorTerms": st.lists(TERM, max_size=2)}),
        "preferredDuringSchedulingIgnoredDuringExecution": st.lists(st.fixed_dictionaries({
            "weight": WEIGHTS, "preference": TERM}), max_size=1)}),
    "podAntiAffinity": st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": st.lists(POD_TERM, max_size=1),
        "preferredDuringSchedulingIgnoredDuringExecution": st.lists(st.fixed_dictionaries({
            "weight": WEIGHTS, "podAffinityTerm": POD_TERM}), max_size=1)}),
})
PLACEMENT = st.fixed_dictionaries({}, optional={
    "nodeSelector": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2),
    "tolerations": TOLERATIONS, "affinity": AFFINITY})
IMAGES = st.sampled_from(["registry.example.com/hpc/worker:1", "soperator/slurm-worker:0.1.0", "x:1\n", "a b",
                          "x@sha256:" + "a" * 64, "localhost:5000/x", "-x", "x\x0b"])
JAIL_PATHS = st.sampled_from(["/home", "/scratch", "/data/sets", "/proc", "/sys/x", "/dev", "/run/munge", "/tmp",
                              "/var/spool/slurmd", "/var", "/etc", "/usr/local/cuda", "/home/", "/a/../b", "/"])
SUB_MOUNT = st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "Bad"]), "mountPath": JAIL_PATHS}, optional={
    "readOnly": st.booleans(),
    "hostPath": st.sampled_from(["/data", "/mnt/nvme", "relative", "/x/../y"]),
    "claimName": st.sampled_from(["homes", "Bad_claim"]),
    "emptyDir": st.booleans(),
    "mode": st.sampled_from(["0755", "1777", "0777", "755", "3770", "2775", "0642", "u+w", "17777"])})
SLURM_VALUES = st.one_of(st.sampled_from(["bf_continue", "300", "a b", "a\nb", "a\\", "#x", "a\x0bb", "a\x1fb",
                                          "a\u00a0b", "UNLIMITED", "", "\u0663"]),
                         st.text(alphabet="ab1,=\t\n\x00\x0b#\\", max_size=6))
PARTITION_NAMES = st.sampled_from(["main", "gpu", "default", "DEFAULT", "Default", "a b", "main\n", "x_y-z"])
NODEPORTS = st.integers(min_value=0, max_value=70000)
CRON_FIELD = st.one_of(
    st.sampled_from(["*", "0", "5", "*/15", "1-5", "1,3", "59", "60", "24", "31", "32", "12", "13", "7", "6", "*/0",
                     "5/10", "0-0", "5-1", "jan", "MON", "sun-sat", "x", "1-2-3", "*-5", "00", ",", "1,,2", "-1"]),
    st.from_regex(r"[0-9*]{1,2}([-/][0-9]{1,2})?(,[0-9]{1,2})?", fullmatch=True))
SCHEDULES = st.one_of(
    st.sampled_from(["0 3 * * 0", "@hourly", "@weekly", "@midnight", "@reboot", "0 0 * * *\n", "0 0 * *",
                     "0 0 * * * *", "0 0 * * MON", "every sunday"]),
    st.builds(" ".join, st.lists(CRON_FIELD, min_size=5, max_size=5)))
NAMES_64 = st.sampled_from(["slurm_acct_db", "slurm", "a" * 64, "a-b", "x\n", "UPPER_1"])
SECRET_KEYS = st.sampled_from(["password", ".p", "..p", "..", ".", "a..b", "ca.crt", "a/b", "x" * 253, "x" * 254])
HEALTH = st.fixed_dictionaries({}, optional={
    "interval": st.integers(min_value=0, max_value=100000),
    "nodeStates": st.lists(st.sampled_from(["ANY", "IDLE", "ALLOC", "NONDRAINED_IDLE"]), max_size=2, unique=True),
    "minFreeTmpMiB": st.integers(min_value=-1, max_value=2 ** 40),
    "gpu": st.fixed_dictionaries({}, optional={"xids": st.lists(st.integers(min_value=0, max_value=2000), max_size=2),
                                               "dcgmDiagLevel": st.integers(min_value=-1, max_value=3)}),
    "nccl": st.fixed_dictionaries({}, optional={
        "schedule": SCHEDULES,
        "command": st.sampled_from(["/usr/bin/all_reduce_perf", "/home/a/x", "relative", "/opt/nccl/all_reduce_perf"]),
        "minBytes": st.sampled_from(["512M", "8G", "1", "1T", "0"]),
        "maxBytes": st.sampled_from(["8G", "512M", "16G"]),
        "partition": st.sampled_from(["main", "gpu", "Bad one"]),
        "timeLimitMinutes": st.integers(min_value=0, max_value=2000)}),
    "kubernetesNodes": st.fixed_dictionaries({}, optional={
        "drainCordoned": st.booleans(),
        "drainOnConditions": st.lists(st.sampled_from(["KernelDeadlock", "bad type", "Ready"]), max_size=2),
        "evictUnhealthyAfter": st.sampled_from(["1h", "30m", "1d", ""])})})
DATABASE = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["InCluster", "External", "MariaDBOperator"]),
    "host": st.sampled_from(["db.example.com", "10.0.0.1", "-db", "db\n"]),
    "port": st.integers(min_value=0, max_value=70000),
    "name": NAMES_64, "user": NAMES_64,
    "passwordSecretRef": st.fixed_dictionaries({"name": st.sampled_from(["db", "Bad"]), "key": SECRET_KEYS}),
    "tls": st.fixed_dictionaries({"caSecretRef": st.fixed_dictionaries({"name": st.just("ca"), "key": SECRET_KEYS})}),
    "storage": st.fixed_dictionaries({}, optional={"size": QUANTITIES,
                                                   "storageClassName": st.sampled_from(["fast", "Bad"])}),
    "resources": RESOURCES, "placement": PLACEMENT})
ACCOUNTING = st.fixed_dictionaries({"enabled": st.booleans()}, optional={
    "database": DATABASE,
    "slurmdbd": st.fixed_dictionaries({}, optional={
        "resources": RESOURCES, "placement": PLACEMENT,
        "config": st.dictionaries(st.sampled_from(["PurgeJobAfter", "PrivateData", "StorageHost"]), SLURM_VALUES,
                                  max_size=2)})})
REST_API = st.fixed_dictionaries({"enabled": st.booleans()}, optional={
    "replicas": st.integers(min_value=0, max_value=20),
    "service": st.fixed_dictionaries({}, optional={"type": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
                                                   "port": st.integers(min_value=0, max_value=70000)}),
    "resources": RESOURCES, "placement": PLACEMENT})
EXPORTER = st.fixed_dictionaries({"enabled": st.booleans()}, optional={
    "resources": RESOURCES, "placement": PLACEMENT,
    "serviceMonitor": st.fixed_dictionaries({}, optional={
        "interval": st.sampled_from(["30s", "1m30s", "1us", "30m1h", "0", ""]),
        "labels": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2)})})


def _service(draw):
    kind = draw(st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]))
    return dict({"type": kind}, **({"nodePort": draw(NODEPORTS)} if kind != "ClusterIP" else {}))


# Each part of a definition: (where it goes, a wide strategy, tame values). An example draws one or two parts
# wide (every class of bad input, and good values) and the rest tame, so about half the definitions are valid and
# the frontier where the validator and the API server could disagree is what gets explored.
CLUSTER_PARTS = [
    (("jail", "size"), QUANTITIES, ["1Gi", 1073741824]),
    (("jail", "subMounts"), st.lists(SUB_MOUNT, max_size=2), [[{"name": "a", "mountPath": "/scratch",
                                                                "emptyDir": True}]]),
    (("controller", "spool", "size"), QUANTITIES, ["1Gi"]),
    (("controller", "resources"), RESOURCES, [{"limits": {"memory": "1Gi"}}, {"requests": {"cpu": "100m"}}]),
    (("controller", "placement"), PLACEMENT, [{"nodeSelector": {"pool": "ctl"}}]),
    (("placement",), PLACEMENT, [{"tolerations": [{"key": "dedicated", "operator": "Exists"}]}]),
    (("login", "placement"), PLACEMENT, [{"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname"}}]}}}]),
    (("login", "resources"), RESOURCES, [{"requests": {"cpu": "1"}}]),
    (("login", "service"), st.composite(_service)(), [{"type": "NodePort", "nodePort": 30022}]),
    (("partitions",), st.lists(st.fixed_dictionaries({"name": PARTITION_NAMES, "default": st.booleans()}),
                               min_size=1, max_size=2), [[{"name": "main", "default": True}]]),
    (("slurm", "slurmConf"), st.dictionaries(st.sampled_from(["SchedulerParameters", "MinJobAge", "Prolog"]),
                                             SLURM_VALUES, max_size=2), [{"MinJobAge": "300"}]),
    (("images", "worker"), IMAGES, ["registry.example.com/hpc/worker:1"]),
    (("images", "slurmdbd"), IMAGES, ["registry.example.com/hpc/slurmdbd:1"]),
    (("accounting",), ACCOUNTING, [{"enabled": True}, {"enabled": True, "database": {
        "type": "External", "host": "db.example.com", "passwordSecretRef": {"name": "db", "key": "password"}}}]),
    (("restApi",), REST_API, [{"enabled": True}, {"enabled": True, "service": {"type": "NodePort"}}]),
    (("exporter",), EXPORTER, [{"enabled": True}]),
    (("healthChecks",), HEALTH, [{"nccl": {"schedule": "0 3 * * 0"}}, {"interval": 60}]),
]
NODESET_PARTS = [
    (("resources",), RESOURCES, [{"limits": {"cpu": "1", "memory": "1Gi"}}]),
    (("gpu",), st.fixed_dictionaries({}, optional={"count": st.integers(min_value=0, max_value=2),
                                                   "type": st.sampled_from(["h100", "H100"])}),
     [{"count": 1, "type": "h100"}]),
    (("features",), st.lists(st.sampled_from(["ib", "gpu", "GPU", "cpu", "a b"]), max_size=2, unique=True),
     [["ib"]]),
    (("placement",), PLACEMENT, [{"nodeSelector": {"nvidia.com/gpu.present": "true"}}]),
    (("image",), IMAGES, ["registry.example.com/hpc/worker:2"]),
    (("healthChecks",), st.fixed_dictionaries({}, optional={
        "enabled": st.booleans(), "ncclMinBusBandwidthGBps": st.integers(min_value=0, max_value=200000),
        "gpu": st.fixed_dictionaries({}, optional={"maxRetiredPages": st.integers(min_value=-1, max_value=10)})}),
     [{"ncclMinBusBandwidthGBps": 100}]),
]


def _put(tree, path, value):
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


@st.composite
def definitions(draw):
    """(SlurmCluster, [NodeSet]): a valid cluster with one or two parts drawn wide."""
    name = draw(st.sampled_from(["demo", "x-y", "c1"]))
    set_names = draw(st.sampled_from([["cpu"], ["cpu", "gpu"], [], ["cpu-1"], ["controller"], ["gpu"]]))
    parts = [("cluster", p) for p in CLUSTER_PARTS] + [(n, p) for n in set_names for p in NODESET_PARTS]
    wild = set(draw(st.lists(st.integers(min_value=0, max_value=len(parts) - 1), min_size=1, max_size=2)))
    specs = {"cluster": {"jail": {"storageClassName": "standard", "size": "1Gi"},
                         "controller": {"spool": {"size": "1Gi"}}}}
    for set_name in set_names:
        specs[set_name] = {"clusterRef": {"name": name}, "replicas": draw(st.integers(min_value=0, max_value=2))}
    for index, (owner, (path, wide, tame)) in enumerate(parts):
        if index in wild:
            _put(specs[owner], path, draw(wide))
        elif draw(st.integers(min_value=0, max_value=3)) == 0:
            _put(specs[owner], path, copy.deepcopy(draw(st.sampled_from(tame))))
    cluster = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SlurmCluster", "metadata": {"name": name},
               "spec": specs["cluster"]}
    nodesets = [{"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "NodeSet", "metadata": {"name": n},
                 "spec": specs[n]} for n in set_names]
    return cluster, nodesets


# --- the API server -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def api(k8s, apply_crds):
    apply_crds("property-test")
    core = client.CoreV1Api(k8s)
    namespace = "t-property-%s" % uuid.uuid4().hex[:6]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=namespace, labels={"soperator.dev/test": "true"})))
    yield k8s, dynamic.DynamicClient(k8s), namespace
    core.delete_namespace(namespace, propagation_policy="Background")


def resources_refused(k8s, namespace, docs):
    """The API server's answers to a dry-run create of each resource (strict fields): [(kind, message)]."""
    refusals = []
    for doc in docs:
        try:
            client.CustomObjectsApi(k8s).create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL[doc["kind"]], copy.deepcopy(doc), dry_run="All",
                field_validation="Strict")
        except ApiException as e:
            if e.status not in (400, 422):
                raise
            refusals.append((doc["kind"], e.body))
    return refusals


def rendered_refused(dyn, namespace, manifests):
    refusals = []
    for obj in manifests:
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            resource.create(body=obj, namespace=namespace, dry_run="All")
        except Exception as e:  # the dynamic client's error classes
            if getattr(e, "status", None) not in (400, 422):
                raise
            refusals.append("%s %s: %s" % (obj["kind"], obj["metadata"]["name"], getattr(e, "body", e)))
    return refusals


@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(definition=definitions())
def test_validator_and_api_server_agree(api, definition):
    k8s, dyn, namespace = api
    cluster, nodesets = definition
    for doc in [cluster] + nodesets:
        doc["metadata"]["namespace"] = namespace
    try:
        checked_cluster, checked = spec.validate_cluster_with_nodesets(copy.deepcopy(cluster), copy.deepcopy(nodesets))
        errors = None
    except SpecErrors as e:
        errors = e.errors
    refused = resources_refused(k8s, namespace, [cluster] + nodesets)
    if errors is not None:
        # The validator names fields of the resources.
        assert all(e.path and e.path.split(".")[0].split("[")[0] in ("spec", "metadata", "nodesets", "kind",
                                                                      "apiVersion") for e in errors), errors
        return
    assert refused == [], "the validator accepted what the API server refuses:\n%s\n%s" % (
        yaml.safe_dump([cluster] + nodesets), refused)
    manifests = render.render_cluster(checked_cluster, checked)
    problems = rendered_refused(dyn, namespace, manifests)
    assert problems == [], "the validator accepted a definition whose rendered objects the API server refuses:\n" \
                           "%s\n%s" % (yaml.safe_dump([cluster] + nodesets), "\n".join(problems))


@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(schedule=SCHEDULES)
def test_cron_schedules_are_read_as_the_api_server_reads_them(api, schedule):
    """The NCCL check's schedule: the validator (pattern, then config_rules.cron_problem) accepts exactly what the API
    server accepts in a CronJob."""
    k8s, dyn, namespace = api
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cron-probe", "namespace": namespace},
               "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}}
    try:
        dyn.resources.get(api_version="batch/v1", kind="CronJob").create(body=cronjob, namespace=namespace,
                                                                       dry_run="All")
        api_accepts = True
    except Exception as e:  # the dynamic client's error classes
        if getattr(e, "status", None) not in (400, 422):
            raise
        api_accepts = False
    try:
        spec.validate_cluster_with_nodesets(
            {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SlurmCluster", "metadata": {"name": "c"},
             "spec": {"jail": {"existingClaim": "jail"}, "healthChecks": {"nccl": {"schedule": schedule}}}}, [])
        validator_accepts = True
    except SpecErrors:
        validator_accepts = False
    # The validator may refuse more (its pattern takes a subset of cron's syntax), never less.
    assert api_accepts or not validator_accepts, "the API server refuses %r, the validator accepts it" % schedule
    if fields.matches(spec.schema.CRON_PATTERN, schedule):
        problem = config_rules.cron_problem(schedule)
        assert api_accepts == (problem is None), (schedule, problem)


CIDRS = ["10.0.0.0/8", "10.1.0.0/16", "10.0.0.1/8", "11.0.0.0/16", "10.1.2.3/32", "0.0.0.0/0", "fd00::/8",
         "fd00:1::/32", "10.0.0.0/33", "256.0.0.0/8"]
NETWORK_PEERS = st.fixed_dictionaries({}, optional={
    "podSelector": st.sampled_from([{}, {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                                    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]},
                                    {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["a"]}]},
                                    {"matchExpressions": [{"key": "app", "operator": "NotIn"}]}]),
    "namespaceSelector": st.sampled_from([{}, {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}]),
    "ipBlock": st.fixed_dictionaries({"cidr": st.sampled_from(CIDRS)},
                                     optional={"except": st.lists(st.sampled_from(CIDRS), max_size=2)}),
})


@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(peer=NETWORK_PEERS)
def test_network_peers_are_judged_as_the_api_server_judges_them(api, peer):
    """spec.networkPolicies' peers go into NetworkPolicies as they are: the validator accepts a peer exactly when
    the API server accepts both the SlurmCluster holding it and the NetworkPolicy rendered with it."""
    k8s, dyn, namespace = api
    from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
    from ansible_collections.soperator.slurm.plugins.module_utils.render.network import network_policies

    cluster = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SlurmCluster",
               "metadata": {"name": "c", "namespace": namespace},
               "spec": {"jail": {"existingClaim": "jail"}, "exporter": {"enabled": True},
                        "networkPolicies": {"exporterFrom": [peer]}}}
    try:
        spec.validate_cluster(copy.deepcopy(cluster))
        validator_accepts = True
    except SpecErrors:
        validator_accepts = False
    resource_accepted = resources_refused(k8s, namespace, [cluster]) == []
    # The NetworkPolicy the peer would make, rendered past the validator.
    plain = spec.validate_cluster(dict(cluster, spec=dict(cluster["spec"], networkPolicies={})))
    plain["spec"]["networkPolicies"]["exporterFrom"] = [copy.deepcopy(peer)]
    [policy] = network_policies(ClusterContext(plain, []))
    policy_accepted = rendered_refused(dyn, namespace, [policy]) == []
    assert validator_accepts == (resource_accepted and policy_accepted), (peer, resource_accepted, policy_accepted)


def test_the_generator_visits_both_sides():
    """A guard on the property's worth: the definitions drawn are neither all valid nor all invalid."""
    from hypothesis import find

    def valid(definition):
        try:
            spec.validate_cluster_with_nodesets(*copy.deepcopy(definition))
            return True
        except SpecErrors:
            return False

    find(definitions(), valid, settings=settings(database=None, max_examples=500))
    find(definitions(), lambda d: not valid(d), settings=settings(database=None, max_examples=500))
