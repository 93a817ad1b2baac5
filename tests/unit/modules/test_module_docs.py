"""Each module's DOCUMENTATION (with its doc fragments) matches its argument spec exactly, and renders.

ansible-test's validate-modules checks the same and more; this runs in milliseconds under plain pytest.
"""

import importlib
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import AUTH_ARG_SPEC

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Every module the collection ships: a new one cannot escape these checks.
MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "modules")) if f.endswith(".py"))
PKG = "ansible_collections.soperator.slurm.plugins"


def load_module(name):
    return importlib.import_module("%s.modules.%s" % (PKG, name))


def fragment(ref):
    """``soperator.slurm.attributes.READ_ONLY`` -> that fragment's parsed YAML."""
    parts = ref.split(".")
    assert parts[:2] == ["soperator", "slurm"], ref
    mod = importlib.import_module("%s.doc_fragments.%s" % (PKG, parts[2]))
    return yaml.safe_load(getattr(mod.ModuleDocFragment, parts[3] if len(parts) > 3 else "DOCUMENTATION"))


def merge(into, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + [v for v in value if v not in into[key]]
        elif key not in into:
            into[key] = value


def full_doc(module):
    doc = yaml.safe_load(module.DOCUMENTATION)
    for ref in doc.get("extends_documentation_fragment", []):
        merge(doc, fragment(ref))
    return doc


def from_doc(options):
    out = {}
    for name, opt in (options or {}).items():
        out[name] = {
            "type": opt.get("type", "str"),
            "required": opt.get("required", False),
            "default": opt.get("default"),
            "elements": opt.get("elements"),
            "aliases": sorted(opt.get("aliases", [])),
            "choices": opt.get("choices"),
            "options": from_doc(opt.get("suboptions")) if opt.get("suboptions") else None,
        }
    return out


def from_spec(spec):
    out = {}
    for name, opt in spec.items():
        out[name] = {
            "type": opt.get("type", "str"),
            "required": opt.get("required", False),
            "default": opt.get("default"),
            "elements": opt.get("elements"),
            "aliases": sorted(opt.get("aliases", [])),
            "choices": opt.get("choices"),
            "options": from_spec(opt["options"]) if opt.get("options") else None,
        }
    return out


@pytest.mark.parametrize("name", MODULES)
def test_documentation_matches_argument_spec(name):
    module = load_module(name)
    assert from_doc(full_doc(module)["options"]) == from_spec(module.argument_spec())


@pytest.mark.parametrize("name", MODULES)
def test_documentation_is_complete(name):
    module = load_module(name)
    doc = full_doc(module)
    assert doc["module"] == name
    assert doc["short_description"] and doc["description"] and doc["author"]
    assert set(doc["attributes"]) >= {"check_mode", "diff_mode", "idempotent"}
    for attr in ("check_mode", "diff_mode", "idempotent"):
        assert doc["attributes"][attr]["support"] in ("full", "partial", "none", "N/A"), attr
        assert doc["attributes"][attr]["description"], attr
    for opt_name, opt in doc["options"].items():
        assert opt.get("description"), opt_name
    examples = yaml.safe_load(module.EXAMPLES)
    assert examples and any("soperator.slurm." + name in task for task in examples)
    assert all(any(k.startswith(("soperator.slurm.", "ansible.builtin.")) for k in task) for task in examples)
    returns = yaml.safe_load(module.RETURN)
    for key, ret in returns.items():
        assert ret.get("description") and ret.get("returned") and ret.get("type"), key


def test_k8s_auth_fragment_matches_shared_spec():
    assert from_doc(fragment("soperator.slurm.k8s_auth")["options"]) == from_spec(AUTH_ARG_SPEC)


def test_secrets_are_no_log():
    module = load_module("apply_manifests")
    spec = module.argument_spec()
    assert spec["api_key"]["no_log"] is True
    assert not spec["manifests"].get("no_log")  # masked value by value instead, see objects.secret_values


@pytest.mark.parametrize("name", MODULES)
def test_ansible_doc_renders(name, collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, "-t", "module", "soperator.slurm." + name], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "soperator.slurm.%s" % name in out.stdout
    assert "[WARNING]" not in out.stderr, out.stderr
