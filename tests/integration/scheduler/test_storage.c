/*
 * Where jobs' checkpoints are (docs/dispatch.md, "Checkpoint retention and
 * tiering"), the test playing the executor: checkpoint_tier reports kept
 * per job (job_checkpoint_storage), a figure left out kept as it was, one
 * from a node with no part in the job ignored; the team's bytes per tier in
 * GET /v1/usage ("storage") and /metrics (trainyard_team_checkpoint_bytes);
 * a job event when moves start failing and when they work again, not one
 * per retry.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

#define STORED                                                                                     \
	"SELECT local_bytes || ' ' || store_bytes FROM job_checkpoint_storage WHERE job_id = $1"

/* the job's checkpoint_tier events' messages, oldest first, with the node as ${node} */
#define TIER_EVENTS                                                                                \
	"SELECT string_agg(replace(message, (SELECT node_id FROM allocations WHERE job_id = $1),"  \
	" '${node}'), ' | ' ORDER BY seq) FROM job_events WHERE job_id = $1"                       \
	" AND type = 'checkpoint_tier'"

/* trainyard_team_checkpoint_bytes{team, tier} as the API serves it, or -1. */
static long long gauge(struct fx *f, const char *team, const char *tier)
{
	const char *body = fx_api(f, "GET", "/metrics", 200);
	const char *want =
	    ty_test_strf("trainyard_team_checkpoint_bytes{team=\"%s\",tier=\"%s\"} ", team, tier);
	const char *at = strstr(body, want);

	return at ? atoll(at + strlen(want)) : -1;
}

TY_TEST(checkpoint_storage_is_kept_per_job_and_shown_per_team)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "ckst", 8, -1, NULL);
	const struct proto_msg *l;
	const char *node;
	json_t *u;
	long long job;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", NULL);
	job = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(job));
	node = FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(job));
	l = fx_recv(f, node, "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, node, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_INT_EQ(gauge(f, team, "local"), 0);
	CHECK_INT_EQ(gauge(f, team, "object_store"), 0);

	fx_send(f, node, "checkpoint_tier", job, 1,
		"{'status':'ok','moved':1,'local_bytes':1000,'store_bytes':5000}");
	FX_WAIT(f, T, "1000 5000", STORED, fx_n(job));
	/* a failure: no store figure, the last one stands; logged, and one job event */
	fx_send(f, node, "checkpoint_tier", job, 1,
		"{'status':'error','error':'object store PUT: HTTP 403 InvalidAccessKeyId',"
		"'moved':0,'local_bytes':3000,'retry_ms':1000}");
	FX_WAIT(f, T, "3000 5000", STORED, fx_n(job));
	/* a node with no part in the job changes nothing */
	fx_send(f, !strcmp(node, "n1") ? "n2" : "n1", "checkpoint_tier", job, 1,
		"{'status':'ok','moved':0,'local_bytes':1,'store_bytes':1}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, STORED, fx_n(job)), "3000 5000");
	CHECK(strstr(fx_sched_log(f, 0), "HTTP 403 InvalidAccessKeyId") != NULL);
	/* the retries fail too: still one event; then a move works again: a second */
	fx_send(f, node, "checkpoint_tier", job, 1,
		"{'status':'error','error':'object store PUT: HTTP 403 InvalidAccessKeyId',"
		"'moved':0,'local_bytes':3000,'retry_ms':2000}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, TIER_EVENTS, fx_n(job)),
		     "cannot move checkpoints to the object store (node ${node}): object store PUT: "
		     "HTTP 403 InvalidAccessKeyId; local copies kept, retried in 1 s");
	fx_send(f, node, "checkpoint_tier", job, 1,
		"{'status':'ok','moved':1,'local_bytes':3000,'store_bytes':5000}");
	FX_WAIT(f, T, "2", "SELECT count(*) FROM job_events WHERE job_id = $1"
		" AND type = 'checkpoint_tier'", fx_n(job));
	CHECK(strstr(FX_Q(f, TIER_EVENTS, fx_n(job)), "move to the object store again") != NULL);

	CHECK_INT_EQ(gauge(f, team, "local"), 3000);
	CHECK_INT_EQ(gauge(f, team, "object_store"), 5000);
	u = json_loads(fx_api(f, "GET", ty_test_strf("/v1/usage?team=%s", team), 200), 0, NULL);
	REQUIRE(u != NULL);
	CHECK_STR_EQ(json_string_value(ty_jpath(u, "storage.items[0].team")), team);
	CHECK_INT_EQ(json_integer_value(ty_jpath(u, "storage.items[0].local_bytes")), 3000);
	CHECK_INT_EQ(json_integer_value(ty_jpath(u, "storage.items[0].store_bytes")), 5000);
	CHECK_INT_EQ(json_array_size(ty_jpath(u, "storage.items")), 1);
	CHECK_INT_EQ(json_integer_value(ty_jpath(u, "storage.totals.store_bytes")), 5000);
	/* the GPU time is still there */
	CHECK(json_is_array(json_object_get(u, "items")));
	json_decref(u);
	fx_sched_stop(f, 0);
}
