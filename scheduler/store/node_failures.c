/*
 * The failures blamed on nodes (node_failures) and the node states they
 * lead to: suspect, draining, drained.
 */
#include "scheduler.h"

#include <stdio.h>
#include <string.h>

/* The failure classes that count towards a node's suspect/drained thresholds. */
#define COUNTED_CLASSES "{system,hardware}"

static const char SQL_NODE_FAILURE_ADD[] =
    "INSERT INTO node_failures (node_id, job_id, attempt,"
    " failure_class, evidence, message, evidence_source)"
    " SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS"
    " (SELECT 1 FROM nodes WHERE id = $1)"
    " ON CONFLICT (job_id, attempt, node_id) DO NOTHING RETURNING 1";

int sched_store_node_failure_add(bool *added, struct ty_pg *pg,
				 const struct sched_store_node_failure *f, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {f->node,  sched_i64(jb, f->job), sched_i64(ab, f->attempt),
			   f->cls,   f->evidence,	    f->message,
			   f->source};
	PGresult *res = NULL;
	int rc;

	*added = false;
	if (!(rc = ty_pg_exec(&res, pg, SQL_NODE_FAILURE_ADD, 7, p, err)))
		*added = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

/*
 * Distinct jobs within the window since the last undrain; hardware
 * counts 2. Jobs whose failures here were decided by rank logs
 * alone count only when such jobs come from $3 teams.
 * Columns: state, points, busy, executor-observed points, log-only
 * points (counted or not), teams of the log-only failures.
 */
static const char SQL_NODE_SCORE[] =
    "WITH f AS (SELECT f.job_id, f.evidence_source, j.team_id,"
    "  CASE WHEN f.failure_class = 'hardware' THEN 2 ELSE 1 END AS w"
    "  FROM node_failures f JOIN nodes n ON n.id = f.node_id"
    "  JOIN jobs j ON j.id = f.job_id WHERE f.node_id = $1"
    "  AND f.failure_class = ANY ('" COUNTED_CLASSES "')"
    "  AND f.created_at > n.failures_since"
    "  AND f.created_at > now() - make_interval(secs => $2::int)),"
    " per_job AS (SELECT job_id, max(w) AS w,"
    "  bool_and(evidence_source = 'log') AS log_only FROM f GROUP BY job_id),"
    " t AS (SELECT count(DISTINCT team_id) AS teams FROM f"
    "  WHERE evidence_source = 'log')"
    " SELECT n.state,"
    " coalesce((SELECT sum(w) FROM per_job WHERE NOT log_only), 0)"
    "  + CASE WHEN (SELECT teams FROM t) >= $3::int THEN coalesce((SELECT sum(w) FROM per_job "
    "WHERE log_only), 0) ELSE 0 END,"
    " EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
    "  AND a.released_at IS NULL),"
    " coalesce((SELECT sum(w) FROM per_job WHERE NOT log_only), 0),"
    " coalesce((SELECT sum(w) FROM per_job WHERE log_only), 0),"
    " (SELECT teams FROM t)"
    " FROM nodes n WHERE n.id = $1 FOR UPDATE OF n";

int sched_store_node_score(struct sched_store_node_score *out, struct ty_pg *pg, const char *node,
			   int64_t window_s, int64_t log_only_teams, struct ty_err *err)
{
	char wb[24], tb[24];
	const char *p[] = {node, sched_i64(wb, window_s), sched_i64(tb, log_only_teams)};
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_NODE_SCORE, 3, p, err)))
		return rc;
	if ((out->exists = PQntuples(res) == 1)) {
		snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 0));
		out->score = sched_col_i64(res, 0, 1);
		out->busy = !strcmp(PQgetvalue(res, 0, 2), "t");
		out->seen_pts = sched_col_i64(res, 0, 3);
		out->log_pts = sched_col_i64(res, 0, 4);
		out->log_teams = sched_col_i64(res, 0, 5);
	}
	PQclear(res);
	return 0;
}

static const char SQL_NODE_BLAMED[] =
    "UPDATE nodes SET state = $2, drain_reason = $3 WHERE id = $1";

int sched_store_node_blamed(struct ty_pg *pg, const char *node, const char *to, const char *reason,
			    struct ty_err *err)
{
	const char *p[] = {node, to, reason};

	return ty_pg_exec(NULL, pg, SQL_NODE_BLAMED, 3, p, err);
}

static const char SQL_NODE_SUSPECT[] = "UPDATE nodes SET state = 'suspect'"
				       " WHERE id = $1 AND state = 'ready'";

int sched_store_node_suspect(struct ty_pg *pg, const char *node, struct ty_err *err)
{
	const char *p[] = {node};

	return ty_pg_exec(NULL, pg, SQL_NODE_SUSPECT, 1, p, err);
}
