/*
 * Training progress and stragglers (docs/dispatch.md, "Progress", and
 * "Failures, retries and bad nodes"): the ranks' steps that heartbeats
 * carry, kept per node's part of an attempt, and a rank far below its
 * gang's median step rate for several reports in a row blamed on its node.
 */
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_STRAGGLER "straggler"
#define MAX_FLAGGED 64

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double sched_gang_median(const double *v, int n)
{
	double *k = n > 0 ? malloc((size_t)n * sizeof(*k)) : NULL, med;
	int m = 0;

	for (int i = 0; k && i < n; i++)
		if (v[i] >= 0)
			k[m++] = v[i];
	if (m < 2) {
		free(k);
		return -1;
	}
	qsort(k, (size_t)m, sizeof(*k), cmp_double);
	med = k[m / 2];
	free(k);
	return med > 0 ? med : -1;
}

double sched_straggler_lost(double rate, double median)
{
	if (!(median > 0) || !(rate >= 0) || rate >= median)
		return 0;
	return 1 - rate / median;
}

/* An entry's steps_per_second; -1 when null or absent */
static double rate_of(const json_t *e)
{
	const json_t *v = json_object_get(e, "steps_per_second");

	return json_is_number(v) ? json_number_value(v) : -1;
}

static int64_t rank_of(const json_t *e)
{
	return json_integer_value(json_object_get(e, "rank"));
}

/* The largest loss of progress's ranks judged stragglers (`below` at least reports). */
static double share_of(const json_t *progress, double median, int reports)
{
	const json_t *e;
	double most = 0;
	size_t i;

	json_array_foreach(progress, i, e)
	{
		double lost = sched_straggler_lost(rate_of(e), median);

		if (reports > 0 && json_integer_value(json_object_get(e, "below")) >= reports &&
		    lost > most)
			most = lost;
	}
	return most;
}

double sched_straggler_share(const json_t *mine, const json_t *others, const char *node,
			     double median, int reports)
{
	double most = share_of(mine, median, reports), f;
	const json_t *o;
	size_t i;

	json_array_foreach(others, i, o)
	{
		const char *on = json_string_value(json_object_get(o, "node"));

		if (on && !strcmp(on, node))
			continue;
		if ((f = share_of(json_object_get(o, "progress"), median, reports)) > most)
			most = f;
	}
	return most;
}

int sched_straggler_judge(size_t *flagged, size_t nflagged, double *median, json_t *mine,
			  const json_t *prev, const json_t *others, const char *node, int pct,
			  int reports)
{
	size_t n = json_array_size(mine), i, k, j;
	const json_t *o, *e;
	json_t *me;
	double *rates;
	int count = 0, m = 0;

	*median = -1;
	json_array_foreach(others, i, o)
	{
		const char *on = json_string_value(json_object_get(o, "node"));

		if (!on || strcmp(on, node))
			n += json_array_size(json_object_get(o, "progress"));
	}
	if (!(rates = calloc(n + 1, sizeof(*rates))))
		return -1;
	json_array_foreach(mine, i, me)
		rates[m++] = rate_of(me);
	json_array_foreach(others, i, o)
	{
		const char *on = json_string_value(json_object_get(o, "node"));

		if (on && !strcmp(on, node))
			continue;
		json_array_foreach(json_object_get(o, "progress"), k, e)
			rates[m++] = rate_of(e);
	}
	*median = sched_gang_median(rates, m);
	free(rates);
	json_array_foreach(mine, i, me)
	{
		double r = rate_of(me);
		int64_t below = 0;

		if (pct > 0 && *median > 0 && r >= 0 && r < *median * pct / 100.0) {
			below = 1;
			json_array_foreach(prev, j, e)
				if (rank_of(e) == rank_of(me) &&
				    json_is_integer(json_object_get(e, "below")))
					below = json_integer_value(json_object_get(e, "below")) + 1;
		}
		json_object_set_new(me, "below", json_integer(below));
		if (below == reports && (size_t)count < nflagged)
			flagged[count++] = i;
	}
	return count;
}

/* The well-formed entries of a running entry's progress[] (new); NULL: none */
static json_t *progress_clean(const json_t *progress, const char *node, int64_t job)
{
	/* one line a minute at most: a node repeats a bad entry in every heartbeat */
	static int64_t last_warned_ms = -60000;
	json_t *clean = json_array();
	const json_t *e;
	size_t i;

	json_array_foreach(progress, i, e)
	{
		struct ty_err err = {0};

		if (!proto_progress_check(e, &err)) {
			json_array_append_new(
			    clean, json_pack("{s:O, s:O, s:O*, s:O*, s:O}", "rank",
					     json_object_get(e, "rank"), "step",
					     json_object_get(e, "step"), "steps_per_second",
					     json_object_get(e, "steps_per_second"),
					     "samples_per_second",
					     json_object_get(e, "samples_per_second"), "step_at",
					     json_object_get(e, "step_at")));
		} else if (ty_mono_ms() - last_warned_ms >= 60000) {
			last_warned_ms = ty_mono_ms();
			ty_warn("node '%s': heartbeat progress of job %lld ignored: %s (such lines "
				"are logged once a minute)",
				node, (long long)job, err.msg);
		}
	}
	if (json_array_size(clean) == 0) {
		json_decref(clean);
		return NULL;
	}
	return clean;
}

/* A straggler: its verdict, its job event, its node blamed and a condition of it */
static int straggler(struct sched *s, const char *node, int64_t job, int64_t attempt,
		     const char *state, const json_t *e, double median, struct ty_err *err)
{
	char evidence[256], msg[320], *text = NULL;
	double r = rate_of(e);
	json_t *v, *cond = NULL;
	int64_t now;
	int rc;

	snprintf(evidence, sizeof(evidence),
		 "rank %lld at %.3g steps/s against the gang's median %.3g (job %lld, attempt "
		 "%lld)",
		 (long long)rank_of(e), r, median, (long long)job, (long long)attempt);
	if (!(v = json_pack("{s:I, s:s, s:f, s:f, s:I}", "rank", (json_int_t)rank_of(e), "node",
			    node, "steps_per_second", r, "median", median, "attempt",
			    (json_int_t)attempt)) ||
	    !(text = json_dumps(v, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	ty_warn("node '%s': straggler: %s", node, evidence);
	snprintf(msg, sizeof(msg), "straggler on %s: %s", node, evidence);
	if ((rc = sched_store_straggler(s->term.pg, job, attempt, text, err)) ||
	    (rc = sched_job_event(s, job, EVENT_STRAGGLER, state, msg, v, err)))
		goto out;
	if ((rc = sched_blame_node(s, node, job, attempt, "system", evidence,
				   SCHED_STRAGGLER_WHY, PROTO_EVIDENCE_EXECUTOR, err)))
		goto out;
	now = ty_wall_ms();
	if (!(cond = json_pack("{s:s, s:s, s:n, s:n, s:n, s:s, s:I, s:I}", "kind",
			       SCHED_CONDITION_STRAGGLER, "severity", "degraded", "gpu", "port",
			       "code", "evidence", evidence, "first_seen", (json_int_t)now,
			       "last_seen", (json_int_t)now))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = sched_condition_note(s, node, cond, err);
out:
	free(text);
	json_decref(v);
	json_decref(cond);
	return rc;
}

/* One running entry with progress: kept, judged */
static int progress_one(struct sched *s, const char *node, const json_t *entry,
			struct ty_err *err)
{
	int64_t job = json_integer_value(json_object_get(entry, "job"));
	int64_t attempt = json_integer_value(json_object_get(entry, "attempt"));
	json_t *mine = NULL, *gang = NULL, *prev = NULL;
	char *gtext = NULL, *state = NULL, *text = NULL;
	size_t flagged[MAX_FLAGGED];
	const json_t *o;
	double median, was, now;
	size_t i;
	int rc, n;

	if (job < 1 || attempt < 1 ||
	    !(mine = progress_clean(json_object_get(entry, "progress"), node, job)))
		return 0;
	if ((rc = sched_store_progress_gang(&gtext, &state, &was, s->term.pg, job, attempt, node,
					    err)) ||
	    !gtext)
		goto out; /* not a live part of the job's running attempt */
	if (!(gang = json_loads(gtext, 0, NULL))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	json_array_foreach(gang, i, o)
		if (json_is_string(json_object_get(o, "node")) &&
		    !strcmp(json_string_value(json_object_get(o, "node")), node))
			prev = json_object_get(o, "progress");
	n = sched_straggler_judge(flagged, MAX_FLAGGED, &median, mine, prev, gang, node,
				  s->o.straggler_pct, s->o.straggler_reports);
	if (n < 0 || !(text = json_dumps(mine, JSON_COMPACT | JSON_REAL_PRECISION(15)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_store_progress_node(s->term.pg, job, attempt, node, text, err)))
		goto out;
	now = sched_straggler_share(mine, gang, node, median, s->o.straggler_reports);
	if ((now > 0) != (was > 0) || fabs(now - was) >= SCHED_STRAGGLER_SHARE_STEP) {
		if ((rc = sched_store_straggler_share(s->term.pg, job, attempt, now, err)))
			goto out;
	}
	for (int k = 0; !rc && k < n; k++)
		rc = straggler(s, node, job, attempt, state, json_array_get(mine, flagged[k]),
			       median, err);
out:
	json_decref(mine);
	json_decref(gang);
	free(gtext);
	free(state);
	free(text);
	return rc;
}

int sched_progress_apply(struct sched *s, const char *node, const json_t *running,
			 struct ty_err *err)
{
	const json_t *e;
	size_t i;
	int rc = 0;

	json_array_foreach(running, i, e)
	{
		if (json_is_array(json_object_get(e, "progress")) &&
		    (rc = progress_one(s, node, e, err)))
			break;
	}
	return rc;
}
