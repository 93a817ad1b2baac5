"""The converger's hands for elastic NodeSets (``Converger.act_elastic``): what plan/elastic decided is carried out
in order (pods created, scontrol power run with validated names), a pod that exists already is left for a later pass,
a pod the API server refuses is a warning and an Event, never a failed pass; check mode writes nothing.

The Kubernetes API is a recording stand-in with the access layer's own error classes; the real API server is in the
integration suite's converges."""

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import Converger
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import Slurm
from ansible_collections.soperator.slurm.plugins.module_utils.plan import decided
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import Draft


class RecordingApi(object):
    def __init__(self, refuse=()):
        self.created, self.events, self.refuse = [], [], dict(refuse)

    def create(self, obj, what=None):
        name = obj["metadata"]["name"]
        if name in self.refuse:
            raise self.refuse[name]("create pod %s: %s" % (name, "refused"))
        self.created.append(name)

    def event(self, involved, event_type, reason, message, component, now):
        self.events.append((involved["metadata"]["name"], event_type, reason))


def converger(api, check_mode=False):
    conv = Converger.__new__(Converger)
    conv.api, conv.namespace, conv.check_mode, conv.warnings = api, "hpc", check_mode, []
    conv.field_manager, conv.clock = "test", lambda: 1_700_000_000
    return conv


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"slurm.soperator.dev/nodeset": "gpu"}}}


def plan():
    p = Draft()
    p.valid_nodesets = [{"metadata": {"name": "gpu", "uid": "u"}}]
    p.create_pods = [pod("demo-gpu-0"), pod("demo-gpu-1"), pod("demo-gpu-2")]
    p.power_up, p.power_down_force = ["demo-gpu-5"], ["demo-gpu-4"]
    p.events = [("gpu", "Normal", "PoweredUp", "Slurm powered up node demo-gpu-0: creating its pod")]
    return decided.freeze(p)


def test_pods_made_power_commands_run_and_a_refusal_is_an_event():
    argvs = []
    api = RecordingApi({"demo-gpu-1": access.Conflict, "demo-gpu-2": access.Invalid})
    conv = converger(api)
    done = {}
    conv.act_elastic(plan(), Slurm(lambda argv: argvs.append(argv) or (0, "", "")), done)
    assert api.created == ["demo-gpu-0"] and done["created_pods"] == ["demo-gpu-0"]
    assert argvs == [["scontrol", "power", "up", "demo-gpu-5"], ["scontrol", "power", "down", "force", "demo-gpu-4"]]
    assert [e[2] for e in api.events] == ["PoweredUp", "PodRefused"]
    assert len(conv.warnings) == 1 and "demo-gpu-2" in conv.warnings[0]


def test_check_mode_writes_nothing_and_says_what_it_would_do():
    argvs = []
    api = RecordingApi()
    done = {}
    converger(api, check_mode=True).act_elastic(plan(), Slurm(lambda argv: argvs.append(argv) or (0, "", "")), done)
    assert api.created == [] and argvs == [] and api.events == []
    assert done["created_pods"] == ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
    assert done["powered"] == {"up": ["demo-gpu-5"], "down force": ["demo-gpu-4"]}


def test_power_refuses_a_name_that_is_not_a_pod_name():
    import pytest

    with pytest.raises(ValueError):
        Slurm(lambda argv: (0, "", "")).power(["demo-gpu-[0-9]"], "up")
