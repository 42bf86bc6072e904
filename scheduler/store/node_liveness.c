/*
 * The timed node transitions (docs/dispatch.md, "Node states"): nodes not
 * heard from declared lost, draining nodes with nothing left drained,
 * suspect nodes whose failures left the window ready again.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/*
 * A new term counts from its own start too: heartbeats that arrived while
 * no one led were not applied.
 */
static const char SQL_LOST[] =
    "UPDATE nodes n SET state = 'lost' FROM leader l"
    " WHERE l.id = 1 AND n.state <> 'lost'"
    " AND greatest(n.last_heartbeat, l.updated_at,"
    "  now() - $2::bigint * interval '1 millisecond')"
    " < now() - $1::integer * interval '1 millisecond'"
    " RETURNING n.id";
static const char SQL_DRAINED[] =
    "UPDATE nodes n SET state = 'drained' WHERE n.state = 'draining'"
    " AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
    "  AND a.released_at IS NULL) RETURNING n.id";
static const char SQL_READY_AGAIN[] =
    "UPDATE nodes n SET state = 'ready' WHERE n.state = 'suspect'"
    " AND coalesce((SELECT sum(w) FROM (SELECT max(CASE WHEN"
    "  f.failure_class = 'hardware' THEN 2 ELSE 1 END) AS w"
    "  FROM node_failures f WHERE f.node_id = n.id"
    "  AND f.failure_class IN ('system', 'hardware')"
    "  AND f.created_at > n.failures_since"
    "  AND f.created_at > now() - make_interval(secs => $1::int)"
    "  GROUP BY f.job_id) x), 0) < $2::int"
    /* measured slow by a pre-flight check: suspect for the window */
    " AND NOT EXISTS (SELECT 1 FROM node_failures f WHERE f.node_id = n.id"
    "  AND f.message = '" SCHED_PREFLIGHT_WHY "'"
    "  AND f.created_at > n.failures_since"
    "  AND f.created_at > now() - make_interval(secs => $1::int))"
    " RETURNING n.id";

void sched_store_nodes_free(struct sched_store_nodes *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
	v->v = NULL;
	v->n = 0;
}

/* The node ids in column 0 of res (which it clears) into *out. */
static int nodes_of(struct sched_store_nodes *out, PGresult *res, struct ty_err *err)
{
	int rows = PQntuples(res);

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

int sched_store_nodes_lost(struct sched_store_nodes *out, struct ty_pg *pg, int timeout_ms,
			   int64_t back_ms, struct ty_err *err)
{
	char tb[24], bb[24];
	const char *p[] = {sched_i64(tb, timeout_ms), back_ms < 0 ? NULL : sched_i64(bb, back_ms)};

	PGresult *res = NULL;
	int rc;

	out->v = NULL;
	out->n = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_LOST, 2, p, err)))
		return rc;
	return nodes_of(out, res, err);
}

int sched_store_nodes_drained(struct sched_store_nodes *out, struct ty_pg *pg,
			      struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	out->v = NULL;
	out->n = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_DRAINED, 0, NULL, err)))
		return rc;
	return nodes_of(out, res, err);
}

int sched_store_nodes_ready_again(struct sched_store_nodes *out, struct ty_pg *pg,
				  int64_t window_s, int64_t suspect_after, struct ty_err *err)
{
	char wb[24], tb[24];
	const char *p[] = {sched_i64(wb, window_s), sched_i64(tb, suspect_after)};

	PGresult *res = NULL;
	int rc;

	out->v = NULL;
	out->n = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_READY_AGAIN, 2, p, err)))
		return rc;
	return nodes_of(out, res, err);
}
