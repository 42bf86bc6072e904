/* The last lines of a rank log (and of its rotated part), and log URLs. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 65536

/*
 * Where the last `want` lines of fd (size sz) begin, in *start, and how
 * many lines that is (fewer when the file is shorter), in *got.
 */
static int tail_range(off_t *start, long *got, int fd, off_t sz, long want)
{
	char buf[CHUNK];
	off_t hi, scan_end;
	long count = 0;
	char last;

	*start = want <= 0 ? sz : 0;
	*got = 0;
	if (sz == 0 || want <= 0)
		return 0;
	if (pread(fd, &last, 1, sz - 1) != 1)
		return -1;
	/* a final newline ends the last line; it does not start another */
	scan_end = last == '\n' ? sz - 1 : sz;
	for (hi = scan_end; hi > 0;) {
		off_t lo = hi > CHUNK ? hi - CHUNK : 0;
		ssize_t n = pread(fd, buf, (size_t)(hi - lo), lo);

		if (n != hi - lo)
			return -1;
		for (ssize_t i = n - 1; i >= 0; i--)
			if (buf[i] == '\n' && ++count == want) {
				*start = lo + i + 1;
				*got = want;
				return 0;
			}
		hi = lo;
	}
	*got = count + 1;
	return 0;
}

static int read_range(struct ty_buf *out, int fd, off_t from, off_t to)
{
	char buf[CHUNK];

	while (from < to) {
		size_t want = (size_t)(to - from) < sizeof(buf) ? (size_t)(to - from) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, from);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		if (ty_buf_append(out, buf, (size_t)n))
			return -1;
		from += n;
	}
	return 0;
}

int exec_log_tail(struct ty_buf *out, const char *path, long lines, size_t max_bytes,
		  struct ty_err *err)
{
	struct ty_buf old = TY_BUF_INIT, cur = TY_BUF_INIT;
	char rotated[4096];
	int fd = -1, ofd = -1, rc = 0;
	struct stat st, ost;
	off_t start = 0, ostart = 0;
	long got = 0, ogot = 0;
	const char *p;
	size_t len;

	snprintf(rotated, sizeof(rotated), "%s.1", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ofd = open(rotated, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && ofd < 0) {
		rc = ty_err_set(err, TY_ENOTFOUND, "no log '%s'", path);
		goto out;
	}
	if (fd >= 0 && (fstat(fd, &st) || tail_range(&start, &got, fd, st.st_size, lines) ||
			read_range(&cur, fd, start, st.st_size))) {
		rc = ty_err_set(err, TY_EIO, "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	if (got < lines && ofd >= 0 &&
	    (fstat(ofd, &ost) || tail_range(&ostart, &ogot, ofd, ost.st_size, lines - got) ||
	     read_range(&old, ofd, ostart, ost.st_size))) {
		rc = ty_err_set(err, TY_EIO, "cannot read '%s': %s", rotated, strerror(errno));
		goto out;
	}
	if (old.len && ty_buf_append(&old, cur.data, cur.len)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	p = old.len ? old.data : cur.data;
	len = old.len ? old.len : cur.len;
	if (len > max_bytes) {
		const char *cut = p + (len - max_bytes), *nl = memchr(cut, '\n', max_bytes);

		/* start on a whole line when the cut holds a line boundary */
		if (cut[-1] != '\n' && nl && nl + 1 < p + len)
			cut = nl + 1;
		len -= (size_t)(cut - p);
		p = cut;
	}
	if (len && ty_buf_append(out, p, len))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	if (fd >= 0)
		close(fd);
	if (ofd >= 0)
		close(ofd);
	ty_buf_free(&old);
	ty_buf_free(&cur);
	return rc;
}

/* A decimal without sign or leading zeros, up to max; the end in *end. */
static bool number(int64_t *out, const char *s, const char **end, int64_t max)
{
	int64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > max)
			return false;
	}
	*out = v;
	*end = p;
	return true;
}

int exec_log_request_parse(int64_t *job, int64_t *attempt, int *rank, long *tail, const char *url,
			   const char *tail_arg)
{
	const char *p;
	int64_t r, t;

	if (strncmp(url, "/logs/", 6) != 0)
		return TY_ENOTFOUND;
	p = url + 6;
	if (!number(job, p, &p, INT64_MAX / 10) || *job < 1 || *p++ != '/' ||
	    !number(attempt, p, &p, INT32_MAX) || *attempt < 1 || *p++ != '/' ||
	    !number(&r, p, &p, 100000000) || *p)
		return TY_ENOTFOUND;
	*rank = (int)r;
	*tail = EXEC_TAIL_DEFAULT;
	if (tail_arg) {
		if (!number(&t, tail_arg, &p, EXEC_TAIL_MAX) || *p || t < 1)
			return TY_EINVAL;
		*tail = (long)t;
	}
	return 0;
}

bool exec_progress_path(char *out, size_t outsz, const char *dir, int rank)
{
	int n = snprintf(out, outsz, "%s/" EXEC_WORK_DIR "/progress-%d", dir, rank);

	return n >= 0 && (size_t)n < outsz;
}
