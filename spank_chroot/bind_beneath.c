/*
 * soperator-bind-beneath: bind-mount a directory into a tree that users may
 * write to (the jail, or a container's root with jail paths shared into it)
 * without ever following a symlink, on either side.
 *
 *   soperator-bind-beneath [--ro] SRC_ROOT SRC_PATH DST_ROOT DST_PATH
 *
 * SRC_PATH is opened beneath SRC_ROOT, DST_PATH beneath DST_ROOT, each by
 * sc_open_beneath (fsutil.c): every component with O_NOFOLLOW, "." and ".."
 * refused; missing directories of DST_PATH are made (0755, the caller's).
 * The two roots themselves are the caller's trusted paths. The mount goes
 * from descriptor to descriptor (open_tree, move_mount): no path is resolved
 * twice, so nothing swapped in between can redirect it. --ro: read-only, with
 * every mount below it, before it is attached (Linux >= 5.12; older kernels:
 * mount(2) through /proc/self/fd, the bind itself read-only).
 *
 * The soperator entrypoint binds the jail's sub-mounts into the jail and
 * shares jail paths with slurmstepd this way: a symlink a job left in the
 * shared jail fails the container (exit 1, naming the path and the errno)
 * instead of turning the bind onto the container's own files. Exit 3: the
 * paths were fine but this process may not mount (no CAP_SYS_ADMIN).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fsutil.h"
#include "mount_api.h"

static const char *prog = "soperator-bind-beneath";

static int fail(const char *what, const char *root, const char *path, int err)
{
	const char *name = strerrorname_np(err);

	fprintf(stderr, "%s: %s %s%s: %s (%s)\n", prog, what,
		strcmp(root, "/") ? root : "", path, strerror(err),
		name ? name : "?");
	return 1;
}

/* The directory root/path, reached without following a symlink below root. */
static int open_dir(const char *root, const char *path, bool create,
		    const char *what)
{
	int rootfd, fd;

	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		fail(what, root, "", errno);
		return -1;
	}
	fd = sc_open_beneath(rootfd, path, create, SC_KIND_DIR);
	close(rootfd);
	if (fd < 0) {
		fail(what, root, path, -fd);
		return -1;
	}
	return fd;
}

/* Attach a clone of the tree behind srcfd onto dstfd, made read-only before it
 * is attached when asked (Linux >= 5.12). -ENOSYS on older kernels. */
static int attach_clone(int srcfd, int dstfd, bool readonly)
{
	struct sc_mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	int tree, rc = 0;

	tree = (int)syscall(SYS_open_tree, srcfd, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
				    AT_RECURSIVE | AT_EMPTY_PATH);
	if (tree < 0)
		return -errno;
	if (readonly && syscall(SYS_mount_setattr, tree, "",
				AT_EMPTY_PATH | AT_RECURSIVE, &attr,
				sizeof(attr)) < 0)
		rc = -errno;
	if (rc == 0 && syscall(SYS_move_mount, tree, "", dstfd, "",
			       MOVE_MOUNT_F_EMPTY_PATH |
				       MOVE_MOUNT_T_EMPTY_PATH) < 0)
		rc = -errno;
	close(tree);
	return rc;
}

/* Older kernels: mount(2) from descriptor to descriptor, then a read-only
 * remount of the bind (not of mounts below it), reached again beneath
 * DST_ROOT and checked to be the source's tree. */
static int bind_classic(int srcfd, int dstfd, bool readonly, char **argv)
{
	char src[32], dst[32];
	struct stat want, got;
	int fd, rc = 0;

	snprintf(src, sizeof(src), "/proc/self/fd/%d", srcfd);
	snprintf(dst, sizeof(dst), "/proc/self/fd/%d", dstfd);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
		int err = errno;

		fail("bind mount onto", argv[3], argv[4], err);
		return err == EPERM ? 3 : 1;
	}
	if (!readonly)
		return 0;
	fd = open_dir(argv[3], argv[4], false, "mounted");
	if (fd < 0)
		return 1;
	snprintf(dst, sizeof(dst), "/proc/self/fd/%d", fd);
	if (fstat(srcfd, &want) < 0 || fstat(fd, &got) < 0 ||
	    want.st_dev != got.st_dev || want.st_ino != got.st_ino)
		rc = fail("changed under us:", argv[3], argv[4], ESTALE);
	else if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY,
		       NULL) < 0)
		rc = fail("read-only remount of", argv[3], argv[4], errno);
	/* never leave a writable bind behind */
	if (rc != 0 && umount2(dst, MNT_DETACH) < 0)
		fail("detach", argv[3], argv[4], errno);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	bool readonly = false;
	int srcfd, dstfd, rc;

	if (argc > 1 && !strcmp(argv[1], "--ro")) {
		readonly = true;
		argv++;
		argc--;
	}
	if (argc != 5 || argv[2][0] != '/' || argv[4][0] != '/') {
		fprintf(stderr,
			"usage: %s [--ro] SRC_ROOT /SRC_PATH DST_ROOT "
			"/DST_PATH\n",
			prog);
		return 2;
	}
	srcfd = open_dir(argv[1], argv[2], false, "source");
	if (srcfd < 0)
		return 1;
	dstfd = open_dir(argv[3], argv[4], true, "mount point");
	if (dstfd < 0) {
		close(srcfd);
		return 1;
	}
	rc = attach_clone(srcfd, dstfd, readonly);
	if (rc == -ENOSYS)
		rc = bind_classic(srcfd, dstfd, readonly, argv);
	else if (rc == -EPERM)
		rc = fail("bind mount onto", argv[3], argv[4], EPERM) + 2; /* 3 */
	else if (rc < 0)
		rc = fail("bind mount onto", argv[3], argv[4], -rc);
	close(srcfd);
	close(dstfd);
	return rc;
}
