"""The Python validator over the shared corpus (tests/corpus/README.md); the integration test applies it for real."""

import os

import corpus
import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render


def _check(docs):
    cluster, nodesets = corpus.split(docs)
    if cluster is None:
        for nodeset in nodesets:
            spec.validate_nodeset(nodeset)
        return
    spec.validate_cluster_with_nodesets(cluster, nodesets)
    render.render_cluster(cluster, nodesets)


def _ids(paths):
    return [os.path.basename(p) for p in paths]


def test_corpus_is_not_empty():
    assert len(corpus.files("valid")) >= 5
    assert len(corpus.files("invalid")) >= 40


@pytest.mark.parametrize("path", corpus.files("valid"), ids=_ids(corpus.files("valid")))
def test_valid(path):
    docs, expect = corpus.load(path)
    assert expect is None
    _check(docs)


@pytest.mark.parametrize("path", corpus.files("invalid"), ids=_ids(corpus.files("invalid")))
def test_invalid(path):
    docs, expect = corpus.load(path)
    assert set(expect) == {"path", "message", "api"} and expect["api"] in ("reject", "accept")
    with pytest.raises(SpecErrors) as info:
        _check(docs)
    found = [(e.path, e.message) for e in info.value.errors]
    assert any(p == expect["path"] and expect["message"] in m for p, m in found), found
