/*
 * The scrape-time gauge queries of GET /metrics as a typed call (store.h):
 * metrics.c names the gauges each query's columns fill.
 */
#include "store.h"

#include <string.h>

static const char jobs_sql[] =
	"SELECT t.name, s.state, count(j.id)"
	" FROM teams t"
	" CROSS JOIN (SELECT unnest(ARRAY['pending', 'scheduled', 'starting', 'running',"
	"  'preempting']) UNION SELECT DISTINCT state FROM jobs) s(state)"
	" LEFT JOIN jobs j ON j.team_id = t.id AND j.state = s.state"
	" GROUP BY 1, 2 ORDER BY 1, 2";
static const char queue_sql[] =
	"SELECT t.name, count(j.id),"
	" coalesce(extract(epoch FROM now() - min(j.created_at)), 0)::float8"
	" FROM teams t LEFT JOIN jobs j ON j.team_id = t.id AND j.state = 'pending'"
	" GROUP BY 1 ORDER BY 1";
static const char teams_sql[] =
	"SELECT t.name,"
	" (SELECT coalesce(sum(cardinality(a.gpus)), 0) FROM allocations a"
	"  JOIN jobs j ON j.id = a.job_id WHERE a.released_at IS NULL AND j.team_id = t.id),"
	" t.nominal_gpus, coalesce(u.gpus_borrowed, 0), coalesce(u.fair_share, 1)"
	" FROM teams t LEFT JOIN team_usage u ON u.team_id = t.id ORDER BY 1";
/*
 * Jobs a node's last heartbeat reported idle (every GPU of the attempt
 * there, uninterrupted) for at least their team's limit; nodes.running
 * holds what the scheduler kept of the heartbeat (docs/dispatch.md).
 */
static const char idle_sql[] =
	"SELECT t.name, count(DISTINCT x.job_id) FROM teams t LEFT JOIN ("
	"  SELECT j.team_id, j.id AS job_id FROM nodes n"
	"  CROSS JOIN LATERAL jsonb_to_recordset(n.running)"
	"   AS r(job bigint, attempt integer, idle_seconds float8)"
	"  JOIN jobs j ON j.id = r.job AND j.attempt = r.attempt"
	"  JOIN teams tm ON tm.id = j.team_id"
	"  JOIN allocations a ON a.job_id = r.job AND a.attempt = r.attempt"
	"   AND a.node_id = n.id"
	"  WHERE n.state <> 'lost' AND jsonb_typeof(n.running) = 'array'"
	"  AND jsonb_path_exists(n.running, '$[*] ? (@.idle_seconds >= 60)')"
	"  AND r.idle_seconds >= tm.idle_gpu_alert_seconds"
	"  AND j.state IN ('starting', 'running')"
	"  AND a.exited_at IS NULL AND a.released_at IS NULL) x ON x.team_id = t.id"
	" GROUP BY 1 ORDER BY 1";
static const char nodes_sql[] =
	"SELECT s.state, count(n.id)"
	" FROM unnest(ARRAY['ready', 'not_ready', 'suspect', 'draining', 'drained', 'preempting',"
	"  'lost']) s(state) LEFT JOIN nodes n ON ty_node_state(n.state, n.fault) = s.state"
	" GROUP BY 1 ORDER BY 1";
static const char outbox_sql[] = "SELECT count(*) FROM dispatch_outbox";
/* the bytes of the team's jobs' checkpoints as their nodes last reported (migrations/0030) */
static const char storage_sql[] =
	"SELECT t.name, s.tier, coalesce(sum(CASE s.tier WHEN 'local' THEN c.local_bytes"
	"  ELSE c.store_bytes END), 0)"
	" FROM teams t CROSS JOIN (VALUES ('local'), ('object_store')) s(tier)"
	" LEFT JOIN jobs j ON j.team_id = t.id"
	" LEFT JOIN job_checkpoint_storage c ON c.job_id = j.id"
	" GROUP BY 1, 2 ORDER BY 1, 2";

static const char *const gauge_sql[API_GAUGES_COUNT] = {
	[API_GAUGES_JOBS] = jobs_sql,
	[API_GAUGES_QUEUE] = queue_sql,
	[API_GAUGES_TEAMS] = teams_sql,
	[API_GAUGES_IDLE] = idle_sql,
	[API_GAUGES_NODES] = nodes_sql,
	[API_GAUGES_OUTBOX] = outbox_sql,
	[API_GAUGES_STORAGE] = storage_sql,
};

int api_store_gauge_rows(struct api_rows *rows, struct ty_pg *pg, struct ty_arena *a,
			 enum api_gauge_query q, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc = 0;

	memset(rows, 0, sizeof(*rows));
	if ((rc = ty_pg_exec(&res, pg, gauge_sql[q], 0, NULL, err)))
		return rc;
	rows->n = PQntuples(res);
	rows->ncols = PQnfields(res);
	if (rows->n > 0 &&
	    !(rows->v = ty_arena_alloc(a, (size_t)rows->n * (size_t)rows->ncols * sizeof(char *))))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; !rc && i < rows->n; i++)
		for (int c = 0; !rc && c < rows->ncols; c++) {
			const char *v = PQgetvalue(res, i, c);

			if (!(rows->v[i * rows->ncols + c] = ty_arena_strdup(a, v)))
				rc = ty_err_set(err, TY_ENOMEM, NULL);
		}
	if (rc)
		memset(rows, 0, sizeof(*rows));
	PQclear(res);
	return rc;
}
