/*
 * The SQL of a job's checkpoints table (migrations/0028) as a typed call
 * (store.h): newest first, with the one the next launch resumes from.
 */
#include "store.h"

/*
 * The next resume: the newest valid step, as the scheduler's launch picks
 * it; none once the job is terminal (no attempt will follow).
 */
static const char checkpoints_sql[] =
	"SELECT json_build_object('resume_step', r.step, 'items', coalesce((SELECT json_agg("
	" json_build_object('step', c.step, 'status', c.status, 'digest', c.digest,"
	"  'path', c.path, 'bytes', c.bytes, 'files', c.files, 'node', c.node_id,"
	"  'attempt', c.attempt, 'verified_at', ty_ts(c.verified_at), 'reason', c.reason,"
	"  'resume', c.step IS NOT DISTINCT FROM r.step)"
	" ORDER BY c.step DESC) FROM checkpoints c WHERE c.job_id = j.id), '[]'))::text"
	" FROM jobs j LEFT JOIN LATERAL (SELECT max(step) AS step FROM checkpoints v"
	"  WHERE v.job_id = j.id AND v.status = 'valid'"
	"  AND j.state NOT IN ('succeeded', 'failed', 'cancelled', 'stopped')) r ON true"
	" WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)";

int api_store_job_checkpoints(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const char *id, const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, checkpoints_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) > 0)
		rc = api__store_text(doc, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}
