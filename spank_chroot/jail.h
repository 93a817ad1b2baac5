/* Moving the calling task into the jail (remote context only). */
#ifndef SPANK_CHROOT_JAIL_H
#define SPANK_CHROOT_JAIL_H

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

#endif
