"""How long a container step takes to start: the first pull and unpack of a ~200 MB image, then cached starts.

    python3 tests/slurm/bench_containers.py [--runs 5]

Runs a ContainerCluster (container_cluster.py: real Slurm 24.11, the local registry), builds an image of about 200 MB
from the rootfs' own files (python3 and its standard library, the C libraries and the rest of /usr/lib, busybox),
pushes it, and times on one node, as the user: a jail step (the baseline), the first container step (pull + unpack +
start), then cached container steps. Each time is the wall time of `srun ... true` and the plugin's own "ready in N
ms" (slurmd's log: the helper's resolve + cache lookup + the container's build). Needs root.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from container_cluster import REGISTRY_PASSWORD, REGISTRY_USER, ContainerCluster  # noqa: E402
from slurm_cluster import USER, running  # noqa: E402

IMAGE = "bench/python-200m:1"
TREES = ("usr/lib/python3.13", "usr/lib/x86_64-linux-gnu", "usr/lib/gcc", "usr/share/perl", "usr/share/zoneinfo")


def build_image(c: ContainerCluster) -> int:
    """The image from the rootfs' own trees; its size in bytes before compression."""
    work = c.root / "tmp/bench-image"
    if work.exists():
        shutil.rmtree(work)
    rootfs = work / "rootfs"
    for tree in TREES:
        src = c.root / tree
        if src.exists():
            shutil.copytree(src, rootfs / tree, symlinks=True)
    for d in ("bin", "etc", "tmp", "usr/bin"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(c.root / "usr/bin/busybox", rootfs / "bin/busybox")
    shutil.copy2(c.root / "usr/bin/python3", rootfs / "usr/bin/python3")
    for applet in ("sh", "true", "cat", "id"):
        (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "lib64").symlink_to("usr/lib64")
    (rootfs / "usr/lib64").mkdir()
    (rootfs / "usr/lib64/ld-linux-x86-64.so.2").symlink_to("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    (rootfs / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    size = sum(p.lstat().st_size for p in rootfs.rglob("*") if p.is_file() and not p.is_symlink())
    script = textwrap.dedent("""\
        set -e
        cd /tmp/bench-image
        umoci init --layout oci
        umoci new --image oci:img
        umoci insert --image oci:img rootfs /
        umoci config --image oci:img --architecture amd64 --os linux --config.env PATH=/usr/bin:/bin
        skopeo copy -q --dest-creds {creds} oci:oci:img docker://{ref}
        """).format(creds="%s:%s" % (REGISTRY_USER, REGISTRY_PASSWORD), ref=c.image(IMAGE))
    c.run(["sh", "-c", script], timeout=600).check()
    shutil.rmtree(work)
    return size


def timed(c: ContainerCluster, *args: str) -> float:
    start = time.monotonic()
    c.srun("-w", "n1", *args, "true", user=USER, timeout=600).check()
    return time.monotonic() - start


def ready_ms(c: ContainerCluster) -> list[int]:
    return [int(m) for m in re.findall(r"container of \S+ \(\S+\) \w+, ready in (\d+) ms", c.log("slurmd-n1.log"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with running(ContainerCluster()) as c:
        size = build_image(c)
        print("image %s: %.0f MB of files" % (IMAGE, size / 1e6))
        jail = [timed(c) for _ in range(args.runs)]
        first = timed(c, "--container-image=" + c.image(IMAGE))
        pulled = re.findall(r"pulled \S+ \(\S+\) in ([0-9.]+) s, (\d+) MiB unpacked", c.log("slurmd-n1.log"))
        cached = [timed(c, "--container-image=" + c.image(IMAGE)) for _ in range(args.runs)]
        ready = ready_ms(c)
        print("jail step (baseline):        median %.2f s over %d" % (statistics.median(jail), len(jail)))
        print("first container step:        %.2f s (helper: pull + unpack %s s, %s MiB unpacked; ready in %d ms)"
              % (first, pulled[-1][0] if pulled else "?", pulled[-1][1] if pulled else "?", ready[0]))
        print("cached container step:       median %.2f s over %d (ready in median %d ms)"
              % (statistics.median(cached), len(cached), statistics.median(ready[1:])))
        print("stats:", {k: v for k, v in c.cache_stats().items() if k != "images"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
