# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Maintenance and SlurmUser: when the cluster may scale to zero, and which user slurmctld runs as. Pure.

``spec.maintenance: true`` drains every worker with ``soperator: maintenance`` and scales the cluster to zero only
once they are idle (or their drain is older than an ``onDrainTimeout: Proceed`` NodeSet's ``drainTimeout``); when it
ends, those drains are resumed. A running slurmd accepts RPCs only from root and the SlurmUser of the configuration
it fetched, so slurmctld keeps an older SlurmUser while any worker runs and changes it at a maintenance or with no
worker (:func:`plan_slurm_user`).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import modes
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_DRAINING, REQUEUE_SLURM_UNREACHABLE, Context, Draft, replicas,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan.scale import resume_ours
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import SLURM
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


def plan_maintenance(p: Draft, ctx: Context) -> bool:
    """Whether the cluster is ready for maintenance now (every worker drained and idle, or nothing runs): then it
    is rendered with every StatefulSet at zero. Writes ``p.drain`` (maintenance), ``p.resume`` (maintenance over;
    health drains nobody else would resume), ``p.give_up`` and the waits. Each NodeSet's mode says how its workers
    go (``modes.Mode.maintenance``)."""
    spec, slurm = ctx.spec, ctx.slurm
    controller = ctx.statefulsets.get(names.controller_name(ctx.name))
    ours = [n for view in ctx.views for n in modes.of(view).nodes(ctx, view)]
    ready = False
    if spec["maintenance"]:
        if controller is None or replicas(controller) == 0:
            ready = True  # nothing runs jobs: already down (or never started)
        elif slurm is None:
            p.wait(REQUEUE_SLURM_UNREACHABLE, "maintenance waits for slurmctld to answer (to drain first)")
        else:
            busy = [n for view in ctx.views for n in modes.of(view).maintenance(p, ctx, view)]
            if busy:
                p.wait(REQUEUE_DRAINING, "maintenance waits for %s to drain" % ", ".join(busy))
            else:
                ready = True
                for view in ctx.views:
                    modes.of(view).maintenance_done(p, ctx, view)
    elif slurm is not None:
        resume_ours(p, slurm, ours, (names.REASON_MAINTENANCE,))
    if slurm is not None and not values.health_enabled(spec):
        # The health program no longer runs: nobody else would ever resume the drains it left (NCCL drains are a
        # measurement, and stay for an administrator).
        for node_name in ours:
            node = slurm.get(node_name)
            reason = (node.get("reason") if node else None) or ""
            if node and node["drain"] and reason.startswith(names.HEALTH_REASON_PREFIX) and not reason.startswith(
                    names.NCCL_REASON_PREFIX) and node_name not in p.resume:
                p.resume.append(node_name)
    return ready


def running_slurm_user(controller: KubeObject | None) -> str | None:
    """The SlurmUser the live controller StatefulSet's slurmctld runs as; None without a live one. A template without
    the annotation is a release's from before it, whose slurmctld ran as root. Only the two users a release ever
    rendered are believed (the value goes into slurm.conf): anything else is read as the current one."""
    if controller is None:
        return None
    template_md = (controller.get("spec") or {}).get("template", {}).get("metadata") or {}
    user = (template_md.get("annotations") or {}).get(names.ANNOTATION_SLURM_USER, names.SLURM_USER_BEFORE_ANNOTATION)
    return user if user in (names.SLURM_USER_BEFORE_ANNOTATION, names.SLURM_USER) else names.SLURM_USER


def plan_slurm_user(p: Draft, ctx: Context, maintenance_ready: bool) -> str:
    """The SlurmUser to render slurmctld with; writes ``p.slurm_user_kept`` (why it keeps an older one).

    A running slurmd accepts RPCs only from root and the SlurmUser of the configuration it fetched, and re-fetches
    one only through such an RPC (``SLURM.slurmd_trusts_its_slurm_user_only``: after slurmctld restarted as another
    user, every reconfigure, ping and job termination is a "Security violation", a finished job stays COMPLETING).
    A cluster whose slurmctld runs as another user (an upgrade from a release before this one: root) keeps it while
    any worker runs; it changes when none does: maintenance, or every NodeSet at zero."""
    running = running_slurm_user(ctx.statefulsets.get(names.controller_name(ctx.name)))
    has_workers = any(modes.of(view).has_workers(ctx, view) for view in ctx.views)
    if (running is None or running == names.SLURM_USER or maintenance_ready or not has_workers
            or not SLURM.slurmd_trusts_its_slurm_user_only):
        return names.SLURM_USER
    p.slurm_user_kept = ("slurmctld keeps running as %s, not %s: Slurm cannot change SlurmUser under running "
                         "slurmd without stranding their jobs; it changes at the next maintenance "
                         "(spec.maintenance: true, then false) or when no worker runs" % (running, names.SLURM_USER))
    return running
