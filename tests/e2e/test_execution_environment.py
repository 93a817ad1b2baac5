"""The project's Execution Environment image (images/ee, hack/build-ee-image.sh: on its own Debian base) run by
ansible-navigator as AWX and Ansible Automation Platform users run content: `ansible-navigator collections` inside
it lists this collection at the built version, and `ansible-navigator run playbooks/site.yml --eei <image>
--pull-policy never -m stdout` converges the local example on the real node (workers idle in sinfo), a second run
reporting no changes.

The container engine is the project's own dockerd (hack/images.sh; `--ce docker` with its DOCKER_HOST). The run
reaches the kube-apiserver on loopback through the host's network (`--co=--net=host`), the kubeconfig mounted
read-only at its own path (`--eev`) and named by K8S_AUTH_KUBECONFIG (`--senv`)."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from conftest import E2E, ROOT

NAMESPACE = "e2e-ee"
BIN = os.path.dirname(sys.executable)


def _version():
    with open(os.path.join(ROOT, "galaxy.yml")) as f:
        return yaml.safe_load(f)["version"]


@pytest.fixture(scope="module")
def ee(real_node_cluster, tmp_path_factory):
    """The EE image built (cached) into the project's engine, the engine left running for this module."""
    images = os.path.join(ROOT, "hack", "images.sh")
    subprocess.run([images, "start"], check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        build = subprocess.run([os.path.join(ROOT, "hack", "build-ee-image.sh")], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        docker_host = subprocess.run([images, "env"], capture_output=True, text=True,
                                     check=True).stdout.split("=", 1)[1].strip()
        cluster = E2E(real_node_cluster, namespace=NAMESPACE)
        work = tmp_path_factory.mktemp("navigator")

        def navigator(*args, extra_vars=None):
            """ansible-navigator from the repository root (as a user runs it), in stdout mode, with the EE."""
            env = {k: v for k, v in cluster.env.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
            env.update(DOCKER_HOST=docker_host, PATH=BIN + os.pathsep + env["PATH"])
            argv = [os.path.join(BIN, "ansible-navigator"), *args,
                    "--eei", "soperator/ee:%s" % _version(), "--pull-policy", "never", "-m", "stdout",
                    "--ce", "docker", "--co=--net=host",
                    "--eev", "%s:%s:ro" % (cluster.kubeconfig, cluster.kubeconfig),
                    "--senv", "K8S_AUTH_KUBECONFIG=%s" % cluster.kubeconfig,
                    "--pae", "false", "--lf", str(work / "ansible-navigator.log")]
            if extra_vars is not None:
                argv += ["-e", json.dumps(extra_vars)]
            return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)

        yield cluster, navigator
    finally:
        subprocess.run([images, "stop"], check=False, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def test_the_ee_lists_the_collection_at_the_built_version(ee):
    _cluster, navigator = ee
    res = navigator("collections")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    listed = yaml.safe_load(res.stdout)
    found = {c["known_as"]: c for c in listed["collections"]}
    assert found["soperator.slurm"]["collection_info"]["version"] == _version()
    # The image's copy (/usr/share/ansible/collections links to the operator image's /opt/ansible/collections),
    # not the checkout, which is mounted into the container as its working directory.
    assert found["soperator.slurm"]["path"] in ("/usr/share/ansible/collections/ansible_collections/soperator/slurm",
                                                "/opt/ansible/collections/ansible_collections/soperator/slurm")
    assert "kubernetes.core" in found


def _recap(stdout):
    """PLAY RECAP counts of localhost."""
    found = re.search(r"^localhost\s*:\s*(.*)$", stdout, re.M)
    assert found, stdout[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", found.group(1))}


def test_site_yml_in_the_ee_converges_the_local_example_and_a_second_run_changes_nothing(ee):
    cluster, navigator = ee
    docs = cluster.definition()
    clusters = {"soperator_clusters": [{"resources": docs, "wait": True}]}
    try:
        first = navigator("run", "playbooks/site.yml", extra_vars=clusters)
        assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-3000:]
        recap = _recap(first.stdout)
        assert recap["failed"] == 0 and recap["changed"] > 0, recap
        # site.yml waited for Ready: Slurm's own view agrees.
        cluster.wait_idle(["demo-cpu-0", "demo-cpu-1"], timeout=60)

        second = navigator("run", "playbooks/site.yml", extra_vars=clusters)
        assert second.returncode == 0, second.stdout[-5000:] + second.stderr[-3000:]
        again = _recap(second.stdout)
        assert again["changed"] == 0 and again["failed"] == 0, second.stdout[-5000:]
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
