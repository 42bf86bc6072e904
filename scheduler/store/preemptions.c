/*
 * What the preemption protocol reads (preempt.c): the nodes of an attempt
 * that get its checkpoint signal. Its state changes are in lifecycle.c.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

static const char SQL_CHECKPOINT_NODES[] =
    "SELECT a.node_id FROM allocations a JOIN nodes n"
    " ON n.id = a.node_id WHERE a.job_id = $1 AND a.attempt = $2"
    " AND a.exited_at IS NULL AND n.state <> 'lost'"
    " ORDER BY a.node_rank";

int sched_store_checkpoint_nodes(char ***out, int *nout, struct ty_pg *pg, int64_t job,
				 int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	char **v = NULL;
	int rc, rows = 0;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_CHECKPOINT_NODES, 2, p, err)))
		return rc;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++)
		if (!(v[i] = strdup(PQgetvalue(res, i, 0)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	*out = v;
	*nout = rows;
	v = NULL;
out:
	sched_store_strs_free(v, rows);
	PQclear(res);
	return rc;
}
