/*
 * Opening paths inside the jail without ever following a symlink, so a jail
 * writable by users cannot redirect a mount out of it. No Slurm here: tested
 * in tests/ against a temporary directory.
 */
#ifndef SPANK_CHROOT_FSUTIL_H
#define SPANK_CHROOT_FSUTIL_H

#include <stdbool.h>

enum sc_kind {
	SC_KIND_DIR,  /* a directory */
	SC_KIND_FILE, /* anything but a directory or a symlink */
};

/*
 * Open path (absolute or relative, read as relative to rootfd) beneath rootfd
 * as an O_PATH descriptor. Every component is opened with O_NOFOLLOW: a
 * symlink anywhere fails with ELOOP, "." and ".." with EINVAL. With create,
 * missing directories are made (0755) and a missing last component is made as
 * kind says (a directory, or an empty 0644 file); an existing last component
 * of the other kind fails with ENOTDIR or EISDIR. Returns the fd or -errno.
 */
int sc_open_beneath(int rootfd, const char *path, bool create,
		    enum sc_kind kind);

#endif
