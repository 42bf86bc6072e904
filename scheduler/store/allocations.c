/*
 * The nodes' parts of attempts (allocations) as their executors report
 * them: acknowledged, killed, exited, released when a node is gone, and
 * the reads that judge an attempt from its parts.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first acknowledgement counts; a re-sent launch's adds nothing. */
static const char SQL_ALLOCS_ACCEPTED[] =
    "UPDATE allocations a SET accepted_at = now()"
    " FROM (SELECT DISTINCT * FROM jsonb_to_recordset($1::jsonb)"
    "  AS m(job bigint, attempt integer, node text)) m"
    " WHERE a.job_id = m.job AND a.attempt = m.attempt AND a.node_id = m.node"
    " AND a.accepted_at IS NULL";

int sched_store_allocs_accepted(struct ty_pg *pg, const struct sched_store_part *v, int n,
				struct ty_err *err)
{
	json_t *a = json_array();
	char *text = NULL;
	int rc = 0;

	if (!a)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		json_t *rec = json_pack("{s:I, s:I, s:s}", "job", (json_int_t)v[i].job, "attempt",
					(json_int_t)v[i].attempt, "node", v[i].node);

		if (!rec || json_array_append_new(a, rec)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (!(text = json_dumps(a, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {text};

	rc = ty_pg_exec(NULL, pg, SQL_ALLOCS_ACCEPTED, 1, p, err);
out:
	json_decref(a);
	free(text);
	return rc;
}

static const char SQL_ALLOCS_KILL[] =
    "UPDATE allocations a SET killed_at = now() FROM nodes n"
    " WHERE a.job_id = $1 AND a.attempt = $2 AND a.exited_at IS NULL"
    " AND n.id = a.node_id AND n.state <> 'lost'"
    " AND a.node_id IS DISTINCT FROM $3"
    " RETURNING a.node_id";

int sched_store_allocs_kill(char ***nodes, int *n, struct ty_pg *pg, int64_t job, int64_t attempt,
			    const char *except, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), except};
	PGresult *res = NULL;
	char **v = NULL;
	int rc, nv = 0;

	*nodes = NULL;
	*n = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_ALLOCS_KILL, 3, p, err)))
		return rc;
	if (PQntuples(res) > 0 && !(v = calloc((size_t)PQntuples(res), sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (; nv < PQntuples(res); nv++)
		if (!(v[nv] = strdup(PQgetvalue(res, nv, 0)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	*nodes = v;
	*n = nv;
	v = NULL;
out:
	sched_store_strs_free(v, nv);
	PQclear(res);
	return rc;
}

static const char SQL_ALLOC_EXITED[] =
    "UPDATE allocations SET exited_at = now(), exit_code = $4,"
    " failure_class = $5, released_at = coalesce(released_at, now())"
    " WHERE job_id = $1 AND attempt = $2 AND node_id = $3"
    " AND exited_at IS NULL RETURNING 1";

int sched_store_alloc_exited(bool *applied, struct ty_pg *pg, const struct sched_store_part *a,
			     int exit_code, const char *cls, struct ty_err *err)
{
	char jb[24], ab[24], eb[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), a->node,
			   sched_i64(eb, exit_code), cls};
	PGresult *res = NULL;
	int rc;

	*applied = false;
	if (!(rc = ty_pg_exec(&res, pg, SQL_ALLOC_EXITED, 5, p, err)))
		*applied = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

static const char SQL_NODE_RELEASED[] =
    "UPDATE allocations SET exited_at = coalesce(exited_at, now()),"
    " failure_class = coalesce(failure_class, $2), released_at = now()"
    " WHERE node_id = $1 AND released_at IS NULL"
    " RETURNING job_id, attempt";

int sched_store_node_released(struct sched_store_part **out, int *nout, struct ty_pg *pg,
			      const char *node, const char *cls, struct ty_err *err)
{
	const char *p[] = {node, cls};
	struct sched_store_part *v = NULL;
	PGresult *res = NULL;
	int rc, nv;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_NODE_RELEASED, 2, p, err)))
		return rc;
	if ((nv = PQntuples(res)) > 0 && !(v = calloc((size_t)nv, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < nv; r++)
		v[r] = (struct sched_store_part){sched_col_i64(res, r, 0), sched_col_i64(res, r, 1),
						 node};
	PQclear(res);
	*out = v;
	*nout = nv;
	return 0;
}

static const char SQL_ALLOC_EXISTS[] = "SELECT 1 FROM allocations WHERE job_id = $1"
				       " AND attempt = $2 AND node_id = $3";

int sched_store_alloc_exists(bool *exists, struct ty_pg *pg, const struct sched_store_part *a,
			     struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), a->node};
	PGresult *res = NULL;
	int rc;

	*exists = false;
	if (!(rc = ty_pg_exec(&res, pg, SQL_ALLOC_EXISTS, 3, p, err)))
		*exists = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

static const char SQL_ATTEMPT_STATE[] =
    "SELECT state FROM attempts WHERE job_id = $1 AND attempt = $2";

int sched_store_attempt_state(char *state, size_t size, struct ty_pg *pg, int64_t job,
			      int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*state = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_STATE, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		snprintf(state, size, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/*
 * Column 2: the attempt is being preempted and no other node's part has
 * ended other than by exiting 0, so a failure of this node's own (not
 * the preemption's stop) still decides the attempt.
 */
static const char SQL_ATTEMPT_AFTER_EXIT[] =
    "SELECT state, coalesce(" SCHED_STORE_PREEMPTING " AND NOT EXISTS (SELECT 1"
    "  FROM allocations a WHERE a.job_id = $1 AND a.attempt = $2"
    "  AND a.node_id <> $3 AND a.exited_at IS NOT NULL"
    "  AND (a.exit_code IS DISTINCT FROM 0 OR a.failure_class IS NOT NULL)),"
    " false) FROM attempts t WHERE t.job_id = $1 AND t.attempt = $2";

int sched_store_attempt_after_exit(struct sched_store_after_exit *out, struct ty_pg *pg,
				   const struct sched_store_part *a, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), a->node};
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_AFTER_EXIT, 3, p, err)))
		return rc;
	if ((out->exists = PQntuples(res) == 1)) {
		snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 0));
		out->preempting_alone = !strcmp(PQgetvalue(res, 0, 1), "t");
	}
	PQclear(res);
	return 0;
}

/* bad: parts that ended other than by their ranks' own exit 0 */
static const char SQL_ATTEMPT_PARTS[] =
    "SELECT t.state, count(*) FILTER (WHERE a.exited_at IS NULL),"
    " count(*) FILTER (WHERE a.exit_code IS DISTINCT FROM 0"
    "  OR a.failure_class IS NOT NULL), count(*),"
    " t.failure_class"
    " FROM attempts t JOIN allocations a USING (job_id, attempt)"
    " WHERE t.job_id = $1 AND t.attempt = $2"
    " GROUP BY t.state, t.failure_class";

int sched_store_attempt_parts(struct sched_store_parts *out, struct ty_pg *pg, int64_t job,
			      int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_PARTS, 2, p, err)))
		return rc;
	if ((out->exists = PQntuples(res) == 1)) {
		snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 0));
		out->live = sched_col_i64(res, 0, 1);
		out->bad = sched_col_i64(res, 0, 2);
		out->total = sched_col_i64(res, 0, 3);
		/* read here: the join makes SCHED_STORE_PREEMPTING ambiguous */
		out->preempted = ty_pg_val(res, 0, 4) && !strcmp(ty_pg_val(res, 0, 4), "preempted");
	}
	PQclear(res);
	return 0;
}
