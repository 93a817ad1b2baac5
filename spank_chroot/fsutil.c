/* Symlink-proof path walk beneath a directory. See fsutil.h. */
#define _GNU_SOURCE
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open one component, which must not be a symlink, as O_PATH. */
static int open_component(int dirfd, const char *name, bool create, bool last,
			  enum sc_kind kind)
{
	bool want_dir = !last || kind == SC_KIND_DIR;
	struct stat st;
	int fd;

	for (int attempt = 0; attempt < 2; attempt++) {
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno != ENOENT || !create || attempt > 0)
			return -errno;
		if (want_dir) {
			if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
				return -errno;
		} else {
			int nfd = openat(dirfd, name,
					 O_WRONLY | O_CREAT | O_EXCL |
						 O_NOFOLLOW | O_CLOEXEC,
					 0644);
			if (nfd < 0 && errno != EEXIST)
				return -errno;
			if (nfd >= 0)
				close(nfd);
		}
	}
	if (fstat(fd, &st) < 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	if (S_ISLNK(st.st_mode)) {
		close(fd);
		return -ELOOP;
	}
	if (want_dir && !S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	if (!want_dir && S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	return fd;
}

int sc_open_beneath(int rootfd, const char *path, bool create,
		    enum sc_kind kind)
{
	char buf[PATH_MAX];
	char *save = NULL, *comp, *next;
	int dirfd, fd;

	if (!path || strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	dirfd = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	comp = strtok_r(buf, "/", &save);
	if (!comp) {
		/* the root itself */
		if (kind != SC_KIND_DIR) {
			close(dirfd);
			return -EISDIR;
		}
		return dirfd;
	}
	for (; comp; comp = next) {
		next = strtok_r(NULL, "/", &save);
		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			close(dirfd);
			return -EINVAL;
		}
		fd = open_component(dirfd, comp, create, next == NULL, kind);
		close(dirfd);
		if (fd < 0)
			return fd;
		dirfd = fd;
	}
	return dirfd;
}
