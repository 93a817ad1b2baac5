/*
 * spank_chroot: run the tasks of Slurm job steps inside a shared root
 * filesystem (the "jail").
 *
 * This file owns every slurm_spank_* entry point and dispatches on
 * spank_context(); the work lives in options.c (pure parsing), fsutil.c
 * (symlink-proof walks) and jail.c (mounts and pivot_root).
 *
 * Fail closed: in slurmstepd a negative return stops the task. ESPANK_ERROR
 * is positive and does NOT stop it, so every failure here returns -1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "jail.h"
#include "log.h"
#include "options.h"

SPANK_PLUGIN(spank_chroot, 1);

_Static_assert(SC_MAX_NORMAL_STEP_ID == SLURM_MAX_NORMAL_STEP_ID, "step ids");
_Static_assert(SC_STEP_PENDING == SLURM_PENDING_STEP, "step ids");
_Static_assert(SC_STEP_EXTERN == SLURM_EXTERN_CONT, "step ids");
_Static_assert(SC_STEP_BATCH == SLURM_BATCH_SCRIPT, "step ids");
_Static_assert(SC_STEP_INTERACTIVE == SLURM_INTERACTIVE_STEP, "step ids");

/* Parsed once per process by slurm_spank_init, freed by slurm_spank_exit. */
static struct sc_options options;
static bool options_ok;

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[512];

	(void)sp;
	if (sc_options_parse(ac, av, &options, err, sizeof(err)) == 0) {
		options_ok = true;
		return 0;
	}
	sc_error("invalid plugstack.conf arguments: %s", err);
	switch (spank_context()) {
	case S_CTX_LOCAL:     /* srun: refuse before anything runs */
	case S_CTX_ALLOCATOR: /* salloc, sbatch */
	case S_CTX_REMOTE:    /* slurmstepd: the step fails */
		return -1;
	default:
		/* slurmd and its prolog/epilog: failing there would take the
		 * whole node out of service; steps still fail above. */
		return 0;
	}
}

/* The environment variable name from the job, or NULL (buf holds it). */
static const char *job_getenv(spank_t sp, const char *name, char *buf, int len)
{
	return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS ? buf : NULL;
}

/* "batch", "extern", ... or the number, for log lines. */
static const char *step_name(uint32_t step_id, char buf[16])
{
	switch (step_id) {
	case SLURM_BATCH_SCRIPT:
		return "batch";
	case SLURM_EXTERN_CONT:
		return "extern";
	case SLURM_INTERACTIVE_STEP:
		return "interactive";
	case SLURM_PENDING_STEP:
		return "pending";
	default:
		snprintf(buf, 16, "%u", step_id);
		return buf;
	}
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	char node[256], workdir[PATH_MAX], name[16];
	struct sc_job job = {.ngids = -1};
	struct timespec start, end;
	uint32_t step_id;
	int argc = 0;
	char **argv = NULL;
	gid_t *gids = NULL;

	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (!options_ok)
		return -1; /* already reported by slurm_spank_init */
	if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
		sc_error("cannot read the step id");
		return -1;
	}
	if (!sc_step_is_jailed(step_id)) {
		sc_debug("%s step is not jailed", step_name(step_id, name));
		return 0;
	}
	if (spank_get_item(sp, S_JOB_UID, &job.uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &job.gid) != ESPANK_SUCCESS) {
		sc_error("cannot read the job's uid/gid");
		return -1;
	}
	if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &job.ngids) ==
	    ESPANK_SUCCESS)
		job.gids = gids;
	else
		job.ngids = -1;
	job.node = job_getenv(sp, "SLURMD_NODENAME", node, sizeof(node));
	/* slurmstepd has already chdir'ed to the step's working directory
	 * (--chdir or the submit dir); $PWD is only the submitter's. */
	job.workdir = getcwd(workdir, sizeof(workdir));
	if (step_id == SLURM_BATCH_SCRIPT &&
	    spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
	    argc > 0)
		job.script = argv[0];

	clock_gettime(CLOCK_MONOTONIC, &start);
	if (sc_jail_enter(&options, &job) < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &end);
	sc_debug("%s step entered %s in %ld us", step_name(step_id, name),
		 options.jail,
		 (long)((end.tv_sec - start.tv_sec) * 1000000L +
			(end.tv_nsec - start.tv_nsec) / 1000));
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	sc_options_free(&options);
	options_ok = false;
	return 0;
}
