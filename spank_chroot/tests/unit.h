/* A tiny test harness: CHECK records a failure and goes on; the runner prints
 * "N passed, N failed" and exits non-zero on any failure. */
#ifndef SPANK_CHROOT_UNIT_H
#define SPANK_CHROOT_UNIT_H

#include <stdio.h>

extern int unit_failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			unit_failures++;                                       \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
		}                                                              \
	} while (0)

struct unit_test {
	const char *name;
	void (*fn)(void);
};

extern const struct unit_test options_tests[];
extern const struct unit_test fsutil_tests[];
extern const struct unit_test container_args_tests[];
extern const struct unit_test nsid_tests[];

#endif
