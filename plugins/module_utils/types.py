# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The names of the shapes every layer passes around, defined once. Pure: type aliases only, nothing runs.

Kubernetes objects and the user's specs are JSON: what the API server, YAML or a module's arguments give. They are
named here for what they are (a SlurmCluster, a NodeSet's spec, ...) and stay plain dicts (``Dict[str, Any]``): the
schema walk (``api/walk.py``) is what checks their shape, and each layer reads the fields it needs. Shapes of our own
that cross layers are typed where they are made: ``api.errors.Errors`` (a list of SpecError),
``api.policy.Policy``, ``slurm.scontrol.SlurmNode``, ``api.schema.Schema``.

Annotations are written as Python 3.10 spells them (``list[str]``, ``str | None``): every module of the collection
starts with ``from __future__ import annotations``, so they are never evaluated. What is evaluated (an alias like
the ones below, a TypedDict's base) uses the ``typing`` names of Python 3.8, which Ansible's targets may run.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Any, Dict

# A JSON object: a Kubernetes object as the API server or a YAML document gives it (apiVersion, kind, metadata,
# spec, status), or any mapping inside one (metadata, a pod template, a container). Values are Any: JSON is
# untyped until something checks it.
KubeObject = Dict[str, Any]

# A SlurmCluster / NodeSet object (apiVersion, kind, metadata, spec and maybe status). After api.spec.validate_cluster
# / validate_nodeset: defaulted, every field the schema defaults present, metadata.namespace set.
SlurmCluster = Dict[str, Any]
NodeSet = Dict[str, Any]

# The ``spec`` of a SlurmCluster or a NodeSet, or a part of one (``spec.jail``, ``spec.login.service``, ...): the
# user's fields.
Spec = Dict[str, Any]
