/*
 * The container driver (runtime.h): bundles on disk and the OCI runtime's
 * command lines. Creating and deleting block for the runtime: callers run
 * them on libuv's thread pool.
 */
#include "exec.h"
#include "runtime.h"
#include "ty_log.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/*
 * Children someone waits for by pid (the runtime's commands on the thread
 * pool, the containers' inits): the daemon's stray reaper leaves them.
 */
#define WAITING_MAX 256
static pthread_mutex_t waiting_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t waiting[WAITING_MAX];

static void waiting_set(pid_t pid, pid_t to)
{
	for (int i = 0; i < WAITING_MAX; i++)
		if (waiting[i] == pid) {
			waiting[i] = to;
			return;
		}
}

bool exec_rt_waits_for(pid_t pid)
{
	bool found = false;

	pthread_mutex_lock(&waiting_mu);
	for (int i = 0; i < WAITING_MAX && !found; i++)
		found = waiting[i] == pid;
	pthread_mutex_unlock(&waiting_mu);
	return found;
}

void exec_rt_reap(pid_t pid)
{
	if (pid <= 0)
		return;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&waiting_mu);
	waiting_set(pid, 0);
	pthread_mutex_unlock(&waiting_mu);
}

static void waiting_add(pid_t pid)
{
	waiting_set(0, pid); /* full: the reaper may take it, and waitpid says ECHILD */
}

void exec_rt_id(char out[EXEC_RT_ID_MAX], const char *node, int64_t job, int64_t attempt)
{
	snprintf(out, EXEC_RT_ID_MAX, "ty-%s-%lld-%lld", node, (long long)job, (long long)attempt);
}

bool exec_rt_own_cgroup(char *out, size_t outsz)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		char *path = b ? b + 1 : NULL;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		/* v1: the memory controller's path wins; v2: the 0:: line */
		if ((b - a - 1 == 6 && !strncmp(a + 1, "memory", 6)) ||
		    (!found && !strncmp(line, "0::", 3))) {
			snprintf(out, outsz, "%s", path);
			found = true;
			if (a[1] == 'm')
				break;
		}
	}
	fclose(f);
	return found;
}

bool exec_rt_memory_events(char *out, size_t outsz, pid_t init_pid)
{
	char path[64], text[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)init_pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	return exec_cgroup_oom_file(out, outsz, text);
}

/*
 * Run argv with stdin and stdout on /dev/null and stderr into errpath
 * (NULL: /dev/null); its exit status, or -1 when it could not run.
 */
static void last_error(char *out, size_t outsz, const char *path);
static void unmount_under(const char *dir);
static int shared_dir(const char *path, struct ty_err *err);

static int run(char *const *argv, const char *errpath)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	pid_t pid;
	int status, rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, errpath ? errpath : "/dev/null",
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	pthread_mutex_lock(&waiting_mu);
	rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	if (!rc)
		waiting_add(pid);
	pthread_mutex_unlock(&waiting_mu);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc) {
		errno = rc;
		return -1;
	}
	while ((rc = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&waiting_mu);
	waiting_set(pid, 0);
	pthread_mutex_unlock(&waiting_mu);
	if (rc < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int exec_rt_run(char *const *argv, const char *errpath, char *msg, size_t msgsz)
{
	char tmp[] = "/tmp/trainyard-run-XXXXXX";
	int rc, fd = -1;

	if (!errpath) {
		if ((fd = mkstemp(tmp)) < 0) {
			if (msg)
				snprintf(msg, msgsz, "cannot create '%s': %s", tmp, strerror(errno));
			return -1;
		}
		close(fd);
		errpath = tmp;
	}
	if ((rc = run(argv, errpath)) < 0 && msg)
		snprintf(msg, msgsz, "cannot run '%s': %s", argv[0], strerror(errno));
	else if (msg)
		last_error(msg, msgsz, errpath);
	if (fd >= 0)
		unlink(tmp);
	return rc;
}

/* The runtime's last error line from its stderr file, cleaned, into out. */
static void last_error(char *out, size_t outsz, const char *path)
{
	char buf[8192], *line, *end;
	ssize_t n;
	int fd;

	snprintf(out, outsz, "no message");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	line = (end = strrchr(buf, '\n')) ? end + 1 : buf;
	snprintf(out, outsz, "%s", line);
	exec_text_clean(out);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void exec_rt_remove_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/*
 * The empty root of a host-root container: mount points and the host's
 * symlinks (merged /usr: /bin -> usr/bin); binds[] gets the host
 * directories to bind read-only over it (those that are directories).
 */
static const char *const host_dirs[] = {"/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib64"};

static int host_rootfs(const char *rootfs, const char **binds, size_t *nbinds, struct ty_err *err)
{
	static const char *const dirs[] = {"/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib64",
					   "/tmp", "/proc", "/dev", "/sys", "/.trainyard"};
	char path[4400], target[4096];
	struct stat st;

	if (mkdir(rootfs, 0755))
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", rootfs, strerror(errno));
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		bool host = i < sizeof(host_dirs) / sizeof(host_dirs[0]);
		ssize_t n;

		snprintf(path, sizeof(path), "%s%s", rootfs, dirs[i]);
		if (host && (n = readlink(dirs[i], target, sizeof(target) - 1)) > 0) {
			target[n] = '\0';
			if (symlink(target, path))
				return ty_err_set(err, TY_EIO, "cannot create '%s': %s", path,
						  strerror(errno));
			continue;
		}
		if (host && (lstat(dirs[i], &st) || !S_ISDIR(st.st_mode)))
			continue; /* not on this host */
		if (mkdir(path, 0755))
			return ty_err_set(err, TY_EIO, "cannot create '%s': %s", path,
					  strerror(errno));
		if (host)
			binds[(*nbinds)++] = dirs[i];
	}
	return 0;
}

static int write_json(const char *path, const json_t *j, struct ty_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || json_dumpfd(j, fd, JSON_COMPACT)) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(e));
	}
	if (close(fd))
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(errno));
	return 0;
}

/* path (created) as a mount of its own with the given propagation (MS_SHARED, MS_PRIVATE). */
static int own_mount(const char *path, unsigned long propagation, struct ty_err *err)
{
	int rc;

	if ((rc = exec_mkdirs(path, err)))
		return rc;
	if (mount(path, path, NULL, MS_BIND, NULL) || mount(NULL, path, NULL, propagation, NULL))
		return ty_err_set(err, TY_EIO, "cannot make '%s' a %s mount: %s", path,
				  propagation == MS_SHARED ? "shared" : "private", strerror(errno));
	return 0;
}

static int shared_dir(const char *path, struct ty_err *err)
{
	return own_mount(path, MS_SHARED, err);
}

int exec_rt_thread_nice(int nice)
{
	id_t tid = (id_t)syscall(SYS_gettid);
	int was;

	errno = 0;
	was = getpriority(PRIO_PROCESS, tid);
	if (was == -1 && errno)
		was = 0;
	if (setpriority(PRIO_PROCESS, tid, nice))
		ty_debug("cannot set this thread's nice value to %d: %s", nice, strerror(errno));
	return was;
}

void exec_rt_late_dir(char *out, size_t outsz, const struct exec_rt_opts *o, const char *id,
		      size_t i)
{
	snprintf(out, outsz, "%s/%s/late/%zu", o->bundles, id, i);
}

int exec_rt_bind_late(const struct exec_rt_opts *o, const char *id, size_t i, const char *src,
		      const char *rel, struct ty_err *err)
{
	char stage[4200], item[4300], target[8400];
	struct stat st;
	int rc;

	exec_rt_late_dir(target, sizeof(target), o, id, i);
	if ((size_t)snprintf(target + strlen(target), sizeof(target) - strlen(target), "/%s", rel) >=
	    sizeof(target) - strlen(target))
		return ty_err_set(err, TY_EINVAL, "late bind '%s' is too long", rel);
	if ((rc = exec_mkdirs(target, err)))
		return rc;
	/*
	 * A mount whose parent is shared cannot be moved: bind in a private
	 * stage, make it nosuid there, then move it under the shared root,
	 * whose propagation carries it (nosuid too) into the container.
	 */
	snprintf(stage, sizeof(stage), "%s/%s/stage", o->bundles, id);
	snprintf(item, sizeof(item), "%s/item", stage);
	if (stat(item, &st) && ((rc = own_mount(stage, MS_PRIVATE, err)) ||
				(rc = exec_mkdirs(item, err))))
		return rc;
	if (mount(src, item, NULL, MS_BIND | MS_REC, NULL))
		return ty_err_set(err, TY_EIO, "cannot bind '%s': %s", src, strerror(errno));
	if (mount(NULL, item, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID, NULL) ||
	    mount(item, target, NULL, MS_MOVE, NULL)) {
		int e = errno;

		umount2(item, MNT_DETACH);
		return ty_err_set(err, TY_EIO, "cannot bind '%s' into the container: %s", src,
				  strerror(e));
	}
	return 0;
}

int exec_rt_update(const struct exec_rt_opts *o, const char *id, const struct exec_rt_limits *l,
		   struct ty_err *err)
{
	char mem[32], quota[32], period[32], shares[32], msg[400];
	char *argv[16];
	size_t n = 0;
	int rc;

	argv[n++] = (char *)o->runtime;
	argv[n++] = "--root";
	argv[n++] = (char *)o->root;
	argv[n++] = "update";
	if (l->set_memory) {
		/* -1: no limit, to both runtimes */
		snprintf(mem, sizeof(mem), "%lld",
			 l->memory_bytes > 0 ? (long long)l->memory_bytes : -1LL);
		argv[n++] = "--memory";
		argv[n++] = mem;
	}
	if (l->set_cpus) {
		snprintf(quota, sizeof(quota), "%lld",
			 l->cpus > 0 ? (long long)l->cpus * EXEC_RT_CFS_PERIOD_US : -1LL);
		snprintf(period, sizeof(period), "%d", EXEC_RT_CFS_PERIOD_US);
		snprintf(shares, sizeof(shares), "%d", (l->cpus > 0 ? l->cpus : 1) * 1024);
		argv[n++] = "--cpu-period";
		argv[n++] = period;
		argv[n++] = "--cpu-quota";
		argv[n++] = quota;
		argv[n++] = "--cpu-share";
		argv[n++] = shares;
	}
	if (n == 4)
		return 0; /* nothing to change */
	argv[n++] = (char *)id;
	argv[n] = NULL;
	if ((rc = exec_rt_run(argv, NULL, msg, sizeof(msg))) < 0)
		return ty_err_set(err, TY_ENOTFOUND, "%s", msg);
	if (rc)
		return ty_err_set(err, TY_EIO, "'%s update' exited with code %d: %s", o->runtime,
				  rc, msg);
	return 0;
}

/* A mountinfo path field, its octal escapes (\040) undone, in place. */
static void unescape(char *p)
{
	char *w = p;

	for (; *p; p++, w++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*w = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*w = *p;
		}
	}
	*w = '\0';
}

static int by_length(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return (la > lb) - (la < lb);
}

/* Unmount (lazily) every mount point under dir/, the deepest first. */
static void unmount_under(const char *dir)
{
	char line[8192], prefix[4200];
	char **points = NULL;
	size_t n = 0, len;
	FILE *f;

	len = (size_t)snprintf(prefix, sizeof(prefix), "%s/", dir);
	if (!(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *field = strtok_r(line, " ", &save), **grown;

		for (int i = 0; field && i < 4; i++)
			field = strtok_r(NULL, " ", &save); /* the 5th: the mount point */
		if (!field)
			continue;
		unescape(field);
		if (strncmp(field, prefix, len) || !(grown = realloc(points, (n + 1) * sizeof(*points))))
			continue;
		points = grown;
		if ((points[n] = strdup(field)))
			n++;
	}
	fclose(f);
	if (n) /* the deepest last, unmounted first */
		qsort(points, n, sizeof(*points), by_length);
	while (n--) {
		if (umount2(points[n], MNT_DETACH))
			ty_warn("cannot unmount '%s': %s", points[n], strerror(errno));
		free(points[n]);
	}
	free(points);
}

int exec_rt_check(const struct exec_rt_opts *o, struct ty_err *err)
{
	char *argv[] = {(char *)o->runtime, "--version", NULL};
	int rc = run(argv, NULL);

	if (rc < 0)
		return ty_err_set(err, TY_ENOTFOUND, "the OCI runtime '%s' cannot be run: %s",
				  o->runtime, strerror(errno));
	if (rc)
		return ty_err_set(err, TY_EIO, "'%s --version' exited with code %d", o->runtime,
				  rc);
	return 0;
}

int exec_rt_create(const struct exec_rt_opts *o, const char *id, struct exec_rt_spec *spec,
		   pid_t *init_pid, struct ty_err *err)
{
	char bundle[4096], rootfs[4200], cfg[4200], pidf[4200], errf[4200], msg[400], line[32];
	const char *binds[sizeof(host_dirs) / sizeof(host_dirs[0])];
	size_t nbinds = 0;
	json_t *config = NULL;
	int rc, fd;
	ssize_t n;

	*init_pid = 0;
	if ((size_t)snprintf(bundle, sizeof(bundle), "%s/%s", o->bundles, id) >= sizeof(bundle))
		return ty_err_set(err, TY_EINVAL, "bundle path '%s/%s' is too long", o->bundles,
				  id);
	snprintf(cfg, sizeof(cfg), "%s/config.json", bundle);
	snprintf(pidf, sizeof(pidf), "%s/init.pid", bundle);
	snprintf(errf, sizeof(errf), "%s/runtime.err", bundle);
	unmount_under(bundle); /* a previous try's */
	exec_rt_remove_tree(bundle);
	if ((rc = exec_mkdirs(o->bundles, err)))
		return rc;
	if (mkdir(bundle, 0700))
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", bundle, strerror(errno));
	if (spec->host_root) {
		snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bundle);
		if ((rc = host_rootfs(rootfs, binds, &nbinds, err)))
			goto fail;
		spec->rootfs = rootfs;
		spec->host_binds = binds;
		spec->nhost_binds = nbinds;
	}
	for (size_t i = 0; i < spec->nmounts; i++)
		if (spec->mounts[i].late && (rc = shared_dir(spec->mounts[i].src, err)))
			goto fail;
	if ((rc = exec_rt_config(&config, spec, err)) || (rc = write_json(cfg, config, err)))
		goto fail;
	{
		char *argv[] = {(char *)o->runtime, "--root", (char *)o->root, "run", "--detach",
				"--bundle", bundle, "--pid-file", pidf, (char *)id, NULL};

		if ((rc = run(argv, errf)) != 0) {
			if (rc < 0)
				rc = ty_err_set(err, TY_ENOTFOUND, "cannot run the OCI runtime '%s': %s",
						o->runtime, strerror(errno));
			else {
				last_error(msg, sizeof(msg), errf);
				rc = ty_err_set(err, TY_EIO, "'%s run' exited with code %d: %s",
						o->runtime, rc, msg);
			}
			goto fail;
		}
	}
	if ((fd = open(pidf, O_RDONLY | O_CLOEXEC)) < 0 ||
	    (n = read(fd, line, sizeof(line) - 1)) <= 0) {
		if (fd >= 0)
			close(fd);
		rc = ty_err_set(err, TY_EIO, "the OCI runtime wrote no pid to '%s'", pidf);
		goto fail;
	}
	close(fd);
	line[n] = '\0';
	*init_pid = (pid_t)atoi(line);
	/* reparented to us (a subreaper) once the runtime exits: exec_rt_reap's */
	pthread_mutex_lock(&waiting_mu);
	if (*init_pid > 0)
		waiting_add(*init_pid);
	pthread_mutex_unlock(&waiting_mu);
	json_decref(config);
	return 0;
fail:
	json_decref(config);
	exec_rt_delete(o, id);
	return rc;
}

int exec_rt_exec_argv(char ***argv, char **pid_path, const struct exec_rt_opts *o, const char *id,
		      int rank, const char *suffix, const json_t *process, struct ty_err *err)
{
	char proc[4200], pidf[4200];
	const char *v[] = {o->runtime, "--root", o->root, "exec", "--process", proc,
			   "--pid-file", pidf, id};
	size_t nv = sizeof(v) / sizeof(v[0]);
	int rc;

	*argv = NULL;
	*pid_path = NULL;
	snprintf(proc, sizeof(proc), "%s/%s/rank-%d%s.json", o->bundles, id, rank, suffix);
	snprintf(pidf, sizeof(pidf), "%s/%s/rank-%d%s.pid", o->bundles, id, rank, suffix);
	unlink(pidf);
	if ((rc = write_json(proc, process, err)))
		return rc;
	if (!(*argv = calloc(nv + 1, sizeof(**argv))) || !(*pid_path = strdup(pidf)))
		goto oom;
	for (size_t i = 0; i < nv; i++)
		if (!((*argv)[i] = strdup(v[i])))
			goto oom;
	return 0;
oom:
	exec_env_free(*argv);
	free(*pid_path);
	*argv = NULL;
	*pid_path = NULL;
	return ty_err_set(err, TY_ENOMEM, NULL);
}

void exec_rt_delete(const struct exec_rt_opts *o, const char *id)
{
	char *argv[] = {(char *)o->runtime, "--root", (char *)o->root, "delete", "--force",
			(char *)id, NULL};
	char bundle[4200];
	int rc = run(argv, NULL);

	if (rc > 0)
		/* never created, or already gone: both fine */
		ty_debug("'%s delete --force %s' exited with code %d", o->runtime, id, rc);
	snprintf(bundle, sizeof(bundle), "%s/%s", o->bundles, id);
	unmount_under(bundle);
	exec_rt_remove_tree(bundle);
}

int exec_rt_delete_all(const struct exec_rt_opts *o)
{
	struct dirent *e;
	int n = 0;
	DIR *d;

	if ((d = opendir(o->root))) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.') {
				exec_rt_delete(o, e->d_name);
				n++;
			}
		closedir(d);
	}
	if ((d = opendir(o->bundles))) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				exec_rt_delete(o, e->d_name);
		closedir(d);
	}
	return n;
}
