"""The check of a new slurm.conf by the controller's Slurm: what it runs and how a refusal names the field.

The stderr texts are what Slurm 24.11.5's `scontrol` printed in this project's controller image (run on the local
cluster's real node with SLURM_CONF pointing at a candidate file); the script itself runs in tests/e2e.
"""

import base64
import subprocess

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import slurm_check

CONF = """ClusterName=demo
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
MpiDefault=none
SwitchType=switch/bogus
NodeSet=cpu Feature=cpu
PartitionName=main Nodes=cpu Default=YES State=UP
"""


def test_the_plugins_a_config_names_become_shared_object_names():
    assert slurm_check.plugins(CONF) == {
        "proctrack_cgroup.so": "ProctrackType", "task_cgroup.so": "TaskPlugin", "task_affinity.so": "TaskPlugin",
        "select_cons_tres.so": "SelectType", "switch_bogus.so": "SwitchType"}


def test_the_files_travel_as_base64_lines_on_stdin_of_a_fixed_script():
    """Nothing of the candidate is in argv (an exec's argv is in its URL, which the audit log records)."""
    files = {"slurm.conf": CONF + "Epilog=/x;$(touch /tmp/pwned)\n", "cgroup.conf": "CgroupPlugin=autodetect\n"}
    argv, stdin = slurm_check.command(files)
    assert argv == ["sh", "-c", slurm_check.SCRIPT, "soperator-check-config"]
    conf, cgroup, sos, end = stdin.split("\n")
    assert base64.b64decode(conf).decode() == files["slurm.conf"]
    assert base64.b64decode(cgroup).decode() == files["cgroup.conf"]
    assert sos.split() == sorted(slurm_check.plugins(CONF)) and end == ""


def _run(files, env):
    argv, stdin = slurm_check.command(files)
    return subprocess.run(argv, env=env, capture_output=True, text=True, input=stdin)


def test_the_script_decodes_the_files_and_stops_at_a_missing_plugin(tmp_path):
    """The script under a real shell, with `scontrol` stubbed by a recorder (no Slurm on the host)."""
    (tmp_path / "scontrol").write_text("#!/bin/sh\ncp \"$SLURM_CONF\" %s/seen.conf\n" % tmp_path)
    (tmp_path / "scontrol").chmod(0o755)
    env = {"PATH": "%s:/usr/bin:/bin" % tmp_path}
    files = {"slurm.conf": "MinJobAge=300\n", "cgroup.conf": ""}
    ok = _run(files, env)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "seen.conf").read_text() == "MinJobAge=300\n"
    missing = _run({"slurm.conf": "SwitchType=switch/bogus\n"}, env)
    assert missing.returncode == 3 and "plugin switch_bogus.so is not in this Slurm build" in missing.stderr
    # What a shell would expand stays text: the file scontrol reads is the candidate, byte for byte.
    tricky = "Epilog=/x;$(touch %s/pwned) `id` \\n\n" % tmp_path
    assert _run({"slurm.conf": tricky}, env).returncode == 0
    assert (tmp_path / "seen.conf").read_text() == tricky and not (tmp_path / "pwned").exists()


SPEC = {"slurm": {"slurmConf": {"PreemptMode": "SOMETIMES", "SwitchType": "switch/bogus"},
                  "selectTypeParameters": "Bogus"}}


@pytest.mark.parametrize("stderr,field", [
    ("scontrol: error: PreemptMode=SOMETIMES invalid\nscontrol: fatal: Unable to process configuration file",
     "spec.slurm.slurmConf.PreemptMode"),
    ("scontrol: error: Bad SelectTypeParameter: Bogus\nscontrol: error: Bad SelectTypeParameter: Bogus",
     "spec.slurm.selectTypeParameters"),
    ("scontrol: error: KillWait value \"abc\" is not a valid number\nscontrol: fatal: Unable to process",
     "spec.slurm.killWait"),
    ("plugin switch_bogus.so is not in this Slurm build", "spec.slurm.slurmConf.SwitchType"),
    ("scontrol: error: something new\n", "spec.slurm"),
])
def test_a_refusal_names_the_field_and_quotes_slurm(stderr, field):
    path, message = slurm_check.problem(1, stderr, {"slurm.conf": CONF}, SPEC)
    assert path == field
    assert message.startswith("slurm.conf refused by this cluster's Slurm (nothing was applied): ")
    assert "fatal: Unable to process" not in message


def test_a_passing_check_is_no_problem():
    assert slurm_check.problem(0, "", {"slurm.conf": CONF}, SPEC) is None
