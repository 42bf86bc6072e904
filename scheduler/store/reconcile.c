/*
 * Reconciliation's reads and marks (reconcile.c): launches a node has not
 * acknowledged, attempts a node runs that are over or unknown, parts that
 * never started released, and when a launch or kill was last sent.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

static const char SQL_RELAY_BEHIND[] =
    "SELECT 1 FROM dispatch_outbox WHERE id = (SELECT min(id)"
    " FROM dispatch_outbox) AND created_at < now() - $1::integer"
    " * interval '1 millisecond'";
static const char SQL_UNACKED[] =
    "SELECT a.job_id, a.attempt, a.node_id, a.node_rank, a.first_rank,"
    " array_to_json(a.gpus), t.launch, n.boot_id"
    " FROM allocations a JOIN attempts t USING (job_id, attempt)"
    " JOIN nodes n ON n.id = a.node_id"
    " WHERE a.exited_at IS NULL"
    " AND t.state IN ('scheduled', 'starting', 'running')"
    " AND a.accepted_at IS NULL"
    " AND n.state <> 'lost' AND n.last_heartbeat > a.launched_at"
    " AND a.launched_at < now() - $1::integer * interval '1 millisecond'"
    " ORDER BY a.job_id, a.attempt, a.node_rank";
static const char SQL_LAUNCHED[] = "UPDATE allocations SET launched_at = now() WHERE job_id = $1"
				   " AND attempt = $2 AND node_id = $3";
static const char SQL_STRAYS[] =
    "SELECT n.id, r.job, r.attempt, a.job_id IS NOT NULL,"
    " coalesce(t.state = 'stopping' AND t.failure_class = 'preempted', false)"
    " FROM nodes n CROSS JOIN LATERAL"
    "  jsonb_to_recordset(n.running) AS r(job bigint, attempt integer)"
    " LEFT JOIN attempts t ON t.job_id = r.job AND t.attempt = r.attempt"
    " LEFT JOIN allocations a ON a.job_id = r.job"
    "  AND a.attempt = r.attempt AND a.node_id = n.id"
    " WHERE n.state <> 'lost' AND (a.job_id IS NULL"
    "  OR (t.state NOT IN ('scheduled', 'starting', 'running')"
    "   AND a.exit_code IS NULL"
    /* a preempted attempt runs through its checkpoint grace period, and the
     * first kill of its live parts is sched_preempt_kills()'s to send */
    "   AND (a.killed_at IS NULL AND NOT (t.state = 'stopping'"
    "     AND t.kill_at IS NOT NULL AND a.exited_at IS NULL)"
    "    OR (n.last_heartbeat > a.killed_at"
    "    AND a.killed_at < now() - $1::integer * interval '1 millisecond'))))"
    " ORDER BY n.id, r.job, r.attempt";
static const char SQL_KILLED[] = "UPDATE allocations SET killed_at = now() WHERE job_id = $1"
				 " AND attempt = $2 AND node_id = $3";
static const char SQL_RELEASE_UNSTARTED[] =
    "UPDATE allocations a SET exited_at = now(),"
    " failure_class = 'cancelled', released_at = now()"
    " FROM attempts t, nodes n"
    " WHERE t.job_id = a.job_id AND t.attempt = a.attempt"
    " AND n.id = a.node_id AND a.released_at IS NULL"
    " AND t.state NOT IN ('scheduled', 'starting', 'running')"
    " AND a.killed_at IS NOT NULL AND n.last_heartbeat > a.killed_at"
    " AND a.killed_at < now() - $1::integer * interval '1 millisecond'"
    " AND NOT n.running @> jsonb_build_array(jsonb_build_object("
    "  'job', a.job_id, 'attempt', a.attempt))"
    " RETURNING a.job_id, a.attempt, a.node_id";

static void dup_col(char **out, const PGresult *res, int r, int c, bool *oom)
{
	const char *v = ty_pg_val(res, r, c);

	if (v && !(*out = strdup(v)))
		*oom = true;
}

int sched_store_relay_behind(bool *behind, struct ty_pg *pg, int age_ms, struct ty_err *err)
{
	char ab[24];
	const char *p[] = {sched_i64(ab, age_ms)};
	PGresult *res = NULL;
	int rc;

	*behind = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_RELAY_BEHIND, 1, p, err)))
		return rc;
	*behind = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

void sched_store_unacked_free(struct sched_store_unacked *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].gpus);
		free(v[i].launch);
		free(v[i].boot_id);
	}
	free(v);
}

int sched_store_unacked(struct sched_store_unacked **out, int *nout, struct ty_pg *pg,
			int age_ms, struct ty_err *err)
{
	char ab[24];
	const char *p[] = {sched_i64(ab, age_ms)};
	struct sched_store_unacked *v = NULL;
	PGresult *res = NULL;
	bool oom = false;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_UNACKED, 1, p, err)))
		return rc;
	n = PQntuples(res);
	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n && !oom; i++) {
		v[i].job = sched_col_i64(res, i, 0);
		v[i].attempt = sched_col_i64(res, i, 1);
		v[i].node_rank = (int)sched_col_i64(res, i, 3);
		v[i].first_rank = (int)sched_col_i64(res, i, 4);
		dup_col(&v[i].node, res, i, 2, &oom);
		dup_col(&v[i].gpus, res, i, 5, &oom);
		dup_col(&v[i].launch, res, i, 6, &oom);
		dup_col(&v[i].boot_id, res, i, 7, &oom);
	}
	PQclear(res);
	if (oom) {
		sched_store_unacked_free(v, n);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_part_launched(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			      struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node};

	return ty_pg_exec(NULL, pg, SQL_LAUNCHED, 3, p, err);
}

int sched_store_part_killed(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			    struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node};

	return ty_pg_exec(NULL, pg, SQL_KILLED, 3, p, err);
}

void sched_store_parts_found_free(struct sched_store_part_found *v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i].node);
	free(v);
}

/*
 * Rows of job, attempt, node; or (strays) of node, job, attempt and the two
 * flags: res (which it clears) into a new array.
 */
static int parts_of(struct sched_store_part_found **out, int *nout, PGresult *res, bool strays,
		    struct ty_err *err)
{
	struct sched_store_part_found *v = NULL;
	bool oom = false;
	int n = PQntuples(res);

	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n && !oom; i++) {
		int jc = strays ? 1 : 0, nc = strays ? 0 : 2;

		v[i].job = sched_col_i64(res, i, jc);
		v[i].attempt = sched_col_i64(res, i, jc + 1);
		dup_col(&v[i].node, res, i, nc, &oom);
		if (strays) {
			v[i].allocated = !strcmp(PQgetvalue(res, i, 3), "t");
			v[i].preempted = !strcmp(PQgetvalue(res, i, 4), "t");
		}
	}
	PQclear(res);
	if (oom) {
		sched_store_parts_found_free(v, n);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_strays(struct sched_store_part_found **out, int *nout, struct ty_pg *pg, int age_ms,
		       struct ty_err *err)
{
	char ab[24];
	const char *p[] = {sched_i64(ab, age_ms)};
	PGresult *res = NULL;
	int rc;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_STRAYS, 1, p, err)))
		return rc;
	return parts_of(out, nout, res, true, err);
}

int sched_store_release_unstarted(struct sched_store_part_found **out, int *nout, struct ty_pg *pg,
				  int age_ms, struct ty_err *err)
{
	char ab[24];
	const char *p[] = {sched_i64(ab, age_ms)};
	PGresult *res = NULL;
	int rc;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_RELEASE_UNSTARTED, 1, p, err)))
		return rc;
	return parts_of(out, nout, res, false, err);
}
