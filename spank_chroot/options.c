/* Pure parsing of plugstack.conf arguments. See options.h. */
#define _GNU_SOURCE
#include "options.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int sc_path_normalize(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	const char *p = in;

	if (!in || in[0] != '/' || outlen < 2)
		return -1;
	while (*p) {
		const char *start, *end;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		start = p;
		while (*p && *p != '/')
			p++;
		end = p;
		len = (size_t)(end - start);
		if ((len == 1 && start[0] == '.') ||
		    (len == 2 && start[0] == '.' && start[1] == '.'))
			return -1;
		for (const char *c = start; c < end; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return -1;
		/* '/' + component + NUL must fit */
		if (o + 1 + len + 1 > outlen)
			return -1;
		out[o++] = '/';
		memcpy(out + o, start, len);
		o += len;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

bool sc_path_is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

int sc_expand_node(const char *tmpl, const char *node, char *out, size_t outlen)
{
	size_t o = 0;

	if (!tmpl || !out || !outlen)
		return -1;
	for (const char *p = tmpl; *p; p++) {
		const char *add = p;
		size_t len = 1;

		if (p[0] == '%' && p[1] == 'n') {
			if (!node || !*node)
				return -1;
			add = node;
			len = strlen(node);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			p++;
		}
		if (o + len + 1 > outlen)
			return -1;
		memcpy(out + o, add, len);
		o += len;
	}
	out[o] = '\0';
	return 0;
}

bool sc_step_is_jailed(uint32_t step_id)
{
	if (step_id < SC_MAX_NORMAL_STEP_ID)
		return true;
	return step_id == SC_STEP_BATCH || step_id == SC_STEP_INTERACTIVE;
}

/* A normalised, heap-allocated copy of an absolute path, or NULL. */
static char *dup_path(const char *in)
{
	char buf[PATH_MAX];

	if (sc_path_normalize(in, buf, sizeof(buf)) < 0)
		return NULL;
	return strdup(buf);
}

/* "ro", "rw", "optional" joined by '+'. */
static int parse_bind_flags(const char *flags, struct sc_bind *b)
{
	char *copy = strdup(flags), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -1;
	for (tok = strtok_r(copy, "+", &save); tok;
	     tok = strtok_r(NULL, "+", &save)) {
		if (strcmp(tok, "ro") == 0)
			b->readonly = true;
		else if (strcmp(tok, "rw") == 0)
			b->readonly = false;
		else if (strcmp(tok, "optional") == 0)
			b->optional = true;
		else
			rc = -1;
	}
	free(copy);
	return rc;
}

/* One "SRC[:DST[:FLAGS]]" item of a bind= list. */
static int add_bind(struct sc_options *o, const char *item, char *err,
		    size_t errlen)
{
	char *copy = strdup(item), *src, *dst, *flags;
	struct sc_bind b = {0}, *grown;
	int rc = -1;

	if (!copy) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	src = copy;
	dst = strchr(src, ':');
	flags = NULL;
	if (dst) {
		*dst++ = '\0';
		flags = strchr(dst, ':');
		if (flags)
			*flags++ = '\0';
		if (!*dst)
			dst = src;
	} else {
		dst = src;
	}
	if (flags && (!*flags || parse_bind_flags(flags, &b) < 0)) {
		set_err(err, errlen,
			"bind %s: bad flags \"%s\" (ro, rw, optional)", item,
			flags);
		goto out;
	}
	b.src = dup_path(src);
	b.dst = dup_path(dst);
	if (!b.src || !b.dst) {
		set_err(err, errlen,
			"bind %s: paths must be absolute, without . or .. "
			"components",
			item);
		goto out;
	}
	if (strcmp(b.dst, "/") == 0) {
		set_err(err, errlen, "bind %s: cannot bind onto the jail's /",
			item);
		goto out;
	}
	grown = realloc(o->binds, (o->nbinds + 1) * sizeof(*o->binds));
	if (!grown) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	o->binds = grown;
	o->binds[o->nbinds++] = b;
	b.src = b.dst = NULL;
	rc = 0;
out:
	free(b.src);
	free(b.dst);
	free(copy);
	return rc;
}

static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0")) {
		*out = false;
		return 0;
	}
	return -1;
}

/* One "key=value" argument. */
static int parse_arg(struct sc_options *o, const char *arg, bool *seen_mode,
		     char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	const char *val;
	size_t klen;

	if (!eq || eq == arg) {
		set_err(err, errlen, "argument \"%s\" is not key=value", arg);
		return -1;
	}
	klen = (size_t)(eq - arg);
	val = eq + 1;
	if (!*val) {
		set_err(err, errlen, "argument \"%s\" has an empty value", arg);
		return -1;
	}
#define KEY_IS(k) (klen == strlen(k) && strncmp(arg, k, klen) == 0)
	if (KEY_IS("jail")) {
		if (o->jail) {
			set_err(err, errlen, "jail= given more than once");
			return -1;
		}
		o->jail = dup_path(val);
		if (!o->jail || strcmp(o->jail, "/") == 0) {
			free(o->jail);
			o->jail = NULL;
			set_err(err, errlen,
				"jail=%s: must be an absolute path other than "
				"/, without . or .. components",
				val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("mode")) {
		if (*seen_mode) {
			set_err(err, errlen, "mode= given more than once");
			return -1;
		}
		*seen_mode = true;
		if (strcmp(val, "pivot") == 0)
			o->mode = SC_MODE_PIVOT;
		else if (strcmp(val, "chroot") == 0)
			o->mode = SC_MODE_CHROOT;
		else {
			set_err(err, errlen,
				"mode=%s: expected pivot or chroot", val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("bind")) {
		char *list = strdup(val), *save = NULL, *item;
		int rc = 0;

		if (!list) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
		for (item = strtok_r(list, ",", &save); item && rc == 0;
		     item = strtok_r(NULL, ",", &save))
			rc = add_bind(o, item, err, errlen);
		free(list);
		return rc;
	}
	if (KEY_IS("spool_dir")) {
		if (o->spool_dir) {
			set_err(err, errlen, "spool_dir= given more than once");
			return -1;
		}
		o->spool_dir = dup_path(val);
		if (!o->spool_dir) {
			set_err(err, errlen,
				"spool_dir=%s: must be an absolute path", val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("workdir")) {
		if (parse_bool(val, &o->workdir) < 0) {
			set_err(err, errlen, "workdir=%s: expected yes or no",
				val);
			return -1;
		}
		return 0;
	}
#undef KEY_IS
	set_err(err, errlen,
		"unknown argument \"%.*s\" (known: jail, mode, bind, "
		"spool_dir, "
		"workdir)",
		(int)klen, arg);
	return -1;
}

int sc_options_parse(int argc, char *const argv[], struct sc_options *out,
		     char *err, size_t errlen)
{
	struct sc_options o = {.mode = SC_MODE_PIVOT, .workdir = true};
	bool seen_mode = false;

	set_err(err, errlen, "%s", "");
	memset(out, 0, sizeof(*out));
	if (argc < 0 || (argc > 0 && !argv)) {
		set_err(err, errlen, "no arguments");
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		if (!argv[i]) {
			set_err(err, errlen, "argument %d is NULL", i);
			goto fail;
		}
		if (parse_arg(&o, argv[i], &seen_mode, err, errlen) < 0)
			goto fail;
	}
	if (!o.jail) {
		set_err(err, errlen, "jail=/path is required");
		goto fail;
	}
	*out = o;
	return 0;
fail:
	sc_options_free(&o);
	return -1;
}

void sc_options_free(struct sc_options *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->nbinds; i++) {
		free(o->binds[i].src);
		free(o->binds[i].dst);
	}
	free(o->binds);
	free(o->jail);
	free(o->spool_dir);
	memset(o, 0, sizeof(*o));
}
