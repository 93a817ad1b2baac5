/*
 * Pure decisions of spank_chroot: plugstack.conf arguments into a struct,
 * which steps are jailed, %n expansion. No Slurm, no I/O: unit-tested and
 * fuzzed without a cluster (tests/).
 */
#ifndef SPANK_CHROOT_OPTIONS_H
#define SPANK_CHROOT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sc_mode {
	SC_MODE_PIVOT = 0, /* pivot_root + detach the old root (default) */
	SC_MODE_CHROOT,	   /* chroot(2): where pivot_root is not allowed */
};

struct sc_bind {
	char *src;     /* absolute path on the node */
	char *dst;     /* absolute path inside the jail */
	bool readonly; /* remount read-only after binding */
	bool optional; /* skip silently when src does not exist */
};

/* Container jobs (--container-image): off unless container_cache= is set. */
struct sc_container_options {
	char *cache;		       /* the node's image cache directory */
	unsigned long long cache_size; /* its limit, bytes */
	char **registries;	       /* allowed prefixes; none: any */
	size_t nregistries;
	char *auth;		       /* registry credentials (auth.json) */
	char *helper;		       /* soperator-images */
	unsigned int owner;	       /* the cache's uid and gid */
	struct sc_bind *binds;	       /* node paths in every container */
	size_t nbinds;
	char *driver;	  /* the node's GPU driver directory (lib/, bin/) */
	char *slurm_conf; /* the node's directory with slurm.conf */
};

#define SC_CONTAINER_CACHE_SIZE_DEFAULT (50ULL << 30)
#define SC_CONTAINER_OWNER_DEFAULT 64031u
#define SC_CONTAINER_HELPER_DEFAULT "/usr/local/sbin/soperator-images"
#define SC_CONTAINER_SLURM_CONF_DEFAULT "/etc/slurm"

struct sc_options {
	char *jail; /* absolute, normalised; required */
	enum sc_mode mode;
	struct sc_bind *binds;
	size_t nbinds;
	char *spool_dir; /* SlurmdSpoolDir to bind, %n = node name; NULL: the
			    batch script's own directory only */
	bool workdir;	 /* bind the job's working directory when missing */
	struct sc_container_options container;
};

/*
 * Parse plugstack.conf arguments ("key=value" words). On success fill *out
 * (free it with sc_options_free) and return 0. On error return -1, leave *out
 * empty and write a one-line reason into err.
 */
int sc_options_parse(int argc, char *const argv[], struct sc_options *out,
		     char *err, size_t errlen);
void sc_options_free(struct sc_options *o);

/*
 * Copy an absolute path into out, collapsing repeated and trailing slashes.
 * Rejects relative paths, "." and ".." components, control characters and
 * paths that do not fit. Returns 0 or -1.
 */
int sc_path_normalize(const char *in, char *out, size_t outlen);

/* Replace each "%n" in tmpl by node and "%%" by "%". Returns 0 or -1. */
int sc_expand_node(const char *tmpl, const char *node, char *out,
		   size_t outlen);

/*
 * Step ids as in slurm.h (checked there with static asserts in
 * spank_chroot.c). Normal, batch and interactive steps are jailed; the extern
 * step (PrologFlags=Contain) and any other special step are not.
 */
#define SC_MAX_NORMAL_STEP_ID 0xfffffff0u
#define SC_STEP_PENDING 0xfffffffdu
#define SC_STEP_EXTERN 0xfffffffcu
#define SC_STEP_BATCH 0xfffffffbu
#define SC_STEP_INTERACTIVE 0xfffffffau
bool sc_step_is_jailed(uint32_t step_id);

/* "/a/b" is "/a" or below it. Both normalised. */
bool sc_path_is_under(const char *path, const char *dir);

/* A parser's one-line reason into err (nothing when err is NULL or empty):
 * for options.c and container_args.c. */
void sc_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
