/* The fault suites' invariants: see soak_checks.h. */
#include "soak_checks.h"
#include "ty_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RANKS_MAX 16
#define ATTEMPTS_MAX 8

const char *fchk_rank_command(int ticks)
{
	/* start time in ms, then one line per tick: the file's mtime is the last sign of life */
	return ty_test_strf(
	    "[\"/bin/sh\",\"-c\",\"f=$OUTDIR/rank-$TRAINYARD_JOB_ID-$TRAINYARD_ATTEMPT-$RANK.$$; "
	    "echo start $(date +%%s%%3N) > $f; i=0; while [ $i -lt %d ]; do sleep 0.25; "
	    "echo . >> $f; i=$((i+1)); done; echo end >> $f\"]",
	    ticks);
}

int fchk_jobs_present(struct e2e *e, const struct fchk_job *jobs, int n)
{
	int bad = 0, listed;

	for (int i = 0; i < n; i++) {
		struct ty_resp r = {0};

		if (ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", jobs[i].id), e->token, NULL,
			    NULL) != 200) {
			FAIL("job %lld is missing: GET answers %d", jobs[i].id, r.status);
			bad++;
		}
		ty_resp_free(&r);
	}
	if ((listed = ty_count_jobs(e->token, ty_test_strf("team=%s", e->team))) != n) {
		FAIL("team %s lists %d jobs, %d were submitted", e->team, listed, n);
		bad++;
	}
	return bad;
}

static bool terminal(const char *st)
{
	return st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") ||
		      !strcmp(st, "cancelled") || !strcmp(st, "stopped"));
}

/* Whether every attempt of a failed job failed as system or node_lost (a fault's doing). */
static bool failed_by_faults(struct e2e *e, const struct fchk_job *j)
{
	json_t *items = e2e_attempts(e, j->id), *a;
	size_t i;
	bool ok = json_array_size(items) > 0;

	json_array_foreach(items, i, a)
	{
		const char *cls = ty_jstr(a, "failure_class");

		if (!cls || (strcmp(cls, "system") && strcmp(cls, "node_lost")))
			ok = false;
	}
	json_decref(items);
	return ok;
}

int fchk_terminal(struct e2e *e, struct fchk_job *jobs, int n, int timeout_ms)
{
	struct timespec t0;
	int bad = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		struct fchk_job *j = &jobs[i];

		for (;;) {
			struct ty_resp r = {0};
			struct timespec t;
			const char *st;

			ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", j->id), e->token, NULL,
				NULL);
			st = r.status == 200 ? ty_jstr(r.json, "state") : NULL;
			snprintf(j->state, sizeof(j->state), "%s", st ? st : "?");
			j->attempts = r.status == 200 ? (int)ty_jint(r.json, "attempt") : -1;
			snprintf(j->last_class, sizeof(j->last_class), "%s",
				 r.status == 200 && ty_jstr(r.json, "failure_class")
				     ? ty_jstr(r.json, "failure_class")
				     : "");
			ty_resp_free(&r);
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (terminal(j->state) ||
			    (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
				timeout_ms)
				break;
			usleep(100 * 1000);
		}
		if (!terminal(j->state)) {
			FAIL("job %lld is still '%s' (attempt %d) after %d ms", j->id, j->state,
			     j->attempts, timeout_ms);
			bad++;
		} else if (strcmp(j->state, j->want) &&
			   !(j->may_retry && !strcmp(j->state, "failed") &&
			     failed_by_faults(e, j))) {
			FAIL("job %lld ended '%s' (attempt %d, class '%s'), want '%s'", j->id,
			     j->state, j->attempts, j->last_class, j->want);
			bad++;
		} else if (!j->may_retry && j->attempts != 1) {
			FAIL("job %lld ended '%s' after %d attempts, want exactly one", j->id,
			     j->state, j->attempts);
			bad++;
		}
	}
	return bad;
}

/* What the rank files say about one attempt. */
struct seen {
	int count[RANKS_MAX];
	bool ended[RANKS_MAX];		   /* a file of the rank ends with "end" */
	long long first_start, last_alive; /* ms */
	bool any;
};

static struct seen *seen_for(struct seen (*v)[ATTEMPTS_MAX + 1], const struct fchk_job *jobs, int n,
			     long long job, int attempt)
{
	for (int i = 0; i < n; i++)
		if (jobs[i].id == job)
			return attempt >= 1 && attempt <= ATTEMPTS_MAX ? &v[i][attempt] : NULL;
	return NULL;
}

int fchk_ranks(struct e2e *e, const struct fchk_job *jobs, int n)
{
	struct seen(*v)[ATTEMPTS_MAX + 1] = calloc((size_t)n + 1, sizeof(*v));
	DIR *d = opendir(e->out);
	struct dirent *de;
	int bad = 0;

	REQUIRE(v && d);
	while ((de = readdir(d))) {
		long long job, start = 0;
		int attempt, rank;
		struct stat st;
		struct seen *s;
		const char *text, *path = ty_test_strf("%s/%s", e->out, de->d_name);

		if (sscanf(de->d_name, "rank-%lld-%d-%d.", &job, &attempt, &rank) != 3)
			continue;
		if (!(s = seen_for(v, jobs, n, job, attempt)) || rank < 0 || rank >= RANKS_MAX) {
			FAIL("rank file '%s' is of no job this check knows (or attempt > %d)",
			     de->d_name, ATTEMPTS_MAX);
			bad++;
			continue;
		}
		if (stat(path, &st) != 0 || !(text = e2e_read(e, de->d_name)) ||
		    sscanf(text, "start %lld", &start) != 1)
			continue; /* a rank killed before it wrote its start: it did not run */
		s->count[rank]++;
		s->ended[rank] = s->ended[rank] || strstr(text, "\nend\n") != NULL;
		if (!s->any || start < s->first_start)
			s->first_start = start;
		long long alive =
		    (long long)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		if (!s->any || alive > s->last_alive)
			s->last_alive = alive;
		s->any = true;
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		const struct fchk_job *j = &jobs[i];
		int last = 0;

		for (int a = 1; a <= ATTEMPTS_MAX; a++) {
			const struct seen *s = &v[i][a];

			if (!s->any)
				continue;
			last = a;
			for (int r = 0; r < j->ranks && r < RANKS_MAX; r++)
				if (s->count[r] > 1) {
					FAIL("job %lld attempt %d: rank %d started %d times", j->id,
					     a, r, s->count[r]);
					bad++;
				}
			for (int b = a + 1; b <= ATTEMPTS_MAX; b++)
				if (v[i][b].any && v[i][b].first_start <= s->last_alive) {
					FAIL(
					    "job %lld: attempt %d started at %lld while attempt %d "
					    "was alive until %lld",
					    j->id, b, v[i][b].first_start, a, s->last_alive);
					bad++;
				}
		}
		/* a finished attempt is the last: a finished job never starts again */
		for (int a = 1, done = 0; a <= ATTEMPTS_MAX && !done; a++) {
			int r = 0;

			while (r < j->ranks && r < RANKS_MAX && v[i][a].ended[r])
				r++;
			done = v[i][a].any && r == j->ranks;
			if (done && last > a) {
				FAIL("job %lld: attempt %d finished (all %d ranks wrote their end) "
				     "and "
				     "attempt %d started again",
				     j->id, a, j->ranks, last);
				bad++;
			}
		}
		if (!j->may_retry && last > 1) {
			FAIL("job %lld ran attempt %d, want attempt 1 only", j->id, last);
			bad++;
		}
		if (!strcmp(j->state, "succeeded")) {
			const struct seen *s = last ? &v[i][last] : NULL;

			if (last != j->attempts) {
				FAIL("job %lld succeeded with attempt %d but its ranks ran attempt "
				     "%d "
				     "last",
				     j->id, j->attempts, last);
				bad++;
			}
			for (int r = 0; s && r < j->ranks && r < RANKS_MAX; r++)
				if (s->count[r] != 1) {
					FAIL("job %lld succeeded but rank %d of attempt %d ran %d "
					     "times",
					     j->id, r, last, s->count[r]);
					bad++;
				}
		}
	}
	free(v);
	return bad;
}

static long long mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int fchk_no_leak(int timeout_ms)
{
	const struct ty_stack *s = ty_stack_get();
	long long until = mono_ms() + timeout_ms;
	const char *live = "?", *short_nodes = "?";

	for (;;) {
		struct ty_resp r = {0};
		json_t *n;
		size_t i;
		int shortfall = 0;

		live = TY_STACK_SQL("SELECT count(*) FROM allocations WHERE released_at IS NULL");
		if (ty_http(&r, "GET", "/v1/nodes?limit=500", s->admin, NULL, NULL) == 200) {
			short_nodes = "";
			json_array_foreach(ty_jpath(r.json, "items"), i, n)
			{
				if (ty_jint(n, "gpus_free") != ty_jint(n, "gpus_total")) {
					shortfall++;
					short_nodes =
					    ty_test_strf("%s %s (%lld of %lld free)", short_nodes,
							 ty_jstr(n, "id"), ty_jint(n, "gpus_free"),
							 ty_jint(n, "gpus_total"));
				}
			}
		} else {
			shortfall = 1;
		}
		ty_resp_free(&r);
		if (!strcmp(live, "0") && shortfall == 0)
			return 0;
		if (mono_ms() > until)
			break;
		usleep(200 * 1000);
	}
	FAIL("allocations leaked: %s unreleased; nodes short of GPUs:%s", live, short_nodes);
	return 1;
}

int fchk_outbox_drained(int timeout_ms)
{
	long long until = mono_ms() + timeout_ms;
	const char *left;

	for (;;) {
		left = TY_STACK_SQL("SELECT count(*) FROM dispatch_outbox");
		if (!strcmp(left, "0"))
			return 0;
		if (mono_ms() > until)
			break;
		usleep(200 * 1000);
	}
	FAIL("the outbox did not drain: %s row(s) left (%s)", left,
	     TY_STACK_SQL("SELECT string_agg(id || ':' || node_id || ':' || left(payload, 60), ' ')"
			  " FROM dispatch_outbox"));
	return 1;
}

int fchk_all(struct e2e *e, struct fchk_job *jobs, int n, int timeout_ms)
{
	int bad = fchk_terminal(e, jobs, n, timeout_ms);

	bad += fchk_jobs_present(e, jobs, n);
	bad += fchk_ranks(e, jobs, n);
	bad += fchk_no_leak(20000);
	bad += fchk_outbox_drained(20000);
	return bad;
}
