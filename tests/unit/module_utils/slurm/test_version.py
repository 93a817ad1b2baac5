"""slurm/version.py: the Slurm release the collection is written for, what it does keyed by release, and each
workaround switched where it is made by the field that says why (a release without the quirk turns it off there)."""

import ast
import os

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.plan import elastic, model
from ansible_collections.soperator.slurm.plugins.module_utils.render import topology
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import version

VERSION_PY = os.path.join(os.path.dirname(os.path.abspath(version.__file__)), "version.py")


def test_the_collection_is_written_for_the_release_the_images_ship():
    assert version.SLURM is version.RELEASES["24.11"] and version.SLURM.name == "24.11"
    # Every behaviour recorded for 24.11 was measured on it (docs/slurm-24.11-findings.md, tests/slurm): all hold.
    assert all(getattr(version.SLURM, field) is True for field in version.Release._fields if field != "name")


def test_every_behaviour_says_why_and_who_acts_on_it():
    """A field without its comment (the finding, the callers) would be a switch nobody can judge at an upgrade."""
    with open(VERSION_PY, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    tree = ast.parse("\n".join(lines))
    release = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Release")
    for node in release.body:
        if isinstance(node, ast.AnnAssign) and node.target.id != "name":
            above = lines[node.lineno - 2].strip()
            assert above.startswith("#") and ")" in above, "Release.%s: no comment above it" % node.target.id


def test_a_stale_reason_holds_nothing():
    node = {"drain": False, "down": False, "reason": "soperator: scale-in"}
    assert not version.reason_holds(node)
    assert version.reason_holds(dict(node, drain=True)) and version.reason_holds(dict(node, down=True))


def nodeset(**spec):
    return {"apiVersion": names.API_VERSION, "kind": names.NODESET_KIND,
            "metadata": {"name": "cpu", "namespace": "hpc", "uid": "u"}, "spec": dict({"drainTimeout": "30m"}, **spec)}


def test_a_release_without_a_quirk_turns_its_workaround_off(monkeypatch):
    """Each workaround asks its field where it is made: with a release that does not have the quirk (a row that is
    not measured: made up here), the workaround is off and the code does what it would without it."""
    plain = version.SLURM._replace(
        name="test", jobs_outlive_their_slurmd=False, power_up_needs_a_new_slurmd=False,
        removing_a_busy_node_kills_its_job=False, slurmd_trusts_its_slurm_user_only=False,
        batch_launch_waits_for_the_periodic_check=False, block_needs_known_nodes=False,
        base_block_size_from_the_first_block=False)
    block = topology.render_topology_conf("block", ["demo-gpu-0", "demo-gpu-1"], {"demo-gpu-0": ["nvl0"]})
    assert "BlockSizes=1" in block
    spec = {"topology": {"plugin": "block"}}
    assert [e.path for e in specs._block_topology_rules(spec, [nodeset(replicas=2)])] == ["spec.topology.plugin"]
    p = model.Draft()
    p.give_up_node(nodeset(), "demo-cpu-1", "scale-in", "spec.drainTimeout", "30m", 0, down_reason="r")
    assert p.down == {"r": ["demo-cpu-1"]}
    pod = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert elastic._left_from_before(pod, {"slurmd_start": 2000000000})
    for module in (topology, specs, model, elastic):
        monkeypatch.setattr(module, "SLURM", plain)
    assert "BlockSizes" not in topology.render_topology_conf("block", ["demo-gpu-0", "demo-gpu-1"],
                                                             {"demo-gpu-0": ["nvl0"]})
    assert specs._block_topology_rules(spec, [nodeset(replicas=2)]) == []
    p = model.Draft()
    p.give_up_node(nodeset(), "demo-cpu-1", "scale-in", "spec.drainTimeout", "30m", 0, down_reason="r")
    assert p.down == {} and [g["node"] for g in p.give_up] == ["demo-cpu-1"]
    assert not elastic._left_from_before(pod, {"slurmd_start": 2000000000})
