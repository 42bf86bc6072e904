/*
 * Start-time estimates' reads (place.c): the runtime history of the jobs a
 * cycle estimates (migration 0035's runtime_history), one statement
 * whatever their number. The estimates go out with the queue publish
 * (queue_publish.c).
 */
#include "scheduler.h"

#include <stdlib.h>

/* the 80th percentile of the last successful runtimes of the job's team and name */
static const char SQL_RUNTIMES[] =
    "SELECT j.id, h.p80_seconds FROM jobs j"
    " JOIN runtime_history h ON h.team_id = j.team_id AND h.name = j.name"
    " WHERE j.id = ANY($1::bigint[])";

int sched_store_runtimes(int64_t *secs, struct ty_pg *pg, const int64_t *jobs, int n,
			 struct ty_err *err)
{
	struct ty_buf b = {0};
	PGresult *res = NULL;
	int rc = 0, rows;

	for (int i = 0; i < n; i++)
		secs[i] = 0;
	if (n <= 0)
		return 0;
	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_i64(&b, jobs[i]);
	if (rc || (rc = sched_store__arr_end(&b))) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {b.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_RUNTIMES, 1, p, err)))
		goto out;
	rows = PQntuples(res);
	/* jobs[] is sorted by the caller: look each row's job up */
	for (int r = 0; r < rows; r++) {
		int64_t id = sched_col_i64(res, r, 0);
		int lo = 0, hi = n - 1;

		while (lo <= hi) {
			int mid = lo + (hi - lo) / 2;

			if (jobs[mid] == id) {
				secs[mid] = sched_col_i64(res, r, 1);
				break;
			}
			if (jobs[mid] < id)
				lo = mid + 1;
			else
				hi = mid - 1;
		}
	}
out:
	PQclear(res);
	ty_buf_free(&b);
	return rc;
}
