/*
 * Trial metrics: POST /v1/jobs/{id}/metrics (a job's ranks with their
 * attempt's token, or a member of its team) and GET /v1/jobs/{id}/metrics.
 */
#include "api.h"
#include "store.h"
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

static int job_not_found(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
}

/* A trial token reaches its own job only: 403 for any other. */
static int trial_scope(struct api_req *r, int64_t job, struct ty_err *err)
{
	if (!r->auth.trial_job || r->auth.trial_job == job)
		return 0;
	return api_fail(r, err, API_P_FORBIDDEN, NULL,
			"this trial metrics token is for job %lld only, not job %lld",
			(long long)r->auth.trial_job, (long long)job);
}

int api_h_job_metrics_post(struct api_req *r, struct ty_err *err)
{
	struct api_problem prob = {0};
	struct api_metrics_report m = {0};
	char *metrics = NULL;
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return job_not_found(r, err);
	if ((rc = trial_scope(r, id, err)))
		return rc;
	if (api_metrics_report_check(r->json, &prob))
		return api_fail_problem(r, err, &prob);
	if (!(metrics = json_dumps(json_object_get(r->json, "metrics"), JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	m.job_id = r->params[0];
	m.step = ty_arena_printf(r->arena, "%lld",
				 (long long)json_integer_value(json_object_get(r->json, "step")));
	m.attempt = r->auth.trial_job ? ty_arena_printf(r->arena, "%d", r->auth.trial_attempt)
				      : NULL;
	m.metrics = metrics;
	m.scope = api_scope(r);
	rc = api_store_job_metrics_put(&doc, r->pg, r->arena, &m, err);
	free(metrics);
	if (rc)
		return rc;
	return doc ? api_reply_text(r, 200, doc) : job_not_found(r, err);
}

int api_h_job_metrics_get(struct api_req *r, struct ty_err *err)
{
	const char *name = api_query(r, "name"), *doc;
	long long after, limit;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return job_not_found(r, err);
	if ((rc = trial_scope(r, id, err)))
		return rc;
	if (name && !api_metric_name_ok(name))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "name",
				"'name' is not a metric name: 1 to %d characters of letters, "
				"digits and _ . : / -, starting with a letter or _",
				API_METRIC_NAME_MAX);
	if ((rc = api_int_param(r, err, &after, "after_step", -1, -1, MAX_STEP)) ||
	    (rc = api_int_param(r, err, &limit, "limit", 100, 1, 1000)))
		return rc;
	if ((rc = api_store_job_metrics_page(&doc, r->pg, r->arena, r->params[0], api_scope(r),
					     name, after, limit, err)))
		return rc;
	return doc ? api_reply_text(r, 200, doc) : job_not_found(r, err);
}
