"""The action group ``soperator.slurm.k8s``: every module that talks to Kubernetes is in it, and a play's
``module_defaults`` for the group reach them (modules and the slurm_cluster action plugin alike)."""

import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def runtime():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
        return yaml.safe_load(handle)


def test_the_group_holds_every_module_that_talks_to_kubernetes():
    talking = set()
    for name in os.listdir(os.path.join(ROOT, "plugins", "modules")):
        with open(os.path.join(ROOT, "plugins", "modules", name), encoding="utf-8") as handle:
            if "soperator.slurm.k8s_auth" in handle.read():
                talking.add(name[:-3])
    assert talking and set(runtime()["action_groups"]["k8s"]) == talking


PLAY = """
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/soperator.slurm.k8s:
      kubeconfig: {kubeconfig}
      context: given
  tasks:
    - name: A module of the group
      soperator.slurm.apply_manifests:
        manifests:
          - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: x, namespace: default}}}}
      register: applied
      ignore_errors: true
    - name: The action plugin of the group
      soperator.slurm.slurm_cluster:
        name: demo
        namespace: default
      register: converged
      ignore_errors: true
    - name: What they were told
      ansible.builtin.copy:
        content: "{{{{ [applied.msg, converged.msg] | to_json }}}}"
        dest: {out}
"""


def kubeconfig(path):
    """Two contexts: the current one (an API server on port 7) and ``given`` (port 9); nothing listens on either."""
    def context(name, port):
        return ({"name": name, "cluster": {"server": "https://127.0.0.1:%d" % port}},
                {"name": name, "context": {"cluster": name, "user": "u"}})
    clusters, contexts = zip(context("current", 7), context("given", 9))
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": list(clusters),
                                    "contexts": list(contexts), "current-context": "current",
                                    "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


def test_module_defaults_of_the_group_reach_its_modules(tmp_path, collections_path):
    """The kubeconfig and context given once for the group are the ones both tasks use: each fails reaching the
    given context's API server (nothing listens), not the current context's."""
    out = tmp_path / "messages.json"
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(kubeconfig=kubeconfig(tmp_path / "kubeconfig"), out=out))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(play)],
                         env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    messages = json.loads(out.read_text())
    assert len(messages) == 2
    assert all("cannot reach the Kubernetes API at https://127.0.0.1:9" in m for m in messages), messages
