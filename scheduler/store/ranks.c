/*
 * The ranks' ends (rank_exited), one at a time and set-based; their starts
 * move attempts too and are lifecycle.c's (sched_store_attempt_starting).
 */
#include "scheduler.h"

#include <stdlib.h>

int sched_store__ranks_json(char **out, const struct sched_store_rank *v, int n, bool started,
			    struct ty_err *err)
{
	json_t *a = json_array();
	int rc = 0;

	*out = NULL;
	if (!a)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		/* a, b: local_rank and pid of a start, exit_code and signal of an end */
		json_t *rec = json_pack(
		    "{s:I, s:I, s:I, s:s, s:I, s:I, s:i}", "job", (json_int_t)v[i].job, "attempt",
		    (json_int_t)v[i].attempt, "rank", (json_int_t)v[i].rank, "node", v[i].node, "a",
		    (json_int_t)(started ? v[i].local_rank : v[i].exit_code), "b",
		    (json_int_t)(started ? v[i].pid : v[i].signal), "ord", i);

		if (!rec || json_array_append_new(a, rec)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (!(*out = json_dumps(a, JSON_COMPACT)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	json_decref(a);
	return rc;
}

/* The rank's end when it is one of the node's ranks in the attempt; the node's range back. */
static const char SQL_RANK_EXITED[] =
    "WITH a AS (SELECT first_rank, local_ranks FROM allocations WHERE job_id = $1"
    "  AND attempt = $2 AND node_id = $4),"
    " r AS (INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank,"
    "  exit_code, signal, ended_at)"
    "  SELECT $1, $2, $3::integer, $4, $3::integer - a.first_rank, $5, $6, now()"
    "  FROM a WHERE $3::integer >= a.first_rank"
    "  AND $3::integer < a.first_rank + a.local_ranks"
    "  ON CONFLICT (job_id, attempt, rank) DO UPDATE"
    "  SET exit_code = EXCLUDED.exit_code, signal = EXCLUDED.signal,"
    "  ended_at = EXCLUDED.ended_at WHERE ranks.ended_at IS NULL RETURNING 1)"
    " SELECT a.first_rank, a.local_ranks, (SELECT count(*) FROM r) FROM a";

int sched_store_rank_exited(bool *mine, int64_t *first, int64_t *nranks, struct ty_pg *pg,
			    const struct sched_store_rank *r, struct ty_err *err)
{
	char jb[24], ab[24], rb[24], xb[24], sb[24];
	const char *p[] = {sched_i64(jb, r->job),	sched_i64(ab, r->attempt),
			   sched_i64(rb, r->rank),	r->node,
			   sched_i64(xb, r->exit_code), sched_i64(sb, r->signal)};
	PGresult *res = NULL;
	int rc;

	*mine = false;
	*first = *nranks = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_RANK_EXITED, 6, p, err)))
		return rc;
	if ((*mine = PQntuples(res) > 0)) {
		*first = sched_col_i64(res, 0, 0);
		*nranks = sched_col_i64(res, 0, 1);
	}
	PQclear(res);
	return 0;
}

/*
 * The batch's ended ranks ($1 as sched_store__ranks_json writes them): the
 * first report of a rank wins, as one by one; out-of-range ranks are bad.
 */
static const char SQL_RANKS_EXITED[] =
    "WITH m AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS m(job bigint,"
    "  attempt integer, rank bigint, node text, a bigint, b bigint, ord integer)),"
    " k AS (SELECT m.*, a.first_rank, m.rank >= a.first_rank"
    "  AND m.rank < a.first_rank + a.local_ranks AS fits FROM m JOIN allocations a"
    "  ON a.job_id = m.job AND a.attempt = m.attempt AND a.node_id = m.node),"
    " r AS (INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank,"
    "  exit_code, signal, ended_at)"
    "  SELECT DISTINCT ON (job, attempt, rank) job, attempt, rank, node,"
    "  rank - first_rank, a, b, now() FROM k WHERE fits"
    "  ORDER BY job, attempt, rank, ord"
    "  ON CONFLICT (job_id, attempt, rank) DO UPDATE"
    "  SET exit_code = EXCLUDED.exit_code, signal = EXCLUDED.signal,"
    "  ended_at = EXCLUDED.ended_at WHERE ranks.ended_at IS NULL RETURNING 1)"
    " SELECT (SELECT count(*) FROM k WHERE NOT fits), (SELECT count(*) FROM r)";

int sched_store_ranks_exited(bool *bad, struct ty_pg *pg, const struct sched_store_rank *v, int n,
			     struct ty_err *err)
{
	PGresult *res = NULL;
	char *text = NULL;
	int rc;

	*bad = false;
	if ((rc = sched_store__ranks_json(&text, v, n, false, err)))
		return rc;
	const char *p[] = {text};

	if (!(rc = ty_pg_exec(&res, pg, SQL_RANKS_EXITED, 1, p, err)))
		*bad = sched_col_i64(res, 0, 0) > 0;
	PQclear(res);
	free(text);
	return rc;
}
