/*
 * What a scheduling cycle reads beside the mirror (place.c): the database's
 * clock, and how many trials of each sweep run.
 */
#include "scheduler.h"

static const char SQL_NOW_MS[] = "SELECT (extract(epoch FROM now()) * 1000)::bigint";

int sched_store_now_ms(int64_t *now_ms, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	*now_ms = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_NOW_MS, 0, NULL, err)))
		return rc;
	*now_ms = sched_col_i64(res, 0, 0);
	PQclear(res);
	return 0;
}

static const char SQL_SWEEPS_ACTIVE[] =
    "SELECT sweep_id, count(*) FROM jobs WHERE sweep_id = ANY ($1::bigint[])"
    " AND state IN ('scheduled', 'starting', 'running', 'preempting')"
    " GROUP BY sweep_id";

int sched_store_sweeps_active(int *active, struct ty_pg *pg, const int64_t *sweeps, int n,
			      struct ty_err *err)
{
	struct ty_buf ids = TY_BUF_INIT;
	PGresult *res = NULL;
	char buf[24];
	int rc = 0;

	for (int i = 0; i < n; i++)
		active[i] = 0;
	if (n == 0)
		return 0;
	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(&ids, sched_i64(buf, sweeps[i]));
	if (rc || sched_store__arr_end(&ids)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {ids.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_SWEEPS_ACTIVE, 1, p, err)))
		goto out;
	for (int r = 0; r < PQntuples(res); r++)
		for (int k = 0; k < n; k++)
			if (sweeps[k] == sched_col_i64(res, r, 0))
				active[k] = (int)sched_col_i64(res, r, 1);
out:
	PQclear(res);
	ty_buf_free(&ids);
	return rc;
}
