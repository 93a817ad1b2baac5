#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_nodes
short_description: Drain Slurm nodes before a NodeSet scales in, and delete the node records of removed pods
version_added: 0.1.0
description:
  - Runs C(scontrol) in the controller pod (O(namespace)/O(controller_pod), container O(container)) through
    the Kubernetes API. Worker pods are dynamic Slurm nodes named like their pods, C(<statefulset>-<ordinal>),
    and a StatefulSet removes its highest ordinals first.
  - "O(state=scaled_in): going from O(current_replicas) to O(replicas) pods, drains the victims (the top
    ordinals) with O(reason), resumes nodes of pods that stay which are still drained with exactly O(reason)
    (a scale-in that was cancelled), and returns in RV(removable) how many replicas may be removed now
    without killing a job. Counting stops at the first victim that is not removable: ordinal 2 cannot go
    while ordinal 3 still runs jobs."
  - "A reason that does not start with C(soperator:) belongs to an administrator: it is never overwritten,
    never resumed. A node an administrator drained counts as removable once it runs no job (see
    O(remove_admin_drained)); one with such a reason that is not drained, or still runs jobs, blocks."
  - "O(state=absent): deletes the Slurm node records (C(scontrol delete nodename=...)) of O(nodes) and, with
    O(statefulset) and O(replicas), of every node of that StatefulSet with an ordinal >= O(replicas), so no
    ghost node stays in C(sinfo). A node whose pod still exists is kept (its slurmd would register it
    again), and so is a node that still runs jobs (a later run deletes it)."
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.k8s_auth
attributes:
  check_mode:
    support: full
    details:
      - Reports what would be drained, resumed or deleted, and the RV(removable) count the real run would
        return at once (an idle node is drained as soon as it is drained), without running any change.
  diff_mode:
    support: full
    details:
      - Per changed node, its state and reason before and after.
  idempotent:
    support: full
options:
  state:
    description:
      - V(scaled_in) prepares a scale-in from O(current_replicas) to O(replicas) (and undoes our drains of
        pods that stay); V(absent) deletes node records of pods that are gone.
    type: str
    choices: [scaled_in, absent]
    default: scaled_in
  namespace:
    description:
      - Namespace of the cluster's pods.
    type: str
    required: true
  controller_pod:
    description:
      - Name of the pod running C(slurmctld), C(<cluster>-controller-0).
    type: str
    required: true
  container:
    description:
      - Container of O(controller_pod) that has C(scontrol).
    type: str
    default: slurmctld
  statefulset:
    description:
      - Name of the NodeSet's StatefulSet, C(<cluster>-<nodeset>). Its pods, and Slurm nodes, are
        C(<statefulset>-<ordinal>).
      - Required with O(state=scaled_in).
    type: str
  current_replicas:
    description:
      - The StatefulSet's replicas now (its live C(spec.replicas)). Required with O(state=scaled_in).
    type: int
  replicas:
    description:
      - The desired replicas. Required with O(state=scaled_in); with O(state=absent) and O(statefulset),
        nodes of ordinals >= this are deleted.
    type: int
  nodes:
    description:
      - With O(state=absent), names of Slurm nodes (pod names) to delete.
    type: list
    elements: str
    default: []
  reason:
    description:
      - Drain reason written on victims. Must start with C(soperator:), the mark of the operator's own
        drains.
    type: str
    default: "soperator: scale-in"
  drain_timeout:
    description:
      - Time after which a victim drained by us counts as removable even though jobs still run on it
        (the NodeSet's C(spec.drainTimeout)). Measured from the drain's time recorded by Slurm, so it spans
        several runs. Those jobs end when the pod is removed.
      - Seconds, or a duration such as C(30m), C(1h30m) or C(90s).
      - Unset, a job is never given up.
    type: str
  remove_admin_drained:
    description:
      - Whether a victim drained by an administrator (a reason without C(soperator:)) that runs no job counts
        as removable. Its reason is never changed either way.
    type: bool
    default: true
  wait:
    description:
      - With O(state=scaled_in), poll until every victim is removable, or O(wait_timeout).
      - Reaching O(wait_timeout) is not an error; RV(timed_out) says so and RV(removable) counts what is
        ready.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait with O(wait).
    type: int
    default: 120
  wait_sleep:
    description:
      - Seconds between two looks at the nodes with O(wait).
    type: int
    default: 5
seealso:
  - module: soperator.slurm.apply_manifests
notes:
  - Needs the C(kubernetes) Python library on the host running the module, and RBAC to C(create) on
    C(pods/exec) and C(get) on C(pods) in O(namespace).
  - Needs dynamic Slurm nodes (C(slurmd -Z)) for O(state=absent); Slurm >= 24.05.
"""

EXAMPLES = r"""
- name: Drain the pods a scale-in from 4 to 2 removes
  soperator.slurm.slurm_nodes:
    namespace: slurm
    controller_pod: demo-controller-0
    statefulset: demo-cpu
    current_replicas: 4
    replicas: 2
    drain_timeout: 1800
  register: scale

- name: Remove only what is drained (replicas = 4 - removable)
  ansible.builtin.debug:
    msg: "apply replicas={{ scale.replicas }}; still waiting for {{ scale.waiting }}"

- name: After the StatefulSet shrank and its pods are gone, delete their node records
  soperator.slurm.slurm_nodes:
    state: absent
    namespace: slurm
    controller_pod: demo-controller-0
    statefulset: demo-cpu
    replicas: "{{ scale.replicas }}"
"""

RETURN = r"""
changed:
  description: Whether a node was (or in check mode would be) drained, resumed or deleted.
  returned: always
  type: bool
removable:
  description: How many of the victims may be removed now, counted from the highest ordinal.
  returned: when O(state=scaled_in)
  type: int
  sample: 1
replicas:
  description:
    - The replicas that are safe to apply now, C(max(replicas, current_replicas - removable)).
  returned: when O(state=scaled_in)
  type: int
  sample: 3
victims:
  description: The nodes a scale-in from O(current_replicas) to O(replicas) removes, highest ordinal first.
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: [demo-cpu-3, demo-cpu-2]
drained:
  description: Nodes drained by this run.
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: [demo-cpu-3]
resumed:
  description: Nodes of pods that stay whose scale-in drain (exactly O(reason)) was undone.
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: []
waiting:
  description: Victims still running jobs.
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: [demo-cpu-3]
admin_drained:
  description: Victims carrying someone else's reason (left untouched).
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: []
expired:
  description: Victims counted removable because their drain is older than O(drain_timeout).
  returned: when O(state=scaled_in)
  type: list
  elements: str
  sample: []
timed_out:
  description: Whether O(wait) gave up at O(wait_timeout).
  returned: when O(state=scaled_in)
  type: bool
nodes:
  description: The plan per victim, highest ordinal first.
  returned: when O(state=scaled_in)
  type: list
  elements: dict
  contains:
    name:
      description: Slurm node (and pod) name.
      type: str
    action:
      description: What the node needs.
      type: str
      choices: [drain, wait, ready_to_remove, blocked_by_admin]
    removable:
      description: Whether removing its pod now loses no job (or its drain expired).
      type: bool
    expired:
      description: Removable only because its drain is older than O(drain_timeout).
      type: bool
    present:
      description: Whether Slurm knows the node.
      type: bool
    busy:
      description: Whether jobs run on it.
      type: bool
    state:
      description: Slurm state with its flags, for example C(MIXED+DRAIN+DYNAMIC_NORM).
      type: str
    reason:
      description: Slurm's reason for the node's state, without the C([user@time]) suffix.
      type: str
deleted:
  description: Node records deleted (or in check mode to delete).
  returned: when O(state=absent)
  type: list
  elements: str
  sample: [demo-cpu-3, demo-cpu-2]
busy:
  description: Nodes not deleted because jobs still run on them.
  returned: when O(state=absent)
  type: list
  elements: str
  sample: []
absent:
  description: Nodes Slurm does not know (nothing to do).
  returned: when O(state=absent)
  type: list
  elements: str
  sample: []
pods_present:
  description: Nodes not deleted because their pod still exists.
  returned: when O(state=absent)
  type: list
  elements: str
  sample: []
diff:
  description: Per changed node, C(state) and C(reason) before and after.
  returned: when diff mode is on
  type: dict
  sample: {before: {demo-cpu-3: {state: MIXED+DYNAMIC_NORM, reason: null}},
           after: {demo-cpu-3: {state: MIXED+DRAIN+DYNAMIC_NORM, reason: "soperator: scale-in"}}}
command:
  description: On failure, the Slurm command that failed, with its C(rc), C(stdout) and C(stderr).
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC,
    configuration,
    require_kubernetes,
)
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import (
    KubernetesExecTransport,
    Slurm,
    SlurmError,
    remove,
    scale_in,
)


def argument_spec():
    spec = dict(
        state=dict(type="str", choices=["scaled_in", "absent"], default="scaled_in"),
        namespace=dict(type="str", required=True),
        controller_pod=dict(type="str", required=True),
        container=dict(type="str", default="slurmctld"),
        statefulset=dict(type="str"),
        current_replicas=dict(type="int"),
        replicas=dict(type="int"),
        nodes=dict(type="list", elements="str", default=[]),
        reason=dict(type="str", default=names.REASON_SCALE_IN),
        drain_timeout=dict(type="str"),
        remove_admin_drained=dict(type="bool", default=True),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=120),
        wait_sleep=dict(type="int", default=5),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def transport(params):
    """How the module reaches scontrol (the tests replace this with a local transport)."""
    from kubernetes import client

    core_v1 = client.CoreV1Api(client.ApiClient(configuration(params)))
    return KubernetesExecTransport(core_v1, params["namespace"], params["controller_pod"], params["container"])


def _seconds(drain_timeout):
    return None if drain_timeout is None else durations.seconds(drain_timeout)


def run(params, reach, check_mode):
    slurm = Slurm(reach)
    if params["state"] == "absent":
        return remove(slurm, params["nodes"], params["statefulset"], params["replicas"],
                      pods_present=getattr(reach, "pods_present", None), check_mode=check_mode)
    return scale_in(slurm, params["statefulset"], params["current_replicas"], params["replicas"],
                    params["reason"], drain_timeout=_seconds(params["drain_timeout"]),
                    remove_admin_drained=params["remove_admin_drained"], check_mode=check_mode,
                    wait=params["wait"], wait_timeout=params["wait_timeout"], wait_sleep=params["wait_sleep"])


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(), supports_check_mode=True,
        required_if=[("state", "scaled_in", ("statefulset", "current_replicas", "replicas"))])
    require_kubernetes(module)
    try:
        result = run(module.params, transport(module.params), module.check_mode)
    except SlurmError as e:
        module.fail_json(msg=e.msg, **e.details)
    except KubernetesError as e:
        module.fail_json(msg=e.msg, **e.details)
    except ValueError as e:
        module.fail_json(msg="drain_timeout: %s" % e if "duration" in str(e) else str(e))
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
