/*
 * A mount namespace numbered above its creator's, so that the creator can
 * keep it by bind mounting its namespace file. No Slurm here: tested in
 * tests/test_nsid.c (as root; skipped without the right to unshare).
 */
#ifndef SPANK_CHROOT_NSID_H
#define SPANK_CHROOT_NSID_H

#include <stdint.h>

/* The id of this thread's namespace ns ("mnt", "uts"); 0: not known (a
 * kernel without nsfs's id ioctls). */
uint64_t sc_ns_id(const char *ns);

/*
 * unshare(CLONE_NEWNS) into a mount namespace whose id is above the one this
 * thread is in now. The kernel refuses to bind mount a mount namespace's file
 * (EINVAL) where the binder's own mount namespace has the same or a higher id:
 * its guard against namespaces that hold each other. Linux 6.18 hands
 * namespace ids out of per-CPU batches, so a namespace made now on one CPU can
 * be numbered below one made earlier on another, and such a bind failed at
 * random. Ids from one CPU only grow, and a batch taken later is above every
 * batch taken before: so this pins the thread to its CPU and, while the new
 * namespace is numbered too low, uses that CPU's batch up with throwaway UTS
 * namespaces (a few microseconds each; a batch is 4096 ids) and makes the
 * mount namespace again. Kernels that number namespaces from one counter
 * never take that path. Leaves the thread pinned, and (where it took that
 * path) in a new UTS namespace: for a short-lived child.
 * Returns 0, or -1 with errno set and *what naming the step that failed
 * (EOVERFLOW: the kernel still numbered the namespace no higher).
 */
int sc_unshare_mount_ns_above(const char **what);

#endif
