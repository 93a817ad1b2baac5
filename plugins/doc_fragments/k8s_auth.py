# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """How modules that talk to Kubernetes find the cluster; matches AUTH_ARG_SPEC in module_utils/k8s/client.py."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - When not given, C(K8S_AUTH_KUBECONFIG) is used, then C(KUBECONFIG); when neither is set and the module
        runs in a pod, the pod's service account is used; otherwise C(~/.kube/config).
    type: raw
  context:
    description:
      - The kubeconfig context to use. Defaults to the kubeconfig's current context.
      - Can also be set with the C(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the Kubernetes API server, overriding the kubeconfig's.
      - Can also be set with the C(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token to authenticate with.
      - Can also be set with the C(K8S_AUTH_API_KEY) environment variable.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Defaults to the kubeconfig's setting.
      - Can also be set with the C(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to a CA certificate bundle to verify the API server with.
      - Can also be set with the C(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate to authenticate with.
      - Can also be set with the C(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert).
      - Can also be set with the C(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
attributes:
  action_group:
    description:
      - In the action group C(soperator.slurm.k8s) (C(meta/runtime.yml)); its connection options can be set once
        for every such module with C(module_defaults) and C(group/soperator.slurm.k8s).
    support: full
    membership:
      - soperator.slurm.k8s
requirements:
  - python >= 3.8
  - kubernetes >= 24.2.0
"""
