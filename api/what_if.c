/*
 * POST /v1/queue/what-if (docs/api.md, "What-if"): a job spec's estimated
 * start and its alternatives, without submitting it. The spec is checked as
 * a submission's, stored for the leading scheduler, and the request parks
 * until the scheduler answers (watch.c) or its wait runs out.
 */
#include "api.h"
#include "job_spec.h"
#include "store.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_DEFAULT_S 30
#define WAIT_MAX_S 60

/* Wait for the answer to r->what_if_id: reply with it, or 503 once the wait ran out. */
static int answer(struct api_req *r, struct ty_err *err)
{
	const char *doc = NULL;
	int rc;

	for (;;) {
		bool waiting = ty_mono_ms() < r->wait_deadline_ms;

		/* armed before the query, so an answer written meanwhile wakes us */
		if (waiting)
			api__watch_arm(r, -atoll(r->what_if_id), r->wait_deadline_ms);
		rc = api_store_what_if_answer(&doc, r->pg, r->arena, r->what_if_id, api_scope(r),
					      err);
		if (rc || doc || !waiting) {
			api__watch_disarm(r);
			break;
		}
		/* no pooled connection is held while it waits */
		api__pool_put(r->srv, r->pg);
		r->pg = NULL;
		if (api__watch_park(r))
			return 0; /* called again when woken */
		if ((rc = api__pool_get(&r->pg, r->srv, err)))
			return rc;
	}
	if (rc)
		return rc;
	if ((rc = api_store_what_if_forget(r->pg, r->what_if_id, err)))
		return rc;
	if (!doc)
		return api_fail(r, err, API_P_UNAVAILABLE, NULL,
				"no scheduler answered the what-if within its wait: is a scheduler "
				"running and leading? (ask again, or with a longer 'wait')");
	return api_reply_text(r, 200, doc);
}

int api_h_queue_what_if(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	struct api_team_limits t;
	const char *team, *id, *cls;
	char prio[24], *text = NULL;
	long long wait;
	json_t *spec;
	int rc;

	if (r->what_if_id)
		return answer(r, err);
	if ((rc = api_int_param(r, err, &wait, "wait", WAIT_DEFAULT_S, 1, WAIT_MAX_S)))
		return rc;
	if (!(spec = api_validate_job(r->json, &p)))
		return api_fail_problem(r, err, &p);
	team = json_string_value(json_object_get(spec, "team"));
	if (r->auth.role != API_ROLE_ADMIN && strcmp(team, r->auth.team) != 0) {
		rc =
		    api_fail(r, err, API_P_FORBIDDEN, "team",
			     "a token of team '%s' cannot ask about team '%s'", r->auth.team, team);
		goto out;
	}
	if ((rc = api_store_team_limits(&t, r->pg, r->arena, team, err)))
		goto out;
	if (!t.id) {
		rc = api_fail(r, err, API_P_UNKNOWN_TEAM, "team", "no team '%s'", team);
		goto out;
	}
	snprintf(prio, sizeof(prio), "%lld",
		 (long long)json_integer_value(json_object_get(spec, "priority")));
	if (!(text = json_dumps(spec, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	cls = json_string_value(json_object_get(spec, "priority_class"));
	if ((rc = api_store_what_if_ask(&id, r->pg, r->arena, t.id,
					cls ? cls : proto_spec_default_str(NULL, "priority_class"),
					prio, text, err)))
		goto out;
	r->what_if_id = id;
	r->wait_deadline_ms = ty_mono_ms() + wait * 1000;
	r->audited = true; /* nothing changes: no audit row */
	rc = answer(r, err);
out:
	free(text);
	json_decref(spec);
	return rc;
}
