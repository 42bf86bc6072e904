/*
 * attempt_exited's plain success (exit 0, no failure class) written
 * set-based: the nodes' parts marked exited and released, then the attempts
 * whose every node has exited 0 and their jobs to succeeded, one statement
 * each whatever the number of exits. apply.c's sched_apply_exits calls them.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* The attempt states whose exits the set-based path settles as sched_settle_attempt would. */
#define PLAIN_STATE                                                                                \
	"(t.state IN ('scheduled', 'starting', 'running')"                                         \
	" OR (t.state = 'stopping' AND t.failure_class IS DISTINCT FROM 'preempted'))"

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
    " t AS (SELECT t.job_id, t.attempt, " PLAIN_STATE " AND NOT EXISTS (SELECT 1"
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

/*
 * Of the attempts given, those whose every node has now exited 0 and that
 * are still plain: to succeeded (a stopping one "finished before it was
 * stopped"), their jobs too while the attempt is the job's current one and
 * the job holds nodes. Rows back: job, attempt, nodes, whether it was
 * stopping, whether the job moved.
 */
static const char SQL_EXITS_SETTLE[] =
    "WITH k AS (SELECT DISTINCT * FROM unnest($1::bigint[], $2::integer[]) AS k(job, attempt)),"
    " g AS (SELECT t.job_id, t.attempt, t.state = 'stopping' AS stopping, c.total"
    "  FROM attempts t JOIN k ON t.job_id = k.job AND t.attempt = k.attempt,"
    "  LATERAL (SELECT count(*) AS total, count(*) FILTER (WHERE a.exited_at IS NULL) AS live,"
    "   count(*) FILTER (WHERE a.exit_code IS DISTINCT FROM 0"
    "   OR a.failure_class IS NOT NULL) AS bad"
    "   FROM allocations a WHERE a.job_id = t.job_id AND a.attempt = t.attempt) c"
    "  WHERE c.live = 0 AND c.bad = 0 AND " PLAIN_STATE "),"
    " t AS (UPDATE attempts t SET state = 'succeeded', ended_at = now(), exit_code = 0,"
    "  failure_class = NULL, message = CASE WHEN g.stopping THEN '" SCHED_FINISHED_FIRST "' END"
    "  FROM g WHERE t.job_id = g.job_id AND t.attempt = g.attempt RETURNING t.job_id),"
    " j AS (UPDATE jobs SET state = 'succeeded', finished_at = now() FROM g"
    "  WHERE jobs.id = g.job_id AND jobs.attempt = g.attempt"
    "  AND jobs.state IN ('scheduled', 'starting', 'running', 'preempting') RETURNING jobs.id)"
    " SELECT g.job_id, g.attempt, g.total, g.stopping, g.job_id IN (SELECT id FROM j)"
    " FROM g ORDER BY g.job_id, g.attempt";

static int add_i64(struct ty_buf *b, int64_t v)
{
	char buf[24];

	return sched_store__arr_add(b, sched_i64(buf, v));
}

int sched_store_exits_mark(enum sched_store_exit_fate *fate, struct sched *s,
			   const struct sched_store_exit *v, int n, struct ty_err *err)
{
	struct ty_buf b[3] = {0};
	PGresult *res = NULL;
	int rc = 0;

	for (int i = 0; i < n; i++)
		fate[i] = SCHED_EXIT_NONE;
	for (int i = 0; i < n && !rc; i++)
		if (add_i64(&b[0], v[i].job) || add_i64(&b[1], v[i].attempt) ||
		    sched_store__arr_add(&b[2], v[i].node))
			rc = TY_ENOMEM;
	for (int i = 0; i < 3 && !rc; i++)
		rc = sched_store__arr_end(&b[i]);
	if (rc) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {b[0].data, b[1].data, b[2].data};

	if ((rc = ty_pg_exec(&res, s->pg, SQL_EXITS_MARK, 3, p, err)))
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

int sched_store_exits_settle(struct sched_store_ended **out, int *nout, struct sched *s,
			     const struct sched_store_exit *v, int n, struct ty_err *err)
{
	struct ty_buf b[2] = {0};
	struct sched_store_ended *e = NULL;
	PGresult *res = NULL;
	int rc = 0, ne;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n && !rc; i++)
		if (add_i64(&b[0], v[i].job) || add_i64(&b[1], v[i].attempt))
			rc = TY_ENOMEM;
	for (int i = 0; i < 2 && !rc; i++)
		rc = sched_store__arr_end(&b[i]);
	if (rc) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {b[0].data, b[1].data};

	if ((rc = ty_pg_exec(&res, s->pg, SQL_EXITS_SETTLE, 2, p, err)))
		goto out;
	if ((ne = PQntuples(res)) == 0)
		goto out;
	if (!(e = calloc((size_t)ne, sizeof(*e)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int r = 0; r < ne; r++)
		e[r] = (struct sched_store_ended){
		    .job = sched_col_i64(res, r, 0),
		    .attempt = sched_col_i64(res, r, 1),
		    .nodes = sched_col_i64(res, r, 2),
		    .stopping = !strcmp(PQgetvalue(res, r, 3), "t"),
		    .moved = !strcmp(PQgetvalue(res, r, 4), "t"),
		};
	*out = e;
	*nout = ne;
out:
	PQclear(res);
	for (int i = 0; i < 2; i++)
		ty_buf_free(&b[i]);
	return rc;
}
