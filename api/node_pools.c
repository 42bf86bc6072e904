/*
 * Node pools (admin): shapes an operator declares for clusters that scale,
 * counted by the unschedulable check as if their max_nodes nodes were
 * registered (docs/api.md, "Node pools").
 */
#include "api.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pool_not_found(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_NODE_POOL_NOT_FOUND, NULL, "no node pool '%s'", r->params[0]);
}

/* A JSON integer member as text (arena); NULL for absent or null. */
static const char *int_text(struct api_req *r, const char *key)
{
	const json_t *v = json_object_get(r->json, key);

	return json_is_integer(v)
		   ? ty_arena_printf(r->arena, "%lld", (long long)json_integer_value(v))
		   : NULL;
}

int api_h_node_pools_put(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	const json_t *labels;
	const char *v[6], *doc;
	char *ltext = NULL;
	bool created;
	int rc;

	if (!api_team_name_ok(r->params[0]))
		return api_fail(r, err, API_P_INVALID_FIELD, "name",
				"'%s' is not a valid node pool name: 1-63 lowercase letters, "
				"digits and '-', not at either end",
				r->params[0]);
	if (api_validate_node_pool(r->json, &p))
		return api_fail_problem(r, err, &p);
	labels = json_object_get(r->json, "labels");
	if (!(ltext = labels ? json_dumps(labels, JSON_COMPACT) : strdup("{}")))
		return ty_err_set(err, TY_ENOMEM, NULL);
	v[0] = r->params[0];
	v[1] = ltext;
	v[2] = int_text(r, "gpus_per_node");
	v[3] = int_text(r, "cpus_per_node");
	v[4] = int_text(r, "memory_mb_per_node");
	v[5] = int_text(r, "max_nodes");
	if ((rc = ty_pg_begin(r->pg, err)))
		goto out;
	if ((rc = api_store_node_pool_put(&doc, &created, r->pg, r->arena, v, err)) ||
	    (rc = api_store_audit_log(r->pg, r->auth.token_id, "node_pool.put", r->params[0],
				      err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		goto out;
	}
	rc = api_reply_text(r, created ? 201 : 200, doc);
out:
	free(ltext);
	return rc;
}

int api_h_node_pools_list(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int rc;

	if ((rc = api_store_node_pools_list(&doc, r->pg, r->arena, err)))
		return rc;
	return api_reply_text(r, 200, doc);
}

int api_h_node_pools_delete(struct api_req *r, struct ty_err *err)
{
	bool found;
	int rc;

	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	if ((rc = api_store_node_pool_delete(&found, r->pg, r->params[0], err)) || !found) {
		ty_pg_rollback(r->pg);
		return rc ? rc : pool_not_found(r, err);
	}
	if ((rc = api_store_audit_log(r->pg, r->auth.token_id, "node_pool.delete", r->params[0],
				      err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	r->status = 204;
	return 0;
}
