/*
 * The teams SQL as typed calls (store.h): a team's document is
 * ty_team_json's (migrations), returned as text.
 */
#include "store.h"

#include <stdlib.h>
#include <string.h>

int api__store_text(const char **out, struct ty_arena *a, const PGresult *res, int row, int col,
		    struct ty_err *err)
{
	const char *v = ty_pg_val(res, row, col);

	*out = NULL;
	if (v && !(*out = ty_arena_strdup(a, v)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

int api__store_first(const char **out, struct ty_arena *a, PGresult *res, struct ty_err *err)
{
	int rc = 0;

	*out = NULL;
	if (PQntuples(res) > 0)
		rc = api__store_text(out, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

const char *api_team_col_name(enum api_team_col c)
{
	static const char *const names[] = {
#define API_TEAM_COL_NAME(c) #c,
		API_TEAM_COLUMNS(API_TEAM_COL_NAME)
#undef API_TEAM_COL_NAME
	};

	return names[c];
}

static const char insert_sql[] =
	"INSERT INTO teams (name, nominal_gpus, borrowing_limit_gpus,"
	" lending_limit_gpus, cohort, weight, max_pending_jobs, max_cpus,"
	" max_memory_mb, run_uid, idle_gpu_alert_seconds, checkpoint_keep,"
	" checkpoint_keep_every, checkpoint_tier)"
	" VALUES ($1, $2, $3, $4, $5, coalesce($6::float8, 1), $7, $8, $9, $10, $11, $12, $13,"
	" $14)"
	" RETURNING ty_team_json(teams)::text";

int api_store_team_insert(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
			  const struct api_team_set *s, struct ty_err *err)
{
	const char *p[1 + API_TEAM_NCOLS];
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	p[0] = name;
	memcpy(p + 1, s->value, sizeof(s->value));
	if ((rc = ty_pg_exec(&res, pg, insert_sql, 1 + API_TEAM_NCOLS, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/* $2k is "is the column given", $2k+1 its value: one fixed statement */
static const char update_sql[] =
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
	" checkpoint_keep = CASE WHEN $22 THEN $23::int ELSE checkpoint_keep END,"
	" checkpoint_keep_every = CASE WHEN $24 THEN $25::int ELSE checkpoint_keep_every END,"
	" checkpoint_tier = CASE WHEN $26 THEN $27::boolean ELSE checkpoint_tier END,"
	" updated_at = now()"
	" WHERE name = $1 RETURNING ty_team_json(teams)::text";

int api_store_team_update(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
			  const struct api_team_set *s, struct ty_err *err)
{
	const char *p[1 + 2 * API_TEAM_NCOLS];
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	p[0] = name;
	for (int i = 0; i < API_TEAM_NCOLS; i++) {
		p[1 + 2 * i] = s->given[i] ? "t" : "f";
		p[2 + 2 * i] = s->given[i] ? s->value[i] : NULL;
	}
	if ((rc = ty_pg_exec(&res, pg, update_sql, 1 + 2 * API_TEAM_NCOLS, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/* a new amount or period may cross 80 % afresh: the alert may fire again */
static const char budget_sql[] =
	"UPDATE teams SET budget_amount = $2::float8, budget_period = $3,"
	" budget_alerted_at = NULL, updated_at = now()"
	" WHERE name = $1 RETURNING ty_team_json(teams)::text";

int api_store_team_budget_set(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const char *name, const char *amount, const char *period,
			      struct ty_err *err)
{
	const char *p[3] = {name, amount, period};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, budget_sql, 3, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char uid_sql[] = "SELECT 1 FROM teams WHERE run_uid = $1::int";

int api_store_team_uid_taken(bool *taken, struct ty_pg *pg, const char *uid, struct ty_err *err)
{
	const char *p[1] = {uid};
	PGresult *res = NULL;
	int rc;

	*taken = false;
	if (!uid)
		return 0;
	if ((rc = ty_pg_exec(&res, pg, uid_sql, 1, p, err)))
		return rc;
	*taken = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

static const char list_sql[] =
	"SELECT json_build_object('items', coalesce(json_agg(ty_team_json(t)"
	" ORDER BY t.name), '[]'))::text FROM teams t"
	" WHERE $1::text IS NULL OR t.name = $1";

int api_store_teams_list(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *team,
			 struct ty_err *err)
{
	const char *p[1] = {team};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, list_sql, 1, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char get_sql[] = "SELECT ty_team_json(t)::text FROM teams t"
			      " WHERE t.name = $1 AND ($2::text IS NULL OR t.name = $2)";

int api_store_team_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
		       const char *own, struct ty_err *err)
{
	const char *p[2] = {name, own};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, get_sql, 2, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char id_sql[] = "SELECT id::text FROM teams WHERE name = $1";

int api_store_team_id(const char **id, struct ty_pg *pg, struct ty_arena *a, const char *name,
		      struct ty_err *err)
{
	const char *p[1] = {name};
	PGresult *res = NULL;
	int rc;

	*id = NULL;
	if ((rc = ty_pg_exec(&res, pg, id_sql, 1, p, err)))
		return rc;
	return api__store_first(id, a, res, err);
}

static const char limits_sql[] = "SELECT id, nominal_gpus, borrowing_limit_gpus,"
				 " max_pending_jobs IS NOT NULL, max_cpus, max_memory_mb,"
				 " checkpoint_keep, checkpoint_keep_every, checkpoint_tier"
				 " FROM teams WHERE name = $1";

int api_store_team_limits(struct api_team_limits *t, struct ty_pg *pg, struct ty_arena *a,
			  const char *name, struct ty_err *err)
{
	const char *p[1] = {name};
	PGresult *res = NULL;
	int rc;

	memset(t, 0, sizeof(*t));
	if ((rc = ty_pg_exec(&res, pg, limits_sql, 1, p, err)))
		return rc;
	if (PQntuples(res) > 0 &&
	    !(rc = api__store_text(&t->id, a, res, 0, 0, err)) &&
	    !(rc = api__store_text(&t->nominal, a, res, 0, 1, err)) &&
	    !(rc = api__store_text(&t->borrowing, a, res, 0, 2, err)) &&
	    !(rc = api__store_text(&t->max_cpus, a, res, 0, 4, err)) &&
	    !(rc = api__store_text(&t->max_memory_mb, a, res, 0, 5, err)) &&
	    !(rc = api__store_text(&t->ckpt_keep, a, res, 0, 6, err)) &&
	    !(rc = api__store_text(&t->ckpt_keep_every, a, res, 0, 7, err)) &&
	    !(rc = api__store_text(&t->ckpt_tier, a, res, 0, 8, err)))
		t->limited = PQgetvalue(res, 0, 3)[0] == 't';
	if (rc)
		t->id = NULL;
	PQclear(res);
	return rc;
}

static const char lock_sql[] = "SELECT max_pending_jobs FROM teams WHERE id = $1 FOR UPDATE";

int api_store_team_lock(long long *max_pending, struct ty_pg *pg, const char *team_id,
			struct ty_err *err)
{
	const char *p[1] = {team_id};
	PGresult *res = NULL;
	int rc;

	*max_pending = -1;
	if ((rc = ty_pg_exec(&res, pg, lock_sql, 1, p, err)))
		return rc;
	/* no limit any more (or no team): nothing to count */
	if (PQntuples(res) == 1 && ty_pg_val(res, 0, 0))
		*max_pending = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/* in id order: concurrent batches lock teams without a deadlock */
static const char pending_lock_sql[] = "SELECT id, coalesce(max_pending_jobs, -1) FROM teams"
				       " WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE";
static const char pending_count_sql[] =
	"SELECT team_id, count(*) FROM jobs WHERE team_id = ANY($1::bigint[])"
	" AND state = 'pending' GROUP BY team_id";

int api_store_teams_pending(struct api_team_pending **out, int *nt, struct ty_pg *pg,
			    const char *const *team_ids, int n, struct ty_err *err)
{
	struct api_team_pending *t = NULL;
	struct ty_buf ids = TY_BUF_INIT;
	const char *p[1];
	PGresult *res = NULL;
	int rc = 0, k = 0;

	*out = NULL;
	*nt = 0;
	ty_buf_puts(&ids, "{");
	for (int i = 0; i < n; i++)
		ty_buf_printf(&ids, "%s%s", i ? "," : "", team_ids[i]);
	ty_buf_puts(&ids, "}");
	if (ids.oom) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	p[0] = ids.data;
	/* the count must come after the lock, in a statement of its own (api.h, api_team_lock) */
	if ((rc = ty_pg_exec(&res, pg, pending_lock_sql, 1, p, err)))
		goto out;
	if (!(t = calloc((size_t)PQntuples(res) + 1, sizeof(*t)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (k = 0; k < PQntuples(res); k++) {
		t[k].id = atoll(PQgetvalue(res, k, 0));
		t[k].max = atoll(PQgetvalue(res, k, 1));
	}
	PQclear(res);
	res = NULL;
	if ((rc = ty_pg_exec(&res, pg, pending_count_sql, 1, p, err)))
		goto out;
	for (int i = 0; i < PQntuples(res); i++)
		for (int j = 0; j < k; j++)
			if (t[j].id == atoll(PQgetvalue(res, i, 0)))
				t[j].pending = atoll(PQgetvalue(res, i, 1));
	*out = t;
	*nt = k;
	t = NULL;
out:
	PQclear(res);
	free(t);
	ty_buf_free(&ids);
	return rc;
}
