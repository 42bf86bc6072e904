/*
 * Webhook routes: register, read, list, deactivate, deliveries, ping. The
 * queue itself is filled by a trigger (migrations/0013_webhooks.sql) and
 * drained by deliver.c. A webhook's secret is written once and never read
 * back here.
 */
#include "api.h"
#include "lifecycle.h"
#include "ty_json.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const webhook_keys[] = {"team", "url", "events", "secret", NULL};

bool api_webhook_event_ok(const char *name)
{
	if (!strcmp(name, "*"))
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
					       "'%s' is not an event: use \"*\" or job.<state> with "
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

static int webhook_not_found(struct api_req *r)
{
	return api_reply_error(r, API_P_WEBHOOK_NOT_FOUND, NULL, "no webhook '%s'",
			       r->params[0]);
}

/* Cursor and limit of a list; false when a reply (400) was queued. */
static bool page_params(struct api_req *r, const char **cursor, const char **limit)
{
	int64_t v;

	*cursor = api_query(r, "cursor");
	*limit = "50";
	if (*cursor && !api_parse_id(&v, *cursor)) {
		api_reply_error(r, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
		return false;
	}
	if (api_query(r, "limit")) {
		*limit = api_query(r, "limit");
		if (!api_parse_id(&v, *limit) || v > 500) {
			api_reply_error(r, API_P_INVALID_PARAMETER, "limit",
					"'limit' must be an integer from 1 to 500");
			return false;
		}
	}
	return true;
}

int api_h_webhooks_create(struct api_req *r, struct ty_err *err)
{
	struct api_problem p;
	const char *params[5] = {NULL};
	char tok[24], *events = NULL;
	PGresult *res = NULL;
	int rc;

	if (api_validate_webhook(r->json, &p))
		return api_reply_problem(r, &p);
	if ((rc = api_submit_team(&params[0], r,
				  json_string_value(json_object_get(r->json, "team")), 0, "team",
				  "the webhook", err)) ||
	    !params[0])
		return rc; /* failed, or refused with a reply */
	if (!(events = json_dumps(json_object_get(r->json, "events"), JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	snprintf(tok, sizeof(tok), "%lld", (long long)r->auth.token_id);
	params[1] = json_string_value(json_object_get(r->json, "url"));
	params[2] = events;
	params[3] = json_string_value(json_object_get(r->json, "secret"));
	params[4] = tok;
	if ((rc = ty_pg_begin(r->pg, err)))
		goto out;
	/* the per-team limit, counted under the team's row lock */
	rc = ty_pg_exec(&res, r->pg,
			"SELECT (SELECT count(*) FROM webhooks WHERE team_id = t.id AND active)"
			" FROM teams t WHERE t.id = $1 FOR UPDATE",
			1, params, err);
	if (rc)
		goto fail;
	if (atoi(PQgetvalue(res, 0, 0)) >= API_WEBHOOKS_PER_TEAM) {
		ty_pg_rollback(r->pg);
		rc = api_reply_error(r, API_P_WEBHOOK_LIMIT, "team",
				     "team '%s' already has %d active webhooks; delete one first",
				     json_string_value(json_object_get(r->json, "team")),
				     API_WEBHOOKS_PER_TEAM);
		goto out;
	}
	PQclear(res);
	res = NULL;
	rc = ty_pg_exec(&res, r->pg,
			"INSERT INTO webhooks (team_id, url, events, secret, created_by)"
			" SELECT $1, $2, array(SELECT json_array_elements_text($3::json)), $4, $5"
			" RETURNING ty_webhook_json(webhooks)::text",
			5, params, err);
	if (rc || (rc = ty_pg_commit(r->pg, err)))
		goto fail;
	rc = api_reply_text(r, 201, PQgetvalue(res, 0, 0));
	goto out;
fail:
	ty_pg_rollback(r->pg);
out:
	PQclear(res);
	free(events);
	return rc;
}

int api_h_webhooks_get(struct api_req *r, struct ty_err *err)
{
	const char *p[2] = {r->params[0], api_scope(r)};
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r);
	rc = ty_pg_exec(&res, r->pg,
			"SELECT ty_webhook_json(w)::text FROM webhooks w"
			" WHERE w.id = $1 AND ($2::bigint IS NULL OR w.team_id = $2)",
			2, p, err);
	if (rc)
		return rc;
	rc = PQntuples(res) ? api_reply_text(r, 200, PQgetvalue(res, 0, 0)) : webhook_not_found(r);
	PQclear(res);
	return rc;
}

int api_h_webhooks_list(struct api_req *r, struct ty_err *err)
{
	const char *p[4] = {api_scope(r), api_query(r, "team"), NULL, NULL};
	PGresult *res = NULL;
	int rc;

	if (!page_params(r, &p[2], &p[3]))
		return 0;
	/* one more row than asked tells whether another page exists */
	rc = ty_pg_exec(&res, r->pg,
			"WITH page AS (SELECT * FROM webhooks w"
			"  WHERE ($1::bigint IS NULL OR w.team_id = $1)"
			"  AND ($2::text IS NULL OR w.team_id = (SELECT id FROM teams WHERE name = $2))"
			"  AND ($3::bigint IS NULL OR w.id < $3)"
			"  ORDER BY w.id DESC LIMIT $4::int + 1),"
			" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $4::int)"
			" SELECT coalesce((SELECT json_agg(ty_webhook_json(x) ORDER BY x.id DESC)"
			"  FROM shown x), '[]')::text,"
			" CASE WHEN (SELECT count(*) FROM page) > $4::int"
			"  THEN (SELECT min(id) FROM shown)::text END",
			4, p, err);
	if (rc)
		return rc;
	rc = api_reply_page(r, PQgetvalue(res, 0, 0), ty_pg_val(res, 0, 1), err);
	PQclear(res);
	return rc;
}

/*
 * Lock the webhook for a write: 404 for a missing one or another team's,
 * then 403 for a viewer (so a viewer of another team cannot probe ids).
 * *found: whether the caller may go on (inside the open transaction).
 */
static int lock_for_write(bool *found, bool *active, struct api_req *r, const char *what,
			  struct ty_err *err)
{
	const char *p[2] = {r->params[0], api_scope(r)};
	PGresult *res = NULL;
	int64_t id;
	int rc;

	*found = false;
	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = ty_pg_exec(&res, r->pg,
			"SELECT active FROM webhooks"
			" WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2) FOR UPDATE",
			2, p, err);
	if (rc) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return webhook_not_found(r);
	}
	*active = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (r->auth.role < API_ROLE_MEMBER) {
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_FORBIDDEN, NULL, "%s needs the member role", what);
	}
	*found = true;
	return 0;
}

int api_h_webhooks_delete(struct api_req *r, struct ty_err *err)
{
	const char *p[1] = {r->params[0]};
	bool found, active;
	int rc;

	if ((rc = lock_for_write(&found, &active, r, "DELETE /v1/webhooks/{}", err)) || !found)
		return rc;
	/* a second delete changes nothing and answers the same */
	rc = ty_pg_exec(NULL, r->pg,
			"UPDATE webhooks SET active = false,"
			" deactivated_at = coalesce(deactivated_at, now()) WHERE id = $1",
			1, p, err);
	if (!rc)
		rc = ty_pg_exec(NULL, r->pg,
				"UPDATE webhook_deliveries SET state = 'cancelled',"
				" locked_until = NULL,"
				" last_error = coalesce(last_error || '; ', '') || 'webhook deleted'"
				" WHERE webhook_id = $1 AND state = 'pending'",
				1, p, err);
	if (rc || (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	return api_h_webhooks_get(r, err);
}

int api_h_webhooks_ping(struct api_req *r, struct ty_err *err)
{
	const char *p[1] = {r->params[0]};
	PGresult *res = NULL;
	bool found, active;
	int rc;

	if ((rc = lock_for_write(&found, &active, r, "POST /v1/webhooks/{}/ping", err)) || !found)
		return rc;
	if (!active) {
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_WEBHOOK_INACTIVE, NULL,
				       "webhook %s was deleted: it receives nothing", p[0]);
	}
	rc = ty_pg_exec(NULL, r->pg,
			"SELECT ty_webhook_enqueue(team_id, id, 'ping', NULL, now())"
			" FROM webhooks WHERE id = $1",
			1, p, err);
	if (!rc)
		rc = ty_pg_exec(&res, r->pg,
				"SELECT ty_webhook_delivery_json(d)::text FROM webhook_deliveries d"
				" WHERE d.webhook_id = $1 ORDER BY d.id DESC LIMIT 1",
				1, p, err);
	if (rc || (rc = ty_pg_commit(r->pg, err))) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return rc;
	}
	rc = api_reply_text(r, 202, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_webhooks_deliveries(struct api_req *r, struct ty_err *err)
{
	const char *p[4] = {r->params[0], NULL, NULL, api_query(r, "state")};
	const char *w[2] = {r->params[0], api_scope(r)};
	const char *st = p[3];
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return webhook_not_found(r);
	if (!page_params(r, &p[1], &p[2]))
		return 0;
	if (st && strcmp(st, "pending") && strcmp(st, "delivered") && strcmp(st, "failed") &&
	    strcmp(st, "cancelled"))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "state",
				       "'state' must be pending, delivered, failed or cancelled");
	rc = ty_pg_exec(&res, r->pg,
			"SELECT 1 FROM webhooks WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2)",
			2, w, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return webhook_not_found(r);
	}
	PQclear(res);
	res = NULL;
	rc = ty_pg_exec(&res, r->pg,
			"WITH page AS (SELECT * FROM webhook_deliveries d"
			"  WHERE d.webhook_id = $1 AND ($4::text IS NULL OR d.state = $4)"
			"  AND ($2::bigint IS NULL OR d.id < $2)"
			"  ORDER BY d.id DESC LIMIT $3::int + 1),"
			" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $3::int)"
			" SELECT coalesce((SELECT json_agg(ty_webhook_delivery_json(x)"
			"  ORDER BY x.id DESC) FROM shown x), '[]')::text,"
			" CASE WHEN (SELECT count(*) FROM page) > $3::int"
			"  THEN (SELECT min(id) FROM shown)::text END",
			4, p, err);
	if (rc)
		return rc;
	rc = api_reply_page(r, PQgetvalue(res, 0, 0), ty_pg_val(res, 0, 1), err);
	PQclear(res);
	return rc;
}
