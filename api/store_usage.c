/*
 * The usage SQL as typed calls (store.h): the documents of GET /v1/usage
 * and of its goodput split (docs/api.md, "Usage") are built by PostgreSQL
 * and returned as text.
 */
#include "store.h"
#include "goodput.h"

/*
 * The checkpoint bytes per team ($1: that team's only) now, not over the
 * range: as the nodes last reported them, locally and in the object store.
 */
#define STORAGE_DOC                                                                                \
	"WITH g AS (SELECT GROUPING(t.name) <> 0 AS total, t.name,"                                \
	"  jsonb_build_object('local_bytes', coalesce(sum(c.local_bytes), 0),"                     \
	"  'store_bytes', coalesce(sum(c.store_bytes), 0)) AS m"                                   \
	"  FROM teams t LEFT JOIN jobs j ON j.team_id = t.id"                                      \
	"  LEFT JOIN job_checkpoint_storage c ON c.job_id = j.id"                                  \
	"  WHERE $1::bigint IS NULL OR t.id = $1"                                                  \
	"  GROUP BY GROUPING SETS ((t.name), ()))"                                                 \
	" SELECT json_build_object('items', coalesce((SELECT json_agg("                            \
	"  jsonb_build_object('team', name) || m ORDER BY name) FROM g WHERE NOT total), '[]'),"   \
	" 'totals', coalesce((SELECT m FROM g WHERE total),"                                       \
	"  jsonb_build_object('local_bytes', 0, 'store_bytes', 0)))"

/*
 * The range, then usage rows of it (ledger rows, and allocations of attempts
 * not in the ledger yet, accruing to now), clipped to each bucket (the
 * range, or its UTC days), summed per group and in total.
 * The () grouping set is the totals row, there even when nothing is in range.
 */
static const char usage_sql[] =
    "WITH r AS (SELECT hi - interval '30 days' AS dlo, hi FROM (SELECT"
    "  coalesce(to_timestamp($3::bigint / 1000.0), now()) AS hi) x),"
    " rng AS (SELECT coalesce(to_timestamp($2::bigint / 1000.0), dlo) AS lo, hi FROM r),"
    " b AS (SELECT greatest(g, rng.lo) AS lo, least(g + interval '1 day', rng.hi) AS hi,"
    "   (g AT TIME ZONE 'UTC')::date AS d FROM rng, generate_series("
    "   date_trunc('day', rng.lo AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',"
    "   rng.hi - interval '1 microsecond', interval '1 day') g WHERE $4 = 'day'"
    "  UNION ALL SELECT lo, hi, NULL FROM rng WHERE $4 <> 'day'),"
    " iv AS (SELECT l.team_id, l.job_id, l.attempt, l.pool, l.gpus,"
    "   l.started_at AS s, l.ended_at AS e,"
    "   l.ended_at - l.lost_gpu_seconds / nullif(l.gpus, 0) * interval '1 second' AS ls,"
    "   l.rate_per_gpu_hour AS rate, false AS running, l.idle_gpu_seconds AS idle"
    "  FROM usage_ledger l, rng WHERE ($1::bigint IS NULL OR l.team_id = $1)"
    "  AND l.started_at < rng.hi AND l.ended_at > rng.lo"
    "  UNION ALL SELECT j.team_id, a.job_id, a.attempt, ty_node_pool(n.labels),"
    "   cardinality(a.gpus), t.created_at, coalesce(a.released_at, now()), NULL,"
    "   ty_usage_rate(ty_node_pool(n.labels), ty_gpu_model(n.inventory, a.gpus)),"
    "   t.ended_at IS NULL, NULL::float8"
    "  FROM rng, allocations a JOIN attempts t USING (job_id, attempt)"
    "  JOIN jobs j ON j.id = a.job_id JOIN nodes n ON n.id = a.node_id"
    "  WHERE ($1::bigint IS NULL OR j.team_id = $1) AND t.created_at < rng.hi"
    "  AND (a.released_at IS NULL OR a.released_at > rng.lo)"
    "  AND NOT EXISTS (SELECT 1 FROM usage_ledger l"
    "   WHERE l.job_id = a.job_id AND l.attempt = a.attempt)),"
    " x AS (SELECT iv.job_id, iv.attempt, iv.running, iv.rate,"
    "   CASE WHEN $4 IN ('team', 'job') THEN iv.team_id END AS kt,"
    "   CASE WHEN $4 = 'job' THEN iv.job_id END AS kj,"
    "   CASE WHEN $4 = 'pool' THEN iv.pool END AS kp, b.d AS kd,"
    "   iv.gpus * greatest(extract(epoch FROM least(iv.e, b.hi) - greatest(iv.s, b.lo)), 0)"
    "    AS gs,"
    "   iv.gpus * greatest(extract(epoch FROM least(iv.e, b.hi)"
    "    - greatest(coalesce(iv.ls, iv.e), b.lo)), 0) AS lgs,"
    /* a row's idle time has no place in it: spread evenly over the row */
    "   coalesce(iv.idle * greatest(extract(epoch FROM least(iv.e, b.hi)"
    "    - greatest(iv.s, b.lo)), 0) / nullif(extract(epoch FROM iv.e - iv.s), 0), 0)"
    "    AS igs"
    "  FROM iv JOIN b ON iv.s < b.hi AND iv.e > b.lo),"
    " g AS (SELECT GROUPING(kt, kj, kp, kd) <> 0 AS total, kt, kj, kp, kd,"
    "   jsonb_build_object('gpu_seconds', round(coalesce(sum(gs), 0)::numeric, 3),"
    "   'gpu_hours', round(coalesce(sum(gs), 0)::numeric / 3600, 6),"
    "   'cost', round(coalesce(sum(gs * rate), 0)::numeric / 3600, 6),"
    "   'lost_gpu_seconds', round(coalesce(sum(lgs), 0)::numeric, 3),"
    "   'idle_gpu_seconds', round(coalesce(sum(igs), 0)::numeric, 3),"
    "   'idle_gpu_hours', round(coalesce(sum(igs), 0)::numeric / 3600, 6),"
    "   'attempts', count(DISTINCT (job_id, attempt)),"
    "   'running_attempts', count(DISTINCT (job_id, attempt)) FILTER (WHERE running)) AS m"
    "  FROM x GROUP BY GROUPING SETS ((kt, kj, kp, kd), ()))"
    " SELECT json_build_object('from', ty_ts(rng.lo), 'to', ty_ts(rng.hi),"
    "  'group_by', $4, 'as_of', ty_ts(now()),"
    "  'items', coalesce((SELECT json_agg(CASE $4"
    "    WHEN 'team' THEN jsonb_build_object('team', t.name)"
    "    WHEN 'job' THEN jsonb_build_object('job', g.kj, 'team', t.name)"
    "    WHEN 'pool' THEN jsonb_build_object('pool', g.kp)"
    "    ELSE jsonb_build_object('day', to_char(g.kd, 'YYYY-MM-DD')) END || g.m"
    "    ORDER BY t.name, g.kj, g.kp, g.kd)"
    "   FROM g LEFT JOIN teams t ON t.id = g.kt WHERE NOT g.total), '[]'),"
    "  'totals', (SELECT m FROM g WHERE total), 'storage', (" STORAGE_DOC "))"
    " FROM rng";

int api_store_usage(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *team_id,
		    const char *from_ms, const char *to_ms, const char *group_by,
		    struct ty_err *err)
{
	const char *p[4] = {team_id, from_ms, to_ms, group_by};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, usage_sql, 4, p, err)))
		return rc;
	rc = api__store_text(doc, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

/* Per category: GPU-hours and cost, summed over the rows (docs/api.md, "Usage"). */
#define GOODPUT_SUMS(name, str)                                                                    \
	", '" str "_gpu_hours', round(coalesce(sum(l." str "_gpu_ms), 0)::numeric / 3600000, 6),"   \
	" '" str "_cost', round(coalesce(sum(l." str "_gpu_ms * l.rate_per_gpu_hour), 0)::numeric" \
	" / 3600000, 6)"

/*
 * The goodput split: ledger rows that ended in the range, whole (a row's
 * categories have no place in time), per team and pool and in total.
 * Running attempts are not classified yet, nor rows of an older scheduler
 * (gpu_ms NULL).
 */
static const char goodput_sql[] =
    "WITH rng AS (SELECT coalesce(to_timestamp($2::bigint / 1000.0), hi - interval '30 days')"
    "  AS lo, hi FROM (SELECT coalesce(to_timestamp($3::bigint / 1000.0), now()) AS hi) x),"
    " g AS (SELECT GROUPING(l.team_id, l.pool) <> 0 AS total, l.team_id AS kt, l.pool AS kp,"
    "  jsonb_build_object('gpu_hours', round(coalesce(sum(l.gpu_ms), 0)::numeric / 3600000, 6),"
    "  'cost', round(coalesce(sum(l.gpu_ms * l.rate_per_gpu_hour), 0)::numeric / 3600000, 6)"
    PROTO_GOODPUT_CATEGORIES(GOODPUT_SUMS)
    ", 'queue_wait_gpu_hours', round(coalesce(sum(l.queue_wait_gpu_ms), 0)::numeric"
    "  / 3600000, 6), 'attempts', count(DISTINCT (l.job_id, l.attempt))) AS m"
    "  FROM usage_ledger l, rng WHERE ($1::bigint IS NULL OR l.team_id = $1)"
    "  AND l.ended_at >= rng.lo AND l.ended_at < rng.hi AND l.gpu_ms IS NOT NULL"
    "  GROUP BY GROUPING SETS ((l.team_id, l.pool), ()))"
    " SELECT json_build_object('from', ty_ts(rng.lo), 'to', ty_ts(rng.hi),"
    "  'split', 'goodput', 'as_of', ty_ts(now()),"
    "  'items', coalesce((SELECT json_agg(jsonb_build_object('team', t.name, 'pool', g.kp)"
    "    || g.m ORDER BY t.name, g.kp) FROM g LEFT JOIN teams t ON t.id = g.kt"
    "   WHERE NOT g.total), '[]'),"
    "  'totals', (SELECT m FROM g WHERE total))"
    " FROM rng";

int api_store_usage_goodput(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			    const char *team_id, const char *from_ms, const char *to_ms,
			    struct ty_err *err)
{
	const char *p[3] = {team_id, from_ms, to_ms};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, goodput_sql, 3, p, err)))
		return rc;
	rc = api__store_text(doc, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}
