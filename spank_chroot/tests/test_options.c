/* Unit tests of options.c: plugstack arguments, paths, step ids. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "unit.h"

#define MAXARGS 8

struct parse_case {
	const char *args[MAXARGS]; /* NULL-terminated */
	const char *err; /* NULL: must parse; else part of the error */
};

static const struct parse_case parse_cases[] = {
	{{"jail=/mnt/jail"}, NULL},
	{{"jail=/mnt/jail/", "mode=chroot"}, NULL},
	{{"mode=pivot", "jail=/j"}, NULL},
	{{"jail=/j", "bind=/a", "bind=/b:/c:ro,/d::optional"}, NULL},
	{{"jail=/j", "spool_dir=/var/spool/slurmd/%n", "workdir=no"}, NULL},
	{{0}, "jail=/path is required"},
	{{"mode=pivot"}, "jail=/path is required"},
	{{"jail=/j", "foo=bar"}, "unknown argument \"foo\""},
	{{"jail=/j", "jails=/x"}, "unknown argument \"jails\""},
	{{"jail"}, "not key=value"},
	{{"=x"}, "not key=value"},
	{{"jail="}, "empty value"},
	{{"jail=relative"}, "absolute"},
	{{"jail=/"}, "other than /"},
	{{"jail=/a/../b"}, "without . or .."},
	{{"jail=/a/./b"}, "without . or .."},
	{{"jail=/a", "jail=/b"}, "more than once"},
	{{"jail=/a", "mode=container"}, "expected pivot or chroot"},
	{{"jail=/a", "mode=chroot", "mode=pivot"}, "more than once"},
	{{"jail=/a", "bind=rel"}, "must be absolute"},
	{{"jail=/a", "bind=/x:/"}, "onto the jail's /"},
	{{"jail=/a", "bind=/x:/y:rw+nope"}, "bad flags"},
	{{"jail=/a", "bind=/x:/y:"}, "bad flags"},
	{{"jail=/a", "workdir=maybe"}, "expected yes or no"},
	{{"jail=/a", "spool_dir=spool"}, "absolute"},
	{{"jail=/a\n/b"}, "absolute"},
};

static int count_args(const char *const *args)
{
	int n = 0;

	while (n < MAXARGS && args[n])
		n++;
	return n;
}

static void test_parse_table(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(*parse_cases);
	     i++) {
		const struct parse_case *c = &parse_cases[i];
		struct sc_options o;
		char err[256];
		int rc = sc_options_parse(count_args(c->args),
					  (char *const *)c->args, &o, err,
					  sizeof(err));

		if (!c->err) {
			CHECK(rc == 0);
			if (rc != 0)
				fprintf(stderr, "  case %zu: %s\n", i, err);
		} else {
			CHECK(rc == -1);
			CHECK(strstr(err, c->err) != NULL);
			if (!strstr(err, c->err))
				fprintf(stderr, "  case %zu: got \"%s\"\n", i,
					err);
			CHECK(o.jail == NULL && o.binds == NULL);
		}
		sc_options_free(&o);
	}
}

static void test_parse_values(void)
{
	char *const args[] = {"jail=//mnt//jail/", "mode=chroot",
			      "bind=/a,/b:/c:ro,/d:/e:optional+ro",
			      "bind=/f::rw", "spool_dir=/s/%n"};
	struct sc_options o;
	char err[256];

	CHECK(sc_options_parse(5, args, &o, err, sizeof(err)) == 0);
	CHECK(strcmp(o.jail, "/mnt/jail") == 0);
	CHECK(o.mode == SC_MODE_CHROOT);
	CHECK(o.workdir == true);
	CHECK(strcmp(o.spool_dir, "/s/%n") == 0);
	CHECK(o.nbinds == 4);
	if (o.nbinds == 4) {
		CHECK(!strcmp(o.binds[0].src, "/a") &&
		      !strcmp(o.binds[0].dst, "/a"));
		CHECK(!o.binds[0].readonly && !o.binds[0].optional);
		CHECK(!strcmp(o.binds[1].src, "/b") &&
		      !strcmp(o.binds[1].dst, "/c"));
		CHECK(o.binds[1].readonly && !o.binds[1].optional);
		CHECK(o.binds[2].readonly && o.binds[2].optional);
		CHECK(!strcmp(o.binds[3].dst, "/f") && !o.binds[3].readonly);
	}
	sc_options_free(&o);
	CHECK(o.jail == NULL && o.nbinds == 0);
	sc_options_free(&o); /* twice is harmless */
}

static void test_defaults(void)
{
	char *const args[] = {"jail=/j"};
	struct sc_options o;

	CHECK(sc_options_parse(1, args, &o, NULL, 0) == 0);
	CHECK(o.mode == SC_MODE_PIVOT);
	CHECK(o.workdir);
	CHECK(o.spool_dir == NULL && o.nbinds == 0);
	sc_options_free(&o);
}

static void test_normalize(void)
{
	char out[16];

	CHECK(sc_path_normalize("/", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/"));
	CHECK(sc_path_normalize("///", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/"));
	CHECK(sc_path_normalize("/a//b/", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/a/b"));
	CHECK(sc_path_normalize("/..a/b.", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/..a/b."));
	CHECK(sc_path_normalize("a", out, sizeof(out)) == -1);
	CHECK(sc_path_normalize("", out, sizeof(out)) == -1);
	CHECK(sc_path_normalize("/a/..", out, sizeof(out)) == -1);
	CHECK(sc_path_normalize("/a\tb", out, sizeof(out)) == -1);
	/* exactly fits: "/" + 13 chars + NUL = 15 */
	CHECK(sc_path_normalize("/abcdefghijklm", out, sizeof(out)) == 0);
	CHECK(sc_path_normalize("/abcdefghijklmn", out, sizeof(out)) == 0);
	CHECK(sc_path_normalize("/abcdefghijklmno", out, sizeof(out)) == -1);
	CHECK(sc_path_normalize("/a", out, 1) == -1);
}

static void test_expand_node(void)
{
	char out[32];

	CHECK(sc_expand_node("/s/%n/x", "n1", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/s/n1/x"));
	CHECK(sc_expand_node("/s/%%n", "n1", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/s/%n"));
	CHECK(sc_expand_node("/s/%x%", "n1", out, sizeof(out)) == 0 &&
	      !strcmp(out, "/s/%x%"));
	CHECK(sc_expand_node("/s/%n", NULL, out, sizeof(out)) == -1);
	CHECK(sc_expand_node("/s/%n", "", out, sizeof(out)) == -1);
	CHECK(sc_expand_node("/plain", NULL, out, sizeof(out)) == 0);
	CHECK(sc_expand_node("/%n%n%n%n", "abcdefgh", out, sizeof(out)) == -1);
}

static void test_step_ids(void)
{
	CHECK(sc_step_is_jailed(0));
	CHECK(sc_step_is_jailed(12345));
	CHECK(sc_step_is_jailed(SC_MAX_NORMAL_STEP_ID - 1));
	CHECK(sc_step_is_jailed(SC_STEP_BATCH));
	CHECK(sc_step_is_jailed(SC_STEP_INTERACTIVE));
	CHECK(!sc_step_is_jailed(SC_STEP_EXTERN));
	CHECK(!sc_step_is_jailed(SC_STEP_PENDING));
	CHECK(!sc_step_is_jailed(SC_MAX_NORMAL_STEP_ID));
	CHECK(!sc_step_is_jailed(0xfffffffeu));
	CHECK(!sc_step_is_jailed(0xffffffffu));
}

static void test_is_under(void)
{
	CHECK(sc_path_is_under("/a/b", "/a"));
	CHECK(sc_path_is_under("/a", "/a"));
	CHECK(!sc_path_is_under("/ab", "/a"));
	CHECK(sc_path_is_under("/x", "/"));
}

/* Deterministic garbage: the parser must never crash or leak (see asan). */
static void test_garbage(void)
{
	static const char alphabet[] = "jailmodebind=/:,.+%rwoptn\x01 ";
	uint32_t seed = 12345;

	for (int round = 0; round < 3000; round++) {
		char bufs[4][24];
		char *args[4];
		struct sc_options o;
		int argc = (int)(seed % 5);

		for (int a = 0; a < 4; a++) {
			size_t len;

			seed = seed * 1103515245u + 12345u;
			len = (seed >> 16) % sizeof(bufs[a]);
			for (size_t k = 0; k < len; k++) {
				seed = seed * 1103515245u + 12345u;
				bufs[a][k] = alphabet[(seed >> 16) %
						      (sizeof(alphabet) - 1)];
			}
			bufs[a][len] = '\0';
			if (round % 3 == 0 && a == 0)
				memcpy(bufs[a], "jail=/j", 8);
			args[a] = bufs[a];
		}
		if (sc_options_parse(argc, args, &o, NULL, 0) == 0)
			CHECK(o.jail && o.jail[0] == '/');
		sc_options_free(&o);
	}
}

const struct unit_test options_tests[] = {
	{"options: parse table", test_parse_table},
	{"options: parsed values", test_parse_values},
	{"options: defaults", test_defaults},
	{"options: path normalisation", test_normalize},
	{"options: %n expansion", test_expand_node},
	{"options: jailed step ids", test_step_ids},
	{"options: path under dir", test_is_under},
	{"options: garbage input", test_garbage},
	{NULL, NULL},
};
