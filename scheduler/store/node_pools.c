/*
 * Declared node pools (migrations/0036_node_pools.sql), read by place.c
 * only when a pending job looks impossible without them.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>

static const char SQL_POOLS[] =
    "SELECT name, gpus_per_node, coalesce(cpus_per_node, 0), coalesce(memory_mb_per_node, 0),"
    " max_nodes FROM node_pools ORDER BY name";

int sched_store_node_pools(struct sched_store_pool **out, int *nout, struct ty_pg *pg,
			   struct ty_err *err)
{
	struct sched_store_pool *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_POOLS, 0, NULL, err)))
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", PQgetvalue(res, i, 0));
		v[i].gpus = sched_col_i64(res, i, 1);
		v[i].cpus = sched_col_i64(res, i, 2);
		v[i].memory_mb = sched_col_i64(res, i, 3);
		v[i].max_nodes = sched_col_i64(res, i, 4);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}
