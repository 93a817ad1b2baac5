# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm.conf changed in place or by a restart (issue 25). Pure.

The controller's pod template carries the digest of what needs a restart (render/controller.restart_files: the lines
of config_keys.RESTART_KEYS, the files other than slurm.conf and topology.conf): a change there replaces the pod,
whose slurmctld reads the new file at start. Every other slurm.conf change (a partition's settings, a NodeSet, a
limit) leaves the pod alone: the converge writes the ConfigMap, waits until the controller pod's mounted copy is the
file rendered now (the kubelet's ConfigMap sync, so a burst of changes within it is one reconfigure) and asks one
``scontrol reconfigure``, which re-executes slurmctld in place (same process, the listening socket kept: clients
queue, slurm/version.py's SLURM.reconfigure_in_place) and makes the configless nodes fetch the new files.

``status.slurmConfig`` records the slurm.conf slurmctld was last given (its digest, the restart part's digest), and how
(Reconfigured or Restarted), so a second converge asks nothing.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from typing import Sequence, cast

from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_PROGRESSING, Context, Draft, SlurmConfigStatus, deleting,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import config_hash
from ansible_collections.soperator.slurm.plugins.module_utils.render.controller import restart_digest
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

APPLIED_RECONFIGURED = "Reconfigured"
APPLIED_RESTARTED = "Restarted"


def rendered_files(manifests: Sequence[KubeObject], cluster_name: str) -> dict[str, str] | None:
    """The data of the slurm-config ConfigMap among a plan's manifests (None: not rendered)."""
    wanted = names.slurm_config_name(cluster_name)
    for obj in manifests:
        if obj.get("kind") == "ConfigMap" and obj["metadata"]["name"] == wanted:
            return obj.get("data") or {}
    return None


def digest(text: str) -> str:
    return config_hash({"slurm.conf": text})[:16]


def plan_slurm_config(p: Draft, ctx: Context) -> None:
    """``p.slurm_config`` (status.slurmConfig once slurmctld has the rendered slurm.conf), ``p.reconfigure`` when
    it must reread it, ``p.read_mounted_config`` when the planner needs the controller's mounted copy."""
    files = rendered_files(p.manifests, ctx.name)
    # As an earlier pass wrote it ({}: none yet).
    recorded = cast(SlurmConfigStatus, dict((ctx.cluster.get("status") or {}).get("slurmConfig") or {}))
    p.slurm_config = recorded or None
    if files is None or "slurm.conf" not in files:
        return
    text = files["slurm.conf"]
    want, restart_full = digest(text), restart_digest(files)
    restart = restart_full[:16]
    if recorded.get("digest") == want:
        return
    pod = ctx.pods.get(names.controller_pod(ctx.name))
    if ctx.slurm is None or pod is None or deleting(pod):
        return  # slurmctld does not answer: the components' readiness says why; looked at again when it does
    hash_now = ((pod.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_CONFIG_HASH)
    if hash_now is not None and hash_now != restart_full:
        p.wait(REQUEUE_PROGRESSING, "slurm.conf: the controller pod is replaced for a setting that needs a restart")
        return
    if "mounted_slurm_conf" not in ctx.observed:
        p.read_mounted_config = True
        return
    mounted = ctx.observed["mounted_slurm_conf"]
    if mounted != text:
        p.wait(REQUEUE_PROGRESSING, "slurm.conf: waiting for the controller pod to see the new file")
        return
    restarted = bool(recorded) and recorded.get("restartDigest") != restart
    # Also after a restart: the new pod may have started before the last in-place change reached its volume (its
    # entrypoint reconfigures once at start too; a second one costs nothing: SLURM.reconfigure_in_place).
    why = "slurm.conf %s: the controller pod has it" % want
    p.reconfigure = "%s; %s" % (p.reconfigure, why) if p.reconfigure else why
    p.slurm_config = {"digest": want, "restartDigest": restart,
                      "appliedBy": APPLIED_RESTARTED if restarted else APPLIED_RECONFIGURED,
                      "lastAppliedTime": durations.iso(ctx.now)}
