/*
 * Node conditions (docs/dispatch.md, "Node conditions"), the test playing
 * the executors: a fatal condition in a heartbeat drains the node once,
 * with the condition's evidence as the reason, and never again after an
 * undrain while it stays listed; a newly seen one drains it again; degraded
 * ones are listed and leave the node ready; a condition no longer listed,
 * or one of an earlier boot, is cleared and kept as history; invalid
 * entries are skipped without failing the heartbeat; an attempt a condition
 * failed is requeued without spending the job's retry budget, its node
 * blamed and excluded.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

/* 2025-11-24T16:00:00Z in ms: conditions' times are the executor's wall clock */
#define T0 1764000000000LL
#define TS0 "timestamptz '2025-11-24 16:00:00+00'"

#define XID_EV "Xid 79 on GPU 0 (GPU-0): GPU has fallen off the bus"
#define ECC_EV "uncorrectable ECC errors on GPU 1 (GPU-1): 2 volatile DBE"
#define PORT_EV "mlx5_0/1 is DOWN (was ACTIVE)"
#define LOST_EV "GPU 3 (GPU-3): nvmlDeviceGetUtilizationRates: GPU is lost"

/*
 * One condition as an executor lists it (' for "): gpu < 0, port NULL,
 * code < 0 are null.
 */
static const char *cond(const char *kind, const char *severity, int gpu, const char *port,
			int code, const char *evidence, long long first, long long last)
{
	return ty_test_strf("{'kind':'%s','severity':'%s','gpu':%s,'gpu_uuid':%s,'port':%s,"
			    "'code':%s,'evidence':'%s','first_seen':%lld,'last_seen':%lld}",
			    kind, severity, gpu >= 0 ? ty_test_strf("%d", gpu) : "null",
			    gpu >= 0 ? ty_test_strf("'GPU-%d'", gpu) : "null",
			    port ? ty_test_strf("'%s'", port) : "null",
			    code >= 0 ? ty_test_strf("%d", code) : "null", evidence, first, last);
}

/* "current|all" conditions recorded for node $1 */
#define COUNTS_SQL                                                                                 \
	"SELECT count(*) FILTER (WHERE cleared_at IS NULL) || '|' || count(*)"                    \
	" FROM node_conditions WHERE node_id = $1"

/* How many times needle occurs in the scheduler's log. */
static int log_count(struct fx *f, const char *needle)
{
	int n = 0;

	for (const char *p = fx_sched_log(f, 0); (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Let the node send a few heartbeats and the scheduler apply them. */
static void settle(struct fx *f)
{
	fx_poll(f, 800);
	fx_sync(f, T);
}

static const char *other(const char *node)
{
	return strcmp(node, "n1") ? "n1" : "n2";
}

/* The node of the job's allocation in attempt (a 1-node job), once it exists. */
static const char *node_of(struct fx *f, long long job, int attempt)
{
	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = $2",
		fx_n(job), fx_n(attempt));
	return FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1 AND attempt = $2",
		    fx_n(job), fx_n(attempt));
}

TY_TEST(fatal_condition_drains_the_node_once_and_a_new_one_again)
{
	struct fx *f = fx_start();
	const char *xid = cond("xid", "fatal", 0, NULL, 79, XID_EV, T0, T0 + 2000);
	const char *ecc = cond("ecc_dbe", "fatal", 1, NULL, -1, ECC_EV, T0 + 90000, T0 + 90000);
	const struct proto_msg *l;
	long long j1, j2;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	/* nothing runs on n1: drained at once, the condition's evidence the reason */
	fx_node_conditions(f, "n1", ty_test_strf("[%s]", xid));
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     "hardware: " XID_EV);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT kind || '|' || severity || '|' || gpu || '|' || gpu_uuid || '|'"
			  " || coalesce(port, '-') || '|' || code || '|' || evidence || '|'"
			  " || (first_seen = " TS0 ") || '|'"
			  " || (last_seen = " TS0 " + interval '2 seconds') || '|'"
			  " || (cleared_at IS NULL) || '|' || (boot_id = $1)"
			  " FROM node_conditions WHERE node_id = 'n1'",
			  fx_node_boot(f, "n1")),
		     "xid|fatal|0|GPU-0|-|79|" XID_EV "|true|true|true|true");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n2'"), "ready");
	CHECK(strstr(fx_sched_log(f, 0), "node 'n1' is drained: hardware: " XID_EV) != NULL);

	/* no new work there */
	j1 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	CHECK_STR_EQ(node_of(f, j1, 1), "n2");
	l = fx_recv(f, "n2", "launch", j1, T);
	REQUIRE(l != NULL);
	fx_run(f, "n2", l);

	/* listed again and again: one occurrence, its last_seen brought forward */
	fx_node_conditions(f, "n1",
			   ty_test_strf("[%s]", cond("xid", "fatal", 0, NULL, 79, XID_EV, T0,
						     T0 + 60000)));
	FX_WAIT(f, T, "t",
		"SELECT last_seen = " TS0 " + interval '1 minute' FROM node_conditions"
		" WHERE node_id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, "n1"), "1|1");

	/* an admin undrains it: the condition still listed does not drain it again */
	fx_api(f, "POST", "/v1/nodes/n1/undrain", 200);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	settle(f);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || '|' || coalesce(drain_reason, '-') FROM nodes"
			     " WHERE id = 'n1'"),
		     "ready|-");
	CHECK_INT_EQ(log_count(f, "node 'n1' is drained"), 1);

	/* it takes work again; a newly seen fatal condition drains it while that runs */
	j2 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	CHECK_STR_EQ(node_of(f, j2, 1), "n1");
	l = fx_recv(f, "n1", "launch", j2, T);
	REQUIRE(l != NULL);
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(j2));
	fx_node_conditions(f, "n1", ty_test_strf("[%s,%s]", xid, ecc));
	FX_WAIT(f, T, "draining", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     "hardware: " ECC_EV);
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, "n1"), "2|2");
	/* the job keeps running (its executor stops what uses the GPU); drained once it ends */
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(j2)), "running");
	fx_exit(f, "n1", l, 0, "", "");
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");

	/* the executor restarts: the old boot's conditions are cleared, the node stays drained */
	fx_node_reboot(f, "n1");
	FX_WAIT(f, T, "0|2", COUNTS_SQL, "n1");
	settle(f);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || '|' || drain_reason FROM nodes WHERE id = 'n1'"),
		     "drained|hardware: " ECC_EV);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_conditions WHERE node_id = 'n1'"
			     " AND cleared_at < recorded_at"),
		     "0");
	fx_sched_stop(f, 0);
}

TY_TEST(degraded_condition_is_listed_the_node_stays_ready_and_it_clears_when_absent)
{
	struct fx *f = fx_start();
	const char *port = cond("port_down", "degraded", -1, "mlx5_0/1", -1, PORT_EV, T0, T0);
	const char *nv = cond("nvlink_errors", "degraded", 2, NULL, -1, "NVLink 3 of GPU 2: CRC "
							"errors", T0 + 10000, T0 + 10000);
	const char *nvf = cond("nvlink_errors", "fatal", 2, NULL, -1, "NVLink 3 of GPU 2 is down",
			       T0 + 10000, T0 + 20000);
	const char *body;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");

	fx_node_conditions(f, "n1", ty_test_strf("[%s]", port));
	FX_WAIT(f, T, "1|1", COUNTS_SQL, "n1");
	settle(f);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || '|' || coalesce(drain_reason, '-') FROM nodes"
			     " WHERE id = 'n1'"),
		     "ready|-");
	CHECK_STR_EQ(FX_Q(f, "SELECT severity || '|' || port || '|' || (gpu IS NULL) || '|'"
			     " || (code IS NULL) FROM node_conditions WHERE node_id = 'n1'"),
		     "degraded|mlx5_0/1|true|true");
	body = fx_api(f, "GET", "/v1/nodes/n1", 200);
	{
		json_t *j = json_loads(body, 0, NULL);

		CHECK_INT_EQ(json_array_size(ty_jpath(j, "conditions")), 1);
		CHECK_JSTR(j, "conditions[0].kind", "port_down");
		CHECK_JSTR(j, "conditions[0].severity", "degraded");
		CHECK_JSTR(j, "conditions[0].port", "mlx5_0/1");
		CHECK_JNULL(j, "conditions[0].gpu");
		CHECK_JSTR(j, "conditions[0].first_seen", "2025-11-24T16:00:00.000Z");
		json_decref(j);
	}

	/* no longer listed (an older executor's heartbeat, without the field): cleared, kept */
	fx_node_conditions(f, "n1", NULL);
	FX_WAIT(f, T, "0|1", COUNTS_SQL, "n1");
	CHECK_STR_EQ(FX_Q(f, "SELECT cleared_at >= recorded_at FROM node_conditions"
			     " WHERE node_id = 'n1'"),
		     "t");
	body = fx_api(f, "GET", "/v1/nodes/n1", 200);
	{
		json_t *j = json_loads(body, 0, NULL);

		CHECK(json_is_array(ty_jpath(j, "conditions")) &&
		      json_array_size(ty_jpath(j, "conditions")) == 0);
		json_decref(j);
	}
	/* back, first seen anew: a new occurrence; an empty list clears it too */
	fx_node_conditions(
	    f, "n1",
	    ty_test_strf("[%s]", cond("port_down", "degraded", -1, "mlx5_0/1", -1, PORT_EV,
				      T0 + 5000, T0 + 5000)));
	FX_WAIT(f, T, "1|2", COUNTS_SQL, "n1");
	fx_node_conditions(f, "n1", "[]");
	FX_WAIT(f, T, "0|2", COUNTS_SQL, "n1");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");

	/* the same occurrence turning fatal drains the node */
	fx_node_conditions(f, "n1", ty_test_strf("[%s]", nv));
	FX_WAIT(f, T, "1|3", COUNTS_SQL, "n1");
	settle(f);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	fx_node_conditions(f, "n1", ty_test_strf("[%s]", nvf));
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     "hardware: NVLink 3 of GPU 2 is down");
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, "n1"), "1|3");
	CHECK_STR_EQ(FX_Q(f, "SELECT severity || '|' || evidence FROM node_conditions"
			     " WHERE node_id = 'n1' AND cleared_at IS NULL"),
		     "fatal|NVLink 3 of GPU 2 is down");
	fx_sched_stop(f, 0);
}

TY_TEST(invalid_condition_entries_are_skipped_and_the_rest_applied)
{
	static const char *const why[] = {
	    "skipping condition 1 of its heartbeat: condition: kind must be 1 to 32 of [a-z0-9_]",
	    "skipping condition 2 of its heartbeat: condition 'xid': evidence must be a string "
	    "of 1 to 512 bytes",
	    "skipping condition 3 of its heartbeat: condition: not an object",
	    "skipping condition 4 of its heartbeat: condition 'xid': gpu must be an index or null",
	    "skipping condition 5 of its heartbeat: condition 'xid': severity must be fatal or "
	    "degraded",
	    "skipping condition 6 of its heartbeat: condition 'xid': first_seen and last_seen "
	    "must be ms with first_seen <= last_seen",
	    "skipping condition 7 of its heartbeat: condition 'xid': gpu must be an index or null",
	    "skipping condition 8 of its heartbeat: condition 'xid': first_seen and last_seen "
	    "must be ms from 1970 to the year 9999",
	    "skipping condition 9 of its heartbeat: condition 'port_down': gpu_uuid and port must "
	    "be at most 128 bytes",
	};
	struct fx *f = fx_start();
	const char *thermal = cond("thermal_slowdown", "degraded", 0, NULL, -1,
				   "GPU 0 (GPU-0) clocks down: thermal", T0, T0);
	const char *lost = cond("gpu_lost", "fatal", 3, NULL, -1, LOST_EV, T0, T0);
	const char *seq;
	char longport[201];

	memset(longport, 'p', sizeof(longport) - 1);
	longport[sizeof(longport) - 1] = '\0';
	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	fx_sync(f, T);
	seq = FX_Q(f, "SELECT last_seq FROM nodes WHERE id = 'n1'");

	/* one valid entry among invalid ones (fatal ones among them): only it is recorded */
	fx_node_conditions(
	    f, "n1",
	    ty_test_strf("[%s,%s,%s,'oops',%s,%s,%s,%s,%s,%s]", thermal,
			 cond("Xid", "fatal", 0, NULL, 79, XID_EV, T0, T0),
			 cond("xid", "fatal", 0, NULL, 79, "", T0, T0),
			 "{'kind':'xid','severity':'fatal','gpu':-1,'evidence':'" XID_EV "',"
			 "'first_seen':1,'last_seen':1}",
			 cond("xid", "grave", 0, NULL, 79, XID_EV, T0, T0),
			 cond("xid", "fatal", 0, NULL, 79, XID_EV, T0 + 1, T0),
			 "{'kind':'xid','severity':'fatal','gpu':4294967296,'evidence':'" XID_EV
			 "','first_seen':1,'last_seen':1}",
			 cond("xid", "fatal", 0, NULL, 79, XID_EV, T0, 300000000000000LL),
			 cond("port_down", "fatal", -1, longport, -1, PORT_EV, T0, T0)));
	FX_WAIT(f, T, "1|1", COUNTS_SQL, "n1");
	settle(f);
	CHECK_STR_EQ(FX_Q(f, "SELECT kind FROM node_conditions WHERE node_id = 'n1'"),
		     "thermal_slowdown");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	/* the rest of each heartbeat was applied */
	CHECK_STR_EQ(FX_Q(f, "SELECT last_seq > $1::bigint FROM nodes WHERE id = 'n1'", seq), "t");
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		ty_test_context("%s", why[i]);
		CHECK(log_count(f, why[i]) >= 1);
	}
	CHECK(strstr(fx_sched_log(f, 0), "skipping heartbeat message") == NULL);

	/* a list that is not one says nothing: the conditions are left as they were */
	fx_node_conditions(f, "n1", "{'kind':'xid'}");
	settle(f);
	CHECK(strstr(fx_sched_log(f, 0),
		     "node 'n1': the conditions of its heartbeat are not a list: left as they were") !=
	      NULL);
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, "n1"), "1|1");

	/* a register lists the node's conditions too */
	fx_send(f, "n1", "register", 0, 0,
		ty_test_strf("{'address':'10.0.0.1','gpus':4,'labels':{'zone':'test'},"
			     "'boot_id':'%s','log_url':'http://10.0.0.1:8081','simulated':true,"
			     "'conditions':[%s,%s]}",
			     fx_node_boot(f, "n1"), thermal, lost));
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     "hardware: " LOST_EV);
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, "n1"), "2|2");
	/* and heartbeats that list none clear both (the fast path: no conditions at all) */
	fx_node_conditions(f, "n1", "[]");
	FX_WAIT(f, T, "0|2", COUNTS_SQL, "n1");
	CHECK(strstr(fx_sched_log(f, 0), "node 'n1': cleared ") != NULL);
	fx_sched_stop(f, 0);
}

/*
 * Budget 0: a failure that spent a retry would fail the job. Attempt 1 on x
 * is stopped by its executor for a fatal Xid on its GPU and reported
 * hardware with the condition.
 */
TY_TEST(attempt_a_condition_failed_is_requeued_without_spending_its_budget)
{
	static const char *const args[] = {"--retry-backoff-seconds=0", NULL};
	struct fx *f = fx_start();
	const char *xid = cond("xid", "fatal", 0, NULL, 79, XID_EV, T0, T0);
	const struct proto_msg *l1, *l2;
	const char *x, *y;
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4},'retry':{'system':0}");
	x = node_of(f, job, 1);
	y = other(x);
	l1 = fx_recv(f, x, "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, x, l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	/*
	 * the exit comes first; the heartbeat listing the condition later. The
	 * node's heartbeats pause meanwhile: one without the condition (sent
	 * before the executor saw it) would clear it, as a heartbeat of a node
	 * whose condition is gone does.
	 */
	fx_node_runs(f, x, job, 1, false);
	fx_node_beat(f, x, false);
	settle(f);
	fx_send(f, x, "attempt_exited", job, 1,
		ty_test_strf("{'exit_code':-1,'failure_class':'hardware','message':'stopped: "
			     "fatal xid condition on GPU 0','evidence':'" XID_EV "',"
			     "'evidence_source':'executor','condition':%s}",
			     xid));
	CHECK_STR_EQ(node_of(f, job, 2), y);
	CHECK_STR_EQ(FX_Q(f, "SELECT retries::text || '|' || array_to_string(excluded_nodes, ',')"
			     " FROM jobs WHERE id = $1",
			     fx_n(job)),
		     ty_test_strf("{}|%s", x));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT failure_class || '|' || blamed_node || '|' || evidence || '|'"
			  " || message FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     ty_test_strf("hardware|%s|" XID_EV "|stopped: fatal xid condition on GPU 0",
				  x));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message || '|' || (data->>'evidence') FROM job_events"
			  " WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     ty_test_strf("attempt 1 failed: " XID_EV " (hardware, node %s); requeued for "
				  "attempt 2 (no retry spent: a health condition of node %s), node "
				  "%s excluded; expedited: first in its team's order|" XID_EV,
				  x, x, x));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT node_id || '|' || failure_class || '|' || evidence || '|'"
			  " || evidence_source FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("%s|hardware|" XID_EV "|executor", x));
	/* the attempt's condition is the node's: drained before its heartbeat lists it */
	CHECK_STR_EQ(FX_Q(f, "SELECT state || '|' || drain_reason FROM nodes WHERE id = $1", x),
		     "drained|hardware: " XID_EV);
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, x), "1|1");
	fx_node_conditions(f, x, ty_test_strf("[%s]", xid));
	fx_node_beat(f, x, true);
	settle(f);
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, x), "1|1");
	CHECK_INT_EQ(log_count(f, ty_test_strf("node '%s' is drained", x)), 1);

	/* the retry runs elsewhere and succeeds; the budget is still whole */
	l2 = fx_recv(f, y, "launch", job, T);
	REQUIRE(l2 != NULL);
	CHECK_INT_EQ(l2->attempt, 2);
	fx_run(f, y, l2);
	fx_exit(f, y, l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT retries::text FROM jobs WHERE id = $1", fx_n(job)), "{}");
	fx_sched_stop(f, 0);
}

/* The attempt_exited is lost: the heartbeat's finished entry carries the condition. */
TY_TEST(finished_entry_with_a_condition_is_applied_late_the_same_way)
{
	static const char *const args[] = {"--retry-backoff-seconds=0", NULL};
	struct fx *f = fx_start();
	const char *ecc = cond("ecc_dbe", "fatal", 1, NULL, -1, ECC_EV, T0, T0);
	const struct proto_msg *l1;
	const char *x;
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4},'retry':{'system':0}");
	x = node_of(f, job, 1);
	l1 = fx_recv(f, x, "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, x, l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_node_runs(f, x, job, 1, false);
	fx_node_finished_cond(f, x, job, 1, -1, "hardware", "stopped: fatal ecc_dbe condition on "
							  "GPU 1",
			      ECC_EV, "executor", ecc);
	CHECK_STR_EQ(node_of(f, job, 2), other(x));
	CHECK_STR_EQ(FX_Q(f, "SELECT retries::text FROM jobs WHERE id = $1", fx_n(job)), "{}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     ty_test_strf("attempt 1 failed: " ECC_EV " (hardware, node %s); requeued for "
				  "attempt 2 (no retry spent: a health condition of node %s), node "
				  "%s excluded; expedited: first in its team's order",
				  x, x, x));
	CHECK_STR_EQ(FX_Q(f, "SELECT evidence || '|' || evidence_source FROM node_failures"
			     " WHERE job_id = $1",
			     fx_n(job)),
		     ECC_EV "|executor");
	FX_WAIT(f, T, "drained|hardware: " ECC_EV,
		"SELECT state || '|' || drain_reason FROM nodes WHERE id = $1", x);
	fx_sched_stop(f, 0);
}

/* A condition that is none does not make a hardware failure free. */
TY_TEST(hardware_failure_with_an_invalid_condition_spends_the_budget)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1;
	const char *x;
	long long job;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4},'retry':{'system':0}");
	x = node_of(f, job, 1);
	l1 = fx_recv(f, x, "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, x, l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_node_runs(f, x, job, 1, false);
	fx_send(f, x, "attempt_exited", job, 1,
		"{'exit_code':-1,'failure_class':'hardware','message':'rank 0: Xid 79',"
		"'evidence':'NVRM: Xid (PCI:0000:3b:00): 79','evidence_source':'log',"
		"'condition':{'kind':'xid','severity':'fatal','first_seen':1,'last_seen':1}}");
	FX_WAIT(f, T, "failed hardware",
		"SELECT state || ' ' || failure_class FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT evidence || '|' || evidence_source FROM node_failures"
			     " WHERE job_id = $1",
			     fx_n(job)),
		     "NVRM: Xid (PCI:0000:3b:00): 79|log");
	CHECK_STR_EQ(FX_Q(f, COUNTS_SQL, x), "0|0");
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(drain_reason, '-') FROM nodes WHERE id = $1", x),
		     "-");
	CHECK(strstr(fx_sched_log(f, 0), "a condition that is none (condition 'xid': evidence "
					 "must be a string of 1 to 512 bytes)") != NULL);
	fx_sched_stop(f, 0);
}
