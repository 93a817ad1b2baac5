/*
 * Container steps (--container-image): the step's tasks run in an OCI image's
 * root instead of the jail, as the job's user, with the jail's homes and
 * sub-mounts in it. See docs/containers.md.
 *
 * Per step and node, in slurmstepd (root), sc_container_prepare has the image
 * pulled and unpacked into the node's cache by soperator-images (run as the
 * cache's unprivileged owner), then builds the container once: a mount
 * namespace whose root is an overlay (the cached image, read-only and shown as
 * the job user's, under a tmpfs the step writes) with the node paths, the
 * jail's paths and the user's mounts bound in. Every task of the step joins
 * it (sc_container_enter). A named container's namespace is kept for the
 * job's later steps and released by the job's epilog.
 *
 * Preparation never fails the step where Slurm would drain the node for it
 * (a batch step's init): it records the error, and each task reports it and
 * fails.
 */
#ifndef SPANK_CHROOT_CONTAINER_H
#define SPANK_CHROOT_CONTAINER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <slurm/spank.h>

#include "container_args.h"
#include "jail.h"
#include "options.h"

/* Where every container shows the node's /usr, for the Slurm clients. */
#define SC_CONTAINER_NODE_USR "/.soperator/usr"
/* ... and the node's directory with slurm.conf. */
#define SC_CONTAINER_SLURM_CONF "/.soperator/slurm-conf"

struct sc_container {
	bool wanted;		  /* the step asked for a container */
	char error[1024];	  /* preparation failed: why */
	int nsfd;		  /* the container's mount namespace */
	int lockfd;		  /* shared lock on its image */
	char image[600];	  /* the reference, normalised */
	char digest[72];	  /* the image's digest */
	char workdir[PATH_MAX];	  /* the image's WorkingDir, or "" */
	char **env;		  /* the image's variables, K=V */
	size_t nenv;
	bool pulled;		  /* this step pulled it (not cached) */
	unsigned long long root_dev; /* the container's "/", which a task */
	unsigned long long root_ino; /* must find after joining */
};

/* The step's ids and the user, read from Slurm by the caller. */
struct sc_step {
	uint32_t job_id;
	uint32_t step_id;
	const struct sc_job *job;
};

/* Prepare the step's container (see above); c->error on failure. */
void sc_container_prepare(const struct sc_options *o,
			  const struct sc_container_args *a,
			  const struct sc_step *step, struct sc_container *c);

/*
 * In a task, as root: join the container, drop what only entering needed
 * (as the jail does) and set no_new_privs, and give the task the image's
 * environment. -1 (logged) when the task must not run.
 */
int sc_container_enter(spank_t sp, const struct sc_options *o,
		       const struct sc_container_args *a,
		       struct sc_container *c);

/* In a task, as the user, just before exec: the working directory. */
int sc_container_chdir(const struct sc_container_args *a,
		       const struct sc_container *c, const char *step_cwd);

/* slurmstepd's end of the step: the namespace and the image lock. */
void sc_container_release(struct sc_container *c);

/* The job's epilog: its named containers go. */
void sc_container_job_end(const struct sc_options *o, uint32_t job_id);

#endif
