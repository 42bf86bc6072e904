/*
 * Where a job's checkpoints are (job_checkpoint_storage, migrations/0030):
 * the bytes its node last reported locally and in the object store.
 */
#include "scheduler.h"

#include <string.h>

/* Only from a node the job had an allocation on; a figure < 0 is left as it was. */
static const char SQL_STORAGE[] =
    "INSERT INTO job_checkpoint_storage AS c (job_id, local_bytes, store_bytes)"
    " SELECT $1, greatest($2::bigint, 0), greatest($3::bigint, 0)"
    " WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1 AND a.node_id = $4)"
    " ON CONFLICT (job_id) DO UPDATE SET"
    " local_bytes = CASE WHEN $2::bigint >= 0 THEN $2::bigint ELSE c.local_bytes END,"
    " store_bytes = CASE WHEN $3::bigint >= 0 THEN $3::bigint ELSE c.store_bytes END,"
    " updated_at = now()";

int sched_store_checkpoint_storage(struct ty_pg *pg, int64_t job, const char *node,
				   int64_t local_bytes, int64_t store_bytes, struct ty_err *err)
{
	char jb[24], lb[24], sb[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(lb, local_bytes),
			   sched_i64(sb, store_bytes), node};

	return ty_pg_exec(NULL, pg, SQL_STORAGE, 4, p, err);
}

/*
 * The error of the last move (NULL: it worked), from a node the job had an
 * allocation on; the previous one and the job's state come back so the
 * caller can tell a failure that starts or ends from one that goes on.
 */
static const char SQL_TIER_ERROR[] =
    "WITH prev AS (SELECT c.tier_error FROM job_checkpoint_storage c WHERE c.job_id = $1),"
    " up AS (INSERT INTO job_checkpoint_storage AS c (job_id, tier_error)"
    "  SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM allocations a"
    "   WHERE a.job_id = $1 AND a.node_id = $3)"
    "  ON CONFLICT (job_id) DO UPDATE SET tier_error = $2, updated_at = now() RETURNING 1)"
    " SELECT j.state, (SELECT tier_error FROM prev) IS NOT NULL FROM jobs j"
    " WHERE j.id = $1 AND EXISTS (SELECT 1 FROM up)";

int sched_store_checkpoint_tier_error(bool *changed, char state[32], struct ty_pg *pg, int64_t job,
				      const char *node, const char *error, struct ty_err *err)
{
	char jb[24];
	const char *p[] = {sched_i64(jb, job), error, node};
	PGresult *res = NULL;
	int rc;

	*changed = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_TIER_ERROR, 3, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		snprintf(state, 32, "%s", PQgetvalue(res, 0, 0));
		*changed = !strcmp(PQgetvalue(res, 0, 1), "t") != !!error;
	}
	PQclear(res);
	return 0;
}
