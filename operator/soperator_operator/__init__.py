"""soperator_operator: a small runtime that honours an operator-sdk watches.yaml and runs Ansible roles.

Layers (imports point one way, checked by tests/unit/test_layers.py): pure decisions (``watches``, ``extravars``,
``workqueue``, ``classify``, ``conditions``, ``lease``, ``metrics``, ``triggers``, ``drift``: no ``kubernetes``, no
Ansible, no I/O module) <- adapters (``kube``, ``cache``, ``leader``, ``runner``, ``nodes``, ``slurmstatus``,
``server``, ``warm``, ``callbacks``) <- entry (``controller``, ``__main__``). The runtime imports the collection's pure
core (``plugins/module_utils`` but ``k8s/``) and, from its adapters only, the collection's Kubernetes access layer
(``k8s/access.py``: one error mapping, one request path, the writes; ``k8s/slurm_exec.py``: exec in a pod); ``warm``
also imports what a forked run imports (``k8s/slurm_cluster.py``).
"""

__version__ = "0.1.0"


def add_collections_to_path() -> None:
    """The runtime imports the collection's pure core (its renderer, its duration parser): make
    ``ansible_collections`` importable from the same paths Ansible searches."""
    import os
    import sys

    # As Ansible: the variable replaces the default paths (an older copy installed in ~/.ansible must not
    # shadow the one asked for), and its paths come first, in their order.
    paths = [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    paths = paths or [os.path.expanduser("~/.ansible/collections"), "/usr/share/ansible/collections"]
    for path in reversed(paths):
        if os.path.isdir(os.path.join(path, "ansible_collections")):
            if path in sys.path:
                sys.path.remove(path)
            sys.path.insert(0, path)


add_collections_to_path()
