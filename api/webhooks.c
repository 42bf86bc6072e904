/*
 * Webhook routes: register, read, list, deactivate, deliveries, ping. The
 * queue itself is filled by a trigger (migrations/0013_webhooks.sql) and
 * drained by deliver.c. A webhook's secret is written once and never read
 * back here.
 */
#include "api.h"
#include "lifecycle.h"
#include "store.h"
#include "ty_json.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const webhook_keys[] = {"team", "url", "events", "secret", NULL};

bool api_webhook_event_ok(const char *name)
{
	/* a team's budget reached 80 % (docs/scheduling.md, "Budgets") */
	if (!strcmp(name, "*") || !strcmp(name, "team.budget"))
		return true;
	if (strncmp(name, "job.", 4) != 0)
		return false;
	return proto_job_state_parse(name + 4) != PROTO_JOB_STATE_COUNT;
}

/* http or https, a host, no credentials, no fragment, no blanks or controls. */
static bool url_ok(const char *s, const char **why)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *user = NULL, *frag = NULL;
	bool ok = false;

	*why = "not a valid URL";
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c <= ' ' || *c >= 0x7f) {
			*why = "it holds a blank, a control or a non-ASCII character";
			goto out;
		}
	if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) {
		*why = "the scheme must be http or https";
		goto out;
	}
	if (!u || curl_url_set(u, CURLUPART_URL, s, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
		*why = "it has no host";
		goto out;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
		*why = "credentials in the URL are not allowed (the secret signs requests)";
		goto out;
	}
	if (curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
		*why = "a fragment is not sent in a request";
		goto out;
	}
	ok = true;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(user);
	curl_free(frag);
	curl_url_cleanup(u);
	return ok;
}

int api_validate_webhook(const json_t *body, struct api_problem *p)
{
	const json_t *v, *e;
	const char *unk, *why;
	size_t i;

	if ((unk = ty_json_unknown_key(body, webhook_keys)))
		return api_problem_set(p, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	for (i = 0; webhook_keys[i]; i++)
		if (!json_object_get(body, webhook_keys[i]))
			return api_problem_set(p, API_P_MISSING_FIELD, webhook_keys[i],
					       "'%s' is required", webhook_keys[i]);
	v = json_object_get(body, "team");
	if (!json_is_string(v) || !api_team_name_ok(json_string_value(v)))
		return api_problem_set(p, API_P_INVALID_FIELD, "team",
				       "'team' must be a team name");
	v = json_object_get(body, "url");
	if (!json_is_string(v) || json_string_length(v) > API_WEBHOOK_URL_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return api_problem_set(p, API_P_INVALID_FIELD, "url",
				       "'url' must be an http or https URL of at most %d characters",
				       API_WEBHOOK_URL_MAX);
	if (!url_ok(json_string_value(v), &why))
		return api_problem_set(p, API_P_INVALID_FIELD, "url", "'url' is refused: %s",
				       why);
	v = json_object_get(body, "events");
	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > API_WEBHOOK_EVENTS_MAX)
		return api_problem_set(p, API_P_INVALID_FIELD, "events",
				       "'events' must be an array of 1 to %d event names",
				       API_WEBHOOK_EVENTS_MAX);
	json_array_foreach(v, i, e) {
		char field[32];

		snprintf(field, sizeof(field), "events[%zu]", i);
		if (!json_is_string(e) || !api_webhook_event_ok(json_string_value(e)))
			return api_problem_set(p, API_P_INVALID_FIELD, field,
					       "'%s' is not an event: use \"*\", team.budget or job.<state> with "
					       "a state of pending, scheduled, starting, running, "
					       "preempting, succeeded, failed, cancelled, stopped",
					       json_is_string(e) ? json_string_value(e) : field);
		for (size_t k = 0; k < i; k++)
			if (json_equal(json_array_get(v, k), e))
				return api_problem_set(p, API_P_INVALID_FIELD, field,
						       "'%s' is listed twice", json_string_value(e));
	}
	v = json_object_get(body, "secret");
	if (!json_is_string(v) || json_string_length(v) < API_WEBHOOK_SECRET_MIN ||
	    json_string_length(v) > API_WEBHOOK_SECRET_MAX)
		return api_problem_set(p, API_P_INVALID_FIELD, "secret",
				       "'secret' must be %d to %d printable ASCII characters",
				       API_WEBHOOK_SECRET_MIN, API_WEBHOOK_SECRET_MAX);
	for (const char *c = json_string_value(v); *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			return api_problem_set(p, API_P_INVALID_FIELD, "secret",
					       "'secret' must be %d to %d printable ASCII "
					       "characters",
					       API_WEBHOOK_SECRET_MIN, API_WEBHOOK_SECRET_MAX);
	return 0;
}

static int webhook_not_found(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_WEBHOOK_NOT_FOUND, NULL, "no webhook '%s'", r->params[0]);
}

/* Cursor and limit of a list, or the 400 refusing them. */
static int page_params(struct api_req *r, const char **cursor, const char **limit,
		       struct ty_err *err)
{
	int64_t v;

	*cursor = api_query(r, "cursor");
	*limit = "50";
	if (*cursor && !api_parse_id(&v, *cursor))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
	if (api_query(r, "limit")) {
		*limit = api_query(r, "limit");
		if (!api_parse_id(&v, *limit) || v > 500)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "limit",
					"'limit' must be an integer from 1 to 500");
	}
	return 0;
}

int api_h_webhooks_create(struct api_req *r, struct ty_err *err)
{
	struct api_problem p;
	struct api_webhook_new w = {0};
	const char *team = json_string_value(json_object_get(r->json, "team")), *doc;
	char tok[24], *events = NULL;
	int rc, n;

	if (api_validate_webhook(r->json, &p))
		return api_fail_problem(r, err, &p);
	if ((rc = api_submit_team(&w.team_id, r, team, 0, "team", "the webhook", err)))
		return rc;
	if (!(events = json_dumps(json_object_get(r->json, "events"), JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	snprintf(tok, sizeof(tok), "%lld", (long long)r->auth.token_id);
	w.url = json_string_value(json_object_get(r->json, "url"));
	w.events = events;
	w.secret = json_string_value(json_object_get(r->json, "secret"));
	w.created_by = tok;
	if ((rc = ty_pg_begin(r->pg, err)))
		goto out;
	/* the per-team limit, counted under the team's row lock */
	if ((rc = api_store_webhooks_active(&n, r->pg, w.team_id, err)))
		goto fail;
	if (n >= API_WEBHOOKS_PER_TEAM) {
		ty_pg_rollback(r->pg);
		rc = api_fail(r, err, API_P_WEBHOOK_LIMIT, "team",
			      "team '%s' already has %d active webhooks; delete one first", team,
			      API_WEBHOOKS_PER_TEAM);
		goto out;
	}
	if ((rc = api_store_webhook_insert(&doc, r->pg, r->arena, &w, err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		goto fail;
	rc = api_reply_text(r, 201, doc);
	goto out;
fail:
	ty_pg_rollback(r->pg);
out:
	free(events);
	return rc;
}

int api_h_webhooks_get(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r, err);
	if ((rc = api_store_webhook_get(&doc, r->pg, r->arena, r->params[0], api_scope(r), err)))
		return rc;
	return doc ? api_reply_text(r, 200, doc) : webhook_not_found(r, err);
}

int api_h_webhooks_list(struct api_req *r, struct ty_err *err)
{
	struct api_page_filter f = {.scope = api_scope(r), .team = api_query(r, "team")};
	const char *items, *next;
	int rc;

	if ((rc = page_params(r, &f.cursor, &f.limit, err)) ||
	    (rc = api_store_webhooks_page(&items, &next, r->pg, r->arena, &f, err)))
		return rc;
	return api_reply_page(r, items, next, err);
}

/*
 * Lock the webhook for a write: 404 for a missing one or another team's,
 * then 403 for a viewer (so a viewer of another team cannot probe ids).
 * Returns 0 inside the open transaction, or the refusal or error with none.
 */
static int lock_for_write(bool *active, struct api_req *r, const char *what, struct ty_err *err)
{
	bool found;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r, err);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	if ((rc = api_store_webhook_lock(&found, active, r->pg, r->params[0], api_scope(r),
					 err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	if (!found) {
		ty_pg_rollback(r->pg);
		return webhook_not_found(r, err);
	}
	if (r->auth.role < API_ROLE_MEMBER) {
		ty_pg_rollback(r->pg);
		return api_fail(r, err, API_P_FORBIDDEN, NULL, "%s needs the member role", what);
	}
	return 0;
}

int api_h_webhooks_delete(struct api_req *r, struct ty_err *err)
{
	bool active;
	int rc;

	if ((rc = lock_for_write(&active, r, "DELETE /v1/webhooks/{}", err)))
		return rc;
	/* a second delete changes nothing and answers the same */
	if ((rc = api_store_webhook_deactivate(r->pg, r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	return api_h_webhooks_get(r, err);
}

int api_h_webhooks_ping(struct api_req *r, struct ty_err *err)
{
	const char *doc = NULL;
	bool active;
	int rc;

	if ((rc = lock_for_write(&active, r, "POST /v1/webhooks/{}/ping", err)))
		return rc;
	if (!active) {
		ty_pg_rollback(r->pg);
		return api_fail(r, err, API_P_WEBHOOK_INACTIVE, NULL,
				"webhook %s was deleted: it receives nothing", r->params[0]);
	}
	if ((rc = api_store_webhook_ping(&doc, r->pg, r->arena, r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	return api_reply_text(r, 202, doc);
}

int api_h_webhooks_deliveries(struct api_req *r, struct ty_err *err)
{
	const char *st = api_query(r, "state"), *cursor, *limit, *items, *next;
	bool found;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r, err);
	if ((rc = page_params(r, &cursor, &limit, err)))
		return rc;
	if (st && strcmp(st, "pending") && strcmp(st, "delivered") && strcmp(st, "failed") &&
	    strcmp(st, "cancelled"))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "state",
				"'state' must be pending, delivered, failed or cancelled");
	if ((rc = api_store_webhook_visible(&found, r->pg, r->params[0], api_scope(r), err)))
		return rc;
	if (!found)
		return webhook_not_found(r, err);
	if ((rc = api_store_deliveries_page(&items, &next, r->pg, r->arena, r->params[0], st,
					    cursor, limit, err)))
		return rc;
	return api_reply_page(r, items, next, err);
}
