"""SlurmCluster and NodeSet objects for tests of every suite (unit, operator)."""

import copy
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

API = "slurm.soperator.dev/v1alpha1"


def make_cluster(spec=None, name="demo", namespace="hpc", uid=None):
    """A SlurmCluster object with a jail unless ``spec`` gives one."""
    body = {"jail": {"storageClassName": "standard", "size": "10Gi"}}
    body.update(copy.deepcopy(spec or {}))
    md = {"name": name, "namespace": namespace}
    if uid:
        md["uid"] = uid
    return {"apiVersion": API, "kind": "SlurmCluster", "metadata": md, "spec": body}


def make_nodeset(name="cpu", spec=None, cluster="demo", namespace="hpc", uid=None):
    body = {"clusterRef": {"name": cluster}}
    body.update(copy.deepcopy(spec or {}))
    md = {"name": name, "namespace": namespace}
    if uid:
        md["uid"] = uid
    return {"apiVersion": API, "kind": "NodeSet", "metadata": md, "spec": body}


def load_example(name):
    with open(os.path.join(ROOT, "examples", name)) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    return docs[0], docs[1:]


# A directory (spec.identity.ldap) as the identity tests of every layer use it: bind and CA Secrets named.
LDAP = {"uris": ["ldaps://ldap.example.org"], "baseDN": "dc=example,dc=org",
        "bindDN": "cn=sssd,ou=services,dc=example,dc=org",
        "bindPasswordSecretRef": {"name": "ldap-bind", "key": "password"},
        "tls": {"caSecretRef": {"name": "ldap-ca", "key": "ca.crt"}}}


def ldap_cluster(ldap=None, **spec):
    """A SlurmCluster with LDAP (``ldap`` overriding its fields) and the other ``spec`` fields given."""
    return make_cluster(dict({"identity": {"ldap": dict(LDAP, **(ldap or {}))}}, **spec))
