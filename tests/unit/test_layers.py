"""Imports point one way: pure core <- adapters <- entry points; the operator runtime uses only the pure core.

- pure core: ``plugins/module_utils/<name>.py`` without a leading underscore: stdlib and other pure modules only;
- adapters: ``plugins/module_utils/_<name>.py``: may use the pure core and third-party clients, never a module,
  an action/filter plugin or the operator;
- entry points: ``plugins/modules``, ``plugins/action``, ``plugins/filter``: may use both;
- the operator runtime (``operator/soperator_operator``): the collection's pure core only; its own pure modules
  import no ``kubernetes`` and no Ansible.
"""

import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "ansible_collections.soperator.slurm.plugins"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
RUNTIME_PURE = ("watches", "extravars", "workqueue", "classify", "conditions", "lease", "metrics", "triggers",
                "drift")


def imports(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append("." + (node.module or ""))
            elif node.module:
                found += ["%s.%s" % (node.module, alias.name) if node.module.endswith("module_utils") else node.module
                          for alias in node.names]
    return found


def py_files(*parts):
    base = os.path.join(ROOT, *parts)
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs
                  if f.endswith(".py") and f != "__init__.py")


def module_utils_name(imported):
    prefix = PKG + ".module_utils."
    if not imported.startswith(prefix):
        return None
    name = imported[len(prefix):]
    return "_" + name if name.startswith("k8s") else name


def _adapter(path):
    return os.sep + "k8s" + os.sep in path


@pytest.mark.parametrize("path", [p for p in py_files("plugins", "module_utils") if not _adapter(p)],
                         ids=os.path.basename)
def test_the_pure_core_imports_only_the_stdlib_and_itself(path):
    for imported in imports(path):
        top = imported.split(".")[0]
        name = module_utils_name(imported)
        if name is not None:
            assert not name.startswith("_"), "%s imports the adapter %s" % (path, name)
        else:
            assert top in STDLIB, "%s imports %s" % (path, imported)


@pytest.mark.parametrize("path", [p for p in py_files("plugins", "module_utils") if _adapter(p)],
                         ids=os.path.basename)
def test_adapters_import_no_entry_point(path):
    for imported in imports(path):
        assert not imported.startswith((PKG + ".modules", PKG + ".action", PKG + ".filter")), (path, imported)
        assert not imported.startswith("soperator_operator"), (path, imported)


# warm.py runs nothing: it only imports, in the runs' forkserver, what the runs will import (the converge adapter
# among them), so that each forked run finds it loaded.
@pytest.mark.parametrize("path", [p for p in py_files("operator", "soperator_operator")
                                  if os.path.basename(p) != "warm.py" and "callbacks" not in p],
                         ids=os.path.basename)
def test_the_runtime_uses_only_the_collections_pure_core(path):
    pure = os.path.basename(path)[:-3] in RUNTIME_PURE
    for imported in imports(path):
        if imported.startswith("ansible_collections"):
            name = module_utils_name(imported)
            assert name is not None and not name.startswith("_"), "%s imports %s" % (path, imported)
        if pure:
            assert imported.split(".")[0] not in ("kubernetes", "ansible", "ansible_runner", "urllib3"), \
                "%s (pure) imports %s" % (path, imported)
