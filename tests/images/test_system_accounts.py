"""The images' own accounts, read from the built images: every user of every image's /etc/passwd and every group of
its /etc/group is in slurm/accounts.py's list (by name, which sssd filters) and its id is one no idRange may hold (at
or below SYSTEM_ID_MAX, or one of HIGH_IDS); every name of the list is in some image. A package that adds an account,
or a Containerfile that gives one another id, fails here until the list says so.

The files are copied out of each image (a created container, never started) by the project's engine, after
hack/images.sh build made every image current (test_smoke.py's engine fixture); the skip rules are its.
"""

import io
import subprocess
import tarfile

from test_smoke import IMAGES_SH, Docker, engine  # noqa: F401  (engine: a fixture used here)

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import accounts


def _images():
    listed = subprocess.run([IMAGES_SH, "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[1] for line in listed.splitlines()]


def _file(docker, container, path):
    """The text of ``path`` in a created container, or None when the image has none."""
    copied = subprocess.run(["/usr/bin/docker", "cp", "%s:%s" % (container, path), "-"], env=docker.env,
                            capture_output=True, check=False)
    if copied.returncode != 0:
        return None
    with tarfile.open(fileobj=io.BytesIO(copied.stdout)) as archive:
        member = archive.next()
        return archive.extractfile(member).read().decode()


def _entries(text):
    """[(name, id)] of a passwd or group file."""
    return [(fields[0], int(fields[2])) for fields in (line.split(":") for line in text.splitlines() if line)]


def test_every_account_of_every_image_is_on_the_list_and_never_a_directorys(engine):  # noqa: F811
    docker = Docker(engine)
    users, groups, missing = {}, {}, []
    try:
        for image in _images():
            name = "accounts-" + image.split("/")[-1].replace(":", "-")
            docker("create", "--label", "soperator.test=1", "--name", docker.name(name), image)
            docker.containers.append(docker.name(name))
            for path, found in (("/etc/passwd", users), ("/etc/group", groups)):
                text = _file(docker, docker.name(name), path)
                if text is None:
                    missing.append((image, path))
                    continue
                for entry in _entries(text):
                    found.setdefault(entry, []).append(image)
    finally:
        docker.cleanup()
    assert not missing, missing  # every image is Debian's: none lacks them
    for kind, found, listed in (("user", users, accounts.USERS), ("group", groups, accounts.GROUPS)):
        unlisted = sorted((name, number, images) for (name, number), images in found.items() if name not in listed)
        assert not unlisted, "%ss of the images missing from slurm/accounts.py: %s" % (kind, unlisted)
        reachable = sorted((name, number, images) for (name, number), images in found.items()
                           if accounts.system_id(number) is None)
        assert not reachable, "%ss of the images with an id an idRange may hold: %s" % (kind, reachable)
        stale = sorted(set(listed) - set(name for name, _number in found))
        assert not stale, "%ss listed in slurm/accounts.py that no image has: %s" % (kind, stale)
    print("\nimages' accounts: %d users, %d groups, %d distinct names" % (
        len(users), len(groups), len(set(n for n, _i in users) | set(n for n, _i in groups))))
