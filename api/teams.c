/* Teams and tokens: the tenancy routes. */
#include "api.h"
#include "store.h"
#include "ty_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A checked body's team columns as text; a JSON null or absence is SQL NULL. */
static int team_set(struct api_team_set *s, struct api_req *r, struct ty_err *err)
{
	for (int i = 0; i < API_TEAM_NCOLS; i++) {
		const json_t *v = json_object_get(r->json, api_team_col_name(i));

		s->given[i] = v != NULL;
		if (!v || json_is_null(v))
			s->value[i] = NULL;
		else if (json_is_string(v))
			s->value[i] = json_string_value(v);
		else if (json_is_boolean(v))
			s->value[i] = json_is_true(v) ? "t" : "f";
		else if (json_is_integer(v))
			s->value[i] =
			    ty_arena_printf(r->arena, "%lld", (long long)json_integer_value(v));
		else
			s->value[i] = ty_arena_printf(r->arena, "%.17g", json_number_value(v));
		if ((json_is_integer(v) || json_is_real(v)) && !s->value[i])
			return ty_err_set(err, TY_ENOMEM, NULL);
	}
	return 0;
}

/* The largest budget amount accepted: far beyond any real one, exact in a double. */
#define BUDGET_MAX 1e12

/*
 * The body's "budget": absent (nothing to do), null (none) or
 * {"amount": number >= 0, "period": "day" | "week" | "month"}. Fills
 * *given, *amount (text, arena) and *period (NULL, NULL for null).
 */
static int budget_parse(bool *given, const char **amount, const char **period,
			struct api_req *r, struct api_problem *p)
{
	static const char *const keys[] = {"amount", "period", NULL};
	const json_t *b = json_object_get(r->json, "budget"), *v;
	const char *unk, *per;

	*given = b != NULL;
	*amount = *period = NULL;
	if (!b || json_is_null(b))
		return 0;
	if (!json_is_object(b))
		return api_problem_set(p, API_P_INVALID_FIELD, "budget",
				       "'budget' must be an object {\"amount\": ..., \"period\": "
				       "...} or null (no budget)");
	if ((unk = ty_json_unknown_key(b, keys)))
		return api_problem_set(p, API_P_UNKNOWN_FIELD, "budget", "unknown field 'budget.%s'",
				       unk);
	v = json_object_get(b, "amount");
	if (!v)
		return api_problem_set(p, API_P_MISSING_FIELD, "budget.amount",
				       "'budget.amount' is required");
	if (!json_is_number(v) || !(json_number_value(v) >= 0) ||
	    json_number_value(v) > BUDGET_MAX)
		return api_problem_set(p, API_P_INVALID_FIELD, "budget.amount",
				       "'budget.amount' must be a number from 0 to %.0f (per period, "
				       "in the units of the scheduler's rate table; 0: nothing may "
				       "start)",
				       BUDGET_MAX);
	v = json_object_get(b, "period");
	if (!v)
		return api_problem_set(p, API_P_MISSING_FIELD, "budget.period",
				       "'budget.period' is required");
	per = json_string_value(v);
	if (!per || (strcmp(per, "day") && strcmp(per, "week") && strcmp(per, "month")))
		return api_problem_set(p, API_P_INVALID_FIELD, "budget.period",
				       "'budget.period' must be one of 'day', 'week', 'month' "
				       "(calendar periods in UTC)");
	v = json_object_get(b, "amount");
	*amount = ty_arena_printf(r->arena, "%.17g", json_number_value(v));
	*period = per;
	return 0;
}

/* Apply a parsed budget after the team's row is written; *doc the new document. */
static int budget_apply(const char **doc, struct api_req *r, const char *name, bool given,
			const char *amount, const char *period, struct ty_err *err)
{
	if (!given)
		return 0;
	if (period && !amount)
		return ty_err_set(err, TY_ENOMEM, NULL);
	return api_store_team_budget_set(doc, r->pg, r->arena, name, amount, period, err);
}

int api_h_teams_create(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	const char *name = json_string_value(json_object_get(r->json, "name"));
	const char *uid, *doc, *amount, *period;
	struct api_team_set s;
	bool taken, budget;
	int rc;

	if (api_validate_team(r->json, true, &p) ||
	    budget_parse(&budget, &amount, &period, r, &p))
		return api_fail_problem(r, err, &p);
	if ((rc = team_set(&s, r, err)) || (rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = api_store_team_insert(&doc, r->pg, r->arena, name, &s, err);
	if (rc == TY_ECONFLICT) {
		ty_pg_rollback(r->pg);
		uid = s.value[API_TEAM_run_uid];
		if ((rc = api_store_team_uid_taken(&taken, r->pg, uid, err)))
			taken = false; /* cannot tell: the name is the likelier cause */
		return taken ? api_fail(r, err, API_P_UID_TAKEN, "run_uid",
					"uid %s is another team's", uid)
			     : api_fail(r, err, API_P_TEAM_EXISTS, "name",
					"team '%s' already exists", name);
	}
	if (rc || (rc = budget_apply(&doc, r, name, budget, amount, period, err)) ||
	    (rc = api_store_audit_log(r->pg, r->auth.token_id, "team.create", name, err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		return rc;
	return api_reply_text(r, 201, doc);
}

/* Members and viewers see their own team only. */
static const char *own_team(struct api_req *r)
{
	return r->auth.role == API_ROLE_ADMIN ? NULL : r->auth.team;
}

int api_h_teams_list(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int rc;

	if ((rc = api_store_teams_list(&doc, r->pg, r->arena, own_team(r), err)))
		return rc;
	return api_reply_text(r, 200, doc);
}

int api_h_teams_get(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int rc;

	if ((rc = api_store_team_get(&doc, r->pg, r->arena, r->params[0], own_team(r), err)))
		return rc;
	if (!doc)
		return api_fail(r, err, API_P_TEAM_NOT_FOUND, NULL, "no team '%s'", r->params[0]);
	return api_reply_text(r, 200, doc);
}

int api_h_teams_patch(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	struct api_team_set s;
	const char *doc, *uid, *amount, *period;
	bool budget;
	int rc;

	if (api_validate_team(r->json, false, &p) ||
	    budget_parse(&budget, &amount, &period, r, &p))
		return api_fail_problem(r, err, &p);
	if ((rc = team_set(&s, r, err)) || (rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = api_store_team_update(&doc, r->pg, r->arena, r->params[0], &s, err);
	if (rc == TY_ECONFLICT) {
		ty_pg_rollback(r->pg);
		uid = s.value[API_TEAM_run_uid];
		return api_fail(r, err, API_P_UID_TAKEN, "run_uid", "uid %s is another team's",
				uid ? uid : "?");
	}
	if (!rc && !doc) {
		ty_pg_rollback(r->pg);
		return api_fail(r, err, API_P_TEAM_NOT_FOUND, NULL, "no team '%s'", r->params[0]);
	}
	if (rc || (rc = budget_apply(&doc, r, r->params[0], budget, amount, period, err)) ||
	    (rc = api_store_audit_log(r->pg, r->auth.token_id, "team.update", r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		return rc;
	return api_reply_text(r, 200, doc);
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
	json_t *o;
	int rc;

	if (unk)
		return api_fail(r, err, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	if (!name)
		return api_fail(r, err, API_P_MISSING_FIELD, "name", "'name' is required");
	if (!json_is_string(name) || json_string_length(name) < 1 ||
	    json_string_length(name) > 128)
		return api_fail(r, err, API_P_INVALID_FIELD, "name",
				"'name' must be a string of 1 to 128 characters");
	if (!role)
		return api_fail(r, err, API_P_MISSING_FIELD, "role", "'role' is required");
	role_s = json_string_value(role);
	if (!role_s || (strcmp(role_s, "admin") && strcmp(role_s, "member") &&
			strcmp(role_s, "viewer")))
		return api_fail(r, err, API_P_INVALID_FIELD, "role",
				"'role' must be one of 'admin', 'member', 'viewer'");
	if (team && !json_is_null(team) && !json_is_string(team))
		return api_fail(r, err, API_P_INVALID_FIELD, "team",
				"'team' must be a team name or null");
	if (!strcmp(role_s, "admin")) {
		if (team && !json_is_null(team))
			return api_fail(r, err, API_P_INVALID_FIELD, "team",
					"admin tokens belong to no team: leave 'team' out");
	} else {
		if (!team || json_is_null(team))
			return api_fail(r, err, API_P_MISSING_FIELD, "team",
					"a %s token needs a 'team'", role_s);
		if ((rc = api_store_team_id(&team_id, r->pg, r->arena, json_string_value(team),
					    err)))
			return rc;
		if (!team_id)
			return api_fail(r, err, API_P_UNKNOWN_TEAM, "team", "no team '%s'",
					json_string_value(team));
	}
	if ((rc = ty_pg_begin(r->pg, err)) ||
	    (rc = api_token_insert(&id, created, secret, sizeof(secret), r->pg,
				   json_string_value(name), role_s, team_id, err)) ||
	    (rc = api_store_audit_log(r->pg, r->auth.token_id, "token.create",
				      json_string_value(name), err)) ||
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
	const char *doc;
	int rc;

	if ((rc = api_store_tokens_list(&doc, r->pg, r->arena, err)))
		return rc;
	return api_reply_text(r, 200, doc);
}

int api_h_tokens_delete(struct api_req *r, struct ty_err *err)
{
	const char *id_s = r->params[0];
	bool found;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, id_s))
		return api_fail(r, err, API_P_TOKEN_NOT_FOUND, NULL, "no token '%s'", id_s);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	if ((rc = api_store_token_revoke(&found, r->pg, id_s, err)) || !found) {
		ty_pg_rollback(r->pg);
		return rc ? rc : api_fail(r, err, API_P_TOKEN_NOT_FOUND, NULL, "no token %s", id_s);
	}
	if ((rc = api_store_audit_log(r->pg, r->auth.token_id, "token.revoke", id_s, err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		return rc;
	/* here at once; other replicas when the notification arrives */
	api__tokens_forget(api__tokens(r->srv), id);
	r->status = 204;
	return 0;
}

int api_h_whoami(struct api_req *r, struct ty_err *err)
{
	json_t *o = json_pack("{s:s?, s:s?, s:s?}", "token", r->auth.token_name, "role",
			      api_role_name(r->auth.role), "team", r->auth.team);

	if (!o)
		return ty_err_set(err, TY_ENOMEM, NULL);
	return api_reply_json(r, 200, o);
}
