/*
 * soperator-slurm-client: the node's Slurm clients (srun, sbatch, squeue, ...)
 * inside a container step, whatever the image's C library.
 *
 * Every container shows the node's /usr read-only at /.soperator/usr
 * (container.c). This static program is installed there under the name of
 * each client (links to it), and execs the node's program with the node's
 * dynamic loader and libraries:
 *
 *   <prefix><loader> --argv0 srun --library-path <prefix><libs>
 *       <prefix>/usr/bin/srun ARGS...
 *
 * so a srun in a batch script that runs in an image launches steps as it
 * would in the jail. SLURM_CONF, when the job's is not readable here, is the
 * node's configuration the container shows (SC_CONTAINER_SLURM_CONF). Only
 * names of the node's Slurm clients are run: any other name fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SC_LOADER
#define SC_LOADER "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
#endif
#ifndef SC_LIBDIR
#define SC_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif
#ifndef SC_SLURM_PLUGIN_DIR
#define SC_SLURM_PLUGIN_DIR "/usr/lib/x86_64-linux-gnu/slurm-wlm"
#endif
#define PREFIX "/.soperator"
#define SLURM_CONF PREFIX "/slurm-conf/slurm.conf"

static const char *const clients[] = {
	"srun",	  "sbatch",   "salloc", "scancel", "squeue", "sinfo",
	"scontrol", "sacct", "sstat",  "sattach", "sprio",  "sshare",
	"sacctmgr", "sdiag", "sbcast", "strigger", "sreport", NULL,
};

int main(int argc, char **argv)
{
	const char *name = argv[0] ? strrchr(argv[0], '/') : NULL;
	const char *conf = getenv("SLURM_CONF");
	char program[256], libs[1024];
	char **args;
	int n = 0;

	name = name ? name + 1 : (argv[0] ? argv[0] : "");
	for (n = 0; clients[n]; n++)
		if (strcmp(clients[n], name) == 0)
			break;
	if (!clients[n]) {
		fprintf(stderr,
			"soperator-slurm-client: %s is not a Slurm client\n",
			name);
		return 127;
	}
	snprintf(program, sizeof(program), PREFIX "/usr/bin/%s", name);
	snprintf(libs, sizeof(libs), PREFIX "%s:" PREFIX "%s", SC_LIBDIR,
		 SC_SLURM_PLUGIN_DIR);
	if ((!conf || access(conf, R_OK) != 0) &&
	    access(SLURM_CONF, R_OK) == 0)
		setenv("SLURM_CONF", SLURM_CONF, 1);
	args = calloc((size_t)argc + 7, sizeof(*args));
	if (!args)
		return 127;
	n = 0;
	args[n++] = (char *)name;
	args[n++] = (char *)"--argv0";
	args[n++] = (char *)name;
	args[n++] = (char *)"--library-path";
	args[n++] = libs;
	args[n++] = program;
	for (int i = 1; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execv(PREFIX SC_LOADER, args);
	fprintf(stderr, "soperator-slurm-client: %s: %s\n", PREFIX SC_LOADER,
		strerror(errno));
	return 127;
}
