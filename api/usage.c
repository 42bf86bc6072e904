/*
 * The usage route: GPU-seconds, GPU-hours, cost, lost work and idle GPUs
 * from the usage ledger, with attempts not in it yet accruing up to now, per team,
 * job, pool or day over a time range (docs/api.md, "Usage").
 */
#include "api.h"
#include "ty_time.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS (86400LL * 1000)
/* The default range, and the longest one group_by=day may ask for. */
#define DEFAULT_RANGE_MS (30 * DAY_MS)
#define MAX_DAYS 366

/*
 * The range, then usage rows of it (ledger rows, and allocations of attempts
 * not in the ledger yet, accruing to now), clipped to each bucket (the
 * range, or its UTC days), summed per group and in total.
 * $1 team id (NULL: all), $2 from ms, $3 to ms (NULL: now), $4 group_by.
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
    "  'totals', (SELECT m FROM g WHERE total))"
    " FROM rng";

int api_h_usage(struct api_req *r, struct ty_err *err)
{
	const char *team = api_query(r, "team"), *from = api_query(r, "from"),
		   *to = api_query(r, "to"), *group = api_query(r, "group_by");
	const char *p[4] = {NULL, NULL, NULL, "team"};
	int64_t from_ms = 0, to_ms = 0;
	PGresult *res = NULL;
	int rc;

	if (team && !api_team_name_ok(team))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "team",
				       "'team' must be a team name (a-z, 0-9, '-')");
	if (from && !ty_time_parse_rfc3339(&from_ms, from))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "from",
				       "'from' must be an RFC 3339 time such as "
				       "2026-01-31T00:00:00Z, not '%.64s'",
				       from);
	if (to && !ty_time_parse_rfc3339(&to_ms, to))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "to",
				       "'to' must be an RFC 3339 time such as "
				       "2026-01-31T00:00:00Z, not '%.64s'",
				       to);
	if (group) {
		if (strcmp(group, "team") && strcmp(group, "job") && strcmp(group, "pool") &&
		    strcmp(group, "day"))
			return api_reply_error(r, API_P_INVALID_PARAMETER, "group_by",
					       "'group_by' must be team, job, pool or day, not "
					       "'%.32s'",
					       group);
		p[3] = group;
	}
	if (!to)
		to_ms = ty_wall_ms();
	if (!from)
		from_ms = to_ms - DEFAULT_RANGE_MS;
	if (from_ms >= to_ms)
		return api_reply_error(r, API_P_INVALID_PARAMETER, "from",
				       "'from' must be before 'to' (or before now, without 'to')");
	if (!strcmp(p[3], "day") && to_ms - from_ms > MAX_DAYS * DAY_MS)
		return api_reply_error(r, API_P_INVALID_PARAMETER, "from",
				       "group_by=day covers at most %d days", MAX_DAYS);
	if (r->auth.role != API_ROLE_ADMIN) {
		/* members and viewers see their own team's usage only */
		if (team && strcmp(team, r->auth.team))
			return api_reply_error(r, API_P_FORBIDDEN, "team",
					       "a token of team '%s' cannot see the usage of team "
					       "'%s'",
					       r->auth.team, team);
		p[0] = ty_arena_printf(r->arena, "%lld", (long long)r->auth.team_id);
	} else if (team) {
		const char *q[] = {team};

		if ((rc = ty_pg_exec(&res, r->pg, "SELECT id FROM teams WHERE name = $1", 1, q,
				     err)))
			return rc;
		if (PQntuples(res) == 0) {
			PQclear(res);
			return api_reply_error(r, API_P_TEAM_NOT_FOUND, "team", "no team '%s'",
					       team);
		}
		p[0] = ty_arena_printf(r->arena, "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		res = NULL;
	}
	if (from)
		p[1] = ty_arena_printf(r->arena, "%lld", (long long)from_ms);
	if (to)
		p[2] = ty_arena_printf(r->arena, "%lld", (long long)to_ms);
	if ((team || r->auth.role != API_ROLE_ADMIN) && !p[0])
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((from && !p[1]) || (to && !p[2]))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc = ty_pg_exec(&res, r->pg, usage_sql, 4, p, err)))
		return rc;
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}
