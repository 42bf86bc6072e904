/*
 * "Cannot run" in the daemon (docs/scheduling.md, "Cannot run"), the test
 * playing the executors: a queued job no node can hold, or that needs more
 * GPUs than its team can ever get, waits with "cannot run: …" and one
 * `unschedulable` event; a node that can hold it (registered, back from
 * lost, or a declared node pool), or a quota raised, gives it a waiting
 * reason again and one `schedulable` event (or, placed in that very cycle,
 * just its `scheduled`); a quota lowered, a node lost or a pool deleted
 * makes it impossible again.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

static const char *events(struct fx *f, long long job)
{
	return FX_Q(f,
		    "SELECT coalesce(string_agg(type, ',' ORDER BY seq), '') FROM job_events"
		    " WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')",
		    fx_n(job));
}

TY_TEST(node_too_small_then_one_that_fits)
{
	struct fx *f = fx_start();
	const char *team;
	long long big;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	team = fx_team(f, "wide", 16, -1, NULL);
	big = fx_submit_to(f, team,
			   ",'resources':{'nodes':1,'gpus_per_node':8},"
			   "'queue_if_unschedulable':true");
	FX_WAIT(f, T, "cannot run: no node can hold 8 GPUs: the largest node has 4 (n1)",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(big));
	FX_WAIT(f, T, "unschedulable",
		"SELECT coalesce(string_agg(type, ','), '') FROM job_events"
		" WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')",
		fx_n(big));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1"
			  " AND type = 'unschedulable'",
			  fx_n(big)),
		     "cannot run: no node can hold 8 GPUs: the largest node has 4 (n1)");
	/* a few cycles later: still one event */
	fx_poll(f, 1000);
	CHECK_STR_EQ(events(f, big), "unschedulable");

	/* a node that can hold it registers: placed at once, its event is `scheduled` */
	fx_node(f, "n2", 8);
	REQUIRE(fx_recv(f, "n2", "launch", big, T) != NULL);
	CHECK_STR_EQ(events(f, big), "unschedulable");
}

TY_TEST(quota_raised_then_lowered)
{
	struct fx *f = fx_start();
	const char *team, *path;
	long long job;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	team = fx_team(f, "small", 4, -1, NULL);
	path = ty_test_strf("/v1/teams/%s", team);
	/* n1 is busy with another team's job: the one under test stays pending */
	REQUIRE(fx_recv(f, "n1", "launch",
			fx_submit_to(f, fx_team(f, "other", 8, -1, NULL),
				     ",'resources':{'nodes':1,'gpus_per_node':8}"),
			T) != NULL);
	job = fx_submit_to(f, team,
			   ",'resources':{'nodes':1,'gpus_per_node':6},"
			   "'queue_if_unschedulable':true");
	FX_WAIT(f, T,
		ty_test_strf("cannot run: team '%s' can get at most 4 GPUs (nominal 4, no "
			     "borrowing: no cohort), the job needs 6",
			     team),
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job));
	FX_WAIT(f, T, "unschedulable",
		"SELECT coalesce(string_agg(type, ',' ORDER BY seq), '')"
		" FROM job_events WHERE job_id = $1"
		" AND type IN ('unschedulable', 'schedulable')",
		fx_n(job));
	/* its estimate says never, though the simulation would only see it wait */
	FX_WAIT(f, T, "never|true", "SELECT (estimate_basis->>'kind') || '|' ||"
		" (estimated_start IS NULL) FROM jobs WHERE id = $1", fx_n(job));

	/* raised: a waiting reason again */
	fx_api_body(f, "PATCH", path, "{'nominal_gpus':8}", 200);
	FX_WAIT(f, T, "f",
		"SELECT starts_with(pending_reason, 'cannot run: ') FROM jobs WHERE id = $1",
		fx_n(job));
	FX_WAIT(f, T, "estimated", "SELECT estimate_basis->>'kind' FROM jobs WHERE id = $1",
		fx_n(job));
	FX_WAIT(f, T, "unschedulable,schedulable",
		"SELECT coalesce(string_agg(type, ',' ORDER BY seq), '') FROM job_events"
		" WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "pending");

	/* lowered again: impossible again */
	fx_api_body(f, "PATCH", path, "{'nominal_gpus':2}", 200);
	FX_WAIT(f, T, "unschedulable,schedulable,unschedulable",
		"SELECT coalesce(string_agg(type, ',' ORDER BY seq), '') FROM job_events"
		" WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')",
		fx_n(job));
	CHECK(strstr(FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job)),
		     "can get at most 2 GPUs") != NULL);
}

TY_TEST(a_declared_pool_makes_it_wait_instead)
{
	struct fx *f = fx_start();
	const char *sql = "SELECT coalesce(string_agg(type, ',' ORDER BY seq), '') FROM job_events"
			  " WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')";
	long long job;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':16},"
			   "'queue_if_unschedulable':true");
	FX_WAIT(f, T, "unschedulable", sql, fx_n(job));
	/* nodes of 16 GPUs may join the cluster: it waits for one */
	fx_api_body(f, "PUT", "/v1/node-pools/big", "{'gpus_per_node':16,'max_nodes':2}", 201);
	FX_WAIT(f, T, "unschedulable,schedulable", sql, fx_n(job));
	FX_WAIT(f, T, "no schedulable node has 16 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job));
	fx_api(f, "DELETE", "/v1/node-pools/big", 204);
	FX_WAIT(f, T, "unschedulable,schedulable,unschedulable", sql, fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job)),
		     "cannot run: no node can hold 16 GPUs: the largest node has 8 (n1)");
}

/*
 * A drained node still counts (it may come back), a lost one does not: the
 * job waits, cannot run while its only fitting node is lost, and waits
 * again once that node is back.
 */
TY_TEST(node_lost_then_back)
{
	static const char *const fast[] = {"--node-timeout-ms=1500", NULL};
	struct fx *f = fx_start();
	const char *sql = "SELECT coalesce(string_agg(type, ',' ORDER BY seq), '') FROM job_events"
			  " WHERE job_id = $1 AND type IN ('unschedulable', 'schedulable')";
	const char *reason = "SELECT pending_reason FROM jobs WHERE id = $1";
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 8);
	fx_sched_start(f, "s1", fast);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	fx_api(f, "POST", "/v1/nodes/n2/drain", 200);
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':8}");
	FX_WAIT(f, T, "no schedulable node has 8 GPUs", reason, fx_n(job));
	CHECK_STR_EQ(events(f, job), "");

	fx_node_beat(f, "n2", false);
	FX_WAIT(f, T, "lost", "SELECT state FROM nodes WHERE id = 'n2'");
	FX_WAIT(f, T, "cannot run: no node can hold 8 GPUs: the largest node has 4 (n1)", reason,
		fx_n(job));
	FX_WAIT(f, T, "unschedulable", sql, fx_n(job));

	fx_node_beat(f, "n2", true);
	FX_WAIT(f, T, "f", "SELECT state = 'lost' FROM nodes WHERE id = 'n2'");
	FX_WAIT(f, T, "unschedulable,schedulable", sql, fx_n(job));
	FX_WAIT(f, T, "no schedulable node has 8 GPUs", reason, fx_n(job));
}
