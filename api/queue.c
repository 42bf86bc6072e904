/* The queue route: pending jobs in the order the scheduler published. */
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Queue order is (queue_position, id) with never-positioned jobs last; the
 * sort key maps NULL to the largest int4 so the order is one row comparison.
 * It is the expression of the index jobs_queue_order (migration 0006).
 */
#define QUEUE_KEY_SQL "coalesce(j.queue_position, 2147483647)"

/* "KEY.ID" from next_cursor: the last entry of the previous page. */
static bool parse_cursor(const char **key, const char **id, struct api_req *r, const char *s)
{
	const char *dot = strchr(s, '.');
	long long k;
	int64_t v;
	char *end;

	if (!dot || dot == s || dot - s > 10 || s[0] == '+' || s[0] == '-')
		return false;
	errno = 0;
	k = strtoll(s, &end, 10);
	if (errno || end != dot || k < 1 || k > 2147483647 || !api_parse_id(&v, dot + 1))
		return false;
	*key = ty_arena_printf(r->arena, "%lld", k);
	*id = ty_arena_printf(r->arena, "%lld", (long long)v);
	return *key && *id;
}

int api_h_queue_list(struct api_req *r, struct ty_err *err)
{
	const char *cursor = api_query(r, "cursor"), *limit_s = api_query(r, "limit");
	/* $1 team filter, $2/$3 cursor, $4 limit, $5 the caller's team id (NULL: admin) */
	const char *p[5] = {api_query(r, "team"), NULL, NULL, "50", NULL};
	PGresult *res = NULL;
	int64_t v;
	int rc;

	if (p[0] && !api_team_name_ok(p[0]))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "team",
				       "'team' must be a team name (a-z, 0-9, '-')");
	if (cursor && !parse_cursor(&p[1], &p[2], r, cursor))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "cursor",
				       "'cursor' is not one this server gave out");
	if (limit_s) {
		if (!api_parse_id(&v, limit_s) || v > 500)
			return api_reply_error(r, API_P_INVALID_PARAMETER, "limit",
					       "'limit' must be an integer from 1 to 500");
		p[3] = limit_s;
	}
	if (r->auth.role != API_ROLE_ADMIN)
		p[4] = ty_arena_printf(r->arena, "%lld", (long long)r->auth.team_id);
	/*
	 * The queue is shared, so everyone sees every entry; of other teams'
	 * jobs only what says nothing about them: no id, no name, and no
	 * reason (the scheduler's free text says more about a job than its
	 * team needs to share). Other teams' jobs named in one's own reasons
	 * are redacted.
	 */
	rc = ty_pg_exec(&res, r->pg,
			"WITH page AS (SELECT j.*, " QUEUE_KEY_SQL " AS k FROM jobs j"
			"  WHERE j.state = 'pending'"
			"  AND ($1::text IS NULL OR j.team_id = (SELECT id FROM teams WHERE name = $1))"
			"  AND ($2::int IS NULL OR (" QUEUE_KEY_SQL ", j.id) > ($2::int, $3::bigint))"
			"  ORDER BY k, j.id LIMIT $4::int + 1),"
			" shown AS (SELECT * FROM page ORDER BY k, id LIMIT $4::int)"
			" SELECT coalesce((SELECT json_agg(json_build_object("
			"  'position', s.queue_position,"
			"  'job', CASE WHEN s.mine THEN s.id END,"
			"  'team', t.name,"
			"  'name', CASE WHEN s.mine THEN s.name END,"
			"  'priority_class', s.priority_class, 'priority', s.priority,"
			"  'gpus', s.nodes * s.gpus_per_node, 'nodes', s.nodes,"
			"  'gpus_per_node', s.gpus_per_node,"
			"  'submitted_at', ty_ts(s.created_at),"
			"  'fair_share', coalesce(u.fair_share, 1),"
			"  'reason', CASE WHEN s.mine THEN ty_redact_jobs("
			"   ty_pending_reason(s.state, s.pending_reason), $5::bigint) END,"
			"  'reserved_until', ty_ts(s.reserved_until)) ORDER BY s.k, s.id)"
			"  FROM (SELECT x.*, ($5::bigint IS NULL OR x.team_id = $5) AS mine,"
			"    (x.spec->'resources'->>'nodes')::int AS nodes,"
			"    (x.spec->'resources'->>'gpus_per_node')::int AS gpus_per_node"
			"    FROM shown x) s"
			"  JOIN teams t ON t.id = s.team_id"
			"  LEFT JOIN team_usage u ON u.team_id = s.team_id), '[]')::text,"
			" CASE WHEN (SELECT count(*) FROM page) > $4::int"
			"  THEN (SELECT k || '.' || id FROM shown ORDER BY k DESC, id DESC LIMIT 1) END",
			5, p, err);
	if (rc)
		return rc;
	rc = api_reply_page(r, PQgetvalue(res, 0, 0), ty_pg_val(res, 0, 1), err);
	PQclear(res);
	return rc;
}
