"""Real Slurm 24.11 with container steps (``--container-image``), and a local registry holding images the tests build.

The jail cluster of slurm_cluster.py (two static nodes, the jail plugin, a busybox jail), plus:

* A registry: Debian's ``docker-registry`` (distribution 2.8) in the cluster's namespaces, on a free port of 127.0.0.1,
  with basic authentication (htpasswd, bcrypt made by the rootfs' perl through libcrypt). Plain HTTP: the node's
  ``/etc/containers/registries.conf.d`` marks it insecure, as an administrator would for a registry without TLS.
* Images the tests build and push, with nothing from the Internet: each is a busybox root (the rootfs' busybox-static)
  made into an OCI image by ``umoci`` (``init``, ``new``, ``insert``, ``config``) and pushed by ``skopeo copy`` with
  the registry's credentials. :data:`IMAGES` says what each holds.
* The node as a worker image has it: ``soperator-images`` (images/worker) in ``/usr/local/sbin``, the launchers of the
  Slurm clients (``make install-tools``) in ``/usr/lib/soperator/slurm-client``, the registry's credentials in a
  root-only ``auth.json`` (what the cluster's registry Secret holds), and plugstack.conf naming the plugin itself, as
  the rendered one does, with the ``container_*`` arguments render/slurm_conf.py writes (:meth:`plugstack_line`).

Both slurmd share the rootfs, so both nodes share one image cache: two nodes starting the same new image at once is
one pull and one wait (the digest's lock), which the tests count.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import textwrap
import time

from slurm_cluster import JAIL, PLUGIN_PATH, REPO, Cluster, free_ports, wait_for

REGISTRY_USER, REGISTRY_PASSWORD = "puller", "s3cret-pull"
CACHE = "/var/lib/soperator/images"
AUTH = "/etc/soperator/registry/auth.json"
HELPER = "/usr/local/sbin/soperator-images"
CACHE_SIZE = "1G"
# What each test image is: its files (beyond busybox at /bin), variables, working directory, architecture.
IMAGES = {
    "test/busybox:1": {"files": {"etc/image-marker": "inside the image\n"},
                       "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "IMAGEVAR=fromimage"], "workdir": "/srv"},
    "test/busybox:2": {"files": {"etc/image-marker": "second image\n"}, "env": ["PATH=/bin"]},
    "test/arm64:1": {"files": {"etc/image-marker": "for arm64\n"}, "env": ["PATH=/bin"], "arch": "arm64"},
    # ~6 MiB of random data each: for the size limit (container_cache_size) and eviction
    "test/big-a:1": {"files": {}, "env": ["PATH=/bin"], "random_mib": 6},
    "test/big-b:1": {"files": {}, "env": ["PATH=/bin"], "random_mib": 6},
}


class LocalRegistry:
    """A registry in the cluster's namespaces and the worker image's puller, for a harness of slurm_cluster.py's
    family (mixed in before it): :meth:`prepare_containers` after its prepare, :meth:`start_registry` after its
    start, then :meth:`push_image`."""

    registry_port = 0
    auth_path = AUTH  # where the node has the registry's credentials

    @property
    def registry(self) -> str:
        return "127.0.0.1:%d" % self.registry_port

    def image(self, name: str) -> str:
        return "%s/%s" % (self.registry, name)

    def prepare_containers(self) -> None:
        self.install_worker_tools()
        self.registry_port = free_ports(1)[0]
        self.prepare_registry()

    def start_registry(self) -> None:
        self.run(["sh", "-c", "setsid /usr/bin/docker-registry serve /etc/docker/registry/test.yml "
                  ">/var/log/registry.log 2>&1 </dev/null &"]).check()
        probe = "import socket; socket.create_connection(('127.0.0.1', %d), 1)" % self.registry_port
        wait_for(lambda: self.run(["python3", "-c", probe]).returncode == 0, 20, "the registry to listen")

    def plugstack_line(self, **extra: str) -> str:
        args = {"jail": JAIL, "container_cache": CACHE, "container_cache_size": CACHE_SIZE, "container_auth": AUTH,
                "container_helper": HELPER, "container_bind": "%s/shared:/shared" % JAIL}
        args.update(extra)
        return "required %s %s\n" % (PLUGIN_PATH, " ".join("%s=%s" % kv for kv in args.items() if kv[1]))

    def set_plugstack(self, **extra: str) -> None:
        """plugstack.conf names the plugin itself (as the rendered one does: a srun in a container reads it from the
        node's configuration, whose include of plugstack.conf.d would find nothing there)."""
        (self.root / "etc/slurm/plugstack.conf").write_text(self.plugstack_line(**extra))

    def install_worker_tools(self) -> None:
        """soperator-images where the worker image has it."""
        lib = self.root / "usr/local/lib/soperator"
        lib.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "images/worker/soperator_images.py", lib / "soperator_images.py")
        shutil.copy2(REPO / "images/worker/soperator-images", self.root / HELPER.lstrip("/"))

    def prepare_registry(self) -> None:
        r = self.root
        hashed = self.chroot(["perl", "-e", 'print crypt($ARGV[0], "\\$2b\\$05\\$" . $ARGV[1])', REGISTRY_PASSWORD,
                              base64.b64encode(os.urandom(16)).decode()[:22].replace("+", ".")]).check().stdout
        (r / "etc/docker/registry/test.htpasswd").write_text("%s:%s\n" % (REGISTRY_USER, hashed))
        (r / "etc/docker/registry/test.yml").write_text(textwrap.dedent("""\
            version: 0.1
            log: {level: warn}
            storage:
              filesystem: {rootdirectory: /var/lib/docker-registry}
              delete: {enabled: true}
            http:
              addr: %s
              secret: %s
            auth:
              htpasswd: {realm: soperator-test, path: /etc/docker/registry/test.htpasswd}
            """) % (self.registry, os.urandom(16).hex()))
        (r / "var/lib/docker-registry").mkdir(parents=True, exist_ok=True)
        conf = r / "etc/containers/registries.conf.d"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "50-soperator-test.conf").write_text(
            '[[registry]]\nlocation = "%s"\ninsecure = true\n' % self.registry)
        self.write_auth(REGISTRY_USER, REGISTRY_PASSWORD, self.auth_path)

    def write_auth(self, user: str, password: str, where: str = AUTH) -> None:
        """The registry's credentials as the cluster's Secret holds them (a Docker config.json), root's 0600, laid
        out as the kubelet's Secret volume has them: the file is a link into ``..data``, itself a link to the
        current version's directory."""
        path = self.root / where.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        version = path.parent / ("..%d" % time.monotonic_ns())
        version.mkdir()
        token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        (version / path.name).write_text(json.dumps({"auths": {self.registry: {"auth": token}}}))
        (version / path.name).chmod(0o600)
        data = path.parent / "..data"
        old = os.readlink(data) if data.is_symlink() else None
        (path.parent / "..data_tmp").symlink_to(version.name)
        os.rename(path.parent / "..data_tmp", data)
        if old:
            shutil.rmtree(path.parent / old)
        if not path.is_symlink():
            path.symlink_to("..data/" + path.name)

    # ---- images ----------------------------------------------------------------------
    def push_image(self, name: str, spec: dict) -> None:
        """Build a busybox image with umoci and push it to the registry (nothing from the Internet). ``spec``: as
        :data:`IMAGES`; ``copy`` (rootfs path: image path) adds files of the rootfs."""
        work = "/tmp/image-build/" + name.replace("/", "_").replace(":", "_")
        host = self.root / work.lstrip("/")
        if host.exists():
            shutil.rmtree(host)
        rootfs = host / "rootfs"
        for d in ("bin", "etc", "srv", "tmp", "home"):
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        (rootfs / "tmp").chmod(0o1777)
        shutil.copy2(self.root / "usr/bin/busybox", rootfs / "bin/busybox")
        for applet in ("sh", "cat", "id", "ls", "echo", "touch", "pwd", "env", "stat", "grep", "mount", "sleep",
                       "test", "head", "wc", "mkdir", "rm", "dd", "whoami", "true", "false"):
            (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nimageuser:x:1001:1001::/home/x:/bin/sh\n")
        (rootfs / "etc/group").write_text("root:x:0:\n")
        (rootfs / "etc/hosts").symlink_to("/run/not-here/hosts")  # a link the container must replace, not follow
        for rel, text in spec["files"].items():
            (rootfs / rel).write_text(text)
        if spec.get("random_mib"):
            (rootfs / "blob").write_bytes(os.urandom(spec["random_mib"] << 20))
        for src, dst in spec.get("copy", {}).items():
            (rootfs / dst.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.root / src.lstrip("/"), rootfs / dst.lstrip("/"), follow_symlinks=True)
        config = ["--architecture", spec.get("arch", "amd64"), "--os", "linux"]
        config += [arg for kv in spec.get("env", []) for arg in ("--config.env", kv)]
        if spec.get("workdir"):
            config += ["--config.workingdir", spec["workdir"]]
        script = textwrap.dedent("""\
            set -e
            cd {work}
            umoci init --layout oci
            umoci new --image oci:img
            umoci insert --image oci:img rootfs /
            umoci config --image oci:img {config}
            skopeo copy -q --dest-creds {creds} oci:oci:img docker://{ref}
            """).format(work=work, config=" ".join(config), creds="%s:%s" % (REGISTRY_USER, REGISTRY_PASSWORD),
                        ref=self.image(name))
        self.run(["sh", "-c", script], timeout=120).check()
        shutil.rmtree(host)

    # ---- the cache -------------------------------------------------------------------
    def cache_stats(self) -> dict:
        res = self.run([HELPER, "stats", "--cache", CACHE + "/store"]).check()
        return json.loads(res.stdout)

    def cache_leftovers(self) -> list[str]:
        """What a failed pull could leave: work directories, and image directories without their record."""
        store = self.root / CACHE.lstrip("/") / "store"
        left = [str(p) for p in (store / "tmp").iterdir()] if (store / "tmp").exists() else []
        images = store / "images"
        if images.exists():
            left += [str(p) for p in images.iterdir() if p.is_dir() and not (p / "image.json").exists()]
        return left

    def clear_cache(self) -> None:
        store = self.root / CACHE.lstrip("/") / "store"
        if store.exists():
            shutil.rmtree(store)


class ContainerCluster(LocalRegistry, Cluster):
    """slurm_cluster.Cluster (two static nodes, the busybox jail) with container steps and the test images."""

    PIVOT_ROOT = True  # as a pod's: a task joining the container's namespace lands in its root

    def prepare(self) -> None:
        super().prepare()
        self.plugstack(None)  # the drop-in: plugstack.conf itself names the plugin
        self.set_plugstack()
        self.prepare_containers()
        self.run_slurmctld_as_slurm_user()
        self.run_slurmd_without_ptrace()

    def run_slurmctld_as_slurm_user(self) -> None:
        """``SlurmUser=slurm`` (Debian's, uid 64030), as the rendered slurm.conf has it: a Slurm client in a
        container refuses to run unless that name resolves there, which root, every image's, hid. slurmctld drops
        root for it: its state and log are that user's."""
        conf = self.root / "etc/slurm/slurm.conf"
        conf.write_text(conf.read_text().replace("SlurmUser=root\n", "SlurmUser=slurm\n"))
        init = self.root / "usr/local/sbin/cluster-init"
        init.write_text(init.read_text().replace(
            "/usr/sbin/slurmctld\n",
            "install -d -m 0700 -o slurm -g slurm /var/spool/slurmctld\n"
            "install -m 0640 -o slurm -g slurm /dev/null /var/log/slurm/slurmctld.log\n"
            "/usr/sbin/slurmctld\n"))

    def run_slurmd_without_ptrace(self) -> None:
        """slurmd without CAP_SYS_PTRACE, as in a worker pod: slurmstepd then opens a container's namespace
        (``/proc/<builder>/ns/mnt``) only while the builder is dumpable, which every capability hid."""
        init = self.root / "usr/local/sbin/cluster-init"
        text = init.read_text()
        assert "/usr/sbin/slurmd -N $n" in text
        init.write_text(text.replace("/usr/sbin/slurmd -N $n",
                                     "setpriv --bounding-set=-sys_ptrace /usr/sbin/slurmd -N $n"))

    def build_plugin(self) -> None:
        super().build_plugin()
        self.chroot(["make", "-C", "/usr/local/src/spank_chroot", "install-tools", "DESTDIR=/",
                     "PREFIX=/usr/local"]).check()

    def start(self, timeout: float = 60) -> None:
        super().start(timeout)
        self.start_registry()
        for name, spec in IMAGES.items():
            self.push_image(name, spec)
