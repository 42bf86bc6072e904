/*
 * How a rank ended, kept outside the executor: each rank runs under
 * trainyard-rank-shim, which writes <attempt dir>/work/rank-<R>.exit when it
 * ends; after a restart the executor reads those files to tell an attempt
 * that finished while it was down from one it must report as lost.
 */
#include "exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOCAL_RANKS_FILE "local_ranks"

void exec_attempt_dir(char *out, size_t size, const char *state_dir, int64_t job, int64_t attempt)
{
	snprintf(out, size, "%s/attempts/%lld.%lld", state_dir, (long long)job, (long long)attempt);
}

int exec_command_check(const char *cmd, char *const *env, struct ty_err *err)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	char full[4096];

	if (!cmd || !*cmd)
		return ty_err_set(err, TY_EINVAL, "the command is empty");
	if (strchr(cmd, '/')) {
		if (access(cmd, X_OK))
			return ty_err_set(err, TY_ENOTFOUND, "cannot run '%s': %s", cmd,
					  strerror(errno));
		return 0;
	}
	for (char *const *e = env; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	for (const char *p = path;; p++) {
		size_t len = strcspn(p, ":");

		/* an empty element is the working directory, as for execvp */
		if ((size_t)snprintf(full, sizeof(full), "%.*s/%s", len ? (int)len : 1,
				     len ? p : ".", cmd) < sizeof(full) &&
		    !access(full, X_OK))
			return 0;
		p += len;
		if (!*p)
			break;
	}
	return ty_err_set(err, TY_ENOTFOUND, "cannot run '%s': not found in PATH '%s'", cmd, path);
}

int exec_rank_exit_path(char *out, size_t size, const char *dir, int rank, bool preflight)
{
	if ((size_t)snprintf(out, size, "%s/" EXEC_WORK_DIR "/rank-%d%s.exit", dir, rank,
			     preflight ? ".preflight" : "") < size)
		return 0;
	return -1;
}

int exec_local_ranks_write(const char *dir, int n, struct ty_err *err)
{
	char path[4096], text[16];
	int fd, ok;

	if ((size_t)snprintf(path, sizeof(path), "%s/" LOCAL_RANKS_FILE, dir) >= sizeof(path))
		return ty_err_set(err, TY_EINVAL, "path in '%s' is too long", dir);
	snprintf(text, sizeof(text), "%d\n", n);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(errno));
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	if (close(fd) || !ok)
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(errno));
	return 0;
}

/* The first line of a small file into buf; false when it cannot be read. */
static bool read_line(char *buf, size_t size, const char *path)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	return ok;
}

int exec_ranks_finished(const char *dir)
{
	char path[4096], work[4096], line[64], name[64];
	int want, ok = 0, rank;
	struct dirent *de;
	DIR *d;

	if ((size_t)snprintf(path, sizeof(path), "%s/" LOCAL_RANKS_FILE, dir) >= sizeof(path) ||
	    !read_line(line, sizeof(line), path) || sscanf(line, "%d", &want) != 1 || want < 1)
		return 0;
	if ((size_t)snprintf(work, sizeof(work), "%s/" EXEC_WORK_DIR, dir) >= sizeof(work) ||
	    !(d = opendir(work)))
		return 0;
	while ((de = readdir(d))) {
		/* rank-<R>.exit exactly: a preflight's end says nothing of the job */
		if (sscanf(de->d_name, "rank-%d.exit", &rank) != 1 ||
		    (size_t)snprintf(name, sizeof(name), "rank-%d.exit", rank) >= sizeof(name) ||
		    strcmp(name, de->d_name) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", work, de->d_name) >=
			sizeof(path) ||
		    !read_line(line, sizeof(line), path))
			continue;
		if (strcmp(line, "exit 0\n")) {
			ok = -1; /* one rank ended otherwise: not finished */
			break;
		}
		ok++;
	}
	closedir(d);
	return ok == want ? want : 0;
}

bool exec_rank_exit_read(const char *path, int *code, int *sig)
{
	char line[64];
	int v;

	if (!read_line(line, sizeof(line), path))
		return false;
	if (sscanf(line, "exit %d", &v) == 1 && v >= 0 && v <= 255) {
		*code = v;
		*sig = 0;
		return true;
	}
	if (sscanf(line, "signal %d", &v) == 1 && v > 0 && v < 128) {
		*code = 128 + v;
		*sig = v;
		return true;
	}
	return false;
}
