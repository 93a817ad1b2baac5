/* Moving the calling task into the jail (remote context only). */
#ifndef SPANK_CHROOT_JAIL_H
#define SPANK_CHROOT_JAIL_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "options.h"

/* What the jail needs to know about the job, read from Slurm by the caller. */
struct sc_job {
	uid_t uid;
	gid_t gid;
	const gid_t *gids; /* supplementary groups, for the workdir check */
	int ngids;
	const char *node;    /* SLURMD_NODENAME, for spool_dir's %n */
	const char *workdir; /* the step's working directory, or NULL */
	const char *script;  /* the batch script's path, or NULL */
};

/*
 * Unshare the mount namespace, bind the node-local paths into the jail and
 * pivot (or chroot) into it. Logs the failing path and errno and returns -1
 * on any error: the caller must then stop the task.
 */
int sc_jail_enter(const struct sc_options *o, const struct sc_job *job);

/* Shared with container.c, which builds a container's root the same way. */

/* Log "<what> <path>: <strerror> (<ENAME>)" and return -1. The message is
 * also kept in sc_last_error (log.h's sc_log_quiet: only kept). */
int sc_fail(const char *what, const char *path, int err);
extern char sc_last_error[512];

struct sc_fdpath {
	char s[32];
};
/* "/proc/self/fd/N": names exactly the object behind fd, for mount(2). */
struct sc_fdpath sc_fd_path(int fd);

/* Remount read-only the mount behind fd and every mount below it. */
int sc_make_readonly(int fd, const char *shown);

/* Bind src (a node path) onto dst below root (rootfd), making the mount
 * point as the kind of src when missing, never following a symlink in root. */
int sc_bind_into(const char *root, int rootfd, const char *src,
		 const char *dst, bool readonly, bool optional);

/* A fresh /proc (its tunables read-only) and the node's /dev, /sys (ro),
 * /tmp and /run (ro) below root. */
int sc_mount_node_paths(const char *root, int rootfd);

/* The batch script's directory (or spool_dir=) below root. */
int sc_bind_spool(const struct sc_options *o, const char *root, int rootfd,
		  const struct sc_job *job);

/* File system access as the job's uid, gid and groups, and back. */
struct sc_saved_creds {
	gid_t groups[NGROUPS_MAX];
	int ngroups;
};
int sc_become_job_fs(const struct sc_job *job, struct sc_saved_creds *saved);
int sc_drop_job_fs(const struct sc_saved_creds *saved);

/* Drop CAP_SYS_ADMIN, CAP_SYS_CHROOT, then CAP_SETPCAP from every set. */
int sc_drop_jail_caps(void);

#endif
