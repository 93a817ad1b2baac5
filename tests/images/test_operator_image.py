"""operator/Containerfile builds with the project's own engine and the image holds a working runtime."""

import os
import subprocess

import pytest
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True, scope="module")
def _root():
    require_root("building images with the project's dockerd")


@pytest.fixture(scope="module")
def docker():
    subprocess.run([os.path.join(ROOT, "hack", "images.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    try:
        build = subprocess.run([os.path.join(ROOT, "hack", "build-operator-image.sh")], capture_output=True,
                               text=True, stdin=subprocess.DEVNULL)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        env = subprocess.run([os.path.join(ROOT, "hack", "images.sh"), "env"], capture_output=True, text=True,
                             check=True).stdout.split("=", 1)[1].strip()

        def run(*args):
            return subprocess.run(["docker", "-H", env, "run", "--rm", "--entrypoint", "sh",
                                   "soperator/operator:0.1.0", "-c", " ".join(args)],
                                  capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

        yield run
    finally:
        subprocess.run([os.path.join(ROOT, "hack", "images.sh"), "stop"], check=False, stdout=subprocess.DEVNULL)


def test_operator_image_runs_as_non_root_with_the_runtime_and_the_collection(docker):
    who = docker("id -u; id -g")
    assert who.stdout.split() == ["65532", "65532"], who.stderr
    version = docker("python3 -m soperator_operator --version")
    assert version.returncode == 0 and version.stdout.strip() == "0.1.0", version.stderr
    collections = docker("ansible-galaxy collection list 2>/dev/null")
    assert "soperator.slurm" in collections.stdout and "kubernetes.core" in collections.stdout
    docs = docker("ansible-doc soperator.slurm.apply_manifests | head -1")
    assert docs.returncode == 0 and "soperator.slurm.apply_manifests" in docs.stdout, docs.stderr
    watches = docker("cat /opt/ansible/watches.yaml")
    assert "role: soperator.slurm.cluster" in watches.stdout


def test_the_runtime_imports_its_warm_runs_and_the_collection_core(docker):
    """Python 3.13 in the image: the forkserver's preload (Ansible, kubernetes, the action plugin's code) and the
    drift check's import of the collection's pure core both work from the installed collection."""
    # Two processes, as in the operator: the runtime (the drift check) and its forkserver (warm runs).
    check = docker("cd /tmp && python3 -c 'import soperator_operator.drift' && "
                   "python3 -c 'import soperator_operator.slurmstatus, soperator_operator.nodes' && "
                   "python3 -c 'import soperator_operator.warm; print(\"ok\")'")
    assert check.returncode == 0 and check.stdout.strip().endswith("ok"), check.stdout + check.stderr
    assert docker("command -v ssh-keygen").returncode != 0  # host keys are generated in-process
