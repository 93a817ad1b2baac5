/*
 * The new mount API (open_tree, move_mount, mount_setattr) and openat2, for
 * C libraries and kernel headers that do not have them yet: the syscall
 * numbers, flags and argument structs, each only where the system's headers
 * lack it. Include after <fcntl.h> and <sys/mount.h>. Used by the plugin
 * (container.c) and soperator-bind-beneath (bind_beneath.c).
 */
#ifndef SPANK_CHROOT_MOUNT_API_H
#define SPANK_CHROOT_MOUNT_API_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif
#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif

/* struct mount_attr of <linux/mount.h> (which clashes with <sys/mount.h>) */
struct sc_mount_attr {
	uint64_t attr_set;
	uint64_t attr_clr;
	uint64_t propagation;
	uint64_t userns_fd;
};

/* struct open_how of <linux/openat2.h> */
struct sc_open_how {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};

#endif
