# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Where the access layer's resources live (``access.py`` re-exports it): a :class:`Resource` builds every request
path of the collection and the operator runtime (an object's, a subresource's, a group version's discovery), and
:func:`table` is the fixed table of the kinds the operator runtime reads and writes (no discovery). No request here.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names


class Resource(NamedTuple):
    """An API resource; ``group`` "" is the core API. Every request path is built here."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = group_path(self.api_version)
        if namespace and self.namespaced:
            base += "/namespaces/%s" % namespace
        base += "/" + self.plural
        if name:
            base += "/" + name
        if subresource:
            base += "/" + subresource
        return base


def group_path(api_version: str) -> str:
    """A group version's path (``v1``: the core API's): its discovery document lists the resources it serves."""
    return "/apis/%s" % api_version if "/" in api_version else "/api/%s" % api_version


def resource(group: str, version: str, plural: str, kind: str, namespaced: bool = True) -> Resource:
    return Resource(group, version, plural, kind, namespaced)


def split(api_version: str) -> Tuple[str, str]:
    group, dummy, version = api_version.rpartition("/")
    return group, version


PODS = resource("", "v1", "pods", "Pod")
ACCESS_REVIEWS = resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
                          namespaced=False)

# ``resolve(apiVersion, kind) -> Resource`` (None: not served).
Resolve = Callable[[str, str], Optional[Resource]]


def table() -> Dict[Tuple[str, str], Resource]:
    """The resources the operator runtime reads and writes, from the collection's tables (no discovery)."""
    found = [resource(k.group, k.version, k.plural, k.kind) for k in kinds.OWNED + (kinds.POD,)]
    found += [resource(names.GROUP, names.VERSION, names.CLUSTER_PLURAL, names.CLUSTER_KIND),
              resource(names.GROUP, names.VERSION, names.NODESET_PLURAL, names.NODESET_KIND),
              resource("", "v1", "events", "Event"),
              resource("", "v1", "nodes", "Node", namespaced=False),
              resource("", "v1", "namespaces", "Namespace", namespaced=False),
              resource("coordination.k8s.io", "v1", "leases", "Lease")]
    return dict(((r.api_version, r.kind), r) for r in found)


def from_table(by_key: Mapping[Tuple[str, str], Resource]) -> Resolve:
    return lambda api_version, kind: by_key.get((api_version, kind))
