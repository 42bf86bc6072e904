/*
 * CPUs and memory through the daemon, the test playing the executors
 * (docs/scheduling.md, "CPUs and memory"): nodes report what they can give
 * in their register, the scheduler never places more on a node, pending
 * reasons name CPUs or memory, and teams' CPU caps hold for GPU-less jobs.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define T 15000

static const char *reason_sql = "SELECT coalesce(pending_reason, '-') FROM jobs WHERE id = $1";

/* An integer at path of an admin GET's JSON answer. */
static long long api_int(struct fx *f, const char *url, const char *path)
{
	json_t *j = json_loads(fx_api(f, "GET", url, 200), 0, NULL);
	long long v;

	REQUIRE(j != NULL);
	v = ty_jint(j, path);
	json_decref(j);
	return v;
}

static void ready(struct fx *f, int n)
{
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, fx_n(n), "SELECT count(*) FROM nodes WHERE state = 'ready'");
}

TY_TEST(register_fields_are_stored_and_absent_ones_are_null)
{
	struct fx *f = fx_start();

	fx_node_res(f, "n1", 2, 16, 65536);
	fx_node_res(f, "n2", 2, 8, 0); /* CPUs only */
	fx_node(f, "n3", 2);	       /* an executor from before: neither */
	ready(f, 3);
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(id || ':' || coalesce(cpus::text, '-') || '/' ||"
			     " coalesce(memory_mb::text, '-'), ' ' ORDER BY id) FROM nodes"),
		     "n1:16/65536 n2:8/- n3:-/-");
	CHECK_INT_EQ(api_int(f, "/v1/nodes/n1", "cpus_total"), 16);
	CHECK_INT_EQ(api_int(f, "/v1/nodes/n1", "memory_mb_total"), 65536);
}

/* A register's cpus / memory_mb that are not positive integers are stored as not reported. */
TY_TEST(bad_register_fields_are_not_reported_and_a_later_register_lifts_the_limit)
{
	static const struct {
		const char *fields, *want;
	} rows[] = {
	    {",'cpus':'8','memory_mb':-5", "-/-"},
	    {",'cpus':0,'memory_mb':0", "-/-"},
	    {",'cpus':1.5,'memory_mb':null", "-/-"},
	    {",'cpus':4,'memory_mb':2048", "4/2048"},
	    {"", "-/-"}, /* an older executor's register after a newer one's: limits lifted */
	    {",'cpus':9999999999999,'memory_mb':2048", "2147483647/2048"},
	};
	struct fx *f = fx_start();

	fx_sched_start(f, "s1", NULL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].fields);
		fx_send(f, "r1", "register", 0, 0,
			ty_test_strf("{'address':'10.0.9.1','gpus':1,'labels':{},'boot_id':'b1',"
				     "'log_url':'http://10.0.9.1:8081'%s}",
				     rows[i].fields));
		fx_sync(f, T);
		CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(cpus::text, '-') || '/' ||"
				     " coalesce(memory_mb::text, '-') FROM nodes WHERE id = 'r1'"),
			     rows[i].want);
	}
}

TY_TEST(a_cpu_only_job_larger_than_every_node_waits_naming_cpus)
{
	struct fx *f = fx_start();
	long long job, mem, fits;

	fx_node_res(f, "n1", 4, 2, 4096);
	fx_node_res(f, "n2", 0, 4, 4096);
	ready(f, 2);
	/* the API would refuse them (docs/api.md, "Unschedulable"): queued anyway */
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':64},"
			   "'queue_if_unschedulable':true");
	mem = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'memory_mb_per_node':8192},"
			   "'queue_if_unschedulable':true");
	fits = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':4}");
	FX_WAIT(f, T, "cannot run: no node can hold 64 CPUs: the most a node has is 4 (n2)",
		reason_sql, fx_n(job));
	FX_WAIT(f, T,
		"cannot run: no node can hold 8192 MiB of memory: the most a node has is 4096 (n2, "
		"n1)",
		reason_sql, fx_n(mem));
	/* one that fits goes to the node with the CPUs */
	CHECK(fx_recv(f, "n2", "launch", fits, T) != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "pending");
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0) + fx_count(f, "n2", "launch", job, 0), 0);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", mem, 0) + fx_count(f, "n2", "launch", mem, 0), 0);
	/* jobctl status and the queue show the same reason */
	CHECK(strstr(fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld", job), 200),
		     "cannot run: no node can hold 64 CPUs") != NULL);
	CHECK(strstr(fx_api(f, "GET", "/v1/queue", 200), "cannot run: no node can hold 64 CPUs") !=
	      NULL);
}

TY_TEST(two_jobs_that_fit_alone_are_not_co_placed)
{
	struct fx *f = fx_start();
	const struct proto_msg *la;
	long long a, b;

	fx_node_res(f, "n1", 4, 4, 65536);
	ready(f, 1);
	a = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1,'cpus_per_node':3}");
	REQUIRE((la = fx_recv(f, "n1", "launch", a, T)) != NULL);
	fx_run(f, "n1", la);
	b = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1,'cpus_per_node':3}");
	FX_WAIT(f, T, "no node has 3 free CPUs where GPUs are free (largest free now: 1)",
		reason_sql, fx_n(b));
	CHECK_INT_EQ(fx_count(f, "n1", "launch", b, 0), 0);
	/* the API's node view agrees with the scheduler */
	CHECK_INT_EQ(api_int(f, "/v1/nodes/n1", "cpus_free"), 1);
	CHECK_INT_EQ(api_int(f, "/v1/nodes/n1", "gpus_free"), 3);

	/* a second node: b goes there */
	fx_node_res(f, "n2", 4, 4, 65536);
	CHECK(fx_recv(f, "n2", "launch", b, T) != NULL);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", b, 0), 0);
}

TY_TEST(two_jobs_that_fit_alone_in_memory_wait_for_each_other)
{
	struct fx *f = fx_start();
	const struct proto_msg *lc;
	long long c, d;

	fx_node_res(f, "n1", 0, 8, 8192);
	ready(f, 1);
	c = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'memory_mb_per_node':6000}");
	REQUIRE((lc = fx_recv(f, "n1", "launch", c, T)) != NULL);
	fx_run(f, "n1", lc);
	d = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'memory_mb_per_node':6000}");
	FX_WAIT(f, T, "no node has 6000 free MiB of memory (largest free now: 2192)", reason_sql,
		fx_n(d));
	CHECK_INT_EQ(fx_count(f, "n1", "launch", d, 0), 0);
	CHECK_INT_EQ(api_int(f, "/v1/nodes/n1", "memory_mb_free"), 2192);
	/* c ends: its memory is free again and d starts */
	fx_exit(f, "n1", lc, 0, NULL, NULL);
	CHECK(fx_recv(f, "n1", "launch", d, T) != NULL);
}

TY_TEST(nodes_that_report_nothing_are_not_limited)
{
	struct fx *f = fx_start();
	long long job;

	fx_node(f, "old", 1);
	ready(f, 1);
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1,'cpus_per_node':4096,"
			   "'memory_mb_per_node':16777216}");
	CHECK(fx_recv(f, "old", "launch", job, T) != NULL);
}

TY_TEST(a_team_cpu_quota_holds_gpu_less_jobs_included)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "cpuq", 0, -1, NULL);
	const struct proto_msg *l1 = NULL, *l2 = NULL;
	long long j1, j2, j3, other;

	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team), "{'max_cpus':4}", 200);
	fx_node_res(f, "n1", 0, 64, 0);
	ready(f, 1);
	j1 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':2}");
	REQUIRE((l1 = fx_recv(f, "n1", "launch", j1, T)) != NULL);
	fx_run(f, "n1", l1);
	j2 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':2}");
	REQUIRE((l2 = fx_recv(f, "n1", "launch", j2, T)) != NULL);
	fx_run(f, "n1", l2);
	j3 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':2}");
	FX_WAIT(f, T,
		ty_test_strf("team %s at its CPU quota (4 of 4 CPUs in use, job needs 2)", team),
		reason_sql, fx_n(j3));
	/* another team is not held back by it */
	other = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':8}");
	CHECK(fx_recv(f, "n1", "launch", other, T) != NULL);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", j3, 0), 0);
	CHECK_INT_EQ(api_int(f, ty_test_strf("/v1/teams/%s", team), "usage.cpus_in_use"), 4);
	/* one ends: the third starts */
	fx_exit(f, "n1", l1, 0, NULL, NULL);
	CHECK(fx_recv(f, "n1", "launch", j3, T) != NULL);
	/* lifting the cap is seen without a restart */
	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team), "{'max_cpus':null}", 200);
	j1 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':0,'cpus_per_node':8}");
	CHECK(fx_recv(f, "n1", "launch", j1, T) != NULL);
}

TY_TEST(a_team_memory_quota_names_memory)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "memq", 2, -1, NULL);
	const struct proto_msg *l1;
	long long j1, j2;

	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team), "{'max_memory_mb':3000}",
		    200);
	fx_node_res(f, "n1", 2, 0, 0);
	ready(f, 1);
	j1 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':1,"
				   "'memory_mb_per_node':2048}");
	REQUIRE((l1 = fx_recv(f, "n1", "launch", j1, T)) != NULL);
	fx_run(f, "n1", l1);
	j2 = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':1}");
	FX_WAIT(f, T,
		ty_test_strf("team %s at its memory quota (2048 of 3000 MiB in use, job needs "
			     "1024)",
			     team),
		reason_sql, fx_n(j2));
	CHECK_INT_EQ(fx_count(f, "n1", "launch", j2, 0), 0);
}
