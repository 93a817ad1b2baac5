"""Which pod the jail connection enters a jail from (plan/jail_access.py)."""

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import jail_access


def pod(name, component=names.COMPONENT_LOGIN, ready=True, running=True, phase="Running", deleting=False,
        cluster="demo", container="sshd", managed_by=names.MANAGED_BY):
    labels = {names.LABEL_INSTANCE: cluster, names.LABEL_COMPONENT: component, names.LABEL_MANAGED_BY: managed_by}
    md = {"name": name, "labels": labels}
    if deleting:
        md["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": md, "status": {
        "phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": container, "state": {"running": {}} if running else {"waiting": {}}}]}}


def admin(name="demo-jail-admin-x7k2p", managed_by=names.MANAGED_BY_JAIL_CONNECTION, **kw):
    return pod(name, names.COMPONENT_JAIL_ADMIN, container="jail", managed_by=managed_by, **kw)


def test_the_first_ready_login_pod_by_ordinal():
    choice = jail_access.choose("demo", [pod("demo-login-10"), pod("demo-login-2"), pod("demo-login-0", ready=False)])
    assert (choice.action, choice.pod, choice.container) == (jail_access.EXEC, "demo-login-2", "sshd")


def test_a_login_pod_going_or_not_running_sshd_is_not_entered():
    pods = [pod("demo-login-0", deleting=True), pod("demo-login-1", running=False), admin()]
    choice = jail_access.choose("demo", pods)
    assert (choice.action, choice.pod, choice.container) == (jail_access.EXEC, "demo-jail-admin-x7k2p", "jail")


def test_other_clusters_and_lookalikes_are_ignored():
    pods = [pod("other-login-0", cluster="other"), pod("demo-login-x"), pod("demo-cpu-0", names.COMPONENT_WORKER),
            admin(managed_by=names.MANAGED_BY)]
    assert jail_access.choose("demo", pods).action == jail_access.MAKE


def test_an_administration_pod_starting_is_waited_for_and_a_finished_one_replaced():
    assert jail_access.choose("demo", [admin(ready=False, phase="Pending")]).action == jail_access.WAIT
    for phase in ("Succeeded", "Failed"):
        choice = jail_access.choose("demo", [admin(ready=False, running=False, phase=phase)])
        assert choice.action == jail_access.MAKE and "no login pod of demo is ready" in choice.why
    assert jail_access.choose("demo", []).action == jail_access.MAKE
