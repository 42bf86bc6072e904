/* Teams and tokens: the tenancy routes. */
#include "api.h"
#include "ty_crypto.h"
#include "ty_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int audit(struct api_req *r, const char *action, const char *object, struct ty_err *err)
{
	char tid[24];
	const char *p[3] = {tid, action, object};

	snprintf(tid, sizeof(tid), "%lld", (long long)r->auth.token_id);
	return ty_pg_exec(NULL, r->pg,
			  "INSERT INTO audit_log (token_id, action, object) VALUES ($1, $2, $3)", 3,
			  p, err);
}

/* Team columns as text parameters; a JSON null or absence becomes SQL NULL. */
static const char *int_param(struct api_req *r, const json_t *v)
{
	return v && json_is_integer(v)
		       ? ty_arena_printf(r->arena, "%lld", (long long)json_integer_value(v))
		       : NULL;
}

/* Whether another team already runs as uid (text, may be NULL): a unique violation's cause. */
static bool uid_taken(struct api_req *r, const char *uid)
{
	const char *params[1] = {uid};
	PGresult *res = NULL;
	struct ty_err e = {0};
	bool taken;

	if (!uid)
		return false;
	if (ty_pg_exec(&res, r->pg, "SELECT 1 FROM teams WHERE run_uid = $1::int", 1, params, &e))
		return false;
	taken = PQntuples(res) > 0;
	PQclear(res);
	return taken;
}

int api_h_teams_create(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	const json_t *b = r->json;
	const json_t *w = json_object_get(b, "weight");
	const char *params[11];
	PGresult *res = NULL;
	int rc;

	if (api_validate_team(b, true, &p))
		return api_reply_problem(r, &p);
	params[0] = json_string_value(json_object_get(b, "name"));
	params[1] = int_param(r, json_object_get(b, "nominal_gpus"));
	params[2] = int_param(r, json_object_get(b, "borrowing_limit_gpus"));
	params[3] = int_param(r, json_object_get(b, "lending_limit_gpus"));
	params[4] = json_string_value(json_object_get(b, "cohort"));
	params[5] = w ? ty_arena_printf(r->arena, "%.17g", json_number_value(w)) : "1";
	params[6] = int_param(r, json_object_get(b, "max_pending_jobs"));
	params[7] = int_param(r, json_object_get(b, "max_cpus"));
	params[8] = int_param(r, json_object_get(b, "max_memory_mb"));
	params[9] = int_param(r, json_object_get(b, "run_uid"));
	params[10] = int_param(r, json_object_get(b, "idle_gpu_alert_seconds"));
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = ty_pg_exec(&res, r->pg,
			"INSERT INTO teams (name, nominal_gpus, borrowing_limit_gpus,"
			" lending_limit_gpus, cohort, weight, max_pending_jobs, max_cpus,"
			" max_memory_mb, run_uid, idle_gpu_alert_seconds)"
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
			" RETURNING ty_team_json(teams)::text",
			11, params, err);
	if (rc == TY_ECONFLICT) {
		ty_pg_rollback(r->pg);
		return uid_taken(r, params[9])
			       ? api_reply_error(r, API_P_UID_TAKEN, "run_uid",
						 "uid %s is another team's", params[9])
			       : api_reply_error(r, API_P_TEAM_EXISTS, "name",
						 "team '%s' already exists", params[0]);
	}
	if (rc || (rc = audit(r, "team.create", params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		PQclear(res);
		return rc;
	}
	rc = api_reply_text(r, 201, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

/* Members and viewers see their own team only. */
static const char *own_team(struct api_req *r)
{
	return r->auth.role == API_ROLE_ADMIN ? NULL : r->auth.team;
}

int api_h_teams_list(struct api_req *r, struct ty_err *err)
{
	const char *params[1] = {own_team(r)};
	PGresult *res = NULL;
	int rc;

	rc = ty_pg_exec(&res, r->pg,
			"SELECT json_build_object('items', coalesce(json_agg(ty_team_json(t)"
			" ORDER BY t.name), '[]'))::text FROM teams t"
			" WHERE $1::text IS NULL OR t.name = $1",
			1, params, err);
	if (rc)
		return rc;
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_teams_get(struct api_req *r, struct ty_err *err)
{
	const char *params[2] = {r->params[0], own_team(r)};
	PGresult *res = NULL;
	int rc;

	rc = ty_pg_exec(&res, r->pg,
			"SELECT ty_team_json(t)::text FROM teams t"
			" WHERE t.name = $1 AND ($2::text IS NULL OR t.name = $2)",
			2, params, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 0)
		rc = api_reply_error(r, API_P_TEAM_NOT_FOUND, NULL, "no team '%s'", r->params[0]);
	else
		rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_teams_patch(struct api_req *r, struct ty_err *err)
{
	static const char *const fields[] = {"nominal_gpus", "borrowing_limit_gpus",
					     "lending_limit_gpus", "cohort", "weight",
					     "max_pending_jobs", "max_cpus", "max_memory_mb",
					     "run_uid", "idle_gpu_alert_seconds"};
	enum { NFIELDS = sizeof(fields) / sizeof(fields[0]) };
	struct api_problem p = {0};
	const char *params[1 + 2 * NFIELDS];
	PGresult *res = NULL;
	int rc;

	if (api_validate_team(r->json, false, &p))
		return api_reply_problem(r, &p);
	/* $2k is "is the field given", $2k+1 its value: one fixed statement */
	params[0] = r->params[0];
	for (int i = 0; i < NFIELDS; i++) {
		const json_t *v = json_object_get(r->json, fields[i]);

		params[1 + 2 * i] = v ? "t" : "f";
		if (!v || json_is_null(v))
			params[2 + 2 * i] = NULL;
		else if (json_is_string(v))
			params[2 + 2 * i] = json_string_value(v);
		else if (json_is_integer(v))
			params[2 + 2 * i] =
				ty_arena_printf(r->arena, "%lld", (long long)json_integer_value(v));
		else
			params[2 + 2 * i] = ty_arena_printf(r->arena, "%.17g", json_number_value(v));
	}
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = ty_pg_exec(&res, r->pg,
			"UPDATE teams SET"
			" nominal_gpus = CASE WHEN $2 THEN $3::int ELSE nominal_gpus END,"
			" borrowing_limit_gpus = CASE WHEN $4 THEN $5::int ELSE borrowing_limit_gpus END,"
			" lending_limit_gpus = CASE WHEN $6 THEN $7::int ELSE lending_limit_gpus END,"
			" cohort = CASE WHEN $8 THEN $9 ELSE cohort END,"
			" weight = CASE WHEN $10 THEN coalesce($11::float8, 1) ELSE weight END,"
			" max_pending_jobs = CASE WHEN $12 THEN $13::int ELSE max_pending_jobs END,"
			" max_cpus = CASE WHEN $14 THEN $15::int ELSE max_cpus END,"
			" max_memory_mb = CASE WHEN $16 THEN $17::bigint ELSE max_memory_mb END,"
			" run_uid = CASE WHEN $18 THEN $19::int ELSE run_uid END,"
			" idle_gpu_alert_seconds = CASE WHEN $20 THEN $21::int"
			"  ELSE idle_gpu_alert_seconds END,"
			" updated_at = now()"
			" WHERE name = $1 RETURNING ty_team_json(teams)::text",
			1 + 2 * NFIELDS, params, err);
	if (rc == TY_ECONFLICT) {
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_UID_TAKEN, "run_uid", "uid %s is another team's",
				       params[18] ? params[18] : "?");
	}
	if (!rc && PQntuples(res) == 0) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_TEAM_NOT_FOUND, NULL, "no team '%s'", r->params[0]);
	}
	if (rc || (rc = audit(r, "team.update", r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		PQclear(res);
		return rc;
	}
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_tokens_create(struct api_req *r, struct ty_err *err)
{
	static const char *const keys[] = {"name", "role", "team", NULL};
	const char *unk = ty_json_unknown_key(r->json, keys);
	const json_t *name = json_object_get(r->json, "name");
	const json_t *role = json_object_get(r->json, "role");
	const json_t *team = json_object_get(r->json, "team");
	const char *role_s, *team_id = NULL;
	char secret[64], created[32];
	int64_t id;
	PGresult *res = NULL;
	json_t *o;
	int rc;

	if (unk)
		return api_reply_error(r, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	if (!name)
		return api_reply_error(r, API_P_MISSING_FIELD, "name", "'name' is required");
	if (!json_is_string(name) || json_string_length(name) < 1 ||
	    json_string_length(name) > 128)
		return api_reply_error(r, API_P_INVALID_FIELD, "name",
				       "'name' must be a string of 1 to 128 characters");
	if (!role)
		return api_reply_error(r, API_P_MISSING_FIELD, "role", "'role' is required");
	role_s = json_string_value(role);
	if (!role_s || (strcmp(role_s, "admin") && strcmp(role_s, "member") &&
			strcmp(role_s, "viewer")))
		return api_reply_error(r, API_P_INVALID_FIELD, "role",
				       "'role' must be one of 'admin', 'member', 'viewer'");
	if (team && !json_is_null(team) && !json_is_string(team))
		return api_reply_error(r, API_P_INVALID_FIELD, "team",
				       "'team' must be a team name or null");
	if (!strcmp(role_s, "admin")) {
		if (team && !json_is_null(team))
			return api_reply_error(r, API_P_INVALID_FIELD, "team",
					       "admin tokens belong to no team: leave 'team' out");
	} else {
		const char *p[1];

		if (!team || json_is_null(team))
			return api_reply_error(r, API_P_MISSING_FIELD, "team",
					       "a %s token needs a 'team'", role_s);
		p[0] = json_string_value(team);
		if ((rc = ty_pg_exec(&res, r->pg, "SELECT id FROM teams WHERE name = $1", 1, p,
				     err)))
			return rc;
		if (PQntuples(res) == 0) {
			PQclear(res);
			return api_reply_error(r, API_P_UNKNOWN_TEAM, "team", "no team '%s'", p[0]);
		}
		team_id = ty_arena_strdup(r->arena, PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	if ((rc = ty_pg_begin(r->pg, err)) ||
	    (rc = api_token_insert(&id, created, secret, sizeof(secret), r->pg,
				   json_string_value(name), role_s, team_id, err)) ||
	    (rc = audit(r, "token.create", json_string_value(name), err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		return rc;
	o = json_pack("{s:I, s:s, s:s, s:O, s:s, s:s}", "id", (json_int_t)id, "name",
		      json_string_value(name), "role", role_s, "team",
		      team && !json_is_null(team) ? team : json_null(), "token", secret,
		      "created_at", created);
	memset(secret, 0, sizeof(secret));
	if (!o)
		return ty_err_set(err, TY_ENOMEM, NULL);
	return api_reply_json(r, 201, o);
}

int api_h_tokens_list(struct api_req *r, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	rc = ty_pg_exec(&res, r->pg,
			"SELECT json_build_object('items', coalesce(json_agg(json_build_object("
			"'id', t.id, 'name', t.name, 'role', t.role, 'team', m.name,"
			" 'created_at', ty_ts(t.created_at), 'revoked_at', ty_ts(t.revoked_at))"
			" ORDER BY t.id), '[]'))::text"
			" FROM api_tokens t LEFT JOIN teams m ON m.id = t.team_id",
			0, NULL, err);
	if (rc)
		return rc;
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_tokens_delete(struct api_req *r, struct ty_err *err)
{
	const char *p[1] = {r->params[0]};
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_reply_error(r, API_P_TOKEN_NOT_FOUND, NULL, "no token '%s'",
				       r->params[0]);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = ty_pg_exec(&res, r->pg,
			"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())"
			" WHERE id = $1 RETURNING id",
			1, p, err);
	if (!rc && PQntuples(res) == 0) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_TOKEN_NOT_FOUND, NULL, "no token %s", p[0]);
	}
	PQclear(res);
	if (rc || (rc = audit(r, "token.revoke", p[0], err)) || (rc = ty_pg_commit(r->pg, err)))
		return rc;
	/* here at once; other replicas when the notification arrives */
	api__tokens_forget(api__tokens(r->srv), id);
	r->status = 204;
	return 0;
}
