/*
 * Spot notices' rows (spot.c): a node put in or taken out of preempting,
 * the gangs with a rank on it, and the kill deadline of those already
 * being preempted.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a repeated notice (same deadline) changes nothing; a new one replaces it */
static const char SQL_NOTICE[] =
    "UPDATE nodes SET state = 'preempting',"
    " preempt_deadline = to_timestamp($2::bigint / 1000.0),"
    " preempt_notice = $3::jsonb,"
    /* the first message that carried this notice (a lost node's is stale) */
    " preempt_seq = CASE WHEN state = 'preempting'"
    "  THEN least(coalesce(preempt_seq, $4::bigint), $4::bigint) ELSE $4::bigint END"
    " WHERE id = $1 AND state <> 'lost' AND (state <> 'preempting'"
    "  OR preempt_deadline IS DISTINCT FROM to_timestamp($2::bigint / 1000.0)"
    "  OR preempt_seq IS NULL)"
    " RETURNING 1";
/* attempts already being preempted (reclaim) are killed by the deadline too */
static const char SQL_KILL_BY[] =
    "UPDATE attempts t SET kill_at = greatest(now(),"
    " n.preempt_deadline - $2::int * interval '1 second')"
    " FROM nodes n, allocations a WHERE n.id = $1"
    " AND n.state = 'preempting' AND a.node_id = n.id"
    " AND a.job_id = t.job_id AND a.attempt = t.attempt"
    " AND a.exited_at IS NULL AND t.state = 'stopping'"
    " AND t.failure_class = 'preempted'"
    " AND t.kill_at > n.preempt_deadline - $2::int * interval '1 second'";
static const char SQL_GANGS[] =
    "SELECT DISTINCT t.job_id, t.attempt,"
    " (extract(epoch FROM n.preempt_deadline) * 1000)::bigint,"
    " coalesce(n.preempt_notice->>'provider', 'unknown'),"
    " greatest(0, ceil(extract(epoch FROM n.preempt_deadline - now())))::bigint"
    " FROM nodes n JOIN allocations a ON a.node_id = n.id"
    " JOIN attempts t ON t.job_id = a.job_id AND t.attempt = a.attempt"
    " WHERE n.id = $1 AND n.state = 'preempting' AND a.released_at IS NULL"
    " AND a.exited_at IS NULL AND t.state IN ('scheduled', 'starting', 'running')"
    " ORDER BY 1, 2";
static const char SQL_CLEAR[] =
    "UPDATE nodes n SET state = CASE WHEN n.drain_reason IS NULL"
    "  THEN 'ready' WHEN EXISTS (SELECT 1 FROM allocations a"
    "  WHERE a.node_id = n.id AND a.released_at IS NULL)"
    "  THEN 'draining' ELSE 'drained' END,"
    " preempt_deadline = NULL, preempt_notice = NULL, preempt_seq = NULL"
    " WHERE n.id = $1 AND n.state = 'preempting' RETURNING n.state";
static const char SQL_PREEMPTING[] =
    "SELECT n.id FROM nodes n WHERE n.state = 'preempting'"
    " AND EXISTS (SELECT 1 FROM allocations a JOIN attempts t"
    "  ON t.job_id = a.job_id AND t.attempt = a.attempt"
    "  WHERE a.node_id = n.id AND a.released_at IS NULL"
    "  AND a.exited_at IS NULL"
    "  AND t.state IN ('scheduled', 'starting', 'running'))"
    " ORDER BY n.id";

int sched_store_spot_notice(bool *changed, struct ty_pg *pg, const char *node,
			    int64_t deadline_ms, const char *notice, int64_t seq,
			    struct ty_err *err)
{
	char db[24], sb[24];
	const char *p[] = {node, sched_i64(db, deadline_ms), notice, sched_i64(sb, seq)};
	PGresult *res = NULL;
	int rc;

	*changed = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_NOTICE, 4, p, err)))
		return rc;
	*changed = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

int sched_store_spot_kill_by(struct ty_pg *pg, const char *node, int margin_s,
			     struct ty_err *err)
{
	char mb[24];
	const char *p[] = {node, sched_i64(mb, margin_s)};

	return ty_pg_exec(NULL, pg, SQL_KILL_BY, 2, p, err);
}

void sched_store_spot_gangs_free(struct sched_store_spot_gang *v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i].provider);
	free(v);
}

int sched_store_spot_gangs(struct sched_store_spot_gang **out, int *nout, struct ty_pg *pg,
			   const char *node, struct ty_err *err)
{
	const char *p[] = {node};
	struct sched_store_spot_gang *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_GANGS, 1, p, err)))
		return rc;
	n = PQntuples(res);
	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		v[i].job = sched_col_i64(res, i, 0);
		v[i].attempt = sched_col_i64(res, i, 1);
		v[i].deadline_ms = sched_col_i64(res, i, 2);
		v[i].left_s = sched_col_i64(res, i, 4);
		if (!(v[i].provider = strdup(PQgetvalue(res, i, 3)))) {
			PQclear(res);
			sched_store_spot_gangs_free(v, n);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_spot_clear(char *state, size_t len, struct ty_pg *pg, const char *node,
			   struct ty_err *err)
{
	const char *p[] = {node};
	PGresult *res = NULL;
	int rc;

	state[0] = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_CLEAR, 1, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		snprintf(state, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

int sched_store_spot_preempting(struct sched_store_nodes *out, struct ty_pg *pg,
				struct ty_err *err)
{
	PGresult *res = NULL;
	int rc, rows;

	out->v = NULL;
	out->n = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_PREEMPTING, 0, NULL, err)))
		return rc;
	rows = PQntuples(res);
	if (rows && !(out->v = calloc((size_t)rows, sizeof(*out->v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < rows; i++) {
		if (!(out->v[i] = strdup(PQgetvalue(res, i, 0)))) {
			PQclear(res);
			sched_store_nodes_free(out);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		out->n++;
	}
	PQclear(res);
	return 0;
}
