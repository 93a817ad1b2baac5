"""One path for each thing the collection and the operator runtime do more than once, and a failure when a second one
appears (issue 38). A function of a tree: run on this repository, and on copies with a second path planted.

- The Kubernetes API is reached through the access layer only: no module but ``k8s/access.py`` imports the
  ``kubernetes`` library's API classes (clients, generated APIs, exec streams, dynamic discovery) or urllib3;
  ``k8s/errors.py`` (the one error mapping) imports only the exception classes it maps, and the two readers of a
  kubeconfig (``k8s/client.py`` for the modules, the runtime's ``kube.py``) only ``kubernetes.config`` and
  ``Configuration``; the runner's forkserver (``warm.py``) preloads the library and calls nothing.
- Every request path is a ``Resource``'s (``k8s/resources.py``): no ``/api/...`` or ``/apis/...`` string elsewhere.
- Finalizers are written by ``access.Api.update_finalizers`` only: no ``finalizers`` patch body elsewhere.
- "Is it Ready" is ``readiness.py``'s: no other comparison of a condition's type with ``"Ready"``.
- Which Slurm nodes a scale-in drains, resumes and deletes is decided in ``plan/`` only (``plan/drains.py``'s
  planners are called there and nowhere else): no adapter or module scales in on its own.
- scontrol's time format (epoch seconds, which the parsers read) is set in ``slurm/scontrol.py`` only.
- The Slurm release and what it does are ``slurm/``'s (``version.py``: the release, its quirks keyed by release; the
  key tables of ``config_keys.py``): no other file names the release or cites its findings, it asks ``version.SLURM``.
"""

import ast
import os
import re
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("plugins", os.path.join("operator", "soperator_operator"))
MU = "plugins/module_utils/"

ACCESS = MU + "k8s/access.py"
ERRORS = MU + "k8s/errors.py"
RESOURCES = MU + "k8s/resources.py"
READINESS = MU + "readiness.py"
# What each module may import of the Kubernetes client libraries (a name is allowed when it starts with one listed).
LIBRARY_ROOTS = ("kubernetes", "urllib3", "websocket")
ALLOWED_IMPORTS = {
    ACCESS: ("kubernetes", "urllib3", "websocket"),
    ERRORS: ("kubernetes.client.exceptions.ApiException", "urllib3.exceptions.HTTPError"),
    MU + "k8s/client.py": ("kubernetes.config", "kubernetes.client.Configuration"),
    "operator/soperator_operator/kube.py": ("kubernetes.config", "kubernetes.client.Configuration"),
    # The runner's forkserver imports the library once before any fork (shared by every run); it calls nothing.
    "operator/soperator_operator/warm.py": ("kubernetes",),
}
API_PATH = re.compile(r"^/apis?(/|$)")
SLURM_FOLDER = MU + "slurm/"
# The release (not a package version such as 24.11.5-4, which the jails inventory parses) or its findings document.
RELEASE_MENTION = re.compile(r"\b24\.11\b(?!\.\d)|\bfindings\b")
# plan/drains.py's planners: what a scale-in (and a removal, a maintenance) drains, resumes, keeps and deletes.
DRAIN_PLANNERS = ("plan_scale_in", "scale_in_victims", "resume_candidates", "removable_replicas", "plan_delete",
                  "statefulset_nodes")


def python_files(root):
    for tree in TREES:
        for folder, _dirs, files in os.walk(os.path.join(root, tree)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root).replace(os.sep, "/"), path


def parse(path):
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), path)


def imported_names(tree):
    """Dotted names a module imports (``a.b`` of ``import a.b``, ``a.b.c`` of ``from a.b import c``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                yield node.module + "." + alias.name


def strings(tree):
    """The string constants of a module, f-strings' literal parts included (docstrings left out)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def reads_condition_type(node):
    """``x.get("type")`` or ``x["type"]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "type"
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and key.value == "type"
    return False


def readiness_checks(tree):
    """Comparisons of a condition's type with "Ready" (``c.get("type") == "Ready"``)."""
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left] + list(node.comparators)
            if any(isinstance(s, ast.Constant) and s.value == "Ready" for s in sides) and any(
                    reads_condition_type(s) for s in sides):
                found += 1
    return found


def finalizer_writes(tree):
    """Patch bodies that set finalizers: a dict with a "finalizers" key, or a JSON patch path to them."""
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "finalizers"
                                              for k in node.keys):
            found += 1
    return found + sum(1 for s in strings(tree) if s.startswith("/metadata/finalizers"))


def called_names(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            yield func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def check(root):
    problems = []
    for rel, path in python_files(root):
        tree = parse(path)
        allowed = ALLOWED_IMPORTS.get(rel, ())
        for name in imported_names(tree):
            if name.split(".")[0] in LIBRARY_ROOTS and not any(
                    name == a or name.startswith(a + ".") for a in allowed):
                problems.append("%s imports %s: the Kubernetes API is reached through k8s/access.py only" % (
                    rel, name))
        if rel != RESOURCES:
            for text in strings(tree):
                if API_PATH.match(text):
                    problems.append("%s builds the request path %r: paths are k8s/resources.py's (Resource.path, "
                                    "group_path)" % (rel, text))
        if rel != ACCESS and finalizer_writes(tree):
            problems.append("%s writes finalizers: that is access.Api.update_finalizers' (add_finalizer, "
                            "remove_finalizer)" % rel)
        if rel != READINESS and readiness_checks(tree):
            problems.append("%s checks a Ready condition itself: ask readiness.ready (or readiness.status)" % rel)
        if not rel.startswith(MU + "plan/"):
            planners = sorted(set(DRAIN_PLANNERS) & set(called_names(tree)))
            if planners:
                problems.append("%s calls %s: which nodes a scale-in drains, resumes and deletes is plan/'s to "
                                "decide" % (rel, ", ".join(planners)))
        if rel != MU + "slurm/scontrol.py" and any("SLURM_TIME_FORMAT=" in s for s in strings(tree)):
            problems.append("%s sets scontrol's time format: run slurm/scontrol.py's SCONTROL, SHOW_NODES" % rel)
        if not rel.startswith(SLURM_FOLDER):
            with open(path, encoding="utf-8") as handle:
                found = RELEASE_MENTION.search(handle.read())
            if found:
                problems.append("%s names Slurm's release (%r): what a release does is slurm/version.py's, asked "
                                "through its SLURM" % (rel, found.group(0)))
    return problems


# --- this repository -------------------------------------------------------------------------------------------
def test_the_repository_has_one_path_for_each():
    assert check(ROOT) == []


def test_the_rules_see_every_owner():
    """Not vacuous: each owner holds what the others may not."""
    owner = parse(os.path.join(ROOT, READINESS))
    assert {"ready", "status"} <= set(n.name for n in owner.body if isinstance(n, ast.FunctionDef))
    assert finalizer_writes(parse(os.path.join(ROOT, ACCESS))) >= 1
    assert any(s.startswith("/apis/") for s in strings(parse(os.path.join(ROOT, RESOURCES))))
    assert any(n.startswith("kubernetes.stream") for n in imported_names(parse(os.path.join(ROOT, ACCESS))))
    plan_calls = set()
    for rel, path in python_files(ROOT):
        if rel.startswith(MU + "plan/"):
            plan_calls |= set(called_names(parse(path)))
    assert {"plan_scale_in", "scale_in_victims", "removable_replicas"} <= plan_calls


# --- planted second paths --------------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    for part in TREES:
        shutil.copytree(os.path.join(ROOT, part), str(tmp_path / part))
    assert check(str(tmp_path)) == []
    return tmp_path


def plant(tree, rel, text):
    path = tree / rel
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + text + "\n", encoding="utf-8")


@pytest.mark.parametrize("rel, text, problem", [
    ("plugins/module_utils/k8s/observe.py", "from kubernetes import client  # noqa",
     "plugins/module_utils/k8s/observe.py imports kubernetes.client: the Kubernetes API is reached through "
     "k8s/access.py only"),
    ("operator/soperator_operator/kube.py", "from kubernetes.stream import stream  # noqa",
     "operator/soperator_operator/kube.py imports kubernetes.stream.stream: the Kubernetes API is reached through "
     "k8s/access.py only"),
    ("plugins/module_utils/k8s/errors.py", "from kubernetes.client import ApiClient  # noqa",
     "plugins/module_utils/k8s/errors.py imports kubernetes.client.ApiClient: the Kubernetes API is reached through "
     "k8s/access.py only"),
    ("operator/soperator_operator/controller.py", "PATH = '/api/v1/namespaces/%s/pods' % 'ns'",
     "operator/soperator_operator/controller.py builds the request path '/api/v1/namespaces/%s/pods': paths are "
     "k8s/resources.py's (Resource.path, group_path)"),
    ("operator/soperator_operator/kube.py",
     "def strip(ops):\n    return [{'op': 'remove', 'path': '/metadata/finalizers/0'}]",
     "operator/soperator_operator/kube.py writes finalizers: that is access.Api.update_finalizers' (add_finalizer, "
     "remove_finalizer)"),
    ("plugins/module_utils/k8s/teardown.py", "BODY = {'metadata': {'finalizers': []}}",
     "plugins/module_utils/k8s/teardown.py writes finalizers: that is access.Api.update_finalizers' (add_finalizer, "
     "remove_finalizer)"),
    ("operator/soperator_operator/drift.py",
     "def up(pod):\n    return any(c.get('type') == 'Ready' for c in pod['status']['conditions'])",
     "operator/soperator_operator/drift.py checks a Ready condition itself: ask readiness.ready (or "
     "readiness.status)"),
    ("plugins/module_utils/api/jail_hosts.py", "def up(c):\n    return 'Ready' == c['type']",
     "plugins/module_utils/api/jail_hosts.py checks a Ready condition itself: ask readiness.ready (or "
     "readiness.status)"),
    ("plugins/module_utils/k8s/slurm_exec.py",
     "def scale_in(nodes, victims):\n    return drains.plan_scale_in(nodes, victims)",
     "plugins/module_utils/k8s/slurm_exec.py calls plan_scale_in: which nodes a scale-in drains, resumes and "
     "deletes is plan/'s to decide"),
    ("operator/soperator_operator/slurmstatus.py", "ARGV = ['env', 'SLURM_TIME_FORMAT=%s', 'scontrol']",
     "operator/soperator_operator/slurmstatus.py sets scontrol's time format: run slurm/scontrol.py's SCONTROL, "
     "SHOW_NODES"),
    ("plugins/module_utils/render/topology.py", "# Slurm 24.11 exits on an empty block (findings D.4)",
     "plugins/module_utils/render/topology.py names Slurm's release ('24.11'): what a release does is "
     "slurm/version.py's, asked through its SLURM"),
])
def test_a_second_path_fails(tree, rel, text, problem):
    plant(tree, rel, text)
    assert check(str(tree)) == [problem]
