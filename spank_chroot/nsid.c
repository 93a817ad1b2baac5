/* See nsid.h. */
#define _GNU_SOURCE
#include "nsid.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* nsfs's ioctls (linux/nsfs.h): any namespace's id (Linux 6.18), and a
 * mount namespace's (also on the kernels before ids were unified) */
#define SC_NS_GET_ID _IOR(0xb7, 0xd, uint64_t)
#define SC_NS_GET_MNTNS_ID _IOR(0xb7, 0x5, uint64_t)

/* a bound on the throwaway namespaces: one batch is 4096 ids */
#define MAX_THROWAWAY (1 << 16)

uint64_t sc_ns_id(const char *ns)
{
	char path[64];
	uint64_t id = 0;
	int fd;

	if (snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", ns) >=
	    (int)sizeof(path))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (ioctl(fd, ns[0] == 'm' ? SC_NS_GET_MNTNS_ID : SC_NS_GET_ID, &id) <
	    0)
		id = 0;
	close(fd);
	return id;
}

int sc_unshare_mount_ns_above(const char **what)
{
	uint64_t before = sc_ns_id("mnt"), now;
	int cpu = sched_getcpu();
	cpu_set_t one;

	if (cpu >= 0) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* best effort: a cpuset may refuse; the check below stands */
		(void)sched_setaffinity(0, sizeof(one), &one);
	}
	*what = "unshare a mount namespace for";
	if (unshare(CLONE_NEWNS) < 0)
		return -1;
	now = sc_ns_id("mnt");
	if (before == 0 || now == 0 || now > before)
		return 0;
	*what = "unshare a UTS namespace for";
	/* each a new one: the UTS namespace it is in may be numbered above
	 * already, from another CPU's batch */
	for (int i = 0; i < MAX_THROWAWAY; i++) {
		if (unshare(CLONE_NEWUTS) < 0)
			return -1;
		if (sc_ns_id("uts") > before)
			break;
	}
	*what = "unshare a mount namespace for";
	if (unshare(CLONE_NEWNS) < 0)
		return -1;
	if (sc_ns_id("mnt") <= before) {
		*what = "number above the step's the mount namespace of";
		errno = EOVERFLOW;
		return -1;
	}
	return 0;
}
