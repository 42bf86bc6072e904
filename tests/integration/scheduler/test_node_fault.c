/*
 * The expected inventory (docs/dispatch.md, "Node states"), the test
 * playing the executors: a node whose register names a fault (fewer GPUs
 * than it expects, a GPU NVML cannot read) gets no new work, keeps what
 * runs there and any drain an admin made, shows as not_ready; a register
 * without a fault makes it schedulable again.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

#define LOST "found 7 of 8 expected GPUs; GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15)"
#define WITH_FAULT "'expected_gpus':8,'fault':'" LOST "'"

static const char *jstr_of(const char *text, const char *path)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *v = ty_jstr(j, path);
	const char *out = ty_test_strf("%s", v ? v : "(none)");

	json_decref(j);
	return out;
}

/* "null", a number or a string's text at path of a JSON text. */
static const char *jval_of(const char *text, const char *path)
{
	json_t *j = json_loads(text, 0, NULL);
	const json_t *v = ty_jpath(j, path);
	const char *out = !v		       ? "(none)"
			  : json_is_null(v)    ? "null"
			  : json_is_string(v)  ? ty_test_strf("%s", json_string_value(v))
			  : json_is_integer(v) ? ty_test_strf("%lld", (long long)json_integer_value(v))
					       : "(other)";

	json_decref(j);
	return out;
}

/* Whether the API lists node under ?state=state. */
static bool listed_as(struct fx *f, const char *node, const char *state)
{
	json_t *j = json_loads(fx_api(f, "GET", ty_test_strf("/v1/nodes?state=%s", state), 200),
			       0, NULL);
	const json_t *it;
	bool found = false;
	size_t i;

	json_array_foreach(ty_jpath(j, "items"), i, it)
		found |= !strcmp(json_string_value(json_object_get(it, "id")), node);
	json_decref(j);
	return found;
}

TY_TEST(a_node_with_a_fault_gets_no_new_work_until_it_registers_without_one)
{
	struct fx *f = fx_start();
	const struct proto_msg *m;
	const char *body;
	long long job;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	fx_node_register(f, "n1", 7, WITH_FAULT);
	FX_WAIT(f, T, LOST, "SELECT fault FROM nodes WHERE id = 'n1'");
	/* the state is left alone: the fault is beside it */
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || expected_gpus || ' ' || gpus FROM nodes"
			     " WHERE id = 'n1'"),
		     "ready 8 7");
	body = fx_api(f, "GET", "/v1/nodes/n1", 200);
	CHECK_STR_EQ(jstr_of(body, "state"), "not_ready");
	CHECK_STR_EQ(jstr_of(body, "fault"), LOST);
	CHECK_STR_EQ(jval_of(body, "expected_gpus"), "8");
	CHECK(listed_as(f, "n1", "not_ready"));
	CHECK(!listed_as(f, "n1", "ready"));

	/* nothing is placed there, and the job says why */
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "no schedulable node has 2 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job));
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 0);
	CHECK(strstr(fx_sched_log(f, 0), "node 'n1' registered with a fault: " LOST
					 "; no new work is placed there") != NULL);

	/* the same fault again (every --register-ms) changes nothing */
	fx_node_register(f, "n1", 7, WITH_FAULT);
	fx_sync(f, T);
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 0);
	CHECK_STR_EQ(FX_Q(f, "SELECT fault FROM nodes WHERE id = 'n1'"), LOST);

	/* a register without a fault (the GPU is back): schedulable at once */
	fx_node_register(f, "n1", 8, "'expected_gpus':8,'fault':null");
	m = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(m != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(fault, '-') || ' ' || expected_gpus FROM nodes"
			     " WHERE id = 'n1'"),
		     "- 8");
	body = fx_api(f, "GET", "/v1/nodes/n1", 200);
	CHECK_STR_EQ(jstr_of(body, "state"), "ready");
	CHECK_STR_EQ(jval_of(body, "fault"), "null");
	CHECK(strstr(fx_sched_log(f, 0),
		     "node 'n1' registered without its fault (" LOST "): it takes new work again") !=
	      NULL);
	/* an executor without an expectation sends neither field: both NULL */
	fx_node_register(f, "n1", 8, NULL);
	FX_WAIT(f, T, "t", "SELECT expected_gpus IS NULL AND fault IS NULL FROM nodes"
			   " WHERE id = 'n1'");
	fx_sched_stop(f, 0);
}

/*
 * A fault stops new work only: the attempt running there goes on, and an
 * admin's drain (its state and reason) is neither changed by a fault nor
 * lifted when the fault clears; an undrain leaves the fault.
 */
TY_TEST(a_fault_leaves_running_work_and_an_admins_drain_alone)
{
	struct fx *f = fx_start();
	const struct proto_msg *l, *m;
	const char *body;
	long long run, late;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	run = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l = fx_recv(f, "n1", "launch", run, T);
	REQUIRE(l != NULL);
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(run));

	fx_node_register(f, "n1", 7, WITH_FAULT);
	FX_WAIT(f, T, LOST, "SELECT fault FROM nodes WHERE id = 'n1'");
	late = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "no schedulable node has 2 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(late));
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "kill", run, 0), 0);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(run)), "running");

	/* an admin drains it: draining (work left), the fault kept beside */
	body = fx_api(f, "POST", "/v1/nodes/n1/drain", 200);
	CHECK_STR_EQ(jstr_of(body, "state"), "draining");
	CHECK_STR_EQ(jstr_of(body, "drain_reason"), "drained by an admin");
	CHECK_STR_EQ(jstr_of(body, "fault"), LOST);
	/* the fault clears: still draining, the admin's reason untouched, nothing placed */
	fx_node_register(f, "n1", 8, "'expected_gpus':8");
	FX_WAIT(f, T, "t", "SELECT fault IS NULL FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ': ' || drain_reason FROM nodes WHERE id = 'n1'"),
		     "draining: drained by an admin");
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", late, 0), 0);
	/* and a fault again, then the undrain: ready in the table, not_ready as shown */
	fx_node_register(f, "n1", 7, WITH_FAULT);
	FX_WAIT(f, T, LOST, "SELECT fault FROM nodes WHERE id = 'n1'");
	body = fx_api(f, "POST", "/v1/nodes/n1/undrain", 200);
	CHECK_STR_EQ(jstr_of(body, "state"), "not_ready");
	CHECK_STR_EQ(jval_of(body, "drain_reason"), "null");
	CHECK_STR_EQ(jstr_of(body, "fault"), LOST);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", late, 0), 0);
	FX_WAIT(f, T, "no schedulable node has 2 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(late));
	/* the running job ends as it would have */
	fx_exit(f, "n1", l, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(run));
	fx_node_register(f, "n1", 8, "'expected_gpus':8,'fault':null");
	m = fx_recv(f, "n1", "launch", late, T);
	REQUIRE(m != NULL);
	fx_sched_stop(f, 0);
}

/*
 * What the scheduler takes from register: a fault only as a non-empty
 * string, expected_gpus only as a positive integer; anything else is
 * none, and the node takes work.
 */
TY_TEST(malformed_fault_fields_are_no_fault)
{
	static const char *const rows[] = {
	    "'fault':'','expected_gpus':8",
	    "'fault':42,'expected_gpus':-3",
	    "'fault':{'why':'x'},'expected_gpus':'8'",
	    "'fault':['x'],'expected_gpus':0",
	};
	struct fx *f = fx_start();

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct proto_msg *m;
		long long job;

		ty_test_context("%s", rows[i]);
		fx_node_register(f, "n1", 8, WITH_FAULT);
		FX_WAIT(f, T, LOST, "SELECT fault FROM nodes WHERE id = 'n1'");
		fx_node_register(f, "n1", 8, rows[i]);
		FX_WAIT(f, T, "t", "SELECT fault IS NULL FROM nodes WHERE id = 'n1'");
		CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(expected_gpus::text, '-') FROM nodes"
				     " WHERE id = 'n1'"),
			     i == 0 ? "8" : "-");
		job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
		m = fx_recv(f, "n1", "launch", job, T);
		REQUIRE(m != NULL);
		fx_cancel(f, job);
	}
	ty_test_context(NULL);
	fx_sched_stop(f, 0);
}
