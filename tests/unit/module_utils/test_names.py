import os
import re

from ansible_collections.soperator.slurm.plugins.module_utils import names


def test_collection_version_matches_galaxy(root):
    with open(os.path.join(root, "galaxy.yml")) as handle:
        version = re.search(r"^version:\s*(\S+)", handle.read(), re.M).group(1)
    assert names.COLLECTION_VERSION == version


def test_annotations_match_the_apply_adapter():
    from ansible_collections.soperator.slurm.plugins.module_utils.render import objects

    assert names.ANNOTATION_CREATE_ONLY == objects.CREATE_ONLY
    assert names.ANNOTATION_GENERATE == objects.GENERATE
    assert set([names.GENERATE_MUNGE_KEY, names.GENERATE_SSH_HOST_KEYS]) <= set(objects.GENERATORS)


def test_name_helpers():
    assert names.conf_server("demo", "hpc") == "demo-controller-0.demo-controller.hpc.svc:6817"
    assert names.worker_name("demo", "cpu") == "demo-cpu"
    assert names.default_image("worker", "1.2.3") == "soperator/slurm-worker:1.2.3"
    labels = names.labels("demo", "worker", "cpu")
    assert labels[names.LABEL_MANAGED_BY] == "soperator.slurm"
    assert labels[names.LABEL_CLUSTER] == "demo"
    assert labels[names.LABEL_PART_OF] == "soperator"


def test_pod_names_and_ordinals_as_a_statefulset_gives_them():
    assert names.pod_name("demo-cpu", 3) == "demo-cpu-3"
    assert names.controller_pod("demo") == "demo-controller-0"
    assert names.ordinal("demo-cpu-3", "demo-cpu") == 3 and names.ordinal("demo-cpu-0", "demo-cpu") == 0
    assert names.ordinal("demo-cpu-03", "demo-cpu") is None  # no StatefulSet names a pod so
    assert names.ordinal("demo-cpu-3", "demo") is None and names.ordinal("demo-cpu-x", "demo-cpu") is None
    assert names.statefulset_of("demo-cpu-3") == "demo-cpu"
    assert names.spool_claim_name("demo") == "spool-demo-controller-0"
    assert names.db_claim_name("demo") == "data-demo-accounting-db-0"
    assert names.slurmdbd_host("demo", "hpc") == "demo-accounting-0.demo-accounting.hpc.svc"


def test_the_drain_reasons_we_own_are_one_table_and_the_health_program_says_the_same(root):
    """The health program runs on the nodes, outside the collection: its copy of the prefixes must stay equal."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("soperator_health_names", os.path.join(
        root, "images", "worker", "soperator_health.py"))
    health = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(health)
    assert health.REASON_PREFIX == names.HEALTH_REASON_PREFIX
    assert health.NCCL_REASON_PREFIX == names.NCCL_REASON_PREFIX
    reasons = names.CONVERGE_REASONS + (names.HEALTH_REASON_PREFIX,)
    assert all(r.startswith(names.DRAIN_REASON_PREFIX) for r in reasons) and len(set(reasons)) == len(reasons)


def test_the_finalizer_and_the_crd_names_elsewhere_are_the_same(root):
    import yaml

    with open(os.path.join(root, "operator", "watches.yaml")) as handle:
        watches = yaml.safe_load(handle)
    assert set(w["finalizer"]["name"] for w in watches if w.get("finalizer")) == {names.FINALIZER}
    with open(os.path.join(root, "roles", "crds", "vars", "main.yml")) as handle:
        crds = yaml.safe_load(handle)["_crds_names"]
    assert crds == ["%s.%s" % (p, names.GROUP) for p in (names.CLUSTER_PLURAL, names.NODESET_PLURAL)]


def test_no_annotation_or_label_of_ours_is_spelled_outside_names(root):
    """Every ``slurm.soperator.dev/...`` string the collection's code uses comes from names.py (module docs and the
    generated CRDs aside)."""
    found = []
    for base in ("plugins", os.path.join("operator", "soperator_operator")):
        for folder, _dirs, files in os.walk(os.path.join(root, base)):
            for name in files:
                path = os.path.join(folder, name)
                if not name.endswith(".py") or path.endswith(os.path.join("module_utils", "names.py")):
                    continue
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                if os.sep + "modules" + os.sep in path:  # DOCUMENTATION, EXAMPLES, RETURN are documentation
                    text = text[text.find("\nfrom ", text.find('\nRETURN = r"""')):]
                code = re.sub(r'(?s)""".*?"""', "", text)  # docstrings
                code = re.sub(r"(?m)#.*$", "", code)  # comments
                found += ["%s: %s" % (os.path.relpath(path, root), m) for m in re.findall(
                    r"slurm\.soperator\.dev/[^\s\"']*", code)]
    assert found == []
