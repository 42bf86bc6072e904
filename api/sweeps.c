/* Sweep routes: create (all trials in one transaction), read, list, cancel. */
#include "sweep.h"
#include "store.h"
#include "ty_crypto.h"
#include "ty_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sweep_keys[] = {"team",   "name",           "template",  "trials", "grid",
					 "random", "max_concurrent", "objective", NULL};
static const char *const objective_keys[] = {"metric", "direction", NULL};

static int sweep_not_found(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_SWEEP_NOT_FOUND, NULL, "no sweep '%s'", r->params[0]);
}

/*
 * The sweep's own fields (everything but the template and the search);
 * fills *objective (new reference or NULL) and *max_conc (0: no limit).
 */
static int check_sweep(const json_t *body, json_t **objective, long long *max_conc,
		       struct api_problem *p)
{
	const json_t *v;
	const char *unk;

	*objective = NULL;
	*max_conc = 0;
	if ((unk = ty_json_unknown_key(body, sweep_keys)))
		return api_problem_set(p, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	v = json_object_get(body, "team");
	if (!v)
		return api_problem_set(p, API_P_MISSING_FIELD, "team", "'team' is required");
	if (!json_is_string(v) || !api_team_name_ok(json_string_value(v)))
		return api_problem_set(p, API_P_INVALID_FIELD, "team",
				       "'team' must be a team name");
	v = json_object_get(body, "name");
	if (v && !json_is_null(v) &&
	    (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 128 ||
	     strlen(json_string_value(v)) != json_string_length(v)))
		return api_problem_set(p, API_P_INVALID_FIELD, "name",
				       "'name' must be 1 to 128 characters");
	v = json_object_get(body, "template");
	if (!v)
		return api_problem_set(p, API_P_MISSING_FIELD, "template",
				       "'template' is required: the job spec every trial runs");
	if (!json_is_object(v))
		return api_problem_set(p, API_P_INVALID_FIELD, "template",
				       "'template' must be an object (a job spec), not %s",
				       ty_json_type_name(v));
	v = json_object_get(body, "max_concurrent");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > API_SWEEP_MAX_TRIALS)
			return api_problem_set(p, API_P_INVALID_FIELD, "max_concurrent",
					       "'max_concurrent' must be null or an integer from 1 "
					       "to %d",
					       API_SWEEP_MAX_TRIALS);
		*max_conc = json_integer_value(v);
	}
	v = json_object_get(body, "objective");
	if (v && !json_is_null(v)) {
		const json_t *m, *d;
		char path[96];

		if (!json_is_object(v))
			return api_problem_set(p, API_P_INVALID_FIELD, "objective",
					       "'objective' must be an object {metric, direction}");
		if ((unk = ty_json_unknown_key(v, objective_keys))) {
			snprintf(path, sizeof(path), "objective.%.64s", unk);
			return api_problem_set(p, API_P_UNKNOWN_FIELD, path,
					       "unknown field '%s'", path);
		}
		m = json_object_get(v, "metric");
		d = json_object_get(v, "direction");
		if (!json_is_string(m) || json_string_length(m) == 0 ||
		    json_string_length(m) > 128 ||
		    strlen(json_string_value(m)) != json_string_length(m))
			return api_problem_set(p, m ? API_P_INVALID_FIELD : API_P_MISSING_FIELD,
					       "objective.metric",
					       "'objective.metric' must be a metric name of 1 to 128 "
					       "characters");
		if (d && (!json_is_string(d) || (strcmp(json_string_value(d), "minimize") &&
						 strcmp(json_string_value(d), "maximize"))))
			return api_problem_set(p, API_P_INVALID_FIELD, "objective.direction",
					       "'objective.direction' must be 'minimize' or "
					       "'maximize'");
		*objective = json_pack("{s:O,s:s}", "metric", m, "direction",
				       d ? json_string_value(d) : "minimize");
		if (!*objective)
			return api_problem_set(p, API_P_INTERNAL, NULL, "out of memory");
	}
	return 0;
}

/* The template as a job spec of the sweep's team; errors point into "template.". */
static json_t *check_template(const json_t *body, struct api_problem *p)
{
	json_t *t = json_deep_copy(json_object_get(body, "template")), *spec;
	const json_t *team = json_object_get(body, "team"), *tt;

	if (!t)
		return api_problem_set(p, API_P_INTERNAL, NULL, "out of memory"), NULL;
	tt = json_object_get(t, "team");
	if (tt && !json_equal(tt, team)) {
		json_decref(t);
		return api_problem_set(p, API_P_INVALID_FIELD, "template.team",
				       "'template.team' must be left out or equal 'team'"),
		       NULL;
	}
	json_object_set(t, "team", (json_t *)team);
	spec = api_validate_job(t, p);
	json_decref(t);
	if (!spec && p->field[0]) {
		char f[sizeof(p->field)];

		snprintf(f, sizeof(f), "template.%.300s", p->field);
		snprintf(p->field, sizeof(p->field), "%s", f);
	}
	return spec;
}

/* The sweep an earlier request with this key created, replayed or refused. */
static int replay(struct api_req *r, const char *team_id, const char *key, const char *hash,
		  struct ty_err *err)
{
	const char *stored, *doc;
	int rc;

	if ((rc = api_store_sweep_by_key(&stored, &doc, r->pg, r->arena, team_id, key, err)))
		return rc;
	if (!stored)
		return ty_err_set(err, TY_ECONFLICT, "idempotency key vanished during submit");
	return api_replay_doc(r, stored, doc, key, hash, err);
}

/* [{"spec": ..., "params": ...}, ...] for every parameter set. */
static json_t *trial_rows(const json_t *spec, const json_t *sets)
{
	json_t *rows = json_array(), *set;
	size_t i;

	if (!rows)
		return NULL;
	json_array_foreach(sets, i, set) {
		json_t *ts = api_sweep_trial_spec(spec, set);

		if (!ts || json_array_append_new(rows, json_pack("{s:o,s:O}", "spec", ts, "params",
								  set))) {
			json_decref(rows);
			return NULL;
		}
	}
	return rows;
}

int api_h_sweeps_create(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	const char *key = api_header(r, "Idempotency-Key");
	char hash[TY_SHA256_HEX_LEN + 1];
	struct api_sweep_new sw = {0};
	const char *team, *id, *doc;
	char *canon = NULL, *rows_text = NULL, *tmpl_text = NULL, *search_text = NULL,
	     *obj_text = NULL;
	json_t *objective = NULL, *spec = NULL, *sets = NULL, *rows = NULL, *search = NULL;
	long long max_conc;
	struct api_ask ask;
	bool limited;
	int rc = 0;

	if (key && !api_idempotency_key_ok(key))
		return api_fail(r, err, API_P_INVALID_HEADER, "Idempotency-Key",
				"'Idempotency-Key' must be 1 to 255 printable ASCII characters");
	if (check_sweep(r->json, &objective, &max_conc, &p) ||
	    !(spec = check_template(r->json, &p)) || !(sets = api_sweep_expand(r->json, &p))) {
		rc = api_fail_problem(r, err, &p);
		goto out;
	}
	team = json_string_value(json_object_get(r->json, "team"));
	ask = api_ask_of(json_object_get(spec, "resources"));
	if ((rc = api_submit_team_limited(&sw.team_id, &limited, r, team, &ask, spec,
					  json_object_get(r->json, "template"), "template.resources",
					  "each trial", err)))
		goto out;

	{
		const char *kind = json_object_get(r->json, "trials") ? "trials"
				   : json_object_get(r->json, "grid") ? "grid"
								      : "random";

		search = json_pack("{s:O}", kind, json_object_get(r->json, kind));
	}
	rows = trial_rows(spec, sets);
	/* same key + same body (as parsed, so whitespace does not matter) = same sweep */
	if (!rows || !search || !(canon = ty_json_canonical(r->json)) ||
	    !(rows_text = json_dumps(rows, JSON_COMPACT)) ||
	    !(tmpl_text = json_dumps(spec, JSON_COMPACT)) ||
	    !(search_text = json_dumps(search, JSON_COMPACT)) ||
	    (objective && !(obj_text = json_dumps(objective, JSON_COMPACT)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	ty_sha256_hex(hash, canon, strlen(canon));
	if (key && (rc = replay(r, sw.team_id, key, hash, err)) != TY_ECONFLICT)
		goto out; /* replayed, refused, or failed */
	ty_err_clear(err);
	{
		const json_t *nm = json_object_get(r->json, "name");

		sw.name = json_is_string(nm) ? json_string_value(nm) : NULL;
	}
	sw.template = tmpl_text;
	sw.search = search_text;
	sw.max_concurrent = max_conc ? ty_arena_printf(r->arena, "%lld", max_conc) : NULL;
	sw.objective = obj_text;
	sw.key = key;
	sw.hash = key ? hash : NULL;
	sw.trials = rows_text;
	sw.priority_class = json_string_value(json_object_get(spec, "priority_class"));
	sw.priority = ty_arena_printf(r->arena, "%lld",
				      (long long)json_integer_value(json_object_get(spec, "priority")));
	sw.message = ty_arena_printf(r->arena, "submitted by token '%s' as a sweep trial",
				     r->auth.token_name);
	if ((rc = ty_pg_begin(r->pg, err)))
		goto out;
	if (limited) {
		long long max;

		if ((rc = api_team_lock(&max, r, sw.team_id, err)))
			goto out; /* the pool rolls back */
		/* under the team's row lock: a same-key request that held it is replayed */
		if (key && (rc = replay(r, sw.team_id, key, hash, err)) != TY_ECONFLICT) {
			ty_pg_rollback(r->pg);
			goto out;
		}
		ty_err_clear(err);
		if ((rc = api_pending_admit(r, sw.team_id, team, max,
					    (long long)json_array_size(sets), err))) {
			ty_pg_rollback(r->pg);
			goto out;
		}
	}
	/* the sweep, its trial jobs and their first events: one transaction */
	if (!(rc = api_store_sweep_insert(&id, r->pg, r->arena, &sw, err))) {
		if (!(rc = ty_pg_commit(r->pg, err)) &&
		    !(rc = api_store_sweep_get(&doc, r->pg, r->arena, id, NULL, err)))
			rc = api_reply_text(r, 201, doc);
		goto out;
	}
	ty_pg_rollback(r->pg);
	if (rc == TY_ECONFLICT && key) {
		/* a concurrent request with the same key won the race */
		ty_err_clear(err);
		rc = replay(r, sw.team_id, key, hash, err);
	}
out:
	json_decref(objective);
	json_decref(spec);
	json_decref(sets);
	json_decref(rows);
	json_decref(search);
	free(canon);
	free(rows_text);
	free(tmpl_text);
	free(search_text);
	free(obj_text);
	return rc;
}

int api_h_sweeps_get(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return sweep_not_found(r, err);
	if ((rc = api_store_sweep_get(&doc, r->pg, r->arena, r->params[0], api_scope(r), err)))
		return rc;
	return doc ? api_reply_text(r, 200, doc) : sweep_not_found(r, err);
}

int api_h_sweeps_list(struct api_req *r, struct ty_err *err)
{
	const char *cursor = api_query(r, "cursor"), *limit_s = api_query(r, "limit");
	struct api_page_filter f = {api_scope(r), api_query(r, "team"), cursor, "50"};
	const char *items, *next;
	int64_t v;
	int rc;

	if (cursor && !api_parse_id(&v, cursor))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
	if (limit_s) {
		if (!api_parse_id(&v, limit_s) || v > 500)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "limit",
					"'limit' must be an integer from 1 to 500");
		f.limit = limit_s;
	}
	if ((rc = api_store_sweeps_page(&items, &next, r->pg, r->arena, &f, err)))
		return rc;
	return api_reply_page(r, items, next, err);
}

/*
 * One try of a sweep's cancel in its own transaction: *found false for a
 * sweep the token may not see (nothing done).
 */
static int cancel_once(bool *found, struct api_req *r, struct ty_err *err)
{
	int rc;

	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	if ((rc = api_store_sweep_lock(found, r->pg, r->params[0], api_scope(r), err)) ||
	    !*found || r->auth.role < API_ROLE_MEMBER)
		goto out;
	/* as job cancel does, trial by trial (store_jobs.c) */
	if ((rc = api_store_jobs_end_of_sweep(r->pg, r->arena, r->params[0], err)) ||
	    (rc = api_store_sweep_cancelled(r->pg, r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err)))
		goto out;
	return 0;
out:
	ty_pg_rollback(r->pg);
	return rc;
}

/* tries of a cancel that lost a deadlock to the scheduler's cycle, which locks the same trials */
#define SWEEP_CANCEL_TRIES 3

int api_h_sweeps_cancel(struct api_req *r, struct ty_err *err)
{
	bool found = false;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return sweep_not_found(r, err);
	for (int k = 0; k < SWEEP_CANCEL_TRIES; k++) {
		ty_err_clear(err);
		if ((rc = cancel_once(&found, r, err)) != TY_ECONFLICT)
			break;
	}
	if (rc)
		return rc;
	if (!found)
		return sweep_not_found(r, err);
	if (r->auth.role < API_ROLE_MEMBER)
		return api_fail(r, err, API_P_FORBIDDEN, NULL,
				"POST /v1/sweeps/{}/cancel needs the member role");
	return api_h_sweeps_get(r, err);
}
