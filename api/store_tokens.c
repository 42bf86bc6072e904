/*
 * The API's token SQL as typed calls (store_jobs.c's pattern): bearer
 * tokens and trial metrics tokens looked up by hash, tokens written; no
 * PGresult leaves this file.
 */
#include "api.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum api_role role_of(const char *s)
{
	if (!strcmp(s, "admin"))
		return API_ROLE_ADMIN;
	if (!strcmp(s, "member"))
		return API_ROLE_MEMBER;
	if (!strcmp(s, "viewer"))
		return API_ROLE_VIEWER;
	return API_ROLE_NONE;
}

static const char token_sql[] =
	"SELECT t.id, t.role, t.team_id, m.name, t.name FROM api_tokens t"
	" LEFT JOIN teams m ON m.id = t.team_id"
	" WHERE t.token_sha256 = $1 AND t.revoked_at IS NULL";

int api_store_token_by_hash(bool *found, struct api_auth *a, struct ty_pg *pg,
			    struct ty_arena *arena, const char *hash, struct ty_err *err)
{
	const char *p[1] = {hash};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, token_sql, 1, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		*found = true;
		a->token_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		a->role = role_of(PQgetvalue(res, 0, 1));
		a->team_id = ty_pg_val(res, 0, 2) ? strtoll(PQgetvalue(res, 0, 2), NULL, 10) : 0;
		a->team = ty_pg_val(res, 0, 3) ? ty_arena_strdup(arena, PQgetvalue(res, 0, 3))
					       : NULL;
		a->token_name = ty_arena_strdup(arena, PQgetvalue(res, 0, 4));
		if (!a->token_name || (ty_pg_val(res, 0, 3) && !a->team))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	PQclear(res);
	return rc;
}

static const char trial_sql[] =
	"SELECT a.job_id, a.attempt, j.team_id, m.name FROM attempts a"
	" JOIN jobs j ON j.id = a.job_id JOIN teams m ON m.id = j.team_id"
	" WHERE a.metrics_token_sha256 = $1 AND (a.ended_at IS NULL"
	" OR a.ended_at > now() - interval '" API_TRIAL_TOKEN_GRACE "')";

int api_store_trial_token_by_hash(bool *found, struct api_auth *a, struct ty_pg *pg,
				  struct ty_arena *arena, const char *hash, struct ty_err *err)
{
	const char *p[1] = {hash};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, trial_sql, 1, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		*found = true;
		a->trial_job = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		a->trial_attempt = (int)strtol(PQgetvalue(res, 0, 1), NULL, 10);
		a->role = API_ROLE_MEMBER;
		a->team_id = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
		a->team = ty_arena_strdup(arena, PQgetvalue(res, 0, 3));
		a->token_name = ty_arena_printf(arena, "job %lld attempt %d",
						(long long)a->trial_job, a->trial_attempt);
		if (!a->team || !a->token_name)
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	PQclear(res);
	return rc;
}

static const char insert_sql[] = "INSERT INTO api_tokens (token_sha256, name, role, team_id)"
				 " VALUES ($1, $2, $3, $4) RETURNING id, ty_ts(created_at)";

int api_store_token_insert(int64_t *id, char *created_at, struct ty_pg *pg, const char *hash,
			   const char *name, const char *role, const char *team_id,
			   struct ty_err *err)
{
	const char *p[4] = {hash, name, role, team_id};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, insert_sql, 4, p, err)))
		return rc;
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (created_at)
		snprintf(created_at, 32, "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	return 0;
}

static const char list_sql[] =
	"SELECT json_build_object('items', coalesce(json_agg(json_build_object("
	"'id', t.id, 'name', t.name, 'role', t.role, 'team', m.name,"
	" 'created_at', ty_ts(t.created_at), 'revoked_at', ty_ts(t.revoked_at))"
	" ORDER BY t.id), '[]'))::text"
	" FROM api_tokens t LEFT JOIN teams m ON m.id = t.team_id";

int api_store_tokens_list(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			  struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, list_sql, 0, NULL, err)))
		return rc;
	rc = api__store_text(doc, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

static const char revoke_sql[] =
	"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())"
	" WHERE id = $1 RETURNING id";

int api_store_token_revoke(bool *found, struct ty_pg *pg, const char *id, struct ty_err *err)
{
	const char *p[1] = {id};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, revoke_sql, 1, p, err)))
		return rc;
	*found = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}
