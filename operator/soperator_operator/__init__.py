"""soperator_operator: a small runtime that honours an operator-sdk watches.yaml and runs Ansible roles.

Layers (imports point one way): pure decisions (``watches``, ``extravars``, ``workqueue``, ``classify``,
``conditions``, ``lease``, ``metrics``) <- adapters (``kube``, ``runner``) <- orchestration (``controller``,
``leader``, ``server``, ``__main__``). The pure modules import neither ``kubernetes`` nor ``ansible_runner``.
"""

__version__ = "0.1.0"
