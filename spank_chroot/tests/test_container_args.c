/* Unit tests of container_args.c and options.c's container_* arguments. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "container_args.h"
#include "options.h"
#include "unit.h"

struct ref_case {
	const char *in;
	const char *name;   /* NULL: must be refused */
	const char *tag;
	const char *digest; /* or the error's part when refused */
};

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const struct ref_case ref_cases[] = {
	{"ubuntu", "docker.io/library/ubuntu", "latest", ""},
	{"ubuntu:22.04", "docker.io/library/ubuntu", "22.04", ""},
	{"nvidia/cuda:12.4.1-base", "docker.io/nvidia/cuda", "12.4.1-base", ""},
	{"nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch",
	 "24.01-py3", ""},
	/* enroot's and Pyxis's REGISTRY#IMAGE */
	{"nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch",
	 "24.01-py3", ""},
	{"localhost/app", "localhost/app", "latest", ""},
	{"127.0.0.1:5000/team/app:1", "127.0.0.1:5000/team/app", "1", ""},
	{"Registry.Example.COM/team/app", "registry.example.com/team/app",
	 "latest", ""},
	{"ubuntu@sha256:" D64, "docker.io/library/ubuntu", "", "sha256:" D64},
	{"reg.io/a/b:t@sha256:" D64, "reg.io/a/b", "t", "sha256:" D64},
	{"a__b/c-d.e_f", "docker.io/a__b/c-d.e_f", "latest", ""},
	/* refused */
	{"", NULL, NULL, "empty"},
	{"alice@reg.io#img", NULL, NULL, "credentials"},
	{"alice:pw@reg.io/img", NULL, NULL, "credentials"},
	{"ubuntu@sha256:abc", NULL, NULL, "bad digest"},
	{"ubuntu@sha256:" D64 "@sha256:" D64, NULL, NULL, "credentials"},
	{"Ubuntu", NULL, NULL, "bad image name"},
	{"reg.io/Team/app", NULL, NULL, "bad image name"},
	{"reg.io//app", NULL, NULL, "bad image name"},
	{"reg.io/app/", NULL, NULL, "bad image name"},
	{"reg.io/-app", NULL, NULL, "bad image name"},
	{"reg.io/a..b", NULL, NULL, "bad image name"},
	{"ubuntu:", NULL, NULL, "bad tag"},
	{"ubuntu:.x", NULL, NULL, "bad tag"},
	{"ubuntu:a b", NULL, NULL, "space"},
	{"reg_io#app", NULL, NULL, "bad registry"},
	{"reg.io:99999999/app", NULL, NULL, "bad registry"},
	{"-reg.io/app", NULL, NULL, "bad registry"},
	{"a#b#c", NULL, NULL, "bad registry"},
	{"reg.io/", NULL, NULL, "no name"},
	{"ubuntu\n", NULL, NULL, "control"},
};

static void test_image_refs(void)
{
	for (size_t i = 0; i < sizeof(ref_cases) / sizeof(*ref_cases); i++) {
		const struct ref_case *c = &ref_cases[i];
		struct sc_image_ref r;
		char err[256] = "";
		int rc = sc_image_ref_parse(c->in, &r, err, sizeof(err));

		if (c->name) {
			CHECK(rc == 0);
			if (rc != 0) {
				fprintf(stderr, "  %s: %s\n", c->in, err);
				continue;
			}
			CHECK(strcmp(r.name, c->name) == 0);
			CHECK(strcmp(r.tag, c->tag) == 0);
			CHECK(strcmp(r.digest, c->digest) == 0);
		} else {
			CHECK(rc == -1);
			CHECK(strstr(err, c->digest) != NULL);
			if (rc != -1 || !strstr(err, c->digest))
				fprintf(stderr, "  %s: got \"%s\"\n", c->in,
					err);
		}
	}
}

static void test_image_ref_format_and_allowed(void)
{
	char out[600];
	struct sc_image_ref r;
	char *const allowed[] = {"reg.io", "127.0.0.1:5000/team"};

	CHECK(sc_image_ref_parse("reg.io/a/b:t@sha256:" D64, &r, NULL, 0) ==
	      0);
	CHECK(sc_image_ref_format(&r, out, sizeof(out)) == 0);
	CHECK(strcmp(out, "reg.io/a/b:t@sha256:" D64) == 0);
	CHECK(sc_image_ref_format(&r, out, 10) == -1);
	CHECK(sc_image_ref_allowed(&r, allowed, 2));
	CHECK(sc_image_ref_allowed(&r, NULL, 0));
	CHECK(sc_image_ref_parse("127.0.0.1:5000/team/x", &r, NULL, 0) == 0);
	CHECK(sc_image_ref_allowed(&r, allowed, 2));
	/* a path boundary, not a string prefix */
	CHECK(sc_image_ref_parse("127.0.0.1:5000/teamx/x", &r, NULL, 0) == 0);
	CHECK(!sc_image_ref_allowed(&r, allowed, 2));
	CHECK(sc_image_ref_parse("reg.io.evil.com/x", &r, NULL, 0) == 0);
	CHECK(!sc_image_ref_allowed(&r, allowed, 2));
	CHECK(sc_image_ref_parse("ubuntu", &r, NULL, 0) == 0);
	CHECK(!sc_image_ref_allowed(&r, allowed, 2));
}

static struct sc_container_args fresh(void)
{
	struct sc_container_args a = {.mount_home = -1, .writable = -1};

	return a;
}

static void test_mounts(void)
{
	struct sc_container_args a = fresh();
	char err[256];

	CHECK(sc_cargs_mounts(&a, "/data:/data:ro,/home/a/x:/x,/scratch", err,
			      sizeof(err)) == 0);
	CHECK(a.nmounts == 3);
	CHECK(strcmp(a.mounts[0].src, "/data") == 0 && a.mounts[0].readonly);
	CHECK(strcmp(a.mounts[1].dst, "/x") == 0 && !a.mounts[1].readonly);
	CHECK(strcmp(a.mounts[2].src, "/scratch") == 0 &&
	      strcmp(a.mounts[2].dst, "/scratch") == 0);
	/* Slurm may call again with the same value: the same list */
	CHECK(sc_cargs_mounts(&a, "/data:/data:ro+rbind+rprivate", err,
			      sizeof(err)) == 0);
	CHECK(a.nmounts == 1 && a.mounts[0].readonly);
	sc_cargs_free(&a);
	a = fresh();
	CHECK(sc_cargs_mounts(&a, "rel:/x", err, sizeof(err)) == -1);
	CHECK(strstr(err, "absolute") != NULL);
	CHECK(sc_cargs_mounts(&a, "/a:/", err, sizeof(err)) == -1);
	CHECK(strstr(err, "container's /") != NULL);
	CHECK(sc_cargs_mounts(&a, "/a:/b:ro+bogus", err, sizeof(err)) == -1);
	CHECK(strstr(err, "bad flags") != NULL);
	CHECK(sc_cargs_mounts(&a, "/a:/b:", err, sizeof(err)) == -1);
	CHECK(sc_cargs_mounts(&a, "/a,,/b", err, sizeof(err)) == -1);
	CHECK(sc_cargs_mounts(&a, "/a/../etc:/x", err, sizeof(err)) == -1);
	CHECK(sc_cargs_mounts(&a, "", err, sizeof(err)) == -1);
	CHECK(a.nmounts == 0);
	sc_cargs_free(&a);
}

static void test_other_options(void)
{
	struct sc_container_args a = fresh();
	char err[256];

	CHECK(sc_cargs_image(&a, "ubuntu:22.04", err, sizeof(err)) == 0);
	CHECK(sc_cargs_image(&a, "ubuntu:22.04", err, sizeof(err)) == 0);
	CHECK(sc_cargs_image(&a, "ubuntu:24.04", err, sizeof(err)) == -1);
	CHECK(strstr(err, "more than once") != NULL);
	CHECK(sc_cargs_image(&a, "", err, sizeof(err)) == -1);
	CHECK(sc_cargs_workdir(&a, "/work//dir/", err, sizeof(err)) == 0);
	CHECK(strcmp(a.workdir, "/work/dir") == 0);
	CHECK(sc_cargs_workdir(&a, "work", err, sizeof(err)) == -1);
	CHECK(sc_cargs_name(&a, "pt:auto", err, sizeof(err)) == 0);
	CHECK(strcmp(a.name, "pt") == 0);
	CHECK(sc_cargs_name(&a, "pt", err, sizeof(err)) == 0);
	CHECK(sc_cargs_name(&a, "other", err, sizeof(err)) == -1);
	CHECK(sc_cargs_name(&a, "x:exec", err, sizeof(err)) == -1);
	CHECK(strstr(err, "auto") != NULL);
	CHECK(sc_cargs_name(&a, "a/b", err, sizeof(err)) == -1);
	CHECK(sc_cargs_name(&a, "_x", err, sizeof(err)) == -1);
	CHECK(sc_cargs_env(&a, "PATH,CUDA_HOME", err, sizeof(err)) == 0);
	CHECK(sc_cargs_env(&a, "PATH", err, sizeof(err)) == 0);
	CHECK(a.nenv == 2);
	CHECK(sc_cargs_env_kept(&a, "CUDA_HOME") && !sc_cargs_env_kept(&a, "X"));
	CHECK(sc_cargs_env(&a, "1BAD", err, sizeof(err)) == -1);
	CHECK(sc_cargs_env(&a, "A,", err, sizeof(err)) == -1);
	CHECK(sc_cargs_tristate(&a.mount_home, 0, "both", err, sizeof(err)) ==
	      0);
	CHECK(sc_cargs_tristate(&a.mount_home, 0, "both", err, sizeof(err)) ==
	      0);
	CHECK(sc_cargs_tristate(&a.mount_home, 1, "both", err, sizeof(err)) ==
	      -1);
	CHECK(sc_cargs_any(&a));
	sc_cargs_free(&a);
	CHECK(a.image == NULL && a.mount_home == -1 && !sc_cargs_any(&a));
}

static void test_sizes(void)
{
	unsigned long long n = 0;

	CHECK(sc_parse_size("50G", &n) == 0 && n == 50ULL << 30);
	CHECK(sc_parse_size("512M", &n) == 0 && n == 512ULL << 20);
	CHECK(sc_parse_size("1048576", &n) == 0 && n == 1048576);
	CHECK(sc_parse_size("1T", &n) == 0 && n == 1ULL << 40);
	CHECK(sc_parse_size("0", &n) == -1);
	CHECK(sc_parse_size("5GB", &n) == -1);
	CHECK(sc_parse_size("G", &n) == -1);
	CHECK(sc_parse_size("99999999999999999999", &n) == -1);
	CHECK(sc_parse_size("99999999999T", &n) == -1);
}

static void test_container_plugstack_args(void)
{
	const char *ok[] = {"jail=/j",
			    "container_cache=/var/lib/soperator/images",
			    "container_cache_size=20G",
			    "container_registries=Reg.IO,127.0.0.1:5000/team",
			    "container_bind=/mnt/jail/data:/data:ro"};
	const char *no_cache[] = {"jail=/j", "container_cache_size=20G"};
	const char *bad_reg[] = {"jail=/j", "container_cache=/c",
				 "container_registries=reg_io"};
	const char *bad_owner[] = {"jail=/j", "container_cache=/c",
				   "container_owner=0"};
	const char *unknown[] = {"jail=/j", "container_cache=/c",
				 "container_bogus=1"};
	struct sc_options o;
	char err[512];

	CHECK(sc_options_parse(5, (char *const *)ok, &o, err, sizeof(err)) ==
	      0);
	CHECK(o.container.cache_size == 20ULL << 30);
	CHECK(o.container.nregistries == 2);
	CHECK(o.container.nregistries == 2 &&
	      strcmp(o.container.registries[0], "reg.io") == 0 &&
	      strcmp(o.container.registries[1], "127.0.0.1:5000/team") == 0);
	CHECK(o.container.owner == SC_CONTAINER_OWNER_DEFAULT);
	CHECK(o.container.helper &&
	      strcmp(o.container.helper, SC_CONTAINER_HELPER_DEFAULT) == 0);
	CHECK(o.container.nbinds == 1 && o.container.binds[0].readonly);
	sc_options_free(&o);
	CHECK(sc_options_parse(2, (char *const *)no_cache, &o, err,
			       sizeof(err)) == -1);
	CHECK(strstr(err, "need container_cache") != NULL);
	CHECK(sc_options_parse(3, (char *const *)bad_reg, &o, err,
			       sizeof(err)) == -1);
	CHECK(strstr(err, "registry or repository prefix") != NULL);
	CHECK(sc_options_parse(3, (char *const *)bad_owner, &o, err,
			       sizeof(err)) == -1);
	CHECK(sc_options_parse(3, (char *const *)unknown, &o, err,
			       sizeof(err)) == -1);
	CHECK(strstr(err, "container_bogus") != NULL);
}

static void test_slurm_conf_user(void)
{
	static const struct {
		const char *conf;
		const char *user; /* NULL: -1 */
	} cases[] = {
		{"ClusterName=c\nSlurmUser=slurm\nSlurmdUser=root\n", "slurm"},
		{"", "root"}, /* Slurm's default */
		{"SlurmdUser=slurm\n", "root"},
		{"slurmuser=Slurm", "Slurm"},
		{"  SlurmUser = slurm # the controller's\n", "slurm"},
		{"SlurmUser=\"slurm\" MpiDefault=none", "slurm"},
		{"ClusterName=c SlurmUser=first\nSlurmUser=last\n", "last"},
		{"#SlurmUser=commented\n", "root"},
		{"ClusterName=c #SlurmUser=x\n", "root"},
		{"SlurmUserX=x\nXSlurmUser=y\n", "root"},
		{"SlurmUser=64030\n", "64030"},
		{"SlurmUser=\n", NULL},
		{"SlurmUser=\"\"", NULL},
		{"SlurmUser slurm\n= x\n", "root"},
	};
	char out[64], tiny[4];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = sc_slurm_conf_user(cases[i].conf, out, sizeof(out));

		bool ok = cases[i].user ? rc == 0 &&
						  strcmp(out, cases[i].user) == 0
					: rc == -1;

		if (!ok)
			fprintf(stderr, "case %zu: %s\n", i, cases[i].conf);
		CHECK(ok);
	}
	CHECK(sc_slurm_conf_user(NULL, out, sizeof(out)) == 0 &&
	      strcmp(out, "root") == 0);
	CHECK(sc_slurm_conf_user("SlurmUser=slurm", tiny, sizeof(tiny)) == -1);
}

const struct unit_test container_args_tests[] = {
	{"image references", test_image_refs},
	{"image reference format and allowed registries",
	 test_image_ref_format_and_allowed},
	{"--container-mounts", test_mounts},
	{"the other container options", test_other_options},
	{"sizes", test_sizes},
	{"container_* plugstack arguments", test_container_plugstack_args},
	{"SlurmUser from slurm.conf", test_slurm_conf_user},
	{NULL, NULL},
};
