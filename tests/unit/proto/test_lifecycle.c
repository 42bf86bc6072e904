/* proto/lifecycle.c: names both ways, terminal and active states, budgets and blame. */
#include "lifecycle.h"
#include "ty_test.h"

TY_TEST(names_round_trip)
{
	for (int i = 0; i < PROTO_JOB_STATE_COUNT; i++)
		CHECK_INT_EQ(proto_job_state_parse(proto_job_state_name(i)), i);
	for (int i = 0; i < PROTO_ATTEMPT_STATE_COUNT; i++)
		CHECK_INT_EQ(proto_attempt_state_parse(proto_attempt_state_name(i)), i);
	for (int i = 0; i < PROTO_NODE_STATE_COUNT; i++)
		CHECK_INT_EQ(proto_node_state_parse(proto_node_state_name(i)), i);
	for (int i = 0; i < PROTO_FAILURE_CLASS_COUNT; i++)
		CHECK_INT_EQ(proto_failure_class_parse(proto_failure_class_name(i)), i);
	CHECK_INT_EQ(proto_job_state_parse("done"), PROTO_JOB_STATE_COUNT);
	CHECK_INT_EQ(proto_failure_class_parse(NULL), PROTO_FAILURE_CLASS_COUNT);
	CHECK(proto_job_state_name(PROTO_JOB_STATE_COUNT) == NULL);
}

TY_TEST(terminal_jobs_and_active_attempts)
{
	static const char *const terminal[] = {"succeeded", "failed", "cancelled", "stopped"};
	static const char *const live[] = {"pending", "scheduled", "starting", "running",
					   "preempting"};

	for (int i = 0; i < 4; i++)
		CHECK(proto_job_state_terminal(terminal[i]));
	for (int i = 0; i < 5; i++)
		CHECK(!proto_job_state_terminal(live[i]));
	CHECK(!proto_job_state_terminal("unknown"));
	CHECK(proto_attempt_state_active("scheduled") && proto_attempt_state_active("running"));
	CHECK(!proto_attempt_state_active("stopping") && !proto_attempt_state_active("failed"));
}

TY_TEST(budgets_and_blame_per_class)
{
	static const struct {
		const char *cls;
		enum proto_budget budget;
		bool blames;
	} rows[] = {
	    {"user", PROTO_BUDGET_USER, false},	       {"oom", PROTO_BUDGET_USER, false},
	    {"system", PROTO_BUDGET_SYSTEM, true},     {"hardware", PROTO_BUDGET_SYSTEM, true},
	    {"hang", PROTO_BUDGET_SYSTEM, true},       {"node_lost", PROTO_BUDGET_SYSTEM, true},
	    {"start_timeout", PROTO_BUDGET_SYSTEM, true}, {"cancelled", PROTO_BUDGET_SYSTEM, false},
	    {"preempted", PROTO_BUDGET_NONE, false},   {"timeout", PROTO_BUDGET_NONE, false},
	    {"bogus", PROTO_BUDGET_NONE, false},
	};

	CHECK_STR_EQ(proto_budget_name(PROTO_BUDGET_USER), "user");
	CHECK_STR_EQ(proto_budget_name(PROTO_BUDGET_SYSTEM), "system");
	CHECK(proto_budget_name(PROTO_BUDGET_NONE) == NULL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].cls);
		CHECK_INT_EQ(proto_failure_budget(rows[i].cls), rows[i].budget);
		CHECK_INT_EQ(proto_failure_blames(rows[i].cls), rows[i].blames);
	}
}

/*
 * The one list of the infrastructure's classes: expedited requeue, the
 * ledger's lost_infra and fair share's refund all read it. hang has its own
 * goodput category; a node that cannot start a job in time is the node's.
 */
TY_TEST(infrastructure_classes)
{
	static const struct {
		const char *cls;
		bool infra;
	} rows[] = {
	    {"system", true},	  {"hardware", true},  {"node_lost", true}, {"start_timeout", true},
	    {"user", false},	  {"oom", false},      {"hang", false},	    {"preempted", false},
	    {"timeout", false},	  {"cancelled", false}, {"bogus", false},   {"", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].cls);
		CHECK_INT_EQ(proto_failure_infrastructure(rows[i].cls), rows[i].infra);
	}
	CHECK(!proto_failure_infrastructure(NULL));
}
