/* Every line spank_chroot logs starts with its name, through Slurm's logger
 * (slurmd's log, and the job's stderr for errors in the task). */
#ifndef SPANK_CHROOT_LOG_H
#define SPANK_CHROOT_LOG_H

#include <slurm/spank.h>

#include <stdbool.h>

/* Set in a child forked from slurmstepd that must not log (another thread
 * may have held the logger's lock at the fork): nothing is logged. */
extern bool sc_log_quiet;

#define SC_LOG_PREFIX "spank_chroot: "
#define SC_LOG(fn, fmt, ...)                                                   \
	do {                                                                   \
		if (!sc_log_quiet)                                             \
			fn(SC_LOG_PREFIX fmt, ##__VA_ARGS__);                  \
	} while (0)
#define sc_error(fmt, ...) SC_LOG(slurm_error, fmt, ##__VA_ARGS__)
#define sc_info(fmt, ...) SC_LOG(slurm_info, fmt, ##__VA_ARGS__)
#define sc_verbose(fmt, ...) SC_LOG(slurm_verbose, fmt, ##__VA_ARGS__)
#define sc_debug(fmt, ...) SC_LOG(slurm_debug, fmt, ##__VA_ARGS__)

#endif
