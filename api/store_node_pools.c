/*
 * The node pools SQL as typed calls (store.h): declared shapes for clusters
 * that scale (migrations/0036_node_pools.sql).
 */
#include "store.h"

#define POOL_JSON_SQL                                                                              \
	"json_build_object('name', p.name, 'labels', p.labels,"                                    \
	" 'gpus_per_node', p.gpus_per_node, 'cpus_per_node', p.cpus_per_node,"                     \
	" 'memory_mb_per_node', p.memory_mb_per_node, 'max_nodes', p.max_nodes,"                   \
	" 'created_at', ty_ts(p.created_at), 'updated_at', ty_ts(p.updated_at))"

static const char put_sql[] =
    "WITH p AS (INSERT INTO node_pools AS o (name, labels, gpus_per_node, cpus_per_node,"
    " memory_mb_per_node, max_nodes) VALUES ($1, $2::jsonb, $3::int, $4::int, $5::bigint,"
    " $6::int) ON CONFLICT (name) DO UPDATE SET labels = EXCLUDED.labels,"
    " gpus_per_node = EXCLUDED.gpus_per_node, cpus_per_node = EXCLUDED.cpus_per_node,"
    " memory_mb_per_node = EXCLUDED.memory_mb_per_node, max_nodes = EXCLUDED.max_nodes,"
    " updated_at = now() RETURNING o.*, (o.xmax = 0) AS created)"
    " SELECT " POOL_JSON_SQL "::text, p.created FROM p";

int api_store_node_pool_put(const char **doc, bool *created, struct ty_pg *pg, struct ty_arena *a,
			    const char *const v[6], struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	*created = false;
	if ((rc = ty_pg_exec(&res, pg, put_sql, 6, v, err)))
		return rc;
	if (PQntuples(res) == 1)
		*created = PQgetvalue(res, 0, 1)[0] == 't';
	return api__store_first(doc, a, res, err);
}

static const char list_sql[] = "SELECT json_build_object('items', coalesce(json_agg(" POOL_JSON_SQL
			       " ORDER BY p.name), '[]'))::text FROM node_pools p";

int api_store_node_pools_list(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, list_sql, 0, NULL, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char delete_sql[] = "DELETE FROM node_pools WHERE name = $1 RETURNING 1";

int api_store_node_pool_delete(bool *found, struct ty_pg *pg, const char *name, struct ty_err *err)
{
	const char *p[1] = {name};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, delete_sql, 1, p, err)))
		return rc;
	*found = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}
