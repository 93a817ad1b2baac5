/* Pure parsing of plugstack.conf arguments. See options.h. */
#define _GNU_SOURCE
#include "options.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "container_args.h"

void sc_set_err(char *err, size_t errlen, const char *fmt, ...)
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

/* One "SRC[:DST[:FLAGS]]" item of a bind= (or container_bind=) list. */
static int add_bind(struct sc_bind **binds, size_t *nbinds, const char *item,
		    char *err, size_t errlen)
{
	char *copy = strdup(item), *src, *dst, *flags;
	struct sc_bind b = {0}, *grown;
	int rc = -1;

	if (!copy) {
		sc_set_err(err, errlen, "out of memory");
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
		sc_set_err(err, errlen,
			"bind %s: bad flags \"%s\" (ro, rw, optional)", item,
			flags);
		goto out;
	}
	b.src = dup_path(src);
	b.dst = dup_path(dst);
	if (!b.src || !b.dst) {
		sc_set_err(err, errlen,
			"bind %s: paths must be absolute, without . or .. "
			"components",
			item);
		goto out;
	}
	if (strcmp(b.dst, "/") == 0) {
		sc_set_err(err, errlen, "bind %s: cannot bind onto the jail's /",
			item);
		goto out;
	}
	grown = realloc(*binds, (*nbinds + 1) * sizeof(**binds));
	if (!grown) {
		sc_set_err(err, errlen, "out of memory");
		goto out;
	}
	*binds = grown;
	(*binds)[(*nbinds)++] = b;
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

/* A registry or repository prefix: host[:port][/path], no trailing '/'. */
static int add_registry(struct sc_container_options *c, const char *item,
			char *err, size_t errlen)
{
	struct sc_image_ref ref;
	char probe[300], **grown, *copy;
	size_t len = strlen(item);
	bool has_path = strchr(item, '/') != NULL;

	/* checked as an image name: "item/x" must parse with item as its
	 * registry */
	if (len == 0 || len > 250 || item[len - 1] == '/' ||
	    snprintf(probe, sizeof(probe), "%s%s", item,
		     has_path ? "" : "/x") < 0 ||
	    sc_image_ref_parse(probe, &ref, NULL, 0) < 0 ||
	    strncasecmp(ref.name, probe, strcspn(probe, "/")) != 0) {
		sc_set_err(err, errlen,
			"container_registries: \"%s\" is not a registry or "
			"repository prefix (registry.example.com, "
			"registry.example.com:5000/team)",
			item);
		return -1;
	}
	copy = strdup(has_path ? item : ref.name);
	grown = realloc(c->registries,
			(c->nregistries + 1) * sizeof(*c->registries));
	if (!copy || !grown) {
		free(copy);
		if (grown)
			c->registries = grown;
		sc_set_err(err, errlen, "out of memory");
		return -1;
	}
	if (!has_path)
		copy[strcspn(copy, "/")] = '\0';
	for (char *p = copy; *p && *p != '/'; p++)
		*p = (char)tolower((unsigned char)*p);
	c->registries = grown;
	c->registries[c->nregistries++] = copy;
	return 0;
}

/* container_<key>=val (key without the prefix). */
static int parse_container_arg(struct sc_container_options *c, const char *key,
			       size_t klen, const char *val, char *err,
			       size_t errlen)
{
#define CKEY_IS(k) (klen == strlen(k) && strncmp(key, k, klen) == 0)
	char **path = NULL;
	const char *name = NULL;

	if (CKEY_IS("cache")) {
		path = &c->cache;
		name = "container_cache";
	} else if (CKEY_IS("auth")) {
		path = &c->auth;
		name = "container_auth";
	} else if (CKEY_IS("helper")) {
		path = &c->helper;
		name = "container_helper";
	} else if (CKEY_IS("driver")) {
		path = &c->driver;
		name = "container_driver";
	} else if (CKEY_IS("slurm_conf")) {
		path = &c->slurm_conf;
		name = "container_slurm_conf";
	}
	if (path) {
		if (*path) {
			sc_set_err(err, errlen, "%s= given more than once", name);
			return -1;
		}
		*path = dup_path(val);
		if (!*path || strcmp(*path, "/") == 0) {
			free(*path);
			*path = NULL;
			sc_set_err(err, errlen,
				"%s=%s: must be an absolute path other than "
				"/, without . or .. components",
				name, val);
			return -1;
		}
		return 0;
	}
	if (CKEY_IS("cache_size")) {
		if (sc_parse_size(val, &c->cache_size) < 0) {
			sc_set_err(err, errlen,
				"container_cache_size=%s: a size such as 50G, "
				"512M or 1048576",
				val);
			return -1;
		}
		return 0;
	}
	if (CKEY_IS("owner")) {
		char *end = NULL;
		unsigned long id = strtoul(val, &end, 10);

		if (!isdigit((unsigned char)val[0]) || *end || id == 0 ||
		    id >= 65534) {
			sc_set_err(err, errlen,
				"container_owner=%s: a uid other than root's "
				"and nobody's",
				val);
			return -1;
		}
		c->owner = (unsigned int)id;
		return 0;
	}
	if (CKEY_IS("registries") || CKEY_IS("bind")) {
		bool registries = CKEY_IS("registries");
		char *list = strdup(val), *save = NULL, *item;
		int rc = 0;

		if (!list) {
			sc_set_err(err, errlen, "out of memory");
			return -1;
		}
		for (item = strtok_r(list, ",", &save); item && rc == 0;
		     item = strtok_r(NULL, ",", &save))
			rc = registries ? add_registry(c, item, err, errlen)
					: add_bind(&c->binds, &c->nbinds, item,
						   err, errlen);
		free(list);
		return rc;
	}
#undef CKEY_IS
	sc_set_err(err, errlen,
		"unknown argument \"container_%.*s\" (known: container_cache, "
		"container_cache_size, container_registries, container_auth, "
		"container_helper, container_owner, container_bind, "
		"container_driver, container_slurm_conf)",
		(int)klen, key);
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
		sc_set_err(err, errlen, "argument \"%s\" is not key=value", arg);
		return -1;
	}
	klen = (size_t)(eq - arg);
	val = eq + 1;
	if (!*val) {
		sc_set_err(err, errlen, "argument \"%s\" has an empty value", arg);
		return -1;
	}
#define KEY_IS(k) (klen == strlen(k) && strncmp(arg, k, klen) == 0)
	if (KEY_IS("jail")) {
		if (o->jail) {
			sc_set_err(err, errlen, "jail= given more than once");
			return -1;
		}
		o->jail = dup_path(val);
		if (!o->jail || strcmp(o->jail, "/") == 0) {
			free(o->jail);
			o->jail = NULL;
			sc_set_err(err, errlen,
				"jail=%s: must be an absolute path other than "
				"/, without . or .. components",
				val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("mode")) {
		if (*seen_mode) {
			sc_set_err(err, errlen, "mode= given more than once");
			return -1;
		}
		*seen_mode = true;
		if (strcmp(val, "pivot") == 0)
			o->mode = SC_MODE_PIVOT;
		else if (strcmp(val, "chroot") == 0)
			o->mode = SC_MODE_CHROOT;
		else {
			sc_set_err(err, errlen,
				"mode=%s: expected pivot or chroot", val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("bind")) {
		char *list = strdup(val), *save = NULL, *item;
		int rc = 0;

		if (!list) {
			sc_set_err(err, errlen, "out of memory");
			return -1;
		}
		for (item = strtok_r(list, ",", &save); item && rc == 0;
		     item = strtok_r(NULL, ",", &save))
			rc = add_bind(&o->binds, &o->nbinds, item, err, errlen);
		free(list);
		return rc;
	}
	if (klen > 10 && strncmp(arg, "container_", 10) == 0)
		return parse_container_arg(&o->container, arg + 10, klen - 10,
					   val, err, errlen);
	if (KEY_IS("spool_dir")) {
		if (o->spool_dir) {
			sc_set_err(err, errlen, "spool_dir= given more than once");
			return -1;
		}
		o->spool_dir = dup_path(val);
		if (!o->spool_dir) {
			sc_set_err(err, errlen,
				"spool_dir=%s: must be an absolute path", val);
			return -1;
		}
		return 0;
	}
	if (KEY_IS("workdir")) {
		if (parse_bool(val, &o->workdir) < 0) {
			sc_set_err(err, errlen, "workdir=%s: expected yes or no",
				val);
			return -1;
		}
		return 0;
	}
#undef KEY_IS
	sc_set_err(err, errlen,
		"unknown argument \"%.*s\" (known: jail, mode, bind, "
		"spool_dir, workdir, container_*)",
		(int)klen, arg);
	return -1;
}

int sc_options_parse(int argc, char *const argv[], struct sc_options *out,
		     char *err, size_t errlen)
{
	struct sc_options o = {.mode = SC_MODE_PIVOT, .workdir = true};
	bool seen_mode = false;

	sc_set_err(err, errlen, "%s", "");
	memset(out, 0, sizeof(*out));
	if (argc < 0 || (argc > 0 && !argv)) {
		sc_set_err(err, errlen, "no arguments");
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		if (!argv[i]) {
			sc_set_err(err, errlen, "argument %d is NULL", i);
			goto fail;
		}
		if (parse_arg(&o, argv[i], &seen_mode, err, errlen) < 0)
			goto fail;
	}
	if (!o.jail) {
		sc_set_err(err, errlen, "jail=/path is required");
		goto fail;
	}
	if (!o.container.cache &&
	    (o.container.cache_size || o.container.nregistries ||
	     o.container.auth || o.container.helper || o.container.owner ||
	     o.container.nbinds || o.container.driver ||
	     o.container.slurm_conf)) {
		sc_set_err(err, errlen,
			"container_* arguments need container_cache=/path");
		goto fail;
	}
	if (o.container.cache) {
		struct sc_container_options *c = &o.container;

		if (!c->cache_size)
			c->cache_size = SC_CONTAINER_CACHE_SIZE_DEFAULT;
		if (!c->owner)
			c->owner = SC_CONTAINER_OWNER_DEFAULT;
		if (!c->helper && !(c->helper = strdup(
					    SC_CONTAINER_HELPER_DEFAULT)))
			goto oom;
		if (!c->slurm_conf &&
		    !(c->slurm_conf = strdup(SC_CONTAINER_SLURM_CONF_DEFAULT)))
			goto oom;
	}
	*out = o;
	return 0;
oom:
	sc_set_err(err, errlen, "out of memory");
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
	for (size_t i = 0; i < o->container.nbinds; i++) {
		free(o->container.binds[i].src);
		free(o->container.binds[i].dst);
	}
	free(o->container.binds);
	for (size_t i = 0; i < o->container.nregistries; i++)
		free(o->container.registries[i]);
	free(o->container.registries);
	free(o->container.cache);
	free(o->container.auth);
	free(o->container.helper);
	free(o->container.driver);
	free(o->container.slurm_conf);
	memset(o, 0, sizeof(*o));
}
