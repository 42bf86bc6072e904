/*
 * Trial metrics: POST /v1/jobs/{id}/metrics (a job's ranks with their
 * attempt's token, or a member of its team) and GET /v1/jobs/{id}/metrics.
 */
#include "api.h"
#include "ty_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEP 9007199254740991LL /* 2^53 - 1: exact in every JSON reader */

bool api_metric_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > API_METRIC_NAME_MAX ||
	    !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-") == n;
}

int api_metrics_report_check(const json_t *body, struct api_problem *p)
{
	const json_t *step = json_object_get(body, "step"), *m = json_object_get(body, "metrics");
	const char *k;
	const json_t *v;

	json_object_foreach((json_t *)body, k, v) if (strcmp(k, "step") && strcmp(k, "metrics"))
		return api_problem_set(p, API_P_UNKNOWN_FIELD, k, "unknown field '%s'", k);
	if (!step)
		return api_problem_set(p, API_P_MISSING_FIELD, "step",
				       "'step' is required: the training step the metrics are of");
	if (!json_is_integer(step) || json_integer_value(step) < 0 ||
	    json_integer_value(step) > MAX_STEP)
		return api_problem_set(p, API_P_INVALID_FIELD, "step",
				       "'step' must be an integer from 0 to %lld", MAX_STEP);
	if (!m)
		return api_problem_set(p, API_P_MISSING_FIELD, "metrics",
				       "'metrics' is required: an object of name to number");
	if (!json_is_object(m) || json_object_size(m) == 0 ||
	    json_object_size(m) > API_METRICS_PER_REPORT)
		return api_problem_set(p, API_P_INVALID_FIELD, "metrics",
				       "'metrics' must be an object of 1 to %d names to numbers",
				       API_METRICS_PER_REPORT);
	json_object_foreach((json_t *)m, k, v) {
		char field[300];

		snprintf(field, sizeof(field), "metrics.%.200s", k);
		if (!api_metric_name_ok(k))
			return api_problem_set(
			    p, API_P_INVALID_FIELD, field,
			    "metric name '%.200s' must be 1 to %d characters of letters, digits and "
			    "_ . : / -, starting with a letter or _",
			    k, API_METRIC_NAME_MAX);
		if (!json_is_number(v) || !isfinite(json_number_value(v)))
			return api_problem_set(p, API_P_INVALID_FIELD, field,
					       "metric '%.200s' must be a finite number, not %s", k,
					       ty_json_type_name(v));
	}
	return 0;
}

/* A trial token reaches its own job only: 403 for any other (0: allowed). */
static int trial_scope(struct api_req *r, int64_t job)
{
	if (!r->auth.trial_job || r->auth.trial_job == job)
		return 0;
	api_reply_error(r, API_P_FORBIDDEN, NULL,
			"this trial metrics token is for job %lld only, not job %lld",
			(long long)r->auth.trial_job, (long long)job);
	return -1;
}

int api_h_job_metrics_post(struct api_req *r, struct ty_err *err)
{
	struct api_problem prob = {0};
	char *metrics = NULL;
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	if (trial_scope(r, id))
		return 0;
	if (api_metrics_report_check(r->json, &prob))
		return api_reply_problem(r, &prob);
	if (!(metrics = json_dumps(json_object_get(r->json, "metrics"), JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	{
		const char *p[5] = {
		    r->params[0],
		    ty_arena_printf(r->arena, "%lld",
				    (long long)json_integer_value(json_object_get(r->json, "step"))),
		    r->auth.trial_job ? ty_arena_printf(r->arena, "%d", r->auth.trial_attempt)
				      : NULL,
		    metrics, api_scope(r)};

		/* a repeated step merges: the newest value of each name wins */
		rc = ty_pg_exec(&res, r->pg,
				"INSERT INTO job_metrics AS m (job_id, step, attempt, metrics)"
				" SELECT j.id, $2, coalesce($3::integer, nullif(j.attempt, 0)),"
				" $4::jsonb FROM jobs j"
				" WHERE j.id = $1 AND ($5::bigint IS NULL OR j.team_id = $5)"
				" ON CONFLICT (job_id, step) DO UPDATE SET"
				" metrics = m.metrics || excluded.metrics,"
				" attempt = excluded.attempt, reported_at = now()"
				" RETURNING json_build_object('job_id', job_id, 'step', step,"
				" 'attempt', attempt, 'metrics', metrics,"
				" 'reported_at', ty_ts(reported_at))::text",
				5, p, err);
	}
	free(metrics);
	if (rc)
		return rc;
	rc = PQntuples(res) ? api_reply_text(r, 200, PQgetvalue(res, 0, 0))
			    : api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'",
					      r->params[0]);
	PQclear(res);
	return rc;
}

int api_h_job_metrics_get(struct api_req *r, struct ty_err *err)
{
	const char *name = api_query(r, "name");
	long long after, limit;
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	if (trial_scope(r, id))
		return 0;
	if (name && !api_metric_name_ok(name))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "name",
				       "'name' is not a metric name: 1 to %d characters of letters, "
				       "digits and _ . : / -, starting with a letter or _",
				       API_METRIC_NAME_MAX);
	if (api_int_param(r, &after, "after_step", -1, -1, MAX_STEP) ||
	    api_int_param(r, &limit, "limit", 100, 1, 1000))
		return 0;
	{
		const char *p[5] = {r->params[0], api_scope(r), name,
				    ty_arena_printf(r->arena, "%lld", after),
				    ty_arena_printf(r->arena, "%lld", limit)};

		/* one more row than asked tells whether another page exists */
		rc = ty_pg_exec(
		    &res, r->pg,
		    "SELECT json_build_object('job_id', j.id,"
		    " 'items', coalesce((SELECT json_agg(json_build_object('step', x.step,"
		    "  'attempt', x.attempt, 'metrics', x.metrics, 'reported_at', ty_ts(x.reported_at))"
		    "  ORDER BY x.step) FROM (SELECT step, attempt, reported_at,"
		    "   CASE WHEN $3::text IS NULL THEN metrics"
		    "   ELSE jsonb_build_object($3::text, metrics->$3::text) END AS metrics"
		    "   FROM job_metrics WHERE job_id = j.id AND step > $4::bigint"
		    "   AND ($3::text IS NULL OR metrics ? $3::text)"
		    "   ORDER BY step LIMIT $5::integer) x), '[]'),"
		    " 'next_after_step', (SELECT CASE WHEN count(*) > $5::integer"
		    "  THEN max(step) FILTER (WHERE rn <= $5::integer) END"
		    "  FROM (SELECT step, row_number() OVER (ORDER BY step) AS rn FROM job_metrics"
		    "   WHERE job_id = j.id AND step > $4::bigint"
		    "   AND ($3::text IS NULL OR metrics ? $3::text)"
		    "   ORDER BY step LIMIT $5::integer + 1) y),"
		    " 'latest', ty_job_latest_metrics(j.id))::text"
		    " FROM jobs j WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)",
		    5, p, err);
	}
	if (rc)
		return rc;
	rc = PQntuples(res) ? api_reply_text(r, 200, PQgetvalue(res, 0, 0))
			    : api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'",
					      r->params[0]);
	PQclear(res);
	return rc;
}
