"""soperator_operator: a small runtime that honours an operator-sdk watches.yaml and runs Ansible roles.

Layers (imports point one way, checked by tests/unit/test_layers.py): pure decisions (``watches``, ``extravars``,
``workqueue``, ``classify``, ``conditions``, ``lease``, ``metrics``, ``triggers``, ``drift``) <- adapters (``kube``,
``cache``, ``runner``, ``warm``) <- orchestration (``controller``, ``leader``, ``server``, ``__main__``). The runtime
imports the collection's pure core (``plugins/module_utils`` without a leading underscore) and nothing else of it;
the pure modules import neither ``kubernetes`` nor Ansible.
"""

__version__ = "0.1.0"


def add_collections_to_path():
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
