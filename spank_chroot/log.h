/* Every line spank_chroot logs starts with its name, through Slurm's logger
 * (slurmd's log, and the job's stderr for errors in the task). */
#ifndef SPANK_CHROOT_LOG_H
#define SPANK_CHROOT_LOG_H

#include <slurm/spank.h>

#define SC_LOG_PREFIX "spank_chroot: "
#define sc_error(fmt, ...) slurm_error(SC_LOG_PREFIX fmt, ##__VA_ARGS__)
#define sc_verbose(fmt, ...) slurm_verbose(SC_LOG_PREFIX fmt, ##__VA_ARGS__)
#define sc_debug(fmt, ...) slurm_debug(SC_LOG_PREFIX fmt, ##__VA_ARGS__)

#endif
