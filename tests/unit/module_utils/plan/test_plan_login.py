"""login.py alone: the login pods' rolling update waits for the users logged in, or the grace period."""

from planning import NOW, REV, context, pod, sts

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan import login, model

NEW = "rev-2"


def desired(template_hash="h"):
    return {"kind": "StatefulSet", "metadata": {"name": "demo-login", "annotations": {
        names.ANNOTATION_TEMPLATE_HASH: template_hash}}}


def planned(live=None, pods=None, sessions=None, now=NOW, template_hash="h", **spec):
    ctx = context(spec, observed={"statefulsets": {"demo-login": live} if live else {}, "pods": pods or {},
                                  "login_sessions": sessions or {}}, now=now)
    p = model.Draft()
    p.manifests = [desired(template_hash)]
    login.plan_login(p, ctx)
    return p


def since(p):
    return p.manifests[0]["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_SINCE]


def changed(minutes_ago):
    live = sts("demo-login", 1, revision=NEW, annotations={
        names.ANNOTATION_TEMPLATE_SINCE: durations.iso(NOW - 60 * minutes_ago)})
    return live, {"demo-login-0": pod("demo-login-0", REV)}


def test_the_template_since_stamp_is_kept_while_the_template_is_the_same():
    live, pods = changed(5)
    assert since(planned(live, pods)) == durations.iso(NOW - 300)
    assert since(planned(live, pods, template_hash="other")) == durations.iso(NOW)
    assert since(planned()) == durations.iso(NOW)


def test_an_outdated_login_pod_nobody_uses_is_replaced():
    live, pods = changed(5)
    p = planned(live, pods, {"demo-login-0": 0})
    assert p.delete_pods == [("demo-login-0", "uid-demo-login-0")] and p.login_outdated == 1


def test_open_sessions_defer_the_replacement_without_keeping_the_cluster_from_ready():
    live, pods = changed(5)
    p = planned(live, pods, {"demo-login-0": 2})
    assert not p.delete_pods and not p.pending
    assert p.deferred == ["login: demo-login-0 has 2 open session(s); replaced when they end or at %s"
                          % durations.iso(NOW - 300 + 1800)]


def test_the_grace_period_ends_the_wait():
    live, pods = changed(31)
    assert planned(live, pods, {"demo-login-0": 2}).delete_pods == [("demo-login-0", "uid-demo-login-0")]


def test_maintenance_replaces_no_login_pod():
    live, pods = changed(31)
    p = planned(live, pods, {"demo-login-0": 0}, maintenance=True)
    assert not p.delete_pods and p.login_outdated is None


def test_outdated_login_pods_are_those_of_another_revision():
    live, pods = changed(1)
    pods["demo-login-1"] = pod("demo-login-1", NEW)
    assert login.outdated_login_pods("demo", {"demo-login": live}, pods) == ["demo-login-0"]
    assert login.outdated_login_pods("demo", {}, pods) == []
