# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: jails
short_description: Each SlurmCluster's jail as a host
version_added: 0.2.0
author:
  - soperator.slurm maintainers (!UNKNOWN)
description:
  - "Lists the SlurmClusters your kubeconfig may list (in O(namespaces), or in every namespace) and makes each one's
    jail a host C(<namespace>/<cluster>), reached with the P(soperator.slurm.jail#connection) connection (as root,
    through the Kubernetes API) and the jail's own Python."
  - "Groups: C(jails) (every jail), C(namespace_<namespace>) and C(label_<key>_<value>) for each label of the
    SlurmCluster (characters other than letters, digits and C(_) become C(_)); C(compose), C(groups) and
    C(keyed_groups) add more from the variables."
  - "Variables: C(soperator_cluster), C(soperator_namespace), C(soperator_jail), C(soperator_labels),
    C(soperator_slurm_version) (the version of the Slurm clients the login pods bind into the jail, read from a ready
    login pod with O(slurm_version); null when none runs or it may not be read), C(soperator_partitions) (name,
    default, NodeSets), C(soperator_nodesets) (name, replicas, partitions, GPUs, GPU type, elastic, ready replicas),
    C(soperator_gpu_nodesets), C(soperator_maintenance) (C(spec.maintenance)), C(soperator_phase) (C(status.phase):
    C(Maintenance) once no pod runs), C(soperator_ready)."
  - The source is a YAML file whose name ends with C(.jails.yml) or C(.jails.yaml).
extends_documentation_fragment:
  - constructed
requirements:
  - kubernetes >= 24.2.0 (the Python client, on the Ansible controller)
options:
  plugin:
    description: The name of this plugin.
    required: true
    type: str
    choices: [soperator.slurm.jails]
  kubeconfig:
    description:
      - Path of the kubeconfig; default C(K8S_AUTH_KUBECONFIG), then C(KUBECONFIG), then C(~/.kube/config). Given to
        the jails' connection too.
    type: str
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: The kubeconfig context; default its current context. Given to the jails' connection too.
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  namespaces:
    description:
      - The namespaces to list SlurmClusters in; empty for every namespace (which needs a cluster-wide C(list)).
    type: list
    elements: str
    default: []
  label_selector:
    description: Only the SlurmClusters with these labels (a Kubernetes label selector).
    type: str
  slurm_version:
    description:
      - Read C(soperator_slurm_version) from a ready login pod of each cluster (one exec into its C(sshd) container,
        which the jail's connection needs anyway); off, it is null.
    type: bool
    default: true
"""

EXAMPLES = r"""
# cluster.jails.yml
plugin: soperator.slurm.jails
namespaces: [slurm]
keyed_groups:
  - key: soperator_partitions | map(attribute='name')
    prefix: partition

# ansible-inventory -i cluster.jails.yml --graph
# ansible -i cluster.jails.yml jails -m ansible.builtin.setup -a 'filter=ansible_distribution*'
"""

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import jail_hosts
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access, client
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import KubernetesExecTransport, SlurmError
from ansible_collections.soperator.slurm.plugins.module_utils.plan import jail_access
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "soperator.slurm.jails"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith((".jails.yml", ".jails.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        auth = {"kubeconfig": self.get_option("kubeconfig"), "context": self.get_option("context")}
        try:
            api = access.Api(client.api_client(auth), resolve=access.table())
            found = self._clusters(api)
        except access.KubernetesError as e:
            raise AnsibleParserError("soperator.slurm.jails: %s" % e.msg)
        for cluster, nodesets in found:
            self._add(api, cluster, nodesets, auth)

    def _clusters(self, api):
        """[(SlurmCluster, its namespace's NodeSets)] in the namespaces asked (or every one)."""
        selector = self.get_option("label_selector")
        found = []
        for namespace in self.get_option("namespaces") or [None]:
            clusters = api.list(names.API_VERSION, names.CLUSTER_KIND, namespace, selector, required=True)
            nodesets = api.list(names.API_VERSION, names.NODESET_KIND, namespace, required=True)
            for cluster in clusters:
                md = cluster["metadata"]
                found.append((cluster, [ns for ns in nodesets if ns["metadata"].get("namespace") == md["namespace"]]))
        return sorted(found, key=lambda pair: (pair[0]["metadata"]["namespace"], pair[0]["metadata"]["name"]))

    def _slurm_version(self, api, cluster):
        """The Slurm version of a ready login pod's clients (what it binds into the jail), or None."""
        md = cluster["metadata"]
        selector = "%s=%s,%s=%s" % (names.LABEL_INSTANCE, md["name"], names.LABEL_COMPONENT, names.COMPONENT_LOGIN)
        try:
            choice = jail_access.choose(md["name"], api.list("v1", "Pod", md["namespace"], selector))
            if choice.action != jail_access.EXEC:
                return None
            rc, out, dummy = KubernetesExecTransport(api.rest, md["namespace"], choice.pod,
                                                     choice.container)(["cat", paths.SLURM_VERSION_FILE])
        except (access.KubernetesError, SlurmError) as e:
            self.display.warning("soperator.slurm.jails: the Slurm version of %s/%s is not known: %s" % (
                md["namespace"], md["name"], getattr(e, "msg", e)))
            return None
        return jail_hosts.slurm_version(out) if rc == 0 else None

    def _add(self, api, cluster, nodesets, auth):
        version = self._slurm_version(api, cluster) if self.get_option("slurm_version") else None
        variables = jail_hosts.host_vars(cluster, nodesets, version)
        host = variables["soperator_jail"]
        for group in jail_hosts.groups(cluster):
            self.inventory.add_group(group)
        self.inventory.add_host(host, group=jail_hosts.ALL_GROUP)
        for group in jail_hosts.groups(cluster)[1:]:
            self.inventory.add_child(group, host)
        if auth["kubeconfig"]:
            variables["ansible_soperator_kubeconfig"] = auth["kubeconfig"]
        if auth["context"]:
            variables["ansible_soperator_context"] = auth["context"]
        for key, value in variables.items():
            self.inventory.set_variable(host, key, value)
        strict = self.get_option("strict")
        self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
