"""execution-environment.yml is a valid ansible-builder 3 definition: `ansible-builder create` (which only writes a
build context, no container engine) accepts it with the collection artifact beside it, as the comment at its top
tells users to build; the context installs the built collection and kubernetes.core; and ansible-builder finds the
collection's Python requirements (meta/execution-environment.yml) in the installed collection.

The image the project builds and runs itself (images/ee, on its own Debian base) is tested end to end in
tests/e2e/test_execution_environment.py."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def _version():
    with open(os.path.join(ROOT, "galaxy.yml")) as f:
        return yaml.safe_load(f)["version"]


def _run(*argv, cwd):
    res = subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]), cwd=cwd, capture_output=True, text=True,
                         timeout=300)
    return res


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The collection artifact, built once for this module."""
    out = tmp_path_factory.mktemp("dist")
    built = _run("ansible-galaxy", "collection", "build", "--output-path", str(out), ROOT, cwd=out)
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture
def work(tmp_path, dist):
    """The repository's EE definition and the files it names, with the built collection in dist/."""
    for name in ("execution-environment.yml", "requirements.yml"):
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    shutil.copytree(dist, tmp_path / "dist")
    return tmp_path


def test_ansible_builder_create_accepts_the_definition(work):
    res = _run("ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context", cwd=work)
    assert res.returncode == 0, res.stdout + res.stderr
    context = work / "context"
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    with open(os.path.join(ROOT, "execution-environment.yml")) as f:
        base = yaml.safe_load(f)["images"]["base_image"]["name"]
    assert 'ARG EE_BASE_IMAGE="%s"' % base in containerfile
    # The built collection goes into the context and is installed where Execution Environments keep collections.
    assert (context / "_build" / "collection" / ("soperator-slurm-%s.tar.gz" % _version())).is_file()
    assert "collection install --no-deps -p /usr/share/ansible/collections /build/collection/" in containerfile
    # kubernetes.core from the same requirements.yml users install from.
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text()) == yaml.safe_load(
        open(os.path.join(ROOT, "requirements.yml")))
    assert "ansible-core>=2.19,<2.20 ansible-runner>=2.4" in containerfile
    assert "RUN /output/scripts/check_ansible" in containerfile  # ansible-builder's check that both are there


def test_ansible_builder_refuses_a_broken_definition(work):
    """The check above can fail: a misspelled key is refused, named."""
    with open(work / "execution-environment.yml") as f:
        definition = yaml.safe_load(f)
    definition["dependency"] = definition.pop("dependencies")
    (work / "execution-environment.yml").write_text(yaml.safe_dump(definition))
    res = _run("ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context", cwd=work)
    assert res.returncode != 0
    assert "'dependency' was unexpected" in res.stdout + res.stderr, res.stdout + res.stderr


def test_the_collections_python_requirements_are_found_by_ansible_builder(work):
    collections = work / "collections"
    tarball = work / "dist" / ("soperator-slurm-%s.tar.gz" % _version())
    installed = _run("ansible-galaxy", "collection", "install", "--force", "--no-deps", "-p", str(collections),
                     str(tarball), cwd=work)
    assert installed.returncode == 0, installed.stderr
    res = _run("ansible-builder", "introspect", str(collections), cwd=work)
    assert res.returncode == 0, res.stderr
    with open(os.path.join(ROOT, "meta", "ee-requirements.txt")) as f:
        wanted = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert wanted and all(req in res.stdout and "soperator.slurm" in res.stdout for req in wanted), res.stdout
