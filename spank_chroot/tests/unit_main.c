/* Runs every test table; one line per test, then the totals. */
#include <stdio.h>

#include "unit.h"

int unit_failures;

int main(void)
{
	const struct unit_test *tables[] = {options_tests, fsutil_tests,
					    container_args_tests, nsid_tests};
	int passed = 0, failed = 0;

	for (size_t t = 0; t < sizeof(tables) / sizeof(*tables); t++) {
		for (const struct unit_test *u = tables[t]; u->name; u++) {
			int before = unit_failures;

			u->fn();
			if (unit_failures == before) {
				passed++;
				printf("ok   %s\n", u->name);
			} else {
				failed++;
				printf("FAIL %s\n", u->name);
			}
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
