/*
 * Usage accrual's rows (usage.c): the GPU spans that ended since a time,
 * from the ledger or, for attempts not in it yet, from their allocations,
 * and the infrastructure's losses of the ledger rows (refunded).
 */
#include "scheduler.h"

#include <stdlib.h>

/*
 * An attempt is either in the ledger (all of its rows, written at once,
 * once every node released) or accrues from its allocations, never both.
 */
static const char SQL_SPANS[] =
    "SELECT l.team_id, l.gpus,"
    " (extract(epoch FROM l.started_at) * 1000)::bigint,"
    " (extract(epoch FROM l.ended_at) * 1000)::bigint, coalesce(l.lost_infra_gpu_ms, 0)"
    " FROM usage_ledger l"
    " WHERE l.ended_at > to_timestamp($1::bigint / 1000.0)"
    " UNION ALL"
    " SELECT j.team_id, cardinality(a.gpus),"
    " (extract(epoch FROM t.created_at) * 1000)::bigint,"
    " (extract(epoch FROM a.released_at) * 1000)::bigint, 0::bigint"
    " FROM allocations a JOIN attempts t USING (job_id, attempt)"
    " JOIN jobs j ON j.id = a.job_id"
    " WHERE a.released_at > to_timestamp($1::bigint / 1000.0)"
    " AND NOT EXISTS (SELECT 1 FROM usage_ledger l"
    "  WHERE l.job_id = a.job_id AND l.attempt = a.attempt)";

int sched_store_usage_spans(struct sched_store_span **out, int *nout, struct ty_pg *pg,
			    int64_t from_ms, struct ty_err *err)
{
	char fb[24];
	const char *p[] = {sched_i64(fb, from_ms)};
	struct sched_store_span *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_SPANS, 1, p, err)))
		return rc;
	n = PQntuples(res);
	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++) {
		v[r].team = sched_col_i64(res, r, 0);
		v[r].gpus = sched_col_i64(res, r, 1);
		v[r].start_ms = sched_col_i64(res, r, 2);
		v[r].end_ms = sched_col_i64(res, r, 3);
		v[r].lost_infra_gpu_ms = sched_col_i64(res, r, 4);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}
