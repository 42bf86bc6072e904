/* Bearer-token authentication and token issuing. */
#include "api.h"
#include "ty_crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/*
 * A trial metrics token: the attempt it was drawn for, while that attempt
 * runs and for TRIAL_TOKEN_GRACE after it ended (a last report may race
 * the ranks' exit). It acts as a member of the job's team.
 */
#define TRIAL_TOKEN_GRACE "5 minutes"
static int trial_token(struct api_req *r, const char *token, struct ty_err *err)
{
	char hash[TY_SHA256_HEX_LEN + 1];
	const char *params[1] = {hash};
	PGresult *res = NULL;
	int rc;

	ty_sha256_hex(hash, token, strlen(token));
	rc = ty_pg_exec(&res, r->pg,
			"SELECT a.job_id, a.attempt, j.team_id, m.name FROM attempts a"
			" JOIN jobs j ON j.id = a.job_id JOIN teams m ON m.id = j.team_id"
			" WHERE a.metrics_token_sha256 = $1 AND (a.ended_at IS NULL"
			" OR a.ended_at > now() - interval '" TRIAL_TOKEN_GRACE "')",
			1, params, err);
	if (rc)
		return rc;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ty_err_set(err, TY_EAUTH,
				  "unknown trial metrics token, or its attempt ended more than "
				  TRIAL_TOKEN_GRACE " ago");
	}
	r->auth.trial_job = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	r->auth.trial_attempt = (int)strtol(PQgetvalue(res, 0, 1), NULL, 10);
	r->auth.role = API_ROLE_MEMBER;
	r->auth.team_id = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
	r->auth.team = ty_arena_strdup(r->arena, PQgetvalue(res, 0, 3));
	r->auth.token_name = ty_arena_printf(r->arena, "job %lld attempt %d",
					     (long long)r->auth.trial_job, r->auth.trial_attempt);
	PQclear(res);
	return 0;
}

int api__authenticate(struct api_req *r, struct ty_err *err)
{
	const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
	char hash[TY_SHA256_HEX_LEN + 1];
	const char *params[1] = {hash};
	PGresult *res = NULL;
	int rc;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return ty_err_set(err, TY_EAUTH, "send 'Authorization: Bearer <token>'");
	h += 7;
	while (*h == ' ')
		h++;
	if (strncmp(h, "tym_", 4) == 0 && strlen(h) == 47)
		return trial_token(r, h, err);
	if (strncmp(h, "ty_", 3) != 0 || strlen(h) != 46)
		return ty_err_set(err, TY_EAUTH, "the bearer token is not a Trainyard token");
	/* looked up by hash: the secret itself is never stored or compared */
	ty_sha256_hex(hash, h, strlen(h));
	rc = ty_pg_exec(&res, r->pg,
			"SELECT t.id, t.role, t.team_id, m.name, t.name FROM api_tokens t"
			" LEFT JOIN teams m ON m.id = t.team_id"
			" WHERE t.token_sha256 = $1 AND t.revoked_at IS NULL",
			1, params, err);
	if (rc)
		return rc;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ty_err_set(err, TY_EAUTH, "unknown or revoked token");
	}
	r->auth.token_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	r->auth.role = role_of(PQgetvalue(res, 0, 1));
	r->auth.team_id = ty_pg_val(res, 0, 2) ? strtoll(PQgetvalue(res, 0, 2), NULL, 10) : 0;
	r->auth.team = ty_pg_val(res, 0, 3) ? ty_arena_strdup(r->arena, PQgetvalue(res, 0, 3))
					    : NULL;
	r->auth.token_name = ty_arena_strdup(r->arena, PQgetvalue(res, 0, 4));
	PQclear(res);
	return 0;
}

int api_token_insert(int64_t *id, char *created_at, char *secret, size_t secretsz,
		     struct ty_pg *pg, const char *name, const char *role, const char *team_id,
		     struct ty_err *err)
{
	char hash[TY_SHA256_HEX_LEN + 1];
	const char *params[4] = {hash, name, role, team_id};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_token_new(secret, secretsz)))
		return ty_err_set(err, rc, "cannot draw random bytes for a token");
	ty_sha256_hex(hash, secret, strlen(secret));
	rc = ty_pg_exec(&res, pg,
			"INSERT INTO api_tokens (token_sha256, name, role, team_id)"
			" VALUES ($1, $2, $3, $4) RETURNING id, ty_ts(created_at)",
			4, params, err);
	if (rc)
		return rc;
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (created_at)
		snprintf(created_at, 32, "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	return 0;
}
