#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: apply_manifests
short_description: Server-side apply a list of Kubernetes manifests, create-once secrets, prune what is gone
version_added: 0.1.0
description:
  - Applies O(manifests) in the given order with server-side apply as the field manager O(field_manager).
  - "Cheap when nothing changed: each kind is listed once per namespace, and an object is skipped without
    any request when its live copy carries the annotation C(slurm.soperator.dev/applied-hash) equal to the
    sha256 of the desired manifest AND its live fields are a superset of the desired ones. A hand edit of a
    field this module sets is therefore repaired on the next run."
  - "Objects annotated C(slurm.soperator.dev/create-only: \"true\") are created when absent and never
    updated. A create-only Secret annotated C(slurm.soperator.dev/generate: munge-key) gets a 1024-byte random
    C(munge.key); with C(ssh-host-keys) it gets ed25519 and rsa host keys (C(ssh_host_<type>_key) and
    C(.pub)), the types the rendered sshd_config names, generated in-process with the Python package
    C(cryptography) (no C(ssh-keygen) needed). Generated values never appear in results, diffs or logs."
  - A conflict with a field owned by another server-side applier fails with the object and the fields named,
    unless O(force_conflicts). Fields changed by hand (C(kubectl edit), C(kubectl patch)) are taken back.
  - With O(prune), objects matching O(prune.selector) that are not in O(manifests) are deleted.
  - Check mode sends the applies as server-side dry runs, so its prediction is what the real run would do.
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.k8s_auth
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - Secret C(data) and C(stringData) values are shown as C(<hidden>).
  idempotent:
    support: full
options:
  manifests:
    description:
      - Kubernetes objects to apply, in order. Each needs C(apiVersion), C(kind), C(metadata.name), and
        C(metadata.namespace) when its kind is namespaced.
      - Secret values given here are masked in the module's output.
      - Exactly one of O(manifests) and O(src) is given.
    type: list
    elements: dict
  src:
    description:
      - YAML files of manifests (one or more documents each, applied in order), read on the controller. A relative
        path is looked up as a role's or playbook's C(files/), as C(ansible.builtin.copy)'s C(src) is.
      - Nothing of them is templated, and they are parsed once, by LibYAML where it is installed; for large
        manifests such as CRDs this is much cheaper than passing them through O(manifests) with
        C(lookup) and C(from_yaml).
    type: list
    elements: path
    version_added: 0.2.0
  field_manager:
    description:
      - The server-side apply field manager owning the applied fields.
    type: str
    default: soperator.slurm
  force_conflicts:
    description:
      - Take over fields owned by other server-side appliers instead of failing.
    type: bool
    default: false
  skip_unserved:
    description:
      - Kinds, as C(apiVersion/Kind), whose objects are left out (listed in RV(skipped)) where the cluster does
        not serve the kind, instead of failing. For another project's optional CRDs, such as prometheus-operator's
        C(monitoring.coreos.com/v1/PodMonitor).
      - The check asks the API server itself, so a stale discovery cache cannot make it fail.
    type: list
    elements: str
    default: []
  prune:
    description:
      - Delete objects that this set owned and no longer contains.
      - 'Never deleted are objects of O(prune.protect_kinds) and objects annotated
        C(slurm.soperator.dev/prune: "false").'
    type: dict
    suboptions:
      selector:
        description:
          - Label selector of the objects this set owns, for example C(slurm.soperator.dev/cluster=demo).
          - Objects of other owners (other clusters) must not match it.
        type: str
        required: true
      kinds:
        description:
          - Kinds to prune, as C(apiVersion/Kind) (C(v1/ConfigMap), C(apps/v1/StatefulSet)).
          - Defaults to the kinds present in O(manifests); list kinds explicitly to prune a kind that no
            longer appears at all.
        type: list
        elements: str
      namespaces:
        description:
          - Namespaces to prune in. Defaults to the namespaces of O(manifests).
          - C(*) prunes in every namespace (one list per kind across the cluster).
        type: list
        elements: str
      protect_kinds:
        description:
          - Kinds never pruned (their data outlives a spec change).
        type: list
        elements: str
        default: [Secret, PersistentVolumeClaim]
seealso:
  - module: soperator.slurm.cluster_manifests
  - module: kubernetes.core.k8s
notes:
  - Needs the C(kubernetes) Python library on the host running the module.
"""

EXAMPLES = r"""
- name: Render a Slurm cluster
  soperator.slurm.cluster_manifests:
    cluster: "{{ slurm_cluster }}"
    nodesets: "{{ slurm_nodesets }}"
  register: rendered

- name: Apply it and prune what the spec no longer has
  soperator.slurm.apply_manifests:
    manifests: "{{ rendered.manifests }}"
    prune:
      selector: "slurm.soperator.dev/cluster={{ rendered.cluster_name }}"
      kinds: [v1/ConfigMap, v1/Service, apps/v1/StatefulSet]

- name: A munge key made once and never rotated
  soperator.slurm.apply_manifests:
    kubeconfig: ~/.kube/config
    manifests:
      - apiVersion: v1
        kind: Secret
        metadata:
          name: demo-munge-key
          namespace: slurm
          annotations:
            slurm.soperator.dev/create-only: "true"
            slurm.soperator.dev/generate: munge-key
        type: Opaque
"""

RETURN = r"""
changed:
  description: Whether any object was (or, in check mode, would be) created, updated or pruned.
  returned: always
  type: bool
objects:
  description: One entry per desired object, in order, then one per pruned object.
  returned: always
  type: list
  elements: dict
  contains:
    apiVersion:
      description: The object's apiVersion.
      type: str
      sample: apps/v1
    kind:
      description: The object's kind.
      type: str
      sample: StatefulSet
    namespace:
      description: The object's namespace (null for cluster-scoped kinds).
      type: str
      sample: slurm
    name:
      description: The object's name.
      type: str
      sample: demo-controller
    action:
      description:
        - What was done. In check mode C(would-create), C(would-update) and C(would-prune) replace
          C(created), C(updated) and C(pruned).
      type: str
      choices: [created, updated, unchanged, pruned, would-create, would-update, would-prune]
      sample: unchanged
counts:
  description: How many objects got each action; check mode counts what it predicts.
  returned: always
  type: dict
  contains:
    created:
      description: Objects created.
      type: int
    updated:
      description: Objects updated.
      type: int
    unchanged:
      description: Objects left as they were.
      type: int
    pruned:
      description: Objects deleted by pruning.
      type: int
  sample: {created: 0, updated: 1, unchanged: 11, pruned: 0}
skipped:
  description: Objects of O(skip_unserved) kinds left out because the cluster does not serve their kind.
  returned: always
  type: list
  elements: str
  sample: [PodMonitor monitoring/soperator-operator]
diff:
  description:
    - In diff mode, one entry per changed object with its normalized C(before) and C(after) (no status,
      managedFields, resourceVersion, uid, creationTimestamp, generation, nor the applied-hash annotation;
      Secret values C(<hidden>)).
  returned: when diff mode is on
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC,
    dynamic_client,
    require_kubernetes,
)
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import apply_manifests, read_manifest_files


def argument_spec():
    spec = dict(
        manifests=dict(type="list", elements="dict"),
        src=dict(type="list", elements="path"),
        field_manager=dict(type="str", default="soperator.slurm"),
        force_conflicts=dict(type="bool", default=False),
        skip_unserved=dict(type="list", elements="str", default=[]),
        prune=dict(type="dict", options=dict(
            selector=dict(type="str", required=True),
            kinds=dict(type="list", elements="str"),
            namespaces=dict(type="list", elements="str"),
            protect_kinds=dict(type="list", elements="str", default=list(objects.DEFAULT_PROTECT_KINDS)),
        )),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def execute(params, check_mode=False, diff=False, on_secret=None):
    """The module's work (its action plugin runs it in-process): apply, prune; raises KubernetesError."""
    prune = params["prune"] or {}
    protect = prune.get("protect_kinds")
    return apply_manifests(
        dynamic_client(params), params["manifests"], params["field_manager"],
        prune_selector=prune.get("selector"), prune_kinds=prune.get("kinds"),
        prune_namespaces=prune.get("namespaces"),
        protect=objects.DEFAULT_PROTECT_KINDS if protect is None else protect,
        check_mode=check_mode, force_conflicts=params["force_conflicts"], diff=diff,
        on_secret=on_secret, skip_unserved=params["skip_unserved"])


ONE_SOURCE = {"required_one_of": [("manifests", "src")], "mutually_exclusive": [("manifests", "src")]}


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, **ONE_SOURCE)
    require_kubernetes(module)
    params = module.params
    if params["src"]:  # run on a target without the action plugin: the files are the target's
        try:
            params["manifests"] = read_manifest_files(params["src"])
        except (OSError, ValueError) as e:
            module.fail_json(msg="src: %s" % e)
    # Secret values the user gave may be echoed by an API error: mask them in everything we print.
    module.no_log_values.update(objects.secret_values(params["manifests"]))
    try:
        result = execute(params, module.check_mode, module._diff, module.no_log_values.add)
    except KubernetesError as e:
        module.fail_json(msg=e.msg, **e.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
