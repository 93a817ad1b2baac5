""". hack/env.sh sets up a new shell for the checkout (the README's operator section starts with it): run in a login
shell that inherits nothing but HOME, as a user's new terminal after `make demo`."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack"))

import localcluster  # noqa: E402

TOOLS = 'for t in ansible-playbook kubectl; do command -v $t || echo "no $t"; done; echo "KUBECONFIG=${KUBECONFIG:-}"'
PROBE = TOOLS + '; readlink -f "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/soperator/slurm"'


def shell(script, tmp_path, **env):
    """``script`` in a new login shell in the checkout: HOME, a private cache and cluster state dir, ``env``."""
    base = {"HOME": os.environ["HOME"], "SOPERATOR_CACHE": str(tmp_path / "cache"),
            "SOPERATOR_LOCALCLUSTER_DIR": str(tmp_path / "state")}
    res = subprocess.run(["/bin/bash", "-l", "-c", "set -euo pipefail\n" + script], cwd=ROOT, text=True,
                         capture_output=True, env=dict(base, **env), stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


@pytest.fixture
def pinned_kubectl(tmp_path):
    """A kubectl where the pinned one lives under SOPERATOR_CACHE (make binaries builds the real one there)."""
    version = localcluster.versions()["KUBERNETES_VERSION"]
    path = tmp_path / "cache" / ("kubernetes-" + version) / "bin" / "kubectl"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\necho pinned\n")
    path.chmod(0o755)
    return str(path)


def test_a_new_shell_gets_the_venv_the_pinned_kubectl_and_this_checkout_as_the_collection(tmp_path, pinned_kubectl):
    out = shell(". hack/env.sh\n" + PROBE, tmp_path).stdout.split("\n")
    assert out[:4] == [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), pinned_kubectl,
                       "KUBECONFIG=", os.path.realpath(ROOT)], out


def test_without_it_the_shell_has_none_of_that(tmp_path, pinned_kubectl):
    """The control: a new login shell by itself finds neither the venv nor the pinned kubectl."""
    out = shell(TOOLS, tmp_path).stdout.split("\n")
    assert out[0] == "no ansible-playbook" or out[0] != os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
    assert out[1] != pinned_kubectl and out[2] == "KUBECONFIG=", out


def test_the_running_clusters_kubeconfig(tmp_path, pinned_kubectl):
    external = str(tmp_path / "kubeconfig")
    out = shell(". hack/env.sh\n" + PROBE, tmp_path, SOPERATOR_KUBECONFIG=external).stdout.split("\n")
    assert out[2] == "KUBECONFIG=" + external


def test_sourcing_it_again_changes_nothing(tmp_path, pinned_kubectl):
    out = shell('. hack/env.sh; first="$PATH|$ANSIBLE_COLLECTIONS_PATH"; . hack/env.sh; '
                '[ "$first" = "$PATH|$ANSIBLE_COLLECTIONS_PATH" ] && echo same', tmp_path).stdout
    assert out.strip() == "same"


@pytest.mark.parametrize("path_now,expected", [
    ("/usr/bin:/bin", "export PATH=/c/bin:/usr/bin:/bin\nexport KUBECONFIG=/k\n"),
    ("/c/bin:/usr/bin", "export KUBECONFIG=/k\n"),
    ("", "export PATH=/c/bin\nexport KUBECONFIG=/k\n"),
])
def test_shell_env_puts_kubectl_on_path_once(path_now, expected):
    assert localcluster.shell_env(path_now, "/c/bin/kubectl", "/k") == expected


def test_shell_env_quotes_and_leaves_kubeconfig_alone_when_none_runs():
    assert localcluster.shell_env("/usr/bin", "/my cache/bin/kubectl", None) == "export PATH='/my cache/bin:/usr/bin'\n"
