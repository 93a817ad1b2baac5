#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_cluster
short_description: Converge a Slurm cluster in Kubernetes from its SlurmCluster and NodeSets, or tear it down
version_added: 0.2.0
description:
  - "Reads the live SlurmCluster O(namespace)/O(name) and its NodeSets (or applies O(definition) first), the
    cluster's StatefulSets and pods, and Slurm's node table (C(scontrol show node) in the controller pod), then
    does in one process what the cluster needs: drains the Slurm nodes of pods about to go, applies every
    rendered object with server-side apply and prunes what is no longer rendered, deletes the Slurm records of
    pods that are gone, and writes the status (C(Ready), C(Degraded), C(phase), C(observedGeneration); a
    NodeSet's replicas, selector and Slurm node counts)."
  - "No running job is killed: a NodeSet that shrinks, a NodeSet being removed and C(maintenance: true) drain
    their nodes first (reasons C(soperator: scale-in), C(soperator: maintenance)) and remove only pods whose
    nodes are idle, or drained for longer than the NodeSet's C(drainTimeout) (with C(onDrainTimeout: Proceed),
    the default; a C(DrainTimeoutExpired) Event on the NodeSet names the node and its jobs). Drains with any
    other reason belong to an administrator and are never touched. What needs slurmctld while it does not answer is left
    as it is and reported in RV(pending); everything else is still applied."
  - "Worker StatefulSets are C(OnDelete): a changed pod template (image, resources, C(killWait), placement, ...)
    replaces no pod by itself. Each outdated worker is drained (reason C(soperator: update)), its pod deleted once
    its node is idle, and its node resumed when the new pod's slurmd answers; at most the NodeSet's
    C(updateStrategy.maxUnavailable) at a time. Running jobs are waited for as long as they run (the NodeSet's
    C(status.rollingUpdate) names them), unless C(updateStrategy.proceedAfter) is set: then the pod is replaced that
    long after its drain, with a C(DrainTimeoutExpired) Event on the NodeSet naming the node and its jobs."
  - "A changed slurm.conf is first parsed by the running controller's own C(scontrol) (and its plugins looked up
    in the image's Slurm build): a refusal fails before anything is written, naming the field."
  - "A NodeSet that fails validation is left as it is and marked C(Degraded); the others converge. An invalid
    SlurmCluster (or, with O(definition), any invalid document) fails before anything is written, naming the
    field in RV(field)."
  - "Before anything is written, every object the pass would write is sent to the API server as a server-side
    dry run (C(dryRun=All)), and a refusal fails the pass as a whole, naming the SlurmCluster's or NodeSet's field
    the refused object was rendered from (a NodeSet's own objects refused only mark that NodeSet C(Degraded)).
    With O(definition), the documents and every object rendered from them are dry-run before the first of them is
    written (only a missing namespace is created first)."
  - "A generated key Secret (munge key, SSH host keys, JWT key, database password) that is missing while a pod of
    the cluster that mounts it exists is not generated anew: the pass fails (reason C(DataMissing), condition
    C(Degraded) with reason C(SecretMissing)) until it is restored, or until C(spec.maintenance) stopped every pod."
  - Runs in the Ansible controller's process when the task's connection is local (no module process to start),
    otherwise as a module on the target.
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.k8s_auth
attributes:
  check_mode:
    support: full
    details:
      - Applies are server-side dry runs; no Slurm node is drained, resumed or deleted and no status is
        written. A SlurmCluster that does not exist yet is only validated.
  diff_mode:
    support: full
    details:
      - The objects that change, normalized, Secret values hidden.
  idempotent:
    support: full
    details:
      - A second run with nothing under way changes nothing (no request writes).
options:
  state:
    description:
      - V(present) converges the cluster; V(absent) tears it down (see O(delete_volumes), O(delete_secrets),
        O(delete_database)).
    type: str
    choices: [present, absent]
    default: present
  name:
    description:
      - Name of the SlurmCluster. Not needed with O(definition).
    type: str
  namespace:
    description:
      - Namespace of the SlurmCluster; the default for O(definition) documents without one.
    type: str
  definition:
    description:
      - A SlurmCluster and its NodeSets (dicts as in a manifest file). They are validated as a whole, then
        applied (with the namespace) before the cluster is converged.
      - NodeSets of this cluster that exist but are not in the definition are drained and removed (see
        O(prune_nodesets)).
      - Any document that is not a C(slurm.soperator.dev/v1alpha1) SlurmCluster or NodeSet, or a NodeSet that
        references another cluster, is an error.
    type: list
    elements: dict
  prune_nodesets:
    description:
      - With O(definition), remove the cluster's NodeSets that the definition no longer holds (after draining
        them).
    type: bool
    default: true
  resources_only:
    description:
      - With O(definition), only apply the SlurmCluster and its NodeSets (and delete removed NodeSets), leaving
        everything else to the operator.
    type: bool
    default: false
  nodeset_finalizer:
    description:
      - Put the finalizer C(slurm.soperator.dev/finalizer) on the cluster's NodeSets, so that deleting one
        drains it before its pods go. The operator sets it; without an operator nothing would remove it.
    type: bool
    default: false
  wait:
    description:
      - Repeat passes until the cluster is Ready (every pod ready, every worker an up Slurm node), or fail
        after O(wait_timeout).
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds passes may be repeated while something is under way (drains, pods going, NodeSets being
        removed), and with O(wait) until the cluster is ready. V(0) makes one pass and returns
        RV(requeue_after).
    type: int
    default: 600
  field_manager:
    description:
      - The server-side apply field manager.
    type: str
    default: soperator.slurm
  policy:
    description:
      - The installer's policy, which the author of a SlurmCluster or NodeSet cannot loosen. A resource asking for
        more is refused naming the field (a NodeSet alone is marked C(Degraded)).
    type: dict
    suboptions:
      allowed_host_path_prefixes:
        description:
          - Node directories C(jail.subMounts[].hostPath) may be equal to or below. Empty refuses every host path.
          - "Host paths are mounted read-only unless the sub-mount says C(readOnly: false)."
        type: list
        elements: str
        default: []
      allowed_registries:
        description:
          - Image reference prefixes every image must start with, at a path boundary (C(registry.example.com),
            C(registry.example.com/hpc)); an image without a registry is C(docker.io/...). The default images
            count too. Empty allows any registry.
        type: list
        elements: str
        default: []
      allow_privileged_programs:
        description:
          - Whether C(spec.slurm.healthCheckProgram) and the slurm.conf programs Slurm runs as root or as
            SlurmUser (C(Prolog), C(Epilog), C(RebootProgram), C(PrologSlurmctld), ...) may be set, and another
            command than the default for the NCCL check (C(spec.healthChecks.nccl.command), run as SlurmUser).
          - C(JobCompLoc) counts as such a program with C(JobCompType=jobcomp/script) (run as SlurmUser) and
            C(jobcomp/kafka) (a file slurmctld loads).
        type: bool
        default: true
      allowed_program_prefixes:
        description:
          - Directories those programs must be equal to or below.
          - "Unset: where the images keep programs, which no jail sub-mount may take: C(/usr), C(/bin), C(/sbin),
            C(/lib), C(/etc), C(/opt)."
          - Where users write (the jail C(/mnt/jail), C(/home), C(/root), C(/tmp), C(/var/tmp), C(/dev), C(/run),
            C(/proc), the slurmd spool) and the jail's sub-mounts are never allowed, whatever the prefixes; a prefix
            there is refused.
        type: list
        elements: str
      allowed_database_hosts:
        description:
          - Hosts an External accounting database (C(spec.accounting.database.host)) may be at, where slurmdbd
            sends its password; host names or addresses, or C(*.example.com) for any host under that domain.
            Any host when empty.
        type: list
        elements: str
        default: []
      allowed_backup_endpoints:
        description:
          - Where the jail's backups may go (C(spec.jail.backup.repository)), which read every user's files and whose
            password the cluster's author holds. URLs an S3 repository's C(endpoint/bucket/prefix) or a REST
            repository's C(url) must equal or be below, at a path boundary (C(https://s3.example.com),
            C(https://backup.example.com:8000/jails)); scheme, host and port as written. A C(claim) repository stays in
            the cluster's namespace and is always allowed. Any endpoint when empty.
        type: list
        elements: str
        default: []
      allowed_directory_uris:
        description:
          - Directories a cluster may take its users from (C(spec.identity.ldap.uris)), as LDAP URIs whose host may
            be C(*.example.com) for any host under that domain (C(ldaps://ldap.example.org),
            C(ldaps://*.example.org:1636)). The scheme must be the same; a URI without a port allows the scheme's
            own only (389, 636). A directory says who every user is. Any directory when empty.
        type: list
        elements: str
        default: []
      allow_plain_ldap:
        description:
          - Whether a directory may be read over plain LDAP (an C(ldap://) URI without C(tls.startTLS)). Nothing
            authenticates its answers, so anyone on the path could hand the cluster users of their own.
        type: bool
        default: false
      min_directory_id:
        description:
          - The lowest uid and gid a directory may give (C(spec.identity.ldap.idRange.min) at or above it), e.g.
            above the jail's own users. Unset, 1000; never lower, nor SlurmUser's 64030, the image cache owner's
            64031 or nobody's 65534 (no C(idRange) may hold the images' own accounts' ids, whatever the policy).
        type: int
      allowed_job_registries:
        description:
          - "Registries, or repository prefixes, container steps may pull from (C(registry.example.com),
            C(registry.example.com:5000/team)): every C(spec.containers.registries) entry must equal or be below one,
            and with containers on that list may not be empty. Empty, any registry."
        type: list
        elements: str
        default: []
  delete_volumes:
    description:
      - With O(state=absent), delete the jail and spool claims. Unset, the SlurmCluster's
        C(spec.deletionPolicy.jail) decides (default C(Retain)).
    type: bool
  delete_secrets:
    description:
      - With O(state=absent), delete the munge key, SSH host keys and JWT key. Unset,
        C(spec.deletionPolicy.secrets) decides (default C(Retain)).
    type: bool
  delete_database:
    description:
      - With O(state=absent), delete the accounting database the cluster made (the in-cluster MariaDB's volume or
        the mariadb-operator C(MariaDB)) and its generated password. An external database is never touched.
        Unset, C(spec.deletionPolicy.database) decides (default C(Retain)).
    type: bool
  delete_resources:
    description:
      - With O(state=absent), delete the SlurmCluster and its NodeSets too.
    type: bool
    default: true
seealso:
  - module: soperator.slurm.apply_manifests
notes:
  - Needs the C(kubernetes) Python library, and RBAC for the kinds it renders, C(get) and C(create) on C(pods/exec)
    in the namespace, and C(patch) on the status of SlurmClusters and NodeSets.
"""

EXAMPLES = r"""
- name: Converge the cluster in a file, waiting until it is ready
  soperator.slurm.slurm_cluster:
    definition: "{{ lookup('ansible.builtin.file', 'cluster.yaml') | ansible.builtin.from_yaml_all | list }}"
    wait: true

- name: Converge what is stored in the cluster, one pass (as the operator does)
  soperator.slurm.slurm_cluster:
    name: demo
    namespace: slurm
    wait_timeout: 0
  register: converged

- name: Tear it down, keeping the jail and the secrets
  soperator.slurm.slurm_cluster:
    state: absent
    name: demo
    namespace: slurm
"""

RETURN = r"""
changed:
  description: Whether an object, a Slurm node or a NodeSet was (or in check mode would be) changed.
  returned: always
  type: bool
name:
  description: The SlurmCluster's name.
  returned: always
  type: str
  sample: demo
namespace:
  description: The SlurmCluster's namespace.
  returned: always
  type: str
  sample: slurm
ready:
  description: Every pod ready and every worker an up Slurm node, nothing under way.
  returned: with O(state=present)
  type: bool
phase:
  description: C(Ready), C(Progressing) or C(Maintenance).
  returned: with O(state=present)
  type: str
message:
  description: What the cluster is waiting for, or that it is ready.
  returned: with O(state=present)
  type: str
pending:
  description: What is still under way (drains, pods going, slurmctld not answering).
  returned: with O(state=present)
  type: list
  elements: str
deferred:
  description:
    - Work a later run does that waits on users and keeps nothing from Ready, such as a login pod on an older
      template that is replaced once nobody is logged in to it (or after the SlurmCluster's
      C(spec.login.updateGracePeriod)).
    - This module does not wait for it; the operator looks again, and a later run of the play replaces the pod.
  returned: with O(state=present)
  type: list
  elements: str
requeue_after:
  description: Seconds after which another pass is worth it; null when the cluster is settled and ready.
  returned: with O(state=present)
  type: int
  sample: 15
invalid:
  description: NodeSets left out because their spec is invalid, with the problems.
  returned: with O(state=present)
  type: dict
objects:
  description: Each rendered object and what happened to it.
  returned: with O(state=present)
  type: list
  elements: dict
counts:
  description: How many objects got each action.
  returned: with O(state=present)
  type: dict
slurm:
  description: Slurm nodes C(drained), C(resumed), C(deleted_nodes); StatefulSets C(scaled); NodeSets C(released);
    worker pods C(replaced_pods) by the rolling update; the messages of the C(events) recorded (a node that went
    with its jobs past a drain timeout).
  returned: with O(state=present)
  type: dict
nodesets:
  description: Per NodeSet, its replicas now and desired, pods ready, Slurm nodes by state.
  returned: with O(state=present)
  type: dict
passes:
  description: How many observe-plan-act passes ran.
  returned: with O(state=present)
  type: int
timings:
  description:
    - Seconds spent in each phase, summed over the passes, measured with a monotonic clock - C(observe) (read
      the SlurmCluster, its NodeSets, StatefulSets, pods and Slurm's nodes), C(render) (the plan and its config
      checks), C(apply) (drain, apply and prune, scale, replace pods, forget nodes), C(status) (release NodeSets,
      write the status).
  returned: with O(state=present)
  type: dict
deleted:
  description: What O(state=absent) deleted.
  returned: with O(state=absent)
  type: list
  elements: str
kept:
  description: With O(state=absent), whether the jail and the secrets were kept.
  returned: with O(state=absent)
  type: dict
data_kept:
  description:
    - With O(state=absent), data that was asked to go (option or deletion policy) but is kept because the caller
      may not delete it, each with the reason.
  returned: with O(state=absent)
  type: list
  elements: str
field:
  description: The invalid field, for a failure of reason C(InvalidSpec).
  returned: failure
  type: str
  sample: spec.slurm.slurmConf.SlurmctldHost
reason:
  description:
    - Why it failed, C(InvalidSpec), C(Forbidden), C(Conflict), C(Unavailable), C(ApiError), C(NotFound) or
      C(DataMissing).
  returned: failure
  type: str
retryable:
  description: Whether retrying later may succeed without changing the definition.
  returned: failure
  type: bool
diff:
  description: In diff mode, the objects that change (normalized, Secret values hidden).
  returned: when diff mode is on
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils.api import errors
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_cluster import Failure, execute
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import AUTH_ARG_SPEC, require_kubernetes


def argument_spec():
    spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        name=dict(type="str"),
        namespace=dict(type="str"),
        definition=dict(type="list", elements="dict"),
        prune_nodesets=dict(type="bool", default=True),
        resources_only=dict(type="bool", default=False),
        nodeset_finalizer=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=600),
        field_manager=dict(type="str", default="soperator.slurm"),
        policy=dict(type="dict", options=dict(
            allowed_host_path_prefixes=dict(type="list", elements="str", default=[]),
            allowed_registries=dict(type="list", elements="str", default=[]),
            allow_privileged_programs=dict(type="bool", default=True),
            allowed_program_prefixes=dict(type="list", elements="str"),
            allowed_database_hosts=dict(type="list", elements="str", default=[]),
            allowed_backup_endpoints=dict(type="list", elements="str", default=[]),
            allowed_directory_uris=dict(type="list", elements="str", default=[]),
            allow_plain_ldap=dict(type="bool", default=False),
            min_directory_id=dict(type="int"),
            allowed_job_registries=dict(type="list", elements="str", default=[]),
        )),
        delete_volumes=dict(type="bool"),
        delete_secrets=dict(type="bool"),
        delete_database=dict(type="bool"),
        delete_resources=dict(type="bool", default=True),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_one_of=[("definition", "name")])
    require_kubernetes(module)
    module.no_log_values.update(objects.secret_values(module.params["definition"] or []))
    try:
        result = execute(module.params, module.check_mode, module._diff, module.no_log_values.add)
    except Failure as e:
        module.fail_json(msg=e.msg, reason=e.reason, retryable=errors.retryable(e.reason), **e.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
