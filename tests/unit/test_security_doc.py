"""docs/security.md and the code cannot drift: its container tables are compared with both examples' pods, its
tables of system trees and of keys naming files with config_keys."""

import os

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    cluster as render,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    common as render_common,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    controller as render_controller,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    health as render_health,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    jail as render_jail,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    login as render_login,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    worker as render_worker,
)
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys, paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "security.md")
EXAMPLES = ("cpu-cluster.yaml", "gpu-cluster.yaml", "accounting-cluster-local.yaml", "ldap-cluster-local.yaml")
CONTAINER_COLUMNS = ["pod", "container", "capabilities added", "seccomp", "AppArmor", "privileged",
                     "allowPrivilegeEscalation", "runAsUser", "readOnlyRootFilesystem"]
CAPABILITY_COLUMNS = ["container", "capability", "why", "measured"]
# The renderers' lists, by the container names they are used for.
RENDER_LISTS = {
    "munge": render_common.MUNGE_CAPABILITIES,
    "slurmctld": render_controller.CONTROLLER_CAPABILITIES,
    "slurmd": render_worker.WORKER_CAPABILITIES,
    "sshd": render_login.LOGIN_CAPABILITIES,
    "populate": render_jail.POPULATE_CAPABILITIES,
    "nccl-check": render_health.NCCL_CAPABILITIES,
}


def doc_table(name, text=None):
    """The Markdown table after ``<!-- security-table: name -->``: (header cells, rows of cells)."""
    if text is None:
        with open(DOC) as f:
            text = f.read()
    marker = "<!-- security-table: %s -->" % name
    assert text.count(marker) == 1, "docs/security.md needs exactly one %r" % marker
    lines = text.split(marker, 1)[1].strip().splitlines()
    table = []
    for line in lines:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert len(table) > 2 and set("".join(table[1])) <= set("-: "), "%r is not followed by a table" % marker
    return table[0], table[2:]


def _example_objects(example):
    with open(os.path.join(ROOT, "examples", example)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    cluster = next(d for d in docs if d["kind"] == names.CLUSTER_KIND)
    return render.render_cluster(cluster, [d for d in docs if d["kind"] == names.NODESET_KIND])


def rendered_pods(objects):
    """(component label, pod spec) of every pod template: StatefulSets, Jobs and CronJobs."""
    templates = [o["spec"]["template"] for o in objects if o["kind"] in ("StatefulSet", "Job")]
    templates += [o["spec"]["jobTemplate"]["spec"]["template"] for o in objects if o["kind"] == "CronJob"]
    return [(t["metadata"]["labels"][names.LABEL_COMPONENT], t["spec"]) for t in templates]


def _unset(value):
    return "unset" if value is None else value


def container_row(component, pod, container):
    """A container's securityContext written the way the doc's table writes it."""
    sc = container.get("securityContext") or {}
    pod_sc = pod.get("securityContext") or {}
    escalation = sc.get("allowPrivilegeEscalation")
    read_only = sc.get("readOnlyRootFilesystem")
    return [
        component,
        container["name"],
        ", ".join(sc.get("capabilities", {}).get("add") or []) or "none",
        (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type", "unset"),
        (sc.get("appArmorProfile") or pod_sc.get("appArmorProfile") or {}).get("type", "unset"),
        "yes" if sc.get("privileged") else "no",
        _unset(escalation if escalation is None else str(escalation).lower()),
        str(_unset(sc.get("runAsUser", pod_sc.get("runAsUser")))),
        _unset(read_only if read_only is None else str(read_only).lower()),
    ]


def rendered_rows(example):
    rows = []
    for component, pod in rendered_pods(_example_objects(example)):
        for container in pod.get("initContainers", []) + pod["containers"]:
            row = container_row(component, pod, container)
            if row not in rows:  # every NodeSet's pods must match the one `worker` row
                rows.append(row)
    return rows


def test_doc_table_columns():
    header, _rows = doc_table("containers")
    assert header == CONTAINER_COLUMNS
    header, _rows = doc_table("capabilities")
    assert header == CAPABILITY_COLUMNS


@pytest.mark.parametrize("example", EXAMPLES)
def test_doc_states_every_container_exactly_as_rendered(example):
    _header, documented = doc_table("containers")
    rendered = rendered_rows(example)
    missing = [r for r in rendered if r not in documented]
    # A row of a container only some examples have (the NCCL check's CronJob: the GPU example; the sssd sidecars: the
    # directory's) is stale if no example renders it, or if this one renders that container otherwise.
    everywhere = [r for e in EXAMPLES for r in rendered_rows(e)]
    stale = [r for r in documented if r not in rendered and (
        r not in everywhere or (r[0], r[1]) in {(x[0], x[1]) for x in rendered})]
    assert missing == [] and stale == [], "docs/security.md differs from %s:\nrendered, not in the doc: %s\n" \
        "in the doc, not rendered: %s" % (example, missing, stale)
    # Each (pod, container) once: one row per container, whatever the number of NodeSets.
    assert len({(r[0], r[1]) for r in rendered}) == len(rendered)


def test_every_row_of_the_doc_is_rendered_by_an_example():
    _header, documented = doc_table("containers")
    rendered = [r for example in EXAMPLES for r in rendered_rows(example)]
    assert [r for r in documented if r not in rendered] == [], "in docs/security.md, rendered by no example"


def test_doc_gives_a_reason_for_exactly_the_capabilities_of_render_py():
    _header, rows = doc_table("capabilities")
    documented = {}
    for container, capability, why, measured in rows:
        assert why and measured, "%s %s needs a reason and how we know" % (container, capability)
        documented.setdefault(container, []).append(capability)
    assert documented == {name: list(caps) for name, caps in RENDER_LISTS.items() if caps}


def test_the_render_lists_are_the_ones_in_the_manifests():
    """RENDER_LISTS maps container names to the renderers' lists: the containers really get those lists."""
    for example in EXAMPLES:
        for _component, pod in rendered_pods(_example_objects(example)):
            for container in pod.get("initContainers", []) + pod["containers"]:
                added = container["securityContext"]["capabilities"].get("add") or []
                assert added == list(RENDER_LISTS.get(container["name"], [])), container["name"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_container_is_privileged_and_every_container_drops_all(example):
    for component, pod in rendered_pods(_example_objects(example)):
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, component
        assert pod["automountServiceAccountToken"] is False, component
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), component
        for container in pod.get("initContainers", []) + pod["containers"]:
            sc = container["securityContext"]
            assert sc.get("privileged", False) is False, (component, container["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (component, container["name"])


def test_doc_table_parser_reads_cells_and_refuses_a_missing_table():
    text = "x\n<!-- security-table: t -->\n| a | b |\n|---|---|\n| 1 | 2, 3 |\n\nafter | not a row\n"
    assert doc_table("t", text) == (["a", "b"], [["1", "2, 3"]])
    with pytest.raises(AssertionError):
        doc_table("t", "<!-- security-table: t -->\nno table\n")
    with pytest.raises(AssertionError):
        doc_table("other", text)


# --- nothing a job user writes is run, loaded or trusted by a privileged process -----------------------------------
def _code(cell):
    """The first `code` span of a cell."""
    return cell.split("`")[1]


def test_doc_lists_exactly_the_system_trees_no_sub_mount_may_take():
    header, rows = doc_table("system-trees")
    assert header == ["tree", "what privileged programs find there"]
    documented = [_code(row[0]) for row in rows]
    assert len(documented) == len(set(documented))
    assert set(documented) == set(paths.SUB_MOUNT_SYSTEM_TREES) | {
        "/%s*" % paths.SUB_MOUNT_SYSTEM_NAME_PREFIX}


def _key_of(cell):
    """``Key`` or ``Key=plugin`` (the plugin's short name, as config_keys spells it)."""
    key, _, value = _code(cell).partition("=")
    return "%s=%s" % (key, config_keys.plugin_names(value)[0]) if value else key


def test_doc_classifies_every_key_that_names_a_file_as_config_keys_does():
    header, rows = doc_table("program-keys")
    assert header == ["key", "what Slurm does with it", "as whom", "rule"]
    documented = set((_key_of(row[0]), row[3]) for row in rows)
    assert len(documented) == len(rows)
    expected = set((key, "program") for key in config_keys.PRIVILEGED_PROGRAM_KEYS)
    expected |= {("HealthCheckProgram", "program")}
    expected |= set(("JobCompLoc", use) for use in config_keys.JOBCOMP_LOC_USE.values()
                    if use in ("program", "loaded", "written"))
    expected |= set((key, "written") for key in config_keys.WRITTEN_FILE_KEYS)
    expected |= set((key, "user") for key in config_keys.USER_PROGRAM_KEYS)
    expected |= set(("%s=%s" % (key, plugin), "refused") for key, plugin in config_keys.CONFIG_DIR_SCRIPT_PLUGINS)
    expected |= set(("%s=%s" % (key, option.lower()), "refused") for key, (options, _) in
                    config_keys.FILE_OPTIONS.items() for option in options)
    expected |= set((key, "refused") for key in config_keys.OWNED_FILE_KEYS + config_keys.UNLISTED_PROGRAM_KEYS)
    expected |= set((key, "refused") for key in config_keys.CGROUP_CONF_OWNED)
    assert documented == expected, "docs/security.md differs from config_keys:\nnot in the doc: %s\nnot in the code: " \
        "%s" % (sorted(expected - documented), sorted(documented - expected))


def test_the_keys_the_doc_calls_owned_or_unlisted_are_refused_as_raw_keys():
    for key in config_keys.OWNED_FILE_KEYS:
        assert key in config_keys.SLURM_CONF_OWNED, key
    for key in config_keys.UNLISTED_PROGRAM_KEYS + config_keys.OWNED_FILE_KEYS:
        assert key not in config_keys.SLURM_CONF_KEYS, key
    for key in config_keys.CGROUP_CONF_OWNED:
        assert key not in config_keys.CGROUP_CONF_KEYS, key
