/* Pure parsing of the users' container options. See container_args.h. */
#define _GNU_SOURCE
#include "container_args.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "options.h"

/* Copy src into dst (len bytes) or return -1 when it does not fit. */
static int copy_str(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component of a repository: [a-z0-9]+((.|_|__|-+)[a-z0-9]+)* */
static bool path_component_ok(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
		return false;
	while (i < len) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '.') {
			i++;
		} else if (s[i] == '_') {
			i += (i + 1 < len && s[i + 1] == '_') ? 2 : 1;
		} else if (s[i] == '-') {
			while (i < len && s[i] == '-')
				i++;
		} else {
			return false;
		}
		if (i >= len || !is_lower_alnum(s[i]))
			return false;
	}
	return true;
}

/* host[:port]: labels of letters, digits and '-', joined by '.'. */
static bool registry_ok(const char *s, size_t len)
{
	const char *colon = memchr(s, ':', len);
	size_t host = colon ? (size_t)(colon - s) : len;
	bool label_start = true;

	if (host == 0 || host > 253)
		return false;
	for (size_t i = 0; i < host; i++) {
		char c = s[i];

		if (c == '.') {
			if (label_start || s[i - 1] == '-')
				return false;
			label_start = true;
			continue;
		}
		if (!isalnum((unsigned char)c) && c != '-')
			return false;
		if (c == '-' && label_start)
			return false;
		label_start = false;
	}
	if (label_start || s[host - 1] == '-')
		return false;
	if (colon) {
		size_t digits = len - host - 1;

		if (digits == 0 || digits > 5)
			return false;
		for (size_t i = host + 1; i < len; i++)
			if (!isdigit((unsigned char)s[i]))
				return false;
	}
	return true;
}

static bool tag_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > 128)
		return false;
	if (!isalnum((unsigned char)s[0]) && s[0] != '_')
		return false;
	for (size_t i = 1; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' &&
		    s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

static bool digest_ok(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
		return false;
	for (const char *p = s + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* The first component of a Docker reference names a registry when it has a
 * '.' or ':' or is "localhost" (as Docker decides). */
static bool looks_like_registry(const char *s, size_t len)
{
	return memchr(s, '.', len) || memchr(s, ':', len) ||
	       (len == 9 && strncmp(s, "localhost", 9) == 0);
}

int sc_image_ref_parse(const char *in, struct sc_image_ref *out, char *err,
		       size_t errlen)
{
	char buf[512], path[512], registry[260];
	char *at, *hash, *colon, *slash, *rest;
	size_t len;

	memset(out, 0, sizeof(*out));
	if (!in || !*in) {
		sc_set_err(err, errlen, "empty image reference");
		return -1;
	}
	len = strlen(in);
	if (len >= sizeof(buf)) {
		sc_set_err(err, errlen, "image reference is too long");
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)in[i] <= ' ' || in[i] == 0x7f) {
			sc_set_err(err, errlen,
				"image reference has a space or control "
				"character");
			return -1;
		}
	memcpy(buf, in, len + 1);
	at = strrchr(buf, '@');
	if (at) {
		if (strncmp(at + 1, "sha256:", 7) != 0) {
			sc_set_err(err, errlen,
				"credentials in the image reference (USER@) "
				"are not supported: the cluster's registry "
				"credentials are used");
			return -1;
		}
		if (!digest_ok(at + 1)) {
			sc_set_err(err, errlen,
				"bad digest \"%s\" (sha256: and 64 lowercase "
				"hex digits)",
				at + 1);
			return -1;
		}
		snprintf(out->digest, sizeof(out->digest), "%s", at + 1);
		*at = '\0';
		if (strchr(buf, '@')) {
			sc_set_err(err, errlen,
				"credentials in the image reference (USER@) "
				"are not supported: the cluster's registry "
				"credentials are used");
			return -1;
		}
	}
	hash = strchr(buf, '#');
	if (hash) {
		/* enroot's REGISTRY#IMAGE */
		*hash = '\0';
		rest = hash + 1;
		if (strchr(rest, '#') || !registry_ok(buf, strlen(buf)) ||
		    copy_str(registry, sizeof(registry), buf) < 0) {
			sc_set_err(err, errlen, "bad registry \"%s\"", buf);
			return -1;
		}
	} else {
		slash = strchr(buf, '/');
		if (slash && looks_like_registry(buf, (size_t)(slash - buf))) {
			*slash = '\0';
			if (!registry_ok(buf, strlen(buf)) ||
			    copy_str(registry, sizeof(registry), buf) < 0) {
				sc_set_err(err, errlen, "bad registry \"%s\"",
					buf);
				return -1;
			}
			rest = slash + 1;
		} else {
			snprintf(registry, sizeof(registry), "docker.io");
			rest = buf;
		}
	}
	for (char *p = registry; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	/* the tag: after the last ':' of the last component */
	slash = strrchr(rest, '/');
	colon = strrchr(slash ? slash : rest, ':');
	if (colon) {
		*colon = '\0';
		if (!tag_ok(colon + 1)) {
			sc_set_err(err, errlen, "bad tag \"%s\"", colon + 1);
			return -1;
		}
		snprintf(out->tag, sizeof(out->tag), "%s", colon + 1);
	}
	if (!*rest) {
		sc_set_err(err, errlen, "image reference has no name");
		return -1;
	}
	for (char *c = rest, *end;; c = end + 1) {
		end = strchr(c, '/');
		if (!path_component_ok(c, end ? (size_t)(end - c)
					      : strlen(c))) {
			sc_set_err(err, errlen,
				"bad image name \"%s\" (lowercase letters, "
				"digits and . _ - between them, components "
				"joined by /)",
				rest);
			return -1;
		}
		if (!end)
			break;
	}
	path[0] = '\0';
	if (strcmp(registry, "docker.io") == 0 && !strchr(rest, '/'))
		memcpy(path, "library/", sizeof("library/"));
	if (strlen(path) + strlen(rest) >= sizeof(path)) {
		sc_set_err(err, errlen, "image name is too long");
		return -1;
	}
	strcat(path, rest);
	{
		size_t rl = strlen(registry), pl = strlen(path);

		if (rl + 1 + pl >= sizeof(out->name)) {
			sc_set_err(err, errlen, "image name is too long");
			return -1;
		}
		memcpy(out->name, registry, rl);
		out->name[rl] = '/';
		memcpy(out->name + rl + 1, path, pl + 1);
	}
	if (!*out->tag && !*out->digest)
		snprintf(out->tag, sizeof(out->tag), "latest");
	return 0;
}

int sc_image_ref_format(const struct sc_image_ref *r, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s%s%s%s%s", r->name, *r->tag ? ":" : "",
			 r->tag, *r->digest ? "@" : "", r->digest);

	return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

bool sc_image_ref_allowed(const struct sc_image_ref *r, char *const *prefixes,
			  size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(prefixes[i]);

		if (strncmp(r->name, prefixes[i], len) == 0 &&
		    (r->name[len] == '\0' || r->name[len] == '/'))
			return true;
	}
	return false;
}

static int set_string(char **field, const char *v, const char *what,
		      char *err, size_t errlen)
{
	if (*field) {
		if (strcmp(*field, v) == 0)
			return 0;
		sc_set_err(err, errlen, "%s given more than once", what);
		return -1;
	}
	*field = strdup(v);
	if (!*field) {
		sc_set_err(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int sc_cargs_image(struct sc_container_args *a, const char *v, char *err,
		   size_t errlen)
{
	struct sc_image_ref ref;

	if (!v || !*v) {
		sc_set_err(err, errlen, "--container-image needs an image");
		return -1;
	}
	if (sc_image_ref_parse(v, &ref, err, errlen) < 0)
		return -1;
	if (set_string(&a->image, v, "--container-image", err, errlen) < 0)
		return -1;
	a->ref = ref;
	return 0;
}

static char *dup_path(const char *in)
{
	char buf[PATH_MAX];

	if (sc_path_normalize(in, buf, sizeof(buf)) < 0)
		return NULL;
	return strdup(buf);
}

static int parse_mount_flags(const char *flags, struct sc_mount *m)
{
	char *copy = strdup(flags), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -1;
	for (tok = strtok_r(copy, "+", &save); tok;
	     tok = strtok_r(NULL, "+", &save)) {
		if (strcmp(tok, "ro") == 0)
			m->readonly = true;
		else if (strcmp(tok, "rw") == 0)
			m->readonly = false;
		else if (strcmp(tok, "rbind") != 0 &&
			 strcmp(tok, "rprivate") != 0)
			rc = -1;
	}
	free(copy);
	return rc;
}

static int add_mount(struct sc_container_args *a, const char *item, char *err,
		     size_t errlen)
{
	char *copy = strdup(item), *src, *dst, *flags = NULL;
	struct sc_mount m = {0}, *grown;
	int rc = -1;

	if (!copy) {
		sc_set_err(err, errlen, "out of memory");
		return -1;
	}
	src = copy;
	dst = strchr(src, ':');
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
	if (flags && (!*flags || parse_mount_flags(flags, &m) < 0)) {
		sc_set_err(err, errlen,
			"--container-mounts %s: bad flags \"%s\" (ro, rw, "
			"rbind, rprivate joined by +)",
			item, flags ? flags : "");
		goto out;
	}
	m.src = dup_path(src);
	m.dst = dup_path(dst);
	if (!m.src || !m.dst) {
		sc_set_err(err, errlen,
			"--container-mounts %s: paths must be absolute, "
			"without . or .. components",
			item);
		goto out;
	}
	if (strcmp(m.dst, "/") == 0) {
		sc_set_err(err, errlen,
			"--container-mounts %s: cannot mount onto the "
			"container's /",
			item);
		goto out;
	}
	if (a->nmounts >= SC_MAX_CONTAINER_MOUNTS) {
		sc_set_err(err, errlen, "--container-mounts: more than %d mounts",
			SC_MAX_CONTAINER_MOUNTS);
		goto out;
	}
	grown = realloc(a->mounts, (a->nmounts + 1) * sizeof(*a->mounts));
	if (!grown) {
		sc_set_err(err, errlen, "out of memory");
		goto out;
	}
	a->mounts = grown;
	a->mounts[a->nmounts++] = m;
	m.src = m.dst = NULL;
	rc = 0;
out:
	free(m.src);
	free(m.dst);
	free(copy);
	return rc;
}

static void free_mounts(struct sc_container_args *a)
{
	for (size_t i = 0; i < a->nmounts; i++) {
		free(a->mounts[i].src);
		free(a->mounts[i].dst);
	}
	free(a->mounts);
	a->mounts = NULL;
	a->nmounts = 0;
}

int sc_cargs_mounts(struct sc_container_args *a, const char *v, char *err,
		    size_t errlen)
{
	char *list, *save = NULL, *item;
	int rc = 0;

	if (!v || !*v) {
		sc_set_err(err, errlen, "--container-mounts needs SRC:DST");
		return -1;
	}
	/* the same value again (Slurm may call twice) replaces the list */
	free_mounts(a);
	list = strdup(v);
	if (!list) {
		sc_set_err(err, errlen, "out of memory");
		return -1;
	}
	if (v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,")) {
		sc_set_err(err, errlen, "--container-mounts %s: empty item", v);
		rc = -1;
	}
	for (item = strtok_r(list, ",", &save); item && rc == 0;
	     item = strtok_r(NULL, ",", &save))
		rc = add_mount(a, item, err, errlen);
	free(list);
	if (rc < 0)
		free_mounts(a);
	return rc;
}

int sc_cargs_workdir(struct sc_container_args *a, const char *v, char *err,
		     size_t errlen)
{
	char buf[PATH_MAX];

	if (!v || sc_path_normalize(v, buf, sizeof(buf)) < 0) {
		sc_set_err(err, errlen,
			"--container-workdir %s: must be an absolute path "
			"without . or .. components",
			v ? v : "");
		return -1;
	}
	return set_string(&a->workdir, buf, "--container-workdir", err,
			  errlen);
}

int sc_cargs_name(struct sc_container_args *a, const char *v, char *err,
		  size_t errlen)
{
	char name[SC_MAX_CONTAINER_NAME + 1];
	const char *colon = v ? strchr(v, ':') : NULL;
	size_t len = colon ? (size_t)(colon - v) : (v ? strlen(v) : 0);

	if (colon && strcmp(colon + 1, "auto") != 0) {
		sc_set_err(err, errlen,
			"--container-name %s: only the \"auto\" flag is "
			"supported (a named container is created by the "
			"first step of the job that names it and used by "
			"the later ones)",
			v);
		return -1;
	}
	if (len == 0 || len > SC_MAX_CONTAINER_NAME ||
	    !isalnum((unsigned char)v[0])) {
		sc_set_err(err, errlen,
			"--container-name: 1 to %d characters, the first a "
			"letter or digit",
			SC_MAX_CONTAINER_NAME);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '_' &&
		    v[i] != '.' && v[i] != '-') {
			sc_set_err(err, errlen,
				"--container-name %.*s: letters, digits, "
				"_ . - only",
				(int)len, v);
			return -1;
		}
	memcpy(name, v, len);
	name[len] = '\0';
	return set_string(&a->name, name, "--container-name", err, errlen);
}

static bool env_name_ok(const char *s)
{
	if (!*s || (!isalpha((unsigned char)*s) && *s != '_'))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

int sc_cargs_env(struct sc_container_args *a, const char *v, char *err,
		 size_t errlen)
{
	char *list, *save = NULL, *item;
	int rc = 0;

	if (!v || !*v || v[0] == ',' || v[strlen(v) - 1] == ',' ||
	    strstr(v, ",,")) {
		sc_set_err(err, errlen, "--container-env %s: NAME[,NAME...]",
			v ? v : "");
		return -1;
	}
	list = strdup(v);
	if (!list) {
		sc_set_err(err, errlen, "out of memory");
		return -1;
	}
	for (item = strtok_r(list, ",", &save); item && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		char **grown;

		if (!env_name_ok(item)) {
			sc_set_err(err, errlen,
				"--container-env: \"%s\" is not a variable "
				"name",
				item);
			rc = -1;
		} else if (sc_cargs_env_kept(a, item)) {
			continue;
		} else if (a->nenv >= SC_MAX_CONTAINER_ENV) {
			sc_set_err(err, errlen,
				"--container-env: more than %d names",
				SC_MAX_CONTAINER_ENV);
			rc = -1;
		} else if (!(grown = realloc(a->env, (a->nenv + 1) *
							    sizeof(*a->env))) ||
			   !(grown[a->nenv] = strdup(item))) {
			if (grown)
				a->env = grown;
			sc_set_err(err, errlen, "out of memory");
			rc = -1;
		} else {
			a->env = grown;
			a->nenv++;
		}
	}
	free(list);
	return rc;
}

int sc_cargs_tristate(int *field, int val, const char *what, char *err,
		      size_t errlen)
{
	if (*field != -1 && *field != val) {
		sc_set_err(err, errlen, "both %s were given", what);
		return -1;
	}
	*field = val;
	return 0;
}

bool sc_cargs_env_kept(const struct sc_container_args *a, const char *name)
{
	for (size_t i = 0; i < a->nenv; i++)
		if (strcmp(a->env[i], name) == 0)
			return true;
	return false;
}

bool sc_cargs_any(const struct sc_container_args *a)
{
	return a->nmounts || a->workdir || a->nenv || a->mount_home != -1 ||
	       a->writable != -1;
}

void sc_cargs_free(struct sc_container_args *a)
{
	if (!a)
		return;
	free(a->image);
	free_mounts(a);
	free(a->workdir);
	free(a->name);
	for (size_t i = 0; i < a->nenv; i++)
		free(a->env[i]);
	free(a->env);
	memset(a, 0, sizeof(*a));
	a->mount_home = a->writable = -1;
}

int sc_parse_size(const char *in, unsigned long long *out)
{
	unsigned long long n = 0, unit = 1;
	const char *p = in;

	if (!in || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		if (n > (ULLONG_MAX - 9) / 10)
			return -1;
		n = n * 10 + (unsigned long long)(*p - '0');
	}
	switch (*p) {
	case '\0':
		break;
	case 'K':
		unit = 1ULL << 10;
		break;
	case 'M':
		unit = 1ULL << 20;
		break;
	case 'G':
		unit = 1ULL << 30;
		break;
	case 'T':
		unit = 1ULL << 40;
		break;
	default:
		return -1;
	}
	if (*p && p[1])
		return -1;
	if (n == 0 || n > ULLONG_MAX / unit)
		return -1;
	*out = n * unit;
	return 0;
}

int sc_slurm_conf_user(const char *conf, char *out, size_t outlen)
{
	const char *p = conf ? conf : "", *found = "root";
	size_t flen = 4;

	while (*p) {
		const char *key = p, *value;
		size_t klen, vlen;

		if (*p == '#') { /* a comment, to the end of the line */
			p += strcspn(p, "\n");
			continue;
		}
		if (isspace((unsigned char)*p)) {
			p++;
			continue;
		}
		klen = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "abcdefghijklmnopqrstuvwxyz0123456789_.");
		p += klen;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && strchr("-*+/", *p) && p[1] == '=')
			p++;
		if (klen == 0 || *p != '=') { /* not KEY=: skip the word */
			p += klen == 0 ? 1 : 0;
			p += strcspn(p, " \t\r\n#");
			continue;
		}
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '"') {
			value = ++p;
			vlen = strcspn(p, "\"\n");
			p += vlen;
			if (*p == '"')
				p++;
		} else {
			value = p;
			vlen = strcspn(p, " \t\r\n#");
			p += vlen;
		}
		if (klen == 9 && strncasecmp(key, "SlurmUser", 9) == 0) {
			found = value;
			flen = vlen;
		}
	}
	if (flen == 0 || flen >= outlen)
		return -1;
	memcpy(out, found, flen);
	out[flen] = '\0';
	return 0;
}
