/*
 * GPU telemetry's rows (telemetry.c): each node's report of an attempt kept
 * with its allocation, the attempt's combination, and the idle alerts a
 * batch of heartbeats raises.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* the first report of the node is kept: a redelivered one changes nothing */
static const char SQL_NODE[] =
    "UPDATE allocations SET telemetry = $4::jsonb WHERE job_id = $1"
    " AND attempt = $2 AND node_id = $3 AND telemetry IS NULL"
    " RETURNING 1";
static const char SQL_NODES[] =
    "SELECT telemetry::text, cardinality(gpus) FROM allocations"
    " WHERE job_id = $1 AND attempt = $2 AND telemetry IS NOT NULL"
    " ORDER BY node_rank";
static const char SQL_ATTEMPT[] = "UPDATE attempts SET gpu_telemetry = $3::jsonb"
				  " WHERE job_id = $1 AND attempt = $2";
/*
 * The newest heartbeat of each node; its attempts idle at least their
 * team's limit, still live on the node, whose idle stretch began after
 * the attempt's last gpus_idle event (now − idle_seconds: the stretch's
 * start on the scheduler's clock); one node per attempt (the longest).
 */
static const char SQL_IDLE[] =
    "WITH h AS (SELECT DISTINCT ON (node) node, running FROM jsonb_to_recordset($1::jsonb)"
    "  AS h(node text, ord integer, running jsonb) ORDER BY node, ord DESC),"
    " c AS (SELECT h.node, r.* FROM h, jsonb_to_recordset(h.running)"
    "  AS r(job bigint, attempt integer, idle_seconds float8, gpu_util float8)),"
    " k AS (SELECT c.*, tm.idle_gpu_alert_seconds AS lim, j.state,"
    "  cardinality(a.gpus) AS gpus FROM c"
    "  JOIN jobs j ON j.id = c.job AND j.attempt = c.attempt"
    "  JOIN teams tm ON tm.id = j.team_id"
    "  JOIN attempts t ON t.job_id = c.job AND t.attempt = c.attempt"
    "  JOIN allocations a ON a.job_id = c.job AND a.attempt = c.attempt"
    "   AND a.node_id = c.node"
    "  WHERE c.idle_seconds >= tm.idle_gpu_alert_seconds"
    "  AND t.state IN ('starting', 'running') AND a.exited_at IS NULL"
    "  AND a.released_at IS NULL AND (t.idle_alert_at IS NULL"
    "   OR t.idle_alert_at < now() - make_interval(secs => c.idle_seconds))),"
    " x AS (SELECT DISTINCT ON (job, attempt) * FROM k"
    "  ORDER BY job, attempt, idle_seconds DESC, node)"
    " UPDATE attempts t SET idle_alert_at = now() FROM x"
    " WHERE t.job_id = x.job AND t.attempt = x.attempt"
    " RETURNING x.job, x.attempt, x.node, x.idle_seconds, x.gpu_util, x.gpus, x.lim,"
    " x.state";

int sched_store_telemetry_node(bool *first, struct ty_pg *pg, int64_t job, int64_t attempt,
			       const char *node, const char *telemetry, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node, telemetry};
	PGresult *res = NULL;
	int rc;

	*first = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_NODE, 4, p, err)))
		return rc;
	*first = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

void sched_store_telemetry_free(struct sched_store_telemetry *v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i].telemetry);
	free(v);
}

int sched_store_telemetry_nodes(struct sched_store_telemetry **out, int *nout, struct ty_pg *pg,
				int64_t job, int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	struct sched_store_telemetry *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_NODES, 2, p, err)))
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		v[i].gpus = (int)sched_col_i64(res, i, 1);
		if (!(v[i].telemetry = strdup(PQgetvalue(res, i, 0)))) {
			PQclear(res);
			sched_store_telemetry_free(v, n);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_telemetry_attempt(struct ty_pg *pg, int64_t job, int64_t attempt,
				  const char *telemetry, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), telemetry};

	return ty_pg_exec(NULL, pg, SQL_ATTEMPT, 3, p, err);
}

void sched_store_idle_free(struct sched_store_idle *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].state);
	}
	free(v);
}

int sched_store_idle_alerts(struct sched_store_idle **out, int *nout, struct ty_pg *pg,
			    const char *beats, struct ty_err *err)
{
	const char *p[] = {beats};
	struct sched_store_idle *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_IDLE, 1, p, err)))
		return rc;
	n = PQntuples(res);
	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct sched_store_idle *x = &v[i];

		x->job = sched_col_i64(res, i, 0);
		x->attempt = sched_col_i64(res, i, 1);
		x->idle_seconds = strtod(PQgetvalue(res, i, 3), NULL);
		x->has_util = !PQgetisnull(res, i, 4);
		x->util = x->has_util ? strtod(PQgetvalue(res, i, 4), NULL) : 0;
		x->gpus = sched_col_i64(res, i, 5);
		x->limit_s = sched_col_i64(res, i, 6);
		if (!(x->node = strdup(PQgetvalue(res, i, 2))) ||
		    !(x->state = strdup(PQgetvalue(res, i, 7)))) {
			PQclear(res);
			sched_store_idle_free(v, n);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}
