/*
 * attempt_exited's plain success (exit 0, no failure class) written
 * set-based: the nodes' parts marked exited and released, one statement
 * whatever the number of exits. apply.c's sched_apply_exits calls it, then
 * lifecycle.c's sched_store_attempts_succeeded.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/*
 * Each exit's node part (the first report of it) exited 0 and released,
 * when its attempt is plain: active, or stopping but not preempted, and no
 * part of it ended other than by exiting 0. Rows back: the index of each
 * exit marked ('m'), and of each left to the per-message path ('d': its part
 * is live but its attempt is not plain); the rest changed nothing (a
 * redelivered exit, or a node with no part in the attempt).
 */
static const char SQL_EXITS_MARK[] =
    "WITH m AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[])"
    "  WITH ORDINALITY AS m(job, attempt, node, ord)),"
    " x AS (SELECT DISTINCT ON (job, attempt, node) * FROM m ORDER BY job, attempt, node, ord),"
    " t AS (SELECT t.job_id, t.attempt, " SCHED_STORE_PLAIN_STATE " AND NOT EXISTS (SELECT 1"
    "  FROM allocations b WHERE b.job_id = t.job_id AND b.attempt = t.attempt"
    "  AND b.exited_at IS NOT NULL"
    "  AND (b.exit_code IS DISTINCT FROM 0 OR b.failure_class IS NOT NULL)) AS plain"
    "  FROM attempts t WHERE (t.job_id, t.attempt) IN (SELECT job, attempt FROM x)),"
    " u AS (UPDATE allocations a SET exited_at = now(), exit_code = 0, failure_class = NULL,"
    "  released_at = coalesce(a.released_at, now())"
    "  FROM x JOIN t ON t.job_id = x.job AND t.attempt = x.attempt AND t.plain"
    "  WHERE a.job_id = x.job AND a.attempt = x.attempt AND a.node_id = x.node"
    "  AND a.exited_at IS NULL RETURNING x.ord)"
    " SELECT ord - 1, 'm' FROM u"
    " UNION ALL SELECT m.ord - 1, 'd' FROM m"
    "  JOIN t ON t.job_id = m.job AND t.attempt = m.attempt AND NOT t.plain"
    "  JOIN allocations a ON a.job_id = m.job AND a.attempt = m.attempt AND a.node_id = m.node"
    "  AND a.exited_at IS NULL";

int sched_store_exits_mark(enum sched_store_exit_fate *fate, struct ty_pg *pg,
			   const struct sched_store_exit *v, int n, struct ty_err *err)
{
	struct ty_buf b[3] = {0};
	PGresult *res = NULL;
	int rc = 0;

	for (int i = 0; i < n; i++)
		fate[i] = SCHED_EXIT_NONE;
	for (int i = 0; i < n && !rc; i++)
		if (sched_store__arr_i64(&b[0], v[i].job) || sched_store__arr_i64(&b[1], v[i].attempt) ||
		    sched_store__arr_add(&b[2], v[i].node))
			rc = TY_ENOMEM;
	for (int i = 0; i < 3 && !rc; i++)
		rc = sched_store__arr_end(&b[i]);
	if (rc) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {b[0].data, b[1].data, b[2].data};

	if ((rc = ty_pg_exec(&res, pg, SQL_EXITS_MARK, 3, p, err)))
		goto out;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t i = sched_col_i64(res, r, 0);

		if (i >= 0 && i < n)
			fate[i] =
			    PQgetvalue(res, r, 1)[0] == 'm' ? SCHED_EXIT_MARKED : SCHED_EXIT_DEFER;
	}
out:
	PQclear(res);
	for (int i = 0; i < 3; i++)
		ty_buf_free(&b[i]);
	return rc;
}
