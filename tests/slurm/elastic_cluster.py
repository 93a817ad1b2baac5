"""An elastic NodeSet on the real-Slurm harness, for test_elastic_power.py and bench_elastic.py.

slurm.conf's power-saving lines and the elastic set's ``State=CLOUD`` record are rendered by
``render/slurm_conf.power_saving_lines`` from a validated SlurmCluster and NodeSet; Slurm's power programs and
PrologSlurmctld are the controller image's ``soperator-power``; every decision about the nodes' "pods" is
``plan/elastic.decide``. ``ElasticHands`` only carries it out: a pod is a slurmd started configless with the rendered
arguments (``-b``, no ``-Z``), a deleted pod a stopped slurmd, and ``scontrol power`` runs in the cluster, as
``k8s/converger.act_elastic`` does through the API server and ``slurm_exec``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cloud_cluster import CloudCluster, CloudConfig
from resources import make_cluster, make_nodeset
from slurm_cluster import wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, spec
from ansible_collections.soperator.slurm.plugins.module_utils.plan import elastic
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf, worker
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

PROGRAM = Path(__file__).resolve().parents[2] / "images/controller/soperator-power"
NODES = ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
TEMPLATE = "tmpl"  # the one template of these pods
POWER = {"suspendTime": 10, "suspendTimeout": 5, "resumeTimeout": 20}


def rendered_lines(power=None, max_nodes: int = 3) -> str:
    cluster = spec.validate_cluster(make_cluster({"slurm": {"powerSaving": power or POWER}}))
    nodeset = spec.validate_nodeset(make_nodeset("gpu", {"elastic": {"maxNodes": max_nodes},
                                                         "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}))
    return "\n".join(slurm_conf.power_saving_lines("demo", cluster["spec"]["slurm"], [nodeset])) + "\n"


class ElasticHands:
    """Carries out ``elastic.decide`` every ``poll`` seconds against the cluster; ``fail``: names whose pod never
    starts (unschedulable). ``samples``: the running "pods" at every look; ``log``: (time, action, name). A "pod"
    has the creationTimestamp of its slurmd's start by these or earlier hands (``CREATED``: a slurmd left running
    after the hands stopped is a pod nobody removed)."""

    CREATED: dict[str, str] = {}

    def __init__(self, cluster: CloudCluster, fail=(), poll: float = 0.5, nodes=None):
        self.cluster, self.fail, self.poll = cluster, set(fail), poll
        self.nodes = list(nodes or NODES)  # the elastic NodeSet's names (maxNodes)
        self.samples: list[tuple[float, list[str]]] = []
        self.log: list[tuple[float, str, str]] = []
        self.errors: list[str] = []
        self.decide_cpu = 0.0  # CPU seconds of the planner (plan/elastic.decide) in this process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self):
        while not self._stop.wait(self.poll):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001  the test reports what failed
                self.errors.append(repr(exc))

    def step(self):
        c = self.cluster
        out = c.run(["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "node", "-o"], timeout=20).check().stdout
        nodes = scontrol.parse_show_node(out)
        live = c.running_nodes()
        self.samples.append((time.time(), live))
        pods = {n: {"metadata": {"name": n, "uid": n, "annotations": {names.ANNOTATION_TEMPLATE_HASH: TEMPLATE},
                                 "creationTimestamp": self.CREATED.get(n)},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
                for n in live}
        cpu = time.process_time()
        d = elastic.decide(self.nodes, nodes, pods, TEMPLATE, 0)
        self.decide_cpu += time.process_time() - cpu
        for name, _uid in d.delete:
            c.stop_node(name)
            self.CREATED.pop(name, None)
            self.log.append((time.time(), "delete", name))
        for name in d.create:
            if name in self.fail:
                continue
            # The rendered container's arguments, the pod name for $(SLURMD_NODENAME).
            args = worker.elastic_args()
            extra = tuple(a for a in args[args.index("-D") + 1:args.index("-N")])
            self.CREATED[name] = durations.iso(time.time())  # the API server's stamp, before the kubelet starts it
            c.start_node(name, extra_args=extra, wait=None)
            self.log.append((time.time(), "create", name))
        for how, names_ in (("up", d.power_up), ("down asap", d.power_down), ("down force", d.power_down_force)):
            if names_:
                c.run(["scontrol", "power", *how.split(), ",".join(names_)]).check()
                self.log.append((time.time(), "power " + how, ",".join(names_)))


class ElasticCluster(CloudCluster):
    """The harness's cloud cluster whose power-saving lines and CLOUD record are the rendered ones (not its own
    CloudSet lines): it waits for the rendered names to be powered down at start."""

    nodes = NODES

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        wait_for(lambda: powered_down(self, self.nodes), timeout, "every elastic node idle~", interval=0.3)


def elastic_config(power=None, max_nodes: int = 3, **more) -> CloudConfig:
    """The harness's cluster with the rendered lines, the image's program under its four names; ``more``: other
    CloudConfig fields (topology)."""
    text = PROGRAM.read_text()
    return CloudConfig(cloud_sets=[], dynamic_sets=["gpu"], power={}, extra=rendered_lines(power, max_nodes),
                       programs=dict([(path, text) for _key, path in names.POWER_PROGRAMS]
                                     + [(names.WAIT_NODES_PROGRAM, text)]), **more)


def prepare_started(c: CloudCluster) -> None:
    """As the controller image does: SlurmUser owns slurmctld's log directory, where the program records."""
    c.run(["chown", "slurm:slurm", "/var/log/slurm"]).check()


def powered_down(c: CloudCluster, nodes=None) -> bool:
    states = c.states()
    return all(states.get(n) == "idle~" for n in nodes or NODES)


def power_log(c: CloudCluster) -> list[list[str]]:
    path = c.root / names.POWER_LOG.lstrip("/")
    return [line.split(" ", 3) for line in path.read_text().splitlines()] if path.exists() else []
