/*
 * The audit SQL as typed calls (store.h): the admin actions' audit_log
 * rows, and the request log audit_requests (its rows, pages and pruning).
 */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>

static const char log_sql[] =
	"INSERT INTO audit_log (token_id, action, object) VALUES ($1, $2, $3)";

int api_store_audit_log(struct ty_pg *pg, int64_t token_id, const char *action,
			const char *object, struct ty_err *err)
{
	char tid[24];
	const char *p[3] = {tid, action, object};

	snprintf(tid, sizeof(tid), "%lld", (long long)token_id);
	return ty_pg_exec(NULL, pg, log_sql, 3, p, err);
}

/*
 * An asynchronous commit (set_config local to this statement's own
 * transaction): no second WAL flush per request. The mutation itself
 * committed synchronously before; a PostgreSQL crash may lose the last
 * few hundred ms of audit rows (docs/security.md "Audit log").
 */
static const char request_sql[] =
	"INSERT INTO audit_requests (request_id, token_id, principal, role, team,"
	" trial_job, method, route, path, target_ids, created_id, status,"
	" problem_code, peer, summary)"
	" SELECT $1, $2::bigint, $3, $4, $5, $6::bigint, $7, $8, $9, $10::text[],"
	" $11::bigint, $12::int, $13, $14::inet, $15"
	" WHERE set_config('synchronous_commit', 'off', true) = 'off'";

int api_store_audit_request(struct ty_pg *pg, const char *const row[API_AUDIT_NCOLS],
			    struct ty_err *err)
{
	return ty_pg_exec(NULL, pg, request_sql, API_AUDIT_NCOLS, row, err);
}

/* one more row than asked tells whether another page exists */
static const char page_sql[] =
	"WITH page AS (SELECT * FROM audit_requests a"
	"  WHERE ($1::bigint IS NULL OR a.token_id = $1)"
	"  AND ($2::text IS NULL OR a.principal = $2)"
	"  AND ($3::text IS NULL OR a.team = $3)"
	"  AND ($4::text IS NULL OR a.method = $4)"
	"  AND ($5::text IS NULL OR starts_with(a.path, $5))"
	"  AND ($6::int IS NULL OR a.status = $6)"
	"  AND ($7::bigint IS NULL"
	"   OR a.at >= 'epoch'::timestamptz + $7::bigint * interval '1 ms')"
	"  AND ($8::bigint IS NULL"
	"   OR a.at < 'epoch'::timestamptz + $8::bigint * interval '1 ms')"
	"  AND ($9::bigint IS NULL OR a.id < $9)"
	"  ORDER BY a.id DESC LIMIT $10::int + 1),"
	" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $10::int)"
	" SELECT coalesce((SELECT json_agg(json_build_object('id', s.id,"
	"  'time', ty_ts(s.at), 'request_id', s.request_id, 'token_id', s.token_id,"
	"  'principal', s.principal, 'role', s.role, 'team', s.team,"
	"  'trial_job', s.trial_job, 'method', s.method, 'route', s.route,"
	"  'path', s.path, 'target_ids', s.target_ids, 'created_id', s.created_id,"
	"  'status', s.status, 'problem_code', s.problem_code,"
	"  'peer', host(s.peer), 'summary', s.summary) ORDER BY s.id DESC)"
	"  FROM shown s), '[]')::text,"
	" CASE WHEN (SELECT count(*) FROM page) > $10::int"
	"  THEN (SELECT min(id) FROM shown)::text END";

int api_store_audit_page(const char **items, const char **next, struct ty_pg *pg,
			 struct ty_arena *a, const struct api_audit_filter *f, struct ty_err *err)
{
	const char *p[10] = {f->token_id, f->principal, f->team,     f->method,	   f->path_prefix,
			     f->status,	  f->since_ms,	f->until_ms, f->before_id, f->limit};
	PGresult *res = NULL;
	int rc;

	*items = *next = NULL;
	if ((rc = ty_pg_exec(&res, pg, page_sql, 10, p, err)))
		return rc;
	if (!(rc = api__store_text(items, a, res, 0, 0, err)))
		rc = api__store_text(next, a, res, 0, 1, err);
	PQclear(res);
	return rc;
}

static const char prune_sql[] =
	"WITH d AS (DELETE FROM audit_requests WHERE id IN (SELECT id"
	"  FROM audit_requests WHERE at < now() - $1::int * interval '1 day'"
	"  ORDER BY at LIMIT $2::int) RETURNING 1)"
	" SELECT count(*) FROM d";

int api_store_audit_prune(long long *n, struct ty_pg *pg, int days, int batch, struct ty_err *err)
{
	char d[16], b[16];
	const char *p[2] = {d, b};
	PGresult *res = NULL;
	int rc;

	*n = 0;
	snprintf(d, sizeof(d), "%d", days);
	snprintf(b, sizeof(b), "%d", batch);
	if ((rc = ty_pg_exec(&res, pg, prune_sql, 2, p, err)))
		return rc;
	*n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}
