/*
 * Container steps: the image cache's helper, the container's namespace, the
 * tasks joining it. See container.h and docs/containers.md.
 */
#define _GNU_SOURCE
#include "container.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "mount_api.h"
#include "nsid.h"

#ifndef SC_SLURM_PLUGIN_DIR
#define SC_SLURM_PLUGIN_DIR "/usr/lib/x86_64-linux-gnu/slurm-wlm"
#endif
#ifndef SC_SLURM_CLIENT_DIR
/* the launchers of the node's Slurm clients, below the node's /usr */
#define SC_SLURM_CLIENT_DIR "/usr/lib/soperator/slurm-client"
#endif

/* Below the cache: the helper's store (its owner's), and root's own
 * directory for named containers and the build's mount point. */
#define STORE "store"
#define CONTAINERS "containers"
#define BUILD CONTAINERS "/.build"
#define MAX_HELPER_OUTPUT (1 << 20)
#define MAX_ETC_FILE (1 << 20)

/* ---- small helpers -------------------------------------------------- */

static void set_error(struct sc_container *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct sc_container *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

/* snprintf that says whether it all fit: 0, or -1 (out truncated). */
static int sfmt(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int sfmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

static int join_path(char *out, size_t len, const char *a, const char *b)
{
	return sfmt(out, len, "%s/%s", a, b);
}

/* mkdir path (not following a symlink) owned by uid:gid with mode; an
 * existing one must be a real directory, and is given that owner and mode. */
static int ensure_dir(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	int fd;

	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	close(fd);
	return 0;
}

/* mkdir -p of an administrator's path (its parents root's, 0755). */
static int make_parents(const char *path)
{
	char buf[PATH_MAX];

	if (sfmt(buf, sizeof(buf), "%s", path) < 0)
		return -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

static void free_env(struct sc_container *c)
{
	for (size_t i = 0; i < c->nenv; i++)
		free(c->env[i]);
	free(c->env);
	c->env = NULL;
	c->nenv = 0;
}

static int add_env(struct sc_container *c, const char *kv)
{
	char **grown = realloc(c->env, (c->nenv + 1) * sizeof(*c->env));

	if (!grown)
		return -1;
	c->env = grown;
	if (!(c->env[c->nenv] = strdup(kv)))
		return -1;
	c->nenv++;
	return 0;
}

/* Read all of fd (at most max bytes, NUL-terminated) into a new buffer. */
static char *read_all(int fd, size_t max)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *grown;

			if (cap >= max)
				break;
			cap *= 2;
			grown = realloc(buf, cap + 1);
			if (!grown) {
				free(buf);
				return NULL;
			}
			buf = grown;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

/* ---- the helper: pull and unpack, as the cache's owner ------------------ */

/* The registry credentials in a memfd the helper reads as fd 3 (it may not
 * read the Secret's file), or -1 when there are none. */
static int auth_memfd(const struct sc_container_options *co,
		      struct sc_container *c)
{
	char *data;
	int fd, mfd;
	size_t len;

	if (!co->auth)
		return -1;
	/* Links followed: a Secret volume's file is a link into its ..data
	 * (the kubelet's atomic writer), in a directory only root writes. */
	fd = open(co->auth, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			sc_error("registry credentials %s: %s", co->auth,
				 strerror(errno));
		return -1;
	}
	data = read_all(fd, 1 << 20);
	close(fd);
	if (!data)
		return -1;
	len = strlen(data);
	mfd = memfd_create("registry-auth", MFD_CLOEXEC);
	if (mfd < 0 || write(mfd, data, len) != (ssize_t)len) {
		set_error(c, "cannot hand over the registry credentials: %s",
			  strerror(errno));
		if (mfd >= 0)
			close(mfd);
		mfd = -1;
	}
	explicit_bzero(data, len);
	free(data);
	return mfd;
}

/* Digests of this node's named containers, which no pull may evict: the
 * "digest" lines of containers/<job>/<name>.result. */
static size_t in_use_digests(const char *cache, char digests[][72],
			     size_t max)
{
	char dir[PATH_MAX], sub[PATH_MAX * 2], file[PATH_MAX * 3], line[256];
	struct dirent *job, *ent;
	size_t n = 0;
	DIR *top, *d;

	if (join_path(dir, sizeof(dir), cache, CONTAINERS) < 0 ||
	    !(top = opendir(dir)))
		return 0;
	while (n < max && (job = readdir(top))) {
		if (job->d_name[0] == '.')
			continue;
		sfmt(sub, sizeof(sub), "%s/%s", dir, job->d_name);
		if (!(d = opendir(sub)))
			continue;
		while (n < max && (ent = readdir(d))) {
			size_t len = strlen(ent->d_name);
			FILE *f;

			if (len < 8 || strcmp(ent->d_name + len - 7, ".result"))
				continue;
			sfmt(file, sizeof(file), "%s/%s", sub, ent->d_name);
			if (!(f = fopen(file, "re")))
				continue;
			while (n < max && fgets(line, sizeof(line), f))
				if (sscanf(line, "digest %71s", digests[n]) ==
				    1)
					n++;
			fclose(f);
		}
		closedir(d);
	}
	closedir(top);
	return n;
}

/* In the helper's child: no capability, no way to gain one, the cache
 * owner's ids, a clean environment; fd 3 the credentials. Never returns. */
static void exec_helper(const struct sc_container_options *co, int out,
			int err, int authfd, char *const argv[])
{
	char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			      "LANG=C.UTF-8", NULL};
	char store[PATH_MAX];
	sigset_t all;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
	    dup2(err, 2) < 0)
		_exit(126);
	if (authfd >= 0) {
		if (dup2(authfd, 3) < 0)
			_exit(126);
	} else {
		close(3);
	}
	if (syscall(SYS_close_range, 4U, ~0U, 0) < 0)
		for (int fd = 4; fd < 1024; fd++)
			close(fd);
	if (setgroups(0, NULL) < 0 || setresgid(co->owner, co->owner,
						 co->owner) < 0 ||
	    setresuid(co->owner, co->owner, co->owner) < 0 ||
	    getuid() != co->owner || geteuid() != co->owner)
		_exit(126);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		_exit(126);
	if (join_path(store, sizeof(store), co->cache, STORE) < 0 ||
	    chdir(store) < 0)
		_exit(126);
	execve(co->helper, argv, envp);
	_exit(127);
}

/* Run "helper pull ... ref"; its stdout (the result lines) or NULL with
 * c->error set. Its log lines go to slurmd's log. */
static char *run_helper(const struct sc_options *o, const char *ref,
			struct sc_container *c)
{
	const struct sc_container_options *co = &o->container;
	char digests[64][72], limit[32], store[PATH_MAX];
	char *argv[8 + 2 * 64], *out = NULL, *errs = NULL;
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, authfd, status = 0;
	size_t n = in_use_digests(co->cache, digests, 64), argc = 0;
	pid_t pid;

	authfd = auth_memfd(co, c);
	if (c->error[0])
		return NULL;
	sfmt(limit, sizeof(limit), "%llu", co->cache_size);
	if (join_path(store, sizeof(store), co->cache, STORE) < 0) {
		set_error(c, "cache path too long");
		goto out;
	}
	argv[argc++] = (char *)"soperator-images";
	argv[argc++] = (char *)"pull";
	argv[argc++] = (char *)"--cache";
	argv[argc++] = store;
	argv[argc++] = (char *)"--limit";
	argv[argc++] = limit;
	if (authfd >= 0)
		argv[argc++] = (char *)"--auth-fd";
	for (size_t i = 0; i < n; i++) {
		argv[argc++] = (char *)"--in-use";
		argv[argc++] = digests[i];
	}
	argv[argc++] = (char *)ref;
	argv[argc] = NULL;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		set_error(c, "pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		set_error(c, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		exec_helper(co, po[1], pe[1], authfd, argv);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	{
		/* both pipes at once: the helper may fill either */
		struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
		size_t lens[2] = {0, 0}, caps[2] = {4096, 4096};
		char *bufs[2] = {malloc(4097), malloc(4097)};
		int open_fds = 2;

		while (bufs[0] && bufs[1] && open_fds > 0) {
			if (poll(fds, 2, -1) < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			for (int i = 0; i < 2; i++) {
				ssize_t r;

				if (fds[i].fd < 0 || !fds[i].revents)
					continue;
				if (lens[i] == caps[i] &&
				    caps[i] < MAX_HELPER_OUTPUT) {
					char *g = realloc(bufs[i],
							  caps[i] * 2 + 1);
					if (g) {
						bufs[i] = g;
						caps[i] *= 2;
					}
				}
				if (lens[i] == caps[i]) {
					char sink[4096];

					r = read(fds[i].fd, sink, sizeof(sink));
				} else {
					r = read(fds[i].fd, bufs[i] + lens[i],
						 caps[i] - lens[i]);
					if (r > 0)
						lens[i] += (size_t)r;
				}
				if (r == 0 || (r < 0 && errno != EINTR)) {
					fds[i].fd = -1;
					open_fds--;
				}
			}
		}
		for (int i = 0; i < 2; i++)
			if (bufs[i])
				bufs[i][lens[i]] = '\0';
		out = bufs[0];
		errs = bufs[1];
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (errs) {
		char *save = NULL;

		for (char *line = strtok_r(errs, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, "error: ", 7) == 0)
				set_error(c, "%s", line + 7);
			else
				sc_info("%s", line);
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!c->error[0]) {
			if (WIFEXITED(status) && WEXITSTATUS(status) >= 126)
				set_error(c,
					  "the image helper %s could not run "
					  "(exit %d)",
					  co->helper, WEXITSTATUS(status));
			else
				set_error(c, "the image helper failed");
		}
		free(out);
		out = NULL;
	}
out:
	free(errs);
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	if (authfd >= 0)
		close(authfd);
	return out;
}

/* The helper's result lines into c (digest, workdir, env, pulled). */
static int parse_result(char *text, struct sc_container *c)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "digest ", 7) == 0)
			sfmt(c->digest, sizeof(c->digest), "%s", line + 7);
		else if (strncmp(line, "workdir ", 8) == 0)
			sfmt(c->workdir, sizeof(c->workdir), "%s",
				 line + 8);
		else if (strncmp(line, "env ", 4) == 0 &&
			 add_env(c, line + 4) < 0)
			return -1;
		else if (strncmp(line, "pulled ", 7) == 0)
			c->pulled = true;
		else if (strncmp(line, "image ", 6) == 0)
			sfmt(c->image, sizeof(c->image), "%s", line + 6);
		else if (strncmp(line, "root ", 5) == 0)
			sscanf(line + 5, "%llu %llu", &c->root_dev,
			       &c->root_ino);
	}
	if (strncmp(c->digest, "sha256:", 7) != 0 || strlen(c->digest) != 71 ||
	    strspn(c->digest + 7, "0123456789abcdef") != 64)
		return -1;
	return 0;
}

/* ---- building the container (in a child of slurmstepd, root) ---------- */

/* An entry of the container's /etc/passwd or /etc/group that replaces the
 * image's entries of that name or id. */
struct etc_entry {
	char name[256];
	unsigned id;
};

struct user_info {
	char name[256];
	char home[PATH_MAX];
	char shell[PATH_MAX];
	char gecos[256];
	char passwd_line[2048];
	char group_lines[8192];
	/* The node's SlurmUser, when it is neither root nor the job's user:
	 * a Slurm client in the container (srun in a batch script) refuses
	 * to run unless that name resolves there ("Invalid user for
	 * SlurmUser"). Its lines come from the node, as the user's. */
	bool has_slurm_user;
	struct etc_entry slurm_user, slurm_group;
	char slurm_passwd_line[1024];
	char slurm_group_line[512];
};

/* The node's SlurmUser (slurm.conf in the node's configuration directory,
 * the file a Slurm client in the container reads) into u; nothing when
 * slurm.conf names root, the job's user or a user the node does not know. */
static void slurm_user_info(const struct sc_options *o,
			    const struct sc_job *job, struct user_info *u)
{
	char path[PATH_MAX], name[256], buf[16384], *text = NULL;
	struct passwd pw, *found = NULL;
	struct group gr, *gfound = NULL;
	int fd;

	if (!o->container.slurm_conf ||
	    join_path(path, sizeof(path), o->container.slurm_conf,
		      "slurm.conf") < 0)
		return;
	/* the administrator's file (a ConfigMap's link on a worker pod) */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		text = read_all(fd, MAX_ETC_FILE);
		close(fd);
	}
	if (!text)
		return;
	if (sc_slurm_conf_user(text, name, sizeof(name)) < 0) {
		free(text);
		return;
	}
	free(text);
	if (getpwnam_r(name, &pw, buf, sizeof(buf), &found) != 0 || !found) {
		/* Slurm also takes a uid */
		char *end;
		unsigned long id = strtoul(name, &end, 10);

		if (*end || end == name ||
		    getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &found) != 0 ||
		    !found)
			return;
	}
	if (pw.pw_uid == 0 || pw.pw_uid == job->uid)
		return;
	sfmt(u->slurm_user.name, sizeof(u->slurm_user.name), "%s",
	     pw.pw_name);
	u->slurm_user.id = (unsigned)pw.pw_uid;
	/* no home and no shell in the container: it only has to resolve */
	if (sfmt(u->slurm_passwd_line, sizeof(u->slurm_passwd_line),
		 "%s:x:%u:%u:SlurmUser:/nonexistent:/usr/sbin/nologin\n",
		 pw.pw_name, (unsigned)pw.pw_uid, (unsigned)pw.pw_gid) < 0)
		return;
	u->slurm_group.id = (unsigned)pw.pw_gid;
	if (getgrgid_r(pw.pw_gid, &gr, buf, sizeof(buf), &gfound) == 0 &&
	    gfound && pw.pw_gid != job->gid) {
		bool jobs = false;

		for (int i = 0; i < job->ngids; i++)
			jobs = jobs || job->gids[i] == pw.pw_gid;
		if (!jobs) {
			sfmt(u->slurm_group.name, sizeof(u->slurm_group.name),
			     "%s", gr.gr_name);
			sfmt(u->slurm_group_line,
			     sizeof(u->slurm_group_line), "%s:x:%u:\n",
			     gr.gr_name, (unsigned)pw.pw_gid);
		}
	}
	u->has_slurm_user = true;
}

static int user_info(const struct sc_options *o, const struct sc_job *job,
		     struct user_info *u)
{
	struct passwd pw, *found = NULL;
	struct group gr, *gfound = NULL;
	char buf[16384];
	size_t used = 0;

	memset(u, 0, sizeof(*u));
	slurm_user_info(o, job, u);
	if (getpwuid_r(job->uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
		return -1;
	sfmt(u->name, sizeof(u->name), "%s", pw.pw_name);
	sfmt(u->home, sizeof(u->home), "%s", pw.pw_dir ? pw.pw_dir : "/");
	sfmt(u->shell, sizeof(u->shell), "%s",
		 pw.pw_shell ? pw.pw_shell : "/bin/sh");
	sfmt(u->gecos, sizeof(u->gecos), "%s",
		 pw.pw_gecos ? pw.pw_gecos : "");
	for (char *p = u->gecos; *p; p++)
		if (*p == ':' || *p == '\n')
			*p = ' ';
	/* the group lines: the primary group, then the others, by name */
	for (int i = -1; i < job->ngids; i++) {
		gid_t gid = i < 0 ? job->gid : job->gids[i];

		if (i >= 0 && gid == job->gid)
			continue;
		if (getgrgid_r(gid, &gr, buf, sizeof(buf), &gfound) != 0 ||
		    !gfound)
			continue;
		/* sfmt says only whether it fit: the length is strlen's */
		if (sfmt(u->group_lines + used, sizeof(u->group_lines) - used,
			 "%s:x:%u:%s\n", gr.gr_name, (unsigned)gid,
			 u->name) < 0) {
			u->group_lines[used] = '\0';
			break;
		}
		used += strlen(u->group_lines + used);
	}
	return 0;
}

/* What a failure in the builder child says: written to the parent. */
static char build_error[1024];

static int build_fail(const char *what, const char *path, int err)
{
	sfmt(build_error, sizeof(build_error), "%s %s: %s", what, path,
		 strerror(err));
	return -1;
}

/* A shared helper of jail.c failed: it recorded why (sc_fail). */
static int build_failed(void)
{
	sfmt(build_error, sizeof(build_error), "%s",
		 sc_last_error[0] ? sc_last_error : "failed");
	return -1;
}

/* The user namespace that maps the cache owner's ids to the job's, for the
 * idmapped image; -1 where the kernel offers none (the image then shows as
 * the owner's). */
static int owner_to_job_userns(uid_t owner, const struct sc_job *job)
{
	char path[64], map[64];
	int p[2], fd = -1, ok = 1;
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		if (write(p[1], "u", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		ok = 0;
	close(p[0]);
	for (int i = 0; ok && i < 2; i++) {
		int mfd;

		sfmt(path, sizeof(path), "/proc/%d/%s", (int)pid,
			 i ? "gid_map" : "uid_map");
		sfmt(map, sizeof(map), "%u %u 1\n", (unsigned)owner,
			 (unsigned)(i ? job->gid : job->uid));
		mfd = open(path, O_WRONLY | O_CLOEXEC);
		if (mfd < 0 ||
		    write(mfd, map, strlen(map)) != (ssize_t)strlen(map))
			ok = 0;
		if (mfd >= 0)
			close(mfd);
	}
	if (ok) {
		sfmt(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return fd;
}

/* The image's root at dir: read-only, nosuid, nodev, and (userns >= 0) its
 * owner's files shown as the job user's. */
static int mount_image(const char *rootfs, const char *dir, int userns,
		       bool *idmapped)
{
	struct sc_mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
			    MOUNT_ATTR_NODEV};
	int tree;

	*idmapped = false;
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, rootfs,
			    OPEN_TREE_CLONE | O_CLOEXEC);
	if (tree < 0)
		return build_fail("open the image", rootfs, errno);
	if (userns >= 0) {
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns;
		if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr,
			    sizeof(attr)) == 0)
			*idmapped = true;
		attr.attr_set &= ~(uint64_t)MOUNT_ATTR_IDMAP;
		attr.userns_fd = 0;
	}
	if (!*idmapped && syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH,
				  &attr, sizeof(attr)) < 0) {
		close(tree);
		return build_fail("make read-only the image", rootfs, errno);
	}
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dir,
		    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		close(tree);
		return build_fail("mount the image", rootfs, errno);
	}
	close(tree);
	return 0;
}

/* A file at path below rootfd that a bind can cover: a symlink there is
 * replaced by an empty file (only in the container's own upper layer). */
static int file_mountpoint(int rootfd, const char *path)
{
	char dir[PATH_MAX], *slash;
	struct stat st;
	int dfd, fd;

	sfmt(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	*slash = '\0';
	dfd = sc_open_beneath(rootfd, dir[0] ? dir : "/", true, SC_KIND_DIR);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode) && unlinkat(dfd, slash + 1, 0) < 0) {
		int err = errno;

		close(dfd);
		return -err;
	}
	close(dfd);
	fd = sc_open_beneath(rootfd, path, true, SC_KIND_FILE);
	return fd;
}

/* Bind the file src (a node path, or /proc/self/fd/N) over path. */
static int bind_file(const char *root, int rootfd, const char *src,
		     const char *path, bool readonly)
{
	char shown[PATH_MAX * 2];
	int fd;

	sfmt(shown, sizeof(shown), "%s%s", root, path);
	fd = file_mountpoint(rootfd, path);
	if (fd < 0)
		return build_fail("mountpoint", shown, -fd);
	if (mount(src, sc_fd_path(fd).s, NULL, MS_BIND, NULL) < 0) {
		int err = errno;

		close(fd);
		return build_fail("bind mount onto", shown, err);
	}
	close(fd);
	if (!readonly)
		return 0;
	/* reopen: the path now leads to the new mount */
	fd = sc_open_beneath(rootfd, path, false, SC_KIND_FILE);
	if (fd < 0)
		return build_fail("reopen mountpoint", shown, -fd);
	if (mount(NULL, sc_fd_path(fd).s, NULL,
		  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0) {
		int err = errno;

		close(fd);
		return build_fail("read-only remount of", shown, err);
	}
	close(fd);
	return 0;
}

/* The image's /etc/<name> (a regular file, at most 1 MiB; "" when it has
 * none or something else there), without the lines whose field 0 is the
 * name or field 2 the id of one of the n entries in drop (an empty name
 * matches no line), plus add. Written into dir/<name>. The image's file is
 * only read and filtered, never run or followed out of the image. */
static int etc_file(int rootfd, const char *dir, const char *name,
		    const struct etc_entry *drop, size_t n, const char *add)
{
	char path[PATH_MAX], rel[64], *text = NULL, *save = NULL, *line;
	int fd, out;
	struct stat st;
	FILE *f;

	sfmt(rel, sizeof(rel), "etc/%s", name);
	fd = sc_open_beneath(rootfd, rel, false, SC_KIND_FILE);
	if (fd >= 0) {
		int rfd = open(sc_fd_path(fd).s, O_RDONLY | O_CLOEXEC);

		if (rfd >= 0 && fstat(rfd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_size <= MAX_ETC_FILE)
			text = read_all(rfd, MAX_ETC_FILE);
		if (rfd >= 0)
			close(rfd);
		close(fd);
	}
	if (join_path(path, sizeof(path), dir, name) < 0)
		return build_fail("path of", name, ENAMETOOLONG);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		   0644);
	if (out < 0 || !(f = fdopen(out, "w"))) {
		free(text);
		if (out >= 0)
			close(out);
		return build_fail("write", path, errno);
	}
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char first[256] = "";
		unsigned id = 0;
		const char *third;

		sscanf(line, "%255[^:]", first);
		third = strchr(line, ':');
		third = third ? strchr(third + 1, ':') : NULL;
		bool dropped = false;

		if (third)
			id = (unsigned)strtoul(third + 1, NULL, 10);
		for (size_t i = 0; i < n && !dropped; i++)
			dropped = (drop[i].name[0] &&
				   strcmp(first, drop[i].name) == 0) ||
				  (third && id == drop[i].id);
		if (dropped)
			continue;
		fprintf(f, "%s\n", line);
	}
	fputs(add, f);
	free(text);
	if (fclose(f) != 0)
		return build_fail("write", path, errno);
	return 0;
}

/* Open path in the jail as the job's user would reach it from the jail's
 * root (symlinks followed, never out of the jail), as an O_PATH fd. */
static int open_in_jail_as_user(int jailfd, const char *path,
				const struct sc_job *job)
{
	struct sc_open_how how = {.flags = O_PATH | O_CLOEXEC,
				  .resolve = RESOLVE_IN_ROOT |
					     RESOLVE_NO_MAGICLINKS};
	struct sc_saved_creds saved = {.ngroups = -1};
	int fd, err;

	if (sc_become_job_fs(job, &saved) < 0) {
		sc_drop_job_fs(&saved);
		return -EPERM;
	}
	fd = (int)syscall(SYS_openat2, jailfd, path, &how, sizeof(how));
	err = errno;
	if (fd >= 0) {
		/* searched, now may it be read? (a 0700 directory of another
		 * user's opens as O_PATH, but not for reading) */
		struct stat st;

		if (fstat(fd, &st) < 0 ||
		    (S_ISDIR(st.st_mode) &&
		     faccessat(fd, "", R_OK | X_OK, AT_EMPTY_PATH) < 0 &&
		     errno != EINVAL)) {
			err = errno;
			close(fd);
			fd = -1;
		}
	}
	if (sc_drop_job_fs(&saved) < 0) {
		if (fd >= 0)
			close(fd);
		return -EPERM;
	}
	return fd >= 0 ? fd : -err;
}

/* Bind the jail's src (reached as the user) onto dst in the container. */
static int bind_from_jail(const char *root, int rootfd, int jailfd,
			  const char *src, const char *dst, bool readonly,
			  const struct sc_job *job, bool optional)
{
	char shown[PATH_MAX * 2];
	struct stat st;
	int sfd, tfd;

	sfmt(shown, sizeof(shown), "%s%s", root, dst);
	sfd = open_in_jail_as_user(jailfd, src, job);
	if (sfd < 0) {
		if (optional && sfd == -ENOENT)
			return 0;
		return build_fail("mount source (in the jail)", src, -sfd);
	}
	if (fstat(sfd, &st) < 0) {
		close(sfd);
		return build_fail("mount source (in the jail)", src, errno);
	}
	tfd = sc_open_beneath(rootfd, dst, true,
			      S_ISDIR(st.st_mode) ? SC_KIND_DIR : SC_KIND_FILE);
	if (tfd < 0) {
		close(sfd);
		return build_fail("mountpoint", shown, -tfd);
	}
	if (mount(sc_fd_path(sfd).s, sc_fd_path(tfd).s, NULL, MS_BIND | MS_REC,
		  NULL) < 0) {
		int err = errno;

		close(sfd);
		close(tfd);
		return build_fail("bind mount onto", shown, err);
	}
	close(sfd);
	close(tfd);
	if (readonly) {
		tfd = sc_open_beneath(rootfd, dst, false,
				      S_ISDIR(st.st_mode) ? SC_KIND_DIR
							  : SC_KIND_FILE);
		if (tfd < 0)
			return build_fail("reopen mountpoint", shown, -tfd);
		if (sc_make_readonly(tfd, shown) < 0) {
			close(tfd);
			return build_failed();
		}
		close(tfd);
	}
	return 0;
}

/* The path of this plugin's .so (plugstack.conf names it: a srun in the
 * container loads it from there). */
static const char *plugin_path(void)
{
	static Dl_info info;

	if (dladdr((void *)&sc_container_prepare, &info) && info.dli_fname &&
	    info.dli_fname[0] == '/')
		return info.dli_fname;
	return NULL;
}

/* Bind the node's src at the same path in the container, read-only, unless
 * the image has something there (its own Slurm, say). */
static int bind_if_missing(const char *root, int rootfd, const char *src)
{
	struct stat st;
	int fd;

	if (stat(src, &st) < 0)
		return 0;
	fd = sc_open_beneath(rootfd, src, false,
			     S_ISDIR(st.st_mode) ? SC_KIND_DIR : SC_KIND_FILE);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (fd == -ELOOP)
		return 0; /* the image's own link: its business */
	if (sc_bind_into(root, rootfd, src, src, true, true) < 0)
		return build_failed();
	return 0;
}

struct build {
	const struct sc_options *o;
	const struct sc_container_args *a;
	const struct sc_job *job;
	const char *rootfs; /* the cached image's root */
	const char *base;   /* the build's mount point */
	struct user_info user;
};

/*
 * In the builder child: a new mount namespace whose root is the container.
 * On error build_error says why. The caller then keeps the namespace by
 * opening /proc/<child>/ns/mnt.
 */
static int build_container(const struct build *b)
{
	char lower[PATH_MAX], upper[PATH_MAX], work[PATH_MAX], root[PATH_MAX];
	char etc[PATH_MAX], opts[PATH_MAX * 4], src[PATH_MAX * 2];
	const struct sc_options *o = b->o;
	const struct sc_job *job = b->job;
	int rootfd = -1, jailfd = -1, userns;
	const char *what;
	bool idmapped = false;
	struct stat st;

	/* above the step's: the parent keeps a named one by binding it */
	if (sc_unshare_mount_ns_above(&what) < 0)
		return build_fail(what, "the container", errno);
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return build_fail("make / a recursive slave for", "the "
			"container", errno);
	if (mount("tmpfs", b->base, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0700") < 0)
		return build_fail("mount a tmpfs on", b->base, errno);
	if (join_path(lower, sizeof(lower), b->base, "lower") < 0 ||
	    join_path(upper, sizeof(upper), b->base, "upper") < 0 ||
	    join_path(work, sizeof(work), b->base, "work") < 0 ||
	    join_path(root, sizeof(root), b->base, "root") < 0 ||
	    join_path(etc, sizeof(etc), b->base, "etc") < 0)
		return build_fail("paths below", b->base, ENAMETOOLONG);
	if (mkdir(lower, 0755) < 0 || mkdir(upper, 0755) < 0 ||
	    mkdir(work, 0700) < 0 || mkdir(root, 0755) < 0 ||
	    mkdir(etc, 0755) < 0)
		return build_fail("directories below", b->base, errno);
	userns = owner_to_job_userns(o->container.owner, job);
	if (mount_image(b->rootfs, lower, userns, &idmapped) < 0)
		return -1;
	if (userns >= 0)
		close(userns);
	/* the upper layer's root is the container's "/": the user's when the
	 * image shows as theirs, else as the image's root */
	if (stat(lower, &st) < 0 ||
	    chown(upper, idmapped ? job->uid : 0, idmapped ? job->gid : 0) <
		    0 ||
	    chmod(upper, st.st_mode & 07777) < 0)
		return build_fail("the upper layer", upper, errno);
	sfmt(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s",
		 lower, upper, work);
	if (mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return build_fail("mount the container's root on", root,
				  errno);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return build_fail("open", root, errno);
	jailfd = open(o->jail, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (jailfd < 0)
		return build_fail("open the jail", o->jail, errno);

	/* what every task of the node has: /proc, /dev, /sys, /tmp, /run,
	 * the batch script */
	if (sc_mount_node_paths(root, rootfd) < 0 ||
	    sc_bind_spool(o, root, rootfd, job) < 0)
		return build_failed();
	/* the pod's names and resolver, as the jail's */
	for (int i = 0; i < 2; i++) {
		const char *f = i ? "/etc/resolv.conf" : "/etc/hosts";

		if (stat(f, &st) == 0 && S_ISREG(st.st_mode) &&
		    bind_file(root, rootfd, f, f, true) < 0)
			return -1;
	}
	/* the job's user and groups, and the node's SlurmUser (a Slurm client
	 * in the container needs its name), with the image's others */
	{
		const struct user_info *u = &b->user;
		struct etc_entry users[2] = {{"", job->uid}}, groups[1] = {
			{"", (unsigned)-1}};
		char add[2300 + sizeof(u->slurm_passwd_line)];
		char gadd[sizeof(u->group_lines) + sizeof(u->slurm_group_line)];
		size_t nusers = 1, ngroups = 0;

		sfmt(users[0].name, sizeof(users[0].name), "%s", u->name);
		sfmt(add, sizeof(add), "%s:x:%u:%u:%s:%s:%s\n%s", u->name,
		     (unsigned)job->uid, (unsigned)job->gid, u->gecos, u->home,
		     "/bin/sh", u->has_slurm_user ? u->slurm_passwd_line : "");
		sfmt(gadd, sizeof(gadd), "%s%s", u->group_lines,
		     u->has_slurm_user ? u->slurm_group_line : "");
		if (u->has_slurm_user) {
			users[nusers++] = u->slurm_user;
			if (u->slurm_group.name[0])
				groups[ngroups++] = u->slurm_group;
		}
		if (etc_file(rootfd, etc, "passwd", users, nusers, add) < 0 ||
		    etc_file(rootfd, etc, "group", groups, ngroups, gadd) < 0)
			return -1;
		if (join_path(src, sizeof(src), etc, "passwd") < 0 ||
		    bind_file(root, rootfd, src, "/etc/passwd", true) < 0 ||
		    join_path(src, sizeof(src), etc, "group") < 0 ||
		    bind_file(root, rootfd, src, "/etc/group", true) < 0)
			return -1;
	}
	/* the user's home, from the jail */
	if (b->a->mount_home != 0 && b->user.home[0] == '/' &&
	    strcmp(b->user.home, "/") != 0 &&
	    bind_from_jail(root, rootfd, jailfd, b->user.home, b->user.home,
			   false, job, true) < 0)
		return -1;
	/* the cluster's paths for every container (the jail's sub-mounts) */
	for (size_t i = 0; i < o->container.nbinds; i++) {
		const struct sc_bind *bd = &o->container.binds[i];

		if (sc_bind_into(root, rootfd, bd->src, bd->dst, bd->readonly,
				 bd->optional) < 0)
			return build_failed();
	}
	/* the node's Slurm clients (launchers in the node's /usr run them
	 * with the node's loader), its configuration, its plugins */
	if (sc_bind_into(root, rootfd, "/usr", SC_CONTAINER_NODE_USR, true,
			 false) < 0 ||
	    sc_bind_into(root, rootfd, o->container.slurm_conf,
			 SC_CONTAINER_SLURM_CONF, true, true) < 0)
		return build_failed();
	if (bind_if_missing(root, rootfd, SC_SLURM_PLUGIN_DIR) < 0 ||
	    (plugin_path() && bind_if_missing(root, rootfd, plugin_path()) < 0))
		return -1;
	/* the user's mounts, from the jail, reached as the user */
	for (size_t i = 0; i < b->a->nmounts; i++) {
		const struct sc_mount *m = &b->a->mounts[i];

		if (bind_from_jail(root, rootfd, jailfd, m->src, m->dst,
				   m->readonly, job, false) < 0)
			return -1;
	}
	if (b->a->writable == 0 &&
	    mount(NULL, root, NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0)
		return build_fail("make read-only", root, errno);
	close(jailfd);
	/* enter it: new root and old root on "."; then drop the old one */
	if (fchdir(rootfd) < 0)
		return build_fail("chdir to", root, errno);
	close(rootfd);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return build_fail("pivot_root to", root, errno);
	if (umount2(".", MNT_DETACH) < 0)
		return build_fail("detach the node's root under", root, errno);
	if (chdir("/") < 0)
		return build_fail("chdir to / in", root, errno);
	return 0;
}

/* Where a named container's namespace is kept: containers/<job>/<name>. */
static int named_path(const struct sc_options *o, uint32_t job_id,
		      const char *name, const char *suffix, char *out,
		      size_t len)
{
	return sfmt(out, len, "%s/%s/%u%s%s%s", o->container.cache,
		    CONTAINERS, job_id, name ? "/" : "", name ? name : "",
		    suffix);
}

/* Fork the builder; keep its namespace in c->nsfd (and, named, pinned on
 * pin). */
static int build(const struct build *b, const char *pin,
		 struct sc_container *c)
{
	int ready[2], go[2];
	char buf[1100] = "", path[64];
	ssize_t n;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		set_error(c, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		set_error(c, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char ok = 'x';

		/* no logging from here: another thread of slurmstepd may
		 * have held the logger's lock when it forked */
		sc_log_quiet = true;
		close(ready[0]);
		close(go[1]);
		if (build_container(b) < 0) {
			if (write(ready[1], build_error, strlen(build_error)) <
			    0)
				_exit(1);
			_exit(1);
		}
		/* The parent opens /proc/<this>/ns/mnt once it reads "ok":
		 * without CAP_SYS_PTRACE (a worker pod has none) only a
		 * dumpable process's, and slurmstepd's id changes left it not
		 * dumpable. So before "ok" (after it, the parent could be
		 * first: EACCES). Still root's: no user may open or trace it. */
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
			_exit(1);
		{
			struct stat st;
			char msg[64];

			if (stat("/", &st) < 0)
				_exit(1);
			sfmt(msg, sizeof(msg), "ok %llu %llu",
			     (unsigned long long)st.st_dev,
			     (unsigned long long)st.st_ino);
			if (write(ready[1], msg, strlen(msg)) !=
			    (ssize_t)strlen(msg))
				_exit(1);
		}
		/* until the parent has the namespace */
		if (read(go[0], &ok, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	n = read(ready[0], buf, sizeof(buf) - 1);
	close(ready[0]);
	if (n > 3 && strncmp(buf, "ok ", 3) == 0) {
		buf[n] = '\0';
		sscanf(buf + 3, "%llu %llu", &c->root_dev, &c->root_ino);
		sfmt(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
		c->nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (c->nsfd < 0)
			set_error(c, "open the container's namespace: %s",
				  strerror(errno));
		else if (pin) {
			int fd = open(pin, O_WRONLY | O_CREAT | O_CLOEXEC |
						   O_NOFOLLOW,
				      0600);

			if (fd < 0 || mount(path, pin, NULL, MS_BIND, NULL) < 0)
				set_error(c, "keep the named container %s: %s",
					  pin, strerror(errno));
			if (fd >= 0)
				close(fd);
		}
	} else {
		buf[n > 0 ? n : 0] = '\0';
		set_error(c, "%s",
			  buf[0] ? buf : "the container's build failed");
	}
	close(go[1]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return c->error[0] ? -1 : 0;
}

/* A shared lock on the image for as long as the container lives here, so
 * that no pull evicts it; the image must still be there once held. */
static int lock_image(const char *store, struct sc_container *c)
{
	char lock[PATH_MAX], rootfs[PATH_MAX];
	struct stat st;

	sfmt(lock, sizeof(lock), "%s/images/%s.lock", store,
		 c->digest + 7);
	sfmt(rootfs, sizeof(rootfs), "%s/images/%s/rootfs", store,
		 c->digest + 7);
	c->lockfd = open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (c->lockfd < 0 || flock(c->lockfd, LOCK_SH) < 0 ||
	    lstat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		set_error(c, "the cached image went away meanwhile (%s): try "
			     "again",
			  strerror(errno));
		return -1;
	}
	return 0;
}

static int save_result(const char *path, const struct sc_container *c)
{
	FILE *f;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
				    O_CLOEXEC,
		      0600);

	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fprintf(f, "digest %s\nimage %s\nroot %llu %llu\n", c->digest, c->image,
		c->root_dev, c->root_ino);
	if (c->workdir[0])
		fprintf(f, "workdir %s\n", c->workdir);
	for (size_t i = 0; i < c->nenv; i++)
		fprintf(f, "env %s\n", c->env[i]);
	return fclose(f);
}

/* A named container of this job already kept on this node: join it. */
static int reuse_named(const char *pin, const char *result,
		       struct sc_container *c)
{
	char *text;
	int fd;

	c->nsfd = open(pin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (c->nsfd < 0)
		return -1;
	fd = open(result, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	text = fd >= 0 ? read_all(fd, MAX_HELPER_OUTPUT) : NULL;
	if (fd >= 0)
		close(fd);
	if (!text || parse_result(text, c) < 0) {
		free(text);
		set_error(c, "the named container's record %s is unreadable",
			  result);
		return 0;
	}
	free(text);
	return 0;
}

void sc_container_prepare(const struct sc_options *o,
			  const struct sc_container_args *a,
			  const struct sc_step *step, struct sc_container *c)
{
	const struct sc_container_options *co = &o->container;
	char store[PATH_MAX], dir[PATH_MAX], pin[PATH_MAX], result[PATH_MAX];
	char base[PATH_MAX], rootfs[PATH_MAX];
	struct timespec t0, t1;
	struct build b = {0};
	char *lines;

	memset(c, 0, sizeof(*c));
	c->nsfd = c->lockfd = -1;
	c->wanted = a->image || a->name;
	if (!c->wanted)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!co->cache) {
		set_error(c, "container jobs are not enabled on this cluster");
		return;
	}
	if (a->image)
		sc_image_ref_format(&a->ref, c->image, sizeof(c->image));
	if (step->job->uid == co->owner || step->job->uid == 0) {
		set_error(c, "container steps do not run as %s",
			  step->job->uid ? "the image cache's owner" : "root");
		return;
	}
	if (a->image && !sc_image_ref_allowed(&a->ref, co->registries,
					      co->nregistries)) {
		set_error(c, "the registry is not one this cluster's jobs may "
			     "pull from");
		return;
	}
	if (join_path(store, sizeof(store), co->cache, STORE) < 0 ||
	    join_path(dir, sizeof(dir), co->cache, CONTAINERS) < 0 ||
	    join_path(base, sizeof(base), co->cache, BUILD) < 0) {
		set_error(c, "cache path too long");
		return;
	}
	/* root's cache directory; the store its owner's; the containers'
	 * directory root's alone */
	if (make_parents(co->cache) < 0 || ensure_dir(co->cache, 0, 0, 0755) < 0 ||
	    ensure_dir(store, co->owner, co->owner, 0755) < 0 ||
	    ensure_dir(dir, 0, 0, 0700) < 0 || ensure_dir(base, 0, 0, 0700) < 0) {
		set_error(c, "the image cache %s: %s", co->cache,
			  strerror(errno));
		return;
	}
	if (a->name) {
		if (named_path(o, step->job_id, NULL, "", pin, sizeof(pin)) <
			    0 ||
		    ensure_dir(pin, 0, 0, 0700) < 0 ||
		    named_path(o, step->job_id, a->name, ".ns", pin,
			       sizeof(pin)) < 0 ||
		    named_path(o, step->job_id, a->name, ".result", result,
			       sizeof(result)) < 0) {
			set_error(c, "named container %s: %s", a->name,
				  strerror(errno));
			return;
		}
		if (reuse_named(pin, result, c) == 0) {
			if (!c->error[0])
				lock_image(store, c);
			sc_info("step %u: joins the job's container %s (%s)",
				step->step_id, a->name, c->image);
			return;
		}
		if (!a->image) {
			set_error(c, "no container named %s in this job on this "
				     "node yet: its first step needs "
				     "--container-image",
				  a->name);
			return;
		}
	}
	lines = run_helper(o, c->image, c);
	if (!lines)
		return;
	if (parse_result(lines, c) < 0) {
		free(lines);
		set_error(c, "the image helper's answer is malformed");
		return;
	}
	free(lines);
	if (lock_image(store, c) < 0)
		return;
	if (user_info(o, step->job, &b.user) < 0) {
		set_error(c, "uid %u is unknown on this node",
			  (unsigned)step->job->uid);
		return;
	}
	sfmt(rootfs, sizeof(rootfs), "%s/images/%s/rootfs", store,
		 c->digest + 7);
	b.o = o;
	b.a = a;
	b.job = step->job;
	b.rootfs = rootfs;
	b.base = base;
	if (build(&b, a->name ? pin : NULL, c) < 0)
		return;
	if (a->name && save_result(result, c) < 0)
		set_error(c, "record the named container %s: %s", a->name,
			  strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sc_info("step %u: container of %s (%s) %s, ready in %ld ms",
		step->step_id, c->image, c->digest,
		c->pulled ? "pulled" : "cached",
		(long)((t1.tv_sec - t0.tv_sec) * 1000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000000));
}

/* PATH-like variable name: value, then add appended. */
static int append_path(spank_t sp, const char *name, const char *add)
{
	char cur[8192], val[8192 + PATH_MAX];

	if (spank_getenv(sp, name, cur, sizeof(cur)) != ESPANK_SUCCESS ||
	    !cur[0])
		sfmt(val, sizeof(val), "%s", add);
	else
		sfmt(val, sizeof(val), "%s:%s", cur, add);
	return spank_setenv(sp, name, val, 1) == ESPANK_SUCCESS ? 0 : -1;
}

int sc_container_enter(spank_t sp, const struct sc_options *o,
		       const struct sc_container_args *a,
		       struct sc_container *c)
{
	char lib[PATH_MAX], bin[PATH_MAX];
	struct stat st;

	if (c->error[0]) {
		sc_error("container image %s: %s",
			 c->image[0] ? c->image : (a->name ? a->name : "?"),
			 c->error);
		return -1;
	}
	if (setns(c->nsfd, CLONE_NEWNS) < 0)
		return sc_fail("join the container of", c->image, errno);
	/* joining a mount namespace lands in its root, which is the
	 * container's only where slurmd's own root is its namespace's (a
	 * pod's is): never run a task anywhere else */
	if (stat("/", &st) < 0 || (unsigned long long)st.st_dev != c->root_dev ||
	    (unsigned long long)st.st_ino != c->root_ino) {
		sc_error("container image %s: the container's root is not its "
			 "mount namespace's (is slurmd chrooted? container "
			 "steps need slurmd in a root of its own, as in a "
			 "pod): the task does not run",
			 c->image);
		return -1;
	}
	if (sc_drop_jail_caps() < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return sc_fail("set no_new_privs in", c->image, errno);
	/* the image's variables beat the job's, but those --container-env
	 * names (Pyxis's rule) */
	for (size_t i = 0; i < c->nenv; i++) {
		char *kv = c->env[i], *eq = strchr(kv, '='), name[256];

		if (!eq || (size_t)(eq - kv) >= sizeof(name))
			continue;
		memcpy(name, kv, (size_t)(eq - kv));
		name[eq - kv] = '\0';
		if (sc_cargs_env_kept(a, name)) {
			char cur[16];

			if (spank_getenv(sp, name, cur, sizeof(cur)) !=
			    ESPANK_ENV_NOEXIST)
				continue;
		}
		if (spank_setenv(sp, name, eq + 1, 1) != ESPANK_SUCCESS)
			return sc_fail("set the image's variable", name, EIO);
	}
	/* the node's Slurm clients, after the image's own programs */
	sfmt(bin, sizeof(bin), "%s%s", SC_CONTAINER_NODE_USR,
		 SC_SLURM_CLIENT_DIR + strlen("/usr"));
	if (append_path(sp, "PATH", bin) < 0)
		return sc_fail("set", "PATH", EIO);
	/* the node's GPU driver (docs/gpu.md: shown under /run) */
	if (o->container.driver) {
		sfmt(lib, sizeof(lib), "%s/lib", o->container.driver);
		sfmt(bin, sizeof(bin), "%s/bin", o->container.driver);
		if (stat(lib, &st) == 0 && S_ISDIR(st.st_mode) &&
		    append_path(sp, "LD_LIBRARY_PATH", lib) < 0)
			return sc_fail("set", "LD_LIBRARY_PATH", EIO);
		if (stat(bin, &st) == 0 && S_ISDIR(st.st_mode) &&
		    append_path(sp, "PATH", bin) < 0)
			return sc_fail("set", "PATH", EIO);
	}
	return 0;
}

int sc_container_chdir(const struct sc_container_args *a,
		       const struct sc_container *c, const char *step_cwd)
{
	if (a->workdir) {
		if (chdir(a->workdir) < 0)
			return sc_fail("--container-workdir", a->workdir,
				       errno);
		return 0;
	}
	/* the step's directory where the container has it (a home, a
	 * mount), else the image's own */
	if (step_cwd && chdir(step_cwd) == 0)
		return 0;
	if (c->workdir[0] && chdir(c->workdir) == 0)
		return 0;
	if (chdir("/") < 0)
		return sc_fail("chdir to / in", c->image, errno);
	return 0;
}

void sc_container_release(struct sc_container *c)
{
	if (c->nsfd >= 0)
		close(c->nsfd);
	if (c->lockfd >= 0)
		close(c->lockfd);
	c->nsfd = c->lockfd = -1;
	free_env(c);
}

void sc_container_job_end(const struct sc_options *o, uint32_t job_id)
{
	char dir[PATH_MAX], path[PATH_MAX * 2];
	struct dirent *ent;
	DIR *d;

	if (!o->container.cache ||
	    named_path(o, job_id, NULL, "", dir, sizeof(dir)) < 0 ||
	    !(d = opendir(dir)))
		return;
	while ((ent = readdir(d))) {
		size_t len = strlen(ent->d_name);

		if (ent->d_name[0] == '.')
			continue;
		sfmt(path, sizeof(path), "%s/%s", dir, ent->d_name);
		if (len > 3 && strcmp(ent->d_name + len - 3, ".ns") == 0 &&
		    umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 &&
		    errno != EINVAL)
			sc_error("release the named container %s: %s", path,
				 strerror(errno));
		if (unlink(path) < 0)
			sc_error("remove %s: %s", path, strerror(errno));
	}
	closedir(d);
	if (rmdir(dir) < 0)
		sc_error("remove %s: %s", dir, strerror(errno));
	else
		sc_debug("job %u: its named containers are released", job_id);
}
