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
