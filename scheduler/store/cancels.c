/*
 * The jobs whose cancel (or stop) was requested and that the scheduler
 * still has to end or stop (place.c's cancel pass). The state changes are
 * in lifecycle.c.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>

static const char SQL_CANCELS[] =
    "SELECT j.id, j.attempt, j.state, j.stop_requested"
    " FROM jobs j LEFT JOIN attempts t"
    " ON t.job_id = j.id AND t.attempt = j.attempt"
    " WHERE j.cancel_requested"
    " AND j.state IN ('pending', 'scheduled', 'starting', 'running',"
    "  'preempting')" /* the partial index jobs_cancel_unfinished */
    " AND (j.state = 'pending'"
    " OR (j.state IN ('scheduled', 'starting', 'running', 'preempting')"
    " AND t.state IN ('scheduled', 'starting', 'running')))"
    " ORDER BY j.id";

int sched_store_cancels(struct sched_store_cancel **out, int *nout, struct ty_pg *pg,
			struct ty_err *err)
{
	struct sched_store_cancel *v = NULL;
	PGresult *res = NULL;
	int rc, rows;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_CANCELS, 0, NULL, err)))
		return rc;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		v[i].job = sched_col_i64(res, i, 0);
		v[i].attempt = sched_col_i64(res, i, 1);
		snprintf(v[i].state, sizeof(v[i].state), "%s", PQgetvalue(res, i, 2));
		v[i].stop = PQgetvalue(res, i, 3)[0] == 't';
	}
	*out = v;
	*nout = rows;
out:
	PQclear(res);
	return rc;
}
