/*
 * Start-time estimates' rows (place.c): the runtime history of the jobs a
 * cycle estimates (migration 0035's runtime_history) and the publish of
 * estimates, one statement each whatever the number of rows.
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

/*
 * Locked in id order, like the queue publish (queue_publish.c says why);
 * only rows whose estimate changed are locked and written.
 */
static const char SQL_ESTIMATES[] =
    "WITH u AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS u(id bigint, at bigint,"
    "  basis jsonb)),"
    " l AS (SELECT j.id FROM jobs j JOIN u ON u.id = j.id WHERE j.state = 'pending'"
    "  AND (j.estimated_start IS DISTINCT FROM to_timestamp(u.at / 1000.0)"
    "   OR j.estimate_basis IS DISTINCT FROM u.basis)"
    "  ORDER BY j.id FOR UPDATE OF j)"
    " UPDATE jobs j SET estimated_start = to_timestamp(u.at / 1000.0),"
    " estimate_basis = u.basis"
    " FROM u, l WHERE j.id = u.id AND l.id = j.id AND j.state = 'pending'";

int sched_store_estimates_publish(struct ty_pg *pg, const struct sched_store_estimate_row *v,
				  int n, struct ty_err *err)
{
	json_t *rows;
	char *text;
	int rc;

	if (n == 0)
		return 0;
	if (!(rows = json_array()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++)
		if (json_array_append_new(
			rows, json_pack("{s:I, s:o, s:O}", "id", (json_int_t)v[i].job, "at",
					v[i].start_ms >= 0 ? json_integer(v[i].start_ms)
							   : json_null(),
					"basis", v[i].basis ? v[i].basis : json_null()))) {
			json_decref(rows);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	text = json_dumps(rows, JSON_COMPACT);
	json_decref(rows);
	if (!text)
		return ty_err_set(err, TY_ENOMEM, NULL);
	const char *p[] = {text};

	rc = ty_pg_exec(NULL, pg, SQL_ESTIMATES, 1, p, err);
	free(text);
	return rc;
}
