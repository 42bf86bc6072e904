/* The fault scenarios' invariants: see invariants.h. */
#include "invariants.h"
#include "ty_test.h"

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int faults_rank_parse(struct faults_rank *rec, const char *name, const char *text)
{
	char *end;
	const char *p = name;
	bool started = false;

	memset(rec, 0, sizeof(*rec));
	if (strncmp(p, "g-", 2) != 0)
		return -1;
	p += 2;
	if (!isdigit((unsigned char)*p))
		return -1;
	rec->job = strtoll(p, &end, 10);
	if (*end != '-' || !isdigit((unsigned char)end[1]))
		return -1;
	rec->attempt = (int)strtol(end + 1, &end, 10);
	if (*end != '-' || !isdigit((unsigned char)end[1]))
		return -1;
	rec->rank = (int)strtol(end + 1, &end, 10);
	if (*end != '.' || !isdigit((unsigned char)end[1]))
		return -1;
	rec->pid = strtol(end + 1, &end, 10);
	if (*end)
		return -1;
	for (p = text; *p;) {
		char kind = *p;
		long long ns;

		if ((kind != 's' && kind != 'b' && kind != 'e') || p[1] != ' ' ||
		    !isdigit((unsigned char)p[2]))
			return -1;
		ns = strtoll(p + 2, &end, 10);
		if (*end != '\n' && *end)
			return -1;
		if (kind == 's' && !started) {
			rec->start_ns = ns;
			started = true;
		}
		if (kind == 'e')
			rec->ended = true;
		if (ns > rec->last_ns)
			rec->last_ns = ns;
		p = *end ? end + 1 : end;
	}
	return started ? 0 : -1;
}

struct interval {
	long long job;
	int attempt;
	long long from, to;
};

__attribute__((format(printf, 4, 5))) static int appendf(char *report, size_t size,
							 size_t *used, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*used + 1 >= size)
		return 1;
	va_start(ap, fmt);
	w = vsnprintf(report + *used, size - *used, fmt, ap);
	va_end(ap);
	if (w > 0)
		*used += (size_t)w < size - *used ? (size_t)w : size - *used - 1;
	return 1;
}

int faults_overlaps(const struct faults_rank *recs, size_t n, char *report, size_t size)
{
	struct interval *iv = calloc(n ? n : 1, sizeof(*iv));
	size_t niv = 0, used = 0;
	int found = 0;

	if (size)
		report[0] = '\0';
	if (!iv)
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t k;

		/* the same rank of the same attempt started twice: a double launch */
		for (size_t j = 0; j < i; j++)
			if (recs[j].job == recs[i].job && recs[j].attempt == recs[i].attempt &&
			    recs[j].rank == recs[i].rank)
				found += appendf(report, size, &used,
						 "job %lld attempt %d rank %d started twice "
						 "(pids %ld and %ld)\n",
						 recs[i].job, recs[i].attempt, recs[i].rank,
						 recs[j].pid, recs[i].pid);
		for (k = 0; k < niv; k++)
			if (iv[k].job == recs[i].job && iv[k].attempt == recs[i].attempt)
				break;
		if (k == niv) {
			iv[niv++] = (struct interval){recs[i].job, recs[i].attempt, recs[i].start_ns,
						      recs[i].last_ns};
			continue;
		}
		if (recs[i].start_ns < iv[k].from)
			iv[k].from = recs[i].start_ns;
		if (recs[i].last_ns > iv[k].to)
			iv[k].to = recs[i].last_ns;
	}
	for (size_t a = 0; a < niv; a++)
		for (size_t b = a + 1; b < niv; b++) {
			const struct interval *x = &iv[a], *y = &iv[b];

			if (x->job != y->job || x->from > y->to || y->from > x->to)
				continue;
			if (x->attempt > y->attempt) {
				const struct interval *t = x;

				x = y;
				y = t;
			}
			found += appendf(report, size, &used,
					 "job %lld: attempts %d and %d ran concurrently "
					 "(for %lld ns: attempt %d alive after the other started)\n",
					 x->job, x->attempt, y->attempt,
					 (x->to < y->to ? x->to : y->to) -
						 (x->from > y->from ? x->from : y->from),
					 x->attempt);
		}
	free(iv);
	return found;
}

/* Whether every rank 0..ranks-1 of (job, attempt) has a record with its end mark. */
static bool attempt_finished(const struct faults_rank *recs, size_t n, long long job, int attempt,
			     int ranks)
{
	for (int r = 0; r < ranks; r++) {
		bool ended = false;

		for (size_t i = 0; i < n && !ended; i++)
			ended = recs[i].job == job && recs[i].attempt == attempt &&
				recs[i].rank == r && recs[i].ended;
		if (!ended)
			return false;
	}
	return ranks > 0;
}

int faults_reruns(const struct faults_rank *recs, size_t n, const struct faults_world *worlds,
		  size_t nw, char *report, size_t size)
{
	size_t used = 0;
	int found = 0;

	if (size)
		report[0] = '\0';
	for (size_t w = 0; w < nw; w++) {
		int first = 0, later = 0;

		/* the earliest finished attempt, then the latest attempt that started at all */
		for (size_t i = 0; i < n; i++)
			if (recs[i].job == worlds[w].job &&
			    (!first || recs[i].attempt < first) &&
			    attempt_finished(recs, n, worlds[w].job, recs[i].attempt,
					     worlds[w].ranks))
				first = recs[i].attempt;
		for (size_t i = 0; first && i < n; i++)
			if (recs[i].job == worlds[w].job && recs[i].attempt > later)
				later = recs[i].attempt;
		if (first && later > first)
			found += appendf(report, size, &used,
					 "job %lld: attempt %d finished (all %d ranks wrote their "
					 "end mark) and attempt %d started again\n",
					 worlds[w].job, first, worlds[w].ranks, later);
	}
	return found;
}

struct faults_rank *faults_ranks(struct e2e *e, size_t *n)
{
	DIR *d = opendir(e->out);
	struct dirent *de;
	size_t cap = 64;
	struct faults_rank *recs = ty_test_alloc(cap * sizeof(*recs));

	*n = 0;
	if (!d)
		return recs;
	while ((de = readdir(d))) {
		const char *text;

		if (strncmp(de->d_name, "g-", 2) != 0)
			continue;
		if (*n == cap) {
			struct faults_rank *more = ty_test_alloc(2 * cap * sizeof(*recs));

			memcpy(more, recs, cap * sizeof(*recs));
			recs = more;
			cap *= 2;
		}
		text = e2e_read_all(e, de->d_name);
		if (!text || faults_rank_parse(&recs[*n], de->d_name, text) != 0) {
			FAIL("rank record '%s/%s' does not parse: '%s'", e->out, de->d_name,
			     text ? text : "(unreadable)");
			continue;
		}
		(*n)++;
	}
	closedir(d);
	return recs;
}

/* Whether /proc/<pid>/environ holds the entry want exactly (and it is no zombie). */
static bool environ_has(const char *pid, const char *want)
{
	char path[300], *buf;
	size_t cap = 1 << 16, len;
	FILE *f;
	bool hit = false;

	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	if (!(f = fopen(path, "r")))
		return false;
	buf = malloc(cap + 1);
	len = buf ? fread(buf, 1, cap, f) : 0;
	fclose(f);
	if (!buf)
		return false;
	buf[len] = '\0';
	for (size_t off = 0; off < len; off += strlen(buf + off) + 1)
		if (!strcmp(buf + off, want)) {
			hit = true;
			break;
		}
	free(buf);
	return hit && e2e_pid_running(strtol(pid, NULL, 10));
}

const char *faults_live_ranks(struct e2e *e)
{
	const char *want = ty_test_strf("OUTDIR=%s", e->out);
	char *list = ty_test_strf("%s", "");
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return list;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]) || !environ_has(de->d_name, want))
			continue;
		list = ty_test_strf("%s%s%s", list, *list ? " " : "", de->d_name);
	}
	closedir(d);
	return list;
}

static const char *const terminal = "succeeded,failed,cancelled,stopped";

/* The job's state through the API (scratch), "?" when it cannot be read. */
static const char *job_state(struct e2e *e, long long job, int *status)
{
	struct ty_resp r = {0};
	const char *st;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), e->token, NULL, NULL);
	*status = r.status;
	st = ty_test_strf("%s", r.status == 200 && ty_jstr(r.json, "state")
					? ty_jstr(r.json, "state")
					: "?");
	ty_resp_free(&r);
	return st;
}

static bool in_list(const char *list, const char *s)
{
	return strstr(ty_test_strf(",%s,", list), ty_test_strf(",%s,", s)) != NULL;
}

/* What the scenario's evidence says about one job, for a failure report. */
static void describe(struct e2e *e, long long job, const struct faults_rank *recs, size_t n)
{
	int status;
	const char *st = job_state(e, job, &status);
	struct ty_resp r = {0};

	ty_test_note("job %lld: HTTP %d, state %s", job, status, st);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), e->token, NULL, NULL);
	if (r.status == 200) {
		json_t *a;
		size_t i;

		json_array_foreach(json_object_get(r.json, "items"), i, a)
			ty_test_note("  attempt %lld: %s, class %s, message %s",
				     ty_jint(a, "attempt"), ty_jstr(a, "state"),
				     ty_jstr(a, "failure_class") ? ty_jstr(a, "failure_class")
								 : "-",
				     ty_jstr(a, "message") ? ty_jstr(a, "message") : "-");
	}
	ty_resp_free(&r);
	for (size_t i = 0; i < n; i++)
		if (recs[i].job == job)
			ty_test_note("  attempt %d rank %d pid %ld: %lld .. %lld ns (%s)",
				     recs[i].attempt, recs[i].rank, recs[i].pid, recs[i].start_ns,
				     recs[i].last_ns, recs[i].ended ? "ended" : "no end mark");
}

bool faults_check_invariants(struct e2e *e, const long long *jobs, const char *const *states,
			     int n, int timeout_ms)
{
	bool ok = true;
	int waited = 0, bad = 0;
	const char *ids = "";
	const char *unreleased = "", *outbox = "", *live = "";
	struct faults_rank *recs;
	size_t nrec;
	char report[4096];

	for (int i = 0; i < n; i++)
		ids = ty_test_strf("%s%s%lld", ids, i ? "," : "", jobs[i]);
	/* everything ends: jobs terminal, GPUs released, outbox empty, ranks gone */
	for (;; waited += 200) {
		int ended = 0, status;

		for (int i = 0; i < n; i++)
			ended += in_list(terminal, job_state(e, jobs[i], &status));
		unreleased = ty_stack_sql("SELECT coalesce(string_agg(format('job %s attempt %s on %s "
					  "(gpus %s)', job_id, attempt, node_id, gpus), '; '), '')"
					  " FROM allocations WHERE released_at IS NULL",
					  (const char *)NULL);
		outbox = ty_stack_sql("SELECT count(*) FROM dispatch_outbox", (const char *)NULL);
		live = faults_live_ranks(e);
		if ((ended == n && !*unreleased && !strcmp(outbox, "0") && !*live) ||
		    waited >= timeout_ms)
			break;
		usleep(200 * 1000);
	}
	recs = faults_ranks(e, &nrec);

	/* present, alone in the team (no duplicate), in the state expected */
	{
		const char *count = ty_stack_sql("SELECT count(*) FROM jobs j JOIN teams t ON t.id = "
						 "j.team_id WHERE t.name = $1",
						 e->team, (const char *)NULL);
		const char *extra = ty_stack_sql(
			"SELECT coalesce(string_agg(j.id::text, ','), '') FROM jobs j JOIN teams t ON "
			"t.id = j.team_id WHERE t.name = $1 AND NOT j.id = ANY($2::bigint[])",
			e->team, ty_test_strf("{%s}", ids), (const char *)NULL);

		if (atoi(count) != n || *extra) {
			FAIL("team %s holds %s jobs, expected the %d submitted (%s); others: %s",
			     e->team, count, n, ids, *extra ? extra : "none");
			ok = false;
		}
	}
	for (int i = 0; i < n; i++) {
		int status;
		const char *st = job_state(e, jobs[i], &status);

		if (status != 200) {
			FAIL("job %lld is missing: GET /v1/jobs/%lld answered %d", jobs[i], jobs[i],
			     status);
			ok = false;
		} else if (!in_list(states[i], st)) {
			FAIL("job %lld ended '%s', expected %s", jobs[i], st, states[i]);
			describe(e, jobs[i], recs, nrec);
			ok = false;
		} else if (!strcmp(st, "succeeded")) {
			size_t k = 0;

			while (k < nrec && recs[k].job != jobs[i])
				k++;
			/* else the overlap check would pass for want of evidence */
			if (k == nrec) {
				FAIL("job %lld succeeded without a rank record in %s: run "
				     "FAULTS_RANK_CMD",
				     jobs[i], e->out);
				ok = false;
			}
		}
	}
	/* no gang twice at once */
	if ((bad = faults_overlaps(recs, nrec, report, sizeof(report))) != 0) {
		FAIL("%d sign(s) of a gang running twice:\n%s", bad, report);
		for (int i = 0; i < n; i++)
			if (strstr(report, ty_test_strf("job %lld", jobs[i])))
				describe(e, jobs[i], recs, nrec);
		ok = false;
	}
	/* a finished job never starts again (its side effects would happen twice) */
	{
		struct faults_world *worlds = calloc((size_t)n + 1, sizeof(*worlds));

		REQUIRE(worlds != NULL);
		for (int i = 0; i < n; i++) {
			worlds[i].job = jobs[i];
			worlds[i].ranks = atoi(ty_stack_sql(
			    "SELECT coalesce(max(world_size), 0) FROM attempts WHERE job_id = $1",
			    ty_test_strf("%lld", jobs[i]), (const char *)NULL));
		}
		if ((bad = faults_reruns(recs, nrec, worlds, (size_t)n, report, sizeof(report)))) {
			FAIL("%d job(s) started again after finishing:\n%s", bad, report);
			for (int i = 0; i < n; i++)
				if (strstr(report, ty_test_strf("job %lld:", jobs[i])))
					describe(e, jobs[i], recs, nrec);
			ok = false;
		}
		free(worlds);
	}
	if (*unreleased) {
		FAIL("allocations never released after %d ms: %s", waited, unreleased);
		ok = false;
	}
	if (strcmp(outbox, "0") != 0) {
		FAIL("dispatch_outbox still holds %s row(s) after %d ms: %s", outbox, waited,
		     ty_stack_sql("SELECT string_agg(format('%s to %s: %s', id, node_id, "
				  "left(payload, 160)), '; ') FROM dispatch_outbox",
				  (const char *)NULL));
		ok = false;
	}
	if (*live) {
		FAIL("processes of this case still run after %d ms (orphans): %s", waited, live);
		ok = false;
	}
	return ok;
}
