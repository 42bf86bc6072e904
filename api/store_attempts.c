/*
 * The SQL of a job's attempts as typed calls (store.h): the attempts
 * document (with their allocations and ranks) and where a rank's log is.
 */
#include "store.h"

static const char attempts_sql[] =
	"SELECT json_build_object('items', coalesce((SELECT json_agg("
	" json_build_object('attempt', t.attempt, 'state', t.state,"
	"  'master_addr', t.master_addr, 'master_port', t.master_port,"
	"  'nnodes', t.nnodes, 'world_size', t.world_size,"
	"  'exit_code', t.exit_code, 'failure_class', t.failure_class,"
	"  'message', ty_redact_jobs(t.message, $2::bigint),"
	"  'evidence', t.evidence, 'blamed_node', t.blamed_node,"
	"  'spot_node', t.spot_node,"
	"  'resume', CASE WHEN t.resume_skipped IS NOT NULL THEN json_build_object("
	"   'path', t.resume_from, 'step', t.resume_step,"
	"   'skipped', t.resume_skipped) END,"
	"  'duration_seconds', round(extract(epoch FROM"
	"   coalesce(t.ended_at, now()) - t.created_at)::numeric, 3)::float8,"
	"  'created_at', ty_ts(t.created_at),"
	"  'running_at', ty_ts(t.running_at), 'ended_at', ty_ts(t.ended_at),"
	"  'gpu_telemetry', t.gpu_telemetry,"
	"  'progress', (SELECT json_agg((e - 'below') || jsonb_build_object('node', p.node_id)"
	"    ORDER BY (e->>'rank')::int) FROM allocations p,"
	"    jsonb_array_elements(p.progress) e"
	"    WHERE p.job_id = t.job_id AND p.attempt = t.attempt AND p.progress IS NOT NULL),"
	"  'stragglers', t.stragglers,"
	"  'nodes', (SELECT coalesce(json_agg(json_build_object('node', a.node_id,"
	"    'node_rank', a.node_rank, 'gpus', a.gpus, 'exit_code', a.exit_code,"
	"    'failure_class', a.failure_class, 'gpu_telemetry', a.telemetry)"
	"    ORDER BY a.node_rank), '[]')"
	"    FROM allocations a WHERE a.job_id = t.job_id AND a.attempt = t.attempt),"
	"  'ranks', (SELECT coalesce(json_agg(json_build_object('rank', k.rank,"
	"    'node', k.node_id, 'local_rank', k.local_rank, 'pid', k.pid,"
	"    'exit_code', k.exit_code, 'signal', k.signal) ORDER BY k.rank), '[]')"
	"    FROM ranks k WHERE k.job_id = t.job_id AND k.attempt = t.attempt))"
	" ORDER BY t.attempt) FROM attempts t WHERE t.job_id = j.id), '[]'))::text"
	" FROM jobs j WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)";

int api_store_job_attempts(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			   const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, attempts_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) > 0)
		rc = api__store_text(doc, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

static const char log_where_sql[] =
	"SELECT j.id, t.attempt, n.log_url, k.rank IS NOT NULL, k.node_id"
	" FROM jobs j"
	" LEFT JOIN attempts t ON t.job_id = j.id"
	"  AND t.attempt = coalesce($4::int, j.attempt)"
	" LEFT JOIN ranks k ON k.job_id = j.id AND k.attempt = t.attempt"
	"  AND k.rank = $3::int"
	" LEFT JOIN nodes n ON n.id = k.node_id"
	" WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)";

int api_store_log_where(struct api_log_where *w, struct ty_pg *pg, struct ty_arena *a,
			const char *id, const char *scope, const char *rank, const char *attempt,
			struct ty_err *err)
{
	const char *p[4] = {id, scope, rank, attempt};
	PGresult *res = NULL;
	int rc;

	*w = (struct api_log_where){0};
	if ((rc = ty_pg_exec(&res, pg, log_where_sql, 4, p, err)))
		return rc;
	if (PQntuples(res) > 0) {
		w->job = true;
		w->rank = PQgetvalue(res, 0, 3)[0] == 't';
		if ((rc = api__store_text(&w->attempt, a, res, 0, 1, err)) ||
		    (rc = api__store_text(&w->log_url, a, res, 0, 2, err)) ||
		    (rc = api__store_text(&w->node, a, res, 0, 4, err)))
			w->rank = false;
	}
	PQclear(res);
	return rc;
}
