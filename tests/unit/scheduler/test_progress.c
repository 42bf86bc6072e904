/* scheduler/progress.c: the gang's median step rate and the straggler judgement. */
#include "scheduler.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(the_gangs_median_is_the_upper_one_of_known_rates)
{
	static const struct {
		double v[6];
		int n;
		double want;
	} rows[] = {
	    {{2.0, 0.4}, 2, 2.0},	      /* two ranks: the faster */
	    {{1.0, 3.0, 2.0}, 3, 2.0},	      /* odd: the middle */
	    {{4, 1, 3, 2}, 4, 3.0},	      /* even: the upper middle */
	    {{-1, 2.0, -1, 0.5}, 4, 2.0},     /* unknown rates are left out */
	    {{-1, 2.0}, 2, -1},		      /* fewer than two known */
	    {{0}, 0, -1},		      /* nothing */
	    {{0, 0, 0}, 3, -1},		      /* a stalled gang: the hang timeout's */
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu", i);
		CHECK(sched_gang_median(rows[i].v, rows[i].n) == rows[i].want);
	}
}

static json_t *j(const char *text)
{
	json_t *v = json_loads(ty_test_jf("%s", text), 0, NULL);

	REQUIRE(v != NULL);
	return v;
}

TY_TEST(a_rank_below_the_median_for_k_reports_in_a_row_is_a_straggler_once)
{
	json_t *gang = j("[{'node':'n1','progress':[{'rank':0,'step':40,'steps_per_second':2.0,"
			 "'step_at':1,'below':0}]},"
			 "{'node':'n2','progress':[{'rank':1,'step':8,'steps_per_second':0.4,"
			 "'step_at':1,'below':1}]}]");
	json_t *prev = json_object_get(json_array_get(gang, 1), "progress"); /* n2's */
	json_t *mine;
	size_t flagged[4];
	double median;

	/* n2's second report below 50 % of 2.0: counted on from its previous one */
	mine = j("[{'rank':1,'step':9,'steps_per_second':0.4,'step_at':2}]");
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 3), 0);
	CHECK(median == 2.0);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(mine, 0), "below")), 2);
	/* the third: a straggler */
	json_object_set_new(json_array_get(prev, 0), "below", json_integer(2));
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 3), 1);
	CHECK_INT_EQ(flagged[0], 0);
	/* the fourth: still below, not flagged again */
	json_object_set_new(json_array_get(prev, 0), "below", json_integer(3));
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 3), 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(mine, 0), "below")), 4);
	json_decref(mine);

	/* back above the line: the count starts again */
	mine = j("[{'rank':1,'step':30,'steps_per_second':1.5,'step_at':3}]");
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 3), 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(mine, 0), "below")), 0);
	json_decref(mine);

	/* an unknown rate is never below; off (0 %) judges nothing */
	mine = j("[{'rank':1,'step':9,'steps_per_second':null,'step_at':2}]");
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 3), 0);
	CHECK(median == -1); /* only n1's rate is known: no median */
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(mine, 0), "below")), 0);
	json_decref(mine);
	mine = j("[{'rank':1,'step':9,'steps_per_second':0.1,'step_at':2}]");
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 0, 3), 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(mine, 0), "below")), 0);
	json_decref(mine);

	/* the node's own stored entry is replaced by its new report, not counted twice */
	mine = j("[{'rank':1,'step':9,'steps_per_second':0.4,'step_at':2},"
		 "{'rank':2,'step':9,'steps_per_second':0.4,'step_at':2}]");
	CHECK_INT_EQ(sched_straggler_judge(flagged, 4, &median, mine, prev, gang, "n2", 50, 1), 0);
	CHECK(median == 0.4); /* upper median of 2.0, 0.4, 0.4 */
	json_decref(mine);
	json_decref(gang);
}

TY_TEST(the_gangs_straggler_share_is_its_slowest_judged_straggler_now)
{
	/* n1: rank 0 at the median; n2 (stored): rank 1 judged 3 times, rank 2 only once */
	json_t *gang = j("[{'node':'n1','progress':[{'rank':0,'step':40,'steps_per_second':2.0,"
			 "'step_at':1,'below':0}]},"
			 "{'node':'n2','progress':[{'rank':1,'step':8,'steps_per_second':1.0,"
			 "'step_at':1,'below':3},{'rank':2,'step':8,'steps_per_second':0.2,"
			 "'step_at':1,'below':1}]}]");
	json_t *mine;

	/* n1 reports: n2's judged rank 1 costs half; rank 2 is not a straggler yet */
	mine = j("[{'rank':0,'step':41,'steps_per_second':2.0,'step_at':2,'below':0}]");
	CHECK(sched_straggler_share(mine, gang, "n1", 2.0, 3) == 0.5);
	/* the reporting node's own fresh entries count, its stored ones do not */
	json_decref(mine);
	mine = j("[{'rank':1,'step':9,'steps_per_second':1.5,'step_at':2,'below':0},"
		 "{'rank':2,'step':9,'steps_per_second':0.5,'step_at':2,'below':3}]");
	CHECK(sched_straggler_share(mine, gang, "n2", 2.0, 3) == 0.75);
	/* recovered: nothing */
	json_decref(mine);
	mine = j("[{'rank':1,'step':9,'steps_per_second':1.9,'step_at':2,'below':0},"
		 "{'rank':2,'step':9,'steps_per_second':1.9,'step_at':2,'below':0}]");
	CHECK(sched_straggler_share(mine, gang, "n2", 2.0, 3) == 0);
	/* no median, or judging off (0 reports): nothing */
	CHECK(sched_straggler_share(mine, gang, "n1", -1, 3) == 0);
	CHECK(sched_straggler_share(mine, gang, "n1", 2.0, 0) == 0);
	json_decref(mine);
	json_decref(gang);
}
