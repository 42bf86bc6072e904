/*
 * The submission check of what can never run (docs/api.md, "Unschedulable"):
 * more GPUs than the team can ever get, or a shape no node or declared pool
 * can hold. The rules and their texts are quota.h's, shared with the
 * scheduler's "cannot run" reason.
 */
#include "api.h"
#include "store.h"

#include <stdio.h>

int api_submit_feasible(struct api_req *r, const char *team_id, const char *team,
			const json_t *spec, const char *field, struct ty_err *err)
{
	const json_t *res = json_object_get(spec, "resources");
	long long nodes = json_integer_value(json_object_get(res, "nodes"));
	long long gpus = json_integer_value(json_object_get(res, "gpus_per_node"));
	struct api_capacity c;
	char why[512];
	int rc;

	if (json_is_true(json_object_get(spec, "queue_if_unschedulable")))
		return 0;
	if ((rc = api_store_capacity(&c, r->pg, r->arena, team_id, err)))
		return rc;
	/* a fresh install takes jobs before its executors register */
	if (c.nshapes == 0)
		return 0;
	if (nodes * gpus > quota_ceiling(&c.team, c.peers_lendable))
		quota_ceiling_format(why, sizeof(why), team, &c.team, c.peers_lendable,
				     nodes * gpus);
	else if (quota_shape_fits(why, sizeof(why), c.shapes, c.nshapes, nodes, gpus,
				  json_integer_value(json_object_get(res, "cpus_per_node")),
				  json_integer_value(json_object_get(res, "memory_mb_per_node"))))
		return 0;
	return api_fail(r, err, API_P_UNSCHEDULABLE, field,
			"%s; set queue_if_unschedulable to queue it anyway", why);
}
