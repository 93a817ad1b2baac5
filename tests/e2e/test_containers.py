"""Container steps (issue 36, docs/containers.md) on the real node: ``srun``/``sbatch --container-image`` with images
from a registry in the cluster.

The registry is Debian's ``docker-registry``, a pod and Service of this suite's namespace, from an image built here
(tests/e2e/container_registry: the project's worker image with the registry, busybox-static and a
``registries.conf.d`` entry that lets skopeo use that registry without TLS, as an administrator extends the worker
image for such a registry). Nothing comes from outside the cluster: the test image is a busybox root made into an OCI
image with umoci in the registry's pod and pushed there with skopeo, behind htpasswd authentication. The cluster is the
local example in its own namespace with ``spec.containers`` on, only that registry allowed, its workers on the
extended image, and the registry's credentials in a pull Secret labelled for the cluster.

The tests share that cluster and run in file order. Each worker pod has its own image cache (an emptyDir): the first
step on each node pulls, later ones hit (``soperator-images stats`` in the slurmd container).
"""

import base64
import json
import os
import secrets
import shlex
import time

import pytest
from conftest import E2E, ROOT, build_test_image, wait_until

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps

NAMESPACE = "e2e-containers"
CLUSTER = "demo"
NODES = ["demo-cpu-0", "demo-cpu-1"]
REGISTRY = "e2e-registry.%s.svc.cluster.local:5000" % NAMESPACE
IMAGE = REGISTRY + "/e2e/busybox:1"
MISSING = REGISTRY + "/e2e/not-there:1"
MARKER = "inside e2e/busybox:1"
REGISTRY_IMAGE = "soperator/slurm-worker-e2e-registry:0.1.0"
CONTEXT = os.path.join(ROOT, "tests", "e2e", "container_registry")
REGISTRY_USER = "puller"
USER, UID = "ctuser", 2301
STORE = container_steps.CACHE_DIR + "/store"

# The registry pod's command: htpasswd (bcrypt by perl's crypt), the configuration, then the registry.
REGISTRY_SH = r"""
set -e
mkdir -p /etc/e2e-registry /var/lib/docker-registry
perl -e 'print $ARGV[0], ":", crypt($ARGV[1], "\$2b\$05\$" . $ARGV[2]), "\n"' \
  "$REGISTRY_USER" "$REGISTRY_PASSWORD" "$SALT" >/etc/e2e-registry/htpasswd
cat >/etc/e2e-registry/config.yml <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: /var/lib/docker-registry}
http:
  addr: :5000
  secret: $SALT
auth:
  htpasswd: {realm: e2e, path: /etc/e2e-registry/htpasswd}
EOF
exec /usr/bin/docker-registry serve /etc/e2e-registry/config.yml
"""

# Run in the registry's pod: a busybox root (every applet a link), an image marker, made into an OCI image and pushed.
PUSH_SH = r"""
set -e
rm -rf /tmp/image && mkdir -p /tmp/image/rootfs/bin /tmp/image/rootfs/etc /tmp/image/rootfs/tmp /tmp/image/rootfs/home
cd /tmp/image
cp /bin/busybox rootfs/bin/busybox
for applet in $(/bin/busybox --list); do [ "$applet" = busybox ] || ln -s busybox "rootfs/bin/$applet"; done
chmod 1777 rootfs/tmp
echo "$MARKER" >rootfs/etc/image-marker
printf 'root:x:0:0:root:/root:/bin/sh\n' >rootfs/etc/passwd
printf 'root:x:0:\n' >rootfs/etc/group
umoci init --layout oci
umoci new --image oci:img
umoci insert --image oci:img rootfs /
umoci config --image oci:img --architecture amd64 --os linux --config.env PATH=/bin
skopeo copy -q --dest-tls-verify=false --dest-creds "$REGISTRY_USER:$REGISTRY_PASSWORD" oci:oci:img \
  "docker://localhost:5000/$NAME"
rm -rf /tmp/image
"""


class Containers(E2E):
    def as_user(self, command, timeout=240):
        """``command`` as the suite's user in the jail, from the login pod, in the user's home."""
        return self.jail("cd /home/%s && HOME=/home/%s runuser -u %s -- sh -c %s"
                         % (USER, USER, USER, shlex.quote(command)), timeout=timeout)

    def stats(self, node):
        """The node's image cache: ``soperator-images stats`` in its slurmd container."""
        res = self.exec(node, "slurmd", "%s stats --cache %s" % (container_steps.HELPER, STORE))
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def leftovers(self, node):
        """What a failed pull could leave in the node's cache: work directories, images without their record."""
        res = self.exec(node, "slurmd", "ls -A %s/tmp 2>/dev/null; for d in %s/images/*/; do [ -d \"$d\" ] && "
                        "[ ! -e \"$d/image.json\" ] && echo \"$d\"; done; true" % (STORE, STORE))
        return res.stdout.split()


def _registry_objects(password, salt):
    labels = {"app.kubernetes.io/name": "e2e-registry"}
    env = [{"name": "REGISTRY_USER", "value": REGISTRY_USER},
           {"name": "REGISTRY_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "e2e-registry", "key": "password"}}},
           {"name": "SALT", "value": salt}]
    auth = base64.b64encode(("%s:%s" % (REGISTRY_USER, password)).encode()).decode()
    pull = json.dumps({"auths": {REGISTRY: {"auth": auth}}})
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e2e-registry", "namespace": NAMESPACE},
         "stringData": {"password": password}},
        # The pull Secret spec.containers.pullSecretRef names, marked for the cluster (else the converge refuses it).
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
         "metadata": {"name": "regcred", "namespace": NAMESPACE,
                      "labels": {container_steps.LABEL_REGISTRY_SECRET: CLUSTER}},
         "data": {container_steps.REGISTRY_AUTH_KEY: base64.b64encode(pull.encode()).decode()}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-registry", "namespace": NAMESPACE,
                                                         "labels": labels},
         "spec": {"nodeSelector": {"soperator.dev/localcluster": "real"}, "enableServiceLinks": False,
                  "containers": [{"name": "registry", "image": REGISTRY_IMAGE, "imagePullPolicy": "Never",
                                  "command": ["sh", "-c", REGISTRY_SH], "env": env,
                                  "ports": [{"containerPort": 5000}],
                                  "readinessProbe": {"tcpSocket": {"port": 5000}, "periodSeconds": 1}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "e2e-registry", "namespace": NAMESPACE},
         "spec": {"selector": labels, "ports": [{"port": 5000, "targetPort": 5000}]}},
    ]


@pytest.fixture(scope="module")
def ct(real_node_cluster, tmp_path_factory):
    cluster = Containers(real_node_cluster, namespace=NAMESPACE)
    started = time.monotonic()
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=300)
    # The registry/worker image, built FROM the project's worker image.
    build_test_image(real_node_cluster, CONTEXT, REGISTRY_IMAGE,
                     str(tmp_path_factory.mktemp("e2e-registry") / "e2e-registry.tar"), ["REGISTRY=" + REGISTRY])
    built = time.monotonic() - started
    password = secrets.token_urlsafe(18)
    salt = base64.b64encode(os.urandom(16)).decode()[:22].replace("+", ".")
    cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": _registry_objects(password, salt)}))
    cluster.kubectl("wait", "-n", NAMESPACE, "--for=condition=Ready", "pod/e2e-registry", "--timeout=120s",
                    timeout=150)
    pushed = cluster.exec("e2e-registry", "registry", "MARKER=%s NAME=e2e/busybox:1 REGISTRY_PASSWORD=%s sh -c %s"
                          % (shlex.quote(MARKER), shlex.quote(password), shlex.quote(PUSH_SH)), timeout=180)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    registry = time.monotonic() - started - built
    cluster.worker_image = REGISTRY_IMAGE
    docs = cluster.definition()
    docs[0]["spec"]["containers"] = {"enabled": True, "registries": [REGISTRY], "pullSecretRef": {"name": "regcred"}}
    cluster.site(docs)
    cluster.wait_idle(NODES)
    made = cluster.jail("id %s >/dev/null 2>&1 || useradd -m -u %d -s /bin/sh %s" % (USER, UID, USER))
    assert made.returncode == 0, made.stderr
    print("\ncontainers e2e: image built and imported %.1f s; registry up, test image pushed %.1f s; cluster up "
          "%.1f s" % (built, registry, time.monotonic() - started - built - registry))
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def test_srun_on_two_nodes_runs_in_the_image_as_the_user(ct):
    started = time.monotonic()
    step = ct.as_user("timeout 200 srun -N2 --immediate=120 --container-image=%s sh -c "
                      "'echo $(hostname) $(id -u) $(cat /etc/image-marker)'" % IMAGE)
    took = time.monotonic() - started
    assert step.returncode == 0, step.stdout + step.stderr + ct.explain()
    assert sorted(step.stdout.splitlines()) == ["%s %d %s" % (node, UID, MARKER) for node in NODES], step.stdout
    for node in NODES:  # each node's own cache pulled it once
        stats = ct.stats(node)
        assert (stats["pulls"], stats["failures"]) == (1, 0), (node, stats)
        assert len(stats["images"]) == 1 and "e2e/busybox:1" in stats["images"][0]["references"][0], stats
    print("\ncontainers e2e: first srun -N2 (pull + unpack on both nodes, %.1f MiB unpacked) %.1f s"
          % (stats["images"][0]["size"] / 2**20, took))


def test_a_file_written_to_home_in_the_container_is_in_the_jail(ct):
    step = ct.as_user("timeout 120 srun -w demo-cpu-1 --immediate=60 --container-image=%s sh -c "
                      "'test -e /etc/image-marker && echo written-in-$(hostname) > $HOME/from-container'" % IMAGE)
    assert step.returncode == 0, step.stdout + step.stderr
    seen = ct.jail("stat -c '%%U' /home/%s/from-container; cat /home/%s/from-container" % (USER, USER))
    assert seen.stdout.split() == [USER, "written-in-demo-cpu-1"], seen.stdout + seen.stderr


def test_sbatch_with_a_container_image_runs_its_script_and_steps_in_the_image(ct):
    script = ("#!/bin/sh\n#SBATCH --container-image=%s\n#SBATCH -N2\n"
              "echo batch $(id -u) $(cat /etc/image-marker)\n"
              "srun sh -c 'echo step $(hostname) $(cat /etc/image-marker)'\necho srun=$?\n" % IMAGE)
    written = ct.jail("cat > /home/%s/container.sh <<'EOF'\n%sEOF\nchown %s: /home/%s/container.sh"
                      % (USER, script, USER, USER))
    assert written.returncode == 0, written.stderr
    job = ct.as_user("timeout 200 sbatch --wait -o container.out container.sh; echo rc=$?; cat container.out")
    assert "rc=0" in job.stdout, job.stdout + job.stderr + ct.explain()
    lines = job.stdout.splitlines()
    assert "batch %d %s" % (UID, MARKER) in lines, job.stdout
    assert "srun=0" in lines, job.stdout + job.stderr
    assert sorted(line for line in lines if line.startswith("step ")) == ["step %s %s" % (node, MARKER)
                                                                        for node in NODES], job.stdout + job.stderr


def test_a_second_job_with_the_same_image_does_not_pull_again(ct):
    before = ct.stats("demo-cpu-0")
    started = time.monotonic()  # the baseline: a jail step the same way
    jail = ct.as_user("timeout 120 srun -w demo-cpu-0 --immediate=60 true")
    jail_took = time.monotonic() - started
    assert jail.returncode == 0, jail.stdout + jail.stderr
    started = time.monotonic()
    step = ct.as_user("timeout 120 srun -w demo-cpu-0 --immediate=60 --container-image=%s cat /etc/image-marker"
                      % IMAGE)
    took = time.monotonic() - started
    assert step.returncode == 0 and step.stdout.strip() == MARKER, step.stdout + step.stderr
    after = ct.stats("demo-cpu-0")
    assert after["pulls"] == before["pulls"] == 1 and after["hits"] == before["hits"] + 1, (before, after)
    print("\ncontainers e2e: a cached container step %.2f s, a jail step %.2f s (each with kubectl exec)"
          % (took, jail_took))


def test_a_missing_image_fails_the_step_and_the_node_stays_idle(ct):
    before = ct.stats("demo-cpu-1")
    step = ct.as_user("timeout 120 srun -w demo-cpu-1 --immediate=60 --container-image=%s echo RAN" % MISSING)
    assert step.returncode != 0 and "RAN" not in step.stdout, step.stdout + step.stderr
    said = step.stdout + step.stderr
    assert "container image %s: " % MISSING in said and "manifest unknown" in said, said
    after = ct.stats("demo-cpu-1")
    assert after["failures"] == before["failures"] + 1 and after["pulls"] == before["pulls"], (before, after)
    assert ct.leftovers("demo-cpu-1") == []
    wait_until(lambda: ct.sinfo().get("demo-cpu-1") == "idle", 30, "demo-cpu-1 idle", ct.explain)
    # still in service: the next container step there runs
    again = ct.as_user("timeout 120 srun -w demo-cpu-1 --immediate=60 --container-image=%s id -u" % IMAGE)
    assert again.returncode == 0 and again.stdout.strip() == str(UID), again.stdout + again.stderr
