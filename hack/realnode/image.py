"""Assemble a single-layer image as a docker-archive tarball (what `docker save` writes).

`ctr images import` (containerd) and `docker load` both read it. Deterministic: same inputs, same bytes,
so the image ID is stable and a cached tarball can be reused. Stdlib only.
"""

import hashlib
import io
import json
import os
import tarfile


def _info(name, kind, mode, size=0, target=""):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.linkname = kind, mode, size, target
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    ti.mtime = 0
    return ti


def layer_tar(entries):
    """A layer from (path, spec) pairs; spec is ("dir", mode), ("file", mode, bytes) or ("symlink", target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, spec in sorted(entries, key=lambda e: e[0]):
            path = path.lstrip("/")
            if spec[0] == "dir":
                tar.addfile(_info(path, tarfile.DIRTYPE, spec[1]))
            elif spec[0] == "file":
                tar.addfile(_info(path, tarfile.REGTYPE, spec[1], len(spec[2])), io.BytesIO(spec[2]))
            elif spec[0] == "symlink":
                tar.addfile(_info(path, tarfile.SYMTYPE, 0o777, target=spec[1]))
            else:
                raise ValueError("unknown entry kind %r for %s" % (spec[0], path))
    return buf.getvalue()


def docker_archive(out, ref, layer, entrypoint=None, cmd=None, env=None, workdir="/"):
    """Write `out`: one image named `ref` (e.g. soperator.local/pause:1) with the given layer bytes."""
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": workdir},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/realnode/image.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.split(":", 1)[1] + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": [layer_name]}]).encode()
    tmp = out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((config_name, config_bytes), (layer_name, layer), ("manifest.json", manifest)):
            if "/" in name:
                tar.addfile(_info(os.path.dirname(name), tarfile.DIRTYPE, 0o755))
            tar.addfile(_info(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
    os.replace(tmp, out)
    return "sha256:" + config_name[:-5]


def base_entries():
    """What every image here needs besides its binaries: /etc files runc and tools expect, /tmp."""
    return [
        ("etc", ("dir", 0o755)), ("tmp", ("dir", 0o1777)), ("bin", ("dir", 0o755)),
        ("etc/passwd", ("file", 0o644, b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")),
        ("etc/group", ("file", 0o644, b"root:x:0:\nnogroup:x:65534:\n")),
        ("root", ("dir", 0o700)),
    ]


def pause_image(out, ref, pause_binary):
    with open(pause_binary, "rb") as f:
        data = f.read()
    entries = base_entries() + [("pause", ("file", 0o755, data))]
    return docker_archive(out, ref, layer_tar(entries), entrypoint=["/pause"])


def busybox_image(out, ref, busybox, applets, extra_bins=()):
    """A test image: static busybox with a symlink per applet in /bin, plus `extra_bins` (static) in /bin."""
    with open(busybox, "rb") as f:
        data = f.read()
    entries = base_entries() + [("bin/busybox", ("file", 0o755, data))]
    entries += [("bin/" + a, ("symlink", "busybox")) for a in applets if a != "busybox" and "/" not in a]
    for path in extra_bins:
        with open(path, "rb") as f:
            entries.append(("bin/" + os.path.basename(path), ("file", 0o755, f.read())))
    return docker_archive(out, ref, layer_tar(entries), cmd=["/bin/sh"])
