/*
 * What can never run is refused at submission (docs/api.md, "Unschedulable"):
 * a shape no node holds, more GPUs than the team can ever get; the flag
 * queue_if_unschedulable queues it anyway; an empty cluster takes anything.
 * Nodes are seeded with SQL (no executors here). Cases run in order: the
 * first one needs the cluster empty.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static void mk_node(const char *id, const char *gpus, const char *state)
{
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id, cpus, memory_mb)"
	   " VALUES ($1, '127.0.0.1:1', $2::int, $3, 'boot-1', 32, 65536)",
	   id, gpus, state);
}

static void submit(struct ty_resp *r, const char *team, const char *resources, const char *extra)
{
	const struct ty_stack *s = ty_stack_get();

	ty_http(r, "POST", "/v1/jobs", s->admin,
		ty_test_strf("{\"team\":\"%s\",\"command\":[\"x\"],\"resources\":%s%s}", team,
			     resources, extra ? extra : ""),
		NULL);
}

static void check_detail(const struct ty_resp *r, const char *want)
{
	const char *d = ty_jstr(r->json, "detail");

	CHECK(d && strstr(d, want));
	if (!(d && strstr(d, want)))
		fprintf(stderr, "detail: %s\nwant: %s\n", d ? d : "(none)", want);
}

TY_TEST(empty_cluster_accepts_everything)
{
	const char *team = ty_mk_team("empty", 4, -1);
	struct ty_resp r = {0};

	submit(&r, team, "{\"nodes\":3,\"gpus_per_node\":64}", NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(no_node_holds_the_shape)
{
	const char *team = ty_mk_team("shape", 64, -1);
	struct ty_resp r = {0};

	mk_node("node-a", "2", "ready");
	mk_node("node-b", "2", "draining"); /* may come back: counts */
	mk_node("node-z", "16", "lost");    /* gone: does not */
	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":9}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, "no node can hold 9 GPUs: the largest node has 2 (node-a, node-b)");
	check_detail(&r, "queue_if_unschedulable");
	submit(&r, team, "{\"nodes\":3,\"gpus_per_node\":2}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, "the job needs 3 nodes of 2 GPUs");
	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":1,\"cpus_per_node\":33}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, "can hold 33 CPUs: the most such a node has is 32");
	/* what does fit is accepted */
	submit(&r, team, "{\"nodes\":2,\"gpus_per_node\":2}", NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(flag_queues_it_anyway)
{
	const char *team = ty_mk_team("flag", 64, -1);
	struct ty_resp r = {0};

	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":9}", ",\"queue_if_unschedulable\":true");
	CHECK_STATUS(&r, 201);
	CHECK_JSTR(r.json, "state", "pending");
	CHECK(json_is_true(
	    json_object_get(json_object_get(r.json, "spec"), "queue_if_unschedulable")));
	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":9}", ",\"queue_if_unschedulable\":1");
	CHECK_PROBLEM(&r, 422, "invalid_field", "queue_if_unschedulable");
	/* the default is stored with the spec */
	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":1}", NULL);
	CHECK_STATUS(&r, 201);
	CHECK(json_is_false(
	    json_object_get(json_object_get(r.json, "spec"), "queue_if_unschedulable")));
	ty_resp_free(&r);
}

TY_TEST(more_than_the_team_can_ever_get)
{
	const char *alone = ty_mk_team("alone", 4, -1);
	const char *borrower = ty_mk_team("borrower", 4, -1);
	const char *lender = ty_mk_team("lender", 8, -1);
	const char *stingy = ty_mk_team("stingy", 8, -1);
	struct ty_resp r = {0};

	mk_node("node-c", "8", "ready");
	submit(&r, alone, "{\"nodes\":3,\"gpus_per_node\":2}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, ty_test_strf("team '%s' can get at most 4 GPUs (nominal 4, no "
				      "borrowing: no cohort), the job needs 6",
				      alone));
	/* a cohort that can lend makes it possible */
	DB("UPDATE teams SET cohort = 'feasible' WHERE name = $1 OR name = $2", borrower, lender);
	DB("UPDATE teams SET cohort = 'feasible', lending_limit_gpus = 1 WHERE name = $1", stingy);
	submit(&r, borrower, "{\"nodes\":3,\"gpus_per_node\":2}", NULL);
	CHECK_STATUS(&r, 201);
	/* 4 + 8 + min(8, 1) = 13 */
	submit(&r, borrower, "{\"nodes\":7,\"gpus_per_node\":2}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, ty_test_strf("team '%s' can get at most 13 GPUs (nominal 4, + 9 its "
				      "cohort can lend at most), the job needs 14",
				      borrower));
	submit(&r, alone, "{\"nodes\":3,\"gpus_per_node\":2}", ",\"queue_if_unschedulable\":true");
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(borrowing_limit_stays_exceeds_quota)
{
	const char *team = ty_mk_team("limited", 4, 2);
	struct ty_resp r = {0};

	/* over nominal + borrowing limit: the old, unconditional refusal, flag or not */
	submit(&r, team, "{\"nodes\":7,\"gpus_per_node\":1}", ",\"queue_if_unschedulable\":true");
	CHECK_PROBLEM(&r, 422, "exceeds_quota", "resources");
	/* within it but without a cohort to borrow from: unschedulable */
	submit(&r, team, "{\"nodes\":6,\"gpus_per_node\":1}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	ty_resp_free(&r);
}

TY_TEST(each_sweep_trial_is_checked)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("sweep", 64, -1);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/sweeps", s->admin,
		ty_tmpl("{'team':'@T','template':{'command':['x'],'resources':{'gpus_per_node':9}},"
			"'trials':[{'a':1},{'a':2}]}",
			team),
		NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "template.resources");
	check_detail(&r, "no node can hold 9 GPUs");
	ty_http(&r, "POST", "/v1/sweeps", s->admin,
		ty_tmpl("{'team':'@T','template':{'command':['x'],'resources':{'gpus_per_node':9},"
			"'queue_if_unschedulable':true},'trials':[{'a':1}]}",
			team),
		NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(node_pools_are_managed_by_admins)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("pools", 8, -1);
	const char *member = ty_mk_token("member", team);
	struct ty_resp r = {0};

	ty_http(&r, "PUT", "/v1/node-pools/big", s->admin,
		"{\"labels\":{\"pool\":\"big\"},\"gpus_per_node\":16,\"cpus_per_node\":128,"
		"\"max_nodes\":4}",
		NULL);
	CHECK_STATUS(&r, 201);
	CHECK_JSTR(r.json, "name", "big");
	CHECK_JINT(r.json, "max_nodes", 4);
	CHECK_JNULL(r.json, "memory_mb_per_node");
	ty_http(&r, "PUT", "/v1/node-pools/big", s->admin,
		"{\"labels\":{\"pool\":\"big\"},\"gpus_per_node\":16,\"cpus_per_node\":128,"
		"\"max_nodes\":2}",
		NULL);
	CHECK_STATUS(&r, 200); /* replaced */
	CHECK_JINT(r.json, "max_nodes", 2);
	ty_http(&r, "GET", "/v1/node-pools", member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "items[0].name", "big");
	CHECK_JINT(r.json, "items[0].gpus_per_node", 16);
	CHECK_JSTR(r.json, "items[0].labels.pool", "big");
	/* members read, admins write */
	ty_http(&r, "PUT", "/v1/node-pools/big", member, "{\"gpus_per_node\":1,\"max_nodes\":1}",
		NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", TY_FIELD_UNCHECKED);
	ty_http(&r, "DELETE", "/v1/node-pools/big", member, NULL, NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", TY_FIELD_UNCHECKED);
	ty_resp_free(&r);
}

TY_TEST(node_pool_bodies_are_checked)
{
	static const struct {
		const char *path, *body, *code, *field;
	} rows[] = {
	    {"/v1/node-pools/Big", "{\"gpus_per_node\":1,\"max_nodes\":1}", "invalid_field",
	     "name"},
	    {"/v1/node-pools/p", "{\"max_nodes\":1}", "missing_field", "gpus_per_node"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":65,\"max_nodes\":1}", "invalid_field",
	     "gpus_per_node"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":1}", "missing_field", "max_nodes"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":1,\"max_nodes\":0}", "invalid_field",
	     "max_nodes"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":1,\"max_nodes\":1,\"cpus_per_node\":\"8\"}",
	     "invalid_field", "cpus_per_node"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":1,\"max_nodes\":1,\"labels\":{\"a\":1}}",
	     "invalid_field", "labels.a"},
	    {"/v1/node-pools/p", "{\"gpus_per_node\":1,\"max_nodes\":1,\"zone\":\"a\"}",
	     "unknown_field", "zone"},
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_http(&r, "PUT", rows[i].path, s->admin, rows[i].body, NULL);
		CHECK_PROBLEM(&r, rows[i].code[0] == 'u' ? 400 : 422, rows[i].code, rows[i].field);
	}
	ty_http(&r, "DELETE", "/v1/node-pools/none", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "node_pool_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(a_declared_pool_makes_a_big_shape_acceptable)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("scale", 64, -1);
	struct ty_resp r = {0};

	ty_http(&r, "PUT", "/v1/node-pools/big", s->admin,
		"{\"gpus_per_node\":16,\"cpus_per_node\":128,\"max_nodes\":2}", NULL);
	REQUIRE_STATUS(&r, 200);
	submit(&r, team, "{\"nodes\":2,\"gpus_per_node\":16}", NULL);
	CHECK_STATUS(&r, 201);
	/* more nodes than the pool may ever have */
	submit(&r, team, "{\"nodes\":3,\"gpus_per_node\":16}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, "at most 2 exist (pool big)");
	/* the pool gone, the shape is impossible again */
	ty_http(&r, "DELETE", "/v1/node-pools/big", s->admin, NULL, NULL);
	CHECK_STATUS(&r, 204);
	submit(&r, team, "{\"nodes\":1,\"gpus_per_node\":16}", NULL);
	CHECK_PROBLEM(&r, 422, "unschedulable", "resources");
	check_detail(&r, "no node can hold 16 GPUs: the largest node has 8 (node-c)");
	ty_resp_free(&r);
}
