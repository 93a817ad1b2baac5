/*
 * Pure parsing of the container options a user gives srun, sbatch or salloc
 * (Pyxis's interface: --container-image, --container-mounts, ...), and of
 * image references. No Slurm, no I/O: unit-tested and fuzzed (tests/).
 */
#ifndef SPANK_CHROOT_CONTAINER_ARGS_H
#define SPANK_CHROOT_CONTAINER_ARGS_H

#include <stdbool.h>
#include <stddef.h>

/* An image reference, the registry spelled out: docker.io/library/ubuntu,
 * nvcr.io/nvidia/pytorch, registry.example.com:5000/team/app. */
struct sc_image_ref {
	char name[256];	  /* registry/path */
	char tag[129];	  /* "" when only a digest was given */
	char digest[72];  /* "sha256:<64 hex>" or "" */
};

/*
 * Parse a reference as Docker spells it ([REGISTRY/]PATH[:TAG][@DIGEST]), or
 * as enroot and Pyxis do (REGISTRY#PATH[:TAG]). A first component with a '.'
 * or ':', or "localhost", is the registry; else Docker Hub's (docker.io, and
 * docker.io/library/ for a single name). A reference with no tag and no
 * digest is ":latest". Credentials (USER@) are refused: the cluster's
 * registry Secret provides them. 0, or -1 with a one-line reason in err.
 */
int sc_image_ref_parse(const char *in, struct sc_image_ref *out, char *err,
		       size_t errlen);

/* "name[:tag][@digest]" into out. 0, or -1 when it does not fit. */
int sc_image_ref_format(const struct sc_image_ref *r, char *out,
			size_t outlen);

/*
 * Whether the image is from one of prefixes ("registry.example.com",
 * "registry.example.com/hpc"): its name equals one or is below it at a path
 * boundary. No prefixes: any registry.
 */
bool sc_image_ref_allowed(const struct sc_image_ref *r,
			  char *const *prefixes, size_t n);

struct sc_mount {
	char *src; /* absolute path in the jail */
	char *dst; /* absolute path in the container, never "/" */
	bool readonly;
};

/* What the user asked for. Tri-states: -1 not given, 0 no, 1 yes. */
struct sc_container_args {
	char *image; /* as given */
	struct sc_image_ref ref;
	struct sc_mount *mounts;
	size_t nmounts;
	char *workdir;
	char *name;
	char **env;  /* names whose job value beats the image's */
	size_t nenv;
	int mount_home;
	int writable;
};

#define SC_MAX_CONTAINER_MOUNTS 64
#define SC_MAX_CONTAINER_ENV 128
#define SC_MAX_CONTAINER_NAME 64

/*
 * Each sets one option from its argument and returns 0, or -1 with a reason
 * in err. Slurm may call an option's callback twice with the same value: the
 * same value again is fine, another one is an error.
 */
int sc_cargs_image(struct sc_container_args *a, const char *v, char *err,
		   size_t errlen);
/* SRC[:DST[:FLAGS]][,...]; FLAGS joined by '+': ro, rw, rbind, rprivate. */
int sc_cargs_mounts(struct sc_container_args *a, const char *v, char *err,
		    size_t errlen);
int sc_cargs_workdir(struct sc_container_args *a, const char *v, char *err,
		     size_t errlen);
/* NAME or NAME:auto (Pyxis's default flag; its others are refused). */
int sc_cargs_name(struct sc_container_args *a, const char *v, char *err,
		  size_t errlen);
/* NAME[,NAME...] */
int sc_cargs_env(struct sc_container_args *a, const char *v, char *err,
		 size_t errlen);
/* --container-mount-home (1) / --no-container-mount-home (0); what names
 * both options for the error when both were given. */
int sc_cargs_tristate(int *field, int val, const char *what, char *err,
		      size_t errlen);

/* Whether the job's value of variable name beats the image's. */
bool sc_cargs_env_kept(const struct sc_container_args *a, const char *name);
/* Whether any option but the image asks for a container. */
bool sc_cargs_any(const struct sc_container_args *a);
void sc_cargs_free(struct sc_container_args *a);

/*
 * The SlurmUser slurm.conf's text names (a Slurm client in a container checks
 * that this user exists there), into out: the last one given, else "root",
 * Slurm's default. As Slurm reads the file: keys in any case, several
 * KEY=VALUE on a line, spaces around '=', a value in double quotes, '#' to
 * the end of the line a comment. Included files are not read. 0, or -1 when
 * the value is empty or does not fit.
 */
int sc_slurm_conf_user(const char *conf, char *out, size_t outlen);

/* "50G", "512M", "1048576" into bytes; 0, or -1. */
int sc_parse_size(const char *in, unsigned long long *out);

#endif
