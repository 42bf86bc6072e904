/*
 * The sweeps SQL as typed calls (store.h): a sweep's document is
 * ty_sweep_json's (migrations), returned as text. Ending a sweep's trials
 * is a job state write and lives in store_jobs.c.
 */
#include "store.h"

static const char by_key_sql[] = "SELECT request_sha256, ty_sweep_json(s, true)::text FROM sweeps s"
				 " WHERE team_id = $1 AND idempotency_key = $2";

int api_store_sweep_by_key(const char **hash, const char **doc, struct ty_pg *pg,
			   struct ty_arena *a, const char *team_id, const char *key,
			   struct ty_err *err)
{
	const char *p[2] = {team_id, key};
	PGresult *res = NULL;
	int rc = 0;

	*hash = *doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, by_key_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) > 0 && !(rc = api__store_text(hash, a, res, 0, 0, err)) &&
	    (rc = api__store_text(doc, a, res, 0, 1, err)))
		*hash = NULL;
	PQclear(res);
	return rc;
}

/* the sweep, its trial jobs and their first events: one statement */
static const char insert_sql[] =
	"WITH s AS (INSERT INTO sweeps (team_id, name, template, search,"
	"  max_concurrent, objective, idempotency_key, request_sha256)"
	"  VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id),"
	" j AS (INSERT INTO jobs (team_id, name, spec, priority_class, priority,"
	"  labels, sweep_id, sweep_trial, sweep_params)"
	"  SELECT $1, t.v->'spec'->>'name', t.v->'spec', $10, $11::int,"
	"   t.v->'spec'->'labels', s.id, t.i - 1, t.v->'params'"
	"  FROM s, jsonb_array_elements($9::jsonb) WITH ORDINALITY AS t(v, i)"
	"  RETURNING id),"
	/* volatile, so it sees j's rows; the main query reads e, so e runs */
	" e AS (SELECT count(ty_job_event(id, 'submitted', 'pending', $12, NULL))"
	"  FROM j)"
	" SELECT s.id FROM s, e";

int api_store_sweep_insert(const char **id, struct ty_pg *pg, struct ty_arena *a,
			   const struct api_sweep_new *s, struct ty_err *err)
{
	const char *p[12] = {s->team_id, s->name, s->template, s->search,
			     s->max_concurrent, s->objective, s->key, s->hash,
			     s->trials, s->priority_class, s->priority, s->message};
	PGresult *res = NULL;
	int rc;

	*id = NULL;
	if ((rc = ty_pg_exec(&res, pg, insert_sql, 12, p, err)))
		return rc;
	return api__store_first(id, a, res, err);
}

static const char get_sql[] = "SELECT ty_sweep_json(s, true)::text FROM sweeps s"
			      " WHERE s.id = $1 AND ($2::bigint IS NULL OR s.team_id = $2)";

int api_store_sweep_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, get_sql, 2, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/* one more row than asked tells whether another page exists */
static const char page_sql[] =
	"WITH page AS (SELECT * FROM sweeps s"
	"  WHERE ($1::bigint IS NULL OR s.team_id = $1)"
	"  AND ($2::text IS NULL OR s.team_id = (SELECT id FROM teams WHERE name = $2))"
	"  AND ($3::bigint IS NULL OR s.id < $3)"
	"  ORDER BY s.id DESC LIMIT $4::int + 1),"
	" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $4::int)"
	" SELECT coalesce((SELECT json_agg(ty_sweep_json(x, false) ORDER BY x.id DESC)"
	"  FROM shown x), '[]')::text,"
	" CASE WHEN (SELECT count(*) FROM page) > $4::int"
	"  THEN (SELECT min(id) FROM shown)::text END";

int api_store_sweeps_page(const char **items, const char **next, struct ty_pg *pg,
			  struct ty_arena *a, const struct api_page_filter *f, struct ty_err *err)
{
	const char *p[4] = {f->scope, f->team, f->cursor, f->limit};
	PGresult *res = NULL;
	int rc;

	*items = *next = NULL;
	if ((rc = ty_pg_exec(&res, pg, page_sql, 4, p, err)))
		return rc;
	if (!(rc = api__store_text(items, a, res, 0, 0, err)))
		rc = api__store_text(next, a, res, 0, 1, err);
	PQclear(res);
	return rc;
}

static const char lock_sql[] = "SELECT id FROM sweeps"
			       " WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2) FOR UPDATE";

int api_store_sweep_lock(bool *found, struct ty_pg *pg, const char *id, const char *scope,
			 struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, lock_sql, 2, p, err)))
		return rc;
	*found = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

static const char cancelled_sql[] =
	"UPDATE sweeps SET cancelled_at = coalesce(cancelled_at, now()) WHERE id = $1";

int api_store_sweep_cancelled(struct ty_pg *pg, const char *id, struct ty_err *err)
{
	const char *p[1] = {id};

	return ty_pg_exec(NULL, pg, cancelled_sql, 1, p, err);
}
