# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm release the collection is written for, and what that release does that the collection works around or
relies on, keyed by release. Pure.

A Slurm upgrade is a change here: a new :class:`Release` row, each field measured on the new release (the way
``docs/slurm-24.11-findings.md`` records 24.11's: the command, its output, the test that keeps it checked), and
:data:`SLURM` pointing at it. The code that works around a behaviour asks :data:`SLURM`'s field (the converge, the
renderers, the validation; each field names its callers), so a release without the quirk turns the workaround off
here. The fields marked "relied on" have no switch: a release without that behaviour needs a design change where the
field says, not a new value. The key tables of ``config_keys.py`` (allowlists, restart keys, value rules, plugin
names) are the same release's manual pages; ``scontrol.py`` parses what it prints.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Dict, NamedTuple

from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode


class Release(NamedTuple):
    """What one Slurm release does that the collection depends on (each: its finding in the release's findings
    document, then who acts on it)."""

    name: str  # "24.11": the release (its findings: docs/slurm-<name>-findings.md)
    # A resumed node keeps its last reason (tests/slurm/test_scale_in.py, fixture "resumed"): a reason holds a node
    # only while it is drained or down (plan/drains.py, through reason_holds).
    reason_outlives_drain: bool
    # D.2: a batch job whose slurmd went stays RUNNING until SlurmdTimeout, and forever once a new slurmd registers
    # under the node's name: a node whose pod goes with jobs is set DOWN in that pass, so they end as on a node
    # failure (plan/model.Plan.give_up_node; scale-in, removal and a rolling update's proceedAfter).
    jobs_outlive_their_slurmd: bool
    # A.6: a power-up's boot is a slurmd registering after the request (slurmd -b); one still running from an earlier
    # power-up never is, and the node fails at ResumeTimeout: such a pod is replaced (plan/elastic.py).
    power_up_needs_a_new_slurmd: bool
    # A.11: a reconfigure that removes a busy node's name kills its job (NODE_FAIL): a lowered maxNodes waits for the
    # names past it to be powered down (plan/elastic.plan_shrink).
    removing_a_busy_node_kills_its_job: bool
    # Measured with this release (plan/maintenance.py): a running slurmd accepts RPCs only from root and the SlurmUser
    # of the configuration it fetched, and fetches one only through such an RPC: slurmctld keeps an older SlurmUser
    # while any worker runs (plan/maintenance.plan_slurm_user).
    slurmd_trusts_its_slurm_user_only: bool
    # A.12: a batch job on powered-up nodes starts at slurmctld's next 30 s periodic check: a PrologSlurmctld that
    # waits for the nodes (names.WAIT_NODES_PROGRAM) starts it when they are up (render/slurm_conf.py).
    batch_launch_waits_for_the_periodic_check: bool
    # D (issue 24 as built), D.4: topology/block sizes its blocks at start and at every reconfigure from the nodes it
    # knows and exits ('Block not contains any nodes') when the first holds none: block only with fixed node names,
    # every NodeSet elastic (api/spec.py, api/schema.py's description).
    block_needs_known_nodes: bool
    # B.2, D.4: the base block size is the first block's unless BlockSizes names it, and slurmctld exits when a later
    # block has fewer nodes: BlockSizes is the smallest block's (render/topology.py).
    base_block_size_from_the_first_block: bool
    # Relied on. B.1: topology.conf is read at a reconfigure only, a dynamic node absent then is in no switch, and
    # `scontrol show topology` prints a leaf's Nodes= as the file wrote it, a switch of switches from the nodes it
    # holds (plan/node_labels.py asks a reconfigure when Slurm's placement differs; scontrol.parse_show_topology;
    # render/topology.py writes a switch above every leaf).
    dynamic_nodes_placed_at_a_reconfigure: bool
    # Relied on. B.3: features set by `scontrol update` on a dynamic node survive a reconfigure and restarts of slurmd
    # and slurmctld (plan/node_labels.py: no slurm.conf line, no reconfigure).
    dynamic_node_features_persist: bool
    # Relied on. C.1: `scontrol reconfigure` re-executes `slurmctld -D` in place, its listening socket kept (clients
    # queue): slurm.conf is applied in place but for config_keys.RESTART_KEYS (plan/slurm_config.py).
    reconfigure_in_place: bool
    # Relied on. Its gpu/nvidia plugin reads each GPU the container shows in /proc/driver/nvidia/gpus (device minor,
    # model), no NVML: gres.conf is AutoDetect=nvidia (render/slurm_conf.render_gres_conf).
    gpus_detected_from_proc: bool


RELEASES: Dict[str, Release] = dict((r.name, r) for r in (
    Release("24.11", reason_outlives_drain=True, jobs_outlive_their_slurmd=True, power_up_needs_a_new_slurmd=True,
            removing_a_busy_node_kills_its_job=True, slurmd_trusts_its_slurm_user_only=True,
            batch_launch_waits_for_the_periodic_check=True, block_needs_known_nodes=True,
            base_block_size_from_the_first_block=True, dynamic_nodes_placed_at_a_reconfigure=True,
            dynamic_node_features_persist=True, reconfigure_in_place=True, gpus_detected_from_proc=True),
))

# The release the images ship (Debian trixie's slurm-wlm, 24.11.5), the real-Slurm tests run, and the converge, the
# renderers and the validation are written for.
SLURM = RELEASES["24.11"]


def reason_holds(node: SlurmNode) -> bool:
    """Whether a node's reason still holds it: only while it is drained or down, whatever the release (a release
    that keeps the last reason on a resumed node, :attr:`Release.reason_outlives_drain`, shows one that holds
    nothing)."""
    return bool(node["drain"] or node["down"])
