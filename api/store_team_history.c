/*
 * A team's history as a typed call (store.h): the document of
 * GET /v1/teams/{name}/history (docs/api.md, "Team history") built by
 * PostgreSQL from team_samples (migration 0034) and returned as text.
 */
#include "store.h"

/*
 * No row when there is no such team, or it is not own's: the caller's 404.
 * The window is [$3, $4) in ms since the epoch; the primary key (team_id,
 * at) reads it.
 */
static const char history_sql[] =
    "WITH t AS (SELECT id FROM teams WHERE name = $1 AND ($2::text IS NULL OR name = $2)),"
    " s AS (SELECT s.* FROM team_samples s JOIN t ON s.team_id = t.id"
    "  WHERE s.at >= to_timestamp($3::bigint / 1000.0)"
    "  AND s.at < to_timestamp($4::bigint / 1000.0))"
    " SELECT json_build_object('items', coalesce((SELECT json_agg(json_build_object("
    "   'at', ty_ts(at), 'gpus_in_use', gpus_in_use, 'gpus_borrowed', gpus_borrowed,"
    "   'gpus_lent', gpus_lent,"
    "   'decayed_gpu_hours', round(decayed_gpu_seconds::numeric / 3600, 3)::float8,"
    "   'fair_share', fair_share, 'pending_jobs', pending_jobs,"
    "   'preemptions_suffered', preemptions_suffered,"
    "   'preemptions_caused', preemptions_caused) ORDER BY at) FROM s), '[]'),"
    "  'totals', (SELECT json_build_object("
    "   'preemptions_suffered', coalesce(sum(preemptions_suffered), 0),"
    "   'preemptions_caused', coalesce(sum(preemptions_caused), 0)) FROM s))::text"
    " FROM t";

int api_store_team_history(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
			   const char *own, const char *since_ms, const char *until_ms,
			   struct ty_err *err)
{
	const char *p[4] = {name, own, since_ms, until_ms};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, history_sql, 4, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}
