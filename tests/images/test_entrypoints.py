"""The images' scripts run directly on the host: soperator-entrypoint and populate-jail.

Every path of the entrypoint is prefixed by SOPERATOR_ROOT, so a fake container filesystem under tmp_path
stands in for the image. Bind mounts are real: each run is wrapped in `unshare -m` (a private mount namespace
that disappears with it), and the command given to the entrypoint (what it execs) inspects the result from
inside that namespace. Needs root (mounts, chown), like the real containers.
"""

import fcntl
import os
import pwd
import shutil
import socket
import stat
import subprocess
import time

import pytest
from prerequisites import require_root

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRYPOINT = os.path.join(ROOT, "images", "lib", "soperator-entrypoint")
POPULATE = os.path.join(ROOT, "images", "populate-jail", "populate-jail")
SPANK = os.path.join(ROOT, "spank_chroot")



@pytest.fixture(autouse=True, scope="module")
def _root():
    require_root("bind mounts, chown (as in the containers)")


SLURM_PATHS = ["/usr/bin/srun", "/usr/bin/sinfo", "/usr/lib/x86_64-linux-gnu/libslurm.so.42",
               "/usr/lib/x86_64-linux-gnu/slurm-wlm"]


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


@pytest.fixture
def fs(tmp_path):
    """A container's filesystem: the daemon's Slurm, its own accounts, a populated jail, munge's socket."""
    r = str(tmp_path / "root")
    write(r + "/etc/soperator/jail-slurm-paths", "# generated\n" + "\n".join(SLURM_PATHS + ["/usr/bin/absent"]) + "\n")
    write(r + "/usr/bin/srun", "daemon srun\n", 0o755)
    write(r + "/usr/bin/sinfo", "daemon sinfo\n", 0o755)
    write(r + "/usr/lib/x86_64-linux-gnu/libslurm.so.42", "daemon libslurm\n")
    write(r + "/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_munge.so", "daemon plugin\n")
    write(r + "/etc/hosts", "10.0.0.5 pod-0\n")
    write(r + "/etc/resolv.conf", "search pod.svc\n")
    write(r + "/etc/hostname", "pod-0\n")
    write(r + "/etc/passwd", "root:x:0:0::/root:/bin/sh\n")
    write(r + "/etc/group", "root:x:0:\n")
    for d in ("dev", "proc", "sys"):
        write("%s/%s/marker" % (r, d), d + "\n")
    j = r + "/mnt/jail"
    write(j + "/usr/bin/srun", "jail srun\n", 0o755)
    write(j + "/etc/passwd", "root:x:0:0::/root:/bin/bash\nsshd:x:991:65534::/run/sshd:/usr/sbin/nologin\n"
                             "alice:x:2000:2000::/home/alice:/bin/bash\n")
    write(j + "/etc/group", "root:x:0:\nalice:x:2000:\n")
    write(j + "/etc/shadow", "root:*:1::::::\nalice:*:1::::::\n", 0o640)
    write(j + "/.soperator-populated", "image=test\n")
    os.makedirs(r + "/run/munge")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(r + "/run/munge/munge.socket.2")
    yield r
    sock.close()


@pytest.fixture(scope="session")
def tools(tmp_path_factory):
    """A directory with the images' soperator-bind-beneath, built from the spank_chroot sources as they build it."""
    subprocess.run(["make", "-s", "-C", SPANK, "soperator-bind-beneath"], check=True, capture_output=True)
    bin_dir = str(tmp_path_factory.mktemp("bin"))
    shutil.copy2(os.path.join(SPANK, "soperator-bind-beneath"), bin_dir)
    return bin_dir


@pytest.fixture(autouse=True)
def _tools_on_path(tools, monkeypatch):
    monkeypatch.setenv("PATH", tools + os.pathsep + os.environ["PATH"])


def entrypoint(r, role, command, env=None, unshare=True, **kwargs):
    full_env = dict(os.environ, SOPERATOR_ROOT=r, SOPERATOR_ROLE=role, SOPERATOR_WAIT_TIMEOUT="5",
                    SOPERATOR_JAIL_WAIT_TIMEOUT="5")
    full_env.update(env or {})
    argv = ([ENTRYPOINT] + command) if not unshare else ["unshare", "-m", "--", ENTRYPOINT] + command
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=60, **kwargs)


def sh(script):
    return ["sh", "-c", script]


# ------------------------------------------------------------------------------------------------ worker
def test_worker_completes_the_jail_with_the_daemons_slurm_by_bind_mounts(fs):
    j = fs + "/mnt/jail"
    result = entrypoint(fs, "worker", sh(
        "cat {j}/usr/bin/srun {j}/usr/bin/sinfo {j}/usr/lib/x86_64-linux-gnu/libslurm.so.42 "
        "{j}/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_munge.so {j}/etc/hosts {j}/etc/resolv.conf; "
        "readlink {j}/etc/slurm; echo > {j}/usr/bin/srun || echo read-only".format(j=j)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "daemon srun", "daemon sinfo", "daemon libslurm", "daemon plugin", "10.0.0.5 pod-0", "search pod.svc",
        "/run/slurm/conf", "read-only"]
    assert "jail completed: 4 Slurm client paths" in result.stderr
    # Mounts, not copies: outside the pod's mount namespace the shared jail is unchanged.
    with open(j + "/usr/bin/srun") as f:
        assert f.read() == "jail srun\n"
    assert os.path.isdir(fs + "/var/spool/slurmd") and os.path.isdir(fs + "/run/slurm")


def test_worker_shares_its_runtime_directories_read_only_with_the_jail(fs):
    """slurmd's spool (the configuration it fetched, batch scripts), /run/slurm and munge's socket: the same in the
    jail, where nobody may change them; the kubelet's 0777 emptyDirs become 0755; /dev/shm 1777."""
    j = fs + "/mnt/jail"
    for d in ("/var/spool/slurmd", "/run/slurm", "/dev/shm"):
        os.makedirs(fs + d, exist_ok=True)
        os.chmod(fs + d, 0o777)
    write(fs + "/var/spool/slurmd/conf-cache/slurm.conf", "ClusterName=x\n")
    result = entrypoint(fs, "worker", sh(
        "cat {j}/var/spool/slurmd/conf-cache/slurm.conf; test -S {j}/run/munge/munge.socket.2 && echo socket; "
        "for d in {j}/var/spool/slurmd {j}/run/slurm {j}/run/munge; do touch $d/x 2>/dev/null && echo WROTE $d; "
        "done; echo done".format(j=j)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ClusterName=x", "socket", "done"]
    for d, mode in (("/var/spool/slurmd", 0o755), ("/run/slurm", 0o755), ("/dev/shm", 0o1777)):
        assert stat.S_IMODE(os.stat(fs + d).st_mode) == mode, d


def sub_mount_volumes(fs, *names_):
    """The kubelet's mounts of the jail's sub-mounts, by name, outside the jail (0777 and a user's, as an emptyDir
    may be found); each holds a file named after it."""
    for name in names_:
        d = "%s%s/%s" % (fs, names.SUB_MOUNTS_DIR, name)
        write(d + "/in-" + name, name + "\n")
        os.chmod(d, 0o777)
        os.chown(d, 2000, 2000)


def test_sub_mounts_are_bound_into_the_jail_with_their_modes(fs):
    """Each sub-mount at its jail path (outer ones first), read-only as asked; an emptyDir's directory root's with
    the mode asked. Mounts, not copies: nothing lands in the shared jail's own directories."""
    j = fs + "/mnt/jail"
    sub_mount_volumes(fs, "data", "inner", "scratch", "shared")
    os.mkdir("%s%s/data/inner" % (fs, names.SUB_MOUNTS_DIR))  # the mount point in a read-only volume
    env = {"SOPERATOR_JAIL_SUB_MOUNTS": "inner:/data/inner:rw data:/data:ro scratch:/scratch:rw:0755 "
                                        "shared:/shared:ro:1777"}
    result = entrypoint(fs, "worker", sh(
        "cat {j}/data/in-data {j}/data/inner/in-inner {j}/scratch/in-scratch; stat -c '%a %u' {j}/scratch "
        "{j}/shared; for d in data data/inner scratch shared; do touch {j}/$d/x 2>/dev/null && echo WROTE $d; "
        "done; echo done".format(j=j)), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["data", "inner", "scratch", "755 0", "1777 0", "WROTE data/inner",
                                          "WROTE scratch", "done"]
    assert "sub-mount shared at /shared (ro, mode 1777)" in result.stderr
    assert not os.path.exists(j + "/data/in-data") and not os.path.exists(j + "/scratch/in-scratch")


def test_a_symlink_where_a_sub_mount_goes_fails_the_container(fs):
    """A job replaced the mount point of a nested sub-mount (in a volume users write) with a link to the
    container's own files: the runtime would have mounted the volume there. The entrypoint refuses, fail closed;
    the container's files are untouched."""
    sub_mount_volumes(fs, "data", "inner")
    os.symlink("/usr/local/bin", "%s%s/data/inner" % (fs, names.SUB_MOUNTS_DIR))
    write(fs + "/usr/local/bin/soperator-node-ready", "probe\n", 0o755)
    result = entrypoint(fs, "worker", sh("echo RAN"),
                        env={"SOPERATOR_JAIL_SUB_MOUNTS": "data:/data:rw inner:/data/inner:rw:1777"})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "/data/inner: Too many levels of symbolic links (ELOOP)" in result.stderr, result.stderr
    assert os.listdir(fs + "/usr/local/bin") == ["soperator-node-ready"]


def test_worker_shares_the_jails_user_paths_with_slurmstepd(fs):
    """sbatch -o /home/alice/out is opened by slurmstepd before the task is jailed: it must be the jail's file."""
    j = fs + "/mnt/jail"
    write(j + "/home/alice/data", "in the jail\n")
    write(j + "/scratch/x", "scratch\n")
    result = entrypoint(fs, "worker", sh("cat {r}/home/alice/data {r}/scratch/x; echo out > {r}/home/alice/out"
                                         .format(r=fs)), env={"SOPERATOR_JAIL_SHARED_PATHS": "/home /scratch /absent"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["in the jail", "scratch"]
    with open(j + "/home/alice/out") as f:  # written through the container's /home: it is in the jail
        assert f.read() == "out\n"
    assert "jail /home shared at /home" in result.stderr and "/absent" not in result.stderr


def test_worker_refuses_a_relative_shared_path(fs):
    result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_JAIL_SHARED_PATHS": "home"})
    assert result.returncode == 1 and "not an absolute path" in result.stderr


@pytest.mark.parametrize("path", [p for tree in paths.DAEMON_MIRROR_REFUSED_TREES for p in (tree, tree + "/x")
                                  if p != "/root"]  # root's home itself is shared (SHARED_HOMES), nothing below it
                         + ["/usr/local/bin", "/etc/munge", "/usr/lib/x86_64-linux-gnu/slurm", "/var/spool/slurmd",
                            "/lib", "/lib64/x", "/libexec"])
def test_worker_refuses_to_share_a_path_of_a_system_tree_whatever_the_manifest_asks(fs, path):
    """Defence in depth: the renderer never asks, and if a manifest does, the container does not start."""
    os.makedirs(fs + "/mnt/jail" + path, exist_ok=True)
    write(fs + "/mnt/jail" + path + "/payload", "#!/bin/sh\necho pwned\n", 0o755)
    result = entrypoint(fs, "worker", sh("echo RAN"), env={"SOPERATOR_JAIL_SHARED_PATHS": "/home " + path})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "refusing %s: it is in " % path in result.stderr, result.stderr
    assert not os.path.exists(fs + path + "/payload")


@pytest.mark.parametrize("path", ["/mnt", "/mnt/soperator"])
def test_worker_refuses_to_share_a_parent_of_a_system_tree(fs, path):
    os.makedirs(fs + "/mnt/jail" + path, exist_ok=True)
    result = entrypoint(fs, "worker", sh("echo RAN"), env={"SOPERATOR_JAIL_SHARED_PATHS": path})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "refusing %s: it would hide " % path in result.stderr, result.stderr


@pytest.mark.parametrize("path", ["/", "/home/../etc", "/home//x", "/./home"])
def test_worker_refuses_a_shared_path_that_is_not_normalised(fs, path):
    result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_JAIL_SHARED_PATHS": path})
    assert result.returncode == 1 and "not a normalised absolute path" in result.stderr


def test_worker_does_not_share_a_jail_path_through_a_symlink(fs):
    """A link in the jail where a shared path is (the jail's root is writable by its root's jobs), or in the
    image's path: never followed, the container does not start."""
    j = fs + "/mnt/jail"
    os.symlink("/usr/local/bin", j + "/data")
    result = entrypoint(fs, "worker", sh("echo RAN"), env={"SOPERATOR_JAIL_SHARED_PATHS": "/home /data"})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "ELOOP" in result.stderr, result.stderr
    os.remove(j + "/data")
    os.makedirs(j + "/data")
    os.makedirs(fs + "/usr/local/bin")
    os.symlink(fs + "/usr/local/bin", fs + "/data")
    result = entrypoint(fs, "worker", sh("echo RAN"), env={"SOPERATOR_JAIL_SHARED_PATHS": "/home /data"})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "it would hide this image's own /data" in result.stderr, result.stderr


def test_worker_does_not_hide_the_images_own_files(fs):
    write(fs + "/tools/bin/tool", "image tool\n", 0o755)
    os.makedirs(fs + "/mnt/jail/tools")
    result = entrypoint(fs, "worker", sh("echo RAN"), env={"SOPERATOR_JAIL_SHARED_PATHS": "/home /tools"})
    assert result.returncode == 1 and "RAN" not in result.stdout
    assert "refusing /tools: it would hide this image's own /tools" in result.stderr


def test_worker_takes_users_and_groups_from_the_jail(fs):
    result = entrypoint(fs, "worker", ["true"])
    assert result.returncode == 0, result.stderr
    for name in ("passwd", "group"):
        assert os.readlink("%s/etc/%s" % (fs, name)) == "%s/mnt/jail/etc/%s" % (fs, name)
    with open(fs + "/etc/passwd") as f:
        assert "alice:x:2000" in f.read()
    # Idempotent: a restarted container finds the links in place.
    assert entrypoint(fs, "worker", ["true"]).returncode == 0


def test_worker_waits_for_the_populated_jail(fs):
    os.remove(fs + "/mnt/jail/.soperator-populated")
    env = dict(os.environ, SOPERATOR_ROOT=fs, SOPERATOR_ROLE="worker", SOPERATOR_JAIL_WAIT_TIMEOUT="30")
    proc = subprocess.Popen(["unshare", "-m", "--", ENTRYPOINT, "echo", "started"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "waiting for the jail" in line and ".soperator-populated" in line
        assert proc.poll() is None
        write(fs + "/mnt/jail/.soperator-populated", "image=test\n")
        out, _err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "started\n"


def test_worker_gives_up_on_a_jail_that_is_never_populated(fs):
    os.remove(fs + "/mnt/jail/.soperator-populated")
    result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_JAIL_WAIT_TIMEOUT": "1"})
    assert result.returncode == 1
    assert "gave up waiting for the jail" in result.stderr


def test_worker_refuses_a_jail_path_that_leads_outside_the_jail(fs, tmp_path):
    outside = tmp_path / "node-files"
    outside.mkdir()
    os.makedirs(fs + "/mnt/jail/usr/lib")
    os.symlink(str(outside), fs + "/mnt/jail/usr/lib/x86_64-linux-gnu")
    result = entrypoint(fs, "worker", ["true"])
    assert result.returncode == 1
    assert "outside the jail" in result.stderr
    assert os.listdir(str(outside)) == []


def test_without_cap_sys_admin_the_clients_are_copied_into_the_jail(fs):
    result = subprocess.run(
        ["unshare", "-m", "--", "setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", ENTRYPOINT,
         "true"], env=dict(os.environ, SOPERATOR_ROOT=fs, SOPERATOR_ROLE="worker"),
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "cannot bind-mount into the jail" in result.stderr
    # what cannot be copied is left out, and said so
    assert "warning: cannot mount (no CAP_SYS_ADMIN?): /run/munge not bound" in result.stderr
    with open(fs + "/mnt/jail/usr/bin/srun") as f:
        assert f.read() == "daemon srun\n"


def test_worker_without_munge_socket_fails_clearly(fs):
    os.remove(fs + "/run/munge/munge.socket.2")
    result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_WAIT_TIMEOUT": "1"})
    assert result.returncode == 1
    assert "munge socket" in result.stderr and "munge sidecar" in result.stderr


# ------------------------------------------------------------------------------------------------ login
def test_login_completes_the_jail_for_sessions(fs):
    j = fs + "/mnt/jail"
    os.chmod(j, 0o777)
    result = entrypoint(fs, "login", sh("cat {j}/usr/bin/srun {j}/dev/marker {j}/proc/marker; "
                                        "readlink {j}/etc/slurm".format(j=j)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["daemon srun", "dev", "proc", "/run/slurm/conf"]
    for name in ("passwd", "group"):
        assert os.readlink("%s/etc/%s" % (fs, name)) == "%s/etc/%s" % (j, name)
    # Not shadow: a new user's locked password ("!") would make sshd (no PAM) refuse even their key.
    assert not os.path.islink(fs + "/etc/shadow")
    # sshd's ChrootDirectory: root's, writable by nobody else; privilege separation directory.
    assert stat.S_IMODE(os.stat(j).st_mode) == 0o755
    assert os.path.isdir(fs + "/run/sshd")


def test_login_binds_the_sub_mounts_and_its_runtime_directories_read_only(fs):
    j = fs + "/mnt/jail"
    sub_mount_volumes(fs, "scratch")
    os.makedirs(fs + "/run/slurm/conf")
    os.chmod(fs + "/run/slurm", 0o777)
    result = entrypoint(fs, "login", sh("cat {j}/scratch/in-scratch; stat -c '%a %u' {j}/scratch; "
                                        "touch {j}/run/slurm/x 2>/dev/null && echo WROTE; echo done".format(j=j)),
                        env={"SOPERATOR_JAIL_SUB_MOUNTS": "scratch:/scratch:rw:1777"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["scratch", "1777 0", "done"]
    assert stat.S_IMODE(os.stat(fs + "/run/slurm").st_mode) == 0o755


def test_login_leaves_run_slurm_to_sackd_which_remakes_its_conf_directory(fs):
    """sackd (SlurmUser) removes and makes /run/slurm/conf again at each start: /run/slurm is given to the owner of
    conf (a restarted sackd otherwise exits: "failed to create a clean cache dir"), mode 0755, read-only in the jail."""
    os.makedirs(fs + "/run/slurm/conf")
    os.chown(fs + "/run/slurm/conf", 64030, 64030)
    os.chmod(fs + "/run/slurm", 0o777)
    result = entrypoint(fs, "login", sh("touch {j}/run/slurm/x 2>/dev/null && echo WROTE; echo done".format(
        j=fs + "/mnt/jail")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["done"]
    st = os.stat(fs + "/run/slurm")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (64030, 0o755)


def test_login_needs_the_sshd_user_in_the_jail(fs):
    write(fs + "/mnt/jail/etc/passwd", "root:x:0:0::/root:/bin/bash\n")
    result = entrypoint(fs, "login", ["true"])
    assert result.returncode == 1
    assert "no user sshd" in result.stderr


# ------------------------------------------------------------------------------------------------ munge
def test_munge_key_is_copied_to_a_0400_file_of_the_munge_user(fs):
    write(fs + "/etc/soperator/munge/munge.key", "k" * 1024, 0o444)
    result = entrypoint(fs, "munge", ["id", "-un"], env={"SOPERATOR_MUNGE_USER": "nobody"}, unshare=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "nobody\n"  # munged runs as the munge user
    owner = subprocess.check_output(["stat", "-c", "%a %U", fs + "/etc/munge/munge.key", fs + "/run/munge"], text=True)
    assert owner.splitlines() == ["400 nobody", "755 nobody"]
    with open(fs + "/etc/munge/munge.key") as f:
        assert f.read() == "k" * 1024


@pytest.mark.parametrize("key, message", [(None, "no munge key at"), ("short", "at least 32")])
def test_munge_refuses_a_missing_or_short_key(fs, key, message):
    if key is not None:
        write(fs + "/etc/soperator/munge/munge.key", key)
    result = entrypoint(fs, "munge", ["true"], env={"SOPERATOR_MUNGE_USER": "nobody"}, unshare=False)
    assert result.returncode == 1
    assert message in result.stderr


def test_role_follows_the_program_name(fs):
    write(fs + "/etc/soperator/munge/munge.key", "k" * 64)
    bindir = os.path.join(fs, "fakebin")
    write(bindir + "/munged", "#!/bin/sh\necho \"munged $*\"\n", 0o755)
    env = dict(os.environ, SOPERATOR_ROOT=fs, SOPERATOR_MUNGE_USER="root", PATH=bindir + ":" + os.environ["PATH"])
    result = subprocess.run([ENTRYPOINT, "munged", "--foreground"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "munged --foreground\n" and "[munge]: munge key installed" in result.stderr
    plain = subprocess.run([ENTRYPOINT, "echo", "as is"], env=env, capture_output=True, text=True)
    assert plain.stdout == "as is\n" and plain.stderr == ""


# ------------------------------------------------------------------------------------------------ controller
def test_controller_hands_the_spool_to_slurmuser_and_reconfigures_once_slurmctld_answers(fs):
    write(fs + "/etc/slurm/slurm.conf", "ClusterName=c\nSlurmUser=nobody # comment\n")
    bindir = os.path.join(fs, "fakebin")
    calls = os.path.join(fs, "scontrol.calls")
    write(bindir + "/scontrol", "#!/bin/sh\necho \"$*\" >> %s\n" % calls, 0o755)
    env = {"PATH": bindir + ":" + os.environ["PATH"]}
    # The command stands in for slurmctld: it ends once the background `scontrol reconfigure` has run.
    result = entrypoint(fs, "controller", sh("timeout 20 sh -c 'until grep -q reconfigure %s; do sleep 0.1; done'"
                                             % calls), env=env, unshare=False)
    assert result.returncode == 0, result.stderr
    with open(calls) as f:
        assert f.read().splitlines() == ["ping", "reconfigure"]
    assert subprocess.check_output(["stat", "-c", "%U", fs + "/var/spool/slurmctld"], text=True) == "nobody\n"
    # The jail is mounted: slurmctld resolves the jail's users (job credentials carry them).
    assert os.readlink(fs + "/etc/passwd") == fs + "/mnt/jail/etc/passwd"


def test_controller_without_a_jail_keeps_its_own_users(fs):
    write(fs + "/etc/slurm/slurm.conf", "ClusterName=c\n")
    shutil.rmtree(fs + "/mnt/jail")
    result = entrypoint(fs, "controller", ["true"], env={"SOPERATOR_RECONFIGURE": "0"}, unshare=False)
    assert result.returncode == 0, result.stderr
    assert "no jail at" in result.stderr
    assert not os.path.islink(fs + "/etc/passwd")


def test_controller_gives_slurmuser_a_copy_of_the_jwt_key(fs):
    """slurmctld reads the JWT key at start as root without CAP_DAC_* and after each reconfigure as SlurmUser; the
    Secret's file is root's 0400: the copy and its directory are root's and SlurmUser's group's, closed to others."""
    write(fs + "/etc/slurm/slurm.conf", "ClusterName=c\nSlurmUser=nobody\n"
                                        "AuthAltParameters=jwt_key=/run/slurmctld/jwt_hs256.key\n")
    write(fs + "/etc/soperator/jwt/jwt_hs256.key", "k" * 64, 0o400)
    result = entrypoint(fs, "controller", ["true"], env={"SOPERATOR_RECONFIGURE": "0"}, unshare=False)
    assert result.returncode == 0, result.stderr
    key = fs + "/run/slurmctld/jwt_hs256.key"
    info, parent = os.stat(key), os.stat(os.path.dirname(key))
    group = pwd.getpwnam("nobody").pw_gid
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o440, 0, group)
    assert (stat.S_IMODE(parent.st_mode), parent.st_uid, parent.st_gid) == (0o750, 0, group)
    with open(key) as f:
        assert f.read() == "k" * 64
    # A restart takes the directory back and writes the key again.
    result = entrypoint(fs, "controller", ["true"], env={"SOPERATOR_RECONFIGURE": "0"}, unshare=False)
    assert result.returncode == 0, result.stderr
    # Without auth/jwt nothing is copied; with it but no Secret mounted, a clear error.
    os.remove(fs + "/etc/soperator/jwt/jwt_hs256.key")
    result = entrypoint(fs, "controller", ["true"], env={"SOPERATOR_RECONFIGURE": "0"}, unshare=False)
    assert result.returncode == 1 and "jwt-key Secret" in result.stderr


def test_controller_needs_its_configuration(fs):
    result = entrypoint(fs, "controller", ["true"], unshare=False)
    assert result.returncode == 1
    assert "slurm-config ConfigMap" in result.stderr


# ------------------------------------------------------------------------------------------------ populate-jail
@pytest.fixture
def image(tmp_path):
    """A small root filesystem: owners, modes, setuid, hard and symbolic links, xattrs, kernel mount points."""
    src = str(tmp_path / "image")
    write(src + "/etc/soperator/jail-image", "soperator/jail:test\n")
    write(src + "/etc/passwd", "root:x:0:0::/root:/bin/bash\n")
    write(src + "/usr/bin/tool", "#!/bin/sh\n", 0o755)
    write(src + "/usr/bin/sudo", "setuid\n", 0o4755)
    os.link(src + "/usr/bin/tool", src + "/usr/bin/tool-again")
    os.symlink("usr/bin", src + "/bin")
    write(src + "/home/owned", "x\n")
    os.chown(src + "/home/owned", 1234, 2345)
    os.setxattr(src + "/usr/bin/tool", "user.soperator", b"kept")
    for d in ("proc", "sys", "dev"):
        write("%s/%s/contents" % (src, d), "not copied\n")
    write(src + "/opt/soperator/bin/populate-jail", "the tool\n")
    for i in range(300):
        write("%s/usr/share/many/f%03d" % (src, i), "%d\n" % i)
    return src


def populate(src, target, *args, **kwargs):
    return subprocess.run([POPULATE, "--source", src, "--target", target] + list(args), capture_output=True,
                          text=True, timeout=120, **kwargs)


def test_populate_fills_an_empty_dir_and_marks_it(image, tmp_path):
    target = str(tmp_path / "jail")
    os.makedirs(target)
    result = populate(image, target)
    assert result.returncode == 0, result.stderr
    assert os.stat(target + "/usr/bin/sudo").st_mode & 0o7777 == 0o4755
    owned = os.stat(target + "/home/owned")
    assert (owned.st_uid, owned.st_gid) == (1234, 2345)
    assert os.stat(target + "/usr/bin/tool").st_ino == os.stat(target + "/usr/bin/tool-again").st_ino
    assert os.readlink(target + "/bin") == "usr/bin"
    assert os.getxattr(target + "/usr/bin/tool", "user.soperator") == b"kept"
    assert len(os.listdir(target + "/usr/share/many")) == 300
    # Kernel file systems: mount points only. The tool's own directory stays out.
    for d in ("proc", "sys", "dev"):
        assert os.listdir("%s/%s" % (target, d)) == []
    assert not os.path.exists(target + "/opt/soperator")
    with open(target + "/.soperator-populated") as f:
        sentinel = dict(line.split("=", 1) for line in f.read().splitlines())
    assert sentinel["image"] == "soperator/jail:test" and sentinel["source"] == image and sentinel["date"]


def test_populate_refuses_a_populated_jail(image, tmp_path):
    target = str(tmp_path / "jail")
    assert populate(image, target).returncode == 0
    result = populate(image, target)
    assert result.returncode == 3
    assert "already populated (image=soperator/jail:test" in result.stderr
    assert "pass --overwrite" in result.stderr
    skipped = populate(image, target, "--skip-if-populated")
    assert skipped.returncode == 0 and "nothing to do" in skipped.stderr


def test_populate_overwrite_replaces_the_images_files_and_keeps_the_rest(image, tmp_path):
    target = str(tmp_path / "jail")
    assert populate(image, target).returncode == 0
    with open(target + "/.soperator-populated") as f:
        first = f.read()
    write(target + "/usr/bin/tool", "changed by an admin\n")
    write(target + "/home/alice/work", "user data\n")
    write(target + "/etc/passwd", "root:x:0:0::/root:/bin/bash\nalice:x:2000:2000::/home/alice:/bin/bash\n")
    result = populate(image, target, "--overwrite")
    assert result.returncode == 0, result.stderr
    with open(target + "/usr/bin/tool") as f:
        assert f.read() == "#!/bin/sh\n"
    with open(target + "/home/alice/work") as f:
        assert f.read() == "user data\n"
    with open(target + "/etc/passwd") as f:
        assert "alice" in f.read()
    with open(target + "/.soperator-populated") as f:
        second = f.read()
    assert second != first and "overwrite=yes" in second


@pytest.mark.parametrize("args", [[], ["--skip-if-populated"]])
def test_populate_refuses_a_volume_with_someone_elses_files(image, tmp_path, args):
    target = str(tmp_path / "jail")
    write(target + "/etc/passwd", "root:x:0:0::/root:/bin/bash\nbob:x:3000:3000::/home/bob:/bin/sh\n")
    write(target + "/home/bob/thesis.tex", "years of work\n")
    result = populate(image, target, *args)
    assert result.returncode == 4, result.stderr
    last = result.stderr.strip().splitlines()[-1]  # what the converge shows from the pod's log
    assert "not populated by soperator" in last and "spec.jail.populate.repopulateToken" in last
    with open(target + "/etc/passwd") as f:
        assert "bob" in f.read()
    assert not os.path.exists(target + "/.soperator-populated")
    assert not os.path.exists(target + "/usr/bin/tool")  # nothing was copied


def test_populate_takes_a_new_jail_with_only_mount_points_in_it(image, tmp_path):
    """Login and worker pods that start before the populate Job leave the empty directories of their own mounts
    under the jail (the container runtime makes them): no one's data, populated; a file deep below is."""
    target = str(tmp_path / "jail")
    for mount_point in ("var/spool/slurmd", "run/munge", "run/slurm"):
        os.makedirs(os.path.join(target, mount_point))
    assert populate(image, target).returncode == 0
    assert os.path.isfile(target + "/.soperator-populated") and os.path.isfile(target + "/usr/bin/tool")
    other = str(tmp_path / "other")
    write(other + "/var/spool/slurmd/job.state", "someone's\n")
    result = populate(image, other)
    assert result.returncode == 4 and "var/spool/slurmd/job.state" in result.stderr, result.stderr


def test_populate_takes_a_fresh_filesystem_with_only_lost_and_found(image, tmp_path):
    target = str(tmp_path / "jail")
    os.makedirs(target + "/lost+found")
    assert populate(image, target).returncode == 0
    assert os.path.isfile(target + "/.soperator-populated")


def test_populate_overwrite_of_a_foreign_volume_keeps_its_accounts_and_adds_the_images(image, tmp_path):
    target = str(tmp_path / "jail")
    write(image + "/etc/passwd", "root:x:0:0::/root:/bin/bash\nsshd:x:991:65534::/run/sshd:/usr/sbin/nologin\n")
    write(image + "/etc/group", "root:x:0:\nmunge:x:990:")  # no final newline
    write(target + "/etc/passwd", "root:x:0:0:the admin:/root:/bin/zsh\nbob:x:3000:3000::/home/bob:/bin/sh")
    write(target + "/etc/group", "root:x:0:\nbob:x:3000:\n")
    result = populate(image, target, "--overwrite")
    assert result.returncode == 0, result.stderr
    with open(target + "/etc/passwd") as f:
        assert f.read().splitlines() == ["root:x:0:0:the admin:/root:/bin/zsh", "bob:x:3000:3000::/home/bob:/bin/sh",
                                         "sshd:x:991:65534::/run/sshd:/usr/sbin/nologin"]
    with open(target + "/etc/group") as f:
        assert f.read().splitlines() == ["root:x:0:", "bob:x:3000:", "munge:x:990:"]
    assert "added the image's sshd" in result.stderr
    assert os.path.isfile(target + "/usr/bin/tool")


def test_populate_two_runs_at_once_copy_once(image, tmp_path):
    target = str(tmp_path / "jail")
    os.makedirs(target)
    # Hold the lock so that both runs are started before either can copy: the order is then decided by the
    # lock alone, as with two Jobs' pods starting together.
    holder = open(target + "/.soperator-populate.lock", "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    procs = [subprocess.Popen([POPULATE, "--source", image, "--target", target], stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        for proc in procs:
            assert "waiting for it" in proc.stderr.readline()
        fcntl.flock(holder, fcntl.LOCK_UN)
        errors = [proc.communicate(timeout=120)[1] for proc in procs]
    finally:
        holder.close()
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0]
    assert sum("copying" in err for err in errors) == 1, errors
    assert sum("populated by a concurrent run" in err for err in errors) == 1, errors
    assert os.path.isfile(target + "/.soperator-populated")


def test_populate_never_marks_a_failed_copy(image, tmp_path):
    target = str(tmp_path / "jail")
    # The image has a file where the target has a non-empty directory: the copy cannot complete. (The lock file
    # says an earlier run of ours began here: not a foreign volume.)
    write(target + "/usr/bin/tool/blocker", "x\n")
    write(target + "/.soperator-populate.lock", "")
    result = populate(image, target)
    assert result.returncode == 1
    assert "NOT marked populated" in result.stderr
    assert not os.path.exists(target + "/.soperator-populated")
    # Once the obstacle is gone, a new run copies everything and marks it.
    shutil.rmtree(target + "/usr/bin/tool")
    assert populate(image, target).returncode == 0
    assert os.path.isfile(target + "/.soperator-populated")


def test_populate_leaves_out_a_target_inside_the_source(image):
    target = image + "/mnt/jail"
    result = populate(image, target)
    assert result.returncode == 0, result.stderr
    assert os.listdir(target + "/mnt") == []


@pytest.mark.parametrize("args, message", [
    ([], "usage"),
    (["--source", "/nonexistent-soperator", "--target", "/tmp/x"], "is not a directory"),
    (["--source", "/", "--target", "/tmp/x", "--overwrite", "--skip-if-populated"], "exclude each other"),
    (["--bogus"], "unknown argument"),
])
def test_populate_rejects_bad_arguments(args, message):
    result = subprocess.run([POPULATE] + args, capture_output=True, text=True)
    assert result.returncode in (1, 2)
    assert message in result.stderr


# ------------------------------------------------------------------------------------------------ directory users
def sssd_socket(fs):
    """The sssd sidecar's public socket, where the pod's daemon finds it (its volume, read-only in the daemon)."""
    os.makedirs(fs + names.SSS_PIPES_DIR, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(fs + names.SSS_PIPES_DIR + "/nss")
    return sock


def test_with_a_directory_the_worker_binds_sssds_sockets_read_only_into_the_jail(fs):
    j = fs + "/mnt/jail"
    write(j + "/etc/nsswitch.conf", "passwd: files sss\ngroup: files sss\n")
    sock = sssd_socket(fs)
    try:
        result = entrypoint(fs, "worker", sh("test -S {j}{p}/nss && echo socket; touch {j}{p}/x 2>/dev/null && "
                                             "echo WROTE; echo done".format(j=j, p=names.SSS_PIPES_DIR)),
                            env={"SOPERATOR_IDENTITY": "sssd"})
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == ["socket", "done"]
        assert "does not name sss" not in result.stderr
        # A jail from an image without sss in its nsswitch.conf: said, not fatal (its local users work).
        write(j + "/etc/nsswitch.conf", "passwd: files\ngroup: files sss\n")
        result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_IDENTITY": "sssd"})
        assert result.returncode == 0, result.stderr
        assert "the jail's /etc/nsswitch.conf does not name sss for passwd" in result.stderr
        assert "for group" not in result.stderr
    finally:
        sock.close()


def test_with_a_directory_a_daemon_waits_for_sssd(fs):
    result = entrypoint(fs, "worker", ["true"], env={"SOPERATOR_IDENTITY": "sssd", "SOPERATOR_WAIT_TIMEOUT": "1"})
    assert result.returncode == 1 and "gave up waiting for sssd's socket" in result.stderr


SSSD_TEMPLATE = """[sssd]
services = nss
domains = directory

[domain/directory]
id_provider = ldap
ldap_uri = ldaps://ldap.invalid:1636
ldap_search_base = dc=example,dc=org
ldap_default_bind_dn = cn=sssd,dc=example,dc=org
"""
# sssd.conf is an INI file: '#' and ';' start comments, '=' separates; a password has them in the middle.
PASSWORD = 'p#ss;w=rd "x\''


def sssd_fs(fs, password=PASSWORD):
    write(fs + names.SSSD_CONFIG_MOUNT + "/sssd.conf", SSSD_TEMPLATE)
    if password is not None:
        write(fs + names.IDENTITY_BIND_PASSWORD_MOUNT + "/" + names.IDENTITY_BIND_PASSWORD_FILE, password, 0o400)
    os.makedirs(fs + names.SSS_PIPES_DIR)
    os.chmod(fs + names.SSS_PIPES_DIR, 0o777)  # the kubelet's emptyDir
    # What runs as "sssd": it says when it starts and stops, and stays until it is told to stop.
    write(fs + "/fake-sssd", "#!/bin/sh\necho start >>%s/sssd.starts\ntrap 'exit 0' TERM\n"
                             "while :; do sleep 0.1; done\n" % fs, 0o755)
    return fs + "/fake-sssd"


def run_sssd_role(fs, fake, seconds, env=None, before_stop=None):
    """The sidecar's entrypoint for ``seconds``, then SIGTERM: (exit status, stderr)."""
    full_env = dict(os.environ, SOPERATOR_ROOT=fs, SOPERATOR_ROLE="sssd", SOPERATOR_IDENTITY_CHECK="always",
                    SOPERATOR_IDENTITY_CHECK_INTERVAL="1")
    full_env.update(env or {})
    proc = subprocess.Popen([ENTRYPOINT, fake], env=full_env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if before_stop and before_stop():
                before_stop = None
                deadline = time.monotonic() + seconds
        proc.terminate()
        return proc.wait(20), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_sidecar_assembles_sssd_conf_in_memory_and_says_what_it_found(fs):
    fake = sssd_fs(fs)
    rc, err = run_sssd_role(fs, fake, 3)
    assert rc == 0, err  # stopped by SIGTERM: sssd stopped, and the supervisor with it
    conf = fs + "/etc/sssd/sssd.conf"
    with open(conf) as f:
        text = f.read()
    assert text == SSSD_TEMPLATE + "ldap_default_authtok = %s\n" % PASSWORD
    assert stat.S_IMODE(os.stat(conf).st_mode) == 0o600 and os.stat(conf).st_uid == 0
    assert stat.S_IMODE(os.stat(fs + names.SSS_PIPES_DIR).st_mode) == 0o755
    with open(fs + names.IDENTITY_STATUS_FILE) as f:
        status = f.read()
    # The host has no such directory (nor, maybe, ldapwhoami): what matters here is that a finding is written in
    # the format the reconciler reads, and logged when it changes; the real verdicts: tests/images/test_identity.py.
    assert status.split(" ")[0] in ("DirectoryUnreachable", "DirectoryError") and status.split(" ")[1] == "ldap_uri"
    assert "directory: " + status.strip() in err
    assert PASSWORD not in err and PASSWORD not in status
    with open(fs + "/sssd.starts") as f:
        assert f.read().split() == ["start"]


def test_sssd_conf_is_roots_group_in_a_pod_with_an_fs_group(fs):
    # slurmdbd's pod has fsGroup (the slurm group): the kubelet makes every emptyDir setgid to it, so a new file in
    # /etc/sssd would be that group's, and sssd refuses a sssd.conf that is not root:root (the sidecar crash-looped).
    fake = sssd_fs(fs)
    dirs = ["/etc/sssd", "/var/lib/sss/db", names.SSS_PIPES_DIR, names.SSS_PIPES_DIR + "/private"]
    for d in dirs:
        os.makedirs(fs + d, exist_ok=True)
        os.chown(fs + d, 0, names.SLURM_UID)
        os.chmod(fs + d, 0o3777)
    write(fs + "/var/lib/sss/db/cache_directory.ldb", "from the last start", 0o600)  # made under the fsGroup
    os.chown(fs + "/var/lib/sss/db/cache_directory.ldb", 0, names.SLURM_UID)
    rc, err = run_sssd_role(fs, fake, 2)
    assert rc == 0, err
    conf = os.stat(fs + "/etc/sssd/sssd.conf")
    assert (conf.st_uid, conf.st_gid, stat.S_IMODE(conf.st_mode)) == (0, 0, 0o600)
    assert os.stat(fs + "/var/lib/sss/db/cache_directory.ldb").st_gid == 0
    for d in dirs:
        assert os.stat(fs + d).st_gid == 0 and not os.stat(fs + d).st_mode & stat.S_ISGID, d


@pytest.mark.parametrize("password, reason", [(None, "BindPasswordMissing"), ("two\nlines", "InvalidBindPassword"),
                                              (" padded", "InvalidBindPassword"), ("", "InvalidBindPassword")])
def test_the_sidecar_reports_a_password_sssd_cannot_use_and_starts_sssd_anyway(fs, password, reason):
    fake = sssd_fs(fs, password)
    rc, err = run_sssd_role(fs, fake, 2)
    assert rc == 0, err
    with open(fs + names.IDENTITY_STATUS_FILE) as f:
        assert f.read().startswith(reason + " ldap_default_authtok ")
    with open(fs + "/etc/sssd/sssd.conf") as f:
        assert f.read() == SSSD_TEMPLATE  # no password line at all
    assert os.path.exists(fs + "/sssd.starts")  # local users and the cache do not wait for the Secret


def test_a_new_password_restarts_sssd_in_the_running_sidecar(fs):
    fake = sssd_fs(fs)
    path = fs + names.IDENTITY_BIND_PASSWORD_MOUNT + "/" + names.IDENTITY_BIND_PASSWORD_FILE
    changed = []

    def change_once():
        if not changed and os.path.exists(fs + "/sssd.starts"):
            os.chmod(path, 0o600)
            write(path, "a-new-password", 0o400)
            changed.append(True)
            return True
        return False

    rc, err = run_sssd_role(fs, fake, 3, before_stop=change_once)
    assert rc == 0, err
    assert "sssd.conf, the bind password or the CA changed: restarting sssd" in err
    with open(fs + "/sssd.starts") as f:
        assert f.read().split() == ["start", "start"]
    with open(fs + "/etc/sssd/sssd.conf") as f:
        assert f.read().endswith("ldap_default_authtok = a-new-password\n")


def test_sssd_ending_ends_the_sidecar_with_a_reason(fs, tmp_path):
    sssd_fs(fs)
    write(fs + "/dying-sssd", "#!/bin/sh\nexit 3\n", 0o755)
    log = str(tmp_path / "termination-log")
    rc, err = run_sssd_role(fs, fs + "/dying-sssd", 3, env={"SOPERATOR_TERMINATION_LOG": log})
    assert rc == 1, err
    with open(log) as f:
        assert f.read().startswith("SssdExited: sssd exited with status 3")


# soperator-make-home: pam_exec at a session's opening, as root, in the login container.
MAKE_HOME = os.path.join(ROOT, "images", "login", "soperator-make-home")


def make_home(tmp_path, jail, user="dora", pam_type="open_session", home="/home/dora"):
    """The program as sshd's PAM runs it, with ``user`` resolvable (a private mount namespace whose /etc/passwd
    has them: the login container's own is the jail's and sssd's)."""
    accounts = str(tmp_path / "passwd")
    with open("/etc/passwd") as f:
        base = f.read()
    with open(accounts, "w") as f:
        f.write(base + "dora:x:20001:20002:Dora:%s:/bin/bash\n" % home)
    return subprocess.run(["unshare", "-m", "--", "sh", "-c", 'mount --bind "$1" /etc/passwd && exec "$2"', "-",
                           accounts, MAKE_HOME],
                          env=dict(os.environ, SOPERATOR_JAIL=jail, PAM_TYPE=pam_type, PAM_USER=user),
                          capture_output=True, text=True, timeout=30)


def make_jail(tmp_path):
    jail = str(tmp_path / "jail")
    os.makedirs(jail + "/home", mode=0o755)
    os.chmod(jail, 0o755)
    os.chmod(jail + "/home", 0o755)
    return jail


def test_make_home_makes_a_first_logins_home_the_users_and_closed(tmp_path):
    jail = make_jail(tmp_path)
    result = make_home(tmp_path, jail)
    assert result.returncode == 0, result.stderr
    st = os.lstat(jail + "/home/dora")
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and (st.st_uid, st.st_gid) == (20001, 20002)
    assert os.listdir(jail + "/home/dora") == []
    assert "made /home/dora (0700, 20001:20002) for dora's first login" in result.stderr
    # Next logins: the home is theirs; nothing is changed, whatever they did with it.
    os.chmod(jail + "/home/dora", 0o755)
    assert make_home(tmp_path, jail).returncode == 0
    assert stat.S_IMODE(os.lstat(jail + "/home/dora").st_mode) == 0o755


@pytest.mark.parametrize("plant", ["home link", "dangling home link", "home a file", "jail /home link",
                                   "jail /home writable", "jail /home not root's", "jail writable"])
def test_make_home_follows_no_link_and_writes_nowhere_users_could_steer(tmp_path, plant):
    """What a user (or a jail image) could have left where a home is made: nothing is created or changed."""
    jail = make_jail(tmp_path)
    target = str(tmp_path / "target")
    os.makedirs(target)
    if plant == "home link":
        os.symlink(target, jail + "/home/dora")
    elif plant == "dangling home link":
        os.symlink(target + "/new", jail + "/home/dora")
    elif plant == "home a file":
        write(jail + "/home/dora", "a file\n")
    elif plant == "jail /home link":
        os.rmdir(jail + "/home")
        os.symlink(target, jail + "/home")
    elif plant == "jail /home writable":
        os.chmod(jail + "/home", 0o777)
    elif plant == "jail /home not root's":
        os.chown(jail + "/home", 20001, 20001)
    elif plant == "jail writable":
        os.chmod(jail, 0o777)
    before = sorted(os.listdir(target))
    result = make_home(tmp_path, jail)
    assert result.returncode == 0, result.stderr  # the session goes on (optional in PAM): no home is made
    assert sorted(os.listdir(target)) == before == []
    assert not os.path.exists(target + "/new")
    if plant.startswith("jail"):
        assert "is not a directory of root's that only root may write" in result.stderr
    if plant == "home link" or plant == "dangling home link":
        assert os.path.islink(jail + "/home/dora")


@pytest.mark.parametrize("home, pam_type", [("/nfs/home/dora", "open_session"), ("/home/dora/sub", "open_session"),
                                            ("/home/../etc", "open_session"), ("/home/dora", "close_session")])
def test_make_home_makes_only_a_plain_home_under_home_at_a_sessions_opening(tmp_path, home, pam_type):
    jail = make_jail(tmp_path)
    result = make_home(tmp_path, jail, home=home, pam_type=pam_type)
    assert result.returncode == 0, result.stderr
    assert os.listdir(jail + "/home") == []
    assert os.listdir(jail) == ["home"]


def test_make_home_leaves_unknown_users_and_root_alone(tmp_path):
    jail = make_jail(tmp_path)
    assert make_home(tmp_path, jail, user="nobody-such").returncode == 0
    assert make_home(tmp_path, jail, user="root").returncode == 0
    assert os.listdir(jail + "/home") == []
