from ansible_collections.soperator.slurm.plugins.module_utils import plan, render
from resources import load_example


def _live(kind, name, api="v1", cluster="demo", managed=True, namespace="slurm"):
    labels = {"slurm.soperator.dev/cluster": cluster}
    if managed:
        labels["app.kubernetes.io/managed-by"] = "soperator.slurm"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_prune_candidates():
    rendered = render.render_cluster(*load_example("cpu-cluster.yaml"))
    live = [dict(o) for o in rendered] + [
        _live("StatefulSet", "demo-old", "apps/v1"),
        _live("Job", "demo-populate-jail-0123456789", "batch/v1"),
        _live("Secret", "demo-stale"),
        _live("PersistentVolumeClaim", "spool-demo-controller-0"),
        _live("StatefulSet", "other-cpu", "apps/v1", cluster="other"),
        _live("StatefulSet", "demo-handmade", "apps/v1", managed=False),
        _live("Pod", "demo-cpu-0"),
    ]
    names = [o["metadata"]["name"] for o in plan.prune_candidates(rendered, live)]
    assert names == ["demo-old", "demo-populate-jail-0123456789"]  # sorted by (group, kind, namespace, name)
    names = [o["metadata"]["name"] for o in plan.prune_candidates(
        rendered, live, deletion_policy={"jail": "Delete", "secrets": "Delete"})]
    assert names == ["spool-demo-controller-0", "demo-stale", "demo-old", "demo-populate-jail-0123456789"]
    assert plan.prune_candidates([], live) == []


def test_teardown_candidates():
    rendered = render.render_cluster(*load_example("cpu-cluster.yaml"))
    kept = plan.teardown_candidates(rendered, "demo")
    kinds = set(o["kind"] for o in kept)
    assert "Secret" not in kinds and "PersistentVolumeClaim" not in kinds
    assert len(kept) == len(rendered) - 3
    everything = plan.teardown_candidates(rendered, "demo", {"jail": "Delete", "secrets": "Delete"})
    assert len(everything) == len(rendered)


def test_scale_in_victims():
    assert plan.scale_in_victims(5, 3, "demo-cpu") == ["demo-cpu-4", "demo-cpu-3"]
    assert plan.scale_in_victims(2, 0, "demo-cpu") == ["demo-cpu-1", "demo-cpu-0"]
    assert plan.scale_in_victims(2, -1, "demo-cpu") == ["demo-cpu-1", "demo-cpu-0"]
    assert plan.scale_in_victims(2, 2, "demo-cpu") == []
    assert plan.scale_in_victims(2, 4, "demo-cpu") == []


def test_drain_reasons():
    assert plan.drain_reason() == "soperator: scale-in"
    assert plan.drain_reason("maintenance") == "soperator: maintenance"
    assert plan.is_operator_reason("soperator: scale-in")
    assert plan.is_operator_reason(" soperator: scale-in [root@2024-06-01T10:00:00]")
    assert not plan.is_operator_reason("bad dimm, ticket 42")
    assert not plan.is_operator_reason("")
    assert not plan.is_operator_reason(None)
