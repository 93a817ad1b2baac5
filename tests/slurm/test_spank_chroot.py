"""spank_chroot against real Slurm 24.11: srun, sbatch, salloc, two nodes, failure paths.

The cluster (conftest.py) runs in a trixie rootfs; its jail is a busybox tree at /srv/jail
with a marker file that exists nowhere else. Every Slurm command is bounded by `timeout`.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

import pytest
from slurm_cluster import GROUP_GID, JAIL, MARKER, PLUGIN_PATH, UID, USER, Cluster

USERS = [None, USER]  # root, then an ordinary user with the same uid in rootfs and jail
MARKER_TEXT = "inside the jail"


def _ids(user):
    return user or "root"


def assert_node_healthy(cluster: Cluster, node: str) -> None:
    state = cluster.node_state(node)
    assert not any(bad in state for bad in ("down", "drain", "fail")), state


@contextmanager
def plugstack(cluster: Cluster, args: str):
    """Swap the plugin's plugstack line for the duration of a test."""
    cluster.plugstack(f"required {PLUGIN_PATH} {args}\n")
    try:
        yield
    finally:
        cluster.plugstack(f"required {PLUGIN_PATH} jail={JAIL}\n")


# ---- the jail is where tasks run --------------------------------------------------------
@pytest.mark.parametrize("user", USERS, ids=_ids)
def test_srun_tasks_see_the_jail_on_both_nodes(cluster, user):
    res = cluster.srun("-N2", "-n2", "sh", "-c", f"cat {MARKER}; id -u; test ! -e /usr/sbin/slurmd",
                       user=user).check()
    lines = res.stdout.split("\n")
    assert lines.count(MARKER_TEXT) == 2, res.output
    assert lines.count(str(UID if user else 0)) == 2, res.output


@pytest.mark.parametrize("user", USERS, ids=_ids)
def test_sbatch_script_runs_in_the_jail(cluster, user):
    # The script itself is read from SlurmdSpoolDir after the pivot: it must be bound in.
    # (The busybox jail has no Slurm client, so no srun inside the script.)
    script = f"#!/bin/sh\ncat {MARKER}\nid -un\n"
    res, out = cluster.sbatch_wait(script, "-N1", user=user)
    res.check()
    assert MARKER_TEXT in out, out
    assert (user or "root") in out.split("\n"), out  # names come from the jail's /etc/passwd


def test_salloc_interactive_step_runs_in_the_jail(cluster):
    # LaunchParameters=use_interactive_step: salloc starts the shell as the interactive step.
    res = cluster.run(["sh", "-c", f"echo 'cat {MARKER}; echo step=$SLURM_STEP_ID; exit' | salloc -N1"],
                      user=USER, env={"SHELL": "/bin/sh"}).check()
    assert MARKER_TEXT in res.stdout, res.output
    assert "step=4294967290" in res.stdout, res.output  # SLURM_INTERACTIVE_STEP


def test_task_has_its_own_mounts_and_fresh_proc(cluster):
    res = cluster.srun("-w", "n1", "sh", "-c", "cat /proc/self/mountinfo",
                       user=USER).check()
    mounts = res.stdout
    for point in (" / ", " /proc ", " /dev ", " /sys ", " /tmp ", " /run "):
        assert point in mounts, mounts
    # the old root is detached, not reachable as a mount
    assert "/srv/jail /srv/jail" not in mounts
    # slurmd's own view is unchanged: no jail mounts leaked back to the node
    node_mounts = cluster.run(["cat", "/proc/self/mountinfo"]).check().stdout
    assert f"{JAIL}/proc" not in node_mounts and f" {JAIL} " not in node_mounts, node_mounts


def test_file_written_in_jail_is_seen_by_other_node_and_host(cluster):
    name = f"shared/{uuid.uuid4().hex}"
    cluster.srun("-w", "n1", "sh", "-c", f"echo from-n1 > /{name}", user=USER).check()
    res = cluster.srun("-w", "n2", "cat", f"/{name}", user=USER).check()
    assert res.stdout.strip() == "from-n1"
    host_view = cluster.jail / name
    assert host_view.read_text().strip() == "from-n1"
    assert host_view.stat().st_uid == UID


def _node_dir(cluster: Cluster, path: str, uid: int, gid: int, mode: int):
    """A directory of the node only (not in the jail), with one file."""
    node = cluster.root / path.lstrip("/")
    node.mkdir(parents=True)
    (node / "node-file").write_text("x")
    os.chown(node, uid, gid)
    node.chmod(mode)
    return node


def test_workdir_only_on_the_node_is_bound_on_a_mountpoint_the_user_makes(cluster):
    """The jail lacks the step's working directory, the node has it: it is bound, on a mount point made in the shared
    jail by the job's user, as the user's (the jail's /shared is 1777): never by root."""
    workdir = f"/shared/{uuid.uuid4().hex}/nodework"
    _node_dir(cluster, workdir, UID, UID, 0o755)
    res = cluster.srun("-w", "n1", f"--chdir={workdir}", "sh", "-c", f"pwd; ls; cat {MARKER}", user=USER).check()
    assert res.stdout.split("\n")[:3] == [workdir, "node-file", MARKER_TEXT], res.output
    made = cluster.jail / workdir.lstrip("/")
    assert made.is_dir() and not any(made.iterdir())
    for path in (made, made.parent):
        assert (path.stat().st_uid, path.stat().st_gid) == (UID, UID), path
    # a second job finds the (empty) mountpoint left in the jail and still binds the node's dir
    res = cluster.srun("-w", "n2", f"--chdir={workdir}", "ls", user=USER).check()
    assert "node-file" in res.stdout, res.output


def test_workdir_the_user_may_not_make_in_the_jail_is_not_made_for_them(cluster):
    """The node has the directory (the user's), the jail lacks it and the user may not create it there (the jail's
    /opt is root's): nothing is made in the jail on the user's behalf; the task starts in /tmp, as Slurm says."""
    top = f"opt-{uuid.uuid4().hex[:8]}"
    workdir = f"/{top}/nodework"
    _node_dir(cluster, workdir, UID, UID, 0o755)
    (cluster.jail / top).mkdir(mode=0o755)
    res = cluster.srun("-w", "n1", f"--chdir={workdir}", "sh", "-c", "pwd; ls", user=USER).check()
    assert res.stdout.split("\n")[0] == "/tmp", res.output
    assert "node-file" not in res.stdout and "chdir" in res.stderr, res.output
    assert list((cluster.jail / top).iterdir()) == []


def test_workdir_is_reached_with_the_jobs_groups_only(cluster):
    """A node directory of the user's supplementary group is bound; one of root's group, which only slurmstepd's
    own groups could open, is not."""
    base = f"/shared/{uuid.uuid4().hex}"
    _node_dir(cluster, base + "/project", 0, GROUP_GID, 0o750)
    _node_dir(cluster, base + "/roots", 0, 0, 0o750)
    res = cluster.srun("-w", "n1", f"--chdir={base}/project", "sh", "-c", "pwd; ls", user=USER).check()
    assert res.stdout.split("\n")[:2] == [base + "/project", "node-file"], res.output
    res = cluster.srun("-w", "n1", f"--chdir={base}/roots", "sh", "-c", "pwd; ls", user=USER).check()
    assert res.stdout.split("\n")[0] == "/tmp" and "node-file" not in res.stdout, res.output
    assert not (cluster.jail / base.lstrip("/") / "roots").exists()


# ---- least privilege: what a task, root's included, may do in the jail ---------------------
CAP_SETPCAP, CAP_SETUID, CAP_SYS_CHROOT, CAP_SYS_ADMIN = 8, 7, 18, 21
JAIL_CAPS = 1 << CAP_SYS_ADMIN | 1 << CAP_SYS_CHROOT | 1 << CAP_SETPCAP


def _caps(text: str) -> dict[str, int]:
    return {k.rstrip(":"): int(v, 16) for k, v in (line.split() for line in text.splitlines() if line.strip())}


@pytest.mark.parametrize("user", USERS, ids=_ids)
@pytest.mark.parametrize("mode", ["pivot", "chroot"])
def test_no_task_holds_what_entering_the_jail_needed(cluster, user, mode):
    with plugstack(cluster, f"jail={JAIL} mode={mode}"):
        res = cluster.srun("-w", "n1", "sh", "-c", "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status",
                           user=user).check()
    caps = _caps(res.stdout)
    assert set(caps) == {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}, res.output
    for kind, value in caps.items():
        assert not value & JAIL_CAPS, "%s %x holds a capability of the jail's entry" % (kind, value)
    if user is None:  # root keeps what slurmd's root had otherwise: it may still own files, change users
        assert caps["CapEff"] & (1 << CAP_SETUID), res.output


def test_a_root_job_cannot_mount_nor_leave_the_jail(cluster):
    script = ("mkdir -p /tmp/m; mount -t tmpfs none /tmp/m && echo MOUNTED; "
              "mount -o remount,rw /sys && echo REMOUNTED; "
              "chroot /tmp /bin/true && echo CHROOTED; echo done")
    for run in (lambda: cluster.srun("-w", "n1", "sh", "-c", script),
                lambda: cluster.sbatch_wait("#!/bin/sh\n" + script + "\n", "-w", "n2")):
        res = run()
        out = res[1] if isinstance(res, tuple) else res.output
        assert "done" in out, out
        assert "MOUNTED" not in out and "REMOUNTED" not in out and "CHROOTED" not in out, out
    assert_node_healthy(cluster, "n1")


def test_the_nodes_sys_and_kernel_tunables_are_read_only_in_the_jail(cluster):
    res = cluster.srun("-w", "n1", "sh", "-c", "cat /proc/self/mountinfo; echo ---; "
                       "echo slurm-test > /proc/sys/kernel/hostname && echo WROTE-PROC; "
                       "mkdir /sys/fs/cgroup/soperator-test && echo WROTE-SYS; echo done").check()
    mountinfo, after = res.stdout.split("---", 1)
    points = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        points[fields[4]] = fields[5].split(",")
    below_sys = [p for p in points if p == "/sys" or p.startswith("/sys/")]
    assert len(below_sys) >= 1, mountinfo
    # /proc/sysrq-trigger, /proc/irq, ...: read-only where the kernel has them (this VM's has no sysrq)
    for point in below_sys + ["/proc/sys"] + [p for p in ("/proc/sysrq-trigger", "/proc/irq") if p in points]:
        assert "ro" in points[point], (point, points.get(point))
    assert "rw" in points["/proc"] and "rw" in points["/tmp"]
    assert "WROTE-PROC" not in after and "WROTE-SYS" not in after and "done" in after, after


def test_the_nodes_run_is_read_only_for_every_task(cluster):
    """/run is the node's (munge's socket, the configuration slurmd fetched and its link): a root task, which owns
    those files, can neither add nor replace anything there, nor below it; the socket stays reachable."""
    (cluster.root / "run" / "soperator-test").mkdir(exist_ok=True)
    script = ("touch /run/x && echo WROTE-RUN; ln -s /tmp /run/soperator-link && echo LINKED; "
              "touch /run/soperator-test/x && echo WROTE-BELOW; ls /run/munge; echo done")
    res = cluster.srun("-w", "n1", "sh", "-c", script).check()
    assert "munge.socket.2" in res.stdout and res.stdout.strip().endswith("done"), res.output
    assert not {"WROTE-RUN", "LINKED", "WROTE-BELOW"} & set(res.stdout.split()), res.output
    mounts = cluster.srun("-w", "n1", "cat", "/proc/self/mountinfo").check().stdout
    run = [line.split() for line in mounts.splitlines() if line.split()[4] == "/run"]
    assert run and "ro" in run[0][5].split(","), mounts


# ---- steps that must not be jailed -------------------------------------------------------
def test_extern_step_is_not_jailed(cluster):
    """PrologFlags=Contain: the extern step's process runs in the node's root, the batch
    step's in the jail. Judged from /proc/<pid>/root of the pids slurmstepd reports."""
    jobid = cluster.run(["sbatch", "--parsable", "-w", "n1", "-o", "/dev/null", "--wrap",
                         "sleep 60"], user=USER).check().stdout.strip()
    try:
        def both_steps():
            res = cluster.run(["scontrol", "listpids", jobid, "n1"])
            rows = [line.split() for line in res.stdout.splitlines()[1:]]
            pids = {}
            for row in rows:
                if len(row) >= 3 and row[0].isdigit() and int(row[0]) > 0:
                    pids.setdefault(row[2], []).append(int(row[0]))
            return pids if {"extern", "batch"} <= pids.keys() else None

        from slurm_cluster import wait_for
        pids = wait_for(both_steps, 30, "extern and batch steps' pids")

        def jailed(pid: int) -> bool:
            return cluster.run(["test", "-e", f"/proc/{pid}/root{MARKER}"]).returncode == 0

        assert not any(jailed(p) for p in pids["extern"]), pids
        assert all(jailed(p) for p in pids["batch"]), pids
    finally:
        cluster.run(["scancel", jobid])


# ---- failing closed ----------------------------------------------------------------------
def _assert_failed_closed(res, expected: str):
    assert res.returncode != 0, res.output
    assert expected in res.output, res.output
    assert MARKER_TEXT not in res.stdout
    assert "RAN-ON-NODE-ROOT" not in res.stdout, "task ran outside the jail"


def test_missing_jail_fails_the_job_not_the_node(cluster):
    moved = cluster.jail.with_name("jail.moved")
    cluster.jail.rename(moved)
    try:
        res = cluster.srun("-w", "n1", "sh", "-c", "echo RAN-ON-NODE-ROOT", user=USER)
        _assert_failed_closed(res, f"spank_chroot: jail {JAIL}: No such file or directory (ENOENT)")
        sb, out = cluster.sbatch_wait("#!/bin/sh\necho RAN-ON-NODE-ROOT\n", "-w", "n2", user=USER)
        assert sb.returncode != 0
        assert f"spank_chroot: jail {JAIL}: No such file or directory (ENOENT)" in out + sb.output
        assert "RAN-ON-NODE-ROOT" not in out
    finally:
        moved.rename(cluster.jail)
    for node in ("n1", "n2"):
        assert_node_healthy(cluster, node)
        res = cluster.srun("-w", node, "cat", MARKER, user=USER).check()
        assert MARKER_TEXT in res.stdout


def test_symlinked_mountpoint_in_jail_is_refused(cluster):
    """A jail whose /tmp points out of it must not get the node's /tmp mounted over the
    symlink's target."""
    tmp = cluster.jail / "tmp"
    saved = cluster.jail / "tmp.saved"
    tmp.rename(saved)
    tmp.symlink_to("/etc")
    try:
        res = cluster.srun("-w", "n1", "sh", "-c", "echo RAN-ON-NODE-ROOT")
        _assert_failed_closed(
            res, f"spank_chroot: mountpoint {JAIL}/tmp: Too many levels of symbolic links (ELOOP)")
    finally:
        tmp.unlink()
        saved.rename(tmp)
    assert_node_healthy(cluster, "n1")
    cluster.srun("-w", "n1", "cat", MARKER).check()


def test_unknown_plugstack_option_refuses_to_load(cluster):
    with plugstack(cluster, f"jail={JAIL} bogus=1"):
        res = cluster.srun("-w", "n1", "sh", "-c", "echo RAN-ON-NODE-ROOT", user=USER)
        _assert_failed_closed(res, 'spank_chroot: invalid plugstack.conf arguments: unknown argument "bogus"')
        sb, out = cluster.sbatch_wait("#!/bin/sh\necho RAN-ON-NODE-ROOT\n", "-w", "n1", user=USER)
        _assert_failed_closed(sb, 'spank_chroot: invalid plugstack.conf arguments: unknown argument "bogus"')
        assert out == ""  # refused at submission: no job ran
    assert_node_healthy(cluster, "n1")
    cluster.srun("-w", "n1", "cat", MARKER, user=USER).check()


def test_chroot_mode(cluster):
    with plugstack(cluster, f"jail={JAIL} mode=chroot"):
        res = cluster.srun("-N2", "cat", MARKER, user=USER).check()
    assert res.stdout.count(MARKER_TEXT) == 2


def test_extra_bind_read_only(cluster):
    src = cluster.root / "opt" / "datasets"
    src.mkdir(parents=True, exist_ok=True)
    (src / "data.txt").write_text("node data\n")
    with plugstack(cluster, f"jail={JAIL} bind=/opt/datasets:/data:ro,/nonexistent::optional"):
        res = cluster.srun("-w", "n2", "sh", "-c", "cat /data/data.txt; touch /data/x || echo RO",
                           user=None).check()
    assert res.stdout.split("\n")[:2] == ["node data", "RO"], res.output


def test_plugin_loads_and_does_nothing_in_srun_itself(cluster):
    """Local context: srun loads the .so (it must exist on submit hosts) and stays in the
    node's root; only the remote tasks move."""
    res = cluster.srun("-w", "n1", "cat", MARKER, user=USER).check()
    assert MARKER_TEXT in res.stdout
    assert not (cluster.root / MARKER.lstrip("/")).exists()


# ---- the C unit tests, built inside the rootfs (trixie's gcc, ASan) ----------------------
def test_c_unit_tests_and_asan(cluster):
    res = cluster.run(["make", "-C", "/usr/local/src/spank_chroot", "test", "asan"],
                      timeout=240).check()
    assert "0 failed" in res.stdout, res.output
    assert "fuzz replay:" in res.stdout, res.output
