"""The frozen Plan the adapters get (plan/decided.py): every field a planner fills reaches it, it cannot be changed,
and the job ids an adapter adds make a new Plan."""

import dataclasses

import pytest
from test_converge import NOW, cluster, line, nodeset, slurm, steady

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, decided, model

# Where a Draft field is named differently in the tree (its concern already says the rest).
RENAMED = {"events": "power", "label_events": "labels"}


def leaves(cls):
    return [f.name for f in dataclasses.fields(cls)]


def test_every_field_a_planner_fills_is_in_exactly_one_concern():
    filled = set(vars(model.Draft()))
    concerns = [f.type for f in dataclasses.fields(decided.Plan) if f.name != "read_mounted_config"]
    found = [name for concern in concerns for name in leaves(getattr(decided, concern))] + ["read_mounted_config"]
    assert len(found) == len(set(found))
    assert sorted(RENAMED.get(name, name) for name in filled) == sorted(found)


def test_a_plan_and_each_of_its_concerns_refuse_a_change():
    p = converge.plan(cluster(), [nodeset(2)], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.report = p.report
    for concern in ("definition", "objects", "slurm", "pods", "events", "report"):
        part = getattr(p, concern)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, leaves(type(part))[0], None)


def test_the_job_ids_an_adapter_adds_make_a_new_plan_and_leave_this_one_as_decided():
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_SCALE_IN, when=NOW - 601, cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(1, drainTimeout="10m")], dict(steady(2), slurm=slurm(line("demo-cpu-0"),
                                                                                               busy)), NOW)
    assert p.nodes_with_jobs() == ["demo-cpu-1"]
    named = p.with_jobs({"demo-cpu-1": ["41"], "demo-cpu-0": ["9"]})
    assert [g["jobs"] for g in named.pods.give_up] == [["41"]]
    assert [g["jobs"] for g in p.pods.give_up] == [None]
    # Everything else is the same decision.
    assert dataclasses.replace(named, pods=p.pods, report=p.report) == p
