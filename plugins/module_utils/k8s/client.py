# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Read the modules' connection options into a ``kubernetes.client.Configuration``, the way kubernetes.core resolves
them; the client itself is made by the access layer (``access.connect``).

Order: explicit ``host`` (with ``api_key`` / client certificates), else a kubeconfig (the ``kubeconfig``
option, ``K8S_AUTH_KUBECONFIG``, then ``KUBECONFIG``), else the in-cluster service account when running in a
pod, else ``~/.kube/config``. ``context`` selects a kubeconfig context.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os
import traceback
from typing import Any, Dict, Mapping

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError

KUBERNETES_IMPORT_ERROR = None
try:
    from kubernetes import config as k8s_config
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

# The options of the k8s_auth doc fragment; every module that talks to the cluster merges this in.
AUTH_ARG_SPEC: Dict[str, Dict[str, Any]] = dict(
    kubeconfig=dict(type="raw", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
    validate_certs=dict(type="bool", aliases=["verify_ssl"], fallback=(env_fallback, ["K8S_AUTH_VERIFY_SSL"])),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"], fallback=(env_fallback, ["K8S_AUTH_SSL_CA_CERT"])),
    client_cert=dict(type="path", aliases=["cert_file"], fallback=(env_fallback, ["K8S_AUTH_CERT_FILE"])),
    client_key=dict(type="path", aliases=["key_file"], no_log=False,
                    fallback=(env_fallback, ["K8S_AUTH_KEY_FILE"])),
)

# The connection options as a module or a plugin has them (AUTH_ARG_SPEC's keys).
Params = Mapping[str, Any]

_IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def require_kubernetes(module: Any) -> None:
    """Fail the module (an AnsibleModule) cleanly when the ``kubernetes`` python package is missing."""
    if KUBERNETES_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)


def _kubeconfig_source(kubeconfig: Any, host: str | None = None) -> str | Dict[str, Any] | None:
    """A path (str) or an inline kubeconfig (dict), or None. ``KUBECONFIG`` only counts when no ``host`` is
    given: explicit connection options are never mixed with an ambient kubeconfig."""
    if isinstance(kubeconfig, dict):
        return kubeconfig
    if kubeconfig:
        return os.path.expanduser(str(kubeconfig))
    if host:
        return None
    return os.environ.get("KUBECONFIG") or None


def configuration(params: Params) -> Any:
    """A ``kubernetes.client.Configuration`` for the auth options in ``params`` (see module docstring)."""
    cfg = Configuration()
    source = _kubeconfig_source(params.get("kubeconfig"), params.get("host"))
    context = params.get("context")
    try:
        if isinstance(source, dict):
            k8s_config.load_kube_config_from_dict(source, context=context, client_configuration=cfg)
        elif source:
            k8s_config.load_kube_config(config_file=source, context=context, client_configuration=cfg)
        elif params.get("host"):
            pass
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(_IN_CLUSTER_TOKEN):
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            k8s_config.load_kube_config(context=context, client_configuration=cfg)
    except (ConfigException, IOError, OSError) as e:
        raise KubernetesError("cannot load Kubernetes configuration: %s" % e)

    if params.get("host"):
        cfg.host = params["host"]
    if params.get("api_key"):
        cfg.api_key = {"authorization": "Bearer %s" % params["api_key"]}
    if params.get("validate_certs") is not None:
        cfg.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        cfg.ssl_ca_cert = params["ca_cert"]
    if params.get("client_cert"):
        cfg.cert_file = params["client_cert"]
    if params.get("client_key"):
        cfg.key_file = params["client_key"]
    return cfg


USER_AGENT = "soperator.slurm/" + names.COLLECTION_VERSION


def dynamic_client(params: Params) -> access.Client:
    """A DynamicClient for the auth options in ``params``. Discovery is cached on disk by the library
    (per API host), so repeated module runs do not rediscover the API."""
    return access.connect(configuration(params), USER_AGENT, dynamic=True)


def api_client(params: Params) -> access.Client:
    """A ``kubernetes.client.ApiClient`` for the auth options in ``params``, without discovery (the jail connection and
    the jails inventory know their resources: ``access.table()``)."""
    if KUBERNETES_IMPORT_ERROR:
        raise KubernetesError("the kubernetes Python library is missing on the Ansible controller (pip install "
                              "kubernetes)")
    return access.connect(configuration(params), USER_AGENT)
