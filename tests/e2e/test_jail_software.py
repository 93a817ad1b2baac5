"""The jail as an Ansible host on the real node: the inventory soperator.slurm.jails, the connection
soperator.slurm.jail (as root in the jail, through the Kubernetes API) and the role soperator.slurm.jail_software,
driven by playbooks/jail-software.yml as the README says.

Pods reach no mirror here: the Debian packages the jail lacks (resolved against its own dpkg status) and a wheel are
downloaded on the host and served from the real node's bridge address (tests/e2e/local_packages.py); the playbook
points the jail's apt at that repository only, and pip at that page of links.

The tests share one cluster (the local example in its own namespace, a fresh jail) and run in file order; each
shows one behaviour. Figures are printed (-s).
"""

import json
import os
import subprocess
import time

import local_packages
import pytest
import yaml
from conftest import E2E, ROOT, wait_until

NAMESPACE = "e2e-jail"
HOST = NAMESPACE + "/demo"
USER, UID = "jsuser", 2101
PACKAGES = ["hello", "python3-venv", "python3-packaging", "python3-apt"]
WHEEL = "six==1.17.0"
VENV = "/opt/venvs/e2e"

# Run in the jail (its python3) by root: {path: [mode, uid, gid, size, mtime, ctime]} of every tree an administrator's
# change may touch. Ansible's own working directory is left out, as on any host: /root/.ansible (its temporary files,
# made at its first file transfer) and the times of /root, which making it changes.
MANIFEST = r"""
import json, os
out = {}
for tree in ("/etc", "/usr", "/opt", "/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/home", "/root"):
    for top, dirs, files in os.walk(tree):
        if top == "/root":
            dirs[:] = [d for d in dirs if d != ".ansible"]
        for name in [""] + dirs + files:
            path = os.path.join(top, name) if name else top
            st = os.lstat(path)
            out[path] = [st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
out["/root"] = out["/root"][:3]
print(json.dumps(out))
"""


class Jails(E2E):
    def manifest(self):
        res = self.jail("python3 -c '%s'" % MANIFEST.replace("'", "'\\''"), timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def ansible(self, *argv, check=True):
        res = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=900)
        if check:
            assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
        return res

    def jail_software(self, *extra, check=True):
        """playbooks/jail-software.yml on this suite's inventory and variables; (result, seconds)."""
        started = time.monotonic()
        argv = ["ansible-playbook", "-i", self.inventory, os.path.join(ROOT, "playbooks", "jail-software.yml"),
                "-e", "@" + self.variables] + list(extra)
        return self.ansible(*argv, check=check), time.monotonic() - started


def plain(value):
    """ansible-inventory's JSON without its marks of unsafe values ({"__ansible_unsafe": value})."""
    if isinstance(value, dict):
        if list(value) == ["__ansible_unsafe"]:
            return value["__ansible_unsafe"]
        return dict((k, plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def recap(output, host=HOST):
    """{ok, changed, failed, ...} of the host's PLAY RECAP line."""
    line = next(line for line in output.splitlines() if line.startswith(host + " ") and "ok=" in line)
    return dict((k, int(v)) for k, v in (item.split("=") for item in line.split(":", 1)[1].split()))


@pytest.fixture(scope="module")
def js(real_node_cluster, tmp_path_factory):
    cluster = Jails(real_node_cluster, namespace=NAMESPACE)
    started = time.monotonic()
    # A fresh jail: nothing of an earlier run's namespace (its jail claim goes with it).
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=300)
    cluster.site(cluster.definition())
    cluster.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    converged = time.monotonic() - started
    tmp = tmp_path_factory.mktemp("jail-software")
    # What the jail lacks, from Debian's mirror and PyPI on the host, served on the real node's bridge address.
    started = time.monotonic()
    status = cluster.jail("cat /var/lib/dpkg/status")
    assert status.returncode == 0, status.stderr
    debs = local_packages.debs(status.stdout, PACKAGES)
    local_packages.repository(str(tmp / "repo"), debs, [local_packages.wheel(WHEEL)])
    with open(os.path.join(real_node_cluster, "state.json")) as f:
        gateway = json.load(f)["real_node"]["gateway"]
    server = local_packages.Server(str(tmp / "repo"), gateway)
    served = time.monotonic() - started
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "id_ed25519")], check=True)
    (tmp / "requirements.txt").write_text(WHEEL + "\n")
    cluster.key = str(tmp / "id_ed25519")
    cluster.inventory = str(tmp / "e2e.jails.yml")
    (tmp / "e2e.jails.yml").write_text(yaml.safe_dump({"plugin": "soperator.slurm.jails", "namespaces": [NAMESPACE],
                                                       "kubeconfig": cluster.kubeconfig}))
    cluster.variables = str(tmp / "jail.yml")
    (tmp / "jail.yml").write_text(yaml.safe_dump({
        "jail_software_files": [{"dest": "/etc/apt/sources.list",
                                 "content": "# This jail takes its packages from the test's repository only.\n"}],
        "jail_software_apt_sources": [{"name": "e2e-local", "content": "deb [trusted=yes] %s/ ./\n" % server.url}],
        "jail_software_packages": ["hello"],
        "jail_software_venvs": [{"path": VENV, "requirements": str(tmp / "requirements.txt")}],
        "jail_software_pip_environment": {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": server.url + "/wheels/",
                                          "PIP_TRUSTED_HOST": gateway},
        "jail_software_users": [{"name": USER, "uid": UID,
                                 "ssh_keys": [(tmp / "id_ed25519.pub").read_text().strip()]}],
    }))
    print("\njail software e2e: cluster up %.1f s; %d packages and a wheel served at %s in %.1f s" % (
        converged, len(debs), server.url, served))
    cluster.server = server
    try:
        yield cluster
    finally:
        server.stop()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def test_the_inventory_lists_the_clusters_jail(js):
    listed = plain(json.loads(js.ansible("ansible-inventory", "-i", js.inventory, "--list").stdout))
    assert HOST in listed["jails"]["hosts"] and HOST in listed["namespace_e2e_jail"]["hosts"]
    host = listed["_meta"]["hostvars"][HOST]
    assert host["ansible_connection"] == "soperator.slurm.jail"
    version = js.exec("demo-controller-0", "slurmctld", "cat /etc/soperator/slurm-version").stdout
    assert host["soperator_slurm_version"] == version.split("-")[0].strip()
    assert host["soperator_partitions"] == [{"name": "main", "default": True, "nodesets": ["cpu"]}]
    assert [s["name"] for s in host["soperator_nodesets"]] == ["cpu"] and host["soperator_maintenance"] is False


def test_setup_gathers_the_jails_facts(js):
    # The login image and the jail image are both Debian trixie: the release alone cannot tell them apart. A local
    # fact file only the jail has (put there by root in the jail, not in the login container) can.
    mark = js.jail("mkdir -p /etc/ansible/facts.d && echo '{\"image\": \"'$(cat /etc/soperator/jail-image)'\"}' "
                   "> /etc/ansible/facts.d/e2e.fact")
    assert mark.returncode == 0, mark.stderr
    assert js.exec("demo-login-0", "sshd", "test -e /etc/ansible/facts.d/e2e.fact").returncode != 0
    res = js.ansible("ansible", "-i", js.inventory, "jails", "-m", "ansible.builtin.setup",
                     "-a", "filter=ansible_distribution*,ansible_local,ansible_env")
    facts = json.loads(res.stdout.split("=>", 1)[1])["ansible_facts"]
    assert (facts["ansible_distribution"], facts["ansible_distribution_release"]) == ("Debian", "trixie")
    os_release = js.jail(". /etc/os-release && echo $VERSION_ID").stdout.strip()
    assert facts["ansible_distribution_major_version"] == os_release
    assert facts["ansible_local"]["e2e"] == {"image": "soperator/jail:0.1.0"}
    assert "SLURM_CONF_SERVER" not in facts["ansible_env"]  # the login container's environment stays out
    js.jail("rm -rf /etc/ansible")


def test_check_mode_on_the_fresh_jail_reports_the_changes_and_changes_nothing(js):
    before = js.manifest()
    res, seconds = js.jail_software("--check", "--diff")
    assert recap(res.stdout)["changed"] >= 6, res.stdout[-4000:]
    assert "would install hello, python3-venv" in res.stdout
    assert "+++ after: /etc/apt/sources.list.d/e2e-local.list" in res.stdout or "e2e-local.list" in res.stdout
    assert "authorized_keys" in res.stdout and "ssh-ed25519 " in res.stdout  # the key's diff
    assert js.manifest() == before
    print("\njail software e2e: --check --diff on the fresh jail %.1f s, manifest unchanged" % seconds)


def test_the_playbook_installs_and_a_job_on_every_worker_uses_it(js):
    res, seconds = js.jail_software()
    assert recap(res.stdout)["changed"] >= 6, res.stdout[-4000:]
    assert any(path.endswith(".deb") for path in js.server.requests) and any("six" in p for p in js.server.requests)
    step = js.jail("timeout 120 srun -N2 --immediate=60 sh -c 'echo $(hostname) $(hello) $(%s/bin/python -c "
                   "\"import six; print(six.__version__)\")' | sort" % VENV)
    assert step.returncode == 0, step.stderr + js.explain()
    assert step.stdout.splitlines() == ["demo-cpu-0 Hello, world! 1.17.0", "demo-cpu-1 Hello, world! 1.17.0"]
    print("\njail software e2e: the first run %.1f s" % seconds)


def test_the_second_run_changes_nothing(js):
    res, seconds = js.jail_software()
    assert recap(res.stdout)["changed"] == 0, res.stdout[-4000:]
    print("\njail software e2e: the second run %.1f s, nothing changed" % seconds)


def test_a_user_of_the_role_logs_in_with_their_key_and_runs_a_job_as_their_uid(js):
    address = js.get("service", "demo-login")["spec"]["clusterIP"]
    argv = ["ssh", "-i", js.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
            "BatchMode=yes", "-o", "ConnectTimeout=5", "%s@%s" % (USER, address)]
    res = wait_until(lambda: (lambda r: r.returncode == 0 and r)(subprocess.run(
        argv + ["id -u; cd ~ && timeout 150 sbatch --wait -o out.txt --wrap 'id -u' >/dev/null && cat out.txt"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=200)), 60, "ssh as %s" % USER)
    assert res.stdout.split() == [str(UID), str(UID)], res.stdout + res.stderr


def test_a_task_on_a_product_owned_path_fails_naming_it_and_changes_nothing(js):
    before = js.manifest()
    res, _seconds = js.jail_software("-e", json.dumps({"jail_software_files": [
        {"dest": "/etc/slurm/slurm.conf", "content": "SlurmctldHost=elsewhere\n"}]}), check=False)
    assert res.returncode != 0
    assert ("jail_software_files[0].dest: /etc/slurm/slurm.conf is in /etc/slurm, the product's: Slurm's "
            "configuration") in res.stdout, res.stdout[-3000:]
    assert js.manifest() == before


def test_in_maintenance_the_connection_enters_the_jail_from_a_pod_it_makes_and_that_goes_once_idle(js):
    docs = js.definition()
    docs[0]["spec"]["maintenance"] = True
    js.site(docs)
    assert js.get("slurmcluster", "demo")["status"]["phase"] == "Maintenance"
    started = time.monotonic()
    res = js.ansible("ansible", "-i", js.inventory, "jails", "-m", "ansible.builtin.command", "-a", "hello",
                     "-e", "ansible_soperator_admin_pod_idle=10")
    assert "Hello, world!" in res.stdout and "making the jail's administration Job demo-jail-admin" in res.stdout
    entered = time.monotonic() - started
    wait_until(lambda: js.get("job", "demo-jail-admin") is None and not js.get(
        "pods", "-l", "app.kubernetes.io/component=jail-admin")["items"], 120, "the administration Job gone")
    print("\njail software e2e: in maintenance, entered through the administration pod in %.1f s; gone %.1f s "
          "later" % (entered, time.monotonic() - started - entered))
