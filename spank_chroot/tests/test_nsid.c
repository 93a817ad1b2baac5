/*
 * nsid.c: a builder on any CPU makes a mount namespace its parent can keep by
 * bind mounting its file. On Linux 6.18 with two CPUs a plain unshare fails
 * the bind on one of them every time (ids from per-CPU batches). Needs root
 * (CAP_SYS_ADMIN); skipped, and says so, without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../nsid.h"
#include "unit.h"

#define ROUNDS 8

/* In a child pinned to cpu: the new namespace; then wait for the parent. */
static pid_t builder(int cpu, int ready, int go)
{
	pid_t pid = fork();

	if (pid == 0) {
		const char *what = "";
		cpu_set_t one;
		char c = 'k';

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0 ||
		    sc_unshare_mount_ns_above(&what) < 0)
			c = 'x';
		if (write(ready, &c, 1) != 1 || read(go, &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	return pid;
}

/* In a private mount namespace of its own: bind each builder's namespace
 * file; the number of failures, or -1 where it may not unshare. */
static int bind_failures(const char *pin)
{
	cpu_set_t allowed;
	int failures = 0;

	/* a UTS namespace made after the mount namespace, as a pod's is: a
	 * builder's own is then numbered above the step's already */
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    unshare(CLONE_NEWUTS) < 0)
		return -1;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return -1;
	for (int round = 0; round < ROUNDS; round++) {
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
			int ready[2], go[2];
			char path[64], c = 'x';
			pid_t pid;

			if (!CPU_ISSET(cpu, &allowed))
				continue;
			if (pipe(ready) < 0 || pipe(go) < 0)
				return -1;
			pid = builder(cpu, ready[1], go[0]);
			if (pid < 0 || read(ready[0], &c, 1) != 1 || c != 'k') {
				fprintf(stderr, "builder on cpu %d failed\n",
					cpu);
				failures++;
			} else {
				snprintf(path, sizeof(path), "/proc/%d/ns/mnt",
					 (int)pid);
				if (mount(path, pin, NULL, MS_BIND, NULL) < 0) {
					fprintf(stderr, "bind on cpu %d: %s\n",
						cpu, strerror(errno));
					failures++;
				} else {
					umount2(pin, MNT_DETACH);
				}
			}
			if (write(go[1], "g", 1) < 0)
				failures++;
			if (pid > 0)
				waitpid(pid, NULL, 0);
			close(ready[0]);
			close(ready[1]);
			close(go[0]);
			close(go[1]);
		}
	}
	return failures;
}

static void test_every_cpu_builds_a_namespace_its_parent_can_keep(void)
{
	char pin[] = "/tmp/sc-nsid-XXXXXX";
	int fd = mkstemp(pin), status = 0;
	pid_t pid;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	pid = fork();
	if (pid == 0) {
		int failures = bind_failures(pin);

		_exit(failures < 0 ? 77 : failures > 0 ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	unlink(pin);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		fprintf(stderr, "skipped: may not unshare a mount namespace "
				"(not root)\n");
		return;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

const struct unit_test nsid_tests[] = {
	{"every cpu builds a namespace its parent can keep",
	 test_every_cpu_builds_a_namespace_its_parent_can_keep},
	{NULL, NULL},
};
