/* Finished attempts and <state-dir>/state.json, written atomically. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_VERSION 1

void exec_finished_add(struct exec_finished_ring *r, const struct exec_finished *f)
{
	if (r->n < EXEC_FINISHED_MAX) {
		r->items[(r->head + r->n) % EXEC_FINISHED_MAX] = *f;
		r->n++;
		return;
	}
	r->items[r->head] = *f;
	r->head = (r->head + 1) % EXEC_FINISHED_MAX;
}

const struct exec_finished *exec_finished_at(const struct exec_finished_ring *r, size_t i)
{
	return i < r->n ? &r->items[(r->head + i) % EXEC_FINISHED_MAX] : NULL;
}

const struct exec_finished *exec_finished_find(const struct exec_finished_ring *r, int64_t job,
					       int64_t attempt)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct exec_finished *f = exec_finished_at(r, i);

		if (f->job == job && f->attempt == attempt)
			return f;
	}
	return NULL;
}

json_t *exec_finished_json(const struct exec_finished_ring *r)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < r->n; i++) {
		const struct exec_finished *f = exec_finished_at(r, i);

		json_t *e = json_pack("{s:I, s:I, s:i, s:s, s:s}", "job", (json_int_t)f->job,
				      "attempt", (json_int_t)f->attempt, "exit_code", f->exit_code,
				      "failure_class", f->failure_class, "message", f->message);

		/* evidence is cleaned text; should it not be, the entry goes without it */
		if (e && f->evidence[0])
			json_object_set_new(e, "evidence", json_string(f->evidence));
		if (e && f->failure_class[0])
			json_object_set_new(e, PROTO_EVIDENCE_SOURCE_FIELD,
					    json_string(proto_evidence_source_name(
						f->log_only ? PROTO_EVIDENCE_LOG
							    : PROTO_EVIDENCE_EXECUTOR)));
		if (!e || json_array_append_new(a, e)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *running_json(const struct exec_running *running, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		json_t *pg = json_array(), *o;

		for (int k = 0; pg && k < running[i].npgids; k++)
			if (json_array_append_new(pg, json_integer(running[i].pgids[k]))) {
				json_decref(pg);
				pg = NULL;
			}
		o = pg ? json_pack("{s:I, s:I, s:o}", "job", (json_int_t)running[i].job, "attempt",
				   (json_int_t)running[i].attempt, "pgids", pg)
		       : NULL;
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync the directory holding path, so the rename itself is durable. */
static void sync_dir(const char *path)
{
	char copy[4096];
	int fd;

	snprintf(copy, sizeof(copy), "%s", path);
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int exec_state_write(const char *path, const char *node_id, int64_t epoch, int64_t seq,
		     const struct exec_running *running, size_t nrunning,
		     const struct exec_finished_ring *finished, struct ty_err *err)
{
	json_t *doc = NULL, *run = running_json(running, nrunning),
	       *fin = exec_finished_json(finished);
	char tmp[4096], *text = NULL;
	int fd = -1, rc = 0;

	if (!run || !fin) {
		json_decref(run);
		json_decref(fin);
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	/* "o" steals run and fin, on failure too (Jansson >= 2.11) */
	doc = json_pack("{s:i, s:s, s:I, s:I, s:o, s:o}", "v", STATE_VERSION, "node", node_id,
			"epoch", (json_int_t)epoch, "seq", (json_int_t)seq, "running", run,
			"finished", fin);
	if (!doc) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (!(text = json_dumps(doc, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		rc = ty_err_set(err, TY_EINVAL, "state path '%s' is too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, text, strlen(text)) || write_all(fd, "\n", 1) || fsync(fd)) {
		rc = ty_err_set(err, TY_EIO, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd)) {
		fd = -1;
		rc = ty_err_set(err, TY_EIO, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path)) {
		rc = ty_err_set(err, TY_EIO, "cannot rename '%s' to '%s': %s", tmp, path,
				strerror(errno));
		goto out;
	}
	sync_dir(path);
out:
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(text);
	json_decref(doc);
	return rc;
}

static int read_running(struct exec_state *s, const json_t *a, const char *path, struct ty_err *err)
{
	size_t n = json_array_size(a);

	if (!json_is_array(a))
		return ty_err_set(err, TY_EPARSE, "state file '%s': 'running' is not an array",
				  path);
	if (n && !(s->running = calloc(n, sizeof(*s->running))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (size_t i = 0; i < n; i++) {
		const json_t *o = json_array_get(a, i), *pg = json_object_get(o, "pgids");
		struct exec_running *r = &s->running[i];
		json_int_t job = 0, attempt = 0;

		if (json_unpack((json_t *)o, "{s:I, s:I}", "job", &job, "attempt", &attempt) ||
		    job < 1 || attempt < 1 || !json_is_array(pg) ||
		    json_array_size(pg) > PROTO_LAUNCH_MAX_LOCAL_RANKS)
			return ty_err_set(err, TY_EPARSE,
					  "state file '%s': running entry %zu is not "
					  "{job, attempt, pgids}",
					  path, i);
		r->job = job;
		r->attempt = attempt;
		s->nrunning = i + 1;
		if (json_array_size(pg) && !(r->pgids = calloc(json_array_size(pg), sizeof(pid_t))))
			return ty_err_set(err, TY_ENOMEM, NULL);
		for (size_t k = 0; k < json_array_size(pg); k++) {
			const json_t *v = json_array_get(pg, k);

			/* pgid 1 or below would mean "every process" to kill() */
			if (!json_is_integer(v) || json_integer_value(v) <= 1 ||
			    json_integer_value(v) > 0x7fffffff)
				return ty_err_set(
				    err, TY_EPARSE,
				    "state file '%s': running entry %zu has a bad pgid", path, i);
			r->pgids[r->npgids++] = (pid_t)json_integer_value(v);
		}
	}
	return 0;
}

static int read_finished(struct exec_state *s, const json_t *a, const char *path,
			 struct ty_err *err)
{
	size_t n = json_array_size(a);

	if (!json_is_array(a))
		return ty_err_set(err, TY_EPARSE, "state file '%s': 'finished' is not an array",
				  path);
	for (size_t i = 0; i < n; i++) {
		struct exec_finished f = {0};
		json_int_t job = 0, attempt = 0;
		int code = 0;
		const char *cls = NULL, *msg = NULL, *evidence = "", *source = NULL;

		if (json_unpack((json_t *)json_array_get(a, i), "{s:I, s:I, s:i, s:s, s:s, s?s, s?s}",
				"job", &job, "attempt", &attempt, "exit_code", &code,
				"failure_class", &cls, "message", &msg, "evidence", &evidence,
				PROTO_EVIDENCE_SOURCE_FIELD, &source))
			return ty_err_set(err, TY_EPARSE,
					  "state file '%s': finished entry %zu is "
					  "not {job, attempt, exit_code, "
					  "failure_class, message}",
					  path, i);
		f.job = job;
		f.attempt = attempt;
		f.exit_code = code;
		snprintf(f.failure_class, sizeof(f.failure_class), "%s", cls);
		snprintf(f.message, sizeof(f.message), "%s", msg);
		snprintf(f.evidence, sizeof(f.evidence), "%s", evidence);
		f.log_only = proto_evidence_source_parse(source) == PROTO_EVIDENCE_LOG;
		exec_finished_add(&s->finished, &f);
	}
	return 0;
}

int exec_state_read(struct exec_state *s, const char *path, struct ty_err *err)
{
	json_error_t jerr;
	json_t *doc = NULL;
	json_int_t ver = 0, epoch = 0, seq = 0;
	int rc;

	exec_state_clear(s);
	if (access(path, F_OK) != 0 && errno == ENOENT)
		return ty_err_set(err, TY_ENOTFOUND, "no state file '%s'", path);
	if (!(doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr))) {
		rc = ty_err_set(err, TY_EPARSE, "state file '%s' is not JSON: %s", path, jerr.text);
		goto out;
	}
	if (json_unpack(doc, "{s:I, s:I}", "v", &ver, "epoch", &epoch) || ver != STATE_VERSION ||
	    epoch < 0) {
		rc = ty_err_set(err, TY_EPARSE, "state file '%s' lacks version %d or its epoch",
				path, STATE_VERSION);
		goto out;
	}
	/* absent in files written before the replay guard: any newer message acts */
	if (json_unpack(doc, "{s?I}", "seq", &seq) || seq < 0) {
		rc = ty_err_set(err, TY_EPARSE, "state file '%s': 'seq' must be a number >= 0",
				path);
		goto out;
	}
	s->epoch = epoch;
	s->seq = seq;
	if ((rc = read_running(s, json_object_get(doc, "running"), path, err)) ||
	    (rc = read_finished(s, json_object_get(doc, "finished"), path, err)))
		goto out;
out:
	json_decref(doc);
	if (rc)
		exec_state_clear(s);
	return rc;
}

void exec_state_clear(struct exec_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nrunning; i++)
		free(s->running[i].pgids);
	free(s->running);
	memset(s, 0, sizeof(*s));
}

int exec_mkdirs(const char *path, struct ty_err *err)
{
	char copy[4096];

	if ((size_t)snprintf(copy, sizeof(copy), "%s", path) >= sizeof(copy))
		return ty_err_set(err, TY_EINVAL, "path '%.64s...' is too long", path);
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, 0755) && errno != EEXIST)
			return ty_err_set(err, TY_EIO, "cannot create '%s': %s", copy,
					  strerror(errno));
		*p = '/';
	}
	if (mkdir(copy, 0755) && errno != EEXIST)
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", copy, strerror(errno));
	return 0;
}
