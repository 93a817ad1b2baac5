"""Imports point one way, folder by folder; every Python file of the collection and of the operator runtime is
classified, so a file added or renamed cannot drop out of the rules.

The collection's ``plugins/module_utils``, lowest layer first (a folder may import its own modules and those of the
folders before it, never one after it):

- the shared vocabulary (``names.py``, ``kinds.py``, ``digests.py``, ``types.py``, ``readiness.py``), then
  ``slurm/``, ``api/``, ``render/``, ``plan/``: the pure core, stdlib only and no I/O: no ``os``, ``subprocess``,
  ``time``, ``random``, ``secrets``, ``socket``, ``uuid``, threads or processes, and no clock (a call of ``now``,
  ``utcnow``, ``today``, ``monotonic``);
- ``k8s/``: the adapters; they may also use third-party clients (kubernetes, urllib3, cryptography, Ansible's
  module_utils, PyYAML), never a module, an action or filter plugin, nor the operator.

The entry points (``plugins/modules``, ``plugins/action`` and its shared base ``plugins/plugin_utils``,
``plugins/filter``, ``plugins/doc_fragments``, ``plugins/inventory``, ``plugins/connection``) may use all of
``module_utils``.

The operator runtime (``operator/soperator_operator``) has layers of its own: its pure modules (decisions: no
``kubernetes``, no Ansible, no I/O module) may import only each other and the collection's pure core; its adapters
may also import each other, third-party libraries and the collection's Kubernetes access layer (``k8s/access.py``,
``k8s/slurm_exec.py``: one error mapping, one request path, one exec); its entry (``__main__``, ``controller``) may
import any of the runtime. ``warm.py`` (the forkserver's imports) also imports what a run imports, the module's work
(``k8s/slurm_cluster.py``). The runtime's imports have no cycle.

The checker is a function of a tree: the tests below run it on this repository, and on copies of it with an upward
import, an ``import subprocess`` in the pure core, a cycle in the runtime and an unclassified file planted.
"""

import ast
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MU = "ansible_collections.soperator.slurm.plugins.module_utils"
PLUGINS = "ansible_collections.soperator.slurm.plugins"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

# The collection's layers, lowest first; each may import itself and those before it.
VOCABULARY = ("names", "kinds", "digests", "types", "readiness")
ORDER = ("vocabulary", "slurm", "api", "render", "plan", "k8s")
PURE = ("vocabulary", "slurm", "api", "render", "plan")
ENTRY_FOLDERS = ("modules", "action", "plugin_utils", "filter", "doc_fragments", "inventory", "connection")
NO_IO = {"os", "subprocess", "time", "random", "secrets", "socket", "uuid", "threading", "multiprocessing", "signal",
         "shutil", "tempfile", "asyncio", "select", "urllib", "http", "ssl"}
CLOCK_CALLS = {"now", "utcnow", "today", "monotonic", "perf_counter", "urandom"}
ADAPTER_THIRD_PARTY = {"kubernetes", "urllib3", "cryptography", "ansible", "yaml"}

# The operator runtime's layers.
RUNTIME = "operator/soperator_operator"
RUNTIME_PURE = ("watches", "extravars", "workqueue", "classify", "conditions", "lease", "metrics", "triggers",
                "drift")
RUNTIME_ADAPTERS = ("kube", "cache", "leader", "runner", "nodes", "slurmstatus", "server", "warm",
                    "callbacks.soperator_events")
RUNTIME_ENTRY = ("__init__", "__main__", "controller")
RUNTIME_ACCESS = ("k8s/access", "k8s/slurm_exec")  # the collection's Kubernetes access layer
WARM_ALSO = ("k8s/slurm_cluster",)


def imports(path):
    """[(imported name, level)] of a file: ``a.b`` of ``import a.b``, ``a.b.c`` of ``from a.b import c``."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(base + "." + alias.name if base else alias.name, node.level) for alias in node.names]
    return found, tree


def clock_calls(tree):
    return sorted(set(node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
                      and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_CALLS))


def py_files(root, *parts):
    base = os.path.join(root, *parts)
    return sorted(os.path.relpath(os.path.join(d, f), base) for d, _, fs in os.walk(base) for f in fs
                  if f.endswith(".py"))


def mu_layer(rel):
    """The layer of a module_utils file (its path relative to module_utils), None when unclassified."""
    parts = rel[:-3].split(os.sep)
    if len(parts) == 1:
        return "vocabulary" if parts[0] in VOCABULARY + ("__init__",) else None
    return parts[0] if len(parts) == 2 and parts[0] in ORDER else None


def mu_target(root, name):
    """The module_utils file an imported dotted name reaches (``api/spec``), None when it is not one."""
    if not name.startswith(MU + "."):
        return None
    parts = name[len(MU) + 1:].split(".")
    base = os.path.join(root, "plugins", "module_utils")
    for count in (2, 1):  # a module in a folder, else a top-level module (or a folder: its __init__)
        path = os.path.join(base, *parts[:count])
        if os.path.isfile(path + ".py"):
            return "/".join(parts[:count])
        if count == 1 and os.path.isdir(path):
            return parts[0] + "/__init__"
    return "/".join(parts)


def target_layer(target):
    return mu_layer(target.replace("/", os.sep) + ".py") or target.split("/")[0]


def runtime_module(rel):
    return rel[:-3].replace(os.sep, ".")


def runtime_layer(module):
    for layer, members in (("pure", RUNTIME_PURE), ("adapter", RUNTIME_ADAPTERS), ("entry", RUNTIME_ENTRY)):
        if module in members:
            return layer
    return None


def runtime_target(module, name, level):
    """The runtime module a relative (or ``soperator_operator.``) import reaches, None for anything else."""
    if level:
        package = module.split(".")[:-1][:len(module.split(".")) - level] if level > 1 else module.split(".")[:-1]
        return ".".join(package + [name]) if name else None
    if name.startswith("soperator_operator."):
        return name[len("soperator_operator."):]
    return None


def find_cycle(graph):
    """One import cycle of ``graph`` ({module: set of modules}) as a list, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def check_collection(root):
    problems = []
    base = os.path.join(root, "plugins", "module_utils")
    graph = {}
    for rel in py_files(root, "plugins", "module_utils"):
        where = "plugins/module_utils/" + rel.replace(os.sep, "/")
        layer = mu_layer(rel)
        if layer is None:
            problems.append("%s: in no layer (add its folder to the rules)" % where)
            continue
        found, tree = imports(os.path.join(base, rel))
        me = rel[:-3].replace(os.sep, "/")
        graph[me] = set()
        for name, level in found:
            if level:
                problems.append("%s: relative import %s (Ansible needs absolute ones)" % (where, name))
                continue
            target = mu_target(root, name)
            top = name.split(".")[0]
            if target is not None:
                graph[me].add(target)
                other = target_layer(target)
                if other not in ORDER:
                    problems.append("%s imports %s, which is in no layer" % (where, name))
                elif ORDER.index(other) > ORDER.index(layer):
                    problems.append("%s (%s) imports %s (%s): against the layers" % (where, layer, name, other))
            elif name.startswith(PLUGINS) or top == "soperator_operator":
                problems.append("%s imports %s: module_utils may not import an entry point" % (where, name))
            elif layer in PURE:
                if top not in STDLIB:
                    problems.append("%s (pure) imports %s: the pure core uses the stdlib only" % (where, name))
                elif top in NO_IO:
                    problems.append("%s (pure) imports %s: no I/O, clock or randomness in the pure core (inject "
                                    "it)" % (where, name))
            elif top not in STDLIB and top not in ADAPTER_THIRD_PARTY:
                problems.append("%s imports %s: not a library the adapters may use" % (where, name))
        if layer in PURE and clock_calls(tree):
            problems.append("%s (pure) calls %s: no clock in the pure core (pass the time in)"
                            % (where, ", ".join(clock_calls(tree))))
    cycle = find_cycle(graph)
    if cycle:
        problems.append("module_utils import cycle: %s" % " -> ".join(cycle))
    for folder in os.listdir(os.path.join(root, "plugins")):
        if folder == "module_utils" or not os.path.isdir(os.path.join(root, "plugins", folder)):
            continue
        for rel in py_files(root, "plugins", folder):
            where = "plugins/%s/%s" % (folder, rel)
            if folder not in ENTRY_FOLDERS:
                problems.append("%s: in no layer (plugins/%s is not an entry point folder)" % (where, folder))
                continue
            for name, _level in imports(os.path.join(root, "plugins", folder, rel))[0]:
                if name.split(".")[0] == "soperator_operator":
                    problems.append("%s imports %s: the collection never imports the operator" % (where, name))
    return problems


def check_runtime(root):
    problems = []
    graph = {}
    modules = set(runtime_module(rel) for rel in py_files(root, RUNTIME))
    for rel in py_files(root, RUNTIME):
        module = runtime_module(rel)
        where = "%s/%s" % (RUNTIME, rel.replace(os.sep, "/"))
        layer = runtime_layer(module)
        if layer is None:
            problems.append("%s: in no layer of the runtime (add it to the rules)" % where)
            continue
        graph[module] = set()
        for name, level in imports(os.path.join(root, RUNTIME, rel))[0]:
            inner = runtime_target(module, name, level)
            top = name.split(".")[0]
            if inner is not None:
                if inner not in modules:  # ``from .kube import describe``, ``from . import __version__``
                    inner = inner.rpartition(".")[0] or "__init__"
                graph[module].add(inner)
                other = runtime_layer(inner)
                allowed = {"pure": ("pure",), "adapter": ("pure", "adapter"),
                           "entry": ("pure", "adapter", "entry")}[layer]
                if other not in allowed:
                    problems.append("%s (%s) imports %s (%s): against the runtime's layers"
                                    % (where, layer, name, other))
                continue
            target = mu_target(root, name)
            if target is not None:
                folder = target_layer(target)
                reach = RUNTIME_ACCESS + (WARM_ALSO if module == "warm" else ())
                if folder == "k8s" and (layer == "pure" or target not in reach):
                    problems.append("%s (%s) imports %s: the runtime reaches Kubernetes only through the access "
                                    "layer (%s), and only from its adapters" % (where, layer, name,
                                                                                 ", ".join(RUNTIME_ACCESS)))
                elif folder not in ORDER:
                    problems.append("%s imports %s, which is in no layer" % (where, name))
            elif name.startswith(PLUGINS):
                problems.append("%s imports %s: the runtime uses module_utils only" % (where, name))
            elif layer == "pure" and (top in ("kubernetes", "ansible", "ansible_runner", "urllib3")
                                      or top in {"subprocess", "socket", "multiprocessing", "signal", "shutil"}):
                problems.append("%s (pure) imports %s: the runtime's pure modules decide, they do no I/O" % (
                    where, name))
    cycle = find_cycle(graph)
    if cycle:
        problems.append("runtime import cycle: %s" % " -> ".join(cycle))
    return problems


def check(root):
    return check_collection(root) + check_runtime(root)


# --- this repository -------------------------------------------------------------------------------------------
def test_the_repository_keeps_its_layers():
    assert check(ROOT) == []


ALL_FILES = (["plugins/module_utils/" + r.replace(os.sep, "/") for r in py_files(ROOT, "plugins", "module_utils")]
             + ["%s/%s" % (RUNTIME, r.replace(os.sep, "/")) for r in py_files(ROOT, RUNTIME)])


@pytest.fixture(scope="module")
def repository_problems():
    return check(ROOT)


@pytest.mark.parametrize("path", ALL_FILES)
def test_each_file_keeps_its_layer(path, repository_problems):
    """The same rules, said per file: a failure names its file."""
    assert [p for p in repository_problems if p.startswith(path + " ") or p.startswith(path + ":")] == []


def test_every_file_is_classified():
    """Not vacuous: the rules see every module_utils file and every runtime module."""
    seen = py_files(ROOT, "plugins", "module_utils")
    assert all(mu_layer(rel) for rel in seen)
    assert set(runtime_module(rel) for rel in py_files(ROOT, RUNTIME)) == set(
        RUNTIME_PURE + RUNTIME_ADAPTERS + RUNTIME_ENTRY)
    assert {mu_layer(rel) for rel in seen} == set(ORDER)


# --- planted violations ----------------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    """A copy of the collection's plugins and the runtime, to plant violations in."""
    shutil.copytree(os.path.join(ROOT, "plugins"), str(tmp_path / "plugins"))
    shutil.copytree(os.path.join(ROOT, RUNTIME), str(tmp_path / RUNTIME))
    assert check(str(tmp_path)) == []
    return tmp_path


def plant(tree, rel, text):
    path = tree / rel
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")


def test_an_upward_import_fails(tree):
    # api/restore.py: a module plan/model does not import (planted in one it does, the import is also a cycle).
    plant(tree, "plugins/module_utils/api/restore.py", "from %s.plan import model  # noqa" % MU)
    problems = check(str(tree))
    assert problems == ["plugins/module_utils/api/restore.py (api) imports %s.plan.model (plan): against the "
                        "layers" % MU]


def test_an_adapter_in_the_pure_core_fails(tree):
    plant(tree, "plugins/module_utils/render/objects.py", "from %s.k8s import access  # noqa" % MU)
    assert any("render/objects.py (render) imports %s.k8s.access (k8s)" % MU in p for p in check(str(tree)))


def test_subprocess_in_the_pure_core_fails(tree):
    plant(tree, "plugins/module_utils/plan/scale.py", "import subprocess  # noqa")
    assert check(str(tree)) == ["plugins/module_utils/plan/scale.py (pure) imports subprocess: no I/O, clock or "
                                "randomness in the pure core (inject it)"]


def test_a_clock_in_the_pure_core_fails(tree):
    plant(tree, "plugins/module_utils/api/durations.py", "NOW = datetime.datetime.now()")
    assert check(str(tree)) == ["plugins/module_utils/api/durations.py (pure) calls now: no clock in the pure core "
                                "(pass the time in)"]


def test_a_cycle_in_the_runtime_fails(tree):
    plant(tree, f"{RUNTIME}/classify.py", "from . import triggers  # noqa")
    plant(tree, f"{RUNTIME}/triggers.py", "from . import classify  # noqa")
    problems = check(str(tree))
    assert len(problems) == 1 and problems[0].startswith("runtime import cycle: ")
    assert {"classify", "triggers"} <= set(problems[0].split(": ")[1].split(" -> "))


def test_the_runtime_reaches_kubernetes_only_through_the_access_layer(tree):
    plant(tree, f"{RUNTIME}/nodes.py", "from %s.k8s import apply  # noqa" % MU)
    plant(tree, f"{RUNTIME}/drift.py", "from %s.k8s import access  # noqa" % MU)
    problems = sorted(check(str(tree)))
    assert len(problems) == 2
    assert problems[0].startswith("%s/drift.py (pure) imports %s.k8s.access" % (RUNTIME, MU))
    assert problems[1].startswith("%s/nodes.py (adapter) imports %s.k8s.apply" % (RUNTIME, MU))


def test_a_runtime_pure_module_importing_kubernetes_or_an_adapter_fails(tree):
    # (triggers: a pure module the adapter does not import, so that no cycle is reported beside)
    plant(tree, f"{RUNTIME}/triggers.py", "import kubernetes  # noqa\nfrom . import kube  # noqa")
    assert check(str(tree)) == [
        "%s/triggers.py (pure) imports kubernetes: the runtime's pure modules decide, they do no I/O" % RUNTIME,
        "%s/triggers.py (pure) imports kube (adapter): against the runtime's layers" % RUNTIME]


@pytest.mark.parametrize("rel", ["plugins/module_utils/helpers.py", "plugins/module_utils/cache/memo.py",
                                 f"{RUNTIME}/newthing.py", "plugins/lookup/thing.py"])
def test_a_file_added_outside_the_rules_fails(tree, rel):
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    (tree / rel).write_text("X = 1\n", encoding="utf-8")
    problems = check(str(tree))
    assert len(problems) == 1 and problems[0].startswith(rel + ": in no layer")


def test_a_renamed_file_keeps_no_exemption(tree):
    """A runtime module renamed is unknown to the rules until they name it."""
    os.rename(str(tree / RUNTIME / "lease.py"), str(tree / RUNTIME / "leases.py"))
    plant(tree, f"{RUNTIME}/leader.py", "from . import leases  # noqa")
    problems = check(str(tree))
    assert "%s/leases.py: in no layer of the runtime (add it to the rules)" % RUNTIME in problems
