"""The README's "Try it on kind" block and the cluster its lines make: helpers for tests/kind (conftest.py's
session fixture runs the lines; test_readme.py and test_multinode.py use its cluster)."""


import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "soperator"  # the README's cluster
REUSE = os.environ.get("SOPERATOR_KIND_REUSE") == "1"


def readme_lines():
    """The shell block of the README's "Try it on kind" section."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("\n## Try it on kind\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def split_readme(block):
    """(setup, env line, teardown): the block up to its last `hack/kind.sh down` line, the `eval "$(hack/kind.sh
    env)"` line, and the rest from that `down` line on."""
    lines = block.splitlines()
    downs = [i for i, line in enumerate(lines) if line.lstrip().startswith("hack/kind.sh down")]
    assert downs, "the README's lines end without hack/kind.sh down"
    env = [line for line in lines if line.startswith('eval "$(hack/kind.sh env)"')]
    assert env, "the README's lines have no eval \"$(hack/kind.sh env)\" line"
    return "\n".join(lines[:downs[-1]]) + "\n", env[0], "\n".join(lines[downs[-1]:]) + "\n"


def login_shell(script, timeout):
    return subprocess.run(["/bin/bash", "-l", "-c", "set -euo pipefail\n" + script], cwd=ROOT, text=True,
                          env={"HOME": os.environ["HOME"]}, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def engine_answers():
    return login_shell('eval "$(hack/kind.sh env)" >/dev/null && docker info >/dev/null', 120).returncode == 0


def cluster_up():
    return login_shell('eval "$(hack/kind.sh env)" >/dev/null && hack/kind.sh status %s' % NAME, 120)


def down():
    login_shell('eval "$(hack/kind.sh env)" >/dev/null && hack/kind.sh down %s' % NAME, 300)


class Cluster:
    """The README's cluster: its name, kubeconfig, the environment of `hack/kind.sh env` (kind, kubectl, docker)
    and the README lines' output."""

    def __init__(self, stdout):
        self.name = NAME
        self.stdout = stdout
        res = subprocess.run(["/bin/bash", "-c", 'eval "$(hack/kind.sh env)" >/dev/null; echo "$PATH"; '
                              'echo "$DOCKER_HOST"; hack/kind.sh kubeconfig %s' % NAME], cwd=ROOT, text=True,
                             capture_output=True, check=True)
        path, docker_host, kubeconfig = res.stdout.split("\n")[:3]
        self.env = dict(os.environ, PATH=os.path.join(ROOT, ".venv", "bin") + ":" + path, DOCKER_HOST=docker_host,
                        KUBECONFIG=kubeconfig,
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "kind", "collections"))
        self.kubeconfig = kubeconfig

    def run(self, args, timeout=120, check=True):
        res = subprocess.run(args, cwd=ROOT, env=self.env, text=True, capture_output=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
        if check:
            assert res.returncode == 0, "%s: rc %s\n%s\n%s" % (" ".join(args), res.returncode, res.stdout[-3000:],
                                                               res.stderr[-3000:])
        return res
