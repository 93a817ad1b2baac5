/* Unit tests of fsutil.c against a temporary directory (no root needed). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "unit.h"

static char root[64];
static int rootfd = -1;

/* A fresh tree: a/b (dir), f (file), up -> .. , abs -> /etc, a/l -> b */
static void setup(void)
{
	strcpy(root, "/tmp/spank_chroot-unit-XXXXXX");
	if (!mkdtemp(root))
		abort();
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || mkdirat(rootfd, "a", 0755) ||
	    mkdirat(rootfd, "a/b", 0755) || symlinkat("..", rootfd, "up") ||
	    symlinkat("/etc", rootfd, "abs") || symlinkat("b", rootfd, "a/l"))
		abort();
	int fd = openat(rootfd, "f", O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		abort();
	close(fd);
}

static void teardown(void)
{
	char cmd[128];

	close(rootfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		abort();
}

static int exists(const char *rel, mode_t type)
{
	struct stat st;

	if (fstatat(rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return (st.st_mode & S_IFMT) == type;
}

static void expect_fd(int fd)
{
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

static void test_existing(void)
{
	setup();
	expect_fd(sc_open_beneath(rootfd, "/a/b", false, SC_KIND_DIR));
	expect_fd(sc_open_beneath(rootfd, "a//b/", false, SC_KIND_DIR));
	expect_fd(sc_open_beneath(rootfd, "/f", false, SC_KIND_FILE));
	expect_fd(sc_open_beneath(rootfd, "/", false, SC_KIND_DIR));
	CHECK(sc_open_beneath(rootfd, "/", false, SC_KIND_FILE) == -EISDIR);
	teardown();
}

static void test_missing(void)
{
	setup();
	CHECK(sc_open_beneath(rootfd, "/x/y", false, SC_KIND_DIR) == -ENOENT);
	CHECK(!exists("x", S_IFDIR));
	teardown();
}

static void test_create(void)
{
	setup();
	expect_fd(sc_open_beneath(rootfd, "/x/y/z", true, SC_KIND_DIR));
	CHECK(exists("x/y/z", S_IFDIR));
	expect_fd(sc_open_beneath(rootfd, "/a/new/file", true, SC_KIND_FILE));
	CHECK(exists("a/new/file", S_IFREG));
	/* idempotent */
	expect_fd(sc_open_beneath(rootfd, "/x/y/z", true, SC_KIND_DIR));
	teardown();
}

static void test_kind_mismatch(void)
{
	setup();
	CHECK(sc_open_beneath(rootfd, "/f", true, SC_KIND_DIR) == -ENOTDIR);
	CHECK(sc_open_beneath(rootfd, "/a", true, SC_KIND_FILE) == -EISDIR);
	CHECK(sc_open_beneath(rootfd, "/f/x", true, SC_KIND_DIR) == -ENOTDIR);
	teardown();
}

static void test_symlinks_refused(void)
{
	setup();
	CHECK(sc_open_beneath(rootfd, "/up", true, SC_KIND_DIR) == -ELOOP);
	CHECK(sc_open_beneath(rootfd, "/up/x", true, SC_KIND_DIR) == -ELOOP);
	CHECK(sc_open_beneath(rootfd, "/abs/passwd", false, SC_KIND_FILE) ==
	      -ELOOP);
	CHECK(sc_open_beneath(rootfd, "/a/l", true, SC_KIND_DIR) == -ELOOP);
	CHECK(sc_open_beneath(rootfd, "/abs", true, SC_KIND_FILE) == -ELOOP);
	/* nothing was created through the links */
	CHECK(!exists("x", S_IFDIR) && !exists("a/b/x", S_IFDIR));
	teardown();
}

static void test_dots_refused(void)
{
	setup();
	CHECK(sc_open_beneath(rootfd, "/a/../a", false, SC_KIND_DIR) ==
	      -EINVAL);
	CHECK(sc_open_beneath(rootfd, "/./a", false, SC_KIND_DIR) == -EINVAL);
	CHECK(sc_open_beneath(rootfd, "/..", true, SC_KIND_DIR) == -EINVAL);
	teardown();
}

static void test_too_long(void)
{
	char *p = malloc(5000);

	if (!p)
		abort();
	memset(p, 'a', 4999);
	p[4999] = '\0';
	setup();
	CHECK(sc_open_beneath(rootfd, p, false, SC_KIND_DIR) == -ENAMETOOLONG);
	teardown();
	free(p);
}

const struct unit_test fsutil_tests[] = {
	{"fsutil: existing paths", test_existing},
	{"fsutil: missing without create", test_missing},
	{"fsutil: create mountpoints", test_create},
	{"fsutil: kind mismatch", test_kind_mismatch},
	{"fsutil: symlinks refused", test_symlinks_refused},
	{"fsutil: . and .. refused", test_dots_refused},
	{"fsutil: path too long", test_too_long},
	{NULL, NULL},
};
