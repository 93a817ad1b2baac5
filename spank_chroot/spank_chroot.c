/*
 * spank_chroot: run the tasks of Slurm job steps inside a shared root
 * filesystem (the "jail").
 *
 * This file owns every slurm_spank_* entry point and dispatches on
 * spank_context(); the work lives in options.c and container_args.c (pure
 * parsing), fsutil.c (symlink-proof walks), jail.c (mounts and pivot_root)
 * and container.c (--container-image steps: docs/containers.md).
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

#include "container.h"
#include "container_args.h"
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

/* The container options of the job or step (srun, sbatch, salloc, and
 * slurmstepd, which gets the same values), and this step's container. */
static struct sc_container_args cargs = {.mount_home = -1, .writable = -1};
static struct sc_container container = {.nsfd = -1, .lockfd = -1};
/* The step's working directory as slurmstepd entered it (for task_init). */
static char step_cwd[PATH_MAX];

static int container_opt(int val, const char *optarg, int remote);

/* Pyxis's interface. val tells the callback which option it is. */
enum {
	OPT_IMAGE = 1,
	OPT_MOUNTS,
	OPT_WORKDIR,
	OPT_NAME,
	OPT_ENV,
	OPT_HOME,
	OPT_NO_HOME,
	OPT_WRITABLE,
	OPT_READONLY,
	OPT_NO_REMAP_ROOT,
	OPT_NO_ENTRYPOINT,
	OPT_REMAP_ROOT,
	OPT_ENTRYPOINT,
	OPT_SAVE,
};

static struct spank_option container_options[] = {
	{"container-image", "[REGISTRY/]IMAGE[:TAG][@DIGEST]",
	 "[soperator] run the step's tasks in this OCI image, as you, with "
	 "your home and the cluster's shared paths",
	 1, OPT_IMAGE, container_opt},
	{"container-mounts", "SRC:DST[:ro][,SRC:DST...]",
	 "[soperator] bind paths of the jail into the container", 1,
	 OPT_MOUNTS, container_opt},
	{"container-workdir", "PATH",
	 "[soperator] working directory inside the container", 1, OPT_WORKDIR,
	 container_opt},
	{"container-name", "NAME",
	 "[soperator] keep the container for the job's later steps on each "
	 "node (they may give only --container-name)",
	 1, OPT_NAME, container_opt},
	{"container-env", "NAME[,NAME...]",
	 "[soperator] variables whose job values beat the image's", 1,
	 OPT_ENV, container_opt},
	{"container-mount-home", NULL,
	 "[soperator] bind your home into the container (default)", 0,
	 OPT_HOME, container_opt},
	{"no-container-mount-home", NULL,
	 "[soperator] do not bind your home into the container", 0,
	 OPT_NO_HOME, container_opt},
	{"container-writable", NULL,
	 "[soperator] the container's root is writable, the writes are the "
	 "step's own (default)",
	 0, OPT_WRITABLE, container_opt},
	{"container-readonly", NULL,
	 "[soperator] the container's root is read-only", 0, OPT_READONLY,
	 container_opt},
	{"no-container-remap-root", NULL,
	 "[soperator] run as yourself in the container (always so)", 0,
	 OPT_NO_REMAP_ROOT, container_opt},
	{"no-container-entrypoint", NULL,
	 "[soperator] do not run the image's entrypoint (always so)", 0,
	 OPT_NO_ENTRYPOINT, container_opt},
	{"container-remap-root", NULL, "[soperator] not supported", 0,
	 OPT_REMAP_ROOT, container_opt},
	{"container-entrypoint", NULL, "[soperator] not supported", 0,
	 OPT_ENTRYPOINT, container_opt},
	{"container-save", "PATH", "[soperator] not supported", 1, OPT_SAVE,
	 container_opt},
	SPANK_OPTIONS_TABLE_END,
};

static int container_opt(int val, const char *optarg, int remote)
{
	char err[512] = "";
	int rc = 0;

	(void)remote;
	switch (val) {
	case OPT_IMAGE:
		rc = sc_cargs_image(&cargs, optarg, err, sizeof(err));
		break;
	case OPT_MOUNTS:
		rc = sc_cargs_mounts(&cargs, optarg, err, sizeof(err));
		break;
	case OPT_WORKDIR:
		rc = sc_cargs_workdir(&cargs, optarg, err, sizeof(err));
		break;
	case OPT_NAME:
		rc = sc_cargs_name(&cargs, optarg, err, sizeof(err));
		break;
	case OPT_ENV:
		rc = sc_cargs_env(&cargs, optarg, err, sizeof(err));
		break;
	case OPT_HOME:
	case OPT_NO_HOME:
		rc = sc_cargs_tristate(
			&cargs.mount_home, val == OPT_HOME,
			"--container-mount-home and --no-container-mount-home",
			err, sizeof(err));
		break;
	case OPT_WRITABLE:
	case OPT_READONLY:
		rc = sc_cargs_tristate(
			&cargs.writable, val == OPT_WRITABLE,
			"--container-writable and --container-readonly", err,
			sizeof(err));
		break;
	case OPT_NO_REMAP_ROOT:
	case OPT_NO_ENTRYPOINT:
		break;
	case OPT_REMAP_ROOT:
		snprintf(err, sizeof(err),
			 "--container-remap-root is not supported: container "
			 "steps run as your own uid (docs/containers.md)");
		rc = -1;
		break;
	case OPT_ENTRYPOINT:
		snprintf(err, sizeof(err),
			 "--container-entrypoint is not supported: the step "
			 "runs your command, never the image's entrypoint");
		rc = -1;
		break;
	default:
		snprintf(err, sizeof(err),
			 "--container-save is not supported: nothing of a "
			 "container is kept after its job");
		rc = -1;
	}
	if (rc < 0)
		sc_error("%s", err);
	return rc;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[512];

	if (sc_options_parse(ac, av, &options, err, sizeof(err)) == 0) {
		options_ok = true;
		/* users' container options, only where containers are on,
		 * and where options exist (not in slurmd, prolog, epilog) */
		if (options.container.cache &&
		    (spank_context() == S_CTX_LOCAL ||
		     spank_context() == S_CTX_ALLOCATOR ||
		     spank_context() == S_CTX_REMOTE))
			for (struct spank_option *opt = container_options;
			     opt->name; opt++)
				if (spank_option_register(sp, opt) !=
				    ESPANK_SUCCESS) {
					sc_error("cannot register --%s",
						 opt->name);
					return -1;
				}
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

/* What a task needs to know about the job, from Slurm. -1 (logged) when it
 * cannot be read. gids must be freed? No: Slurm owns them. */
static int read_job(spank_t sp, struct sc_job *job, char *node, int nodelen,
		    char *workdir, size_t wdlen)
{
	gid_t *gids = NULL;
	int argc = 0;
	char **argv = NULL;
	uint32_t step_id = 0;

	if (spank_get_item(sp, S_JOB_UID, &job->uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &job->gid) != ESPANK_SUCCESS) {
		sc_error("cannot read the job's uid/gid");
		return -1;
	}
	if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &job->ngids) ==
	    ESPANK_SUCCESS)
		job->gids = gids;
	else
		job->ngids = -1;
	job->node = job_getenv(sp, "SLURMD_NODENAME", node, nodelen);
	/* slurmstepd has already chdir'ed to the step's working directory
	 * (--chdir or the submit dir); $PWD is only the submitter's. */
	job->workdir = getcwd(workdir, wdlen);
	spank_get_item(sp, S_JOB_STEPID, &step_id);
	if (step_id == SLURM_BATCH_SCRIPT &&
	    spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
	    argc > 0)
		job->script = argv[0];
	return 0;
}

/*
 * srun, sbatch, salloc: the container options make sense together; and in
 * slurmstepd, once per step on the node, the step's container is prepared.
 * A failure there is kept for the tasks to report (failing here would drain
 * the node for a batch step).
 */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char node[256], workdir[PATH_MAX];
	struct sc_job job = {.ngids = -1};
	struct sc_step step = {0};

	(void)ac;
	(void)av;
	if (!options_ok || !options.container.cache)
		return 0;
	if (spank_context() == S_CTX_LOCAL ||
	    spank_context() == S_CTX_ALLOCATOR) {
		if (!cargs.image && !cargs.name && sc_cargs_any(&cargs)) {
			sc_error("container options need --container-image "
				 "(or --container-name of a container an "
				 "earlier step of the job made)");
			return -1;
		}
		return 0;
	}
	if (spank_context() != S_CTX_REMOTE || (!cargs.image && !cargs.name))
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step.step_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &step.job_id) != ESPANK_SUCCESS ||
	    !sc_step_is_jailed(step.step_id))
		return 0;
	container.wanted = true;
	if (read_job(sp, &job, node, sizeof(node), workdir, sizeof(workdir)) <
	    0) {
		snprintf(container.error, sizeof(container.error),
			 "cannot read the job from Slurm");
		return 0;
	}
	step.job = &job;
	sc_container_prepare(&options, &cargs, &step, &container);
	if (container.error[0])
		sc_error("container image %s: %s",
			 container.image[0] ? container.image : cargs.name,
			 container.error);
	return 0;
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
	if (container.wanted) {
		/* slurmstepd has chdir'ed to the step's directory: again
		 * there, as the user, in the container (task_init) */
		if (!getcwd(step_cwd, sizeof(step_cwd)))
			step_cwd[0] = '\0';
		return sc_container_enter(sp, &options, &cargs, &container);
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

/* As the user, just before exec: the container's working directory. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE || !container.wanted ||
	    container.error[0])
		return 0;
	return sc_container_chdir(&cargs, &container,
				  step_cwd[0] ? step_cwd : NULL) < 0
		       ? -1
		       : 0;
}

/* The job's end on this node (slurmd's epilog, root): its named
 * containers go. Slurm does not call slurm_spank_init there: the arguments
 * are parsed here. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	struct sc_options o;
	uint32_t job_id;
	char err[512];

	if (sc_options_parse(ac, av, &o, err, sizeof(err)) < 0)
		return 0; /* reported where it matters (srun, slurmstepd) */
	if (o.container.cache &&
	    spank_get_item(sp, S_JOB_ID, &job_id) == ESPANK_SUCCESS)
		sc_container_job_end(&o, job_id);
	sc_options_free(&o);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	sc_container_release(&container);
	sc_cargs_free(&cargs);
	sc_options_free(&options);
	options_ok = false;
	return 0;
}
