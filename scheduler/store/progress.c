/*
 * Training progress's rows (progress.c): each node's ranks kept with its
 * allocation, the gang's other nodes read back, straggler verdicts.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The live attempt's nodes that reported progress, as one JSON array
 * [{node, progress}], and the job's state; no row when the attempt is not
 * the job's current one or not running, or node holds no live part of it.
 */
static const char SQL_GANG[] =
    "SELECT coalesce((SELECT json_agg(json_build_object('node', o.node_id,"
    "  'progress', o.progress)) FROM allocations o WHERE o.job_id = t.job_id"
    "  AND o.attempt = t.attempt AND o.released_at IS NULL"
    "  AND o.progress IS NOT NULL), '[]')::text, j.state,"
    " coalesce((t.straggler_shares->-1->>1)::float8, 0)"
    " FROM attempts t JOIN jobs j ON j.id = t.job_id AND j.attempt = t.attempt"
    " JOIN allocations a ON a.job_id = t.job_id AND a.attempt = t.attempt"
    "  AND a.node_id = $3 AND a.released_at IS NULL AND a.exited_at IS NULL"
    " WHERE t.job_id = $1 AND t.attempt = $2 AND t.state IN ('starting', 'running')";
static const char SQL_NODE[] =
    "UPDATE allocations SET progress = $4::jsonb WHERE job_id = $1"
    " AND attempt = $2 AND node_id = $3 AND released_at IS NULL";
static const char SQL_STRAGGLER[] =
    "UPDATE attempts SET stragglers = coalesce(stragglers, '[]'::jsonb)"
    " || jsonb_build_array($3::jsonb || jsonb_build_object('at', ty_ts(now())))"
    " WHERE job_id = $1 AND attempt = $2";
/* the ledger integrates these (ledger.c, sched_ledger_compute) */
static const char SQL_SHARE[] =
    "UPDATE attempts SET straggler_shares = coalesce(straggler_shares, '[]'::jsonb)"
    " || jsonb_build_array(jsonb_build_array((extract(epoch FROM now()) * 1000)::bigint,"
    " $3::float8))"
    " WHERE job_id = $1 AND attempt = $2"
    " AND coalesce(jsonb_array_length(straggler_shares), 0) < $4::integer";

int sched_store_progress_gang(char **gang, char **state, double *share, struct ty_pg *pg,
			      int64_t job, int64_t attempt, const char *node, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node};
	PGresult *res = NULL;
	int rc;

	*gang = *state = NULL;
	*share = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_GANG, 3, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		*share = strtod(PQgetvalue(res, 0, 2), NULL);
	if (PQntuples(res) == 1 && (!(*gang = strdup(PQgetvalue(res, 0, 0))) ||
				    !(*state = strdup(PQgetvalue(res, 0, 1))))) {
		free(*gang);
		*gang = NULL;
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	PQclear(res);
	return rc;
}

int sched_store_progress_node(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			      const char *progress, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node, progress};

	return ty_pg_exec(NULL, pg, SQL_NODE, 4, p, err);
}

int sched_store_straggler(struct ty_pg *pg, int64_t job, int64_t attempt, const char *verdict,
			  struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), verdict};

	return ty_pg_exec(NULL, pg, SQL_STRAGGLER, 3, p, err);
}

int sched_store_straggler_share(struct ty_pg *pg, int64_t job, int64_t attempt, double share,
				struct ty_err *err)
{
	char jb[24], ab[24], sb[40], nb[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), sb,
			   sched_i64(nb, SCHED_STORE_STRAGGLER_SHARES)};

	snprintf(sb, sizeof(sb), "%.17g", share < 0 ? 0 : share > 1 ? 1 : share);
	return ty_pg_exec(NULL, pg, SQL_SHARE, 4, p, err);
}
