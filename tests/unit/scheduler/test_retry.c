/* scheduler/core/retry.c: the retry policy's verdicts, budgets and backoff. */
#include "core/retry.h"
#include "ty_test.h"

static struct sched_retry_out decide(const char *cls, bool spend, bool cancel, int used_user,
				     int used_system)
{
	struct sched_retry_out out;

	sched_retry_decide(&out, &(struct sched_retry_in){
				     .cls = cls,
				     .spend = spend,
				     .cancel_requested = cancel,
				     .limit_user = 1,
				     .limit_system = 3,
				     .used_user = used_user,
				     .used_system = used_system,
				     .backoff_base_s = 10,
				     .backoff_max_s = 300,
				 });
	return out;
}

TY_TEST(each_class_spends_its_own_budget)
{
	static const struct {
		const char *cls;
		int used_user, used_system;
		enum sched_retry_verdict verdict;
		enum proto_budget budget;
		int64_t backoff;
	} rows[] = {
	    /* user: limit 1 */
	    {"user", 0, 0, SCHED_RETRY_REQUEUE, PROTO_BUDGET_USER, 10},
	    {"oom", 1, 0, SCHED_RETRY_FAIL, PROTO_BUDGET_USER, 0},
	    /* system: limit 3; a user retry spent does not count */
	    {"system", 1, 2, SCHED_RETRY_REQUEUE, PROTO_BUDGET_SYSTEM, 40},
	    {"hardware", 0, 3, SCHED_RETRY_FAIL, PROTO_BUDGET_SYSTEM, 0},
	    {"node_lost", 0, 0, SCHED_RETRY_REQUEUE, PROTO_BUDGET_SYSTEM, 10},
	    /* no budget: a timeout is final, a preemption always comes back */
	    {"timeout", 0, 0, SCHED_RETRY_FAIL, PROTO_BUDGET_NONE, 0},
	    {"preempted", 9, 9, SCHED_RETRY_REQUEUE, PROTO_BUDGET_NONE, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct sched_retry_out o =
		    decide(rows[i].cls, true, false, rows[i].used_user, rows[i].used_system);

		ty_test_context("%s", rows[i].cls);
		CHECK_INT_EQ(o.verdict, rows[i].verdict);
		CHECK_INT_EQ(o.budget, rows[i].budget);
		CHECK_INT_EQ(o.backoff_s, rows[i].backoff);
	}
}

TY_TEST(a_free_requeue_spends_nothing_and_waits_for_nothing)
{
	struct sched_retry_out o = decide("system", false, false, 0, 3);

	CHECK_INT_EQ(o.verdict, SCHED_RETRY_REQUEUE);
	CHECK_INT_EQ(o.budget, PROTO_BUDGET_NONE);
	CHECK_INT_EQ(o.backoff_s, 0);
}

TY_TEST(a_requested_cancel_ends_the_job_whatever_is_left)
{
	CHECK_INT_EQ(decide("system", true, true, 0, 0).verdict, SCHED_RETRY_END);
	CHECK_INT_EQ(decide("preempted", true, true, 0, 0).verdict, SCHED_RETRY_END);
	/* the budget is still named (for the event), its limit and use too */
	CHECK_INT_EQ(decide("user", true, true, 1, 0).budget, PROTO_BUDGET_USER);
	CHECK_INT_EQ(decide("user", true, true, 1, 0).used, 1);
}

TY_TEST(backoff_doubles_up_to_its_cap)
{
	CHECK_INT_EQ(sched_backoff_s(10, 300, 1), 10);
	CHECK_INT_EQ(sched_backoff_s(10, 300, 2), 20);
	CHECK_INT_EQ(sched_backoff_s(10, 300, 6), 300);
	CHECK_INT_EQ(sched_backoff_s(10, 300, 60), 300);
	CHECK_INT_EQ(sched_backoff_s(0, 300, 3), 0);
	CHECK_INT_EQ(sched_backoff_s(10, 300, 0), 0);
}
