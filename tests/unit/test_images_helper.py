"""The worker image's image cache helper (images/worker/soperator_images.py): its pure parts, and the cache's rules
(one pull per digest, a hit touches, nothing left after a failure, eviction of what no container holds) with the
registry and the unpacker replaced by fakes. tests/slurm/test_containers.py runs it with skopeo, umoci and a
registry."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("soperator_images",
                                               os.path.join(ROOT, "images", "worker", "soperator_images.py"))
images = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(images)

AMD64 = ("linux", "amd64")


@pytest.mark.parametrize("ref,expected", [
    ("docker.io/library/ubuntu:22.04", ("docker.io/library/ubuntu", "22.04", None)),
    ("127.0.0.1:5000/team/app", ("127.0.0.1:5000/team/app", "latest", None)),
    ("reg.io/a@sha256:" + "0" * 64, ("reg.io/a", None, "sha256:" + "0" * 64)),
])
def test_references_the_plugin_normalised(ref, expected):
    assert images.parse_reference(ref) == expected


@pytest.mark.parametrize("ref", ["ubuntu", "reg.io/A", "reg.io/a:", "reg.io/a@sha256:12", "", "reg.io/a b"])
def test_anything_else_is_refused(ref):
    with pytest.raises(images.ImageError):
        images.parse_reference(ref)


def test_sizes():
    assert images.parse_size("50G") == 50 << 30
    assert images.parse_size("512Mi") == 512 << 20
    assert images.parse_size("1048576") == 1 << 20
    with pytest.raises(ValueError):
        images.parse_size("lots")


def test_an_index_resolves_to_this_nodes_platform_and_names_what_it_has_otherwise():
    index = json.dumps({"mediaType": images.MANIFEST_LIST_TYPES[0], "manifests": [
        {"digest": "sha256:" + "a" * 64, "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": "sha256:" + "b" * 64, "platform": {"os": "linux", "architecture": "amd64"}}]})
    assert images.choose_manifest(index, AMD64) == "sha256:" + "b" * 64
    with pytest.raises(images.ImageError, match=r"no linux/s390x image \(it has: linux/amd64, linux/arm64\)"):
        images.choose_manifest(index, ("linux", "s390x"))
    assert images.choose_manifest(json.dumps({"schemaVersion": 2, "config": {}, "layers": []}), AMD64) is None


def test_skopeos_message_without_its_restatement_of_the_reference():
    # recorded from skopeo 1.18 (Debian trixie) against the tests' registry
    stderr = ('time="2026-11-28T22:21:26Z" level=fatal msg="Error parsing image name \\"docker://127.0.0.1:5123/'
              'test/nothere:1\\": reading manifest 1 in 127.0.0.1:5123/test/nothere: manifest unknown"\n')
    assert images.skopeo_message(stderr) == "reading manifest 1 in 127.0.0.1:5123/test/nothere: manifest unknown"
    assert images.skopeo_message("plain failure\n") == "plain failure"


def test_eviction_order_oldest_first_never_kept_ones():
    entries = [{"digest": "c", "size": 10, "last_used": 3}, {"digest": "a", "size": 10, "last_used": 1},
               {"digest": "b", "size": 10, "last_used": 2}]
    assert images.eviction_order(entries, keep={"a"}) == ["b", "c"]
    assert images.eviction_order(entries, keep=set()) == ["a", "b", "c"]


def test_result_lines_leave_out_what_a_line_cannot_carry():
    lines = images.result_lines("sha256:" + "c" * 64, "/cache/images/c/rootfs",
                                {"Env": ["PATH=/bin", "BAD=a\nb", "=x", 3], "WorkingDir": "/srv"}, None)
    assert lines == ["digest sha256:" + "c" * 64, "rootfs /cache/images/c/rootfs", "workdir /srv", "env PATH=/bin",
                     "cached"]


class FakeTools:
    """A registry of one image and an unpacker writing one file; counts what it was asked."""

    def __init__(self, arch="amd64", fail_unpack=False):
        self.raw = json.dumps({"schemaVersion": 2, "config": {"digest": "x"}, "layers": []}).encode()
        self.digest = "sha256:" + hashlib.sha256(self.raw).hexdigest()
        self.arch, self.fail_unpack, self.copies = arch, fail_unpack, 0

    def raw_manifest(self, name, tag, digest):
        return self.raw

    def copy(self, name, digest, layout):
        self.copies += 1
        os.makedirs(os.path.join(layout, "blobs", "sha256"))
        config = json.dumps({"os": "linux", "architecture": self.arch, "config": {"Env": ["A=1"]}}).encode()
        manifest = json.dumps({"config": {"digest": "sha256:" + hashlib.sha256(config).hexdigest()}}).encode()
        for blob in (config, manifest):
            with open(os.path.join(layout, "blobs", "sha256", hashlib.sha256(blob).hexdigest()), "wb") as f:
                f.write(blob)
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump({"manifests": [{"digest": "sha256:" + hashlib.sha256(manifest).hexdigest()}]}, f)

    def unpack(self, layout, bundle):
        os.makedirs(os.path.join(bundle, "rootfs"))
        with open(os.path.join(bundle, "rootfs", "file"), "wb") as f:
            f.write(b"x" * 8192)
        if self.fail_unpack:
            raise images.ImageError("cannot unpack it: broken layer")


def test_a_pull_then_hits_and_the_counters(tmp_path):
    cache, tools, log = images.Cache(str(tmp_path)), FakeTools(), []
    first = images.pull(cache, tools, "reg.io/a:1", 1 << 30, set(), log.append, want=AMD64)
    second = images.pull(cache, tools, "reg.io/a:1", 1 << 30, set(), log.append, want=AMD64)
    assert tools.copies == 1 and first[-1].startswith("pulled ") and second[-1] == "cached"
    assert "env A=1" in first and first[0] == "digest " + tools.digest
    assert cache.stats() == {"pulls": 1, "hits": 1, "evictions": 0, "failures": 0}
    assert os.listdir(cache.tmp) == []


@pytest.mark.parametrize("tools,cause", [(FakeTools(arch="arm64"), "is an image for linux/arm64"),
                                         (FakeTools(fail_unpack=True), "broken layer")])
def test_a_failed_pull_leaves_nothing(tmp_path, tools, cause):
    cache = images.Cache(str(tmp_path))
    with pytest.raises(images.ImageError, match=cause):
        images.pull(cache, tools, "reg.io/a:1", 1 << 30, set(), print, want=AMD64)
    assert os.listdir(cache.tmp) == []
    assert [n for n in os.listdir(cache.images) if not n.endswith(".lock")] == []


def test_an_image_larger_than_the_cache_is_refused(tmp_path):
    cache = images.Cache(str(tmp_path))
    with pytest.raises(images.ImageError, match="more than this node's image cache may hold"):
        images.pull(cache, FakeTools(), "reg.io/a:1", 1024, set(), print, want=AMD64)
    assert os.listdir(cache.tmp) == []


def test_eviction_spares_images_a_container_holds(tmp_path):
    cache = images.Cache(str(tmp_path))
    for n, (name, used) in enumerate((("old", 100), ("held", 200), ("new", 300))):
        entry = cache.entry("sha256:%064d" % n)
        os.makedirs(os.path.join(entry, "rootfs"))
        with open(os.path.join(entry, "image.json"), "w") as f:
            json.dump({"size": 100, "references": [name]}, f)
        cache.touch("sha256:%064d" % n)
        os.utime(os.path.join(entry, "last-used"), (used, used))
    held = os.open(cache.entry("sha256:%064d" % 1) + ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_SH)  # a running container's lock
    try:
        cache.evict(150, set(), print)
    finally:
        os.close(held)
    # oldest first: "old" goes, "held" is skipped, "new" goes too before the cache is within its limit
    assert [e["references"][0] for e in cache.entries()] == ["held"]
    assert cache.stats()["evictions"] == 2
