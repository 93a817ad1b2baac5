/*
 * libFuzzer entry point for the plugstack argument parser (the input split on
 * spaces into arguments) and the users' container options (each argument
 * given to every option's parser); the whole input is also read as slurm.conf
 * for its SlurmUser. Build with clang -fsanitize=fuzzer,address,
 * or with -DFUZZ_REPLAY_MAIN (make asan) to replay the files given as
 * arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_args.h"
#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *argv[64], *save = NULL, *tok;
	struct sc_options o;
	char err[128];
	int argc = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	{
		char user[64];

		sc_slurm_conf_user(buf, user, sizeof(user));
	}
	for (tok = strtok_r(buf, " ", &save); tok && argc < 64;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	sc_options_parse(argc, argv, &o, err, sizeof(err));
	sc_options_free(&o);
	{
		struct sc_container_args a = {.mount_home = -1,
					      .writable = -1};
		unsigned long long bytes;

		for (int i = 0; i < argc; i++) {
			char ref[600];

			if (sc_cargs_image(&a, argv[i], err, sizeof(err)) == 0)
				sc_image_ref_format(&a.ref, ref, sizeof(ref));
			sc_cargs_mounts(&a, argv[i], err, sizeof(err));
			sc_cargs_workdir(&a, argv[i], err, sizeof(err));
			sc_cargs_name(&a, argv[i], err, sizeof(err));
			sc_cargs_env(&a, argv[i], err, sizeof(err));
			sc_cargs_env_kept(&a, argv[i]);
			sc_parse_size(argv[i], &bytes);
		}
		sc_cargs_free(&a);
	}
	free(buf);
	return 0;
}

#ifdef FUZZ_REPLAY_MAIN
int main(int argc, char **argv)
{
	int n = 0;

	for (int i = 1; i < argc; i++) {
		static uint8_t data[1 << 16];
		FILE *f = fopen(argv[i], "rb");
		size_t len;

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		len = fread(data, 1, sizeof(data), f);
		fclose(f);
		LLVMFuzzerTestOneInput(data, len);
		n++;
	}
	printf("fuzz replay: %d inputs ok\n", n);
	return 0;
}
#endif
