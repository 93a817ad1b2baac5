"""The worker image has what container steps need (docs/containers.md), read from the built image:

* the puller, ``soperator-images`` with Debian's skopeo and umoci, runs as the plugin runs it: as the cache's owner
  (uid 64031, no account in the image), no capability, no_new_privs, an empty environment;
* the Slurm clients' launchers (spank_chroot's ``make install-tools``, copied by slurm-base from its plugin stage):
  one static program, a link per client the image's slurm-client has, that runs the node's client from the node's
  ``/usr`` where a container shows it (``/.soperator/usr``), as a plain user.

The containers run on the project's engine (test_smoke.py's engine fixture: the images built first; its skip rules).
"""

import json
import shlex

from test_smoke import WORKER_IMAGE, Docker, engine  # noqa: F401  (engine: a fixture used here)

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers

# spank_chroot/Makefile's SLURM_CLIENT_DIR and the prefix a container shows the node's files at (container.c).
SLURM_CLIENT_DIR = "/usr/lib/soperator/slurm-client"
LAUNCHER = SLURM_CLIENT_DIR + "/soperator-slurm-client"
NODE_PREFIX = "/.soperator"
# An ELF64 program's kind: "dynamic" with an interpreter (PT_INTERP) among its program headers, else "static".
PROGRAM_KIND = """
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:5] == b"\\x7fELF\\x02", data[:5]
phoff, = struct.unpack_from("<Q", data, 0x20)
size, count = struct.unpack_from("<HH", data, 0x36)
kinds = [struct.unpack_from("<I", data, phoff + i * size)[0] for i in range(count)]
print("dynamic" if 3 in kinds else "static")
"""


def _run(docker, script, *options):
    """``sh -c script`` in a fresh worker container (removed after); the result."""
    return docker("run", "--rm", "--label", "soperator.test=1", "--entrypoint", "sh", *options, WORKER_IMAGE,
                  "-c", script, check=False, timeout=120)


def test_the_puller_runs_as_the_cache_owner_with_no_capability(engine):  # noqa: F811
    docker = Docker(engine)
    owner = containers.CACHE_OWNER
    script = ("grep -q ':%d:' /etc/passwd && echo HAS-ACCOUNT; grep CapEff /proc/self/status; "
              "grep NoNewPrivs /proc/self/status; skopeo --version; umoci --version; "
              "test -s /etc/containers/policy.json && echo POLICY; "
              "env -i %s stats --cache /tmp/cache/store" % (owner, containers.HELPER))
    res = _run(docker, script, "--user", "%d:%d" % (owner, owner), "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "HAS-ACCOUNT" not in out, out  # no image account holds the cache owner's uid
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out, out
    assert "skopeo version 1." in out and "umoci version 0." in out, out
    assert "POLICY" in out, out  # skopeo copy refuses to run without a signature policy
    stats = json.loads(out[out.index("{"):])
    assert stats == {"pulls": 0, "hits": 0, "evictions": 0, "failures": 0, "images": []}, stats


def test_the_slurm_client_launchers_run_the_nodes_clients_as_a_user(engine):  # noqa: F811
    docker = Docker(engine)
    # What a container shows: the node's /usr read-only and its Slurm configuration (here a minimal one: the
    # clients read it before --version). Root makes the mounts, then the user runs the launchers.
    setup = ("mkdir -p {p}/usr {p}/slurm-conf && mount --bind -o ro /usr {p}/usr && "
             "printf 'ClusterName=imagetest\\nSlurmctldHost=localhost\\n' >{p}/slurm-conf/slurm.conf && "
             "chmod 0755 {p} {p}/slurm-conf").format(p=NODE_PREFIX)
    as_user = "setpriv --reuid=1000 --regid=1000 --clear-groups env -i PATH=/bin "
    script = "; ".join([
        "python3 -I -c %s %s" % (shlex.quote(PROGRAM_KIND), LAUNCHER),
        "for c in $(dpkg -L slurm-client | grep '^/usr/bin/s'); do n=${c##*/}; "
        "if [ -e %s/$n ]; then echo LINKED $n $(readlink %s/$n); else echo UNLINKED $n; fi; done"
        % (SLURM_CLIENT_DIR, SLURM_CLIENT_DIR),
        as_user + "%s/sinfo --version; echo before=$?" % SLURM_CLIENT_DIR,
        setup,
        as_user + "%s/sinfo --version; echo after=$?" % SLURM_CLIENT_DIR,
        as_user + "%s/squeue --version" % SLURM_CLIENT_DIR,
        "ln -s %s /tmp/bash && /tmp/bash -c true; echo other=$?" % LAUNCHER,
        "cut -d- -f1 /etc/soperator/slurm-version",
    ])
    res = _run(docker, script, "--cap-drop", "ALL", "--cap-add", "SYS_ADMIN", "--cap-add", "SETUID",
               "--cap-add", "SETGID")
    out = res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "static", out  # whatever C library an image has, the launcher needs none
    linked = [line.split() for line in lines if line.startswith(("LINKED", "UNLINKED"))]
    clients = {"srun", "sbatch", "salloc", "scancel", "squeue", "sinfo", "scontrol", "sacct"}
    assert clients <= {n for _kind, n, *_ in linked}, out
    for entry in linked:
        if entry[1] in clients:
            assert entry[0] == "LINKED" and entry[2] == "soperator-slurm-client", out
    version = lines[-1].strip()
    # Without the node's /usr where a container has it, nothing runs; with it, the node's clients do.
    assert "before=0" not in out, out
    assert "after=0" in out, out
    assert out.count("slurm-wlm %s" % version) == 2, out
    assert "bash is not a Slurm client" in out and "other=127" in out, out
