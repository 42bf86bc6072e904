/*
 * The SQL of the submission check (feasible.c): the team's quota with what
 * its cohort peers could ever lend, and the node shapes the cluster has.
 */
#include "store.h"

#include <stdlib.h>
#include <string.h>

/*
 * One statement: the team (no row: no such team) beside each shape the
 * cluster has (one row with NULL shape columns when it has none). Shapes:
 * the nodes that are not lost grouped by shape (a few rows however many
 * nodes), each named by its first three nodes, NULL CPUs or memory (not
 * reported) as 0; then the declared node pools, max_nodes each.
 */
static const char capacity_sql[] =
    "WITH t AS (SELECT t.nominal_gpus, coalesce(t.borrowing_limit_gpus, -1),"
    "  coalesce(t.lending_limit_gpus, -1), coalesce(t.cohort, '') <> '',"
    "  (SELECT coalesce(json_agg(json_build_array(p.nominal_gpus,"
    "    coalesce(p.lending_limit_gpus, -1))), '[]')::text"
    "   FROM teams p WHERE p.cohort = t.cohort AND p.id <> t.id)"
    "  FROM teams t WHERE t.id = $1),"
    " s AS (SELECT 0 AS k, gpus, coalesce(cpus, 0) AS cpus,"
    "  coalesce(memory_mb, 0) AS memory_mb, count(*) AS n,"
    "  array_to_string((array_agg(id ORDER BY id))[1:3], ', ')"
    "   || CASE WHEN count(*) > 3 THEN ', …' ELSE '' END AS name"
    "  FROM nodes WHERE state <> 'lost'"
    "  GROUP BY gpus, coalesce(cpus, 0), coalesce(memory_mb, 0)"
    "  UNION ALL SELECT 1, gpus_per_node, coalesce(cpus_per_node, 0),"
    "  coalesce(memory_mb_per_node, 0), max_nodes, 'pool ' || name FROM node_pools)"
    " SELECT t.*, s.gpus, s.cpus, s.memory_mb, s.n, s.name FROM t LEFT JOIN s ON true"
    " ORDER BY s.k, s.gpus, s.cpus, s.memory_mb, s.name";

static int team_row(struct api_capacity *c, PGresult *res, struct ty_err *err)
{
	json_t *peers = json_loads(PQgetvalue(res, 0, 4), 0, NULL);
	size_t i;
	json_t *p;

	if (!peers)
		return ty_err_set(err, TY_EIO, "cohort peers: bad JSON from the database");
	c->team.nominal = atoll(PQgetvalue(res, 0, 0));
	c->team.borrowing_limit = atoll(PQgetvalue(res, 0, 1));
	c->team.lending_limit = atoll(PQgetvalue(res, 0, 2));
	c->team.in_cohort = PQgetvalue(res, 0, 3)[0] == 't';
	json_array_foreach(peers, i, p)
	{
		struct quota_team peer = {json_integer_value(json_array_get(p, 0)), QUOTA_NO_LIMIT,
					  json_integer_value(json_array_get(p, 1)), 0, true};

		c->peers_lendable += quota_lendable_max(&peer);
	}
	json_decref(peers);
	return 0;
}

int api_store_capacity(struct api_capacity *c, struct ty_pg *pg, struct ty_arena *a,
		       const char *team_id, struct ty_err *err)
{
	const char *p[1] = {team_id};
	PGresult *res = NULL;
	int rc, n;

	memset(c, 0, sizeof(*c));
	if ((rc = ty_pg_exec(&res, pg, capacity_sql, 1, p, err)))
		return rc;
	n = PQntuples(res);
	if (n == 0) {
		rc = ty_err_set(err, TY_ENOTFOUND, "no team with id %s", team_id);
		goto out;
	}
	if ((rc = team_row(c, res, err)))
		goto out;
	if (!(c->shapes = ty_arena_alloc(a, (size_t)n * sizeof(*c->shapes)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct quota_shape *s = &c->shapes[c->nshapes];

		if (PQgetisnull(res, i, 5))
			continue; /* no shape at all: the team's row alone */
		s->gpus = atoll(PQgetvalue(res, i, 5));
		s->cpus = atoll(PQgetvalue(res, i, 6));
		s->memory_mb = atoll(PQgetvalue(res, i, 7));
		s->count = atoll(PQgetvalue(res, i, 8));
		if ((rc = api__store_text(&s->name, a, res, i, 9, err)))
			goto out;
		c->nshapes++;
	}
out:
	PQclear(res);
	return rc;
}
