"""Container steps (``--container-image``, Pyxis's interface) against real Slurm 24.11: two nodes, a local registry
with images the tests build (container_cluster.py), the node's image cache, failure paths.

Every Slurm command is bounded by ``timeout``; no test sleeps to synchronise.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from container_cluster import CACHE, ContainerCluster
from slurm_cluster import GID, GROUP, GROUP_GID, JAIL, MARKER, UID, USER, running, wait_for

BUSYBOX = "test/busybox:1"
MARKER_TEXT = "inside the image"


@pytest.fixture(scope="module")
def cc(real_slurm_host):
    with running(ContainerCluster()) as c:
        yield c


def image(cc: ContainerCluster, name: str = BUSYBOX) -> str:
    return "--container-image=" + cc.image(name)


def assert_node_idle(cc: ContainerCluster, node: str) -> None:
    """Idle again once the failed job completed (never drained, down or failing)."""
    def settled():
        state = cc.node_state(node).rstrip("*")
        assert not any(bad in state for bad in ("drain", "down", "fail")), state
        return state == "idle"
    wait_for(settled, 30, f"{node} idle")


@contextmanager
def plugstack(cc: ContainerCluster, **extra: str):
    cc.set_plugstack(**extra)
    try:
        yield
    finally:
        cc.set_plugstack()


# ---- the step runs in the image, as the user -------------------------------------------------------------------------
def test_srun_on_two_nodes_runs_in_the_image_as_the_user(cc):
    res = cc.srun("-N2", "-n2", image(cc), "sh", "-c", f"id -u; cat /etc/image-marker; test ! -e {MARKER}",
                  user=USER, timeout=120).check()
    lines = res.stdout.splitlines()
    assert lines.count(str(UID)) == 2, res.output
    assert lines.count(MARKER_TEXT) == 2, res.output


def test_the_task_has_the_jobs_ids_and_no_capability(cc):
    res = cc.srun("-w", "n1", image(cc), "sh", "-c",
                  "id; grep -E '^(CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs)' /proc/self/status; "
                  "mount -t tmpfs x /tmp 2>&1 || echo NO-MOUNT", user=USER).check()
    out = res.stdout
    assert f"uid={UID}({USER}) gid={UID}" in out and "1500(proj)" in out, out
    for field in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert f"{field}:\t0000000000000000" in out, out
    assert "NoNewPrivs:\t1" in out and "NO-MOUNT" in out, out


def test_the_images_files_are_the_users_and_nothing_in_it_is_setuid_root(cc):
    """The image is unpacked by the cache's unprivileged owner and shown as the job user's (an idmapped mount):
    nothing in it belongs to root on the node, and setuid is off in the container (nosuid, no_new_privs)."""
    res = cc.srun("-w", "n2", image(cc), "sh", "-c",
                  "stat -c '%u %n' /bin/busybox /etc/image-marker; grep ' / ' /proc/self/mounts", user=USER).check()
    assert f"{UID} /bin/busybox" in res.stdout and f"{UID} /etc/image-marker" in res.stdout, res.output
    root_mount = [line for line in res.stdout.splitlines() if " / " in line][0]
    assert "nosuid" in root_mount and "nodev" in root_mount, root_mount


def test_root_writes_are_the_steps_own(cc):
    """The container's root is writable (an overlay over the cached image): the step's writes are gone with it, and
    the cache is unchanged."""
    tag = uuid.uuid4().hex
    cc.srun("-w", "n1", image(cc), "sh", "-c", f"echo {tag} > /etc/image-marker; cat /etc/image-marker",
            user=USER).check()
    res = cc.srun("-w", "n1", image(cc), "cat", "/etc/image-marker", user=USER).check()
    assert res.stdout.strip() == MARKER_TEXT, res.output
    res = cc.srun("-w", "n1", image(cc), "--container-readonly", "sh", "-c", "touch /x 2>&1 || echo RO",
                  user=USER).check()
    assert "RO" in res.stdout, res.output


# ---- the jail's world in the container -------------------------------------------------------------------------------
def test_a_file_written_to_home_in_the_container_is_in_the_jail(cc):
    name = f"from-container-{uuid.uuid4().hex}"
    cc.srun("-w", "n2", image(cc), "sh", "-c", f"echo hello > $HOME/{name}", user=USER).check()
    written = cc.jail / "home" / USER / name
    assert written.read_text() == "hello\n"
    assert written.stat().st_uid == UID


def test_no_container_mount_home(cc):
    res = cc.srun("-w", "n1", image(cc), "--no-container-mount-home", "sh", "-c",
                  "ls -A $HOME 2>&1 | wc -l; grep -c \" $HOME \" /proc/self/mounts", user=USER)
    assert res.stdout.split()[-1] == "0", res.output


def test_the_jails_shared_paths_and_the_users_mounts(cc):
    tag = uuid.uuid4().hex
    (cc.jail / "shared" / tag).write_text("shared\n")
    script = f"cat /shared/{tag} /data/{tag}; touch /data/x 2>/dev/null || echo RO; ls -d /myhome"
    res = cc.srun("-w", "n1", image(cc), f"--container-mounts=/shared:/data:ro,/home/{USER}:/myhome", "sh", "-c",
                  script, user=USER).check()
    assert res.stdout.split("\n")[:4] == ["shared", "shared", "RO", "/myhome"], res.output


def test_a_mount_source_the_user_may_not_reach_is_refused(cc):
    """--container-mounts sources are reached in the jail as the job's user: root's 0700 directory is not shown."""
    secret = cc.jail / f"secret-{uuid.uuid4().hex[:8]}"
    secret.mkdir(mode=0o700)
    (secret / "key").write_text("root only\n")
    res = cc.srun("-w", "n2", image(cc), f"--container-mounts=/{secret.name}/key:/key", "cat", "/key", user=USER)
    assert res.returncode != 0 and "root only" not in res.stdout, res.output
    assert "Permission denied" in res.output and secret.name in res.output, res.output
    assert_node_idle(cc, "n2")


def test_the_images_environment_and_container_env(cc):
    res = cc.srun("-w", "n1", image(cc), "sh", "-c", "echo $IMAGEVAR $SLURM_JOB_ID $PATH", user=USER,
                  env={"IMAGEVAR": "fromjob"}).check()
    value, job, path = res.stdout.split()
    assert value == "fromimage" and job.isdigit(), res.output
    assert path.startswith("/usr/local/bin:/usr/bin:/bin:"), res.output
    res = cc.srun("-w", "n1", image(cc), "--container-env=IMAGEVAR", "sh", "-c", "echo $IMAGEVAR", user=USER,
                  env={"IMAGEVAR": "fromjob"}).check()
    assert res.stdout.strip() == "fromjob", res.output


def test_working_directory(cc):
    res = cc.srun("-w", "n1", image(cc), "--container-workdir=/srv", "pwd", user=USER).check()
    assert res.stdout.strip() == "/srv", res.output
    res = cc.srun("-w", "n1", image(cc), "pwd", user=USER, cwd=f"/home/{USER}").check()
    assert res.stdout.strip() == f"/home/{USER}", res.output


# ---- batch scripts, allocations, named containers --------------------------------------------------------------------
def test_sbatch_with_container_image_in_the_script_runs_and_its_srun_steps_too(cc):
    script = (f"#!/bin/sh\n#SBATCH --container-image={cc.image(BUSYBOX)}\n"
              "cat /etc/image-marker\nid -u\n"
              "srun -N2 -n2 sh -c 'echo step $(cat /etc/image-marker) $(id -u)'\n")
    res, out = cc.sbatch_wait(script, "-N2", user=USER, timeout=180)
    res.check()
    lines = out.splitlines()
    assert lines[:2] == [MARKER_TEXT, str(UID)], out
    assert lines.count(f"step {MARKER_TEXT} {UID}") == 2, out


def test_srun_in_a_containers_batch_script_finds_the_nodes_slurm_user(cc):
    """A Slurm client reads slurm.conf and refuses to run ("Invalid user for SlurmUser slurm") unless SlurmUser
    resolves where it runs: in the container, whose /etc/passwd is the image's. The plugin writes the user's lines
    (in place of the image's imageuser, who has the user's uid) and SlurmUser's, from the node's entry, after the
    image's others; the user's groups are all there."""
    node = next(line for line in (cc.root / "etc/passwd").read_text().splitlines() if line.startswith("slurm:"))
    uid, gid = node.split(":")[2:4]
    script = (f"#!/bin/sh\n#SBATCH --container-image={cc.image(BUSYBOX)}\n"
              "cat /etc/passwd /etc/group\nsrun -n1 echo inner step\necho srun=$?\n")
    res, out = cc.sbatch_wait(script, "-N1", user=USER, timeout=120)
    res.check()
    lines = out.splitlines()
    assert "Invalid user" not in out and lines[-2:] == ["inner step", "srun=0"], out
    assert lines[:-2] == [
        "root:x:0:0:root:/root:/bin/sh", f"{USER}:x:{UID}:{GID}::/home/{USER}:/bin/sh",
        f"slurm:x:{uid}:{gid}:SlurmUser:/nonexistent:/usr/sbin/nologin",
        "root:x:0:", f"{USER}:x:{GID}:{USER}", f"{GROUP}:x:{GROUP_GID}:{USER}", f"slurm:x:{gid}:"], out


def test_a_named_container_is_kept_for_the_jobs_later_steps_and_gone_after(cc):
    name = f"c{uuid.uuid4().hex[:8]}"
    res = cc.run(["salloc", "-N1", "-w", "n2", "sh", "-c",
                  f"srun {image(cc)} --container-name={name} sh -c 'echo kept > /etc/note' && "
                  f"srun --container-name={name} cat /etc/note /etc/image-marker && "
                  f"srun {image(cc)} sh -c 'cat /etc/note 2>/dev/null || echo FRESH'"], user=USER, timeout=120).check()
    assert res.stdout.splitlines()[:3] == ["kept", MARKER_TEXT, "FRESH"], res.output
    # the job's epilog releases it: no record, no namespace kept on the node
    kept = cc.root / CACHE.lstrip("/") / "containers"
    wait_for(lambda: not [p for p in kept.iterdir() if p.name.isdigit()], 30, "the named container's release")
    assert ".ns" not in cc.run(["cat", "/proc/self/mountinfo"]).check().stdout


def test_a_name_without_an_earlier_container_needs_an_image(cc):
    res = cc.srun("-w", "n1", "--container-name=nothing-yet", "true", user=USER)
    assert res.returncode != 0 and "its first step needs --container-image" in res.output, res.output
    assert_node_idle(cc, "n1")


# ---- the cache -------------------------------------------------------------------------------------------------------
def test_a_second_job_with_the_same_image_does_not_pull_again(cc):
    cc.srun("-w", "n1", image(cc, "test/busybox:2"), "true", user=USER).check()
    before = cc.cache_stats()
    res = cc.srun("-w", "n2", image(cc, "test/busybox:2"), "cat", "/etc/image-marker", user=USER).check()
    after = cc.cache_stats()
    assert res.stdout.strip() == "second image"
    assert after["pulls"] == before["pulls"] and after["hits"] == before["hits"] + 1, (before, after)
    assert "test/busybox:2 (sha256:" in cc.log("slurmd-n2.log") and "is cached" in cc.log("slurmd-n2.log")


def test_two_nodes_starting_a_new_image_at_once_pull_it_once(cc):
    """Both slurmd of this host share one cache: the first takes the digest's lock and pulls, the second waits and
    finds it cached."""
    cc.clear_cache()
    res = cc.srun("-N2", "-n4", image(cc), "cat", "/etc/image-marker", user=USER, timeout=120).check()
    assert res.stdout.splitlines().count(MARKER_TEXT) == 4, res.output
    stats = cc.cache_stats()
    assert (stats["pulls"], stats["hits"]) == (1, 1), stats


def test_the_least_recently_used_image_is_evicted_above_the_limit(cc):
    with plugstack(cc, container_cache_size="15M"):
        cc.srun("-w", "n1", image(cc, "test/big-a:1"), "true", user=USER, timeout=120).check()
        first = {e["digest"] for e in cc.cache_stats()["images"] if "big-a" in e["references"][0]}
        before = cc.cache_stats()["evictions"]
        cc.srun("-w", "n1", image(cc, "test/big-b:1"), "true", user=USER, timeout=120).check()
        stats = cc.cache_stats()
    held = {e["digest"] for e in stats["images"]}
    assert stats["evictions"] > before and first and not first & held, stats
    assert sum(e["size"] for e in stats["images"]) <= 15 << 20, stats


# ---- bad input: the step fails naming the image and the cause, the node stays in service, nothing is left ------------
@pytest.mark.parametrize("name,cause", [
    ("test/nothere:1", "manifest unknown"),
    ("test/arm64:1", "is an image for linux/arm64; this node runs linux/amd64"),
])
def test_a_bad_image_fails_the_step_not_the_node(cc, name, cause):
    res = cc.srun("-w", "n1", image(cc, name), "echo", "RAN", user=USER, timeout=120)
    assert res.returncode != 0 and "RAN" not in res.stdout, res.output
    assert f"container image {cc.image(name)}: " in res.output and cause in res.output, res.output
    assert_node_idle(cc, "n1")
    assert cc.cache_leftovers() == []
    sb, out = cc.sbatch_wait(f"#!/bin/sh\n#SBATCH --container-image={cc.image(name)}\necho RAN\n", "-w", "n2",
                             user=USER)
    assert sb.returncode != 0 and "RAN" not in out and cause in out, (sb.output, out)
    assert_node_idle(cc, "n2")
    cc.srun("-w", "n1", image(cc), "true", user=USER).check()


def test_a_registry_that_refuses_fails_the_step(cc):
    cc.write_auth("puller", "wrong-password")
    try:
        res = cc.srun("-w", "n2", image(cc, "test/busybox:2"), "echo", "RAN", user=USER, timeout=120)
    finally:
        from container_cluster import REGISTRY_PASSWORD, REGISTRY_USER
        cc.write_auth(REGISTRY_USER, REGISTRY_PASSWORD)
    assert res.returncode != 0 and "RAN" not in res.stdout, res.output
    assert "unauthorized" in res.output.lower() or "authentication required" in res.output, res.output
    assert_node_idle(cc, "n2")


def test_a_registry_jobs_may_not_pull_from_is_refused(cc):
    with plugstack(cc, container_registries="registry.example.com"):
        res = cc.srun("-w", "n1", image(cc), "echo", "RAN", user=USER)
    assert res.returncode != 0 and "not one this cluster's jobs may pull from" in res.output, res.output
    assert_node_idle(cc, "n1")


@pytest.mark.parametrize("arg,expected", [
    ("--container-image=Bad:Image", "bad image name"),
    ("--container-image=alice@registry.example.com#img", "credentials in the image reference"),
    ("--container-mounts=relative:/x", "must be absolute"),
    ("--container-remap-root", "not supported"),
])
def test_malformed_options_are_refused_before_anything_runs(cc, arg, expected):
    extra = [] if arg.startswith("--container-image") else [image(cc)]
    res = cc.srun("-w", "n1", arg, *extra, "echo", "RAN", user=USER)
    assert res.returncode != 0 and "RAN" not in res.stdout, res.output
    assert expected in res.output and "spank_chroot" in res.output, res.output


def test_root_may_not_run_containers(cc):
    res = cc.srun("-w", "n1", image(cc), "echo", "RAN")
    assert res.returncode != 0 and "do not run as root" in res.output, res.output


def test_jail_steps_are_unchanged_beside_containers(cc):
    res = cc.srun("-w", "n2", "cat", MARKER, user=USER).check()
    assert "inside the jail" in res.stdout
    assert (cc.jail / MARKER.lstrip("/")).exists() and JAIL


def test_no_mount_is_left_on_the_node(cc):
    """Containers live in mount namespaces of their own: the node's mount table has none of their mounts."""
    res = cc.run(["cat", "/proc/self/mountinfo"]).check()
    assert "overlay" not in res.stdout and "/.build" not in res.stdout, res.stdout
