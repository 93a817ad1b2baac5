/*
 * Entering the jail, in the task's process after fork and before exec, as
 * root. Only this task's new mount namespace is changed: slurmd, slurmstepd
 * and the node keep theirs.
 */
#define _GNU_SOURCE
#include "jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "mount_api.h"

/* Paths of the node always bound into the jail, before the configured ones. */
static const char *const node_paths[] = {"/dev", "/sys", "/tmp", "/run"};
/* ... of which these read-only, with every mount below them: the node's
 * cgroup tree is writable in slurmd's container, and /run holds what its
 * root processes trust (the configuration slurmd fetched, its link in
 * /run/slurm; munge's socket, which a task reaches read-only too). No task,
 * root's included, may change them. */
static const char *const node_paths_ro[] = {"/sys", "/run"};

/* Parts of the fresh /proc a task may read but not write, as container
 * runtimes keep them (runc's readonlyPaths): kernel tunables, sysrq. */
static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger",
				      "/proc/irq", "/proc/bus", "/proc/fs"};

/*
 * What only entering the jail needs. Once the task is in it they leave the
 * task's bounding, ambient, inheritable, permitted and effective sets, so
 * no process of the step, root's included, can hold them again (an execve
 * as root, or of a setuid program, gets no capability outside the bounding
 * set). CAP_SETPCAP last: dropping from the bounding set needs it.
 */
static const struct {
	int cap;
	const char *name;
} jail_caps[] = {
	{CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},
	{CAP_SYS_CHROOT, "CAP_SYS_CHROOT"},
	{CAP_SETPCAP, "CAP_SETPCAP"},
};


/* A path naming exactly the object behind fd, for mount(2). */
struct sc_fdpath sc_fd_path(int fd)
{
	struct sc_fdpath p;

	snprintf(p.s, sizeof(p.s), "/proc/self/fd/%d", fd);
	return p;
}

static const char *errname(int err)
{
	const char *n = strerrorname_np(err);

	return n ? n : "?";
}

char sc_last_error[512];
bool sc_log_quiet;

/* Log "<what> <path>: <strerror> (<ENAME>)" and return -1. */
int sc_fail(const char *what, const char *path, int err)
{
	snprintf(sc_last_error, sizeof(sc_last_error), "%s %s: %s (%s)", what,
		 path, strerror(err), errname(err));
	sc_error("%s", sc_last_error);
	return -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Remount read-only the mount behind fd and every mount below it (one
 * mount_setattr(2), Linux >= 5.12; else each mount of /proc/self/mountinfo
 * at or below its path). shown names it in errors.
 */
int sc_make_readonly(int fd, const char *shown)
{
	struct sc_mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	char line[PATH_MAX * 2], point[PATH_MAX], sub[PATH_MAX + 32];
	size_t len;
	FILE *info;
	int rc = 0;

	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE,
		    &attr, sizeof(attr)) == 0)
		return 0;
	if (errno != ENOSYS)
		return sc_fail("recursive read-only remount of", shown, errno);
	if (mount(NULL, sc_fd_path(fd).s, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY,
		  NULL) < 0)
		return sc_fail("read-only remount of", shown, errno);
	info = fopen("/proc/self/mountinfo", "re");
	if (!info)
		return sc_fail("read", "/proc/self/mountinfo", errno);
	len = strlen(shown);
	/* field 5 is the mount point; kernel file systems' names have no
	 * spaces (escaped as \040 if they had: such a mount is not ours) */
	while (rc == 0 && fgets(line, sizeof(line), info)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1)
			continue;
		if (strncmp(point, shown, len) != 0 || point[len] != '/')
			continue;
		snprintf(sub, sizeof(sub), "%s", point);
		if (mount(NULL, sub, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY,
			  NULL) < 0)
			rc = sc_fail("read-only remount of", sub, errno);
	}
	fclose(info);
	return rc;
}

/*
 * Mount src (a path, or /proc/self/fd/N) onto dst inside the jail, creating
 * the mountpoint as the kind of src when missing.
 */
int sc_bind_into(const char *jail, int jailfd, const char *src,
		 const char *dst, bool readonly, bool optional)
{
	char shown[PATH_MAX * 2];
	struct stat st;
	enum sc_kind kind;
	int tfd = -1, rc = -1;

	snprintf(shown, sizeof(shown), "%s%s", jail, dst);
	if (stat(src, &st) < 0) {
		if (errno == ENOENT && optional) {
			sc_debug("optional bind source %s is missing", src);
			return 0;
		}
		return sc_fail("bind source", src, errno);
	}
	kind = S_ISDIR(st.st_mode) ? SC_KIND_DIR : SC_KIND_FILE;
	tfd = sc_open_beneath(jailfd, dst, true, kind);
	if (tfd < 0)
		return sc_fail("mountpoint", shown, -tfd);
	if (mount(src, sc_fd_path(tfd).s, NULL, MS_BIND | MS_REC, NULL) < 0) {
		sc_fail("bind mount onto", shown, errno);
		goto out;
	}
	if (readonly) {
		close_fd(&tfd);
		/* reopen: the path now leads to the new mount's root */
		tfd = sc_open_beneath(jailfd, dst, false, kind);
		if (tfd < 0) {
			sc_fail("reopen mountpoint", shown, -tfd);
			goto out;
		}
		if (sc_make_readonly(tfd, shown) < 0)
			goto out;
	}
	rc = 0;
out:
	close_fd(&tfd);
	return rc;
}

static int mount_proc(const char *jail, int jailfd)
{
	char shown[PATH_MAX + 8];
	int fd, rc = 0;

	snprintf(shown, sizeof(shown), "%s/proc", jail);
	fd = sc_open_beneath(jailfd, "proc", true, SC_KIND_DIR);
	if (fd < 0)
		return sc_fail("mountpoint", shown, -fd);
	if (mount("proc", sc_fd_path(fd).s, "proc",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		rc = sc_fail("mount proc on", shown, errno);
	close(fd);
	return rc;
}

/* Credentials of the task's file system access (root's, slurmstepd's) while
 * it acts for the job's user. */

/*
 * Make every later file system access the job's: fsuid, fsgid and the job's
 * supplementary groups (never root's: a job whose groups Slurm cannot tell
 * fails). Changing the fsuid from 0 also clears CAP_DAC_OVERRIDE, CAP_CHOWN,
 * CAP_FOWNER and the like from the effective set: files are reached, and
 * made, exactly as the user could. Checked, not assumed; -1 on any error
 * (then drop_job_fs must still be called).
 */
int sc_become_job_fs(const struct sc_job *job, struct sc_saved_creds *saved)
{
	saved->ngroups = getgroups(NGROUPS_MAX, saved->groups);
	if (saved->ngroups < 0)
		return sc_fail("read the groups of", "slurmstepd", errno);
	if (job->ngids < 0 || (job->ngids > 0 && !job->gids))
		return sc_fail("the job's supplementary groups:",
			    "unknown to Slurm", EINVAL);
	if (setgroups((size_t)job->ngids, job->gids) < 0)
		return sc_fail("take the job's groups for", "its workdir", errno);
	setfsgid(job->gid);
	setfsuid(job->uid);
	/* setfs[ug]id return the previous id, even on failure: ask again */
	if ((uid_t)setfsuid((uid_t)-1) != job->uid ||
	    (gid_t)setfsgid((gid_t)-1) != job->gid)
		return sc_fail("take the job's uid/gid for", "its workdir", EPERM);
	return 0;
}

/* Back to slurmstepd's own file system credentials; -1 if they did not come
 * back (the task must not go on). */
int sc_drop_job_fs(const struct sc_saved_creds *saved)
{
	setfsuid(0);
	setfsgid(0);
	if ((uid_t)setfsuid((uid_t)-1) != 0 || (gid_t)setfsgid((gid_t)-1) != 0)
		return sc_fail("restore root's fsuid/fsgid after", "the workdir",
			    EPERM);
	if (saved->ngroups >= 0 &&
	    setgroups((size_t)saved->ngroups, saved->groups) < 0)
		return sc_fail("restore the groups after", "the workdir", errno);
	return 0;
}

/* True when the directory behind the O_PATH fd has no entries. */
static bool dir_is_empty(int pathfd)
{
	struct dirent *d;
	bool empty = true;
	DIR *dir;
	int fd;

	fd = open(sc_fd_path(pathfd).s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return false;
	}
	while (empty && (d = readdir(dir)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			empty = false;
	closedir(dir);
	return empty;
}

/*
 * The job's working directory, when the jail lacks it (or has only an empty
 * directory there) and the node has it. Everything is reached as the job's
 * user (become_job_fs): the node's directory, so that the bind shows the user
 * nothing the user could not open on the node; and the mount point in the
 * shared jail, which is made, when missing, by the user and as the user's,
 * where the user may write: never by root on the user's behalf. Where the
 * user may not, nothing is bound (Slurm starts the task in /tmp and says so).
 */
static int bind_workdir(const struct sc_options *o, int jailfd,
			const struct sc_job *job)
{
	struct sc_saved_creds saved = {.ngroups = -1};
	int in_jail, node = -1, point = -1, rc = 0;
	bool empty = true;

	if (!o->workdir || !job->workdir || job->workdir[0] != '/')
		return 0;
	if (sc_path_is_under(job->workdir, o->jail))
		return 0;
	if (sc_become_job_fs(job, &saved) < 0) {
		sc_drop_job_fs(&saved);
		return -1;
	}
	in_jail = sc_open_beneath(jailfd, job->workdir, false, SC_KIND_DIR);
	if (in_jail >= 0) {
		/* the jail's own directory wins, unless it is an empty
		 * mountpoint left by an earlier job */
		empty = dir_is_empty(in_jail);
		close(in_jail);
	}
	if (empty)
		node = open(job->workdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (node >= 0) {
		point = sc_open_beneath(jailfd, job->workdir, true,
					SC_KIND_DIR);
		if (point < 0)
			sc_debug("workdir %s: no mountpoint the user may make "
				 "in the jail: %s",
				 job->workdir, strerror(-point));
	} else if (empty) {
		sc_debug("workdir %s not reachable on the node: %m",
			 job->workdir);
	}
	if (sc_drop_job_fs(&saved) < 0)
		rc = -1;
	else if (point >= 0 && mount(sc_fd_path(node).s, sc_fd_path(point).s, NULL,
				     MS_BIND | MS_REC, NULL) < 0)
		rc = sc_fail("bind mount of the workdir onto", job->workdir,
			  errno);
	close_fd(&node);
	close_fd(&point);
	return rc;
}

/* The spool dir (batch scripts run from there after the pivot). */
int sc_bind_spool(const struct sc_options *o, const char *root, int rootfd,
		  const struct sc_job *job)
{
	char path[PATH_MAX];
	char *slash;

	if (o->spool_dir) {
		if (sc_expand_node(o->spool_dir, job->node, path,
				   sizeof(path)) < 0)
			return sc_fail("expand %n in spool_dir", o->spool_dir,
				    EINVAL);
	} else if (job->script && job->script[0] == '/') {
		/* only this job's directory, e.g. <spool>/job00042 */
		if (strlen(job->script) >= sizeof(path))
			return sc_fail("batch script", job->script, ENAMETOOLONG);
		strcpy(path, job->script);
		slash = strrchr(path, '/');
		if (slash == path)
			return 0;
		*slash = '\0';
	} else {
		return 0;
	}
	if (sc_path_is_under(path, o->jail))
		return 0;
	return sc_bind_into(root, rootfd, path, path, false, false);
}

static bool is_read_only_node_path(const char *path)
{
	for (size_t i = 0; i < sizeof(node_paths_ro) / sizeof(*node_paths_ro);
	     i++)
		if (!strcmp(path, node_paths_ro[i]))
			return true;
	return false;
}

/* See jail_caps. Fails (the task must not run) when a capability cannot be
 * dropped: slurmd then lacks CAP_SETPCAP. */
int sc_drop_jail_caps(void)
{
	struct __user_cap_header_struct head = {
		.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	size_t n = sizeof(jail_caps) / sizeof(*jail_caps);

	for (size_t i = 0; i < n; i++) {
		int cap = jail_caps[i].cap, lowered;

		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return sc_fail("drop from the bounding set:",
				    jail_caps[i].name, errno);
		/* EINVAL: a kernel without ambient capabilities */
		lowered = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0L,
				0L);
		if (lowered < 0 && errno != EINVAL)
			return sc_fail("lower the ambient", jail_caps[i].name,
				    errno);
	}
	if (syscall(SYS_capget, &head, data) < 0)
		return sc_fail("read capabilities of", "the task", errno);
	for (size_t i = 0; i < n; i++) {
		int cap = jail_caps[i].cap;
		uint32_t bit = 1u << (cap % 32);

		data[cap / 32].effective &= ~bit;
		data[cap / 32].permitted &= ~bit;
		data[cap / 32].inheritable &= ~bit;
	}
	if (syscall(SYS_capset, &head, data) < 0)
		return sc_fail("lower capabilities of", "the task", errno);
	return 0;
}

int sc_mount_node_paths(const char *root, int rootfd)
{
	if (mount_proc(root, rootfd) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(proc_ro) / sizeof(*proc_ro); i++) {
		char src[PATH_MAX];

		snprintf(src, sizeof(src), "%s%s", root, proc_ro[i]);
		if (sc_bind_into(root, rootfd, src, proc_ro[i], true, true) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(node_paths) / sizeof(*node_paths); i++)
		if (sc_bind_into(root, rootfd, node_paths[i], node_paths[i],
				 is_read_only_node_path(node_paths[i]),
				 false) < 0)
			return -1;
	return 0;
}

static int enter_root(const struct sc_options *o, int jailfd)
{
	if (fchdir(jailfd) < 0)
		return sc_fail("chdir to", o->jail, errno);
	if (o->mode == SC_MODE_CHROOT) {
		if (chroot(".") < 0)
			return sc_fail("chroot to", o->jail, errno);
	} else {
		/* new root and old root on "."; then drop the old one */
		if (syscall(SYS_pivot_root, ".", ".") < 0)
			return sc_fail("pivot_root to", o->jail, errno);
		if (umount2(".", MNT_DETACH) < 0)
			return sc_fail("detach old root under", o->jail, errno);
	}
	if (chdir("/") < 0)
		return sc_fail("chdir to / in", o->jail, errno);
	return 0;
}

int sc_jail_enter(const struct sc_options *o, const struct sc_job *job)
{
	int jailfd = -1, rc = -1;
	struct stat st;

	if (stat(o->jail, &st) < 0)
		return sc_fail("jail", o->jail, errno);
	if (!S_ISDIR(st.st_mode))
		return sc_fail("jail", o->jail, ENOTDIR);
	if (unshare(CLONE_NEWNS) < 0)
		return sc_fail("unshare mount namespace for", o->jail, errno);
	/* our mounts must not propagate back to the node */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return sc_fail("make / a recursive slave for", o->jail, errno);
	/* pivot_root needs the new root to be a mount point */
	if (mount(o->jail, o->jail, NULL, MS_BIND | MS_REC, NULL) < 0)
		return sc_fail("bind jail onto itself", o->jail, errno);
	jailfd = open(o->jail, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (jailfd < 0)
		return sc_fail("open jail", o->jail, errno);

	if (sc_mount_node_paths(o->jail, jailfd) < 0)
		goto out;
	if (sc_bind_spool(o, o->jail, jailfd, job) < 0)
		goto out;
	if (bind_workdir(o, jailfd, job) < 0)
		goto out;
	for (size_t i = 0; i < o->nbinds; i++) {
		const struct sc_bind *b = &o->binds[i];

		if (sc_bind_into(o->jail, jailfd, b->src, b->dst, b->readonly,
			      b->optional) < 0)
			goto out;
	}
	if (enter_root(o, jailfd) < 0)
		goto out;
	if (sc_drop_jail_caps() < 0)
		goto out;
	rc = 0;
out:
	close_fd(&jailfd);
	return rc;
}
