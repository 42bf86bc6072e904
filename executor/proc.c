/* Process groups as /proc sees them: live members and whose they are. */
#include "exec.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* State and process group of pid from /proc/<pid>/stat; false when gone. */
static bool proc_stat(pid_t pid, char *state, pid_t *pgrp)
{
	char path[64], buf[1024], *p;
	int fd, ppid, pg;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ppid pgrp ...": comm may hold anything, even ')' */
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %c %d %d", state, &ppid, &pg) != 3)
		return false;
	*pgrp = (pid_t)pg;
	return true;
}

/* Calls fn for every live (not zombie) member of pgid until it returns true. */
static int each_member(pid_t pgid, bool (*fn)(pid_t pid, void *arg), void *arg, bool *stopped)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	*stopped = false;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char state;
		pid_t pid, pg;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		if (!proc_stat(pid, &state, &pg) || pg != pgid || state == 'Z' || state == 'X')
			continue;
		count++;
		if (fn && fn(pid, arg)) {
			*stopped = true;
			break;
		}
	}
	closedir(d);
	return count;
}

int exec_pgid_live(pid_t pgid)
{
	bool stopped;

	return each_member(pgid, NULL, NULL, &stopped);
}

struct want_env {
	char job[48];
	char attempt[48];
};

static bool environ_matches(pid_t pid, void *arg)
{
	const struct want_env *w = arg;
	struct ty_buf b = TY_BUF_INIT;
	char path[64], chunk[4096];
	bool job = false, attempt = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (ty_buf_append(&b, chunk, (size_t)n))
			break;
	close(fd);
	for (size_t off = 0; b.data && off < b.len;) {
		const char *s = b.data + off;
		size_t len = strnlen(s, b.len - off);

		if (len == strlen(w->job) && memcmp(s, w->job, len) == 0)
			job = true;
		if (len == strlen(w->attempt) && memcmp(s, w->attempt, len) == 0)
			attempt = true;
		off += len + 1;
	}
	ty_buf_free(&b);
	return job && attempt;
}

bool exec_pgid_is_attempt(pid_t pgid, int64_t job, int64_t attempt)
{
	struct want_env w;
	bool found;

	snprintf(w.job, sizeof(w.job), "TRAINYARD_JOB_ID=%lld", (long long)job);
	snprintf(w.attempt, sizeof(w.attempt), "TRAINYARD_ATTEMPT=%lld", (long long)attempt);
	each_member(pgid, environ_matches, &w, &found);
	return found;
}
