"""Imported once by the runner's forkserver: everything a run needs, loaded and initialised before any fork.

Ansible's configuration is read here, from the environment the runner set; the plugin loader and the
collection finder are configured with ``ANSIBLE_COLLECTIONS_PATH``; the plugins the roles use are resolved,
and the Kubernetes client and the collection's converge code are imported. A child then only runs its play.
"""

import sys
import warnings

# A child's ansible-playbook configures the collection finder again; it is already configured here.
warnings.filterwarnings("ignore", message="AnsibleCollectionFinder has already been configured")

from ansible.cli.playbook import PlaybookCLI  # noqa: E402,F401
from ansible.executor import playbook_executor, task_queue_manager  # noqa: E402,F401
from ansible.plugins import loader  # noqa: E402

loader.init_plugin_loader([])
# Loading a plugin parses its DOCUMENTATION for its configuration (YAML, the slowest part of a run): do it
# here for every plugin a run enumerates or uses, so that children find the definitions already registered.
for plugin_loader in (loader.inventory_loader, loader.vars_loader, loader.connection_loader, loader.shell_loader,
                      loader.become_loader, loader.callback_loader):
    list(plugin_loader.all(class_only=True))
    for plugin in plugin_loader.all(class_only=True):
        plugin_loader._load_config_defs(plugin._load_name, sys.modules[plugin.__module__],
                                        sys.modules[plugin.__module__].__file__)
for name in ("ansible.builtin.normal", "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.debug",
             "ansible.builtin.include_role", "ansible.builtin.validate_argument_spec",
             "soperator.slurm.slurm_cluster"):
    loader.action_loader.get(name, class_only=True)
loader.cache_loader.get("ansible.builtin.memory")
loader.strategy_loader.get("ansible.builtin.linear", class_only=True)
list(loader.filter_loader.all(class_only=True))
list(loader.test_loader.all(class_only=True))

import kubernetes.client  # noqa: E402,F401
import kubernetes.dynamic  # noqa: E402,F401
import kubernetes.stream  # noqa: E402,F401
from kubernetes.client import ApiClient, Configuration  # noqa: E402,F401  (the client loads lazily: no models)
from kubernetes.config import incluster_config, kube_config  # noqa: E402,F401

try:  # the converge code the action plugin runs in-process
    from ansible_collections.soperator.slurm.plugins.module_utils import names
    from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
    from ansible_collections.soperator.slurm.plugins.module_utils.k8s import slurm_cluster  # noqa: F401
except ImportError:  # the collection is not installed: roles of other collections still run
    pass
else:  # the schemas its validation walks, built here once rather than in every run
    spec.shared_schema(names.CLUSTER_KIND)
    spec.shared_schema(names.NODESET_KIND)

import gc  # noqa: E402

# Every object imported above is shared with the runs, copy-on-write: a collection in a child would write to every
# page holding one (its GC header) and copy the whole heap. Frozen, the collector leaves them alone.
gc.collect()
gc.freeze()
