"""What the planner decides reaches the renderer as values: replicas per NodeSet, maintenance now or not."""

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster


def replicas_of(manifests):
    return dict((m["metadata"]["name"], m["spec"]["replicas"]) for m in manifests if m["kind"] == "StatefulSet")


def test_the_decided_replicas_are_rendered_and_the_nodeset_is_left_as_it_is():
    nodeset = make_nodeset("cpu", {"replicas": 2})
    shown = replicas_of(render_cluster(make_cluster(), [nodeset], replicas={"cpu": 5}))
    assert shown["demo-cpu"] == 5 and nodeset["spec"]["replicas"] == 2
    assert replicas_of(render_cluster(make_cluster(), [nodeset]))["demo-cpu"] == 2


def test_maintenance_is_rendered_only_once_decided():
    cluster = make_cluster({"maintenance": True})
    nodeset = make_nodeset("cpu", {"replicas": 2})
    draining = render_cluster(cluster, [nodeset], maintenance=False)
    assert replicas_of(draining)["demo-cpu"] == 2 and any(m["kind"] == "Job" for m in draining)
    down = render_cluster(cluster, [nodeset])
    assert set(replicas_of(down).values()) == {0} and not any(m["kind"] == "Job" for m in down)
