/*
 * The job_metrics SQL as typed calls (store.h): a report's and a page's
 * documents are built by PostgreSQL and returned as text.
 */
#include "store.h"

#include <stdio.h>

/* a repeated step merges: the newest value of each name wins */
static const char put_sql[] =
	"INSERT INTO job_metrics AS m (job_id, step, attempt, metrics)"
	" SELECT j.id, $2, coalesce($3::integer, nullif(j.attempt, 0)),"
	" $4::jsonb FROM jobs j"
	" WHERE j.id = $1 AND ($5::bigint IS NULL OR j.team_id = $5)"
	" ON CONFLICT (job_id, step) DO UPDATE SET"
	" metrics = m.metrics || excluded.metrics,"
	" attempt = excluded.attempt, reported_at = now()"
	" RETURNING json_build_object('job_id', job_id, 'step', step,"
	" 'attempt', attempt, 'metrics', metrics,"
	" 'reported_at', ty_ts(reported_at))::text";

int api_store_job_metrics_put(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const struct api_metrics_report *m, struct ty_err *err)
{
	const char *p[5] = {m->job_id, m->step, m->attempt, m->metrics, m->scope};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, put_sql, 5, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/* one more row than asked tells whether another page exists */
static const char page_sql[] =
	"SELECT json_build_object('job_id', j.id,"
	" 'items', coalesce((SELECT json_agg(json_build_object('step', x.step,"
	"  'attempt', x.attempt, 'metrics', x.metrics, 'reported_at', ty_ts(x.reported_at))"
	"  ORDER BY x.step) FROM (SELECT step, attempt, reported_at,"
	"   CASE WHEN $3::text IS NULL THEN metrics"
	"   ELSE jsonb_build_object($3::text, metrics->$3::text) END AS metrics"
	"   FROM job_metrics WHERE job_id = j.id AND step > $4::bigint"
	"   AND ($3::text IS NULL OR metrics ? $3::text)"
	"   ORDER BY step LIMIT $5::integer) x), '[]'),"
	" 'next_after_step', (SELECT CASE WHEN count(*) > $5::integer"
	"  THEN max(step) FILTER (WHERE rn <= $5::integer) END"
	"  FROM (SELECT step, row_number() OVER (ORDER BY step) AS rn FROM job_metrics"
	"   WHERE job_id = j.id AND step > $4::bigint"
	"   AND ($3::text IS NULL OR metrics ? $3::text)"
	"   ORDER BY step LIMIT $5::integer + 1) y),"
	" 'latest', ty_job_latest_metrics(j.id))::text"
	" FROM jobs j WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)";

int api_store_job_metrics_page(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			       const char *job_id, const char *scope, const char *name,
			       long long after_step, long long limit, struct ty_err *err)
{
	char after[24], lim[24];
	const char *p[5] = {job_id, scope, name, after, lim};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	snprintf(after, sizeof(after), "%lld", after_step);
	snprintf(lim, sizeof(lim), "%lld", limit);
	if ((rc = ty_pg_exec(&res, pg, page_sql, 5, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}
