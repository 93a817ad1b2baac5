"""A change to a jail, judged before anything is written (api/jail_software.py): every refusal names its variable,
and what the product owns is refused naming it."""

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.api import jail_software

LISTED = ["/usr/bin/srun", "/usr/bin/sbatch"]


def plan(**request):
    return jail_software.plan(request, LISTED)


def test_a_change_of_the_administrators_own_is_planned_whole():
    p = plan(packages=["hello", "libfoo1=1.2-3"], apt_sources=[{"name": "local", "content": "deb [trusted=yes] x ./"}],
             profile_snippets=[{"name": "tools", "content": "export A=1\n"}],
             modulefiles=[{"name": "tools/1.0", "content": "#%Module\n"}],
             files=[{"dest": "/etc/motd", "content": "hi\n", "mode": "0644"}, {"dest": "/opt/old", "state": "absent"},
                    {"dest": "/usr/local/bin/py", "state": "link", "target": "/opt/venvs/tools/bin/python"}],
             venvs=[{"path": "/opt/venvs/tools", "requirements": "files/req.txt"}],
             users=[{"name": "alice", "uid": 2001, "ssh_keys": ["ssh-ed25519 AAAA alice"]}],
             groups=[{"name": "ml", "gid": 3001}])
    assert p["problems"] == []
    assert p["packages"] == ["hello", "libfoo1=1.2-3", "python3-venv", "python3-packaging"]
    assert [f["dest"] for f in p["files"]] == ["/etc/apt/sources.list.d/local.list", "/etc/profile.d/tools.sh",
                                               "/usr/share/modules/modulefiles/tools/1.0", "/etc/motd", "/opt/old",
                                               "/usr/local/bin/py"]
    assert p["files"][3] == {"dest": "/etc/motd", "state": "file", "owner": "root", "group": "root", "mode": "0644",
                             "var": "jail_software_files[0]", "content": "hi\n", "kind": "file"}
    assert [f["kind"] for f in p["files"][:3]] == ["apt", "profile_snippet", "modulefile"]
    assert plan(files=[{"dest": "/etc/apt/sources.list", "content": ""}])["files"][0]["kind"] == "apt"
    assert p["venvs"][0]["requirements_dest"] == "/opt/venvs/tools/requirements.txt"
    assert p["users"][0]["home"] == "/home/alice" and p["users"][0]["shell"] == "/bin/bash"
    assert p["groups"][0]["name"] == "ml"


@pytest.mark.parametrize("request_, message", [
    ({"files": [{"dest": "/etc/slurm/slurm.conf", "content": "x"}]},
     "jail_software_files[0].dest: /etc/slurm/slurm.conf is in /etc/slurm, the product's: Slurm's configuration"),
    ({"files": [{"dest": "/usr/bin/srun", "content": "x"}]},
     "jail_software_files[0].dest: /usr/bin/srun is the product's: a Slurm client file each pod binds"),
    ({"files": [{"dest": "/usr/lib/x86_64-linux-gnu", "state": "absent"}]},
     "jail_software_files[0].dest: /usr/lib/x86_64-linux-gnu holds /usr/lib/x86_64-linux-gnu/slurm"),
    ({"files": [{"dest": "/etc/munge/munge.key", "src": "k"}]}, "jail_software_files[0].dest: /etc/munge/munge.key"),
    ({"packages": ["slurm-client"]}, "jail_software_packages[0]: slurm-client is the product's (slurm*"),
    ({"packages_absent": ["munge"]}, "jail_software_packages_absent[0]: munge is the product's"),
    ({"venvs": [{"path": "/usr/lib/x86_64-linux-gnu/slurm/venv"}]}, "jail_software_venvs[0].path:"),
    ({"users": [{"name": "slurm"}]}, "jail_software_users[0].name: slurm is an account of the images"),
    ({"users": [{"name": "bob", "uid": 64030}]}, "jail_software_users[0].uid: 64030 is slurm (SlurmUser)"),
    ({"users": [{"name": "bob", "uid": 42}]}, "jail_software_users[0].uid: 42 is a system id"),
    ({"users": [{"name": "bob", "home": "/etc/soperator/bob"}]}, "jail_software_users[0].home: /etc/soperator/bob"),
    ({"groups": [{"name": "munge", "state": "absent"}]}, "jail_software_groups[0].name: munge is an account"),
    ({"files": [{"dest": "etc/motd", "content": "x"}]}, "jail_software_files[0].dest: 'etc/motd' is not a normalised"),
    ({"files": [{"dest": "/etc/motd"}]}, "jail_software_files[0]: give exactly one of content and src"),
    ({"files": [{"dest": "/etc/x", "state": "pipe"}]}, "jail_software_files[0].state: 'pipe' is none of"),
    ({"profile_snippets": [{"name": "../x", "content": "x"}]}, "jail_software_profile_snippets[0].name: '../x'"),
    ({"apt_sources": [{"name": "local"}]}, "jail_software_apt_sources[0].content: the file's text"),
    ({"packages": ["Hello World"]}, "jail_software_packages[0]: 'Hello World' is not a Debian package name"),
])
def test_a_refusal_names_its_variable(request_, message):
    problems = jail_software.plan(request_, LISTED)["problems"]
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_every_problem_is_reported_at_once():
    problems = plan(files=[{"dest": "/etc/slurm", "state": "absent"}], packages=["munge"],
                    users=[{"name": "root"}])["problems"]
    assert len(problems) == 3


def test_the_modulefiles_directory_is_judged_too():
    assert jail_software.plan({}, [], "/etc/slurm/modules")["problems"][0].startswith(
        "jail_software_modulefiles_dir: /etc/slurm/modules is in /etc/slurm")


def test_missing_packages_from_dpkgs_answer():
    out = "hello\tii \t2.10-5\npython3-venv\tun \t\njq\tii \t1.7\n"
    assert jail_software.missing_packages(["hello", "python3-venv", "jq=1.8", "absent"], out) == [
        "python3-venv", "jq=1.8", "absent"]
    assert jail_software.missing_packages(["hello=2.10-5", "hello:amd64"], out) == []
