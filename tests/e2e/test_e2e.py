"""Slurm jobs in pods on a real kubelet, through the jail; scaled and reconfigured without losing work.

The tests share one cluster and run in file order; each leaves it as the example defines it (2 idle workers),
except the last two: the jail-escape test adds sub-mounts of every kind (one roll), the last tears it down.
"""

import base64
import calendar
import os
import re
import shlex
import subprocess
import time

import yaml
from conftest import ROOT, held_job, wait_until

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import login_check, slurm_check


def test_jobs_run_in_the_jail_and_share_files_across_workers_and_login(e2e):
    # A step on each worker: the jail's root (its image marker), not the worker container's.
    step = e2e.jail("timeout 120 srun -N2 --immediate=60 sh -c 'echo $(hostname) $(cat /etc/soperator/jail-image)' "
                    "| sort")
    assert step.returncode == 0, step.stderr + e2e.explain()
    assert step.stdout.splitlines() == ["demo-cpu-0 soperator/jail:0.1.0", "demo-cpu-1 soperator/jail:0.1.0"]
    # A file a job writes on one worker is read by a job on the other, and from the login pod.
    write = e2e.jail("mkdir -p /home/shared && timeout 120 srun -w demo-cpu-0 --immediate=60 "
                     "sh -c 'echo written-on-$(hostname) > /home/shared/file'")
    assert write.returncode == 0, write.stderr + e2e.explain()
    read = e2e.jail("timeout 120 srun -w demo-cpu-1 --immediate=60 cat /home/shared/file")
    assert read.stdout.strip() == "written-on-demo-cpu-0", read.stderr
    assert e2e.jail("cat /home/shared/file").stdout.strip() == "written-on-demo-cpu-0"
    # A batch job's output file is the jail's (slurmstepd opens it before the task is jailed).
    batch = e2e.jail("cd /root && timeout 150 sbatch --wait -o /root/batch.out --wrap 'hostname; cat /etc/soperator/"
                     "jail-image' && cat /root/batch.out")
    assert batch.returncode == 0, batch.stderr
    assert batch.stdout.splitlines()[-1] == "soperator/jail:0.1.0"


def test_a_root_job_is_jailed_without_what_entering_the_jail_needed(e2e):
    # The local example allows root jobs (spec.slurm.disableRootJobs: false). On a real kubelet, with the worker's
    # manifest capabilities, seccomp and AppArmor: the task's bounding set has no SYS_ADMIN (21), SYS_CHROOT (18)
    # or SETPCAP (8); it cannot mount; the node's /sys (cgroups included) is read-only.
    script = ("grep CapBnd /proc/self/status; mkdir -p /tmp/soperator-m; mount -t tmpfs none /tmp/soperator-m "
              "&& echo MOUNTED; mkdir /sys/fs/cgroup/soperator-test 2>/dev/null && echo WROTE-SYS; "
              "echo 1 > /proc/sys/kernel/printk_ratelimit 2>/dev/null && echo WROTE-PROC; echo done")
    step = e2e.jail("timeout 120 srun -w demo-cpu-0 --immediate=60 sh -c '%s'" % script)
    assert step.returncode == 0, step.stderr + e2e.explain()
    lines = step.stdout.splitlines()
    bounding = int(lines[0].split()[1], 16)
    assert not bounding & (1 << 21 | 1 << 18 | 1 << 8), "%x" % bounding
    assert lines[-1] == "done" and not {"MOUNTED", "WROTE-SYS", "WROTE-PROC"} & set(lines), step.stdout


def _alice(e2e, tmp_path):
    """argv prefix of an ssh as alice (a user of the jail, created once) to the login Service."""
    key = str(tmp_path / "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    with open(key + ".pub") as f:
        pub = f.read().strip()
    # A user created inside the jail: every daemon and login shares the jail's passwd and group.
    made = e2e.jail("id alice >/dev/null 2>&1 || useradd -m -s /bin/bash -p '*' alice; "
                    "install -d -m 700 -o alice -g alice /home/alice/.ssh && "
                    "echo '%s' > /home/alice/.ssh/authorized_keys && chown alice: /home/alice/.ssh/authorized_keys"
                    % pub)
    assert made.returncode == 0, made.stderr
    address = e2e.get("service", "demo-login")["spec"]["clusterIP"]
    return ["ssh", "-i", key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
            "BatchMode=yes", "-o", "ConnectTimeout=5", "alice@" + address]


def test_ssh_into_the_login_service_lands_in_the_jail_and_submits(e2e, tmp_path):
    argv = _alice(e2e, tmp_path)

    def ssh(command):
        return subprocess.run(argv + [command], capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)

    login = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ssh("id -un; cat /etc/soperator/jail-image")),
                       60, "ssh to the login Service")
    assert login.stdout.splitlines() == ["alice", "soperator/jail:0.1.0"]
    job = ssh("cd ~ && timeout 150 sbatch --wait -o out.txt --wrap 'id -un; hostname' >/dev/null && cat out.txt")
    assert job.returncode == 0, job.stderr
    user, host = job.stdout.splitlines()
    assert user == "alice" and host.startswith("demo-cpu-")


def _login_sessions(e2e):
    """The login pod's open sessions, counted as the converge counts them."""
    res = e2e.kubectl("exec", "-n", e2e.namespace, "demo-login-0", "-c", "sshd", "--",
                      *login_check.sessions_command(), check=False)
    return login_check.parse_sessions(res.returncode, res.stdout)


FORGED = "sshd-session: alice [priv]"


def _forged(e2e):
    """(pid, parent pid) of a process of the login pod's sshd container titled like a session's and not root's (a
    session's own is root's), or None."""
    script = ('for d in /proc/[0-9]*; do case "$(tr "\\000" " " < $d/cmdline 2>/dev/null)" in "%s"*) '
              'echo ${d#/proc/} $(sed -n "s/^PPid:[[:space:]]*//p; s/^Uid:[[:space:]]*\\([0-9]*\\).*/\\1/p" '
              '$d/status) ;; esac; done' % FORGED)
    for line in e2e.exec("demo-login-0", "sshd", script).stdout.splitlines():
        pid, ppid, uid = line.split()
        if uid != "0":
            return pid, ppid
    return None


def test_a_login_change_waits_for_open_sessions_then_replaces_the_login_pod(e2e, tmp_path):
    """The login StatefulSet is OnDelete: a changed sshd setting replaces the login pod only once nobody is logged
    in to it (or after spec.login.updateGracePeriod). site.yml does not wait for users: it reports the pod waiting
    (condition LoginUpToDate), and a later run replaces it once the session has ended. A value sshd refuses changes
    nothing."""
    argv = _alice(e2e, tmp_path)
    wait_until(lambda: subprocess.run(argv + ["true"], capture_output=True, stdin=subprocess.DEVNULL,
                                      timeout=60).returncode == 0, 60, "ssh to the login Service")
    before = e2e.get("pod", "demo-login-0")["metadata"]["uid"]
    # A process alice leaves behind at logout, titled like a session: the container's PID 1 (the sshd listener)
    # adopts it. Counting titles would see a session for as long as it runs; the count does not.
    left = subprocess.run(argv + ["setsid bash -c 'exec -a \"%s\" sleep 900' </dev/null >/dev/null 2>&1 &" % FORGED],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert left.returncode == 0, left.stderr
    forged = wait_until(lambda: _forged(e2e), 30, "the forged process", e2e.explain)
    assert forged[1] == "1", forged
    wait_until(lambda: _login_sessions(e2e) == 0, 60, "alice's session closed")
    config = e2e.get("configmap", "demo-sshd-config")["data"]
    # sshd -t, by the login pod's own sshd, refuses the value before anything is written.
    audited = e2e.audit_offset()
    res = e2e.site(e2e.definition(login={"sshdConfig": {"ClientAliveInterval": "soon"}}), check=False)
    assert res.returncode != 0 and "spec.login.sshdConfig.ClientAliveInterval" in res.stdout, res.stdout[-3000:]
    assert "invalid time value" in res.stdout, res.stdout[-3000:]
    _assert_candidates_not_audited(e2e, "demo-login-0", audited, "soperator-sshd-test",
                                   login_check.sshd_test_command("")[0], ("ClientAliveInterval", "soon"))
    assert e2e.get("configmap", "demo-sshd-config")["data"] == config
    assert e2e.get("pod", "demo-login-0")["metadata"]["uid"] == before
    # A session held open until the test ends it; then a valid change.
    session = subprocess.Popen(argv + ["sleep 600"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _login_sessions(e2e) == 1, 60, "the session open")
        e2e.site(e2e.definition(login={"sshdConfig": {"ClientAliveInterval": "30"}}))
        assert "ClientAliveInterval 30" in e2e.get("configmap", "demo-sshd-config")["data"]["sshd_config"]
        status = e2e.get("slurmcluster", "demo")["status"]
        conditions = dict((c["type"], c) for c in status["conditions"])
        assert conditions["Ready"]["status"] == "True", status
        assert conditions["LoginUpToDate"]["status"] == "False", status
        assert "demo-login-0 has 1 open session(s)" in conditions["Ready"]["message"], status
        assert e2e.get("pod", "demo-login-0")["metadata"]["uid"] == before
        assert session.poll() is None, "the session ended early: %s" % session.stderr.read()
    finally:
        session.terminate()
        session.wait(timeout=30)
    wait_until(lambda: _login_sessions(e2e) == 0, 60, "the session closed")
    assert _forged(e2e) == forged  # still there: it holds nothing
    t0 = time.monotonic()
    e2e.site(e2e.definition(login={"sshdConfig": {"ClientAliveInterval": "30"}}))
    replaced = e2e.get("pod", "demo-login-0")
    assert replaced["metadata"]["uid"] != before
    print("\ne2e: login pod with its session ended replaced in %.1f s" % (time.monotonic() - t0))
    conditions = dict((c["type"], c) for c in e2e.get("slurmcluster", "demo")["status"]["conditions"])
    assert conditions["LoginUpToDate"]["status"] == "True"
    # Back to the defaults, nobody logged in: replaced at once.
    t0 = time.monotonic()
    e2e.site(e2e.definition())
    assert e2e.get("pod", "demo-login-0")["metadata"]["uid"] != replaced["metadata"]["uid"]
    print("e2e: login pod with no session replaced in %.1f s" % (time.monotonic() - t0))
    wait_until(lambda: subprocess.run(argv + ["true"], capture_output=True, stdin=subprocess.DEVNULL,
                                      timeout=60).returncode == 0, 60, "ssh to the new login pod")


def test_scale_out_then_scale_in_drains_first_and_leaves_no_ghost(e2e):
    t0 = time.monotonic()
    e2e.site(e2e.definition(replicas=3))
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1", "demo-cpu-2"])
    print("\ne2e: +1 node idle in sinfo %.1f s after the converge started" % (time.monotonic() - t0))
    # A job on the node the scale-in removes (the highest ordinal), until the test has seen the drain.
    job, release = held_job(e2e, "demo-cpu-2", "scale-in")
    wait_until(lambda: "JobState=RUNNING" in e2e.slurm("scontrol show job %s" % job).stdout, 60, "the job running")
    t0 = time.monotonic()
    converge = e2e.site(e2e.definition(replicas=2), background=True)
    try:
        # The node is drained with the operator's reason while its job runs on; the pod stays meanwhile.
        drained = wait_until(lambda: (lambda n: "DRAIN" in n and n)(e2e.node("demo-cpu-2")), 60,
                             "demo-cpu-2 draining", e2e.explain)
        assert "Reason=soperator: scale-in" in drained
        assert "JobState=RUNNING" in e2e.slurm("scontrol show job %s" % job).stdout
        assert e2e.get("pod", "demo-cpu-2") is not None
        released = time.monotonic()
    finally:
        release()
    output, _ = converge.communicate(timeout=600)
    assert converge.returncode == 0, output[-5000:]
    print("e2e: drained scale-in done in %.1f s, %.1f s after the job on the node was let finish"
          % (time.monotonic() - t0, time.monotonic() - released))
    # The job completed untouched, then the pod went and the node left Slurm: no ghost in sinfo.
    assert e2e.jail("cat /root/scale-in.out").stdout.strip() == "finished-on-demo-cpu-2"
    assert set(e2e.sinfo()) == {"demo-cpu-0", "demo-cpu-1"}
    assert e2e.get("pod", "demo-cpu-2") is None
    assert e2e.get("statefulset", "demo-cpu")["spec"]["replicas"] == 2


def test_an_admin_drain_is_left_alone(e2e):
    made = e2e.slurm("scontrol update nodename=demo-cpu-1 state=drain reason='admin: disk check'")
    assert made.returncode == 0, made.stderr
    try:
        e2e.site(e2e.definition(replicas=2))
        node = e2e.node("demo-cpu-1")
        assert "DRAIN" in node and "Reason=admin: disk check" in node
    finally:
        e2e.slurm("scontrol update nodename=demo-cpu-1 state=resume")
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])


def test_nodeset_counts_and_pod_conditions_match_sinfo_within_one_resync(e2e):
    """Slurm's node states reach Kubernetes: after one converge (site.yml here; the operator reads them every
    --status-period), `kubectl get nodeset` shows the IDLE/ALLOCATED counts sinfo shows, and each worker pod's
    SlurmNodeReady condition its node's state."""
    submit = e2e.jail("cd /root && sbatch --parsable --exclusive -w demo-cpu-0 -o /dev/null --wrap 'sleep 300'")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    try:
        wait_until(lambda: e2e.sinfo().get("demo-cpu-0") == "allocated", 60, "demo-cpu-0 allocated", e2e.explain)
        e2e.site(e2e.definition())
        shown, counted = e2e.nodeset_counts()
        assert shown == counted and (shown["idle"], shown["allocated"]) == (1, 1), (shown, e2e.sinfo())
        table = e2e.kubectl("get", "nodeset", "cpu", "-n", e2e.namespace).stdout.splitlines()
        row = dict(zip(table[0].split(), table[1].split()))
        assert (row["IDLE"], row["ALLOCATED"]) == ("1", "1"), table
        busy, free = e2e.slurm_condition("demo-cpu-0"), e2e.slurm_condition("demo-cpu-1")
        assert (busy["status"], busy["reason"]) == ("True", "Allocated"), busy
        assert (free["status"], free["reason"]) == ("True", "Idle"), free
    finally:
        e2e.slurm("scancel %s" % job)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    e2e.site(e2e.definition())
    shown, counted = e2e.nodeset_counts()
    assert shown == counted and shown["idle"] == 2, (shown, e2e.sinfo())


def test_the_health_program_runs_on_the_real_node_and_a_failed_check_drains_it(e2e):
    """slurmd runs the worker image's health program (HealthCheckProgram): the rendered checks pass on the real
    node (its workers stay idle); a check made to fail drains its node with the check's words; the next pass
    resumes it."""
    conf = e2e.slurm("scontrol show config").stdout
    assert "/usr/local/sbin/soperator-health-check" in conf
    passed = e2e.exec("demo-cpu-0", "slurmd", "/usr/local/sbin/soperator-health-check")
    assert passed.returncode == 0 and "healthy" in passed.stdout, passed.stdout + passed.stderr
    strict = e2e.exec("demo-cpu-0", "slurmd", "sed 's/\"minFreeMiB\": [0-9]*/\"minFreeMiB\": 1099511627776/' "
                      "/etc/soperator/health/health.json > /tmp/strict.json && "
                      "/usr/local/sbin/soperator-health-check /tmp/strict.json")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    node = e2e.node("demo-cpu-0")
    assert "DRAIN" in node and "Reason=soperator: health: disk: " in node, node
    resumed = e2e.exec("demo-cpu-0", "slurmd", "/usr/local/sbin/soperator-health-check")
    assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stdout
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])


def _held_job(e2e):
    submit = e2e.jail("cd /root && sbatch --parsable --hold --wrap true")
    assert submit.returncode == 0, submit.stderr
    return submit.stdout.strip()


def _controller_uid(e2e):
    pod = e2e.get("pod", "demo-controller-0")
    return pod and pod["metadata"]["uid"]


def _controller_restarts(e2e):
    """The restart count of the controller pod's slurmctld container."""
    pod = e2e.get("pod", "demo-controller-0")
    return next(c["restartCount"] for c in pod["status"]["containerStatuses"] if c["name"] == "slurmctld")


def _worker_pods(e2e):
    return dict((n, (e2e.get("pod", n) or {}).get("metadata") or {}) for n in ("demo-cpu-0", "demo-cpu-1"))


def _job_field(e2e, job, field):
    found = re.search(r"\b%s=(\S+)" % field, e2e.slurm("scontrol show job %s" % job).stdout)
    return found and found.group(1)


def _rolled(e2e, before):
    now = _worker_pods(e2e)
    return all(now[n].get("uid") not in (None, before[n]["uid"]) for n in now) and now


def _waiting_for(e2e, node):
    """The NodeSet's status.rollingUpdate entry of ``node`` once it names the node's jobs, else None."""
    waiting = ((e2e.get("nodeset", "cpu") or {}).get("status") or {}).get("rollingUpdate") or {}
    return next((w for w in waiting.get("waitingFor") or () if w["node"] == node and w.get("jobs")), None)


def _up_to_date(e2e):
    conds = ((e2e.get("nodeset", "cpu") or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "UpToDate"), {})


def _epoch(stamp):
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_a_roll_waits_for_a_job_longer_than_drain_timeout(e2e):
    """killWait changes the workers' pod template (their grace period): OnDelete, so each worker is drained
    ('soperator: update'), replaced once idle and resumed. The NodeSet's drainTimeout (10 s here) is scale-in's: a
    job that runs past it is waited for, and the NodeSet's status and `kubectl get nodeset` say for what and since
    when. The job ends when the test says so. KillWait in slurm.conf is applied in place (scontrol reconfigure): the
    controller pod is neither replaced nor restarted and its queue is there throughout."""
    held = _held_job(e2e)
    controller = _controller_uid(e2e)
    restarts = _controller_restarts(e2e)
    login = e2e.get("pod", "demo-login-0")["metadata"]["uid"]
    before = _worker_pods(e2e)
    e2e.jail("rm -f /root/roll-release /root/long.out")
    submit = e2e.jail("cd /root && sbatch --parsable -w demo-cpu-1 -o /root/long.out "
                      "--wrap 'while [ ! -e /root/roll-release ]; do sleep 1; done; echo finished'")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    wait_until(lambda: _job_field(e2e, job, "JobState") == "RUNNING", 60, "the long job running", e2e.explain)
    t0 = time.monotonic()
    converge = e2e.site(e2e.definition(slurm={"killWait": 45}, nodeset={"drainTimeout": "10s"}), background=True)
    try:
        waiting = wait_until(lambda: _waiting_for(e2e, "demo-cpu-1"), 300, "the roll waiting for the job",
                             e2e.explain)
        assert waiting["jobs"] == [job] and "proceedAt" not in waiting, waiting
        table = e2e.kubectl("get", "nodeset", "cpu", "-n", e2e.namespace).stdout
        assert "ROLL WAITS FOR" in table and re.search(r"demo-cpu-1 \(job %s\) since \S+Z" % job, table), table
        # A pass after the 10 s decided to wait on, and said why (the old rolls ended at drainTimeout).
        wait_until(lambda: "waiting past spec.drainTimeout (10s)" in _up_to_date(e2e).get("message", ""), 120,
                   "a pass past drainTimeout", e2e.explain)
        waited = time.time() - _epoch(waiting["since"])
        assert waited > 10, waited
        assert _job_field(e2e, job, "JobState") == "RUNNING"
        assert e2e.get("pod", "demo-cpu-1")["metadata"]["uid"] == before["demo-cpu-1"]["uid"]
        print("\ne2e: the roll still waited for job %s %.0f s after its drain (drainTimeout 10s)" % (job, waited))
    finally:
        e2e.jail("touch /root/roll-release")
    output, _ = converge.communicate(timeout=600)
    assert converge.returncode == 0, output[-5000:]
    after = wait_until(lambda: _rolled(e2e, before), 300, "both workers replaced", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    print("e2e: rolled 2 workers, one running a job past drainTimeout, in %.1f s" % (time.monotonic() - t0))
    # The job ran to its end on the old pod: complete output, exit 0, and its node's new pod is younger than its end.
    assert _job_field(e2e, job, "JobState") == "COMPLETED" and _job_field(e2e, job, "ExitCode") == "0:0"
    assert e2e.jail("cat /root/long.out").stdout.strip() == "finished"
    ended = _job_field(e2e, job, "EndTime")
    assert after["demo-cpu-1"]["creationTimestamp"].rstrip("Z") >= ended, (after["demo-cpu-1"], ended)
    # Resumed after the replacement (Slurm 24.11 keeps the last reason on a resumed node: the state tells).
    state = re.search(r"State=(\S+)", e2e.node("demo-cpu-1")).group(1)
    assert "DRAIN" not in state, state
    # KillWait is not a key that needs a restart (config_keys.RESTART_KEYS): slurmctld reread it in place.
    assert (_controller_uid(e2e), _controller_restarts(e2e)) == (controller, restarts)
    shown = e2e.slurm("scontrol show config")
    assert re.search(r"^KillWait\s*=\s*45 sec", shown.stdout, re.M), shown.stdout
    applied = e2e.get("slurmcluster", "demo")["status"]["slurmConfig"]
    assert applied["appliedBy"] == "Reconfigured", applied
    assert _job_field(e2e, held, "JobState") == "PENDING"
    status = e2e.get("nodeset", "cpu")["status"]
    assert status["updatedReplicas"] == 2 and status["outdatedReplicas"] == 0 and "rollingUpdate" not in status, status
    assert e2e.events("cpu", "DrainTimeoutExpired") == []
    assert e2e.get("pod", "demo-login-0")["metadata"]["uid"] == login


def test_proceed_after_replaces_a_busy_node_only_after_its_time_and_says_so(e2e):
    """spec.updateStrategy.proceedAfter is the explicit choice to stop waiting: a rebuilt worker image under a new
    tag (killWait back to its default in the same change), a job that would run for an hour on demo-cpu-0. The pod
    is replaced no sooner than proceedAfter after its drain, the job is killed, and a DrainTimeoutExpired Event on
    the NodeSet names the node and the job. Then back to the release's image, no job running: the idle roll."""
    login = e2e.get("pod", "demo-login-0")["metadata"]["uid"]
    e2e.worker_image = e2e.retag_image("soperator/slurm-worker:0.1.0", "0.1.0-rebuilt")
    before = _worker_pods(e2e)
    submit = e2e.jail("cd /root && rm -f image.out && sbatch --parsable --no-requeue -w demo-cpu-0 -o /root/image.out "
                      "--wrap 'sleep 3600; echo finished'")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    wait_until(lambda: _job_field(e2e, job, "JobState") == "RUNNING", 60, "the job running", e2e.explain)
    t0 = time.monotonic()
    converge = e2e.site(e2e.definition(nodeset={"updateStrategy": {"maxUnavailable": 1, "proceedAfter": "15s"}}),
                        background=True)
    waiting = wait_until(lambda: _waiting_for(e2e, "demo-cpu-0"), 300, "the roll waiting for the job", e2e.explain)
    assert waiting["jobs"] == [job] and _epoch(waiting["proceedAt"]) == _epoch(waiting["since"]) + 15, waiting
    output, _ = converge.communicate(timeout=600)
    assert converge.returncode == 0, output[-5000:]
    after = wait_until(lambda: _rolled(e2e, before), 300, "both workers replaced again", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    print("\ne2e: rolled 2 workers to a new image tag, one busy past proceedAfter (15s), in %.1f s"
          % (time.monotonic() - t0))
    # Replaced with its job, and no sooner than its time: the Event, then the new pod.
    events = e2e.events("cpu", "DrainTimeoutExpired")
    assert len(events) == 1 and events[0]["type"] == "Warning", events
    said = re.fullmatch(r"Pod demo-cpu-0 replaced by the rolling update: its Slurm node was drained at (\S+Z), "
                        r"longer ago than spec.updateStrategy.proceedAfter: 15s; job\(s\) %s still running on it "
                        r"are killed" % job, events[0]["message"])
    assert said, events[0]["message"]
    drained = _epoch(said.group(1))  # Slurm's time of the drain (the status's first look may say a second sooner)
    assert drained >= _epoch(waiting["since"]), (said.group(1), waiting)
    assert _epoch(events[0]["firstTimestamp"]) >= drained + 15, events[0]
    assert _epoch(after["demo-cpu-0"]["creationTimestamp"]) >= drained + 15, after["demo-cpu-0"]
    killed = wait_until(lambda: (lambda s: s not in (None, "RUNNING", "COMPLETING", "PENDING", "CONFIGURING") and s)(
        _job_field(e2e, job, "JobState")), 120, "the job ended", e2e.explain)
    assert killed != "COMPLETED" and "finished" not in e2e.jail("cat /root/image.out").stdout, killed
    print("e2e: job %s killed (%s): its pod replaced %.0f s after its node's drain" % (
        job, killed, _epoch(events[0]["firstTimestamp"]) - drained))
    for name in ("demo-cpu-0", "demo-cpu-1"):
        assert e2e.get("pod", name)["spec"]["containers"][0]["image"] == e2e.worker_image
    # Back to the release's image, no job running: the idle roll.
    e2e.worker_image = None
    before = after
    t0 = time.monotonic()
    e2e.site(e2e.definition())
    wait_until(lambda: _rolled(e2e, before), 300, "both workers replaced a third time", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    print("e2e: rolled 2 idle workers in %.1f s" % (time.monotonic() - t0))
    assert len(e2e.events("cpu", "DrainTimeoutExpired")) == 1
    # The login pod is the same pod (not only unrestarted) through these changes.
    assert e2e.get("pod", "demo-login-0")["metadata"]["uid"] == login


def test_a_removed_nodeset_is_drained_and_leaves_no_ghost(e2e):
    """A NodeSet dropped from the definition: its nodes drain, its running job completes, then its pods, its
    Slurm node records and the NodeSet itself go; the other NodeSet is untouched."""
    e2e.site(e2e.definition(extra_nodeset="extra"))
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1", "demo-extra-0"])
    workers = dict((n, m["uid"]) for n, m in _worker_pods(e2e).items())
    # The job runs until the test has seen the drain.
    job, release = held_job(e2e, "demo-extra-0", "removal")
    wait_until(lambda: _job_field(e2e, job, "JobState") == "RUNNING", 60, "the job running", e2e.explain)
    t0 = time.monotonic()
    converge = e2e.site(e2e.definition(), background=True)
    try:
        drained = wait_until(lambda: (lambda n: "DRAIN" in n and n)(e2e.node("demo-extra-0")), 60,
                             "demo-extra-0 draining", e2e.explain)
        assert "Reason=soperator:" in drained
        # The set's partition lines change: slurmctld restarts on the new slurm.conf; the job runs on meanwhile.
        assert wait_until(lambda: _job_field(e2e, job, "JobState"), 60, "slurmctld answering") == "RUNNING"
        assert e2e.get("pod", "demo-extra-0") is not None
        released = time.monotonic()
    finally:
        release()
    output, _ = converge.communicate(timeout=600)
    assert converge.returncode == 0, output[-5000:]
    print("\ne2e: NodeSet removed in %.1f s, %.1f s after its running job was let finish"
          % (time.monotonic() - t0, time.monotonic() - released))
    assert e2e.jail("cat /root/removal.out").stdout.strip() == "finished-on-demo-extra-0"
    assert _job_field(e2e, job, "ExitCode") == "0:0"
    wait_until(lambda: e2e.get("nodeset", "extra") is None, 60, "the NodeSet gone", e2e.explain)
    assert set(e2e.sinfo()) == {"demo-cpu-0", "demo-cpu-1"}
    assert e2e.get("pod", "demo-extra-0") is None and e2e.get("statefulset", "demo-extra") is None
    assert dict((n, m["uid"]) for n, m in _worker_pods(e2e).items()) == workers


def test_a_slurm_setting_slurm_refuses_is_rejected_before_anything_restarts(e2e):
    """Typed values refuse `MinJobAge: soon` in the collection; what only Slurm knows (a PreemptMode word, a plugin
    this build lacks) is refused by the running controller's own scontrol. Nothing is written, nothing restarts."""
    controller = _controller_uid(e2e)
    config = e2e.get("configmap", "demo-slurm-config")["data"]
    workers = _worker_pods(e2e)
    audited = e2e.audit_offset()
    for raw, field, says, by_slurm in (
            ({"MinJobAge": "soon"}, "spec.slurm.slurmConf.MinJobAge", "must be a whole number", False),
            ({"PreemptMode": "SOMETIMES"}, "spec.slurm.slurmConf.PreemptMode", "PreemptMode=SOMETIMES invalid", True),
            ({"SwitchType": "switch/bogus"}, "spec.slurm.slurmConf.SwitchType", "switch_bogus.so is not in this",
             True)):
        res = e2e.site(e2e.definition(slurm={"slurmConf": raw}), check=False)
        assert res.returncode != 0 and field in res.stdout and says in res.stdout, res.stdout[-3000:]
        if by_slurm:  # the resource was written (it passed validation); its status names the field Slurm refused
            ready = next(c for c in e2e.get("slurmcluster", "demo")["status"]["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "False" and field in ready["message"], ready
    assert e2e.get("configmap", "demo-slurm-config")["data"] == config
    assert _controller_uid(e2e) == controller and _worker_pods(e2e) == workers
    _assert_candidates_not_audited(e2e, "demo-controller-0", audited, "soperator-check-config",
                                   slurm_check.command({})[0], ("SOMETIMES", "switch/bogus", "switch_bogus"))
    e2e.site(e2e.definition())
    assert _controller_uid(e2e) == controller
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])


def test_a_partition_setting_is_applied_in_place_and_squeue_answers_throughout(e2e):
    """A partition's MaxTime through the SlurmCluster: site.yml writes the ConfigMap and, once the controller pod's
    copy is the new file, asks one `scontrol reconfigure`: the controller pod keeps its UID and restart count, and
    squeue from the login pod (a loop there, every 0.2 s) answers throughout."""
    controller, restarts = _controller_uid(e2e), _controller_restarts(e2e)
    stop = "/tmp/e2e-squeue-sampling-stop"
    e2e.jail("rm -f %s" % stop)
    loop = ('while [ ! -e %s ]; do s=$(date +%%s.%%N); squeue -h >/dev/null 2>&1; r=$?; '
            'echo "$r $s $(date +%%s.%%N)"; sleep 0.2; done' % stop)
    sampler = subprocess.Popen(
        [e2e.kubectl_bin, "--kubeconfig", e2e.kubeconfig, "exec", "-n", e2e.namespace, "demo-login-0", "-c", "sshd",
         "--", "chroot", "/mnt/jail", "sh", "-c", loop], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL)
    docs = e2e.definition()
    docs[0]["spec"]["partitions"] = [{"name": "main", "default": True, "maxTime": "1:00:00"}]
    t0 = time.monotonic()
    try:
        e2e.site(docs)
        took = time.monotonic() - t0
        shown = e2e.slurm("scontrol show partition main").stdout
        assert "MaxTime=01:00:00" in shown, shown
        time.sleep(1)  # samples after the reconfigure too
    finally:
        e2e.jail("touch %s" % stop)
        output, _ = sampler.communicate(timeout=60)
    samples = [line.split() for line in output.splitlines() if re.match(r"^\d+ [\d.]+ [\d.]+$", line)]
    failed = [s for s in samples if s[0] != "0"]
    assert samples and not failed, output[-3000:]
    assert (_controller_uid(e2e), _controller_restarts(e2e)) == (controller, restarts)
    applied = e2e.get("slurmcluster", "demo")["status"]["slurmConfig"]
    assert applied["appliedBy"] == "Reconfigured", applied
    slowest = max(float(end) - float(start) for _rc, start, end in samples)
    print("\ne2e: partition MaxTime applied in place by site.yml in %.1f s; %d squeue samples from the login pod, "
          "0 failed, slowest %.2f s; controller pod and restart count unchanged" % (took, len(samples), slowest))
    e2e.site(e2e.definition())
    assert "MaxTime=UNLIMITED" in e2e.slurm("scontrol show partition main").stdout
    assert (_controller_uid(e2e), _controller_restarts(e2e)) == (controller, restarts)


def test_a_setting_that_needs_a_restart_replaces_the_controller_and_keeps_the_queue(e2e):
    """CommunicationParameters is a listening setting (config_keys.RESTART_KEYS): the controller pod is replaced (its
    template's config hash), its queue kept on the spool, and status.slurmConfig says Restarted."""
    held = _held_job(e2e)
    controller = _controller_uid(e2e)
    try:
        e2e.site(e2e.definition(slurm={"slurmConf": {"CommunicationParameters": "block_null_hash"}}))
        assert _controller_uid(e2e) not in (None, controller)
        shown = e2e.slurm("scontrol show config").stdout
        assert re.search(r"^CommunicationParameters\s*=\s*block_null_hash", shown, re.M), shown
        assert e2e.get("slurmcluster", "demo")["status"]["slurmConfig"]["appliedBy"] == "Restarted"
        assert _job_field(e2e, held, "JobState") == "PENDING"
    finally:
        e2e.site(e2e.definition())
        e2e.slurm("scancel %s" % held)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])


def _assert_candidates_not_audited(e2e, pod, since, name, fixed_argv, words):
    """The checks of candidate files exec'd into ``pod`` (their script called ``name``) are in the API server's audit
    log (which records an exec's argv: its URI) with exactly their fixed argv, and none of the candidates' ``words``
    is anywhere in an audited exec's argv."""
    commands = e2e.exec_commands(pod, since)
    checks = [c for c in commands if name in c]
    assert checks, "no audited exec of %s into %s: %s" % (name, pod, commands)
    assert all(c == fixed_argv for c in checks), checks
    assert not [c for c in commands if any(w in " ".join(c) for w in words)], commands
    print("\ne2e: %d exec(s) of %s audited, argv fixed, candidate not in it" % (len(checks), name))


def test_a_deleted_slurmctld_pod_comes_back_with_its_queue(e2e):
    job = _held_job(e2e)
    before = _controller_uid(e2e)
    e2e.kubectl("delete", "pod", "-n", e2e.namespace, "demo-controller-0", "--wait=false")
    wait_until(lambda: _controller_uid(e2e) not in (None, before), 120, "a new slurmctld pod")
    wait_until(lambda: "JobState=PENDING" in e2e.slurm("scontrol show job %s" % job).stdout, 180,
               "the held job back in the queue", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    step = e2e.jail("timeout 120 srun -N2 --immediate=60 hostname | sort")
    assert step.stdout.splitlines() == ["demo-cpu-0", "demo-cpu-1"], step.stderr + e2e.explain()


# --- a job user against the node's root ----------------------------------------------------------------------------
ATTACKER, ATTACKER_UID = "mallory", 3333
SLURM_USER_UID = 64030
# Where the node's root processes (the entrypoint, slurmd, slurmstepd, the probe, the health program, munged) and
# SlurmUser's find programs, libraries, plugins, configuration and keys, as a job sees them in the jail (the
# runtime directories and Slurm's plugins are the node's own there), and the jail's own system. A job user must
# change none of them.
PROTECTED = ["/run", "/run/slurm", "/run/slurm/conf", "/run/munge", "/var/spool/slurmd",
             "/var/spool/slurmd/conf-cache", "/etc/slurm", "/usr/lib/x86_64-linux-gnu/slurm",
             "/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/local/bin", "/usr/local/sbin", "/usr/local/lib",
             "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib/python3/dist-packages", "/etc", "/etc/munge",
             "/etc/ld.so.conf.d", "/opt", "/root", "/var/lib", "/scratch", "/"]
# What root and SlurmUser run or load by name: planted wherever the user may write.
PAYLOAD_NAMES = ["soperator-node-ready", "soperator-health-check", "soperator-entrypoint", "scontrol", "sinfo",
                 "srun", "sh", "bash", "python3", "mount", "setpriv", "nvidia-smi", "slurmd", "slurmstepd",
                 "munged", "sshd", "sackd"]
# Markers a payload leaves, wherever it runs: in the jail and in every container, the shared scratch is there.
MARKER_DIRS = ["/shared-scratch", "/mnt/jail/shared-scratch", "/tmp", "/dev/shm"]
ATTACK = r"""#!/bin/sh
# A job user's tries: PROTECTED paths (arguments before --) changed in every way; payloads named after the
# programs root runs planted in every writable directory (arguments after --). WROTE <what> for each that worked.
while [ "$1" != -- ]; do
  t=$1; shift
  touch "$t/.mallory" 2>/dev/null && echo "WROTE $t/.mallory"
  mkdir "$t/.mallory-d" 2>/dev/null && echo "WROTE $t/.mallory-d"
  ln -s /tmp "$t/.mallory-l" 2>/dev/null && echo "WROTE $t/.mallory-l"
  if [ "$t" != / ] && mv "$t" "$t.mallory" 2>/dev/null; then echo "WROTE moved $t"; mv "$t.mallory" "$t"; fi
  if [ -L "$t" ]; then ln -sfn /tmp "$t" 2>/dev/null && echo "WROTE relinked $t"; fi
done
shift
payload='#!/bin/sh
for m in MARKERS; do echo pwned > "$m/soperator-pwned.$(id -u).${0##*/}" 2>/dev/null; done
'
py='import os
for m in "MARKERS".split():
    try:
        open("%s/soperator-pwned.%d.python" % (m, os.getuid()), "w").close()
    except OSError:
        pass
'
for d in "$@"; do
  if ! touch "$d/.writable" 2>/dev/null; then echo "READONLY $d"; continue; fi
  echo "WRITABLE $d"
  for n in NAMES; do printf '%s' "$payload" > "$d/$n" && chmod 755 "$d/$n"; done
  mkdir -p "$d/lib/python3/dist-packages" "$d/.local/lib/python3.13/site-packages" "$d/slurm"
  for f in usercustomize.py sitecustomize.py lib/python3/dist-packages/sitecustomize.py \
      .local/lib/python3.13/site-packages/usercustomize.py; do printf '%s' "$py" > "$d/$f"; done
  printf 'import os; exec(open("%s/usercustomize.py").read())\n' "$d" > "$d/soperator.pth"
  printf '%s' "$payload" > "$d/slurm/auth_munge.so"
  ln -sfn /usr/local/bin "$d/usr-local-bin" 2>/dev/null
  echo mallory-was-here > "$d/mallory-file"
done
# The control: the same payload run by the user herself leaves her marker.
"$1/scontrol"
echo done
"""


def _attack_script():
    return (ATTACK.replace("MARKERS", " ".join(MARKER_DIRS)).replace("NAMES", " ".join(PAYLOAD_NAMES)))


def _pwned(e2e):
    """Every payload marker, from the jail and from the pods' containers: 'where: name'."""
    found = e2e.jail("ls /shared-scratch /tmp /dev/shm 2>/dev/null | grep soperator-pwned").stdout.split()
    found = ["jail: " + name for name in found]
    for pod, container in (("demo-cpu-0", "slurmd"), ("demo-cpu-1", "slurmd"), ("demo-login-0", "sshd"),
                           ("demo-controller-0", "slurmctld")):
        res = e2e.exec(pod, container, "ls %s 2>/dev/null | grep soperator-pwned" % " ".join(MARKER_DIRS))
        found += ["%s/%s: %s" % (pod, container, name) for name in res.stdout.split()]
    return found


def _foreign_files(e2e, pod, container, allowed):
    """Files of the attacker in a container's own filesystem, outside ``allowed`` (the jail, the user data). A
    container without CAP_DAC_OVERRIDE (slurmctld's) cannot search some daemons' 0700 directories: each of those
    must be another user's, writable by nobody else (so none of the attacker's files can be there)."""
    prune = " -o ".join("-path %s" % path for path in ["/proc", "/sys", "/mnt/jail"] + allowed)
    found = e2e.exec(pod, container, "find / \\( %s \\) -prune -o -uid %d -print" % (prune, ATTACKER_UID),
                     timeout=180)
    closed = re.findall(r"^find: .(/[^ ]*?).: Permission denied$", found.stderr, re.M)
    assert found.returncode == (1 if closed else 0) and found.stderr.count("\n") <= len(closed) + 1, found.stderr
    for path in closed:
        owner, mode = e2e.exec(pod, container, "stat -c '%%u %%a' %s" % path).stdout.split()
        assert owner != str(ATTACKER_UID) and int(mode, 8) & 0o022 == 0, (pod, path, owner, mode)
    return found.stdout


def _mixed(e2e, gpu_image):
    """examples/mixed-cluster-local.yaml in this suite's namespace, its GPU NodeSet on ``gpu_image``."""
    with open(os.path.join(ROOT, "examples", "mixed-cluster-local.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = e2e.namespace
    docs[2]["spec"]["image"] = gpu_image
    if e2e.worker_image:
        docs[1]["spec"]["image"] = e2e.worker_image
    return docs


def test_a_mixed_cluster_runs_each_partitions_jobs_where_they_belong(e2e, standin_gpu_image):
    """examples/mixed-cluster-local.yaml converges on the real node: its GPU worker runs the worker image with a
    stand-in for one GPU (tests/e2e/standin_gpu: no GPU here) and the node advertises nvidia.com/gpu. The GPU node
    registers with its GRES (Slurm's AutoDetect=nvidia read the GPU the container shows), and srun runs each partition's
    jobs where they belong: cpu on the CPU workers, gpu on the GPU worker with its GPU, all across both; a GPU job
    asked of the cpu partition is refused. GPU jobs find the node's driver libraries and tools in the jail (the
    worker entrypoint's soperator-driver, the node's loader cache in each task); CPU jobs do not, and the shared jail
    holds no driver file."""
    def srun(args):
        return e2e.jail("timeout 120 srun --immediate=60 %s" % args)

    with e2e.advertised_gpus(1):
        try:
            t0 = time.monotonic()
            e2e.site(_mixed(e2e, standin_gpu_image))
            e2e.wait_idle(["demo-cpu-0", "demo-cpu-1", "demo-gpu-0"])
            print("\ne2e: the mixed example applied -> 3 workers idle in %.1f s" % (time.monotonic() - t0))
            gpu_node = e2e.node("demo-gpu-0")
            assert "Gres=gpu:h100:1" in gpu_node and "State=IDLE" in gpu_node and "Reason=" not in gpu_node, gpu_node
            assert "Gres=(null)" in e2e.node("demo-cpu-0")

            cpu = srun("-p cpu -N2 hostname | sort")
            assert cpu.stdout.split() == ["demo-cpu-0", "demo-cpu-1"], cpu.stderr + e2e.explain()
            gpu = srun("-p gpu --gres=gpu:1 sh -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'")
            assert gpu.stdout.split() == ["demo-gpu-0", "0"], gpu.stdout + gpu.stderr + e2e.explain()
            every = srun("-p all -N3 hostname | sort")
            assert every.stdout.split() == ["demo-cpu-0", "demo-cpu-1", "demo-gpu-0"], every.stderr
            refused = e2e.jail("timeout 60 srun -p cpu --gres=gpu:1 --immediate=10 true")
            assert refused.returncode != 0 and "Requested node configuration is not available" in refused.stderr

            load = ("import ctypes; lib = ctypes.CDLL('libcuda.so.1'); lib.standin_cuda.restype = ctypes.c_char_p; "
                    "print(lib.standin_cuda().decode())")
            listing = srun("-p gpu ldconfig -p")
            assert "libcuda.so.1 (libc6,x86-64) => /run/soperator/nvidia/lib/libcuda.so.1" in listing.stdout, (
                listing.stdout + listing.stderr)
            assert "libnvidia-ml.so.1 (libc6,x86-64) => /run/soperator/nvidia/lib/libnvidia-ml.so.1" in listing.stdout
            on_gpu = srun("-p gpu python3 -c %s" % shlex.quote(load))
            assert on_gpu.stdout.strip() == "libcuda stand-in 550.54.15", on_gpu.stdout + on_gpu.stderr
            smi = srun("-p gpu nvidia-smi --query-gpu=name,persistence_mode --format=csv,noheader")
            assert smi.stdout.strip() == "NVIDIA H100 80GB HBM3, Enabled", smi.stdout + smi.stderr
            on_cpu = srun("-p cpu python3 -c %s" % shlex.quote(load))
            assert on_cpu.returncode != 0 and "libcuda.so.1: cannot open shared object file" in on_cpu.stderr
            assert "libcuda" not in srun("-p cpu ldconfig -p").stdout
            assert e2e.jail("find / -xdev \\( -name 'libcuda*' -o -name 'libnvidia-*' \\) -print").stdout == ""
            said = e2e.kubectl("logs", "-n", e2e.namespace, "demo-gpu-0", "-c", "slurmd").stdout
            assert "soperator-driver: exposed 2 driver libraries (libcuda.so.550.54.15, libnvidia-ml.so.550.54.15)" \
                   " and 1 tools (nvidia-smi)" in said, said[-3000:]
            said = e2e.kubectl("logs", "-n", e2e.namespace, "demo-cpu-0", "-c", "slurmd").stdout
            assert "soperator-driver: no NVIDIA driver library or tool in this container" in said, said[-3000:]
        finally:
            e2e.site(e2e.definition())
            e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    wait_until(lambda: e2e.get("nodeset", "gpu") is None, 60, "the GPU NodeSet gone", e2e.explain)
    assert set(e2e.sinfo()) == {"demo-cpu-0", "demo-cpu-1"}


def test_a_jail_user_cannot_make_root_or_slurmuser_run_anything(e2e, tmp_path):
    """On the real node, with a sub-mount of every kind the validator accepts (an emptyDir at its default mode and
    one at 1777, a claim users write, a host path under an allowed prefix): a jail user's
    job tries to change every path the node's root and SlurmUser execute, load or read, and plants payloads named
    after their programs wherever it may write; then the probe, the health program, a reconfigure, a root job and
    a restart of slurmd's container run. Nothing ran as root or SlurmUser, no container has the user's files outside
    the user data, and the controls show each observation would have seen it."""
    host_dir = tmp_path / "hostdata"
    host_dir.mkdir()
    host_dir.chmod(0o1777)
    e2e.kubectl("apply", "-f", "-", input=(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: e2e-data, namespace: %s}\n"
        "spec: {accessModes: [ReadWriteMany], storageClassName: standard, resources: {requests: {storage: 1Gi}}}\n"
        % e2e.namespace))
    docs = e2e.definition()
    docs[0]["spec"]["jail"]["subMounts"] = [
        {"name": "scratch", "mountPath": "/scratch", "emptyDir": True},
        {"name": "shared", "mountPath": "/shared-scratch", "emptyDir": True, "mode": "1777"},
        {"name": "data", "mountPath": "/data", "claimName": "e2e-data"},
        {"name": "host", "mountPath": "/hostdata", "hostPath": str(host_dir), "readOnly": False}]
    pods = ("demo-cpu-0", "demo-cpu-1", "demo-login-0")
    before = dict((n, e2e.get("pod", n)["metadata"]["uid"]) for n in pods)
    e2e.site(docs, extra={"soperator_policy": {"allowed_host_path_prefixes": [str(host_dir)]}})

    def rolled():
        now = dict((n, e2e.get("pod", n)) for n in pods)
        return all(p and p["metadata"]["uid"] != before[n] and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            for n, p in now.items())
    wait_until(rolled, 400, "workers and login pod replaced with the sub-mounts", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    # The jail's administrator makes the claim a place users write (a claim's root is whatever it was made).
    made = e2e.jail("id %s >/dev/null 2>&1 || useradd -m -u %d -s /bin/sh %s; chmod 1777 /data"
                    % (ATTACKER, ATTACKER_UID, ATTACKER))
    assert made.returncode == 0, made.stderr
    writable = ["/home/" + ATTACKER, "/data", "/shared-scratch", "/hostdata", "/tmp", "/dev/shm"]
    script = base64.b64encode(_attack_script().encode()).decode()
    as_attacker = "setpriv --reuid=%d --regid=%d --init-groups --" % (ATTACKER_UID, ATTACKER_UID)
    attack = e2e.jail(
        "echo %s | base64 -d > /home/{u}/attack.sh && chown {u}: /home/{u}/attack.sh && chmod 755 /home/{u}/attack.sh"
        " && cd /home/{u} && {run} timeout 200 sbatch --wait -w demo-cpu-0 -o /home/{u}/attack.out "
        "/home/{u}/attack.sh {args}; cat /home/{u}/attack.out".format(
            u=ATTACKER, run=as_attacker, args=" ".join(shlex.quote(a) for a in PROTECTED + ["--"] + writable))
        % script, timeout=240)
    out = attack.stdout.splitlines()
    assert attack.returncode == 0 and out[-1] == "done", attack.stdout + attack.stderr + e2e.explain()
    # Not one protected path changed; /scratch (an emptyDir at its default mode) among them.
    assert [line for line in out if line.startswith("WROTE")] == [], attack.stdout
    # The control of the tries: every user-data place took the payloads (the same commands work where allowed).
    assert sorted(line.split()[1] for line in out if line.startswith("WRITABLE")) == sorted(writable), attack.stdout

    # The node's privileged programs run, the way the kubelet and Slurm run them.
    probe = e2e.exec("demo-cpu-0", "slurmd", "/usr/local/bin/soperator-node-ready")
    assert probe.returncode == 0, probe.stdout + probe.stderr
    health = e2e.exec("demo-cpu-0", "slurmd", "/usr/local/sbin/soperator-health-check")
    assert health.returncode == 0 and "healthy" in health.stdout, health.stdout + health.stderr
    assert e2e.slurm("scontrol reconfigure").returncode == 0
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    # A root job (the example allows them) neither: /run and slurmd's spool are read-only for it too, and slurmd's
    # /proc/<pid>/root is closed to it (it lacks capabilities slurmd holds).
    root_job = e2e.jail(
        "timeout 120 srun -w demo-cpu-0 --immediate=60 sh -c 'touch /run/x && echo WROTE-RUN; "
        "touch /var/spool/slurmd/x && echo WROTE-SPOOL; ln -sfn /tmp /run/slurm/conf && echo WROTE-CONF; "
        "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = slurmd ] && "
        "{ ls $p/root/ >/dev/null 2>&1 && echo ENTERED-SLURMD || echo slurmd-closed; }; done; echo done'")
    assert root_job.returncode == 0 and "slurmd-closed" in root_job.stdout, root_job.stdout + root_job.stderr
    assert not re.search(r"WROTE|ENTERED", root_job.stdout), root_job.stdout
    # slurmd's container starts again on what the user left: the entrypoint binds and shares it all anew.
    restarts = e2e.get("pod", "demo-cpu-0")["status"]["containerStatuses"][0]["restartCount"]
    e2e.exec("demo-cpu-0", "slurmd", "kill 1")
    wait_until(lambda: (lambda p: p["status"]["containerStatuses"][0]["restartCount"] > restarts and all(
        c["status"] == "True" for c in p["status"]["conditions"] if c["type"] == "Ready"))(
        e2e.get("pod", "demo-cpu-0")), 180, "slurmd's container restarted and ready", e2e.explain)
    e2e.wait_idle(["demo-cpu-0", "demo-cpu-1"])
    # A step of the user's after all that: Slurm's own programs and plugins ran for it (slurmstepd as root).
    step = e2e.jail("cd /home/%s && %s timeout 120 srun -w demo-cpu-0 --immediate=60 id -u" % (ATTACKER, as_attacker))
    assert step.stdout.strip() == str(ATTACKER_UID), step.stdout + step.stderr

    # Nothing ran as root or as SlurmUser; the user's own run of a payload left her marker where her job ran (the
    # detection works: demo-cpu-0's scratch emptyDir, seen from its slurmd container).
    pwned = _pwned(e2e)
    assert [p for p in pwned if ".%d." % ATTACKER_UID not in p] == [], pwned
    assert "demo-cpu-0/slurmd: soperator-pwned.%d.scontrol" % ATTACKER_UID in pwned, pwned
    # No container has the user's files outside the user data; where the user data is shared (slurmd's /data, the
    # control), the same search finds them.
    user_data = ["/home", "/root", "/data", "/shared-scratch", "/hostdata", "/tmp", "/dev/shm", "/mnt/soperator"]
    for pod, container in (("demo-cpu-0", "slurmd"), ("demo-cpu-1", "slurmd"), ("demo-login-0", "sshd"),
                           ("demo-controller-0", "slurmctld")):
        assert _foreign_files(e2e, pod, container, user_data) == "", pod
    control = _foreign_files(e2e, "demo-cpu-0", "slurmd", [p for p in user_data if p != "/data"])
    assert "/data/mallory-file" in control.split(), control
    assert e2e.exec("demo-cpu-0", "slurmd", "cat /data/mallory-file").stdout.strip() == "mallory-was-here"
    # The sub-mounts as the resource asked: the emptyDirs root's 0755 and 1777, in every pod that mounts them.
    for pod, container in (("demo-cpu-0", "slurmd"), ("demo-login-0", "sshd")):
        modes = e2e.exec(pod, container, "stat -c '%a %u' /mnt/jail/scratch /mnt/jail/shared-scratch").stdout
        assert modes.split("\n")[:2] == ["755 0", "1777 0"], (pod, modes)
    # Shared with slurmd's container: the homes and the sub-mounts (none in a system tree here); /hostdata too.
    shared = e2e.exec("demo-cpu-0", "slurmd", "cat /hostdata/mallory-file /shared-scratch/mallory-file")
    assert shared.stdout.split() == ["mallory-was-here"] * 2, shared.stdout + shared.stderr


def test_teardown_keeps_the_jail_and_its_data(e2e):
    claim = e2e.get("pvc", "demo-jail")
    volume = e2e.kubectl("get", "pv", claim["spec"]["volumeName"], "-o", "jsonpath={.spec.hostPath.path}").stdout
    res = subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "teardown.yml"), "-e",
                          "slurm_cluster=demo", "-e", "slurm_namespace=" + e2e.namespace], env=e2e.env,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-4000:]
    wait_until(lambda: not e2e.get("statefulset")["items"], 120, "the StatefulSets gone")
    assert e2e.get("slurmcluster", "demo") is None
    assert e2e.get("pvc", "demo-jail") is not None
    assert e2e.get("secret", "demo-munge-key") is not None
    with open(os.path.join(volume, "home", "shared", "file")) as f:
        assert f.read().strip() == "written-on-demo-cpu-0"
